"""Fixtures of the part-2 engine tests; the effects table and workers come from tests/engine."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from tests.engine.conftest import rows_table, worker  # noqa: F401 — fixtures used here too

T0 = datetime(2026, 3, 2, 9, 59, 30, tzinfo=UTC)


@pytest.fixture
def clock():
    """Frozen time (time-machine) that tests move with ``clock.shift(seconds)``."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller
