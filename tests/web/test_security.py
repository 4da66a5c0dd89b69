"""The hardened deployment: sign-in throttling, HTTPS settings, the CSP, password reset.

Throttling policy under test (acurio.settings): failures are counted per username AND client
address; after ACURIO_LOGIN_FAILURE_LIMIT (10) that pair is refused with HTTP 429 and a clear
message for ACURIO_LOGIN_COOLOFF_MINUTES (15), counted from the failure that hit the limit.
Other usernames, and the same username from another address, are not affected.

The production settings are checked in a child process with a production-like environment
(DEBUG off, a real secret, no pytest), since under pytest the settings relax HTTPS for the
suite's plain-HTTP servers.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings as django_settings
from django.core import mail
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from acurio.security import client_ip
from tests.processes import child_env

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"

LOCKED = "Too many failed sign-in attempts"
LIMIT = 10
COOLOFF = timedelta(minutes=15)


def sign_in(client, username: str, password: str, ip: str = "10.0.0.1", path: str = ""):
    return client.post(
        path or reverse("login"),
        {"username": username, "password": password},
        REMOTE_ADDR=ip,
    )


def signed_in_as(client) -> str | None:
    return client.session.get("_auth_user_id")


# ------------------------------------------------------------------ sign-in throttling


def test_the_documented_throttle_defaults_are_in_force():
    assert django_settings.AXES_ENABLED is True
    assert django_settings.AXES_FAILURE_LIMIT == LIMIT
    assert django_settings.AXES_COOLOFF_TIME == COOLOFF
    assert django_settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert django_settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"
    assert django_settings.MIDDLEWARE[-1] == "axes.middleware.AxesMiddleware"


@pytest.mark.django_db
def test_thirty_wrong_passwords_lock_the_account_and_the_right_one_is_refused(client, user):
    statuses = [sign_in(client, "alice", f"wrong-{i}").status_code for i in range(30)]
    # Nine plain failures (the form again), then the tenth hits the limit: locked from there on.
    assert statuses[: LIMIT - 1] == [200] * (LIMIT - 1)
    assert statuses[LIMIT - 1 :] == [429] * (30 - LIMIT + 1)

    response = sign_in(client, "alice", "pw-alice-123")
    assert response.status_code == 429
    assert signed_in_as(client) is None
    page = response.content.decode()
    assert 'id="lockout-message"' in page
    message = re.search(r'id="lockout-message"[^>]*>([^<]*)<', page).group(1)
    assert message.startswith(f"{LOCKED}: signing in as “alice” from your address is blocked")
    assert "for 15 minutes (until " in message
    # The page is still the sign-in page, with an empty form and no contradicting error.
    assert 'name="password"' in page
    assert "didn&#x27;t match" not in page and "didn't match" not in page


@pytest.mark.django_db
def test_the_lock_lifts_after_the_cool_off(client, user):
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for i in range(30):
            sign_in(client, "alice", f"wrong-{i}")
        # Attempts while locked do not extend the lock: it runs from the tenth failure.
        clock.shift(COOLOFF - timedelta(seconds=30))
        assert sign_in(client, "alice", "pw-alice-123").status_code == 429
        assert signed_in_as(client) is None
        clock.shift(timedelta(seconds=31))
        response = sign_in(client, "alice", "pw-alice-123")
        assert response.status_code == 302
        assert response["Location"] == reverse("runs")
        assert signed_in_as(client) == str(user.pk)


@pytest.mark.django_db
def test_someone_elses_failures_lock_nobody_else(client, user, other_user):
    for i in range(LIMIT):
        sign_in(client, "alice", f"wrong-{i}", ip="10.0.0.1")
    assert sign_in(client, "alice", "pw-alice-123", ip="10.0.0.1").status_code == 429

    # Another user, from another address: unaffected.
    response = sign_in(client, "bob", "pw-bob-123", ip="10.0.0.2")
    assert response.status_code == 302 and signed_in_as(client) == str(other_user.pk)
    client.logout()
    # Another user from the attacker's address: unaffected too (the pair is what is locked).
    response = sign_in(client, "bob", "pw-bob-123", ip="10.0.0.1")
    assert response.status_code == 302 and signed_in_as(client) == str(other_user.pk)
    client.logout()
    # The locked user from their own, other address: unaffected, so nobody can lock a user
    # out from elsewhere by guessing their password.
    response = sign_in(client, "alice", "pw-alice-123", ip="10.0.0.2")
    assert response.status_code == 302 and signed_in_as(client) == str(user.pk)


@pytest.mark.django_db
def test_a_successful_sign_in_resets_the_count(client, user):
    for i in range(LIMIT - 1):
        sign_in(client, "alice", f"wrong-{i}")
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302
    client.logout()
    for i in range(LIMIT - 1):
        assert sign_in(client, "alice", f"again-{i}").status_code == 200
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302


@pytest.mark.django_db
def test_the_admin_sign_in_is_throttled_too(client, staff_user):
    admin_login = reverse("admin:login")
    for i in range(LIMIT):
        response = sign_in(client, "olivia", f"wrong-{i}", path=admin_login)
    assert response.status_code == 429
    response = sign_in(client, "olivia", "pw-olivia-123", path=admin_login)
    assert response.status_code == 429
    assert signed_in_as(client) is None
    page = response.content.decode()
    assert 'id="login-form"' in page  # the admin's own sign-in page
    assert f"{LOCKED}: signing in as “olivia”" in page
    # The site's sign-in counts the same pair: it is locked there as well.
    assert sign_in(client, "olivia", "pw-olivia-123").status_code == 429


@pytest.mark.django_db
def test_the_throttle_can_be_switched_off(client, user, settings):
    settings.AXES_ENABLED = False
    for i in range(LIMIT + 5):
        assert sign_in(client, "alice", f"wrong-{i}").status_code == 200
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302


def test_client_address_without_trusted_proxies_is_the_peer(settings):
    settings.ACURIO_TRUSTED_PROXIES = 0
    request = RequestFactory().get(
        "/", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="1.2.3.4, 5.6.7.8"
    )
    assert client_ip(request) == "10.9.9.9"  # a client-sent header is not believed


def test_client_address_behind_trusted_proxies(settings):
    settings.ACURIO_TRUSTED_PROXIES = 1
    # The client forged "6.6.6.6"; the proxy appended the address it really saw.
    request = RequestFactory().get(
        "/", REMOTE_ADDR="172.17.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7"
    )
    assert client_ip(request) == "203.0.113.7"
    settings.ACURIO_TRUSTED_PROXIES = 2
    request = RequestFactory().get(
        "/", REMOTE_ADDR="172.17.0.2", HTTP_X_FORWARDED_FOR="203.0.113.7, 10.0.0.5"
    )
    assert client_ip(request) == "203.0.113.7"
    # Fewer hops than proxies: the request did not come through them; use the peer.
    request = RequestFactory().get("/", REMOTE_ADDR="172.17.0.2", HTTP_X_FORWARDED_FOR="")
    assert client_ip(request) == "172.17.0.2"


@pytest.mark.django_db
def test_behind_a_proxy_each_client_is_counted_apart(client, user, settings):
    settings.ACURIO_TRUSTED_PROXIES = 1
    for i in range(LIMIT):
        client.post(
            reverse("login"),
            {"username": "alice", "password": f"wrong-{i}"},
            REMOTE_ADDR="172.17.0.2",
            HTTP_X_FORWARDED_FOR="203.0.113.7",
        )
    locked = client.post(
        reverse("login"),
        {"username": "alice", "password": "pw-alice-123"},
        REMOTE_ADDR="172.17.0.2",
        HTTP_X_FORWARDED_FOR="203.0.113.7",
    )
    assert locked.status_code == 429
    # Same proxy, another client: not locked by the first one's failures.
    other = client.post(
        reverse("login"),
        {"username": "alice", "password": "pw-alice-123"},
        REMOTE_ADDR="172.17.0.2",
        HTTP_X_FORWARDED_FOR="198.51.100.4",
    )
    assert other.status_code == 302


# ------------------------------------------------------------------ password reset


@pytest.mark.django_db
def test_without_an_email_backend_password_reset_is_neither_offered_nor_served(client, settings):
    settings.ACURIO_PASSWORD_RESET = False
    page = client.get(reverse("login")).content.decode()
    assert "password-reset-link" not in page and "password_reset" not in page
    for url in (
        reverse("password_reset"),
        reverse("password_reset_done"),
        reverse("password_reset_complete"),
        reverse("password_reset_confirm", args=["MQ", "set-password"]),
    ):
        assert client.get(url).status_code == 404, url
    response = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert response.status_code == 404
    assert mail.outbox == []


@pytest.mark.django_db
def test_with_an_email_backend_password_reset_works_end_to_end(client, user, settings):
    settings.ACURIO_PASSWORD_RESET = True
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    user.email = "alice@example.org"
    user.save()
    page = client.get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}" id="password-reset-link"' in page

    response = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert response.status_code == 302
    assert response["Location"] == reverse("password_reset_done")
    assert "Check your email" in client.get(response["Location"]).content.decode()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.org"]
    link = re.search(r"https?://[^/\s]+(/accounts/reset/\S+/)", mail.outbox[0].body).group(1)

    form = client.get(link, follow=True)  # Django swaps the token for a session marker
    assert form.status_code == 200
    set_url = form.redirect_chain[-1][0]
    done = client.post(
        set_url, {"new_password1": "a-new-pass-4812", "new_password2": "a-new-pass-4812"}
    )
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    assert "Password changed" in client.get(done["Location"]).content.decode()
    assert sign_in(client, "alice", "a-new-pass-4812").status_code == 302


# ------------------------------------------------------------------ HTTPS and cookies


@pytest.mark.django_db
def test_https_redirect_and_hsts_when_switched_on(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    plain = client.get(reverse("login"))
    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver" + reverse("login")
    assert "Strict-Transport-Security" not in plain  # never over plain HTTP

    secure = client.get(reverse("login"), secure=True)
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    # The health probe of a load balancer or container talks plain HTTP to the process.
    health = client.get(reverse("healthz"))
    assert health.status_code in (200, 503) and health["Content-Type"] == "application/json"
    # A TLS-terminating proxy that says so: HTTPS, no redirect loop.
    proxied = client.get(reverse("login"), HTTP_X_FORWARDED_PROTO="https")
    assert proxied.status_code == 200
    assert "Strict-Transport-Security" in proxied


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    if args[0] == "shell":
        args = ("shell", "--verbosity", "0", *args[1:])
    environment = child_env(**env)  # this process's DEBUG is dropped; env says what it is
    # A browser test's switch must not leak into a production-like process (check --deploy
    # rightly warns about it).
    environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_env(**extra: str) -> dict[str, str]:
    return {
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "acurio.example.org",
        **extra,
    }


PRINT_SETTINGS = (
    "from django.conf import settings as s; "
    "print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS,"
    " s.SECURE_HSTS_PRELOAD, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
    " s.SECURE_PROXY_SSL_HEADER, s.ACURIO_PASSWORD_RESET, getattr(s, 'MAILERS', None))"
)


@pytest.mark.parametrize("email_url", ["", "smtp+tls://mailer:pw@mail.example.org:587"])
def test_check_deploy_passes_with_production_settings(email_url):
    env = production_env(**({"EMAIL_URL": email_url} if email_url else {}))
    proc = _manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout


def test_production_defaults_are_https_only():
    proc = _manage("shell", "-c", PRINT_SETTINGS, **production_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "False",
        "True",
        "31536000",
        "True",
        "True",
        "True",
        "True",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
        "False",
        "None",
    ]


def test_behind_a_proxy_that_redirects_itself_the_switches_turn_https_handling_off():
    env = production_env(
        SECURE_SSL_REDIRECT="0", SECURE_HSTS_SECONDS="0", ACURIO_TRUST_X_FORWARDED_PROTO="0"
    )
    proc = _manage("shell", "-c", PRINT_SETTINGS, **env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:3] == ["False", "False", "0"]
    assert "None" in proc.stdout.split()  # no proxy header trusted
    # The deploy check then says what is now the proxy's job.
    check = _manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert check.returncode != 0
    assert "security.W008" in check.stderr and "security.W004" in check.stderr


@pytest.mark.parametrize(
    "key, length",
    [
        ("x", 1),
        ("s3cr3t-but-only-thirty-chars!!", 30),
        ("a" * 60, 60),  # long but one character
        ("django-insecure-" + "k" * 50, 66),
    ],
)
def test_a_weak_secret_key_stops_production_with_one_line(key, length):
    proc = _manage("check", **production_env(SECRET_KEY=key))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "acurio: SECRET_KEY must be at least 50 random characters when DEBUG is off"
        f" (it has {length}); make one with: python -c"
        " 'import secrets; print(secrets.token_urlsafe(50))'"
    )


def test_a_short_secret_key_is_fine_in_development():
    proc = _manage("check", DEBUG="1", SECRET_KEY="dev")
    assert proc.returncode == 0, proc.stderr


PRINT_MAILER = (
    "import json; from django.conf import settings as s; from django.core import mail; "
    "m = mail.mailers.default; "
    "print(json.dumps([s.ACURIO_PASSWORD_RESET, type(m).__module__, m.host, m.port, m.username,"
    " m.use_tls]))"
)


def test_email_url_switches_password_reset_on():
    env = production_env(EMAIL_URL="smtp+tls://mailer:pw@mail.example.org:587")
    proc = _manage("shell", "-c", PRINT_MAILER, **env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        True,
        "django.core.mail.backends.smtp",
        "mail.example.org",
        587,
        "mailer",
        True,
    ]
    assert proc.stderr == ""  # no deprecation noise about the EMAIL_* settings


def test_an_email_url_without_a_server_is_one_clear_line():
    proc = _manage("check", **production_env(EMAIL_URL="smtp://"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "acurio: EMAIL_URL names no mail server (smtp+tls://user:password@host:587)"
    )


def test_a_malformed_email_url_is_one_clear_line():
    proc = _manage("check", **production_env(EMAIL_URL="carrier-pigeon://loft"))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("acurio: EMAIL_URL is not a valid email URL")


# ------------------------------------------------------------------ Content-Security-Policy


def csp_of(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}


def assert_strict(policy: dict[str, list[str]]) -> None:
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert not any("unsafe" in v for values in policy.values() for v in values)


@pytest.mark.django_db
def test_every_page_carries_the_csp(client, user, staff_user, saved_run):
    assert_strict(csp_of(client.get(reverse("login"))))
    client.force_login(user)
    run = saved_run()
    for url in (
        reverse("runs"),
        reverse("upload"),
        reverse("job_page", args=[run.job_id]),
        reverse("run_report", args=[run.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_strict(csp_of(response))
    client.force_login(staff_user)
    for url in (reverse("admin:index"), reverse("admin:jobs_analysisjob_changelist")):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_strict(csp_of(response))


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.I)
STYLE_ATTRIBUTE = re.compile(r"<[^>]*\sstyle\s*=", re.I)


def test_no_template_has_inline_script_style_or_event_handlers():
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text()
        for name, pattern in (
            ("inline <script>", INLINE_SCRIPT),
            ("event handler attribute", EVENT_HANDLER),
            ("style attribute", STYLE_ATTRIBUTE),
            ("<style> element", re.compile(r"<style\b", re.I)),
        ):
            for match in pattern.finditer(text):
                found.append(f"{path.relative_to(ROOT)}: {name}: {match.group(0)[:60]}")
    assert found == []


def test_the_template_scan_catches_what_it_looks_for():
    assert INLINE_SCRIPT.search("<script>alert(1)</script>")
    assert INLINE_SCRIPT.search('<script type="module">x()</script>')
    assert not INLINE_SCRIPT.search('<script src="/static/a.js" defer></script>')
    assert EVENT_HANDLER.search('<button onclick="go()">')
    assert STYLE_ATTRIBUTE.search('<div class="x" style="width:0">')
    assert not STYLE_ATTRIBUTE.search('<div class="style">')
