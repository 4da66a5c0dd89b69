"""The JSON API: shapes, status codes, ownership, and the client writer's save."""

from __future__ import annotations

import uuid

import pytest

from jobs.models import AnalysisRun, JobStatus
from jobs.runs import save_run

pytestmark = pytest.mark.django_db


def job_url(job_id) -> str:
    return f"/api/analysis-jobs/{job_id}"


def save(client, job_id, **kw):
    return client.post(
        "/api/analysis-runs", {"job_id": job_id}, content_type="application/json", **kw
    )


def test_job_progress_has_the_contract_shape(user_client, make_job):
    job = make_job(
        status=JobStatus.RUNNING,
        doc_html=None,
        progress_step="verify",
        progress_done=50,
        progress_total=120,
    )
    resp = user_client.get(job_url(job.pk))
    assert resp.status_code == 200
    assert resp.json() == {
        "id": job.pk,
        "run_id": str(job.run_id),
        "status": "running",
        "progress": {"step": "verify", "done": 50, "total": 120},
        "error": None,
        "run_saved": False,
    }


def test_failed_job_shows_its_user_facing_error(user_client, make_job):
    job = make_job(status=JobStatus.FAILED, doc_html=None, results=None, error="Corrupt PDF.")
    body = user_client.get(job_url(job.pk)).json()
    assert body["status"] == "failed"
    assert body["error"] == "Corrupt PDF."


def test_run_saved_turns_true_once_a_run_holds_the_job(user_client, make_job):
    job = make_job()
    assert user_client.get(job_url(job.pk)).json()["run_saved"] is False
    save_run(job.pk, "worker")
    assert user_client.get(job_url(job.pk)).json()["run_saved"] is True


def test_another_users_job_is_a_404(user_client, make_job, other_user):
    job = make_job(owner=other_user)
    resp = user_client.get(job_url(job.pk))
    assert resp.status_code == 404
    assert resp.json() == {"error": "No such analysis job."}
    assert save(user_client, job.pk).status_code == 404
    assert not AnalysisRun.objects.exists()


def test_soft_deleted_job_is_a_404(user_client, make_job):
    from django.utils import timezone

    job = make_job(deleted_at=timezone.now())
    assert user_client.get(job_url(job.pk)).status_code == 404
    assert save(user_client, job.pk).status_code == 404


def test_missing_job_is_a_404(user_client):
    assert user_client.get(job_url(999999)).status_code == 404


def test_api_needs_login(client, make_job):
    job = make_job()
    resp = client.get(job_url(job.pk))
    assert resp.status_code == 401
    assert resp.json()["error"].startswith("Authentication required")
    assert save(client, job.pk).status_code == 401


def test_client_save_writes_then_repeats_as_a_noop(user_client, make_job):
    job = make_job()
    first = save(user_client, job.pk)
    assert first.status_code == 201
    assert first.json() == {"id": str(job.run_id), "saved_by": "client", "job_id": job.pk}
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert (run.saved_by, run.job_id, run.doc_html) == ("client", job.pk, job.doc_html)

    again = save(user_client, job.pk)
    assert again.status_code == 200
    assert again.json() == {"id": str(job.run_id), "saved_by": "client", "job_id": job.pk}


def test_client_save_claims_a_run_the_worker_recorded(user_client, make_job):
    job = make_job()
    save_run(job.pk, "worker")
    resp = save(user_client, job.pk)
    assert resp.status_code == 201
    assert resp.json()["saved_by"] == "client"
    assert AnalysisRun.objects.get(pk=job.run_id).saved_by == "client"


def test_saving_an_older_job_reports_what_the_row_holds(user_client, make_job):
    run_id = uuid.uuid4()
    old = make_job(run_id=run_id)
    new = make_job(run_id=run_id)
    assert save(user_client, new.pk).status_code == 201
    resp = save(user_client, old.pk)
    assert resp.status_code == 200
    assert resp.json() == {"id": str(run_id), "saved_by": "client", "job_id": new.pk}


def test_saving_a_job_still_running_is_a_conflict(user_client, make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None)
    resp = save(user_client, job.pk)
    assert resp.status_code == 409
    assert "still running" in resp.json()["error"]
    assert not AnalysisRun.objects.exists()


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1, 2]", b'{"job_id": "abc"}', b'{"job_id": true}', b'{"id": 3}'],
)
def test_save_with_a_bad_body_is_a_clear_400(user_client, body):
    resp = user_client.post("/api/analysis-runs", body, content_type="application/json")
    assert resp.status_code == 400
    assert '{"job_id": <id>}' in resp.json()["error"]


def test_save_accepts_the_id_as_a_numeric_string(user_client, make_job):
    job = make_job()
    assert save(user_client, str(job.pk)).status_code == 201


def test_save_needs_a_csrf_token_from_a_browser(make_job, user, client):
    from django.test import Client

    job = make_job()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert save(browser, job.pk).status_code == 403
    assert not AnalysisRun.objects.exists()


def test_wrong_methods_are_refused(user_client, make_job):
    job = make_job()
    assert user_client.post(job_url(job.pk)).status_code == 405
    assert user_client.get("/api/analysis-runs").status_code == 405
    assert user_client.get("/api/analysis-jobs").status_code == 405


def test_client_write_is_judged_at_once(user_client, make_job):
    job = make_job()
    assert save(user_client, job.pk).status_code == 201
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judged_job_id == job.pk
    assert run.judgment["score"] is not None


def test_an_unreachable_judge_does_not_fail_the_save(user_client, make_job, monkeypatch):
    from jobs.runs import JudgeError, judge

    def down(run):
        raise JudgeError("judge unreachable")

    monkeypatch.setattr(judge, "assess", down)
    job = make_job()
    assert save(user_client, job.pk).status_code == 201
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judged_job_id is None  # left to the sweeper's judge backstop
    assert AnalysisRun.objects.unjudged().filter(pk=run.pk).exists()
