"""Smoke test of the first README command on a throwaway embedded PostgreSQL.

Starts ``./acurio.sh start`` with ``DATABASE_URL`` unset and the embedded data directory in a
temporary folder, waits for ``/healthz``, checks the line that says where the server lives,
signs in as the demo user, checks the runs list, checks that a second start on the same data
directory refuses with one line, sends Ctrl-C (SIGINT) and checks that nothing is left
running; then starts it once more to show the data survives. Exit 0 when all of it holds.
Used by ``.ci/run``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import psutil

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 120) -> dict:
    import json

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"smoke: ./acurio.sh start exited early with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                body = json.load(r)
                if body.get("database"):
                    return body
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("smoke: the site did not become healthy in time")


def sign_in_and_list(base: str) -> str:
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urlencode(
        {"username": "demo", "password": "demo-acurio", "csrfmiddlewaretoken": token}
    ).encode()
    req = urllib.request.Request(f"{base}/accounts/login/", data=data, headers={"Referer": base})
    return opener.open(req).read().decode()


def postgres_running(pgdata: Path) -> bool:
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "postgres" and str(pgdata) in " ".join(p.info["cmdline"] or []):
            return True
    return False


def second_start_refuses(env: dict[str, str], pgdata: Path) -> None:
    other = subprocess.run(
        [str(ROOT / "acurio.sh"), "start"],
        cwd=ROOT,
        env={**env, "ACURIO_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = other.stderr.strip().splitlines()
    if other.returncode == 0 or len(lines) != 1 or f"already running on {pgdata}" not in lines[0]:
        raise SystemExit(
            f"smoke: a second start did not refuse with one line (exit {other.returncode})\n"
            f"{other.stdout}{other.stderr}"
        )


def run_once(tmp: Path, port: int, *, second_start: bool = False) -> str:
    pgdata = (tmp / "pgdata").resolve()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(ACURIO_EMBEDDED_PGDATA=str(pgdata), ACURIO_PORT=str(port))
    proc = subprocess.Popen(
        [str(ROOT / "acurio.sh"), "start"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        page = sign_in_and_list(base)
        assert "My reports" in page, "runs list not shown after sign-in"
        if second_start:
            second_start_refuses(env, pgdata)
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    except BaseException:
        proc.kill()
        print(proc.communicate()[0] if proc.stdout else "", file=sys.stderr)
        raise
    if proc.returncode != 0:
        raise SystemExit(f"smoke: exit code {proc.returncode} after Ctrl-C\n{out}")
    where = f"acurio: embedded PostgreSQL: data directory {pgdata}, socket directory "
    if where not in out:
        raise SystemExit(f"smoke: the start did not say where its PostgreSQL lives\n{out}")
    time.sleep(1)
    left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    if left:
        raise SystemExit(f"smoke: processes left behind: {[c.pid for c in left]}")
    if postgres_running(pgdata):
        raise SystemExit("smoke: the embedded PostgreSQL is still running after Ctrl-C")
    return out


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="acurio-smoke-"))
    try:
        first = run_once(tmp, free_port(), second_start=True)
        assert "demo user: demo / demo-acurio" in first, first
        second = run_once(tmp, free_port())
        assert "(existing" in second, "second start did not reuse the data"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        "smoke: ./acurio.sh start came up, said where its PostgreSQL lives, served the demo "
        "user, refused a second start, stopped cleanly, kept data"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
