"""URLs of the jobs app: pages and the JSON API (names and paths fixed by DESIGN.md)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.runs_list, name="runs"),
    path("healthz", views.healthz, name="healthz"),
    path("runs/<uuid:run_id>/", views.run_report, name="run_report"),
]
