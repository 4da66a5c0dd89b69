"""URL configuration for Acurio.

The accounts URLs are django.contrib.auth's, except that the four password-reset pages answer
404 unless an email backend is configured (``EMAIL_URL``): without one a reset mail could never
arrive, and the page would still say it was sent.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from acurio.security import only_with_email
from jobs.metrics import metrics_view

accounts = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path(
        "password_reset/",
        only_with_email(auth_views.PasswordResetView.as_view()),
        name="password_reset",
    ),
    path(
        "password_reset/done/",
        only_with_email(auth_views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        only_with_email(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        only_with_email(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
]

urlpatterns = [
    path("accounts/", include(accounts)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; closed unless configured
    path("", include("jobs.urls")),
]

# Under /api/ these answer JSON (jobs.views); elsewhere Django's own pages.
handler400 = "jobs.views.bad_request"
handler403 = "jobs.views.permission_denied"
handler404 = "jobs.views.page_not_found"
handler500 = "jobs.views.server_error"
