"""The one way a test gives a child process (worker, sweeper, CLI, launcher) its database.

The suite may run on the machine's PostgreSQL over TCP (``DATABASE_URL`` set) or on the
embedded server behind a Unix socket (``DATABASE_URL`` unset, as a newcomer runs it). Either
way a child must reach exactly the database the test is using — the test database
pytest-django created, on the same server, through the same socket directory — so no test
builds a URL by hand: they call :func:`database_url` or :func:`child_env`.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode

from django.db import connection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def database_url(name: str | None = None) -> str:
    """A URL (for django-environ and libpq alike) of the database the tests use.

    ``name`` picks another database on the same server (for tests that make their own).
    """
    settings = connection.settings_dict
    options = settings.get("OPTIONS") or {}
    host = str(settings.get("HOST") or options.get("host") or "")
    port = str(settings.get("PORT") or options.get("port") or "")
    auth = quote(settings.get("USER") or "postgres", safe="")
    if settings.get("PASSWORD"):
        auth += ":" + quote(settings["PASSWORD"], safe="")
    dbname = quote(name or settings["NAME"], safe="")
    if host.startswith("/"):  # a Unix socket directory: libpq's query form
        query = {"host": host, **({"port": port} if port else {})}
        return f"postgres://{auth}@/{dbname}?{urlencode(query)}"
    netloc = f"{auth}@{host or '127.0.0.1'}" + (f":{port}" if port else "")
    return f"postgres://{netloc}/{dbname}"


def child_env(*, keep_debug: bool = False, **extra: str) -> dict[str, str]:
    """The environment for a child process: this process's, pointed at the test database."""
    env = {k: v for k, v in os.environ.items() if keep_debug or k != "DEBUG"}
    env.update(
        DATABASE_URL=database_url(),
        SECRET_KEY="acurio-tests-secret-key-not-for-production-use-0123456789",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env
