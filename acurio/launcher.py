"""Start the whole system for development: web, worker and sweeper, on one database.

``./acurio.sh start`` runs this. With ``DATABASE_URL`` unset it starts the embedded PostgreSQL,
prints where it lives (data directory, socket directory, port, a URL to reach it) and holds a
handle on it for as long as the system runs; the children connect to that server through the
URL, so the launcher alone owns it. Migrations run, a demo user is ensured and its credentials
printed. Ctrl-C (or SIGTERM) stops every child, waits for them, and lets the last handle stop
PostgreSQL.

One launcher per embedded data directory: it holds an exclusive ``flock`` on
``<data dir>.launcher.lock`` for its whole life, and a second ``start`` on the same data
directory refuses with one line instead of starting a second worker and sweeper beside the
first. The kernel drops the lock when the process ends however it ends, so a crashed launcher
never leaves a stale lock behind.

Web, worker and sweeper share one ``PROMETHEUS_MULTIPROC_DIR`` (:func:`metrics_dir`, emptied at
every start), so ``/metrics`` adds up the counters of all three, not only the web's.

A worker or sweeper that exits while nobody asked it to (a crash, the kernel's OOM killer) is
restarted after a doubling delay, with one line in the log; past ``ACURIO_RESTARTS_PER_MINUTE``
crashes of one child within a minute the launcher stops everything instead of spinning in a
crash loop. The web process is not restarted: gunicorn's master already replaces its own dead
workers, so the master itself exiting means a cause a restart would not cure (the port is taken,
the configuration is wrong) and everything stops with its exit code.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = os.environ.get("ACURIO_HOST", "127.0.0.1")
PORT = os.environ.get("ACURIO_PORT", "8000")

# Children the launcher restarts after a crash; the rest (web) stop everything when they exit.
RESTARTABLE = frozenset({"worker", "sweeper"})
# The worker's threads: more than the steps of large uploads that may run at once
# (ACURIO_LARGE_ANALYSIS_SLOTS, 2), so a small thesis always finds a free one. The analysis
# steps that take CPU run in child processes of their own, so threads do not share one core.
WORKER_THREADS = 3
_PR_SET_PDEATHSIG = 1


class AlreadyRunning(RuntimeError):
    """Another launcher holds the lock of this data directory."""


def lock_path(pgdata: Path) -> Path:
    """The launcher's lock file for ``pgdata``: beside it, since initdb wants an empty directory."""
    return pgdata.with_name(pgdata.name + ".launcher.lock")


def hold_lock(pgdata: Path) -> int:
    """Take the launcher lock of ``pgdata`` and return its descriptor; keep it open to hold it.

    Raises :class:`AlreadyRunning` (naming the holder's pid) when another launcher has it.
    """
    path = lock_path(pgdata)
    path.parent.mkdir(parents=True, exist_ok=True)
    # os.open descriptors are not inherited by children (PEP 446): a child that outlives the
    # launcher never keeps the lock.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise AlreadyRunning(
            f"another ./acurio.sh start (pid {holder}) is already running on {pgdata}; "
            "stop it first (Ctrl-C in its terminal)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


@dataclass
class RestartPolicy:
    """When to restart a crashed child: after ``base_delay`` doubling per recent crash (capped
    at ``max_delay``), and not at all past ``limit`` crashes within ``window`` seconds."""

    limit: int = 5
    base_delay: float = 1.0
    max_delay: float = 30.0
    window: float = 60.0
    crashes: list[float] = field(default_factory=list)

    def crashed(self, now: float) -> float | None:
        """Record a crash at ``now``; the delay before the restart, or None to give up."""
        self.crashes = [t for t in self.crashes if now - t < self.window]
        self.crashes.append(now)
        if len(self.crashes) > self.limit:
            return None
        return min(self.max_delay, self.base_delay * 2 ** (len(self.crashes) - 1))


def describe_exit(returncode: int) -> str:
    """``exited with 3`` or ``was killed by SIGKILL``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with {returncode}"


def metrics_dir() -> Path:
    """The ``PROMETHEUS_MULTIPROC_DIR`` of this launcher's children, emptied of earlier runs'
    files: ``PROMETHEUS_MULTIPROC_DIR`` if set, else ``var/metrics/<port>`` (one per port, so
    launchers serving other ports do not empty each other's).

    prometheus-client's multiprocess mode keeps one file per process id and adds up every file
    it finds, dead processes' included: files left from an earlier run would be counted again.
    Only its own files (``*.db``) are removed, in case the directory given holds others."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    path = Path(configured) if configured else BASE_DIR / "var" / "metrics" / PORT
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink(missing_ok=True)
    return path


def _children() -> dict[str, list[str]]:
    py = sys.executable
    manage = str(BASE_DIR / "manage.py")
    return {
        "web": [
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
            # gunicorn's control socket has one path per user ($HOME/.gunicorn/gunicorn.ctl):
            # two launchers (other data directories, the test suite) would take it from each
            # other, and nothing here uses it.
            "--no-control-socket",
        ],
        "worker": [py, manage, "worker", "--concurrency", str(WORKER_THREADS)],
        "sweeper": [py, manage, "sweeper"],
    }


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes a child get SIGTERM when the launcher dies (Linux).

    The children run in their own sessions (so a terminal's Ctrl-C reaches only the launcher);
    without this a SIGKILLed launcher would leave them running, holding the port and the jobs.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the hook only calls it
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the launcher died before the hook ran
            os._exit(1)

    return hook


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        sys.stderr.write(f"acurio: {name} must be a number\n")
        raise SystemExit(1) from None


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    os.chdir(BASE_DIR)

    embedded = not os.environ.get("DATABASE_URL")
    if embedded:
        from acurio import embedded as embedded_db

        # Before Django starts (or joins) the server: a refused second start never touches it.
        try:
            hold_lock(embedded_db.data_dir())  # its descriptor stays open until the process ends
        except AlreadyRunning as exc:
            sys.stderr.write(f"acurio: {exc}\n")
            return 1
    # After the lock (a refused second start must not empty the first one's files), before
    # Django starts: every child inherits it from this environment.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir())

    import django

    from acurio.errors import friendly_errors

    with friendly_errors():
        django.setup()  # starts (or joins) the embedded PostgreSQL when DATABASE_URL is unset
        from django.conf import settings
        from django.core.management import call_command

        if embedded:
            where = embedded_db.location()
            dbname = settings.DATABASES["default"]["NAME"]
            # Children connect to the server this process holds instead of registering their
            # own handles, so a killed child leaves no handle behind and one owner stops it.
            os.environ["DATABASE_URL"] = where.url(dbname)
            print(
                f"acurio: embedded PostgreSQL: data directory {where.data_dir}, "
                f"socket directory {where.socket_dir}, port {where.port} "
                f"(DATABASE_URL={where.url(dbname)})",
                flush=True,
            )
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("demo_user")

    limit = int(_env_float("ACURIO_RESTARTS_PER_MINUTE", 5))
    base_delay = _env_float("ACURIO_RESTART_DELAY_SECONDS", 1.0)
    commands = _children()
    policies = {name: RestartPolicy(limit=limit, base_delay=base_delay) for name in RESTARTABLE}
    procs: dict[str, subprocess.Popen | None] = {}
    restart_at: dict[str, float] = {}
    preexec = _die_with_parent()
    stopping = False

    def stop(signum, _frame) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        print(f"\nacurio: {signal.Signals(signum).name} received, stopping…", flush=True)

    def spawn(name: str) -> subprocess.Popen:
        # Own process group: a terminal's Ctrl-C reaches only us, and we stop children in order.
        return subprocess.Popen(
            commands[name], cwd=BASE_DIR, start_new_session=True, preexec_fn=preexec
        )

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    for name in commands:
        procs[name] = spawn(name)
    print(
        f"acurio: web on http://{HOST}:{PORT}/ (worker and sweeper running); Ctrl-C stops all",
        flush=True,
    )

    exit_code = 0
    while not stopping:
        now = time.monotonic()
        for name, proc in procs.items():
            if proc is None:
                if now >= restart_at[name]:
                    procs[name] = spawn(name)
                continue
            code = proc.poll()
            if code is None:
                continue
            if name not in RESTARTABLE:
                print(f"acurio: {name} {describe_exit(code)}; stopping the rest", flush=True)
                exit_code, stopping = 1, True
                break
            delay = policies[name].crashed(now)
            if delay is None:
                print(
                    f"acurio: {name} {describe_exit(code)}, more than {limit} crashes within "
                    "a minute; stopping the rest",
                    flush=True,
                )
                exit_code, stopping = 1, True
                break
            print(f"acurio: {name} {describe_exit(code)}; restarting it in {delay:g} s", flush=True)
            procs[name] = None
            restart_at[name] = now + delay
        time.sleep(0.2)

    running = [(name, proc) for name, proc in procs.items() if proc is not None]
    for _name, proc in running:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for name, proc in running:
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
