"""Helpers of the engine tests: the effects table's rows, frozen time's origin, and child
processes (workers, ``manage.py``) started on the suite's own database."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.db import connection

from tests.processes import ROOT, child_env

# Where frozen time starts (the ``clock`` fixture).
T0 = datetime(2026, 3, 2, 9, 59, 30, tzinfo=UTC)


def rows(tag: str | None = None) -> list[tuple]:
    """``(instance_id, tag, chunk_index, attempt)`` of every committed effect (or one tag's)."""
    with connection.cursor() as cursor:
        if tag is None:
            cursor.execute("SELECT instance_id, tag, chunk_index, attempt FROM engine_rows")
        else:
            cursor.execute(
                "SELECT instance_id, tag, chunk_index, attempt FROM engine_rows WHERE tag = %s",
                [tag],
            )
        return cursor.fetchall()


def spawn_worker(*args: str, **env: str) -> subprocess.Popen:
    """``manage.py worker`` in a child process on the test database, its log on stdout."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", *args],
        cwd=ROOT,
        env=child_env(**{"LOG_LEVEL": "INFO", **env}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_started(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until a ``spawn_worker`` process logs that it started: its SIGTERM handler is installed
    by then (a SIGTERM sent earlier, while Django is still loading, kills it outright).
    Reads its stdout up to that line."""
    seen: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            seen.append(line)
            if " started (code version " in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive() or not seen or " started (" not in seen[-1]:
        raise AssertionError("the worker did not start:\n" + "".join(seen))


def run_manage(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """``manage.py <args>`` in a child process on the test database; waits for it."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    """Poll until ``predicate()``; a deadline for liveness, not a speed assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
