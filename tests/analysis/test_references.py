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


def test_group_authors_stay_whole():
    assert _ref("R Core Team. (2023). R: A language. R Foundation.").authors == ["R Core Team"]
    assert _ref("ONS (2022) Housing affordability. Newport: ONS.").authors == ["ONS"]
    r = _ref("Department for Business, Energy and Industrial Strategy (2020) Survey. London: BEIS.")
    assert r.authors == ["Department for Business, Energy and Industrial Strategy"]
    r = _ref("Kultusministerkonferenz (KMK) (2022): Bedarf. Berlin: KMK.")
    assert (r.authors, r.aliases) == (["Kultusministerkonferenz"], ["KMK"])
    r = _ref("DLT \u2013 Deutscher Landkreistag (2020): Digitalisierung. Berlin: DLT.")
    assert (r.authors, r.aliases) == (["Deutscher Landkreistag"], ["DLT"])
    # People stay a list of surnames.
    assert _ref("Kemfert, Claudia (2017): Titel. Hamburg: Murmann.").authors[0] == "Kemfert"


def test_doi_behind_doi_label_and_resolver():
    r = _ref("Schmidt, K. (2017): Titel. DOI: https://doi.org/10.5771/0342-300X-2017-2-105.")
    assert (r.doi, r.doi_valid) == ("10.5771/0342-300X-2017-2-105", True)


def test_entries_typed_one_per_line_are_split():
    from jobs.analysis.blocks import html_blocks
    from jobs.analysis.references import parse_references

    html = (
        "<h2>Bibliography</h2><p>Ap, J. (1992) 'Residents', Annals, 19(4), pp. 665\u2013690.\n"
        "Butler, R.W. (1980) 'The concept of a tourist area cycle',\n"
        "Canadian Geographer, 24(1), pp. 5\u201312.\n"
        "van der Borg, J. (1992) 'Tourism and urban development', TRR, 17(2).</p>"
    )
    refs, _ = parse_references(html_blocks(html), numbered=False)
    assert [r.authors[0] for r in refs] == ["Ap", "Butler", "van der Borg"]
    assert refs[1].text.endswith("Canadian Geographer, 24(1), pp. 5\u201312.")
