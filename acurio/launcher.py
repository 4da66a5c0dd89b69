"""Start the whole system for development: web, worker and sweeper, on one database.

``./acurio start`` runs this. With ``DATABASE_URL`` unset it starts the embedded PostgreSQL
and holds a handle on it for as long as the system runs; each child process joins the same
server. Migrations run, a demo user is ensured and its credentials printed. Ctrl-C (or
SIGTERM) stops every child, waits for them, and lets the last handle stop PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = os.environ.get("ACURIO_HOST", "127.0.0.1")
PORT = os.environ.get("ACURIO_PORT", "8000")


def _children() -> list[tuple[str, list[str]]]:
    py = sys.executable
    manage = str(BASE_DIR / "manage.py")
    return [
        (
            "web",
            [
                py,
                "-m",
                "gunicorn",
                "acurio.wsgi",
                "--bind",
                f"{HOST}:{PORT}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--access-logfile",
                "-",
                "--graceful-timeout",
                "10",
            ],
        ),
        ("worker", [py, manage, "worker"]),
        ("sweeper", [py, manage, "sweeper"]),
    ]


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    os.chdir(BASE_DIR)

    import django

    from acurio.errors import friendly_errors

    with friendly_errors():
        django.setup()  # starts (or joins) the embedded PostgreSQL when DATABASE_URL is unset
        from django.conf import settings
        from django.core.management import call_command

        db = settings.DATABASES["default"]
        if not os.environ.get("DATABASE_URL"):
            # Children join the server this process started; hand them its URL so each does
            # not race to start it.
            print(f"acurio: embedded PostgreSQL at {db.get('HOST')}", flush=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("demo_user")

    procs: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(signum, _frame) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        print(f"\nacurio: {signal.Signals(signum).name} received, stopping…", flush=True)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    for name, cmd in _children():
        # Own process group: a terminal's Ctrl-C reaches only us, and we stop children in order.
        procs[name] = subprocess.Popen(cmd, cwd=BASE_DIR, start_new_session=True)
    print(
        f"acurio: web on http://{HOST}:{PORT}/ (worker and sweeper running); Ctrl-C stops all",
        flush=True,
    )

    exit_code = 0
    while not stopping:
        for name, proc in procs.items():
            if proc.poll() is not None:
                print(
                    f"acurio: {name} exited with {proc.returncode}; stopping the rest", flush=True
                )
                exit_code = 1
                stopping = True
                break
        time.sleep(0.3)

    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"acurio: {name} did not stop in time; killing it", flush=True)
            proc.kill()
            proc.wait()
    print("acurio: stopped", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
