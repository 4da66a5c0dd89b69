"""Fixtures of the engine tests: the effects table, workers, subprocess helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from jobs.durable import Worker
from tests.engine.steps import ROWS_DDL

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def rows_table(django_db_blocker):
    """The ``engine_rows`` table, committed (subprocess workers write to it too)."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(ROWS_DDL)
        cursor.execute("TRUNCATE engine_rows")
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS engine_rows")


def rows(tag: str | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        if tag is None:
            cursor.execute("SELECT instance_id, tag, chunk_index, attempt FROM engine_rows")
        else:
            cursor.execute(
                "SELECT instance_id, tag, chunk_index, attempt FROM engine_rows WHERE tag = %s",
                [tag],
            )
        return cursor.fetchall()


@pytest.fixture
def worker():
    return Worker(worker_id="test-worker", lease_seconds=30, chain=False)


def db_url() -> str:
    """A URL for the database the tests run on (the test database pytest-django created)."""
    settings = connection.settings_dict
    user = settings.get("USER") or "postgres"
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{settings['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG",)}
    env.update(
        DATABASE_URL=db_url(),
        SECRET_KEY="engine-tests-not-a-secret-long-enough-for-the-fifty-character-minimum",
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


def spawn_worker(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", *args],
        cwd=ROOT,
        env=subprocess_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
