"""Score a report against an expected report (the corpus ``*.truth.json`` files).

Citations are aligned with the truth in document order by marker text (a longest-common-
subsequence alignment, so one missed or extra marker does not shift the rest); a truth citation
counts as correct when its aligned prediction has the same text and verdict. Extra predictions
count against the score too. References are aligned the same way by entry text; one is correct
when text, verdict, DOI and ``doi_valid`` all agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher


@dataclass
class Score:
    correct: int = 0
    total: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.correct / self.total if self.total else 1.0

    def add(self, other: Score) -> None:
        self.correct += other.correct
        self.total += other.total
        self.errors.extend(other.errors)


def _align(truth: list[str], pred: list[str]) -> tuple[list[tuple[int, int]], int]:
    """Aligned (truth, pred) index pairs and the number of predictions left unaligned."""
    sm = SequenceMatcher(a=truth, b=pred, autojunk=False)
    pairs = []
    for a, b, n in sm.get_matching_blocks():
        pairs.extend((a + k, b + k) for k in range(n))
    return pairs, len(pred) - len(pairs)


def score_citations(truth: dict, report: dict) -> Score:
    t = truth["citations"]
    p = report["citations"]
    pairs, extra = _align([c["text"] for c in t], [c["text"] for c in p])
    s = Score(total=len(t) + extra)
    matched = set()
    for i, j in pairs:
        matched.add(i)
        if t[i]["verdict"] == p[j]["verdict"]:
            s.correct += 1
        else:
            s.errors.append(
                f"{t[i]['text']!r}: expected {t[i]['verdict']}, got {p[j]['verdict']} ({p[j].get('reason', '')})"
            )
    for i, c in enumerate(t):
        if i not in matched:
            s.errors.append(f"{c['text']!r}: not found ({c['verdict']})")
    if extra:
        got = {j for _, j in pairs}
        for j, c in enumerate(p):
            if j not in got:
                s.errors.append(f"{c['text']!r}: spurious ({c['verdict']})")
    return s


def score_references(truth: dict, report: dict) -> Score:
    t = truth["references"]
    p = report["references"]
    pairs, extra = _align([r["text"] for r in t], [r["text"] for r in p])
    s = Score(total=len(t) + extra)
    matched = set()
    for i, j in pairs:
        matched.add(i)
        a, b = t[i], p[j]
        diffs = [k for k in ("verdict", "doi", "doi_valid") if a.get(k) != b.get(k)]
        if diffs:
            s.errors.append(
                f"{a['text'][:60]!r}: "
                + ", ".join(f"{k} {a.get(k)!r}!={b.get(k)!r}" for k in diffs)
            )
        else:
            s.correct += 1
    for i, r in enumerate(t):
        if i not in matched:
            s.errors.append(f"{r['text'][:80]!r}: entry not found")
    if extra:
        got = {j for _, j in pairs}
        for j, r in enumerate(p):
            if j not in got:
                s.errors.append(f"{r['text'][:80]!r}: spurious entry")
    return s
