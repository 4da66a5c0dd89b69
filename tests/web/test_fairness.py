"""Fairness between users inside one worker: large uploads run in a capped queue of their own,
so a small thesis finds a free worker thread while large analyses are running."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.durable.models import Instance, Step
from jobs.models import AnalysisJob, JobStatus
from jobs.pipeline import LARGE_QUEUE, queue_of, submit_analysis
from tests.corpus import corpus_dir
from tests.prerequisites import missing
from tests.processes import child_env

ROOT = Path(__file__).resolve().parents[2]


def test_large_uploads_go_to_the_capped_queue(settings):
    settings.ACURIO_LARGE_UPLOAD_KB = 512
    settings.ACURIO_LARGE_ANALYSIS_SLOTS = 2
    assert queue_of(512 * 1024) == "default"
    assert queue_of(512 * 1024 + 1) == LARGE_QUEUE
    settings.ACURIO_LARGE_ANALYSIS_SLOTS = 0
    assert queue_of(50 * 1024 * 1024) == "default"


def test_the_large_queue_is_declared_with_its_slots():
    from django.conf import settings

    declared = settings.ACURIO_DURABLE_QUEUES[LARGE_QUEUE]
    assert declared == {"concurrency": settings.ACURIO_LARGE_ANALYSIS_SLOTS, "fair": True}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_small_thesis_is_done_while_large_ones_hold_their_slot(settings, django_user_model):
    """One worker process with two threads and one slot for large analyses: two 300-page
    theses of one user queue up, a second user's small thesis completes while they are still
    in progress, and never more than one large step runs at a time (read from the database
    throughout; without the cap both threads take large steps)."""
    large_path = corpus_dir() / "large" / "apa_300p.md"
    small_path = corpus_dir() / "thesis_1_001.md"
    if not large_path.exists() or not small_path.exists():
        missing(f"the sample corpus is not at {corpus_dir()}")
    settings.ACURIO_LARGE_UPLOAD_KB = 256
    heavy = django_user_model.objects.create_user("heavy", password="x")
    light = django_user_model.objects.create_user("light", password="x")
    large = [submit_analysis(heavy, f"big{i}.md", large_path.read_bytes()) for i in range(2)]
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "worker", "--poll-interval", "0.2", "--concurrency", "2"],
        cwd=ROOT,
        env=child_env(
            LOG_LEVEL="WARNING", ACURIO_LARGE_UPLOAD_KB="256", ACURIO_LARGE_ANALYSIS_SLOTS="1"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    most_running = 0

    def running_large() -> int:
        return Step.objects.filter(
            instance__queue=LARGE_QUEUE, status="running", kind="task"
        ).count()

    try:
        deadline = time.monotonic() + 120
        while (most_running := running_large()) == 0:
            assert time.monotonic() < deadline, "no large step started"
            time.sleep(0.05)
        small = submit_analysis(light, "small.md", small_path.read_bytes())
        deadline = time.monotonic() + 120
        while True:
            most_running = max(most_running, running_large())
            small.refresh_from_db()
            if small.status in (JobStatus.COMPLETE, JobStatus.FAILED):
                break
            assert time.monotonic() < deadline, "the small thesis did not finish"
            time.sleep(0.02)
        assert small.status == JobStatus.COMPLETE, small.error
        still_running = AnalysisJob.objects.filter(
            pk__in=[job.pk for job in large], status__in=(JobStatus.QUEUED, JobStatus.RUNNING)
        ).count()
        assert still_running >= 1, "the large analyses ended first: nothing was shown"
        # Two large analyses wanted both threads; the cap held them to one, so the other
        # thread was free for the small thesis (the waiting time: bench/hostile_bench.py).
        assert most_running == 1
        queues = dict(
            Instance.objects.filter(
                id__in=[small.workflow_id, *(job.workflow_id for job in large)]
            ).values_list("id", "queue")
        )
        assert queues[small.workflow_id] == "default"
        assert {queues[job.workflow_id] for job in large} == {LARGE_QUEUE}
    finally:
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out[-3000:]
