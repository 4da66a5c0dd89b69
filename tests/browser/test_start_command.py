"""The first README command, end to end: ``./acurio.sh start`` serves web, worker and sweeper.

The launcher runs as a real process. Against the suite's database (``tests.processes``) on a free
port: Chromium signs in as the demo user the launcher created, uploads a corpus thesis with its
library and reads the report; a SIGKILLed worker or sweeper comes back and a job still
completes; a crash loop is bounded; the web process dying stops everything. On the embedded
default (``DATABASE_URL`` unset, a throwaway data directory): the launcher prints where the
server lives, and a second start on the same data directory refuses with one line. Ctrl-C
(SIGINT) stops everything with exit code 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from acurio.launcher import AlreadyRunning, RestartPolicy, describe_exit, hold_lock, lock_path
from tests.corpus import corpus_dir
from tests.prerequisites import missing
from tests.processes import child_env

ROOT = Path(__file__).resolve().parents[2]
THESIS = (
    "# A thesis\n\nAs shown before (Smith, 2020), citations matter.\n\n"
    "## References\n\nSmith, J. (2020). A study of citations. Journal of Tests, 1(2), 3-4.\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launcher:
    """``./acurio.sh start`` as a child process, its output collected line by line."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = int(env["ACURIO_PORT"])
        self.base = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            [str(ROOT / "acurio.sh"), "start"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, pattern: str, timeout: float = 60, start: int = 0) -> re.Match:
        """The first output line from index ``start`` on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines[start:]:
                    if found := re.search(pattern, line):
                        return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no line matching {pattern!r} in:\n{self.output}")
                self._changed.wait(min(left, 0.5))

    def wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (
                f"./acurio.sh start exited early with {self.proc.returncode}:\n{self.output}"
            )
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=2) as resp:
                    if json.load(resp).get("database"):
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the site did not become healthy in time:\n{self.output}")

    def child(self, name: str) -> psutil.Process:
        """The launcher's running child ``name`` (web, worker or sweeper)."""
        marker = {"web": "gunicorn", "worker": "worker", "sweeper": "sweeper"}[name]
        for proc in psutil.Process(self.proc.pid).children():
            try:
                if marker in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                    return proc
            except psutil.NoSuchProcess:
                continue
        raise LookupError(name)

    def wait_for_new_child(self, name: str, old_pid: int, timeout: float = 30) -> psutil.Process:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                proc = self.child(name)
                if proc.pid != old_pid:
                    return proc
            except LookupError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no new {name} after {old_pid} died:\n{self.output}")

    def stop(self, timeout: float = 60) -> int:
        """Ctrl-C, and the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(
                f"./acurio.sh start did not stop in time:\n{self.output}"
            ) from None

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)


def gone(procs: list[psutil.Process], timeout: float = 15) -> list[psutil.Process]:
    """Those of ``procs`` still running after ``timeout`` seconds."""
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture
def launch():
    """Start launchers with an environment; each is stopped (Ctrl-C) at the end of the test."""
    started: list[Launcher] = []

    def start(env: dict[str, str]) -> Launcher:
        launcher = Launcher(env)
        started.append(launcher)
        return launcher

    yield start
    for launcher in started:
        if launcher.proc.poll() is None:
            launcher.stop()


def suite_env(**extra: str) -> dict[str, str]:
    """The launcher's environment on the suite's own database and a free port."""
    return child_env(ACURIO_PORT=str(free_port()), ACURIO_HOST="127.0.0.1", **extra)


# --- The whole flow in a browser ----------------------------------------------------------


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_start_serves_the_whole_flow_to_the_demo_user(chromium, launch):
    from playwright.sync_api import expect

    from jobs.models import AnalysisRun

    launcher = launch(suite_env())
    launcher.wait_healthy()
    base = launcher.base
    thesis = corpus_dir() / "thesis_1_000.docx"
    if not thesis.exists():
        missing(f"no corpus thesis at {thesis}")
    context = chromium.new_context(base_url=base)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo-acurio")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.click("#upload-link")
    page.set_input_files("#id_file", str(thesis))
    page.set_input_files("#id_library", str(thesis.with_suffix(".bib")))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    # The launcher's worker runs the analysis; the tab saves the run and opens the report.
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+/$"), timeout=90_000)
    expect(page.locator(".report-head h1")).to_have_text(thesis.name)
    expect(page.locator("#document mark.cite").first).to_be_visible()
    expect(page.locator("#judgment")).to_contain_text("/ 100")
    run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    run = AnalysisRun.objects.get(pk=run_id)
    assert run.saved_by == "client"
    assert run.owner.username == "demo"
    context.close()

    assert launcher.stop() == 0, launcher.output
    assert "acurio: stopped" in launcher.output


# --- Crashed children ---------------------------------------------------------------------


METRICS_TOKEN = "start-test-metrics-token-0123456789"


def wait_complete(job, timeout: float = 90) -> None:
    from jobs.models import JobStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in (JobStatus.COMPLETE, JobStatus.FAILED):
            break
        time.sleep(0.3)
    assert job.status == JobStatus.COMPLETE, (job.status, job.error)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_or_sweeper_is_restarted_and_a_job_still_completes(launch, user):
    from jobs.pipeline import submit_analysis

    # One launcher for both children, one after the other: each kill is checked on its own
    # (its one line, the others left alone, a job completing after it).
    launcher = launch(suite_env(ACURIO_METRICS_TOKEN=METRICS_TOKEN))
    launcher.wait_healthy()
    # The sweeper first: its job then runs on the launcher's first worker, the next one on the
    # worker that replaced the killed one.
    steps_before = 0.0
    for name in ("sweeper", "worker"):
        victim = launcher.child(name)
        others = {n: launcher.child(n).pid for n in ("web", "worker", "sweeper") if n != name}
        mark = len(launcher.lines)
        victim.send_signal(signal.SIGKILL)

        launcher.wait_for_line(
            rf"^acurio: {name} was killed by SIGKILL; restarting it in 1 s$", start=mark
        )
        reborn = launcher.wait_for_new_child(name, victim.pid)
        assert reborn.is_running()
        # The others were left alone: same processes, the launcher did not stop.
        assert {n: launcher.child(n).pid for n in others} == others
        assert launcher.proc.poll() is None
        job = submit_analysis(user, f"thesis-{name}.md", THESIS.encode())
        wait_complete(job)
        crash_lines = [line for line in launcher.lines[mark:] if line.startswith("acurio: ")]
        assert crash_lines == [f"acurio: {name} was killed by SIGKILL; restarting it in 1 s"]
        # The launcher gives its children one PROMETHEUS_MULTIPROC_DIR: the web's /metrics
        # shows the steps the worker ran, this job's too (a killed worker's count stays).
        request = urllib.request.Request(
            f"{launcher.base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            page = resp.read().decode()
        completed = re.search(
            r'^acurio_durable_steps_total\{kind="task",outcome="completed"\} (\S+)$', page, re.M
        )
        assert completed and float(completed[1]) >= steps_before + 1, page
        steps_before = float(completed[1])

    assert launcher.stop() == 0, launcher.output


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_crash_loop_stops_everything_instead_of_spinning(launch):
    launcher = launch(suite_env(ACURIO_RESTARTS_PER_MINUTE="2", ACURIO_RESTART_DELAY_SECONDS="0.2"))
    launcher.wait_healthy()
    sweeper = launcher.child("sweeper")
    pid = launcher.child("worker").pid
    for delay in ("0.2", "0.4"):
        psutil.Process(pid).send_signal(signal.SIGKILL)
        launcher.wait_for_line(
            rf"^acurio: worker was killed by SIGKILL; restarting it in {delay} s$"
        )
        pid = launcher.wait_for_new_child("worker", pid).pid
    everyone = launcher.descendants()
    psutil.Process(pid).send_signal(signal.SIGKILL)

    assert launcher.wait() == 1, launcher.output
    launcher.wait_for_line(
        r"^acurio: worker was killed by SIGKILL, more than 2 crashes within a minute; "
        r"stopping the rest$"
    )
    assert "acurio: stopped" in launcher.output
    assert not gone(everyone), launcher.output
    assert not sweeper.is_running()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_web_process_dying_stops_everything(launch):
    launcher = launch(suite_env())
    launcher.wait_healthy()
    everyone = launcher.descendants()
    launcher.child("web").send_signal(signal.SIGKILL)

    assert launcher.wait() == 1, launcher.output
    launcher.wait_for_line(r"^acurio: web was killed by SIGKILL; stopping the rest$")
    assert not [line for line in launcher.lines if line.startswith("acurio: worker")]
    assert not gone(everyone), launcher.output


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux parent-death signal")
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_children_stop_when_the_launcher_is_killed(launch):
    launcher = launch(suite_env())
    launcher.wait_healthy()
    children = [launcher.child(n) for n in ("web", "worker", "sweeper")]
    os.kill(launcher.proc.pid, signal.SIGKILL)
    launcher.proc.wait()
    # Each child got SIGTERM from the kernel (parent-death signal) and drained.
    assert not gone(children, timeout=30)


# --- The embedded default: where it lives, one launcher per data directory ----------------


def _postgres_of(pgdata: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture
def embedded_home():
    """A throwaway home for an embedded data directory (not pytest's tmp tree: the server runs
    as another user when the tests run as root, and pytest may make its tree root-only)."""
    home = Path(tempfile.mkdtemp(prefix="acurio-start-"))
    try:
        yield home
    finally:
        for proc in _postgres_of(home / "pgdata"):  # only after a failed test
            proc.terminate()
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
def test_embedded_start_prints_its_server_and_a_second_start_refuses(launch, embedded_home):
    import psycopg

    pgdata = (embedded_home / "pgdata").resolve()
    env = suite_env(ACURIO_EMBEDDED_PGDATA=str(pgdata))
    del env["DATABASE_URL"]  # the newcomer's default: the embedded server
    first = launch(env)
    first.wait_healthy()

    where = first.wait_for_line(
        r"^acurio: embedded PostgreSQL: data directory (\S+), socket directory (\S+), "
        r"port (\d+) \(DATABASE_URL=(\S+)\)$"
    )
    data_dir, socket_dir, port, url = where.groups()
    assert Path(data_dir) == pgdata
    assert (Path(socket_dir) / f".s.PGSQL.{port}").is_socket()
    with psycopg.connect(url, connect_timeout=5) as conn:
        name, directory = conn.execute(
            "SELECT current_database(), current_setting('data_directory')"
        ).fetchone()
    assert (name, Path(directory)) == ("acurio", pgdata)
    children = {n: first.child(n).pid for n in ("web", "worker", "sweeper")}

    second = subprocess.run(
        [str(ROOT / "acurio.sh"), "start"],
        cwd=ROOT,
        env={**env, "ACURIO_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert second.stdout == ""
    assert second.stderr.strip().splitlines() == [
        f"acurio: another ./acurio.sh start (pid {first.proc.pid}) is already running on "
        f"{pgdata}; stop it first (Ctrl-C in its terminal)"
    ]
    # The first is untouched: same children, nobody else joined its server.
    assert {n: first.child(n).pid for n in children} == children
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == [first.proc.pid]
    for proc in psutil.process_iter(["cmdline"]):
        if "manage.py" in " ".join(proc.info["cmdline"] or []):
            try:
                if proc.environ().get("ACURIO_EMBEDDED_PGDATA") == str(pgdata):
                    assert proc.ppid() == first.proc.pid, proc.info["cmdline"]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue

    assert first.stop() == 0, first.output
    time.sleep(1)
    assert not _postgres_of(pgdata), "the embedded PostgreSQL outlived the launcher"


# --- The launcher's parts -----------------------------------------------------------------


def test_the_lock_is_exclusive_and_released_with_its_descriptor(tmp_path):
    pgdata = tmp_path / "pgdata"
    fd = hold_lock(pgdata)
    assert lock_path(pgdata).read_text() == f"{os.getpid()}\n"
    with pytest.raises(AlreadyRunning, match=rf"\(pid {os.getpid()}\) is already running on"):
        hold_lock(pgdata)
    os.close(fd)
    os.close(hold_lock(pgdata))


def test_a_killed_launcher_leaves_no_stale_lock(tmp_path):
    pgdata = tmp_path / "pgdata"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from acurio.launcher import hold_lock;"
            "hold_lock(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)",
            str(pgdata),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(AlreadyRunning, match=rf"\(pid {holder.pid}\)"):
            hold_lock(pgdata)
    finally:
        holder.kill()
        holder.wait()
    # The lock file is still there, with the dead pid in it, and means nothing.
    assert lock_path(pgdata).read_text() == f"{holder.pid}\n"
    os.close(hold_lock(pgdata))


def test_restart_delay_doubles_and_gives_up_past_the_bound():
    policy = RestartPolicy(limit=3, base_delay=1.0, max_delay=3.0, window=60.0)
    assert [policy.crashed(t) for t in (0.0, 1.0, 2.0)] == [1.0, 2.0, 3.0]
    assert policy.crashed(3.0) is None  # a fourth crash within a minute
    # A minute later the old crashes no longer count.
    calm = RestartPolicy(limit=3, base_delay=1.0)
    for t in (0.0, 10.0, 20.0):
        calm.crashed(t)
    assert calm.crashed(81.0) == 1.0


def test_exits_are_described_by_code_or_signal():
    assert describe_exit(3) == "exited with 3"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(-200) == "was killed by signal 200"
