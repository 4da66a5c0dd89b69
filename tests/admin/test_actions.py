"""The admin's actions: record now (through the single writer), re-queue, soft-delete."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent, RunEventKind

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:jobs_analysisjob_changelist"
RECORD = "admin:jobs_analysisjob_dashboard_record"


def act(client, action: str, *jobs: AnalysisJob):
    return client.post(
        reverse(CHANGELIST),
        {"action": action, "_selected_action": [j.pk for j in jobs]},
        follow=True,
    )


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def xmin(run_id) -> str:
    """The row version: unchanged means PostgreSQL wrote no new tuple."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM jobs_analysisrun WHERE id = %s", [run_id])
        return cursor.fetchone()[0]


def past_grace(job: AnalysisJob) -> AnalysisJob:
    old = timezone.now() - timedelta(minutes=10)
    AnalysisJob.objects.filter(pk=job.pk).update(updated_at=old, finished_at=old)
    job.refresh_from_db()
    return job


# --- record now ----------------------------------------------------------------------------


def test_record_now_writes_the_run_as_worker_through_the_single_writer(staff_client, make_job):
    ghost = past_grace(make_job(filename="lost.docx"))

    response = act(staff_client, "record_run_now", ghost)

    assert response.status_code == 200
    assert texts(response) == ["Record now: 1 written."]
    run = AnalysisRun.objects.get(pk=ghost.run_id)
    assert (run.saved_by, run.job_id, run.document) == ("worker", ghost.pk, "lost.docx")
    ghost.refresh_from_db()
    assert ghost.run_saved_at is not None
    assert not AnalysisJob.objects.ghosts().filter(pk=ghost.pk).exists()
    # The ops diagnostics event says it was manual and names the operator who pressed the
    # button; no sweeper did it.
    event = RunEvent.objects.get(kind=RunEventKind.RECORDED, job=ghost)
    assert (event.operator, event.sweeper, event.details["source"]) == ("olivia", "", "manual")
    assert event.writer == "worker"
    assert event.lag_seconds >= 600
    events = staff_client.get(reverse("admin:jobs_runevent_changelist") + "?by=manual")
    page = events.content.decode()
    assert "manual: olivia" in page and "Recorded by sweeper" not in page


def test_record_now_leaves_a_client_saved_run_of_the_same_job_untouched(
    staff_client, make_job, make_run
):
    job = past_grace(make_job())
    saved_at = timezone.now() - timedelta(minutes=5)
    run = make_run(job, saved_by="client", saved_at=saved_at)
    # Even if the job still looked like a ghost (run_saved_at lost), the writer's precedence
    # table keeps the client's row: a worker save of the same job is a no-op.
    AnalysisJob.objects.filter(pk=job.pk).update(run_saved_at=None)
    before = xmin(run.pk)

    response = act(staff_client, "record_run_now", job)

    assert texts(response) == ["Record now: 1 already saved (client or newer job), not rewritten."]
    run.refresh_from_db()
    assert (run.saved_by, run.job_id, run.saved_at) == ("client", job.pk, saved_at)
    assert xmin(run.pk) == before  # not rewritten: no new tuple
    assert not RunEvent.objects.filter(job=job).exists()


def test_record_now_skips_jobs_that_are_not_ghosts(staff_client, make_job, make_run):
    saved = make_job()
    make_run(saved, saved_by="client")
    running = make_job(status=JobStatus.RUNNING)
    ghost = past_grace(make_job())

    response = act(staff_client, "record_run_now", saved, running, ghost)

    assert texts(response) == ["Record now: 1 written; 2 no longer ghosts, left alone."]
    assert AnalysisRun.objects.get(pk=saved.run_id).saved_by == "client"
    assert not AnalysisRun.objects.filter(pk=running.run_id).exists()


def test_record_now_never_lets_an_older_job_replace_a_newer_one(staff_client, make_job, make_run):
    older = past_grace(make_job(filename="v1.docx"))
    newer = make_job(run_id=older.run_id, filename="v2.docx")
    make_run(newer, saved_by="client")
    AnalysisJob.objects.filter(pk=older.pk).update(run_saved_at=None)  # looks like a ghost

    response = act(staff_client, "record_run_now", older)

    assert texts(response) == ["Record now: 1 already saved (client or newer job), not rewritten."]

    run = AnalysisRun.objects.get(pk=older.run_id)
    assert (run.job_id, run.document, run.saved_by) == (newer.pk, "v2.docx", "client")


def test_dashboard_record_button_records_the_selected_ghosts(staff_client, make_job):
    a, b = past_grace(make_job()), past_grace(make_job())
    untouched = past_grace(make_job())

    response = staff_client.post(reverse(RECORD), {"job_ids": [a.pk, b.pk]}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("admin:jobs_analysisjob_dashboard")
    assert texts(response) == ["Record now: 2 written."]
    assert AnalysisRun.objects.filter(pk__in=[a.run_id, b.run_id], saved_by="worker").count() == 2
    assert not AnalysisRun.objects.filter(pk=untouched.run_id).exists()


def test_dashboard_record_all_past_grace_leaves_those_within_grace(staff_client, make_job):
    old = past_grace(make_job())
    fresh = make_job()  # finished just now: a tab may still save it

    response = staff_client.post(reverse(RECORD), {"all_past_grace": "1"}, follow=True)

    assert texts(response) == ["Record now: 1 written."]
    assert AnalysisRun.objects.filter(pk=old.run_id).exists()
    assert not AnalysisRun.objects.filter(pk=fresh.run_id).exists()


def test_dashboard_record_rejects_bad_ids_and_records_nothing(staff_client, make_job):
    ghost = past_grace(make_job())
    response = staff_client.post(reverse(RECORD), {"job_ids": [ghost.pk, "x1"]}, follow=True)
    assert texts(response) == [f"Not a job id in ['{ghost.pk}', 'x1']: nothing was recorded."]
    assert not AnalysisRun.objects.exists()


def test_dashboard_record_with_nothing_selected_says_so(staff_client):
    response = staff_client.post(reverse(RECORD), {}, follow=True)
    assert texts(response) == ["No ghost was selected: nothing was recorded."]


def test_dashboard_record_refuses_get(staff_client):
    assert staff_client.get(reverse(RECORD)).status_code == 405


# --- re-queue ------------------------------------------------------------------------------


def test_requeue_creates_a_new_job_of_the_same_run_and_starts_it(staff_client, make_job):
    failed = make_job(status=JobStatus.FAILED, error="Could not read the file")
    complete = make_job()

    response = act(staff_client, "requeue_failed", failed, complete)

    new = AnalysisJob.objects.exclude(pk__in=[failed.pk, complete.pk]).get()
    assert new.run_id == failed.run_id
    assert new.status == JobStatus.QUEUED
    assert new.workflow_id is not None  # its workflow was started
    assert bytes(new.upload) == bytes(failed.upload)
    assert texts(response) == [
        f"Re-queued 1 failed job(s) as new job(s) #{new.pk}.",
        "1 selected job(s) were not failed (or were deleted) and were skipped.",
    ]
    failed.refresh_from_db()
    assert failed.status == JobStatus.FAILED  # the old attempt stays as it was


def test_requeue_reports_a_job_that_cannot_be_requeued_and_continues(
    staff_client, make_job, monkeypatch
):
    import jobs.pipeline

    bad = make_job(status=JobStatus.FAILED, filename="bad.docx")
    good = make_job(status=JobStatus.FAILED, filename="good.docx")
    real = jobs.pipeline.requeue

    def requeue(job):
        if job.pk == bad.pk:
            raise RuntimeError("engine refused")
        return real(job)

    monkeypatch.setattr(jobs.pipeline, "requeue", requeue)
    response = act(staff_client, "requeue_failed", bad, good)

    msgs = texts(response)
    assert msgs[0].startswith("Re-queued 1 failed job(s)")
    assert msgs[1] == f"Could not re-queue #{bad.pk}: engine refused"
    assert AnalysisJob.objects.filter(run_id=good.run_id).count() == 2
    assert AnalysisJob.objects.filter(run_id=bad.run_id).count() == 1  # nothing half-made


def test_requeue_refuses_a_job_that_failed_on_the_users_input_and_says_why(staff_client, make_job):
    """The same file would fail the same way at once: no new job, and the operator reads the
    reason; a job that failed on our side is re-queued beside it."""
    bad_input = make_job(
        status=JobStatus.FAILED,
        error="The file is encrypted: remove its password and upload it again.",
        failure_kind="input",
    )
    ours = make_job(
        status=JobStatus.FAILED,
        error="The analysis stopped because of an internal error, not because of your file.",
        failure_kind="internal",
    )

    response = act(staff_client, "requeue_failed", bad_input, ours)

    assert AnalysisJob.objects.filter(run_id=bad_input.run_id).count() == 1  # nothing new
    new = AnalysisJob.objects.filter(run_id=ours.run_id).exclude(pk=ours.pk).get()
    assert new.status == JobStatus.QUEUED
    msgs = texts(response)
    assert msgs[0] == f"Re-queued 1 failed job(s) as new job(s) #{new.pk}."
    assert msgs[1] == (
        f"Not re-queued: #{bad_input.pk} failed on the user's input (The file is encrypted: "
        "remove its password and upload it again.). The same file would fail the same way;"
        " the student must upload a new one."
    )


def test_a_requeued_failure_leaves_the_students_in_progress_list(make_job, user):
    """The student's "In progress" list shows the new job's state, not the failure it
    replaced (the old failed job is superseded by the newer job of its run)."""
    from jobs import pipeline

    failed = make_job(status=JobStatus.FAILED, error="internal", failure_kind="internal")
    other = make_job(status=JobStatus.FAILED, error="internal", failure_kind="internal")
    window = timedelta(days=1)
    pending = AnalysisJob.objects.owned_by(user).unsaved_work(failed_within=window)
    assert set(pending.values_list("pk", flat=True)) == {failed.pk, other.pk}

    new = pipeline.requeue(failed)

    pending = AnalysisJob.objects.owned_by(user).unsaved_work(failed_within=window)
    assert dict(pending.values_list("pk", "status")) == {
        new.pk: JobStatus.QUEUED,
        other.pk: JobStatus.FAILED,  # not re-queued: still the state of its run
    }
    # When the new job fails too, it is the one listed, once.
    AnalysisJob.objects.get(pk=new.pk).fail("internal again", "internal")
    pending = AnalysisJob.objects.owned_by(user).unsaved_work(failed_within=window)
    assert set(pending.values_list("pk", flat=True)) == {new.pk, other.pk}


# --- soft delete ---------------------------------------------------------------------------


def test_soft_delete_marks_jobs_deleted_and_hides_ghosts(staff_client, make_job, now):
    ghost = past_grace(make_job())
    gone = make_job(deleted_at=now - timedelta(days=1))

    response = act(staff_client, "soft_delete", ghost, gone)

    assert texts(response) == ["Soft-deleted 1 job(s). 1 were already deleted."]
    ghost.refresh_from_db()
    assert ghost.deleted_at == now
    gone.refresh_from_db()
    assert gone.deleted_at == now - timedelta(days=1)  # the first deletion time is kept
    assert AnalysisJob.objects.filter(pk=ghost.pk).exists()  # soft: the row stays
    assert not AnalysisJob.objects.ghosts().exists()


def test_hard_delete_is_not_offered(staff_client, make_job):
    job = make_job()
    page = staff_client.get(reverse(CHANGELIST)).content.decode()
    assert "delete_selected" not in page
    assert 'value="soft_delete"' in page
    delete = staff_client.get(reverse("admin:jobs_analysisjob_delete", args=[job.pk]))
    assert delete.status_code == 403
