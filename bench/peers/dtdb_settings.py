"""Django settings for the django-tasks-db peer of the benchmark.

A minimal project: Django's Tasks framework with django-tasks-db's ``DatabaseBackend``, as
that package's documentation describes, on its own database (``BENCH_DTDB_DB``). The
connection is kept for the worker's life (``CONN_MAX_AGE=None``): Django's default of 0
would open a connection per job and measure connection set-up instead of the queue.
"""

from __future__ import annotations

import os

from bench.peers.common import HOST, PORT, USER

SECRET_KEY = "bench-only-not-a-secret"
DEBUG = False  # DEBUG=True would keep every query in memory
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_DTDB_DB", "acurio_bench_dtdb"),
        "USER": USER,
        "HOST": HOST,
        "PORT": PORT,
        "CONN_MAX_AGE": None,
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default"],
    }
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "root": {"level": "WARNING"},
}
