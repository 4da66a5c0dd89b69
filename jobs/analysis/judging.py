"""The judge's pure part: scoring a report, naming its worst problems, and the remote judge's
prompt and reply format. No Django and no network here; ``jobs.runs.judge`` reads runs, calls
the remote judge and stores judgments.

The built-in judgment of a report (DESIGN.md's report JSON)::

    citation_quality  = 1 - sum(weight[verdict] for each citation) / citations
                        weights: verified 0, author_mismatch 0.25, year_mismatch 0.5,
                                 ambiguous 0.6, missing_reference 1
    reference_quality = 1 - uncited references / references
    score = round(100 * (0.85 * citation_quality + 0.15 * reference_quality))

A part with nothing to count scores 1. A report without a single in-text citation scores 0
(nothing in it could be verified). A failed analysis has no score (``None``): the failure is
the analysis's, not the thesis's. Rating: >= 90 good, >= 70 fair, else poor.

A remote judge (an OpenAI-compatible chat-completions endpoint) gets :func:`prompt` and must
reply with one JSON object ``{"score": 0-100, "summary": str, "problems": [{"text", "reason"}]}``;
:func:`parse_reply` checks it and raises :class:`JudgeError` saying what was wrong.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

BUILTIN_JUDGE = "builtin"
MAX_PROBLEMS = 5
# The run status whose report is not assessed (DESIGN.md's job and run statuses).
FAILED = "failed"

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
# Bounds the prompt: the judge sees counts for everything and details for the worst problems.
MAX_PROBLEMS_SENT = 200

SYSTEM_PROMPT = (
    "You review the citation check of an academic thesis. You get the verdict counts and the "
    "problem citations found by an automatic checker. Reply with one JSON object only: "
    '{"score": <integer 0-100, overall citation quality>, "summary": <one sentence>, '
    '"problems": [{"text": <citation or reference as given>, "reason": <why it matters>}]} '
    "listing at most 5 of the worst problems."
)

# How the summary names each problem verdict: (singular, plural).
_PROBLEM_NOUNS = {
    "missing_reference": ("missing reference", "missing references"),
    "ambiguous": ("ambiguous citation", "ambiguous citations"),
    "year_mismatch": ("year mismatch", "year mismatches"),
    "author_mismatch": ("author mismatch", "author mismatches"),
}


class JudgeError(Exception):
    """The judge could not assess a run; the message says why. Nothing was stored."""


def rating(score: int) -> str:
    return "good" if score >= 90 else "fair" if score >= 70 else "poor"


def _keys_text(keys: list[dict[str, Any]]) -> str:
    parts = []
    for key in keys or []:
        if "number" in key:
            parts.append(f"[{key['number']}]")
        else:
            parts.append(" ".join(str(key[k]) for k in ("author", "year") if key.get(k)))
    return "; ".join(p for p in parts if p) or "the cited work"


def citation_reason(citation: dict[str, Any]) -> str:
    """Why a citation is a problem: the checker's own reason, else one from its verdict."""
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


def builtin_judgment(report: dict[str, Any], *, status: str = "complete", error: str = "") -> dict:
    """Assess a report (DESIGN.md's report JSON) without any outside service."""
    if status == FAILED:
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
                "reason": citation_reason(c),
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
        "rating": rating(score),
        "summary": summary,
        "problems": problems,
        "counts": counts,
    }


# --- the remote judge's conversation --------------------------------------------------------


def idempotency_key(run_id: UUID | str, job_id: int) -> str:
    """The same run content always gets the same key: a repeated call is recognisable."""
    return f"acurio-judge-{run_id}-{job_id}"


def prompt(document: str, report: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """What the remote judge is told: counts, and the worst problems (never the body)."""
    worst = [
        {"text": c.get("text", ""), "verdict": c.get("verdict"), "reason": citation_reason(c)}
        for c in (report.get("citations") or [])
        if isinstance(c, dict) and c.get("verdict") not in (None, "verified")
    ][:MAX_PROBLEMS_SENT]
    return {
        "document": document,
        "style": report.get("style"),
        "counts": counts,
        "problems": worst,
        "uncited_references": [
            r.get("text", "")
            for r in report.get("references") or []
            if isinstance(r, dict) and r.get("verdict") == "uncited"
        ][:MAX_PROBLEMS_SENT],
    }


def chat_request(model: str, user_prompt: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request body for ``user_prompt``."""
    return {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(user_prompt, ensure_ascii=False)},
        ],
    }


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
