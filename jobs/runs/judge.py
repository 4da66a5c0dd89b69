"""The judge: an overall assessment of a run's report, stored on the run.

``judge_run(run_id)`` assesses the content the run holds *now* (its current job) and stores
``judgment``, ``judged_job`` and ``judged_at``; ``AnalysisRun.objects.unjudged()`` is the set it
still owes, which ``judge_backlog`` (the sweeper's judge backstop) works through. A run just
written is judged by whoever wrote it (``jobs.runs.saving.save_and_judge``); a tab's save hands
a remote judge's call to a worker (``judge_soon``), so the request never waits on the network.

Two judges:

* **built-in** (default, offline): ``jobs.analysis.judging.builtin_judgment`` — a score from
  the report's verdicts, the worst problems with their reasons, and one summary sentence (the
  formula is in that module).
* **remote**, when ``settings.ACURIO_JUDGE_URL`` is set: an OpenAI-compatible
  ``/chat/completions`` call (``ACURIO_JUDGE_MODEL``, bearer ``ACURIO_JUDGE_API_KEY``) with a
  timeout, retries with exponential backoff and jitter on 429/5xx and network errors (honouring
  ``Retry-After``), and an ``Idempotency-Key`` derived from run and job so a retried or
  repeated call for the same content is recognisable. A reply that is not the expected JSON
  object is a ``JudgeError`` saying what was wrong, and nothing is stored.

The network call happens with no transaction open by this module and no row locked: the run is
read, assessed, then stored by one guarded UPDATE (``jobs.sql.STORE_JUDGMENTS``) that only
lands if the run still holds the job that was assessed (a newer job's content is judged on its
own turn).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobs.analysis.judging import (
    JudgeError,
    builtin_judgment,
    chat_request,
    idempotency_key,
    parse_reply,
    prompt,
    rating,
)
from jobs.durable import start, task
from jobs.metrics import timed_judgment
from jobs.models import AnalysisRun, JobStatus, RunEvent
from jobs.sql import STORE_JUDGMENTS

__all__ = ["JudgeError", "judge_backlog", "judge_run", "judge_runs", "judge_soon", "judge_step"]

logger = logging.getLogger(__name__)

# Remote judge backoff (timeout and attempts come from settings).
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 20.0
# A remote judge's calls have their own timeouts and retries; this bounds the whole step.
JUDGE_STEP_TIMEOUT = 300
JUDGE_STEP = "jobs.runs.judge.judge_step"
# The body (doc_html, megabytes) is not needed to judge: it stays in TOAST.
_JUDGE_FIELDS = ("id", "job_id", "document", "status", "report", "error")

_sleep = time.sleep  # tests patch this


# --- the remote judge ---------------------------------------------------------------------


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def _retry_delay(attempt: int, response: httpx.Response | None) -> float:
    if response is not None:
        retry_after = response.headers.get("Retry-After", "")
        try:
            return min(max(float(retry_after), 0.0), BACKOFF_CAP_SECONDS)
        except ValueError:
            pass
    # Full jitter: concurrent sweepers retrying after one outage spread out.
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))


def remote_judgment(run: AnalysisRun, baseline: dict) -> dict:
    """Ask the configured chat-completions endpoint; retries transient failures."""
    model = settings.ACURIO_JUDGE_MODEL
    payload = chat_request(model, prompt(run.document, run.report, baseline["counts"]))
    headers = {"Idempotency-Key": idempotency_key(run.pk, run.job_id)}
    if settings.ACURIO_JUDGE_API_KEY:
        headers["Authorization"] = f"Bearer {settings.ACURIO_JUDGE_API_KEY}"
    url = _endpoint(settings.ACURIO_JUDGE_URL)
    timeout = settings.ACURIO_JUDGE_TIMEOUT_SECONDS
    attempts = settings.ACURIO_JUDGE_MAX_ATTEMPTS
    last = ""
    with httpx.Client(timeout=timeout) as client:
        for attempt in range(attempts):
            response = None
            try:
                response = client.post(url, json=payload, headers=headers)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 429 or response.status_code >= 500:
                    last = f"HTTP {response.status_code}"
                elif response.status_code >= 400:
                    raise JudgeError(
                        f"judge endpoint refused the request: HTTP {response.status_code} "
                        f"{response.text[:200]}"
                    )
                else:
                    try:
                        body = response.json()
                    except ValueError:
                        raise JudgeError("judge reply is not JSON") from None
                    return {**parse_reply(body), "judge": model}
            if attempt + 1 < attempts:
                delay = _retry_delay(attempt, response)
                logger.warning(
                    "judge call failed (%s), retry %d/%d in %.2fs",
                    last,
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                _sleep(delay)
    raise JudgeError(f"judge endpoint failed after {attempts} attempts: {last}")


# --- assessing and storing ----------------------------------------------------------------


@timed_judgment  # metrics: duration and failures per judge
def assess(run: AnalysisRun) -> dict:
    """The judgment of the run's current content (built-in, refined by a remote judge)."""
    judgment = builtin_judgment(run.report or {}, status=run.status, error=run.error)
    # A report without citations has nothing to rate: no remote call gives it a score.
    if (
        settings.ACURIO_JUDGE_URL
        and run.status == JobStatus.COMPLETE
        and judgment["score"] is not None
    ):
        remote = remote_judgment(run, judgment)
        judgment = {**judgment, **remote, "rating": rating(remote["score"])}
    judgment["job_id"] = run.job_id
    return judgment


def _store(runs: list[AnalysisRun], judgments: dict, *, source: str, sweeper_name: str = "") -> int:
    """Store the judgments, each with its ``judged`` RunEvent in the same transaction.

    The event commits with the judgment or not at all, so the dashboard's "judged" count is
    the judgments stored, whoever judged (a tab's save, the backstop, a worker, the judge
    backstop).
    """
    rows = [
        {"id": str(r.pk), "job_id": r.job_id, "judgment": judgments[r.pk]}
        for r in runs
        if r.pk in judgments
    ]
    if not rows:
        return 0
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(STORE_JUDGMENTS, [timezone.now(), json.dumps(rows)])
            stored = cursor.fetchall()
        RunEvent.objects.bulk_create(
            RunEvent(
                kind=RunEvent.Kind.JUDGED,
                job_id=job_id,
                run_id=run_id,
                sweeper=sweeper_name,
                details={"score": judgments[run_id].get("score"), "source": source},
            )
            for run_id, job_id in stored
        )
    if len(stored) < len(rows):
        # A newer job's content arrived while we judged; it is judged on its own turn.
        logger.info(
            "judge: %d of %d runs moved to a newer job while judged",
            len(rows) - len(stored),
            len(rows),
        )
    return len(stored)


def judge_runs(
    run_ids: Iterable[UUID | str],
    *,
    should_stop: Callable[[], bool] | None = None,
    source: str = "save",
    sweeper_name: str = "",
) -> tuple[dict[UUID, dict], dict[UUID, JudgeError]]:
    """Judge several runs; return (judgments, failures), both keyed by run id.

    The built-in judge stores all judgments in one statement; with a remote judge each is
    stored as soon as it is back, so a crash loses at most the call in flight. Unknown run ids
    are left out of both. ``should_stop`` is asked before each remote call (a draining sweeper
    leaves the rest to a later sweep). ``source`` and ``sweeper_name`` go on the judged events.
    """
    runs = list(AnalysisRun.objects.only(*_JUDGE_FIELDS).filter(pk__in=list(run_ids)))
    judgments: dict[UUID, dict] = {}
    failures: dict[UUID, JudgeError] = {}
    remote = bool(settings.ACURIO_JUDGE_URL)
    for run in runs:
        if remote and should_stop is not None and should_stop():
            break
        try:
            judgments[run.pk] = assess(run)
        except JudgeError as exc:
            failures[run.pk] = exc
            continue
        if remote:
            _store([run], judgments, source=source, sweeper_name=sweeper_name)
    if not remote:
        _store(runs, judgments, source=source, sweeper_name=sweeper_name)
    return judgments, failures


def judge_run(run_id: UUID | str) -> dict:
    """Judge the run's current content and store the judgment on it; return the judgment.

    Raises ``AnalysisRun.DoesNotExist`` for an unknown run and ``JudgeError`` when the remote
    judge fails (nothing stored; the judge backstop tries again on a later sweep).
    """
    run = AnalysisRun.objects.only(*_JUDGE_FIELDS).get(pk=run_id)
    judgment = assess(run)
    _store([run], {run.pk: judgment}, source="judge_run")
    return judgment


# --- judging a run just saved, and the backlog ---------------------------------------------


def judge_soon(run_id: UUID | str) -> None:
    """Have a remote judge assess a run without keeping the caller waiting on the network.

    A one-step durable workflow that the next free worker picks up; a failure leaves the run
    unjudged for its job, and the judge backstop (``judge_backlog``) judges it later.
    """
    start(
        task(JUDGE_STEP, timeout=JUDGE_STEP_TIMEOUT),
        label=f"judge run {run_id}",
        input={"run_id": str(run_id)},
    )


def judge_step(ctx: Any) -> dict:
    """The durable step behind judge_soon (at least once: judging twice stores the same)."""
    judgment = judge_run(ctx.input["run_id"])
    return {"run_id": ctx.input["run_id"], "score": judgment.get("score")}


def judge_backlog(
    *,
    grace: timedelta,
    limit: int,
    sweeper_name: str = "",
    should_stop: Callable[[], bool] | None = None,
) -> int:
    """Judge runs recorded but not judged for their current job; return how many were judged.

    Oldest first, ``limit`` at a time, and only runs saved at least ``grace`` ago: a run just
    saved is being judged by whoever saved it. Each judgment is logged and noted as a
    ``RunEvent``; a judge failure leaves the run for a later call.
    """
    cutoff = timezone.now() - grace
    run_ids = list(
        AnalysisRun.objects.unjudged()
        .filter(saved_at__lte=cutoff)
        .order_by("saved_at")
        .values_list("pk", flat=True)[:limit]
    )
    judgments, failures = judge_runs(
        run_ids, should_stop=should_stop, source="judge_backstop", sweeper_name=sweeper_name
    )
    for run_id, exc in failures.items():
        logger.warning("judge backstop: run %s not judged: %s", run_id, exc)
    # Each judgment's RunEvent was written with it (_store).
    for run_id, judgment in judgments.items():
        logger.info(
            "run_judged run=%s job=%s score=%s sweeper=%s",
            run_id,
            judgment["job_id"],
            judgment.get("score"),
            sweeper_name,
        )
    return len(judgments)
