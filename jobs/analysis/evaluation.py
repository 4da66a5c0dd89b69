"""Score a report against an expected report (the corpus ``*.truth.json`` files).

Citations are aligned with the truth in document order by marker text (a longest-common-
subsequence alignment, so one missed or extra marker does not shift the rest); a truth citation
counts as correct when its aligned prediction has the same text and verdict. Extra predictions
count against the score too. References are aligned the same way by entry text; one is correct
when text, verdict, DOI and ``doi_valid`` all agree.
"""

from __future__ import annotations

import json
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path


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


# ---------------------------------------------------------------- the sample corpus

DOC_EXTS = (".docx", ".pdf", ".html", ".md", ".txt")
FORMAT_NAMES = {".docx": "docx", ".pdf": "pdf", ".html": "html", ".md": "markdown", ".txt": "text"}


def corpus_cases(root: Path, *, skip_large: bool = False) -> list[tuple[Path, Path, Path | None]]:
    """(document, truth, library) triples for every document with a truth file."""
    cases = []
    for doc in sorted(root.rglob("*")):
        if doc.suffix not in DOC_EXTS or not doc.is_file():
            continue
        if skip_large and "300p" in doc.name:
            continue
        truth = doc.with_name(doc.name + ".truth.json")
        if not truth.exists():
            truth = doc.with_suffix(".truth.json")
        if not truth.exists():
            continue
        lib = doc.with_suffix(".bib")
        cases.append((doc, truth, lib if lib.exists() else None))
    return cases


def run_case(case: tuple[Path, Path, Path | None]) -> dict:
    """Analyse one corpus document (with its library) and score it."""
    from . import analyze

    doc, truth_path, lib = case
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    report = analyze(
        doc.read_bytes(),
        doc.name,
        library=lib.read_bytes() if lib else None,
        library_filename=lib.name if lib else None,
    )
    c = score_citations(truth, report)
    r = score_references(truth, report)
    return {
        "doc": str(doc),
        "style": truth["style"],
        "format": FORMAT_NAMES[doc.suffix],
        "style_ok": report["style"] == truth["style"],
        "cit": (c.correct, c.total, c.errors),
        "ref": (r.correct, r.total, r.errors),
    }


def evaluate(root: Path, *, skip_large: bool = False, jobs: int = 1) -> list[dict]:
    cases = corpus_cases(root, skip_large=skip_large)
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            return list(pool.map(run_case, cases))
    return [run_case(c) for c in cases]


def tables(results: list[dict]) -> dict[str, dict[str, tuple[Score, Score]]]:
    """{'overall'|'style'|'format': {name: (citation score, reference score)}}."""
    out: dict[str, dict[str, tuple[Score, Score]]] = defaultdict(dict)
    for res in results:
        for group, name in (("overall", "all"), ("style", res["style"]), ("format", res["format"])):
            c, r = out[group].setdefault(name, (Score(), Score()))
            c.add(Score(*res["cit"]))
            r.add(Score(*res["ref"]))
    return out


def format_table(results: list[dict]) -> str:
    lines = [
        "| group | citations correct | citation accuracy | references correct | reference accuracy |"
    ]
    lines.append("|---|---|---|---|---|")
    t = tables(results)
    for group in ("overall", "style", "format"):
        for name, (c, r) in sorted(t[group].items()):
            label = "overall" if group == "overall" else f"{group}: {name}"
            lines.append(
                f"| {label} | {c.correct}/{c.total} | {c.rate:.2%} | {r.correct}/{r.total} | {r.rate:.2%} |"
            )
    return "\n".join(lines)
