"""Accuracy on the real-world development set (../shared/realworld): JOSS papers rendered by
pandoc's citeproc in five CSL styles and six formats, truth read off pandoc's own AST.

A fixed third of the documents (those of every third paper in the sorted list of the papers'
repository names, so the choice never follows the results) is analysed and scored with the
set's own scorer (``score.py``'s alignment), every style and format included. The floors are
the figures the analysis reaches, a little below them: a change that loses accuracy fails here.
Missing set: skipped locally, a failure under CI (``tests.prerequisites``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.prerequisites import missing

REPO = Path(__file__).resolve().parents[2]
SET = Path(os.environ.get("ACURIO_REALWORLD") or REPO.parent / "shared" / "realworld")

# Floors (percent) for the third that is scored (it measures 99.4 % of citations, every
# style x format cell at least 98 %, and 98.3 % of entries; the whole set's figures are in
# BENCHMARKS.md). The targets are 97 % overall and 93 % per cell. Entries cited only
# with a wrong year count as uncited here, as the project's held-out theses expect, while this
# set's truth calls them cited: that costs about 1.3 points of the entries.
CITATIONS_OVERALL = 98.5
REFERENCES_OVERALL = 97.5
CELL_FLOOR = 95.0


def _scorer():
    spec = importlib.util.spec_from_file_location("realworld_score", SET / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _third(truths: list[Path]) -> list[Path]:
    paper = {p: json.loads(p.read_text(encoding="utf-8"))["paper"] for p in truths}
    chosen = sorted(set(paper.values()))[::3]
    return [p for p in truths if paper[p] in chosen]


def _analyse(doc: str) -> tuple[str, dict]:
    from jobs.analysis import analyze

    path = Path(doc)
    try:
        return path.name, analyze(path.read_bytes(), path.name)
    except Exception as exc:  # an unreadable document is a result, scored as wrong
        return path.name, {"error": f"{type(exc).__name__}: {exc}"}


def test_development_set_accuracy():
    docs = SET / "docs"
    if not (SET / "score.py").is_file() or not docs.is_dir():
        missing(f"real-world development set not found at {SET} (set ACURIO_REALWORLD)")
    scorer = _scorer()
    truths = _third(sorted(docs.glob("*.truth.json")))
    assert len(truths) > 60, "the third of the set is unexpectedly small"
    names = [str(docs / p.name[: -len(".truth.json")]) for p in truths]
    with ProcessPoolExecutor(2) as pool:
        reports = dict(pool.map(_analyse, names))
    cites: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    refs = [0, 0]
    unreadable = []
    for p in truths:
        truth = json.loads(p.read_text(encoding="utf-8"))
        report = reports[truth["document"]]
        if report.get("error"):
            unreadable.append(truth["document"])
        rows, refrows, _ = scorer.score_doc(truth, report)
        cell = cites[truth["style"], truth["format"]]
        cell[0] += sum(r["got"] == r["expected"] for r in rows)
        cell[1] += len(rows)
        refs[0] += sum(r["got"] == r["expected"] for r in refrows)
        refs[1] += len(refrows)
    assert not unreadable, unreadable
    ok = sum(c[0] for c in cites.values())
    total = sum(c[1] for c in cites.values())
    failures = []
    if 100 * ok / total < CITATIONS_OVERALL:
        failures.append(f"citations {100 * ok / total:.1f}% < {CITATIONS_OVERALL}%")
    if 100 * refs[0] / refs[1] < REFERENCES_OVERALL:
        failures.append(f"references {100 * refs[0] / refs[1]:.1f}% < {REFERENCES_OVERALL}%")
    for (style, fmt), (cell_ok, n) in sorted(cites.items()):
        if n and 100 * cell_ok / n < CELL_FLOOR:
            failures.append(f"{style}/{fmt}: {100 * cell_ok / n:.1f}% < {CELL_FLOOR}%")
    assert not failures, "\n".join(failures)
