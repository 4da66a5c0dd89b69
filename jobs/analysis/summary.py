"""A plain-text summary of a report, for ``manage.py analyze`` without ``--json``."""

from __future__ import annotations

import textwrap

from .report import SUMMARY_KEYS


def _short(text: str, width: int = 100) -> str:
    return textwrap.shorten(text, width=width, placeholder=" ...")


def format_summary(report: dict) -> str:
    """Counts per verdict, then every problem with its context."""
    cites, refs = report["citations"], report["references"]
    lines = [
        f"{report['document']}: {report['style']} style, {len(cites)} citations, {len(refs)} references",
        "  " + ", ".join(f"{k} {report['summary'][k]}" for k in SUMMARY_KEYS),
    ]
    problems = [c for c in cites if c["verdict"] != "verified"]
    if problems:
        lines.append("")
        lines.append("Citations needing attention:")
        for c in problems:
            lines.append(f"  [{c['verdict']}] {c['text']}: {c.get('reason', '')}")
            if c.get("context"):
                lines.append(f"      {_short(c['context'])}")
    ref_problems = []
    for r in refs:
        issues = []
        if r["verdict"] == "uncited":
            issues.append("never cited")
        if r["doi"] and not r["doi_valid"]:
            issues.append(f"malformed DOI {r['doi']}")
        if r.get("library") == "not_found":
            issues.append("not in your library")
        resolved = r.get("resolver") or {}
        if resolved.get("retracted"):
            issues.append("retracted")
        if resolved.get("status") in ("doi_not_found", "doi_mismatch", "not_found"):
            issues.append(resolved.get("reason") or resolved["status"].replace("_", " "))
        if issues:
            ref_problems.append(f"  [{'; '.join(issues)}] {_short(r['text'])}")
    if ref_problems:
        lines.append("")
        lines.append("References needing attention:")
        lines.extend(ref_problems)
    if not cites and not refs:
        # Nothing to verify is not a clean bill of health: say what was (not) found.
        lines.append("")
        lines.append("No citations and no reference list were found, so nothing could be checked.")
    elif not problems and not ref_problems:
        lines.append("")
        lines.append("No problems found.")
    return "\n".join(lines)
