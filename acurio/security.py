"""Sign-in throttling hooks (django-axes) and the password-reset switch.

django-axes counts failed sign-ins per username and client address (see the settings). These
functions are its configured callables: ``client_ip`` tells it who the client is behind the
configured number of proxies, ``lockout_response`` shows a locked-out user the sign-in page
they used (the site's or the admin's) with one clear message and HTTP 429. ``features`` and
``only_with_email`` offer password reset only when an email backend is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as the nearest trusted proxy saw it (REMOTE_ADDR without proxies).

    Each proxy appends the address it received the request from to X-Forwarded-For, so with N
    trusted proxies the N-th entry from the right is the client; anything left of it was sent by
    the client itself and cannot be trusted.
    """
    trusted = settings.ACURIO_TRUSTED_PROXIES
    if trusted > 0:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        hops = [h for h in hops if h]
        if len(hops) >= trusted:
            return hops[-trusted]
    return request.META.get("REMOTE_ADDR")


def lockout_message(request: HttpRequest, username: str) -> str:
    """The sentence a locked-out user reads: why, for how long, and until when."""
    from axes.models import AccessAttempt

    minutes = settings.ACURIO_LOGIN_COOLOFF_MINUTES
    wait = f"{minutes:g} minute{'' if minutes == 1 else 's'}"
    last = AccessAttempt.objects.filter(
        username=username, ip_address=getattr(request, "axes_ip_address", None)
    ).aggregate(last=Max("attempt_time"))["last"]
    until = ""
    if last is not None:
        unlock = timezone.localtime(last + settings.AXES_COOLOFF_TIME)
        until = f" (until {unlock:%H:%M} {unlock.tzname()})"
    return (
        f"Too many failed sign-in attempts: signing in as “{username}” from your address is "
        f"blocked for {wait}{until}. Try again later; other accounts and other addresses are "
        "not affected."
    )


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict | None = None,
) -> HttpResponse:
    """The sign-in page the user posted to, with the lockout message, as HTTP 429.

    ``original_response`` is that page as the login view rendered it (a TemplateResponse keeps
    its template and context): the same page is shown again with an empty form, so the admin's
    sign-in keeps the admin's look and the site's keeps the site's.
    """
    from django.contrib.auth.forms import AuthenticationForm

    username = (credentials or {}).get(settings.AXES_USERNAME_FORM_FIELD) or request.POST.get(
        "username", ""
    )
    template = "registration/login.html"
    context: dict = {}
    if isinstance(original_response, TemplateResponse):
        template = original_response.template_name
        context = dict(original_response.context_data or {})
    form = context.get("form")
    form_class = type(form) if form is not None else AuthenticationForm
    # An unbound form: the generic "wrong password" error would contradict the message.
    context["form"] = form_class(request, initial={"username": username})
    context["lockout_message"] = lockout_message(request, username)
    response = TemplateResponse(request, template, context, status=settings.AXES_HTTP_RESPONSE_CODE)
    return response.render()


def features(request: HttpRequest) -> dict[str, bool]:
    """Template context: which optional features this deployment offers."""
    return {"password_reset_enabled": settings.ACURIO_PASSWORD_RESET}


def only_with_email(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap a password-reset view: 404 unless an email backend is configured (EMAIL_URL)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.ACURIO_PASSWORD_RESET:
            raise Http404("Password reset is not available: no email backend is configured.")
        return view(request, *args, **kwargs)

    return wrapper
