"""Set-up shared by the admin tests: jobs placed in time, runs, heartbeats, events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent, SweeperHeartbeat

NOW = datetime(2026, 6, 10, 12, 20, tzinfo=UTC)


@pytest.fixture
def now():
    """Python's clock frozen at NOW (20 past the hour, so hourly buckets are unambiguous).

    Every instant the dashboard compares with comes from ``timezone.now()``, so freezing it
    makes ages and windows exact; PostgreSQL's own clock is never consulted by these queries.
    """
    with time_machine.travel(NOW, tick=False):
        yield NOW


@pytest.fixture
def place_job(make_job):
    """A job whose finished_at / updated_at / created_at are set to given instants.

    ``updated_at`` is ``auto_now``, so it is set with an UPDATE after the insert.
    """

    def place(
        *,
        finished: datetime | None = None,
        updated: datetime | None = None,
        created: datetime | None = None,
        **fields,
    ) -> AnalysisJob:
        if finished is not None:
            fields["finished_at"] = finished
        if created is not None:
            fields["created_at"] = created
        job = make_job(**fields)
        stamp = updated or finished or created
        if stamp is not None:
            AnalysisJob.objects.filter(pk=job.pk).update(updated_at=stamp)
            job.refresh_from_db()
        return job

    return place


@pytest.fixture
def make_run():
    """A run row holding ``job``, prepared directly: these tests read runs, not write them."""

    def make(job: AnalysisJob, *, saved_by: str | None = "client", saved_at=None, **fields):
        run = AnalysisRun.objects.create(
            id=job.run_id,
            owner=job.owner,
            job=job,
            document=job.filename,
            status=job.status if job.is_terminal else JobStatus.COMPLETE,
            doc_html=job.doc_html or "",
            report=job.results or {},
            saved_by=saved_by,
            saved_at=saved_at or timezone.now(),
            **fields,
        )
        AnalysisJob.objects.filter(pk=job.pk).update(run_saved_at=run.saved_at)
        return run

    return make


@pytest.fixture
def heartbeat():
    def make(name: str, *, tick_age: float | None, now: datetime, tick: float = 30, **fields):
        return SweeperHeartbeat.objects.create(
            name=name,
            last_tick_at=None if tick_age is None else now - timedelta(seconds=tick_age),
            tick_seconds=tick,
            **fields,
        )

    return make


@pytest.fixture
def event():
    def make(kind: str, at: datetime, *, lag: float | None = None, sweeper="host:1", **fields):
        return RunEvent.objects.create(
            kind=kind, created_at=at, lag_seconds=lag, sweeper=sweeper, writer="worker", **fields
        )

    return make
