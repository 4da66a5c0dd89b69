"""Reference-list parsing: authors, year, title, venue, DOI and its validity."""

from __future__ import annotations

import pytest

from jobs.analysis.blocks import Block
from jobs.analysis.references import doi_is_valid, extract_doi, parse_reference


def _ref(text: str, numbered: bool = False):
    return parse_reference(0, Block(0, "p", text), numbered)


def test_apa_entry():
    r = _ref(
        "Abbott, A. A., Hassan, W. L., & Lüdtke, F. (2018). Learning analytics and parental "
        "involvement. Journal of Higher Education Studies, 16(6), 372\u2013381. https://doi.org/10.3389/fjhes.2018.509822"
    )
    assert r.authors == ["Abbott", "Hassan", "Lüdtke"]
    assert r.year == "2018"
    assert r.title == "Learning analytics and parental involvement"
    assert r.venue == "Journal of Higher Education Studies"
    assert (r.doi, r.doi_valid) == ("10.3389/fjhes.2018.509822", True)


def test_harvard_entry_with_suffix_and_quoted_title():
    r = _ref(
        "Wilson, D. and Holland, C. (2020b) 'Managing achievement', Review, 3(1), pp. 1\u20139."
    )
    assert r.authors == ["Wilson", "Holland"]
    assert r.year == "2020b"
    assert r.title == "Managing achievement"


def test_german_entry():
    r = _ref(
        "Bauer, Wolfgang K.; Eriksson, Jing (2023): Zwischen den Welten. In: Umweltpsychologie 30 (5), S. 269\u2013296. DOI: 10.1080/12243018.2023.1725381."
    )
    assert r.authors == ["Bauer", "Eriksson"]
    assert r.year == "2023"
    assert r.doi == "10.1080/12243018.2023.1725381"


def test_ieee_entry():
    r = _ref(
        "[4] H. Heikkinen and M. L. Allen, “When does it work?,” in Proc. Symp., 2022, pp. 94\u2013105, doi: 10.1515/pisuc-2022-2653.",
        True,
    )
    assert r.number == 4
    assert r.authors == ["Heikkinen", "Allen"]
    assert r.year == "2022"
    assert r.title == "When does it work?"


def test_vancouver_entry():
    r = _ref(
        "2. Röder K, Lewandowski R, Kaya BO. Climate adaptation. Landsc Urban Plann Stud. 2019;47(2):731\u2013757. doi:10.1002/lups.6440",
        True,
    )
    assert r.number == 2
    assert r.authors == ["Röder", "Lewandowski", "Kaya"]
    assert r.year == "2019"
    assert r.doi == "10.1002/lups.6440"


@pytest.mark.parametrize(
    "doi",
    [
        "10.1186/",
        "10.1S15/crmj-2020-7508",
        "10.l080/19326339.2021.1974297",
        "10.1002/aie|r.4830",
        "10.1007/978-3-660-2185{5-9",
    ],
)
def test_malformed_dois_are_invalid(doi):
    assert not doi_is_valid(doi)


def test_doi_extraction_strips_sentence_punctuation():
    assert extract_doi("Book. DOI: 10.1007/978-3-659-28413-7.") == "10.1007/978-3-659-28413-7"
    assert extract_doi("x (doi:10.1000/xyz(1)).") == "10.1000/xyz(1)"
    assert doi_is_valid("10.1000/xyz(1)")
