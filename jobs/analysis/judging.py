"""The judge's pure part: counting a report's problems, scoring it, naming its worst problems,
and the remote judge's prompt and reply format. No Django and no network here;
``jobs.runs.judge`` reads runs, calls the remote judge and stores judgments.

:func:`problem_counts` is the one definition of "a problem": the runs list, the report page, the
judge and the API all count through it, so no two pages disagree. A problem is a citation whose
verdict is not ``verified`` (missing reference, year or author mismatch, ambiguous), an entry of
the reference list that is never cited, or an entry with a malformed DOI. (An entry not in the
student's library is counted apart, ``not_in_library``: it is a lead, not an error.)

The built-in judgment of a report (DESIGN.md's report JSON) is dominated by the share of
citations with a problem::

    citation_share  = citations with a problem / citations
    reference_share = (uncited entries + malformed DOIs) / entries      (at most 1)
    score = round(100 * (0.9 * max(0, 1 - 3 * citation_share) + 0.1 * (1 - reference_share)))

Each wrong citation in a hundred costs three points, so 3 % wrong citations is still "good"
(92), 5 % "fair" (87) and 15 % "poor" (60) even with a perfect reference list. Rating:
>= 90 good, >= 70 fair, else poor. A report without a single in-text citation gets no score
(``None``, rating ``"none"``, "no citations found"): there is nothing to rate. A failed analysis
has no score either: the failure is the analysis's, not the thesis's.

A remote judge (an OpenAI-compatible chat-completions endpoint) gets :func:`prompt` and must
reply with one JSON object ``{"score": 0-100, "summary": str, "problems": [{"text", "reason"}]}``;
:func:`parse_reply` checks it and raises :class:`JudgeError` saying what was wrong.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

BUILTIN_JUDGE = "builtin"
# The problem verdicts of a citation, in the order the report lists their groups.
PROBLEM_VERDICTS = ("missing_reference", "year_mismatch", "author_mismatch", "ambiguous")
# Points lost per percent of citations with a problem (see the module's docstring).
CITATION_PENALTY = 3.0
CITATION_PART = 0.9
NO_CITATIONS = "none"
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


def problem_counts(report: dict[str, Any] | None) -> dict[str, int]:
    """Every count a page shows about a report's problems: the one definition of them.

    ``total`` = ``citation_problems`` + ``uncited`` + ``invalid_doi``; ``citation_problems`` is
    the sum of the four problem verdicts. Computed from the citations and entries themselves
    (not the stored summary), so it also holds for reports saved before the summary changed.
    """
    report = report if isinstance(report, dict) else {}
    cites = [c for c in report.get("citations") or [] if isinstance(c, dict)]
    refs = [r for r in report.get("references") or [] if isinstance(r, dict)]
    counts = {"citations": len(cites), "verified": 0}
    counts.update({verdict: 0 for verdict in PROBLEM_VERDICTS})
    for citation in cites:
        verdict = citation.get("verdict")
        if verdict in counts:
            counts[verdict] += 1
    counts["citation_problems"] = sum(counts[v] for v in PROBLEM_VERDICTS)
    counts["references"] = len(refs)
    counts["uncited"] = sum(1 for r in refs if r.get("verdict") == "uncited")
    counts["invalid_doi"] = sum(1 for r in refs if r.get("doi") and r.get("doi_valid") is False)
    counts["not_in_library"] = sum(1 for r in refs if r.get("library") == "not_found")
    counts["total"] = counts["citation_problems"] + counts["uncited"] + counts["invalid_doi"]
    return counts


def score_of(counts: dict[str, int]) -> int | None:
    """The built-in score from :func:`problem_counts` (formula in the module's docstring)."""
    if not counts.get("citations"):
        return None
    citation_share = counts["citation_problems"] / counts["citations"]
    reference_share = (
        min(1.0, (counts["uncited"] + counts["invalid_doi"]) / counts["references"])
        if counts.get("references")
        else 0.0
    )
    citation_part = max(0.0, 1 - CITATION_PENALTY * citation_share)
    return round(
        100 * (CITATION_PART * citation_part + (1 - CITATION_PART) * (1 - reference_share))
    )


class JudgeError(Exception):
    """The judge could not assess a run; the message says why. Nothing was stored."""


def rating(score: int | None) -> str:
    if score is None:
        return NO_CITATIONS
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
    counts = problem_counts(report)
    uncited = counts["uncited"]
    score = score_of(counts)

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
        summary = (
            "No citations found: the thesis has no in-text citations to check, so it gets no score."
        )
    else:
        pct = round(100 * counts["verified"] / len(citations))
        issues = [_plural(counts[v], *_PROBLEM_NOUNS[v]) for v in _PROBLEM_NOUNS if counts[v]]
        if uncited:
            issues.append(_plural(uncited, "uncited reference"))
        if counts["invalid_doi"]:
            issues.append(_plural(counts["invalid_doi"], "malformed DOI"))
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
