"""The run backstop: record the runs that no browser tab saved.

A finished job whose tab was closed leaves a ghost: a terminal job with a report body and no run
row holding it (``AnalysisJob.objects.ghosts()``). ``record_jobs`` locks a batch of ghosts, oldest
first, with ``SKIP LOCKED`` so concurrent sweepers (a rolling deploy runs old and new side by
side) take disjoint rows; saves and judges them through ``save_and_judge`` as ``'worker'``; and
then fires the ops diagnostics hook: one structured log line and one ``RunEvent`` per recorded
run (job, lag since the job turned terminal, writer).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import AnalysisJob, RunEvent, SavedBy
from jobs.runs.saving import save_and_judge
from jobs.runs.writer import SaveResult

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

    saved = save_and_judge(picking, SavedBy.WORKER)
    # (A no-op here means the job was covered meanwhile: a newer job's run, or the tab came back.)
    now = timezone.now()
    events = []
    for item in saved:
        result, judgment = item.result, item.judgment
        if result.action != "write":
            continue
        lag = (now - item.finished_at).total_seconds() if item.finished_at else None
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
    return [item.result for item in saved]
