"""App configuration for the jobs app."""

from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Analysis jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import metrics

        metrics.install()  # the engine's step hook feeds the Prometheus counters
