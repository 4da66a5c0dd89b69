"""App configuration for the durable engine (its own app label, its own migrations)."""

from __future__ import annotations

from django.apps import AppConfig


class DurableConfig(AppConfig):
    name = "jobs.durable"
    label = "durable"
    verbose_name = "Durable workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every session of this process carries its code version (``acurio.code_version``)
        # from its startup packet: instances it starts and steps it claims record it as a
        # column default, at no extra round trip (jobs.durable.sessions).
        from jobs.durable.sessions import announce_code_version

        announce_code_version()
