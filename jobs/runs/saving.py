"""Save, then judge: the one path by which a run row gets new content and its judgment.

The tab's save (``POST /api/analysis-runs``) and the sweeper's backstop (``jobs.runs.backstop``)
both call ``save_and_judge``: the saves go through the single writer in one short transaction,
and what they wrote is judged after it has committed, with no row locked, because a remote
judge calls the network.

The caller's diagnostics (the backstop's "recorded" events) are written by an ``outbox``
callback *inside* the saves' transaction: they commit with the runs or not at all, so no
failure after the commit (the judge, the database going away) can lose them. Each judgment's
own event is written with the judgment (``jobs.runs.judge``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from jobs.analysis.judging import JudgeError
from jobs.models import AnalysisJob
from jobs.runs.judge import judge_runs, judge_soon
from jobs.runs.writer import SaveResult, save_run

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SavedRun:
    """One job's save and what the judge said about it."""

    result: SaveResult
    finished_at: datetime | None  # when the job turned terminal
    judgment: dict | None = None  # None: nothing new to judge, judge failed, or handed on
    judge_error: JudgeError | None = None


# What the outbox callback is given: each save's result and when its job turned terminal.
Saved = list[tuple[SaveResult, datetime | None]]


def save_and_judge(
    jobs: QuerySet[AnalysisJob],
    saved_by: str,
    *,
    hand_remote_to_worker: bool = False,
    outbox: Callable[[Saved], object] | None = None,
    judge_source: str = "save",
    sweeper_name: str = "",
) -> list[SavedRun]:
    """Save the run of every job in ``jobs`` as ``saved_by``, then judge the runs written.

    ``jobs`` is evaluated — and its rows locked, when it says ``select_for_update`` — in the
    transaction of the saves, which commits before any judging. The saves run in one global
    order (run id, then job id), so two callers whose sets share runs never wait on each other
    in a cycle, and the jobs of one run are saved oldest first (the newer then wins by the
    table). Only writes are judged: a claim keeps content already judged, a no-op writes none.

    The built-in judge runs here. A remote judge runs here too (the backstop's thread may
    wait), unless ``hand_remote_to_worker`` (a request must not wait on the network): then a
    worker judges it very soon. A judge failure leaves the run unjudged for its job, and the
    judge backstop judges it later. Raises ``SaveRunError`` as ``save_run`` does (the whole
    transaction is rolled back). Call it with no transaction open.

    ``outbox(saved)`` runs inside the saves' transaction, after the last save: what it writes
    commits with them. ``judge_source`` and ``sweeper_name`` go on the judged events.
    """
    with transaction.atomic():
        # Only ids and times: the multi-MB body stays in the database.
        picked = list(jobs.values_list("pk", "run_id", "finished_at"))
        saved = [
            (save_run(pk, saved_by), finished_at)
            for pk, _run_id, finished_at in sorted(picked, key=lambda row: (str(row[1]), row[0]))
        ]
        if outbox is not None:
            outbox(saved)
    # The locks are released: now the slow part.
    written = [result.run_id for result, _ in saved if result.action == "write"]
    judgments: dict = {}
    failures: dict = {}
    if written and hand_remote_to_worker and settings.ACURIO_JUDGE_URL:
        for run_id in written:
            judge_soon(run_id)
    elif written:
        judgments, failures = judge_runs(written, source=judge_source, sweeper_name=sweeper_name)
    for run_id, exc in failures.items():
        logger.warning("run %s saved but not judged yet (the judge backstop will): %s", run_id, exc)
    return [
        SavedRun(
            result,
            finished_at,
            judgments.get(result.run_id) if result.action == "write" else None,
            failures.get(result.run_id) if result.action == "write" else None,
        )
        for result, finished_at in saved
    ]
