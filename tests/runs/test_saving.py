"""save_and_judge: the one "save, then judge" of the tab's save and the backstop."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.durable.models import Instance
from jobs.models import AnalysisJob, AnalysisRun, JobStatus, SavedBy
from jobs.runs import JobNotTerminal, save_and_judge
from jobs.runs import saving as saving_module

from .helpers import run_version, saved


def jobs_of(*jobs: AnalysisJob):
    return AnalysisJob.objects.filter(pk__in=[j.pk for j in jobs])


@pytest.mark.django_db
def test_a_write_is_saved_then_judged(make_job):
    job = make_job()
    [item] = save_and_judge(jobs_of(job), SavedBy.WORKER)
    assert (item.result.action, item.result.job_id, item.result.saved_by) == (
        "write",
        job.pk,
        "worker",
    )
    assert item.finished_at == job.finished_at
    assert item.judgment["score"] == 100 and item.judge_error is None
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judged_job_id == job.pk and run.judgment == item.judgment


@pytest.mark.django_db
def test_a_claim_and_a_noop_are_not_judged_again(make_job):
    job = make_job()
    saved(job, "worker")
    [claim] = save_and_judge(jobs_of(job), SavedBy.CLIENT)
    assert (claim.result.action, claim.judgment) == ("claim", None)
    version = run_version(job.run_id)
    [noop] = save_and_judge(jobs_of(job), SavedBy.CLIENT)
    assert (noop.result.action, noop.judgment) == ("noop", None)
    assert run_version(job.run_id) == version  # not even a judgment was stored
    assert AnalysisRun.objects.get(pk=job.run_id).judged_job_id is None


@pytest.mark.django_db
def test_the_jobs_of_one_run_are_saved_oldest_first(make_job):
    old = make_job()
    new = make_job(run_id=old.run_id)
    items = save_and_judge(jobs_of(new, old), SavedBy.WORKER)
    assert [(i.result.job_id, i.result.action) for i in items] == [
        (old.pk, "write"),
        (new.pk, "write"),
    ]
    run = AnalysisRun.objects.get(pk=old.run_id)
    assert run.job_id == new.pk and run.judged_job_id == new.pk


@pytest.mark.django_db
def test_a_job_that_cannot_be_saved_rolls_the_whole_set_back(make_job):
    done = make_job()
    running = make_job(status=JobStatus.RUNNING, doc_html=None)
    with pytest.raises(JobNotTerminal):
        save_and_judge(jobs_of(done, running), SavedBy.WORKER)
    assert not AnalysisRun.objects.exists()
    assert AnalysisJob.objects.get(pk=done.pk).run_saved_at is None


@pytest.mark.django_db(transaction=True)
def test_the_judge_runs_after_the_saves_committed(make_job, monkeypatch):
    seen = []
    real = saving_module.judge_runs

    def judging(run_ids, **kwargs):
        # No transaction open: the saves committed and their row locks are gone.
        seen.append(connection.in_atomic_block)
        assert AnalysisRun.objects.filter(pk__in=list(run_ids)).exists()
        return real(run_ids, **kwargs)

    monkeypatch.setattr(saving_module, "judge_runs", judging)
    job = make_job()
    save_and_judge(jobs_of(job), SavedBy.CLIENT)
    assert seen == [False]


@pytest.mark.django_db
def test_a_remote_judge_is_handed_to_a_worker_when_the_caller_cannot_wait(make_job, settings):
    settings.ACURIO_JUDGE_URL = "http://127.0.0.1:9/v1"  # never called here
    job = make_job()
    [item] = save_and_judge(jobs_of(job), SavedBy.CLIENT, hand_remote_to_worker=True)
    assert (item.result.action, item.judgment, item.judge_error) == ("write", None, None)
    assert Instance.objects.filter(label=f"judge run {job.run_id}").count() == 1
    assert AnalysisRun.objects.unjudged().filter(pk=job.run_id).exists()


@pytest.mark.django_db
def test_a_failing_judge_leaves_the_run_saved_and_unjudged(make_job, settings, monkeypatch):
    from jobs.runs import judge as judge_module

    settings.ACURIO_JUDGE_URL = "http://127.0.0.1:9/v1"
    settings.ACURIO_JUDGE_MAX_ATTEMPTS = 1
    monkeypatch.setattr(judge_module, "_sleep", lambda s: None)
    job = make_job()
    [item] = save_and_judge(jobs_of(job), SavedBy.WORKER)  # the backstop waits for the judge
    assert item.result.action == "write" and item.judgment is None
    assert "failed after 1 attempts" in str(item.judge_error)
    assert AnalysisRun.objects.unjudged().filter(pk=job.run_id).exists()
