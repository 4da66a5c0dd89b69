"""The run backstop: record the runs that no browser tab saved.

A finished job whose tab was closed leaves a ghost: a terminal job with a report body and no run
row holding it (``AnalysisJob.objects.ghosts()``). ``record_jobs`` locks a batch of ghosts, oldest
first, with ``SKIP LOCKED`` so concurrent sweepers (a rolling deploy runs old and new side by
side) take disjoint rows; saves each through ``jobs.persistence.save_run`` as ``'worker'``;
commits; judges what it wrote (outside the transaction: the judge may call the network); and
then fires the ops diagnostics hook: one structured log line and one ``RunEvent`` per recorded
run (job, lag since the job turned terminal, writer).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.judge import judge_runs
from jobs.models import AnalysisJob, RunEvent, SavedBy
from jobs.persistence import SaveResult, save_run

logger = logging.getLogger(__name__)


def record_jobs(
    job_ids: Iterable[int] | None = None,
    *,
    limit: int | None = None,
    grace: timedelta | float | None = None,
    source: str = "sweeper",
    sweeper_name: str = "",
) -> list[SaveResult]:
    """Record ghost jobs as runs saved by the worker; return one ``SaveResult`` per job handled.

    Without ``job_ids`` (the sweeper): up to ``limit`` (default ``ACURIO_SWEEP_BATCH``) ghosts
    untouched for ``grace`` (default ``ACURIO_SWEEP_GRACE_SECONDS``), oldest first. With
    ``job_ids`` (the admin's "record now"): those of them that are still ghosts, no grace unless
    one is given. Jobs locked by another sweeper are skipped, not waited for.

    Call it with no transaction open: the row locks last only for the recording itself, and
    the judge that follows may call the network.
    """
    if job_ids is None:
        limit = settings.ACURIO_SWEEP_BATCH if limit is None else limit
        grace = settings.ACURIO_SWEEP_GRACE_SECONDS if grace is None else grace
    ghosts = AnalysisJob.objects.ghosts(grace)
    if job_ids is not None:
        ghosts = ghosts.filter(pk__in=list(job_ids))
    # The order matches the job_ghost_idx index, so PostgreSQL reads the oldest ghosts off it.
    picking = ghosts.order_by("updated_at").select_for_update(skip_locked=True, of=("self",))
    if limit is not None:
        picking = picking[:limit]

    recorded: list[tuple[SaveResult, datetime | None]] = []
    with transaction.atomic():
        # Only ids and times: the multi-MB body stays in the database.
        picked = list(picking.values_list("pk", "run_id", "finished_at"))
        # Run rows are locked in one global order (run id), so two sweepers whose batches share
        # runs never wait on each other in a cycle.
        for pk, _run_id, finished_at in sorted(picked, key=lambda row: (str(row[1]), row[0])):
            recorded.append((save_run(pk, SavedBy.WORKER), finished_at))
    # The locks are released: now the slow part.
    written = [
        (result, finished_at) for result, finished_at in recorded if result.action == "write"
    ]
    # (A no-op here means the job was covered meanwhile: a newer job's run, or the tab came back.)
    judgments, failures = judge_runs(result.run_id for result, _ in written)
    for run_id, exc in failures.items():
        # The run is recorded; the judge backstop retries it on a later sweep.
        logger.warning("judge failed for run %s: %s", run_id, exc)
    now = timezone.now()
    events = []
    for result, finished_at in written:
        judgment = judgments.get(result.run_id)
        lag = (now - finished_at).total_seconds() if finished_at else None
        logger.info(
            "run_recorded job=%s run=%s writer=%s lag_seconds=%s source=%s sweeper=%s score=%s",
            result.job_id,
            result.run_id,
            SavedBy.WORKER,
            f"{lag:.1f}" if lag is not None else "-",
            source,
            sweeper_name or "-",
            judgment.get("score") if judgment else "-",
        )
        events.append(
            RunEvent(
                kind=RunEvent.Kind.RECORDED,
                job_id=result.job_id,
                run_id=result.run_id,
                writer=SavedBy.WORKER,
                lag_seconds=lag,
                sweeper=sweeper_name,
                details={
                    "source": source,
                    "judged": judgment is not None,
                    "score": judgment.get("score") if judgment else None,
                },
                created_at=now,
            )
        )
    RunEvent.objects.bulk_create(events)
    return [result for result, _ in recorded]
