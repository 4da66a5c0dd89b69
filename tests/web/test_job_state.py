"""A job's state changes (model and QuerySet methods) and whose failure a failed job is."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.utils import timezone

from jobs import pipeline
from jobs.models import AnalysisJob, FailureKind, JobStatus

pytestmark = pytest.mark.django_db


def test_mark_stage_runs_the_job_and_saves_the_given_fields(make_job):
    job = make_job(status=JobStatus.QUEUED, doc_html=None)
    job.mark_stage("parse", doc_html="<p>x</p>", progress_total=3)
    stored = AnalysisJob.objects.get(pk=job.pk)
    assert (stored.status, stored.progress_step, stored.doc_html, stored.progress_total) == (
        JobStatus.RUNNING,
        "parse",
        "<p>x</p>",
        3,
    )
    assert AnalysisJob.objects.filter(pk=job.pk).mark_stage("finalize") == 1
    assert AnalysisJob.objects.get(pk=job.pk).progress_step == "finalize"


def test_complete_stores_the_report_and_the_counts(make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html="<p>x</p>", error="old")
    job.complete({"summary": {"verified": 2}}, citations=2)
    stored = AnalysisJob.objects.get(pk=job.pk)
    assert (stored.status, stored.results, stored.error, stored.failure_kind) == (
        JobStatus.COMPLETE,
        {"summary": {"verified": 2}},
        "",
        "",
    )
    assert (stored.progress_step, stored.progress_done, stored.progress_total) == ("complete", 2, 2)
    assert stored.finished_at is not None


def test_fail_is_a_compare_and_set(make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None)
    assert job.fail("The PDF has no text layer.", FailureKind.INPUT) is True
    stored = AnalysisJob.objects.get(pk=job.pk)
    assert (stored.status, stored.error, stored.failure_kind) == (
        JobStatus.FAILED,
        "The PDF has no text layer.",
        FailureKind.INPUT,
    )
    assert stored.finished_at is not None
    # A second failure (an operator's cancel racing the worker) changes nothing.
    assert stored.fail(pipeline.CANCELLED_ERROR, FailureKind.CANCELLED) is False
    assert AnalysisJob.objects.get(pk=job.pk).failure_kind == FailureKind.INPUT


def test_a_finished_job_is_never_failed(make_job):
    job = make_job()  # complete
    assert job.fail(pipeline.INTERNAL_ERROR, FailureKind.INTERNAL) is False
    assert AnalysisJob.objects.get(pk=job.pk).status == JobStatus.COMPLETE


def test_soft_delete_once(make_job):
    a, b = make_job(), make_job()
    assert a.soft_delete() is True
    assert a.soft_delete() is False
    assert AnalysisJob.objects.filter(pk__in=[a.pk, b.pk]).soft_delete() == 1
    assert AnalysisJob.objects.alive().count() == 0


def test_new_attempt_is_a_queued_job_of_the_same_run(make_job):
    job = make_job(
        status=JobStatus.FAILED, error="x", library=b"@book{a}", library_filename="r.bib"
    )
    new = job.new_attempt()
    assert new.pk != job.pk and new.run_id == job.run_id and new.owner_id == job.owner_id
    assert (new.status, new.progress_step, new.workflow_id) == (JobStatus.QUEUED, "queued", None)
    assert bytes(new.upload) == bytes(job.upload) and bytes(new.library) == b"@book{a}"
    assert new.library_filename == "r.bib"


def test_unsaved_work_is_active_jobs_and_recent_unsaved_failures(make_job):
    from datetime import timedelta

    queued = make_job(status=JobStatus.QUEUED, doc_html=None)
    failed = make_job(status=JobStatus.FAILED, error="x")
    make_job(status=JobStatus.FAILED, error="x", finished_at=timezone.now() - timedelta(days=2))
    make_job(status=JobStatus.FAILED, error="x", run_saved_at=timezone.now())
    make_job()  # complete: its run is the list's business
    found = AnalysisJob.objects.unsaved_work(failed_within=timedelta(days=1))
    assert set(found.values_list("pk", flat=True)) == {queued.pk, failed.pk}


# --- whose failure it is ----------------------------------------------------------------------


def test_an_upload_error_is_the_users_with_its_own_message():
    error = pipeline.UploadError("The PDF is encrypted.")
    assert str(error) == "Unusable upload: The PDF is encrypted."  # what the engine shows
    assert pipeline.failure_of(error, str(error)) == (FailureKind.INPUT, "The PDF is encrypted.")


@pytest.mark.parametrize(
    ("exc", "error", "kind", "message"),
    [
        (
            KeyError("bug"),
            "step verify failed after 5 attempt(s): KeyError: 'bug'",
            "internal",
            None,
        ),
        (None, "lease expired after 5 attempt(s)", "internal", None),
        (None, "cancelled", "cancelled", pipeline.CANCELLED_ERROR),
        # An UploadError without a message has nothing to tell the user: ours.
        (pipeline.UploadError(" "), "Unusable upload:  ", "internal", None),
        # The text alone never makes a failure the user's: only the exception's type does.
        (None, "Unusable upload: looks like the user's", "internal", None),
    ],
)
def test_failure_kind_comes_from_the_type_not_the_text(exc, error, kind, message):
    assert pipeline.failure_of(exc, error) == (kind, message or pipeline.INTERNAL_ERROR)


def test_on_failure_reads_the_exception_the_worker_is_handling(make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None, workflow_id=None)
    AnalysisJob.objects.filter(pk=job.pk).update(workflow_id="00000000-0000-0000-0000-000000000001")
    try:
        raise pipeline.UploadError("The DOCX has no document part.")
    except pipeline.UploadError as exc:
        pipeline.on_failure("00000000-0000-0000-0000-000000000001", str(exc))
    stored = AnalysisJob.objects.get(pk=job.pk)
    assert (stored.failure_kind, stored.error) == (
        FailureKind.INPUT,
        "The DOCX has no document part.",
    )


def test_on_failure_outside_a_step_is_ours(make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None)
    AnalysisJob.objects.filter(pk=job.pk).update(workflow_id="00000000-0000-0000-0000-000000000002")
    pipeline.on_failure("00000000-0000-0000-0000-000000000002", "Unusable upload: not from a step")
    stored = AnalysisJob.objects.get(pk=job.pk)
    assert (stored.failure_kind, stored.error) == (FailureKind.INTERNAL, pipeline.INTERNAL_ERROR)


def test_the_migration_gives_older_failures_their_kind(make_job):
    migration = importlib.import_module("jobs.migrations.0005_job_failure_kind")
    ours = make_job(status=JobStatus.FAILED, error=pipeline.INTERNAL_ERROR)
    cancelled = make_job(status=JobStatus.FAILED, error=pipeline.CANCELLED_ERROR)
    users = make_job(status=JobStatus.FAILED, error="The PDF has no text layer.")
    complete = make_job()
    migration.backfill(apps, None)
    kinds = dict(AnalysisJob.objects.values_list("pk", "failure_kind"))
    assert kinds == {
        ours.pk: FailureKind.INTERNAL,
        cancelled.pk: FailureKind.CANCELLED,
        users.pk: FailureKind.INPUT,
        complete.pk: "",
    }
    assert migration.INTERNAL_ERROR == pipeline.INTERNAL_ERROR
    assert migration.CANCELLED_ERROR == pipeline.CANCELLED_ERROR
