"""The library check with BibTeX, CSL-JSON and RIS."""

from __future__ import annotations

import json

from jobs.analysis import analyze, load_library
from jobs.analysis.references import Reference

SMITH = Reference(
    0,
    "Smith...",
    0,
    authors=["Smith", "Lee"],
    year="2020a",
    title="A study of things",
    doi="10.1234/ABC",
)
INVENTED = Reference(1, "Ghost...", 1, authors=["Ghost"], year="2021", title="Imaginary work")
NO_DOI = Reference(2, "Jones...", 2, authors=["Jones"], year="2018", title="On disagreement")

BIB = b"""@article{smith2020, author = {Smith, John and Lee, Kim}, title = {A Study of Things}, year = {2020}, doi = {10.1234/abc}}
@book{jones2018, author = {Jones, Ann}, title = {On Disagreement}, year = 2018}"""
CSL = json.dumps(
    [
        {
            "type": "article-journal",
            "title": "A study of things",
            "author": [{"family": "Smith", "given": "J"}],
            "issued": {"date-parts": [[2020]]},
            "DOI": "10.1234/abc",
        },
        {
            "type": "book",
            "title": "On disagreement",
            "author": [{"family": "Jones", "given": "A"}],
            "issued": {"date-parts": [[2018]]},
        },
    ]
).encode()
RIS = b"""TY  - JOUR
AU  - Smith, John
TI  - A study of things
PY  - 2020
DO  - 10.1234/abc
ER  -
TY  - BOOK
AU  - Jones, Ann
TI  - On disagreement
PY  - 2018
ER  -
"""


def test_each_library_format_finds_real_entries_and_not_invented_ones():
    for data, name in ((BIB, "lib.bib"), (CSL, "lib.json"), (RIS, "lib.ris")):
        lib = load_library(data, name)
        assert lib.check(SMITH) == "found", name
        assert lib.check(NO_DOI) == "found", name
        assert lib.check(INVENTED) == "not_found", name


def test_format_is_detected_from_content():
    assert load_library(RIS, "export.txt").check(NO_DOI) == "found"


def test_report_carries_library_verdicts():
    html = (
        b"<p>Text (Jones, 2018) and (Ghost, 2021).</p><h2>References</h2>"
        b"<p>Ghost, G. (2021). Imaginary work. Nowhere Press.</p>"
        b"<p>Jones, A. (2018). On disagreement. Publisher.</p>"
    )
    report = analyze(html, "t.html", library=BIB, library_filename="lib.bib")
    assert [r["library"] for r in report["references"]] == ["not_found", "found"]
