"""Fixtures of the engine tests: the effects table, a test worker, frozen time, an HTTP server."""

from __future__ import annotations

import threading

import pytest
import time_machine
from django.db import connection

from jobs.durable import Worker
from tests.durable.httpserver import Server
from tests.durable.steps import ROWS_DDL
from tests.durable.support import T0


@pytest.fixture
def rows_table(django_db_blocker):
    """The ``engine_rows`` table, committed (subprocess workers write to it too)."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(ROWS_DDL)
        cursor.execute("TRUNCATE engine_rows")
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS engine_rows")


@pytest.fixture
def worker():
    """A worker driven step by step (no chaining), with a long lease."""
    return Worker(worker_id="test-worker", lease_seconds=30, chain=False)


@pytest.fixture
def clock():
    """Frozen time (time-machine) that tests move with ``clock.shift(seconds)``."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def server(settings):
    """A local HTTP server (tests.durable.httpserver) that http() steps may call."""
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    settings.ACURIO_HTTP_ALLOW = ["127.0.0.1:*"]
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()
