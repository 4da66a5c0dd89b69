"""The judge: an overall assessment of a run's report, stored on the run.

``judge_run(run_id)`` assesses the content the run holds *now* (its current job) and stores
``judgment``, ``judged_job`` and ``judged_at``; ``AnalysisRun.objects.unjudged()`` is the set it
still owes, which the sweeper's judge backstop works through.

Two judges:

* **built-in** (default, offline): a score from the report's verdicts, the worst problems with
  their reasons, and one summary sentence. The formula::

      citation_quality  = 1 - sum(weight[verdict] for each citation) / citations
                          weights: verified 0, author_mismatch 0.25, year_mismatch 0.5,
                                   ambiguous 0.6, missing_reference 1
      reference_quality = 1 - uncited references / references
      score = round(100 * (0.85 * citation_quality + 0.15 * reference_quality))

  A part with nothing to count scores 1. A report without a single in-text citation scores 0
  (nothing in it could be verified). A failed analysis has no score (``None``): the failure is
  the analysis's, not the thesis's. Rating: >= 90 good, >= 70 fair, else poor.

* **remote**, when ``settings.ACURIO_JUDGE_URL`` is set: an OpenAI-compatible
  ``/chat/completions`` call (``ACURIO_JUDGE_MODEL``, bearer ``ACURIO_JUDGE_API_KEY``) with a
  timeout, retries with exponential backoff and jitter on 429/5xx and network errors (honouring
  ``Retry-After``), and an ``Idempotency-Key`` derived from run and job so a retried or
  repeated call for the same content is recognisable. The reply must be a JSON object
  ``{"score": 0-100, "summary": str, "problems": [{"text": str, "reason": str}]}``; anything
  else is a ``JudgeError`` saying what was wrong, and nothing is stored.

The network call happens with no transaction open by this module and no row locked: the run is
read, assessed, then stored by one guarded UPDATE that only lands if the run still holds the
job that was assessed (a newer job's content is judged on its own turn).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

import httpx
from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs.models import AnalysisRun, JobStatus

logger = logging.getLogger(__name__)

BUILTIN_JUDGE = "builtin"
MAX_PROBLEMS = 5

# How bad each citation verdict is, 0..1 (DESIGN.md's "worst of its keys" order).
CITATION_WEIGHTS = {
    "verified": 0.0,
    "author_mismatch": 0.25,
    "year_mismatch": 0.5,
    "ambiguous": 0.6,
    "missing_reference": 1.0,
}
# An uncited reference ranks below every citation problem in the problem list.
UNCITED_SEVERITY = 0.2
CITATION_SHARE = 0.85

# Remote judge backoff (timeout and attempts come from settings).
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 20.0
# Bounds the prompt: the judge sees counts for everything and details for the worst problems.
MAX_PROBLEMS_SENT = 200

_sleep = time.sleep  # tests patch this


class JudgeError(Exception):
    """The judge could not assess a run; the message says why. Nothing was stored."""


# --- the built-in judge -------------------------------------------------------------------


def _keys_text(keys: list[dict[str, Any]]) -> str:
    parts = []
    for key in keys or []:
        if "number" in key:
            parts.append(f"[{key['number']}]")
        else:
            parts.append(" ".join(str(key[k]) for k in ("author", "year") if key.get(k)))
    return "; ".join(p for p in parts if p) or "the cited work"


def _citation_reason(citation: dict[str, Any]) -> str:
    if citation.get("reason"):
        return str(citation["reason"])
    keys = citation.get("keys") or []
    works = _keys_text(keys)
    first = keys[0] if keys else {}
    match citation.get("verdict"):
        case "missing_reference":
            return f"No reference-list entry matches {works}."
        case "ambiguous":
            return f"{works} matches several reference entries; distinguish them (2020a, 2020b)."
        case "year_mismatch":
            return (
                f"{first.get('author', 'The author')} is in the reference list, "
                f"but not with the year {first.get('year', 'cited')}."
            )
        case "author_mismatch":
            return (
                f"No entry by {first.get('author', 'that author')} for "
                f"{first.get('year', 'that year')}; a similarly spelled surname is listed."
            )
    return "Check this citation."


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


# How the summary names each problem verdict: (singular, plural).
_PROBLEM_NOUNS = {
    "missing_reference": ("missing reference", "missing references"),
    "ambiguous": ("ambiguous citation", "ambiguous citations"),
    "year_mismatch": ("year mismatch", "year mismatches"),
    "author_mismatch": ("author mismatch", "author mismatches"),
}


def builtin_judgment(report: dict[str, Any], *, status: str = "complete", error: str = "") -> dict:
    """Assess a report (DESIGN.md's report JSON) without any outside service."""
    if status == JobStatus.FAILED:
        return {
            "judge": BUILTIN_JUDGE,
            "score": None,
            "rating": "failed",
            "summary": f"The analysis failed, so the thesis was not assessed: {error or 'unknown error'}",
            "problems": [],
            "counts": {},
        }
    citations = [c for c in report.get("citations") or [] if isinstance(c, dict)]
    references = [r for r in report.get("references") or [] if isinstance(r, dict)]
    counts = {verdict: 0 for verdict in CITATION_WEIGHTS}
    for c in citations:
        if c.get("verdict") in counts:
            counts[c["verdict"]] += 1
    uncited = sum(1 for r in references if r.get("verdict") == "uncited")
    counts.update(uncited=uncited, citations=len(citations), references=len(references))

    if citations:
        penalty = sum(CITATION_WEIGHTS.get(c.get("verdict"), 1.0) for c in citations)
        citation_quality = 1 - penalty / len(citations)
        reference_quality = 1 - uncited / len(references) if references else 1.0
        score = round(
            100 * (CITATION_SHARE * citation_quality + (1 - CITATION_SHARE) * reference_quality)
        )
    else:
        score = 0

    ranked: list[tuple[float, int, dict]] = []
    for i, c in enumerate(citations):
        weight = CITATION_WEIGHTS.get(c.get("verdict"), 1.0)
        if weight > 0:
            problem = {
                "kind": "citation",
                "index": i,
                "text": c.get("text", ""),
                "verdict": c.get("verdict"),
                "reason": _citation_reason(c),
            }
            ranked.append((-weight, i, problem))
    for i, r in enumerate(references):
        if r.get("verdict") == "uncited":
            problem = {
                "kind": "reference",
                "index": i,
                "text": r.get("text", ""),
                "verdict": "uncited",
                "reason": "Listed in the references but never cited in the text.",
            }
            ranked.append((-UNCITED_SEVERITY, len(citations) + i, problem))
    ranked.sort(key=lambda item: item[:2])
    problems = [p for *_, p in ranked[:MAX_PROBLEMS]]

    if not citations:
        summary = "No in-text citations were found, so nothing in the thesis could be verified."
    else:
        pct = round(100 * counts["verified"] / len(citations))
        issues = [_plural(counts[v], *_PROBLEM_NOUNS[v]) for v in _PROBLEM_NOUNS if counts[v]]
        if uncited:
            issues.append(_plural(uncited, "uncited reference"))
        summary = (
            f"{counts['verified']} of {_plural(len(citations), 'citation')} verified ({pct}%)"
            + (f"; {', '.join(issues)}" if issues else "; no problems found")
            + f". Score {score}/100."
        )
    return {
        "judge": BUILTIN_JUDGE,
        "score": score,
        "rating": _rating(score),
        "summary": summary,
        "problems": problems,
        "counts": counts,
    }


# --- the remote judge ---------------------------------------------------------------------

SYSTEM_PROMPT = (
    "You review the citation check of an academic thesis. You get the verdict counts and the "
    "problem citations found by an automatic checker. Reply with one JSON object only: "
    '{"score": <integer 0-100, overall citation quality>, "summary": <one sentence>, '
    '"problems": [{"text": <citation or reference as given>, "reason": <why it matters>}]} '
    "listing at most 5 of the worst problems."
)


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def idempotency_key(run_id: UUID | str, job_id: int) -> str:
    """The same run content always gets the same key: a repeated call is recognisable."""
    return f"acurio-judge-{run_id}-{job_id}"


def _retry_delay(attempt: int, response: httpx.Response | None) -> float:
    if response is not None:
        retry_after = response.headers.get("Retry-After", "")
        try:
            return min(max(float(retry_after), 0.0), BACKOFF_CAP_SECONDS)
        except ValueError:
            pass
    # Full jitter: concurrent sweepers retrying after one outage spread out.
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))


def parse_reply(body: Any) -> dict:
    """Validate a chat-completions reply; return score, summary and problems, or JudgeError."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise JudgeError("judge reply has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise JudgeError("judge reply content is not text")
    try:
        verdict = json.loads(content)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"judge reply content is not JSON ({exc.msg}): {content[:80]!r}") from None
    if not isinstance(verdict, dict):
        raise JudgeError("judge reply content is not a JSON object")
    score = verdict.get("score")
    if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= 100:
        raise JudgeError(f"judge reply score must be an integer 0-100, got {score!r}")
    summary = verdict.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise JudgeError("judge reply summary must be a non-empty string")
    problems = verdict.get("problems", [])
    if not isinstance(problems, list) or not all(
        isinstance(p, dict) and isinstance(p.get("text"), str) and isinstance(p.get("reason"), str)
        for p in problems
    ):
        raise JudgeError('judge reply problems must be a list of {"text", "reason"} strings')
    return {
        "score": score,
        "summary": summary.strip(),
        "problems": [{"text": p["text"], "reason": p["reason"]} for p in problems[:MAX_PROBLEMS]],
    }


def remote_judgment(run: AnalysisRun, baseline: dict) -> dict:
    """Ask the configured chat-completions endpoint; retries transient failures."""
    worst = [
        {"text": c.get("text", ""), "verdict": c.get("verdict"), "reason": _citation_reason(c)}
        for c in (run.report.get("citations") or [])
        if isinstance(c, dict) and c.get("verdict") not in (None, "verified")
    ][:MAX_PROBLEMS_SENT]
    prompt = {
        "document": run.document,
        "style": run.report.get("style"),
        "counts": baseline["counts"],
        "problems": worst,
        "uncited_references": [
            r.get("text", "")
            for r in run.report.get("references") or []
            if isinstance(r, dict) and r.get("verdict") == "uncited"
        ][:MAX_PROBLEMS_SENT],
    }
    model = settings.ACURIO_JUDGE_MODEL
    headers = {"Idempotency-Key": idempotency_key(run.pk, run.job_id)}
    if settings.ACURIO_JUDGE_API_KEY:
        headers["Authorization"] = f"Bearer {settings.ACURIO_JUDGE_API_KEY}"
    payload = {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(prompt, ensure_ascii=False)},
        ],
    }
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


# --- storing ------------------------------------------------------------------------------

# The body (doc_html, megabytes) is not needed to judge: it stays in TOAST.
_JUDGE_FIELDS = ("id", "job_id", "document", "status", "report", "error")

# One statement stores many judgments; each lands only if the run still holds the job judged.
_STORE_SQL = f"""
UPDATE {AnalysisRun._meta.db_table} AS r
SET judgment = v.judgment, judged_job_id = v.job_id, judged_at = %s
FROM jsonb_to_recordset(%s::jsonb) AS v(id uuid, job_id bigint, judgment jsonb)
WHERE r.id = v.id AND r.job_id = v.job_id
"""


def _assess(run: AnalysisRun) -> dict:
    judgment = builtin_judgment(run.report or {}, status=run.status, error=run.error)
    if settings.ACURIO_JUDGE_URL and run.status == JobStatus.COMPLETE:
        remote = remote_judgment(run, judgment)
        judgment = {**judgment, **remote, "rating": _rating(remote["score"])}
    judgment["job_id"] = run.job_id
    return judgment


def _store(runs: list[AnalysisRun], judgments: dict) -> int:
    rows = [
        {"id": str(r.pk), "job_id": r.job_id, "judgment": judgments[r.pk]}
        for r in runs
        if r.pk in judgments
    ]
    if not rows:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_STORE_SQL, [timezone.now(), json.dumps(rows)])
        stored = cursor.rowcount
    if stored < len(rows):
        # A newer job's content arrived while we judged; it is judged on its own turn.
        logger.info(
            "judge: %d of %d runs moved to a newer job while judged", len(rows) - stored, len(rows)
        )
    return stored


def judge_runs(
    run_ids: Iterable[UUID | str], *, should_stop: Callable[[], bool] | None = None
) -> tuple[dict[UUID, dict], dict[UUID, JudgeError]]:
    """Judge several runs; return (judgments, failures), both keyed by run id.

    The built-in judge stores all judgments in one statement; with a remote judge each is
    stored as soon as it is back, so a crash loses at most the call in flight. Unknown run ids
    are left out of both. ``should_stop`` is asked before each remote call (a draining sweeper
    leaves the rest to a later sweep).
    """
    runs = list(AnalysisRun.objects.only(*_JUDGE_FIELDS).filter(pk__in=list(run_ids)))
    judgments: dict[UUID, dict] = {}
    failures: dict[UUID, JudgeError] = {}
    remote = bool(settings.ACURIO_JUDGE_URL)
    for run in runs:
        if remote and should_stop is not None and should_stop():
            break
        try:
            judgments[run.pk] = _assess(run)
        except JudgeError as exc:
            failures[run.pk] = exc
            continue
        if remote:
            _store([run], judgments)
    if not remote:
        _store(runs, judgments)
    return judgments, failures


def judge_run(run_id: UUID | str) -> dict:
    """Judge the run's current content and store the judgment on it; return the judgment.

    Raises ``AnalysisRun.DoesNotExist`` for an unknown run and ``JudgeError`` when the remote
    judge fails (nothing stored; the judge backstop tries again on a later sweep).
    """
    run = AnalysisRun.objects.only(*_JUDGE_FIELDS).get(pk=run_id)
    judgment = _assess(run)
    _store([run], {run.pk: judgment})
    return judgment


def _rating(score: int) -> str:
    return "good" if score >= 90 else "fair" if score >= 70 else "poor"
