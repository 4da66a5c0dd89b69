"""What a transaction-pooling proxy (PgBouncer in transaction mode) needs from the engine.

These run in every test stage; CI also runs them, with the engine, worker and web tests that
matter, through PgBouncer (``scripts/pgbouncer_ci.sh``, ``.ci/run``), where ``DATABASE_URL``
points at PgBouncer and ``DATABASE_DIRECT_URL`` at the server itself.

* LISTEN is session state: the worker listens on a direct connection of its own when
  ``DATABASE_DIRECT_URL`` is set, and a NOTIFY sent through the pooler wakes it at once.
* What the engine sets for a step (its statement timeout) is transaction-local: nothing of it
  is left on the connection for the next client of a pooled server connection.
* A worker's session settings (jobs.durable.sessions): with ``DATABASE_DIRECT_URL`` the
  worker's own connection goes to the server and its session has them; through the pooler
  without it (``DATABASE_POOLER=transaction``) each transaction has them, and no server
  connection of the pool keeps any for the next client (that test needs the pooler: CI's
  PgBouncer stage).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction

from jobs.durable import Worker, result, start, status, task
from jobs.durable.models import Instance, Step
from jobs.durable.sessions import code_version
from tests.pgbouncer import server_connections
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


def test_a_start_and_a_claim_outside_a_transaction_record_the_code_version_without_a_setting():
    # What an autocommit statement finds on a transaction pooler's server connection: no
    # acurio.code_version (nothing is set on the session, and no transaction sets it). The
    # start and the claim pass the version themselves, so their rows record it anyway.
    # Through the pooler the session has none already (and must be left alone); directly,
    # the announced one is cleared for the test and put back after it.
    pooled = settings.DATABASE_POOLER == "transaction"

    def set_session_version(value: str) -> None:
        if not pooled:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('acurio.code_version', %s, false)", [value])

    try:
        set_session_version("")
        instance = start(task("tests.ops.steps.noop"), label="versioned outside atomic")
        assert Instance.objects.get(pk=instance).code_version == code_version()
        worker = Worker(once=True)
        set_session_version("")
        [step] = worker.claim()
        assert Step.objects.get(pk=step.id).code_version == code_version()
        worker.execute(step)
        assert status(instance) == "completed"
    finally:  # the next test on this connection finds it as announced
        set_session_version(code_version())


# The worker's bounds as the children below get them: lock_timeout = the lease,
# idle_in_transaction_session_timeout = the step timeout + the lease (as PostgreSQL shows them).
BOUNDS = {"ACURIO_LEASE_SECONDS": "45", "ACURIO_STEP_TIMEOUT_SECONDS": "255"}


def run_worker_once(env: dict[str, str], label: str, count: int = 3) -> tuple[list, int]:
    """Start ``count`` instances of the session probe, run ``manage.py worker --once`` over
    them; their results and the worker's pid."""
    instances = [
        start(task("tests.ops.steps.session_settings"), label=f"{label} {i}") for i in range(count)
    ]
    proc = subprocess.run(
        [sys.executable, str(Path(ROOT) / "manage.py"), "worker", "--once"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [status(i) for i in instances] == ["completed"] * count, proc.stderr
    pid = int(proc.stderr.split(f"{socket.gethostname()}:", 1)[1].split(":", 1)[0])
    return instances, pid


def test_a_worker_with_the_direct_url_keeps_its_session_settings():
    env = child_env(DEBUG="1", DATABASE_DIRECT_URL=direct_url(), **BOUNDS)
    instances, pid = run_worker_once(env, "direct")
    for instance in instances:
        seen = result(instance)
        assert seen["application_name"].startswith(f"{socket.gethostname()}:{pid}:")
        assert seen["lock_timeout"] == "45s"
        assert seen["idle_in_transaction_session_timeout"] == "5min"
        assert seen["code_version"]
    if settings.DATABASE_POOLER == "transaction":
        # Its own backend, none of the pool's server connections.
        assert not {result(i)["pid"] for i in instances} & pooled_server_pids()


def pooled_server_pids() -> set[int]:
    """The backends of PgBouncer's server connections to the test database."""
    return {row["remote_pid"] for row in server_connections()}


@pytest.mark.skipif(
    settings.DATABASE_POOLER != "transaction",
    reason="needs DATABASE_URL through a transaction pooler (CI's PgBouncer stage)",
)
def test_a_worker_through_the_pooler_leaves_nothing_on_the_pools_connections():
    env = child_env(DEBUG="1", DATABASE_POOLER="transaction", **BOUNDS)
    env.pop("DATABASE_DIRECT_URL", None)
    instances, pid = run_worker_once(env, "pooled")
    # Each transaction of the worker had its bounds and its code version, but no name.
    for instance in instances:
        seen = result(instance)
        assert f":{pid}:" not in seen["application_name"]
        assert seen["lock_timeout"] == "45s"
        assert seen["idle_in_transaction_session_timeout"] == "5min"
        assert seen["code_version"]
    claimed_on = set(
        Step.objects.filter(instance_id__in=instances).values_list("lease_backend", flat=True)
    )

    # Another client takes every server connection of the pool at once (a transaction open
    # on each), those the worker ran on among them, and finds the server's defaults.
    probe = (
        "SELECT pg_backend_pid(), current_setting('application_name'),"
        " current_setting('acurio.code_version', true),"
        " (SELECT array_agg(name ORDER BY name) FROM pg_settings"
        "  WHERE name IN ('lock_timeout', 'idle_in_transaction_session_timeout')"
        "  AND setting IS DISTINCT FROM reset_val)"
    )
    clients = []
    try:
        seen = {}
        for _ in range(len(pooled_server_pids())):
            client = psycopg.connect(database_url(), prepare_threshold=None)
            clients.append(client)
            backend, name, version, changed = client.execute(probe).fetchone()
            seen[backend] = (name, version, changed)
    finally:
        for client in clients:
            client.close()
    assert claimed_on & set(seen), (claimed_on, seen)
    for backend, (name, version, changed) in seen.items():
        assert f":{pid}:" not in name, (backend, name)
        assert not version, (backend, version)
        assert not changed, (backend, changed)


@pytest.mark.skipif(
    settings.DATABASE_POOLER != "transaction",
    reason="needs DATABASE_URL through a transaction pooler (CI's PgBouncer stage)",
)
def test_through_the_pooler_instances_and_claimed_steps_record_the_code_version():
    # This process's connection is the pooled backend's: no startup options, no session SET;
    # a transaction starts with the code version, an autocommit statement gets none, so the
    # start and the claim pass it as a parameter.
    with transaction.atomic():
        inside = start(task("tests.ops.steps.noop"), label="versioned")
    outside = start(task("tests.ops.steps.noop"), label="versioned outside atomic")
    for instance in (inside, outside):
        assert Instance.objects.get(pk=instance).code_version == code_version()
    Worker(once=True).drain()
    claimed = Step.objects.filter(instance_id__in=[inside, outside], kind="task")
    assert [s.code_version for s in claimed] == [code_version()] * 2
    with connection.cursor() as cursor:  # and nothing of it outlives the transaction
        cursor.execute("SELECT current_setting('acurio.code_version', true)")
        assert not cursor.fetchone()[0]
