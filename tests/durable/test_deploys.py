"""Engine safety with real worker processes: a rolling deploy (old and new code side by side),
a frozen worker holding row locks, and timers exact to 50 ms."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from django.db import connection
from django.db.models import Count, F

from jobs.durable import sleep, start, status, task
from jobs.durable.models import Instance, Step
from tests.durable.support import rows, run_manage, spawn_worker, wait_for
from tests.durable.test_processes import (  # checkpoint_log: a fixture
    assert_every_step_ran_exactly_once,
    checkpoint_log,  # noqa: F401
)
from tests.processes import ROOT, child_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rows_table"),
    pytest.mark.slow,
]

S = "tests.durable.steps."
MODULE = "deploy_flow_tasks"
OLD_CODE = """
from tests.durable.steps import record_row, record_slowly


def first(ctx):
    record_row(ctx, "first")
    return "first"


def slow_first(ctx):
    return record_slowly(ctx)
"""
NEW_CODE = (
    OLD_CODE
    + """

def second(ctx):
    record_row(ctx, "second")
    return "second"


def slow_second(ctx):
    return record_slowly(ctx)
"""
)


@pytest.fixture
def code_dirs(tmp_path, monkeypatch):
    """Two releases of one task module: ``old`` lacks the task ``second``. The test process
    has the new one (start() checks that tasks import)."""
    dirs = {}
    for release, code in (("old", OLD_CODE), ("new", NEW_CODE)):
        path = tmp_path / release
        path.mkdir()
        (path / f"{MODULE}.py").write_text(textwrap.dedent(code))
        dirs[release] = str(path)
    monkeypatch.syspath_prepend(dirs["new"])
    yield dirs
    sys.modules.pop(MODULE, None)


def stop(*procs: subprocess.Popen) -> list[str]:
    outputs = []
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        outputs.append(out or "")
    return outputs


def test_rolling_deploy_old_worker_hands_new_tasks_back(code_dirs):
    old = spawn_worker(
        "--poll-interval", "0.2", PYTHONPATH=code_dirs["old"], ACURIO_CODE_VERSION="rel-old"
    )
    new = None
    try:
        flow = task(f"{MODULE}.first") >> task(f"{MODULE}.second", max_attempts=1)
        ids = [start(flow) for _ in range(3)]
        # The old worker runs every first step and cannot import the second: it hands each
        # back (more than once) without spending its only attempt.
        wait_for(
            lambda: Step.objects.filter(node_id=2, error__contains="cannot run it").count() == 3,
            timeout=60,
            what="the old worker handing the new steps back",
        )
        time.sleep(2.5)  # long enough for a second hand-back of each
        assert all(status(i) == "running" for i in ids)
        new = spawn_worker(
            "--poll-interval", "0.2", PYTHONPATH=code_dirs["new"], ACURIO_CODE_VERSION="rel-new"
        )
        wait_for(lambda: all(status(i) == "completed" for i in ids), timeout=60, what="done")
    finally:
        outputs = stop(old, *([new] if new else []))
    assert "handing it back" in outputs[0]
    assert "(code version rel-old," in outputs[0] and "(code version rel-new," in outputs[1]
    for iid in ids:
        first, second = Step.objects.filter(instance_id=iid, kind="task").order_by("node_id")
        assert first.code_version == "rel-old" and second.code_version == "rel-new"
        assert second.status == "completed" and second.max_attempts > 1, "hand-backs spent none"
        assert Instance.objects.get(pk=iid).code_version  # the starter's version, recorded
    assert sorted(tag for _, tag, _, _ in rows()) == ["first"] * 3 + ["second"] * 3


def test_workers_limited_to_a_version_leave_other_instances_alone(code_dirs):
    iid = start(task(f"{MODULE}.first"))
    started_by = Instance.objects.get(pk=iid).code_version
    assert started_by, "the starting session's code version"
    code = {"PYTHONPATH": code_dirs["new"]}
    other = spawn_worker("--poll-interval", "0.2", "--versions", "some-other-release", **code)
    try:
        wait_for(
            lambda: Step.objects.filter(instance_id=iid, error__contains="runs only").exists(),
            timeout=30,
            what="the limited worker handing the step back",
        )
        assert status(iid) == "running"
        same = spawn_worker("--poll-interval", "0.2", "--versions", f"x,{started_by}", **code)
        try:
            wait_for(lambda: status(iid) == "completed", timeout=30, what="completion")
        finally:
            stop(same)
    finally:
        stop(other)
    assert len(rows("first")) == 1


def _backend_in_transaction(marker: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s"
            " AND state = 'idle in transaction'",
            [marker],
        )
        return cursor.fetchone() is not None


def test_a_frozen_workers_step_is_recovered_within_a_lease_and_a_tick():
    lease, tick = 2.0, 0.3
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_rows (instance_id, tag, note)"
            " VALUES ('00000000-0000-0000-0000-000000000000', 'shared', '')"
        )
    env = {"ACURIO_LEASE_SECONDS": str(lease)}
    frozen = spawn_worker("--poll-interval", "0.2", **env)
    healthy = sweeper = None
    try:
        iid = start(task(S + "lock_and_linger"), input={"seconds": 60})
        # The frozen worker's session holds the shared row's lock inside its transaction.
        wait_for(lambda: _backend_in_transaction(f"%:{frozen.pid}:%"), timeout=30, what="the lock")
        # The rescuers are up before the freeze (a busy machine starts Django slowly).
        healthy = spawn_worker("--poll-interval", "0.2", **env)
        sweeper = subprocess.Popen(
            [sys.executable, "-m", "tests.durable.sweep_loop"],
            cwd=ROOT,
            env=child_env(**env),
        )
        wait_for(lambda: _worker_listening(healthy.pid), timeout=60, what="the second worker")
        wait_for(_sweeper_running, timeout=60, what="the sweeper")
        frozen.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        wait_for(lambda: status(iid) == "completed", timeout=60, what="recovery")
        took = time.monotonic() - stopped_at
    finally:
        # The frozen worker is done for (its session was ended): killed, not asked to drain,
        # which would wait out its step's 60 s linger and then the 30 s stop timeout.
        frozen.kill()
        frozen.wait(timeout=30)
        if sweeper is not None:
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(timeout=30)
        stop(*([healthy] if healthy else []))
    assert took <= lease + tick + 2, f"recovered after {took:.1f}s"
    step = Step.objects.get(instance_id=iid, kind="task")
    assert (step.crashes, step.output) == (1, 2), "one crash; the second claim completed"
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM engine_rows WHERE tag = 'shared'")
        assert cursor.fetchone()[0] == "x", "the frozen attempt's update was rolled back"
    assert len(rows("lingered")) == 1, "only the completed attempt's row remains"


def _sweeper_running() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid()",
            ['%"lease_expires_at" <%'],
        )
        return cursor.fetchone() is not None


def _idle_worker() -> subprocess.Popen:
    proc = spawn_worker("--poll-interval", "1")
    wait_for(lambda: _worker_listening(proc.pid), timeout=30, what="the worker to connect")
    return proc


def _worker_listening(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s", [f"%:{pid}:%"]
        )
        return cursor.fetchone() is not None


def test_sleep_and_short_backoffs_are_exact_to_50_ms():
    proc = _idle_worker()
    try:
        time.sleep(0.5)  # the worker is waiting, its poll a second away
        slept = start(sleep(0.2) >> task(S + "fast"))
        retried = start(
            task(S + "fail_first", backoff=0.2, backoff_cap=0.2, max_attempts=2),
            input={"fail_times": 1},
        )
        wait_for(
            lambda: status(slept) == "completed" and status(retried) == "completed",
            timeout=30,
            what="both",
        )
    finally:
        stop(proc)
    wait = Step.objects.get(instance_id=slept, kind="sleep")
    # When the timer fired: the claim that took the due step (its run is a checkpoint more).
    late = (wait.started_at - wait.created_at).total_seconds() - 0.2
    assert 0 <= late <= 0.05, f"sleep(0.2) fired {late * 1000:.0f} ms late"
    step = Step.objects.get(instance_id=retried, kind="task")
    # The retry waits 0.1..0.2 s (jitter in the upper half of the window), not a poll.
    total = (step.finished_at - step.created_at).total_seconds()
    assert step.attempts == 2 and total <= 0.2 + 0.1, f"backoff of 0.2 s took {total:.2f}s"


def test_rolling_deploy_under_sigkill_chaos(code_dirs, checkpoint_log, settings):  # noqa: F811
    """Old and new workers side by side, workflows started by both releases, SIGKILLs in
    between: nothing fails, nothing runs twice."""
    settings.ACURIO_MAX_ATTEMPTS = 3  # errors would show; crashes have their own bound
    per_release = 60
    old_flow = f"task('{MODULE}.slow_first') >> task('{MODULE}.slow_first')"
    new_flow = f"task('{MODULE}.slow_first') >> task('{MODULE}.slow_second')"
    for release, flow in (("old", old_flow), ("new", new_flow)):
        started = run_manage(
            "shell",
            "-c",
            "from django.db import transaction\n"
            "from jobs.durable import start, task\n"
            f"with transaction.atomic():\n    [start({flow}) for _ in range({per_release})]\n",
            PYTHONPATH=code_dirs[release],
            ACURIO_CODE_VERSION=f"rel-{release}",
        )
        assert started.returncode == 0, started.stderr[-3000:]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.durable.chaos",
            "--workers",
            "4",
            "--timeout",
            "150",
            "--min-interval",
            "0.05",
            "--max-interval",
            "0.12",
            "--min-kills",
            "60",
            "--releases",
            f"rel-old={code_dirs['old']},rel-new={code_dirs['new']}",
        ],
        cwd=ROOT,
        env=child_env(ACURIO_LEASE_SECONDS="1", ACURIO_MAX_ATTEMPTS="3", LOG_LEVEL="ERROR"),
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print("rolling-deploy chaos figures:", figures)
    assert figures["unfinished"] == 0 and figures["crashes"] == 0
    assert figures["kills"] >= 50
    failed = list(Instance.objects.exclude(status="completed").values_list("error", flat=True))
    assert failed == []
    assert_every_step_ran_exactly_once(per_release * 2 * 2)
    versions = dict(
        Instance.objects.values_list("code_version")
        .annotate(n=Count("id"))
        .values_list("code_version", "n")
    )
    assert versions == {"rel-old": per_release, "rel-new": per_release}, "started by both"
    seconds = Step.objects.filter(kind="task", node_id=2, instance__code_version="rel-new")
    assert set(seconds.values_list("code_version", flat=True)) == {"rel-new"}, (
        "only new workers ran the new task"
    )
    # A hand-back raises max_attempts without spending one; so does a crash.
    handed = Step.objects.filter(kind="task", max_attempts__gt=F("crashes") + 3).count()
    print(f"steps handed back by an old worker at least once: {handed}")
