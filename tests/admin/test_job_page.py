"""A job's admin page says where the job is: for a failed job, the step it failed at, read
from the engine's step table (the job row itself still says "queued" when extract failed)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs import pipeline
from jobs.durable import Worker
from jobs.models import AnalysisJob, FailureKind, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def change_page(client, job: AnalysisJob) -> str:
    response = client.get(reverse("admin:jobs_analysisjob_change", args=[job.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_job_that_failed_in_extract_shows_the_failing_step_not_queued(staff_client, user):
    job = pipeline.submit_analysis(user, "thesis.pdf", b"%PDF-1.7 not really a pdf")
    Worker(once=True).drain()
    job.refresh_from_db()
    assert (job.status, job.failure_kind) == (JobStatus.FAILED, FailureKind.INPUT)
    assert job.progress_step == "queued"  # what the page used to show as its current step

    step = job.failing_step()
    assert step is not None and "extract" in step["label"]
    assert step["attempts"] == 1 and step["error"]

    page = change_page(staff_client, job)
    assert "failed at <strong>" in page
    assert step["label"] in page
    assert "Unusable input" in page
    assert "Current step" not in page


def test_a_failed_job_without_a_workflow_says_so(staff_client, make_job):
    job = make_job(status=JobStatus.FAILED, error="lost", failure_kind="internal")
    assert job.failing_step() is None
    page = change_page(staff_client, job)
    assert "failed, at no step of its workflow" in page


def test_a_running_job_shows_its_stage(staff_client, make_job):
    job = make_job(
        status=JobStatus.RUNNING, progress_step="verify", progress_done=2, progress_total=5
    )
    assert "verify 2/5" in change_page(staff_client, job)
