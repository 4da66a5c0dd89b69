"""The run backstop (jobs.runs.record_jobs): which jobs it records, how, and what it reports."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
import time_machine
from django.db import OperationalError, connection
from django.utils import timezone

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent
from jobs.runs import JudgeError, judge_backlog, record_jobs
from jobs.runs import judge as judge_module
from jobs.runs import saving as saving_module
from tests.processes import database_url

from .helpers import big_html, run_version, saved

GRACE = 120


@pytest.fixture
def clock():
    with time_machine.travel(timezone.now(), tick=False) as traveller:
        yield traveller


@pytest.mark.django_db
def test_closed_tab_job_is_recorded_after_the_grace_and_judged(make_job, clock):
    job = make_job()  # finished; its tab never POSTed
    assert record_jobs(grace=GRACE) == []
    clock.shift(timedelta(seconds=GRACE - 1))
    assert record_jobs(grace=GRACE) == []
    assert not AnalysisRun.objects.exists()

    clock.shift(timedelta(seconds=2))
    [result] = record_jobs(grace=GRACE, sweeper_name="host:1")
    assert (result.action, result.saved_by, result.job_id) == ("write", "worker", job.pk)
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert (run.saved_by, run.job_id, run.doc_html) == ("worker", job.pk, job.doc_html)
    assert run.judged_job_id == job.pk and run.judgment["score"] == 100
    event = RunEvent.objects.get(kind=RunEvent.Kind.RECORDED)
    assert (event.job_id, event.run_id, event.writer, event.sweeper) == (
        job.pk,
        job.run_id,
        "worker",
        "host:1",
    )
    assert event.lag_seconds == pytest.approx(GRACE + 1)
    assert (event.details, event.operator) == ({"source": "sweeper"}, "")
    # The judgment has its own event, written with it.
    judged = RunEvent.objects.get(kind=RunEvent.Kind.JUDGED)
    assert (judged.job_id, judged.run_id, judged.sweeper) == (job.pk, job.run_id, "host:1")
    assert judged.details == {"score": 100, "source": "sweeper"}
    # Recorded once: the next sweep finds nothing.
    assert record_jobs(grace=GRACE) == []


@pytest.mark.django_db
def test_open_tab_client_write_is_the_only_write(make_job, clock):
    job = make_job()
    saved(job, "client")
    version = run_version(job.run_id)
    clock.shift(timedelta(hours=1))
    assert record_jobs(grace=GRACE) == []
    assert run_version(job.run_id) == version
    assert AnalysisRun.objects.get(pk=job.run_id).saved_by == "client"
    assert not RunEvent.objects.exists()


@pytest.mark.django_db
def test_oldest_ghosts_first_and_batch_limit(make_job, clock):
    jobs = []
    for _ in range(5):
        jobs.append(make_job())
        clock.shift(timedelta(seconds=10))
    clock.shift(timedelta(seconds=GRACE))
    first = record_jobs(grace=GRACE, limit=2)
    assert sorted(r.job_id for r in first) == [jobs[0].pk, jobs[1].pk]
    rest = record_jobs(grace=GRACE, limit=10)
    assert sorted(r.job_id for r in rest) == [j.pk for j in jobs[2:]]


@pytest.mark.django_db
def test_settings_give_the_defaults(make_job, settings, clock):
    settings.ACURIO_SWEEP_GRACE_SECONDS = 30
    settings.ACURIO_SWEEP_BATCH = 1
    make_job(), make_job()
    clock.shift(timedelta(seconds=31))
    assert len(record_jobs()) == 1
    assert len(record_jobs()) == 1
    assert record_jobs() == []


@pytest.mark.django_db
def test_only_true_ghosts_are_recorded(make_job, clock):
    ghost = make_job()
    make_job(status=JobStatus.RUNNING, doc_html=None)
    make_job(deleted_at=timezone.now())
    make_job(results={})
    make_job(status=JobStatus.FAILED, doc_html=None, error="no text")  # nothing to show
    covered = make_job()
    saved(covered, "client")
    clock.shift(timedelta(seconds=GRACE + 1))
    assert [r.job_id for r in record_jobs(grace=GRACE)] == [ghost.pk]


@pytest.mark.django_db
def test_ghost_whose_run_holds_an_older_job_is_recorded(make_job, clock):
    old = make_job()
    saved(old, "client")
    new = make_job(run_id=old.run_id)  # a re-analysis whose tab was closed
    clock.shift(timedelta(seconds=GRACE + 1))
    [result] = record_jobs(grace=GRACE)
    assert (result.action, result.job_id) == ("write", new.pk)
    assert AnalysisRun.objects.get(pk=old.run_id).job_id == new.pk


@pytest.mark.django_db
def test_two_ghosts_of_one_run_end_with_the_newer(make_job, clock):
    run_id = uuid.uuid4()
    old, new = make_job(run_id=run_id), make_job(run_id=run_id)
    clock.shift(timedelta(seconds=GRACE + 1))
    results = record_jobs(grace=GRACE)
    # Jobs of one run are saved oldest first: the newer one then wins by the table.
    assert [(r.job_id, r.action) for r in results] == [(old.pk, "write"), (new.pk, "write")]
    run = AnalysisRun.objects.get(pk=run_id)
    assert run.job_id == new.pk and run.judged_job_id == new.pk
    assert not AnalysisJob.objects.ghosts().exists()


@pytest.mark.django_db
def test_record_now_records_the_given_ghosts_only(make_job):
    a, b, c = make_job(), make_job(), make_job()
    saved(c, "client")
    results = record_jobs([a.pk, c.pk], source="manual", operator="olivia")
    assert [r.job_id for r in results] == [a.pk]  # c is no ghost; b was not asked for
    assert AnalysisRun.objects.get(pk=a.run_id).saved_by == "worker"
    assert not AnalysisRun.objects.filter(pk=b.run_id).exists()
    event = RunEvent.objects.get(kind=RunEvent.Kind.RECORDED)
    assert (event.details["source"], event.operator, event.sweeper) == ("manual", "olivia", "")
    assert event.by == "manual: olivia"


@pytest.mark.django_db
def test_judge_failure_leaves_run_recorded_for_the_judge_backstop(make_job, monkeypatch):
    def broken(run):
        raise JudgeError("judge endpoint failed after 4 attempts: HTTP 503")

    monkeypatch.setattr(judge_module, "assess", broken)
    job = make_job()
    [result] = record_jobs([job.pk])
    assert result.action == "write"
    assert AnalysisRun.objects.unjudged().filter(pk=job.run_id).exists()
    # Recorded, and said so; no judged event for a judgment that was not stored.
    assert RunEvent.objects.get().kind == RunEvent.Kind.RECORDED


@pytest.mark.django_db(transaction=True)
def test_recorded_event_commits_with_the_run_so_a_failure_after_the_commit_cannot_lose_it(
    make_job, monkeypatch
):
    """The outbox: the record and its event are one transaction. The database failing while
    the run is judged (here: every judge call raises as a PostgreSQL restart would) loses
    neither, and the judge backstop judges the run later, with its own event."""

    def restarting(run_ids, **kwargs):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(saving_module, "judge_runs", restarting)
    jobs = [make_job(), make_job()]
    with pytest.raises(OperationalError):
        record_jobs([j.pk for j in jobs], sweeper_name="host:1")

    # Committed: both runs and both recorded events, seen from a fresh connection.
    connection.close()
    assert set(AnalysisRun.objects.values_list("job_id", flat=True)) == {j.pk for j in jobs}
    recorded = RunEvent.objects.filter(kind=RunEvent.Kind.RECORDED)
    assert sorted(recorded.values_list("job_id", flat=True)) == sorted(j.pk for j in jobs)
    assert not RunEvent.objects.filter(kind=RunEvent.Kind.JUDGED).exists()

    monkeypatch.undo()
    assert judge_backlog(grace=timedelta(0), limit=10, sweeper_name="host:2") == 2
    assert not AnalysisRun.objects.unjudged().exists()
    judged = RunEvent.objects.filter(kind=RunEvent.Kind.JUDGED)
    assert sorted(judged.values_list("job_id", flat=True)) == sorted(j.pk for j in jobs)
    assert {e.details["source"] for e in judged} == {"judge_backstop"}


@pytest.mark.django_db(transaction=True)
def test_recorded_event_rolls_back_with_a_record_that_did_not_commit(make_job, monkeypatch):
    """The other half of the outbox: an event never claims a record that rolled back."""
    real = saving_module.save_run
    calls = []

    def second_save_fails(job_id, saved_by):
        calls.append(job_id)
        if len(calls) == 2:
            raise RuntimeError("connection lost mid-batch")
        return real(job_id, saved_by)

    monkeypatch.setattr(saving_module, "save_run", second_save_fails)
    make_job(), make_job()
    with pytest.raises(RuntimeError):
        record_jobs(grace=0)
    assert not AnalysisRun.objects.exists()
    assert not RunEvent.objects.exists()


@pytest.mark.django_db
def test_body_is_never_loaded_into_python(make_job):
    job = make_job(doc_html=big_html(300))
    with connection.execute_wrapper(_reject_body_selects):
        record_jobs([job.pk])
    assert AnalysisRun.objects.filter(pk=job.run_id).exists()


def _reject_body_selects(execute, sql, params, many, context):
    head = sql.split(" FROM ", 1)[0]
    assert '"doc_html"' not in head, f"loads doc_html: {sql[:200]}"
    return execute(sql, params, many, context)


@pytest.mark.django_db(transaction=True)
def test_row_locked_by_another_connection_is_skipped(make_job):
    locked, free = make_job(), make_job()
    other = psycopg.connect(database_url())
    try:
        other.execute(
            f"SELECT id FROM {AnalysisJob._meta.db_table} WHERE id = %s FOR UPDATE", [locked.pk]
        )  # an open transaction holds the lock
        results = record_jobs(grace=0)
        assert [r.job_id for r in results] == [free.pk]
        assert AnalysisJob.objects.ghosts().filter(pk=locked.pk).exists()
        other.rollback()
        assert [r.job_id for r in record_jobs(grace=0)] == [locked.pk]
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweepers_sharing_runs_neither_deadlock_nor_lose_the_newer_job(user):
    """Four sweepers, small batches, and every run has two ghost jobs they may split."""
    import threading

    from django.db import connection

    runs = [uuid.uuid4() for _ in range(60)]
    now = timezone.now()
    AnalysisJob.objects.bulk_create(
        AnalysisJob(
            owner=user,
            filename=f"v{version}.md",
            upload=b"x",
            status=JobStatus.COMPLETE,
            run_id=run_id,
            doc_html=f"<p>{run_id} v{version}</p>",
            results={"citations": [{"text": "(A, 2001)", "verdict": "verified"}]},
            finished_at=now,
        )
        for version in (1, 2)
        for run_id in runs
    )
    errors: list[BaseException] = []

    def sweep():
        try:
            while record_jobs(grace=0, limit=7):
                pass
        except BaseException as exc:  # a deadlock would surface here
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert not AnalysisJob.objects.ghosts().exists()
    newest = {
        run_id: job_id
        for run_id, job_id in AnalysisJob.objects.filter(filename="v2.md").values_list(
            "run_id", "pk"
        )
    }
    stored = dict(AnalysisRun.objects.values_list("pk", "job_id"))
    assert stored == newest
