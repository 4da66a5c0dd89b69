"""Fixtures of the part-2 engine tests; the effects table and workers come from tests/engine."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
import time_machine

from tests.engine.conftest import rows_table, worker  # noqa: F401 — fixtures used here too
from tests.engine2.httpserver import Server

T0 = datetime(2026, 3, 2, 9, 59, 30, tzinfo=UTC)


@pytest.fixture
def clock():
    """Frozen time (time-machine) that tests move with ``clock.shift(seconds)``."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def server(settings):
    """A local HTTP server (tests.engine2.httpserver) that http() steps may call."""
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    settings.ACURIO_HTTP_ALLOW = ["127.0.0.1:*"]
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()
