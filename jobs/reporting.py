"""What the student's report pages show, built from a report JSON: the problems grouped by kind,
the marked document made keyboard-reachable, the style's human name, and what changed against
the previous version of the same thesis.

No queries here (the views fetch the rows): every function takes reports and strings, so the
pages, the exports and the tests share one reading of a report. The counts come from
``jobs.analysis.judging.problem_counts``, the one definition of a problem.
"""

from __future__ import annotations

import html as htmlmod
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jobs.analysis.judging import PROBLEM_VERDICTS, problem_counts

__all__ = [
    "KINDS",
    "Change",
    "accessible_document",
    "problem_counts",
    "problem_groups",
    "style_name",
    "what_changed",
]

# Every kind of problem the report lists: (key, label, icon, plain explanation).
# The icon is shown next to the colour, so no kind is told by colour alone.
KINDS: tuple[tuple[str, str, str, str], ...] = (
    (
        "missing_reference",
        "Missing reference",
        "✗",
        "No entry of the reference list has this author and year (or number).",
    ),
    (
        "year_mismatch",
        "Year mismatch",
        "≠",
        "The author is in the reference list, but with another year.",
    ),
    (
        "author_mismatch",
        "Author mismatch",
        "✎",
        "An entry of the same year has a slightly different surname.",
    ),
    (
        "ambiguous",
        "Ambiguous",
        "?",
        "Several entries match; their years need a/b suffixes to tell them apart.",
    ),
    ("uncited", "Uncited reference", "○", "This entry of the reference list is never cited."),
    ("invalid_doi", "Malformed DOI", "!", "The DOI of this entry is not well-formed."),
)
PLURALS = {
    "missing_reference": "missing references",
    "year_mismatch": "year mismatches",
    "author_mismatch": "author mismatches",
    "ambiguous": "ambiguous",
    "uncited": "uncited references",
    "invalid_doi": "malformed DOIs",
}
KIND_LABELS = {key: label for key, label, _icon, _text in KINDS} | {"verified": "Verified"}
KIND_ICONS = {key: icon for key, _label, icon, _text in KINDS} | {"verified": "✓"}
KIND_TEXTS = {key: text for key, _label, _icon, text in KINDS} | {
    "verified": "Matches exactly one entry of the reference list."
}
assert set(PROBLEM_VERDICTS) <= set(KIND_LABELS)

# The styles the analysis detects, as a student knows them.
STYLE_NAMES = {
    "apa": "APA",
    "harvard": "Harvard",
    "chicago": "Chicago author-date",
    "german": "German author-year",
    "ieee": "IEEE (numbered)",
    "vancouver": "Vancouver (numbered)",
}


def style_name(code: str | None) -> str:
    """The citation style's name for a student (``"german"`` -> ``"German author-year"``)."""
    if not code:
        return ""
    return STYLE_NAMES.get(code, code.replace("_", " ").replace("-", " ").capitalize())


@dataclass
class ProblemGroup:
    kind: str
    label: str
    icon: str
    items: list[dict] = field(default_factory=list)
    html: str = ""  # the items as list elements, when a page has rendered them


def problem_groups(report: dict[str, Any]) -> list[ProblemGroup]:
    """Every problem of the report, grouped by kind in :data:`KINDS` order.

    Citation items carry ``index`` (the mark in the document); reference items carry
    ``ref`` (the entry's position). ``len`` of all groups' items is
    ``problem_counts(report)["total"]``.
    """
    groups = {key: ProblemGroup(key, label, icon) for key, label, icon, _text in KINDS}
    for index, citation in enumerate(report.get("citations") or []):
        verdict = citation.get("verdict")
        if verdict in PROBLEM_VERDICTS:
            groups[verdict].items.append(
                {
                    "index": index,
                    "text": citation.get("text", ""),
                    "reason": citation.get("reason") or KIND_TEXTS[verdict],
                    "kind": verdict,
                    "label": KIND_LABELS[verdict],
                }
            )
    for number, ref in enumerate(report.get("references") or []):
        if ref.get("verdict") == "uncited":
            groups["uncited"].items.append(
                {
                    "ref": number,
                    "text": ref.get("text", ""),
                    "reason": "Listed in the references but never cited in the text.",
                    "kind": "uncited",
                    "label": KIND_LABELS["uncited"],
                }
            )
        if ref.get("doi") and ref.get("doi_valid") is False:
            groups["invalid_doi"].items.append(
                {
                    "ref": number,
                    "text": ref.get("text", ""),
                    "reason": f"The DOI “{ref['doi']}” is not well-formed.",
                    "kind": "invalid_doi",
                    "label": KIND_LABELS["invalid_doi"],
                }
            )
    return [group for group in groups.values() if group.items]


# --- the marked document -------------------------------------------------------------------

_MARK = re.compile(r'<mark class="cite cite-([a-z_]+)" data-index="(\d+)"(?: title="([^"]*)")?>')
_HEADING = re.compile(r"<(/?)h([1-6])\b", re.IGNORECASE)
# The page's own outline is h1 (the document's name) and h2 (its sections): the thesis's
# headings start two levels below, so they never mix into it.
HEADING_SHIFT = 2


def accessible_document(annotated_html: str) -> str:
    """The marked document made for every reader.

    Each citation's first mark is focusable (``tabindex="0"``, ``role="button"``) and carries
    its verdict and reason as data for the side card (instead of a ``title`` tooltip that
    neither a keyboard nor a touch screen reaches); a citation spanning several text runs gets
    further marks that are not focusable, so the Tab key visits it once. The thesis's headings
    are demoted below the page's own (h1 -> h3 ... h4-h6 -> h6).
    """
    seen: set[str] = set()

    def mark(match: re.Match) -> str:
        verdict, index, title = match.group(1), match.group(2), match.group(3) or ""
        label = KIND_LABELS.get(verdict, verdict)
        attrs = f'class="cite cite-{verdict}" data-index="{index}" data-verdict="{verdict}"'
        if index in seen:
            return f"<mark {attrs}>"
        seen.add(index)
        reason = title or htmlmod.escape(KIND_TEXTS.get(verdict, ""), quote=True)
        # The mark's name is its own text; its verdict is read from the legend entry.
        return (
            f'<mark {attrs} data-reason="{reason}" data-label="{label}" tabindex="0" '
            f'role="button" aria-describedby="legend-{verdict}">'
        )

    def heading(match: re.Match) -> str:
        level = min(6, int(match.group(2)) + HEADING_SHIFT)
        return f"<{match.group(1)}h{level}"

    return _HEADING.sub(heading, _MARK.sub(mark, annotated_html))


# --- what changed ----------------------------------------------------------------------------


@dataclass
class Change:
    """Problems of this version against the previous one, each a list of problem items."""

    fixed: list[dict]
    new: list[dict]
    still_open: list[dict]

    @property
    def any(self) -> bool:
        return bool(self.fixed or self.new or self.still_open)


def _key(item: dict) -> tuple[str, str]:
    # A problem is the same problem when the same citation (or entry) text is flagged again,
    # whatever its verdict now: "still open" even if a missing reference became a year mismatch.
    family = "citation" if "index" in item else item["kind"]
    return family, " ".join(str(item.get("text", "")).split()).casefold()


def _items(report: dict) -> list[dict]:
    return [item for group in problem_groups(report) for item in group.items]


def what_changed(previous: dict[str, Any], current: dict[str, Any]) -> Change:
    """Fixed, new and still-open problems of ``current`` against ``previous`` (two reports).

    Computed from the two reports' citations and entries, matched by their text as a multiset:
    a citation flagged twice before and once now is one fixed and one still open.
    """
    before = Counter(_key(item) for item in _items(previous))
    fixed: list[dict] = []
    new: list[dict] = []
    still_open: list[dict] = []
    for item in _items(current):
        key = _key(item)
        if before[key] > 0:
            before[key] -= 1
            still_open.append(item)
        else:
            new.append(item)
    for item in _items(previous):
        key = _key(item)
        if before[key] > 0:
            before[key] -= 1
            fixed.append(item)
    return Change(fixed=fixed, new=new, still_open=still_open)
