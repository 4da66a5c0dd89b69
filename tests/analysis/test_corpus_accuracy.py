"""Accuracy on the sample corpus: >= 98 % overall and >= 95 % per style and per format."""

from __future__ import annotations

import os
from pathlib import Path

from jobs.analysis.evaluation import evaluate, tables
from tests.prerequisites import missing

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("ACURIO_CORPUS") or REPO.parent / "shared" / "corpus")


def test_corpus_accuracy():
    if not CORPUS.is_dir():
        missing(f"sample corpus not found at {CORPUS} (set ACURIO_CORPUS)")
    # The 300-page thesis is left to scripts/accuracy.py and the benchmark to keep this fast.
    results = evaluate(CORPUS, skip_large=True, jobs=2)
    assert results, "no documents with truth files in the corpus"
    table = tables(results)
    failures = []
    for group, floor in (("overall", 0.98), ("style", 0.95), ("format", 0.95)):
        for name, (cit, ref) in table[group].items():
            for what, score in (("citations", cit), ("references", ref)):
                if score.rate < floor:
                    failures.append(
                        f"{group} {name} {what}: {score.rate:.2%} < {floor:.0%}; e.g. {score.errors[:3]}"
                    )
    assert not failures, "\n".join(failures)
    assert all(r["style_ok"] for r in results), [r["doc"] for r in results if not r["style_ok"]]
