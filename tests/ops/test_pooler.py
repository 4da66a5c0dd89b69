"""What a transaction-pooling proxy (PgBouncer in transaction mode) needs from the engine.

These run in every test stage; CI also runs them, with the engine, worker and web tests that
matter, through PgBouncer (``scripts/pgbouncer_ci.sh``, ``.ci/run``), where ``DATABASE_URL``
points at PgBouncer and ``DATABASE_DIRECT_URL`` at the server itself.

* LISTEN is session state: the worker listens on a direct connection of its own when
  ``DATABASE_DIRECT_URL`` is set, and a NOTIFY sent through the pooler wakes it at once.
* What the engine sets for a step (its statement timeout) is transaction-local: nothing of it
  is left on the connection for the next client of a pooled server connection.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from jobs.durable import Worker, start, status, task
from tests.processes import ROOT, child_env, database_url

pytestmark = pytest.mark.django_db(transaction=True)


def direct_url() -> str:
    """The server itself: CI's PgBouncer stage sets DATABASE_DIRECT_URL; otherwise the suite's
    own connection is direct already."""
    return os.environ.get("DATABASE_DIRECT_URL") or database_url()


def test_a_worker_listening_on_its_direct_connection_wakes_on_notify():
    # The first instance is there before the worker: once it is done, the worker has listened
    # and claimed, and waits. With a poll interval of a minute only a NOTIFY can wake it for
    # the second within the test's bound.
    first = start(task("tests.ops.steps.noop"), label="first")
    env = child_env(DEBUG="1", DATABASE_DIRECT_URL=direct_url())
    proc = subprocess.Popen(
        [sys.executable, str(Path(ROOT) / "manage.py"), "worker", "--poll-interval", "60"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while status(first) != "completed":
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the worker never ran the first instance"
            time.sleep(0.2)
        time.sleep(1.0)  # past its next (empty) claim: it is waiting now
        second = start(task("tests.ops.steps.noop"), label="woken")
        started = time.monotonic()
        while status(second) != "completed":
            assert time.monotonic() - started < 15, "the NOTIFY did not wake the worker"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read()


def test_a_steps_statement_timeout_does_not_outlive_its_transaction():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        (before,) = cursor.fetchone()
    instance = start(task("tests.ops.steps.noop", timeout=7), label="bounded")
    Worker(once=True).drain()
    assert status(instance) == "completed"
    # Through PgBouncer with one client this is the very server connection the step used; a
    # session-level SET would still be there for whoever gets that connection next.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == before
