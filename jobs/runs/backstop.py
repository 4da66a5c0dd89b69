"""The run backstop: record the runs that no browser tab saved.

A finished job whose tab was closed leaves a ghost: a terminal job with a report body and no run
row holding it (``AnalysisJob.objects.ghosts()``). ``record_jobs`` locks a batch of ghosts, oldest
first, with ``SKIP LOCKED`` so concurrent sweepers (a rolling deploy runs old and new side by
side) take disjoint rows; saves and judges them through ``save_and_judge`` as ``'worker'``.

The ops diagnostics of a recorded run — one ``RunEvent`` (job, lag since the job turned
terminal, writer, who recorded it) — is written in the same transaction as the record, as an
outbox: once the run is committed its event is too, whatever fails afterwards (the judge, the
database restarting). The structured log line follows the commit; the judgment and its own
``judged`` event follow from there, or, when the judge fails, from the judge backstop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import AnalysisJob, RunEvent, SavedBy
from jobs.runs.saving import Saved, save_and_judge
from jobs.runs.writer import SaveResult

logger = logging.getLogger(__name__)


def record_jobs(
    job_ids: Iterable[int] | None = None,
    *,
    limit: int | None = None,
    grace: timedelta | float | None = None,
    source: str = "sweeper",
    sweeper_name: str = "",
    operator: str = "",
) -> list[SaveResult]:
    """Record ghost jobs as runs saved by the worker; return one ``SaveResult`` per job handled.

    Without ``job_ids`` (the sweeper): up to ``limit`` (default ``ACURIO_SWEEP_BATCH``) ghosts
    untouched for ``grace`` (default ``ACURIO_SWEEP_GRACE_SECONDS``), oldest first. With
    ``job_ids`` (the admin's "record now"): those of them that are still ghosts, no grace unless
    one is given. Jobs locked by another sweeper are skipped, not waited for. ``operator``
    names the person who asked (a manual record); ``sweeper_name`` the sweeper process.

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

    def outbox(saved: Saved) -> None:
        # In the saves' transaction: the events commit with the runs they describe.
        now = timezone.now()
        events = [
            RunEvent(
                kind=RunEvent.Kind.RECORDED,
                job_id=result.job_id,
                run_id=result.run_id,
                writer=SavedBy.WORKER,
                lag_seconds=(now - finished_at).total_seconds() if finished_at else None,
                sweeper=sweeper_name,
                operator=operator,
                details={"source": source},
                created_at=now,
            )
            # (A no-op means the job was covered meanwhile: a newer job's run, or the tab
            # came back; a claim cannot happen for a worker save.)
            for result, finished_at in saved
            if result.action == "write"
        ]
        RunEvent.objects.bulk_create(events)
        transaction.on_commit(lambda: _log(events, source))

    saved = save_and_judge(
        picking,
        SavedBy.WORKER,
        outbox=outbox,
        judge_source=source,
        sweeper_name=sweeper_name,
    )
    return [item.result for item in saved]


def _log(events: list[RunEvent], source: str) -> None:
    for event in events:
        logger.info(
            "run_recorded job=%s run=%s writer=%s lag_seconds=%s source=%s sweeper=%s operator=%s",
            event.job_id,
            event.run_id,
            event.writer,
            f"{event.lag_seconds:.1f}" if event.lag_seconds is not None else "-",
            source,
            event.sweeper or "-",
            event.operator or "-",
        )
