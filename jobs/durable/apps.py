"""App configuration for the durable engine (its own app label, its own migrations)."""

from __future__ import annotations

from django.apps import AppConfig


class DurableConfig(AppConfig):
    name = "jobs.durable"
    label = "durable"
    verbose_name = "Durable workflows"
    default_auto_field = "django.db.models.BigAutoField"
