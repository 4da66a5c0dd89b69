"""The single writer, save_run: DESIGN.md's 18-cell precedence table, cell by cell, and what each cell writes.

Rows of the table are what is stored (nothing / client or NULL / worker); columns are the
incoming write (client or worker; same, newer or older job). Every run here has three jobs,
oldest first; the stored row, when there is one, holds the middle job.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.runs import JobDeleted, JobNotFound, JobNotTerminal, save_run

from .helpers import big_html, make_legacy, run_version, saved, table_writes

pytestmark = pytest.mark.django_db

OLDER, SAME, NEWER = 0, 1, 2


@pytest.fixture
def run_jobs(make_job):
    """Three terminal jobs of one run, created in order, each with its own body."""
    run_id = uuid.uuid4()
    return [
        make_job(run_id=run_id, doc_html=f"<p>job {i} (Smith, 2020).</p>", filename=f"v{i}.md")
        for i in range(3)
    ]


def store(jobs, stored: str | None) -> None:
    """Store the middle job's run as 'client', 'worker' or 'legacy' (NULL); None stores nothing."""
    if stored is None:
        return
    saved(jobs[SAME], "worker" if stored == "worker" else "client")
    if stored == "legacy":
        make_legacy(jobs[SAME].run_id)


def assert_written(result, jobs, incoming: int, saved_by: str) -> None:
    job = jobs[incoming]
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert result.action == "write"
    assert (result.job_id, result.saved_by) == (job.pk, saved_by)
    assert (run.job_id, run.saved_by, run.doc_html) == (job.pk, saved_by, job.doc_html)
    assert run.document == job.filename and run.report == job.results


def assert_noop(jobs, writer: str, incoming: int) -> None:
    """The incoming save changes nothing: no tuple, no counter moves, the row is as before."""
    run_id = jobs[SAME].run_id
    before_version, before_writes = run_version(run_id), table_writes()
    before = AnalysisRun.objects.values().get(pk=run_id)
    result = saved(jobs[incoming], writer)
    assert result.action == "noop"
    assert run_version(run_id) == before_version
    assert table_writes() == before_writes
    assert AnalysisRun.objects.values().get(pk=run_id) == before
    assert (result.job_id, result.saved_by) == (before["job_id"], before["saved_by"] or "client")


# --- row 1: nothing stored: every incoming save writes -------------------------------------


@pytest.mark.parametrize("incoming", [OLDER, SAME, NEWER], ids=["older", "same", "newer"])
def test_first_client_save_writes(run_jobs, incoming):
    assert_written(saved(run_jobs[incoming], "client"), run_jobs, incoming, "client")


@pytest.mark.parametrize("incoming", [OLDER, SAME, NEWER], ids=["older", "same", "newer"])
def test_first_worker_save_writes(run_jobs, incoming):
    assert_written(saved(run_jobs[incoming], "worker"), run_jobs, incoming, "worker")


# --- row 2: client (or legacy NULL) stored ---------------------------------------------------


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_repeat_client_save_is_noop(run_jobs, stored):
    store(run_jobs, stored)
    assert_noop(run_jobs, "client", SAME)


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_client_save_of_newer_job_replaces_client_row(run_jobs, stored):
    store(run_jobs, stored)
    assert_written(saved(run_jobs[NEWER], "client"), run_jobs, NEWER, "client")


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_client_save_of_older_job_is_noop_over_client_row(run_jobs, stored):
    store(run_jobs, stored)
    assert_noop(run_jobs, "client", OLDER)


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_client_save_beats_worker_save(run_jobs, stored):
    store(run_jobs, stored)
    assert_noop(run_jobs, "worker", SAME)


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_worker_save_of_newer_job_replaces_client_row(run_jobs, stored):
    store(run_jobs, stored)
    assert_written(saved(run_jobs[NEWER], "worker"), run_jobs, NEWER, "worker")


@pytest.mark.parametrize("stored", ["client", "legacy"])
def test_worker_save_of_older_job_is_noop_over_client_row(run_jobs, stored):
    store(run_jobs, stored)
    assert_noop(run_jobs, "worker", OLDER)


# --- row 3: worker stored ----------------------------------------------------------------


def test_client_save_claims_worker_row(run_jobs):
    store(run_jobs, "worker")
    run_id = run_jobs[SAME].run_id
    before = AnalysisRun.objects.values().get(pk=run_id)
    result = saved(run_jobs[SAME], "client")
    after = AnalysisRun.objects.values().get(pk=run_id)
    assert (result.action, result.saved_by, result.job_id) == ("claim", "client", run_jobs[SAME].pk)
    assert after["saved_by"] == "client" and after["saved_at"] > before["saved_at"]
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {"saved_by", "saved_at"}


def test_client_save_of_newer_job_replaces_worker_row(run_jobs):
    store(run_jobs, "worker")
    assert_written(saved(run_jobs[NEWER], "client"), run_jobs, NEWER, "client")


def test_client_save_of_older_job_is_noop_over_worker_row(run_jobs):
    store(run_jobs, "worker")
    assert_noop(run_jobs, "client", OLDER)


def test_repeat_worker_save_is_noop(run_jobs):
    store(run_jobs, "worker")
    assert_noop(run_jobs, "worker", SAME)


def test_worker_save_of_newer_job_replaces_worker_row(run_jobs):
    store(run_jobs, "worker")
    assert_written(saved(run_jobs[NEWER], "worker"), run_jobs, NEWER, "worker")


def test_worker_save_of_older_job_is_noop_over_worker_row(run_jobs):
    store(run_jobs, "worker")
    assert_noop(run_jobs, "worker", OLDER)


# --- beyond the table ------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["client", "worker"])
def test_failed_job_never_replaces_complete_one(make_job, writer):
    run_id = uuid.uuid4()
    complete = make_job(run_id=run_id)
    failed = make_job(run_id=run_id, status=JobStatus.FAILED, error="Could not read the file.")
    saved(complete, "client")
    assert_noop([None, complete, failed], writer, NEWER)
    failed.refresh_from_db()
    # Covered all the same: the backstop must not pick it up again and again.
    assert failed.run_saved_at is not None


def test_newer_failed_job_replaces_older_failed_one(make_job):
    run_id = uuid.uuid4()
    first = make_job(run_id=run_id, status=JobStatus.FAILED, doc_html=None, error="one")
    second = make_job(run_id=run_id, status=JobStatus.FAILED, doc_html=None, error="two")
    saved(first, "worker")
    result = saved(second, "worker")
    run = AnalysisRun.objects.get(pk=run_id)
    assert result.action == "write"
    assert (run.job_id, run.status, run.error, run.doc_html) == (second.pk, "failed", "two", "")


def test_newer_complete_job_replaces_failed_one(make_job):
    run_id = uuid.uuid4()
    failed = make_job(run_id=run_id, status=JobStatus.FAILED, error="boom")
    complete = make_job(run_id=run_id)
    saved(failed, "client")
    assert saved(complete, "worker").action == "write"
    assert AnalysisRun.objects.get(pk=run_id).status == "complete"


def test_claim_rewrites_no_toast_chunks(make_job):
    """A claim is a small tuple: the stored body keeps its TOAST chunks (a write copies them)."""
    job = make_job(doc_html=big_html(512))
    before = table_writes()
    saved(job, "worker")
    after_write = table_writes()
    # The write itself copies the body into the run's TOAST relation: the check can fail.
    assert after_write["toast"] - before["toast"] > 100
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = %s::regclass",
            [AnalysisRun._meta.db_table],
        )
        toast_size = cur.fetchone()[0]
    result = saved(job, "client")
    after_claim = table_writes()
    assert result.action == "claim"
    assert after_claim["heap"] - after_write["heap"] == 1  # one small tuple
    assert after_claim["toast"] == after_write["toast"]  # and not one chunk
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = %s::regclass",
            [AnalysisRun._meta.db_table],
        )
        assert cur.fetchone()[0] == toast_size
    assert AnalysisRun.objects.get(pk=job.run_id).doc_html == job.doc_html


def test_noop_writes_no_toast_chunks(make_job):
    job = make_job(doc_html=big_html(256))
    saved(job, "client")
    before = table_writes()
    assert saved(job, "worker").action == "noop"
    assert table_writes() == before


def test_save_marks_the_job_and_superseded_older_jobs(make_job):
    run_id = uuid.uuid4()
    old, ghost, new = (make_job(run_id=run_id) for _ in range(3))
    saved(old, "client")
    saved(new, "client")
    marked = dict(AnalysisJob.objects.filter(run_id=run_id).values_list("pk", "run_saved_at"))
    assert all(marked.values())  # the middle one was never saved, but is superseded
    assert not AnalysisJob.objects.ghosts().filter(pk=ghost.pk).exists()


def test_older_save_does_not_mark_newer_ghost(make_job):
    run_id = uuid.uuid4()
    old = make_job(run_id=run_id)
    new = make_job(run_id=run_id)
    saved(old, "client")
    new.refresh_from_db()
    assert new.run_saved_at is None
    assert AnalysisJob.objects.ghosts().filter(pk=new.pk).exists()


@pytest.mark.parametrize("status", [JobStatus.QUEUED, JobStatus.RUNNING])
def test_unfinished_job_cannot_be_saved(make_job, status):
    job = make_job(status=status, doc_html=None)
    with pytest.raises(JobNotTerminal, match=rf"job {job.pk} is {status}; only a complete"):
        save_run(job.pk, "client")
    assert not AnalysisRun.objects.exists()
    job.refresh_from_db()
    assert job.run_saved_at is None


def test_missing_job_cannot_be_saved(db):
    with pytest.raises(JobNotFound, match="analysis job 987654321 does not exist"):
        save_run(987654321, "client")


def test_deleted_job_cannot_be_saved(make_job):
    from django.utils import timezone

    job = make_job(deleted_at=timezone.now())
    with pytest.raises(JobDeleted, match="was deleted"):
        save_run(job.pk, "worker")
    assert not AnalysisRun.objects.exists()


def test_unknown_writer_is_refused(make_job):
    job = make_job()
    with pytest.raises(ValueError, match="saved_by must be one of"):
        save_run(job.pk, "admin")
    assert not AnalysisRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_client_save_queued_behind_a_sweeper_claims_once_it_commits(make_job):
    """A tab saving while a sweeper's batch holds the job waits for it, then claims.

    The client's statement snapshot predates the sweeper's commit; the result must still say
    "claim" (the row held this job), and the body must not be written a second time.
    """
    import threading

    from django.db import connection, transaction

    job = make_job()
    recorded, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def sweeper():
        try:
            with transaction.atomic():
                outcome["worker"] = save_run(job.pk, "worker")
                recorded.set()
                release.wait(30)
        finally:
            connection.close()

    def tab():
        try:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_backend_pid()")
                outcome["tab_pid"] = cur.fetchone()[0]
            outcome["client"] = save_run(job.pk, "client")
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper), threading.Thread(target=tab)]
    threads[0].start()
    assert recorded.wait(30)
    threads[1].start()
    # The tab's statement is waiting on the sweeper's lock on the job row.
    for _ in range(300):
        with connection.cursor() as cur:
            cur.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                [outcome.get("tab_pid")],
            )
            row = cur.fetchone()
        if row and row[0] == "Lock":
            break
        threading.Event().wait(0.05)
    else:
        raise AssertionError("the tab's save never waited for the sweeper's lock")
    release.set()
    for t in threads:
        t.join(30)
    assert outcome["worker"].action == "write"
    assert outcome["client"].action == "claim"
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert (run.saved_by, run.job_id) == ("client", job.pk)


def test_save_survives_a_rollback_that_deallocates_prepared_statements(run_jobs):
    """save_run is a prepared statement. A ROLLBACK (here a savepoint's) makes psycopg send
    DEALLOCATE ALL; the next save must prepare it again, not name a statement that is gone."""
    from django.db import transaction

    assert saved(run_jobs[OLDER], "client").action == "write"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE from_sql = false")
        assert cursor.fetchone()[0] >= 1, "the save ran as a server-side prepared statement"
    with pytest.raises(RuntimeError), transaction.atomic():
        raise RuntimeError("roll back to the savepoint")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone()[0] == 0, "psycopg deallocated everything on the rollback"
    assert_written(saved(run_jobs[SAME], "client"), run_jobs, SAME, "client")
