"""The sweeper: one tick driven directly, and the daemon as real processes with real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent, SweeperHeartbeat
from jobs.runs import judge_run
from jobs.sweeper import Sweeper

from .helpers import FakeJudge, run_version, saved

ROOT = Path(__file__).resolve().parents[2]
GRACE = 120


def tick_and_wait(sweeper: Sweeper) -> None:
    sweeper.tick()
    assert sweeper.wait_for_backstop(timeout=60)


# --- one tick, driven directly ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_tick_records_closed_tab_run_after_grace_and_judges_it(make_job):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        job = make_job()  # finished; the tab was closed before it did
        sweeper = Sweeper(name="test:1", grace_seconds=GRACE, batch=10)
        tick_and_wait(sweeper)
        assert not AnalysisRun.objects.exists()  # still within the grace

        clock.shift(timedelta(seconds=GRACE + 5))
        tick_and_wait(sweeper)
        run = AnalysisRun.objects.get(pk=job.run_id)
        assert (run.saved_by, run.job_id, run.judged_job_id) == ("worker", job.pk, job.pk)
        assert run.judgment["summary"].startswith("1 of 1 citation verified")
        event = RunEvent.objects.get(kind=RunEvent.Kind.RECORDED)
        assert (event.job_id, event.sweeper, event.lag_seconds) == (job.pk, "test:1", GRACE + 5)

        beat = SweeperHeartbeat.objects.get(name="test:1")
        assert beat.last_tick_at == timezone.now() and beat.last_backstop_at == timezone.now()
        assert beat.backstop_in_flight is False and beat.tick_seconds == sweeper.tick_seconds


@pytest.mark.django_db(transaction=True)
def test_tick_never_touches_an_open_tab_run(make_job):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        job = make_job()
        saved(job, "client")  # the tab saw the terminal status and POSTed
        judge_run(job.run_id)
        version = run_version(job.run_id)
        events = list(RunEvent.objects.values_list("kind", flat=True))
        assert events == [RunEvent.Kind.JUDGED]  # the judgment's own event
        clock.shift(timedelta(days=2))
        tick_and_wait(Sweeper(grace_seconds=GRACE, ttl_hours=72))
        assert run_version(job.run_id) == version  # not one tuple
        assert list(RunEvent.objects.values_list("kind", flat=True)) == events


@pytest.mark.django_db(transaction=True)
def test_tick_only_judges_an_unjudged_open_tab_run(make_job):
    """The client's write stays the only write of the content; the judge adds its verdict."""
    with time_machine.travel(timezone.now(), tick=False) as clock:
        job = make_job()
        saved(job, "client")
        content = ["job_id", "saved_by", "saved_at", "doc_html", "report", "status", "document"]
        before = AnalysisRun.objects.values(*content).get(pk=job.run_id)
        clock.shift(timedelta(seconds=GRACE + 1))
        tick_and_wait(Sweeper(grace_seconds=GRACE))
        run = AnalysisRun.objects.get(pk=job.run_id)
        assert AnalysisRun.objects.values(*content).get(pk=job.run_id) == before
        assert run.judged_job_id == job.pk
        assert not RunEvent.objects.filter(kind=RunEvent.Kind.RECORDED).exists()
        judged = RunEvent.objects.get(kind=RunEvent.Kind.JUDGED)
        assert (judged.run_id, judged.details["source"]) == (job.run_id, "judge_backstop")


@pytest.mark.django_db(transaction=True)
def test_tick_runs_lease_recovery_every_time(monkeypatch):
    calls = []
    monkeypatch.setattr("jobs.durable.recover_expired_leases", lambda: calls.append(1) or 0)
    sweeper = Sweeper()
    tick_and_wait(sweeper)
    tick_and_wait(sweeper)
    assert len(calls) == 2


@pytest.mark.django_db(transaction=True)
def test_tick_calls_the_real_engine_recovery():
    # The engine's own function, against this database: nothing expired, nothing recovered.
    assert Sweeper().recover_leases() == 0


@pytest.mark.django_db(transaction=True)
def test_backstop_never_stacks_and_recovery_is_not_delayed(monkeypatch):
    release = threading.Event()
    recoveries = []
    monkeypatch.setattr("jobs.durable.recover_expired_leases", lambda: recoveries.append(1) or 0)
    sweeper = Sweeper(name="test:stack")
    monkeypatch.setattr(sweeper, "backstop", lambda: release.wait(30))
    sweeper.tick()
    assert sweeper.backstop_in_flight
    assert SweeperHeartbeat.objects.get(name="test:stack").backstop_in_flight is True
    sweeper.tick()  # the first backstop is still running: no second one, recovery still runs
    assert sweeper.start_backstop() is False
    assert len(recoveries) == 2
    release.set()
    assert sweeper.wait_for_backstop(timeout=30)
    assert SweeperHeartbeat.objects.get(name="test:stack").backstop_in_flight is False
    assert sweeper.start_backstop() is True
    sweeper.wait_for_backstop(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_failing_step_does_not_stop_the_tick(monkeypatch, make_job):
    def broken():
        raise RuntimeError("engine unavailable")

    sweeper = Sweeper(grace_seconds=0)
    monkeypatch.setattr(sweeper, "recover_leases", broken)
    job = make_job()
    tick_and_wait(sweeper)
    assert AnalysisRun.objects.filter(pk=job.run_id).exists()


@pytest.mark.django_db(transaction=True)
def test_run_once_in_process_records_and_restores_signal_handlers(make_job):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    job = make_job()
    assert Sweeper(name="test:once", grace_seconds=0).run(once=True) == 0
    assert AnalysisRun.objects.get(pk=job.run_id).judged_job_id == job.pk
    assert SweeperHeartbeat.objects.get(name="test:once").stopped_at is not None
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


# --- judge backstop and trim --------------------------------------------------------------


@pytest.mark.django_db
def test_judge_backstop_catches_recorded_but_unjudged_run(make_job):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        job = make_job()
        saved(job, "worker")  # recorded by a sweeper that died before judging
        sweeper = Sweeper(name="test:judge", grace_seconds=GRACE)
        assert sweeper.judge_backstop() == 0  # within the grace its recorder may still judge
        clock.shift(timedelta(seconds=GRACE))
        assert sweeper.judge_backstop() == 1
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judged_job_id == job.pk and run.judgment["score"] == 100
    event = RunEvent.objects.get(kind=RunEvent.Kind.JUDGED)
    assert (event.run_id, event.job_id, event.sweeper) == (job.run_id, job.pk, "test:judge")
    assert sweeper.judge_backstop() == 0


@pytest.mark.django_db
def test_judge_backstop_rejudges_a_run_that_moved_to_a_newer_job(make_job):
    first = make_job()
    saved(first, "client")
    Sweeper(grace_seconds=0).judge_backstop()
    second = make_job(run_id=first.run_id)
    saved(second, "client")
    assert Sweeper(grace_seconds=0).judge_backstop() == 1
    assert AnalysisRun.objects.get(pk=first.run_id).judged_job_id == second.pk


@pytest.mark.django_db
def test_trim_clears_doc_html_only_where_the_run_exists(make_job):
    old = timezone.now() - timedelta(hours=30)
    stored = make_job(finished_at=old)
    saved(stored, "client")
    ghost = make_job(finished_at=old)  # no run row: its body is the only copy
    recent = make_job()
    saved(recent, "client")
    orphan = make_job(finished_at=old)  # marked, yet no run row exists: still kept
    AnalysisJob.objects.filter(pk=orphan.pk).update(run_saved_at=timezone.now())

    assert Sweeper(name="test:trim", ttl_hours=24).trim() == 1
    bodies = dict(AnalysisJob.objects.values_list("pk", "doc_html"))
    assert bodies[stored.pk] is None
    assert bodies[ghost.pk] and bodies[recent.pk] and bodies[orphan.pk]
    assert AnalysisRun.objects.get(pk=stored.run_id).doc_html == stored.doc_html
    event = RunEvent.objects.get(kind=RunEvent.Kind.TRIMMED)
    assert event.details == {"count": 1, "ttl_hours": 24} and event.sweeper == "test:trim"
    assert Sweeper(ttl_hours=24).trim() == 0
    assert RunEvent.objects.filter(kind=RunEvent.Kind.TRIMMED).count() == 1


@pytest.mark.django_db
def test_trimmed_job_is_still_saveable_as_a_claim(make_job):
    job = make_job(finished_at=timezone.now() - timedelta(days=2))
    saved(job, "worker")
    Sweeper(ttl_hours=24).trim()
    assert saved(job, "client").action == "claim"
    assert AnalysisRun.objects.get(pk=job.run_id).doc_html == "<p>Body (Smith, 2020).</p>"


# --- the daemon as real processes ----------------------------------------------------------


def start_sweeper(env: dict[str, str], *args: str, **settings: object) -> subprocess.Popen:
    """``manage.py sweeper`` as a real process; its log goes to a file (a pipe nobody reads
    would fill up and block the process on its next log line)."""
    env = {**env, **{f"ACURIO_{k.upper()}": str(v) for k, v in settings.items()}}
    env.setdefault("LOG_LEVEL", "INFO")
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives as long as the process)
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sweeper", *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    proc.log = log
    return proc


def output(proc: subprocess.Popen) -> str:
    proc.log.seek(0)
    return proc.log.read()


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    proc.wait(timeout=timeout)
    return proc.returncode, output(proc)


def wait_for(predicate, timeout: float = 120, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sweeper_once_records_judges_and_exits_zero(make_job, subprocess_env):
    jobs = [make_job() for _ in range(3)]
    rc, err = finish(start_sweeper(subprocess_env, "--once", sweep_grace_seconds=0))
    assert rc == 0, err
    runs = AnalysisRun.objects.filter(pk__in=[j.run_id for j in jobs])
    assert runs.count() == 3
    assert all(r.saved_by == "worker" and r.judged_job_id == r.job_id for r in runs)
    beat = SweeperHeartbeat.objects.get()
    assert beat.stopped_at is not None and beat.backstop_in_flight is False


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigterm_while_judging_exits_zero_after_the_judge_finished(
    make_job, subprocess_env, fake_judge: FakeJudge
):
    jobs = [make_job() for _ in range(3)]
    fake_judge.delay = 1.0  # a slow judge: the signal lands while it works
    proc = start_sweeper(
        subprocess_env, sweep_grace_seconds=0, sweep_tick_seconds=60, judge_url=fake_judge.url
    )
    try:
        assert fake_judge.started.wait(60), "the sweeper never called the judge"
        assert not fake_judge.answered.is_set()
        proc.send_signal(signal.SIGTERM)
        rc, err = finish(proc)
    finally:
        proc.kill()
    assert rc == 0, err
    assert "SIGTERM received" in err
    # The batch in flight was finished: every recorded run judged, none left behind.
    assert len(fake_judge.requests) == 3
    assert AnalysisRun.objects.count() == 3
    assert not AnalysisRun.objects.unjudged().exists()
    assert {r.judgment["judge"] for r in AnalysisRun.objects.all()} == {"gpt-4o-mini"}
    assert set(RunEvent.objects.values_list("job_id", flat=True)) == {j.pk for j in jobs}
    assert SweeperHeartbeat.objects.get().stopped_at is not None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_second_signal_exits_at_once_and_judge_backstop_catches_up(
    make_job, subprocess_env, fake_judge: FakeJudge
):
    jobs = [make_job() for _ in range(2)]
    fake_judge.delay = 60.0  # a judge that hangs
    proc = start_sweeper(
        subprocess_env, sweep_grace_seconds=0, sweep_tick_seconds=60, judge_url=fake_judge.url
    )
    try:
        assert fake_judge.started.wait(60)
        proc.send_signal(signal.SIGINT)  # Ctrl-C drains like SIGTERM...
        wait_for(lambda: "SIGINT received" in output(proc), 30, "the first signal")
        proc.send_signal(signal.SIGTERM)  # ...and any second signal exits at once
        rc, err = finish(proc, timeout=30)
    finally:
        proc.kill()
    assert rc == 1, err
    assert "SIGTERM received again: exiting now" in err
    # The runs were recorded (committed before judging) but not judged: the judge backstop
    # of any later sweep judges them.
    assert AnalysisRun.objects.count() == 2
    assert AnalysisRun.objects.unjudged().count() == 2
    assert Sweeper(grace_seconds=0).judge_backstop() == 2
    assert not AnalysisRun.objects.unjudged().exists()
    assert {r.judged_job_id for r in AnalysisRun.objects.all()} == {j.pk for j in jobs}


AUDIT_SQL = """
CREATE TABLE runs_test_audit (run_id uuid, op text, body_changed boolean);
CREATE FUNCTION runs_test_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO runs_test_audit VALUES (
        NEW.id, TG_OP,
        TG_OP = 'INSERT' OR NEW.job_id IS DISTINCT FROM OLD.job_id
            OR NEW.doc_html IS DISTINCT FROM OLD.doc_html
            OR NEW.saved_by IS DISTINCT FROM OLD.saved_by);
    RETURN NEW;
END $$;
CREATE TRIGGER runs_test_audit AFTER INSERT OR UPDATE ON jobs_analysisrun
    FOR EACH ROW EXECUTE FUNCTION runs_test_audit();
"""


@pytest.fixture
def run_audit(transactional_db):
    """Every tuple written to AnalysisRun, and whether it changed the row's content."""
    with connection.cursor() as cur:
        cur.execute(AUDIT_SQL)
    yield
    with connection.cursor() as cur:
        cur.execute(
            "DROP TRIGGER runs_test_audit ON jobs_analysisrun;"
            "DROP FUNCTION runs_test_audit(); DROP TABLE runs_test_audit;"
        )


def run_tuple_inserts() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'jobs_analysisrun'")
        return cur.fetchone()[0]


GHOSTS = 2000


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sweepers", [2, 4])
def test_deploy_overlap_writes_each_run_exactly_once(sweepers, user, subprocess_env, run_audit):
    inserts_before = run_tuple_inserts()
    procs = [
        start_sweeper(
            {**subprocess_env, "LOG_LEVEL": "WARNING"},
            sweep_grace_seconds=0,
            sweep_tick_seconds=0.5,
            sweep_batch=50,
        )
        for _ in range(sweepers)
    ]
    try:
        # All of them ticking before the ghosts appear, so they really overlap.
        wait_for(
            lambda: SweeperHeartbeat.objects.filter(last_tick_at__isnull=False).count() == sweepers,
            what="every sweeper's first tick",
        )
        now = timezone.now()
        AnalysisJob.objects.bulk_create(
            AnalysisJob(
                owner=user,
                filename=f"t{i}.md",
                upload=b"x",
                status=JobStatus.COMPLETE,
                run_id=uuid.uuid4(),
                doc_html=f"<p>thesis {i}</p>",
                results={"citations": [{"text": "(A, 2001)", "verdict": "verified"}]},
                finished_at=now,
            )
            for i in range(GHOSTS)
        )
        wait_for(
            lambda: (
                not AnalysisJob.objects.ghosts().exists()
                and not AnalysisRun.objects.unjudged().exists()
            ),
            timeout=300,
            what="all ghosts recorded and judged",
        )
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        exits = [finish(proc) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [rc for rc, _ in exits] == [0] * sweepers, exits

    # One RECORDED event per job, from more than one sweeper.
    per_job = (
        RunEvent.objects.filter(kind=RunEvent.Kind.RECORDED).values("job").annotate(n=Count("id"))
    )
    assert len(per_job) == GHOSTS and {row["n"] for row in per_job} == {1}
    assert RunEvent.objects.values("sweeper").distinct().count() > 1
    # One content tuple per run (the insert); any further tuple is the judge's, not a rewrite.
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(DISTINCT run_id), count(*) FILTER (WHERE op = 'INSERT'),"
            " count(*) FILTER (WHERE body_changed) FROM runs_test_audit"
        )
        assert cur.fetchone() == (GHOSTS, GHOSTS, GHOSTS)
    assert AnalysisRun.objects.filter(saved_by="worker").count() == GHOSTS
    # PostgreSQL's own counter agrees (backends flush their statistics as they exit).
    wait_for(lambda: run_tuple_inserts() - inserts_before >= GHOSTS, 30, "statistics flush")
    assert run_tuple_inserts() - inserts_before == GHOSTS


@pytest.mark.django_db(transaction=True)
def test_failing_heartbeat_does_not_stop_the_tick(monkeypatch, make_job):
    sweeper = Sweeper(grace_seconds=0)

    def broken(**fields):
        raise RuntimeError("connection lost")

    job = make_job()
    monkeypatch.setattr(sweeper, "heartbeat", broken)
    tick_and_wait(sweeper)
    assert AnalysisRun.objects.filter(pk=job.run_id).exists()


# --- heartbeat rows of dead processes expire ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_killed_sweepers_heartbeat_row_is_deleted_after_its_expiry_ticks():
    """A SIGKILLed sweeper never writes stopped_at: its row goes after EXPIRY_TICKS of its
    own tick of silence, counted by whichever sweeper ticks; living and recently stopped
    rows stay."""
    ticks = SweeperHeartbeat.EXPIRY_TICKS
    with time_machine.travel(timezone.now(), tick=False) as clock:
        now = timezone.now()

        def beat(name, *, silent, tick=30.0, **fields):
            return SweeperHeartbeat.objects.create(
                name=name,
                started_at=now - timedelta(days=3),
                last_tick_at=now - timedelta(seconds=silent),
                tick_seconds=tick,
                **fields,
            )

        beat("killed:1", silent=30 * ticks + 1)
        beat("killed-slow-tick:2", silent=30 * ticks + 1, tick=60)  # 20 of its ticks: not yet
        beat("gone:3", silent=30 * (ticks - 1))  # missed ticks, not yet expired
        beat("alive:4", silent=5)
        beat("drained:5", silent=3600, stopped_at=now - timedelta(hours=1))
        beat("drained-long-ago:6", silent=2 * 86400, stopped_at=now - timedelta(days=2))
        SweeperHeartbeat.objects.create(name="never-ticked:7", started_at=now - timedelta(hours=2))

        sweeper = Sweeper(name="me:8", tick_seconds=30)
        assert sweeper.expire_heartbeats() == 3
        assert set(SweeperHeartbeat.objects.values_list("name", flat=True)) == {
            "killed-slow-tick:2",
            "gone:3",
            "alive:4",
            "drained:5",
        }

        # A sweeper never deletes its own row, however late its tick.
        SweeperHeartbeat.objects.create(
            name="me:8", started_at=now, last_tick_at=now - timedelta(hours=1)
        )
        assert sweeper.expire_heartbeats() == 0
        assert SweeperHeartbeat.objects.filter(name="me:8").exists()

        # Another tick later the slow one's 20 ticks are over too; a tick deletes it itself.
        clock.shift(timedelta(seconds=30 * ticks))
        sweeper.tick()
        assert sweeper.wait_for_backstop(timeout=60)
        names = set(SweeperHeartbeat.objects.values_list("name", flat=True))
        assert names == {"drained:5", "me:8"}


@pytest.mark.django_db(transaction=True)
def test_the_tick_survives_a_failing_expiry(monkeypatch, make_job):
    sweeper = Sweeper(grace_seconds=0)

    def broken():
        raise RuntimeError("connection lost")

    monkeypatch.setattr(sweeper, "expire_heartbeats", broken)
    job = make_job()
    tick_and_wait(sweeper)
    assert AnalysisRun.objects.filter(pk=job.run_id).exists()
