"""Accuracy on the held-out theses in ``tests/analysis/heldout``.

The sample corpus is synthetic template prose; these excerpts were written by hand with other
prose, structure and quirks (group authors and their abbreviations, particles, possessives,
Harvard colon locators, IEEE ranges across brackets and pinpoints, equation and table numbers
in parentheses, reference lists typed one entry per line, DOIs behind ``DOI: https://...``),
each with a hand-written ``*.truth.json``. Floors: 95 % per document (citations and entries
together) and 95 % overall for citations and for entries; the style must be detected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.analysis.evaluation import evaluate, tables

HELDOUT = Path(__file__).resolve().parent / "heldout"


@pytest.fixture(scope="module")
def results() -> list[dict]:
    res = evaluate(HELDOUT, jobs=1)
    assert len(res) >= 12, "the held-out set lost documents"
    return res


def test_every_style_and_format_is_covered(results):
    assert {r["style"] for r in results} == {"apa", "harvard", "ieee", "german", "vancouver"}
    assert {"markdown", "html", "docx", "pdf"} <= {r["format"] for r in results}


def test_per_document_accuracy(results):
    failures = []
    for r in results:
        c_ok, c_n, c_err = r["cit"]
        r_ok, r_n, r_err = r["ref"]
        rate = (c_ok + r_ok) / max(c_n + r_n, 1)
        if rate < 0.95 or not r["style_ok"]:
            failures.append(
                f"{Path(r['doc']).name}: {rate:.1%}, style ok={r['style_ok']}; {(c_err + r_err)[:4]}"
            )
    assert not failures, "\n".join(failures)


def test_overall_accuracy(results):
    cit, ref = tables(results)["overall"]["all"]
    assert cit.rate >= 0.95, cit.errors[:5]
    assert ref.rate >= 0.95, ref.errors[:5]
