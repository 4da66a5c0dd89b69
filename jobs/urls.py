"""URLs of the jobs app: pages and the JSON API (names and paths fixed by DESIGN.md)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.runs_list, name="runs"),
    path("healthz", views.healthz, name="healthz"),
    path("upload/", views.upload, name="upload"),
    path("jobs/<int:job_id>/", views.job_page, name="job_page"),
    path("runs/<uuid:run_id>/", views.run_report, name="run_report"),
    path("runs/<uuid:run_id>.json", views.run_report_json, name="run_report_json"),
    path("runs/<uuid:run_id>/reanalyse", views.run_reanalyse, name="run_reanalyse"),
    path("runs/<uuid:run_id>/document", views.run_document, name="run_document"),
    path("runs/<uuid:run_id>/delete", views.run_delete, name="run_delete"),
    path("runs/<uuid:run_id>/export/<str:name>", views.run_export, name="run_export"),
    path("api/analysis-jobs", views.api_create_job, name="api_create_job"),
    path("api/analysis-jobs/<int:job_id>", views.api_job, name="api_job"),
    path("api/analysis-runs", views.api_save_run, name="api_save_run"),
]
