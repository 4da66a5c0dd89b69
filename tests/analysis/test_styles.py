"""Entry grammars and style detection, one style module each (``jobs.analysis.styles``).

Fragments have the shapes citeproc prints for each CSL style (APA 7, Harvard Cite Them Right,
DIN 1505-2, Chicago author-date, IEEE, NLM/Vancouver), with invented names.
"""

from __future__ import annotations

from jobs.analysis import analyze
from jobs.analysis.blocks import Block
from jobs.analysis.references import parse_reference
from jobs.analysis.styles import REGISTRY, chicago, german, parse_entry


def _ref(text: str, numbered: bool = False):
    return parse_reference(0, Block(0, "p", text), numbered)


# ---------------------------------------------------------------- DIN 1505-2 (german)


def test_din_entries_of_a_journal_a_book_and_a_web_source():
    journal = parse_entry(
        "DOBRIN, BARNA ; MILIC, ANA: Protecting rivers by planning. In: Environmental Research "
        "Letters Bd. 15, IOP Publishing (2020), Nr. 11, S. 114025"
    )
    assert (journal.authors, journal.year) == (["DOBRIN", "MILIC"], "2020")
    assert journal.venue == "Environmental Research Letters"
    book = parse_entry(
        "Rodwin, J. S. (Hrsg.): Plant Communities: Volume 2: Mires. Bd. 2. Cambridge : "
        "Cambridge University Press, 1992a — ISBN 978-0-521-62720-7"
    )
    assert (book.authors, book.year) == (["Rodwin"], "1992a")
    # DIN prints no date for many software and web sources
    web = parse_entry("BSBX: Ellenberg indicator R (reaction).")
    assert (web.authors, web.year) == (["BSBX"], None)


def test_din_names_u_a_group_authors_and_particles():
    e = german.parse_entry(
        "HARRIN, CHARLES R. ; MILLAN, K. JARROD ; WALT, STEFAN J. VAN DER ; u. a.: Array "
        "programming. In: Nature Bd. 585 (2020)"
    )
    assert e.authors == ["HARRIN", "MILLAN", "WALT"]
    assert german.parse_entry("GUROBO OPTIMIZATION, LLC: Reference Manual.").authors == [
        "GUROBO OPTIMIZATION, LLC"
    ]
    assert german.parse_entry("CHOLLEX ET AL.: Kerax.").authors == ["CHOLLEX"]
    assert german.parse_entry("R CORE TEAM: R: A language, 2024").year == "2024"


def test_din_grammar_leaves_other_styles_alone():
    assert german.parse_entry("Smith, J. (2020). Title: A subtitle. Venue, 1, 2.") is None
    assert german.parse_entry("Bauer, Wolfgang; Ek, Jing (2023): Zwischen. In: Z 3.") is None
    assert german.parse_entry("Smith J, Lee B. Title: subtitle. Venue. 2020;1:2.") is None
    assert german.parse_entry("Smith, John. 2020. Title: Subtitle. City: Press.") is None
    assert german.parse_entry("Rodwin, J. S.: Title", "[3]") is None  # numbered


def test_din_document_end_to_end():
    doc = (
        "# Body\n\nRivers matter (Dobrin & Milic, 2020). Plants (Rodwin, 1992aa) and more "
        "plants (Rodwin, 1992bb). Indicators (BSBX, 2017aa; BSBX, 2017bb). Arrays (Harrin "
        "u. a., 2020). A typo (Milik, 2021). A wrong year (Dobrin & Milic, 2017).\n\n"
        "# References\n\n"
        "BSBX: Ellenberg indicator R (reaction).\n\n"
        "BSBX: Ellenberg indicator S (salt tolerance).\n\n"
        "DOBRIN, BARNA ; MILIC, ANA: Protecting rivers. In: Environmental Research Letters "
        "Bd. 15 (2020), Nr. 11, S. 1\n\n"
        "HARRIN, CHARLES R. ; MILLAN, K. JARROD ; u. a.: Array programming. In: Nature Bd. 585 "
        "(2020)\n\n"
        "MILIC, ANA: Rivers again. In: Water Bd. 2 (2021)\n\n"
        "Rodwin, J. S. (Hrsg.): Volume 1. Cambridge : Cambridge University Press, 1992a — "
        "ISBN 978-0-521-62720-7\n\n"
        "Rodwin, J. S. (Hrsg.): Volume 2. Cambridge : Cambridge University Press, 1992b\n"
    )
    report = analyze(doc.encode(), "thesis.md")
    assert report["style"] == "german"
    got = [(c["text"], c["verdict"], c["references"]) for c in report["citations"]]
    assert got == [
        ("(Dobrin & Milic, 2020)", "verified", [2]),
        ("(Rodwin, 1992aa)", "verified", [5]),
        ("(Rodwin, 1992bb)", "verified", [6]),
        # undated entries of one author: citeproc's suffix letters follow list order
        ("(BSBX, 2017aa; BSBX, 2017bb)", "verified", [0, 1]),
        ("(Harrin u. a., 2020)", "verified", [3]),
        ("(Milik, 2021)", "author_mismatch", [4]),
        ("(Dobrin & Milic, 2017)", "year_mismatch", []),
    ]


# ---------------------------------------------------------------- Chicago author-date


def test_chicago_entries_and_the_repeated_author_dash():
    e = chicago.parse_entry(
        "Allard, JJ, Yihui Xu, Christophe Derv, and Erik van Sebalt. 2024. “Rmarkup: Dynamic "
        "Documents.” https://doi.org/10.1/x."
    )
    assert (e.authors, e.year, e.title) == (
        ["Allard", "Xu", "Derv", "van Sebalt"],
        "2024",
        "Rmarkup: Dynamic Documents",
    )
    assert chicago.parse_entry("R Core Team. 2023a. R: A Language. Vienna.").authors == [
        "R Core Team"
    ]
    assert chicago.parse_entry("Smith, J. (2020). Title. Venue.") is None
    doc = (
        "# Body\n\nIndicators (BSBX 2017a, 2017b) and (Kell and Temple Lang 2007).\n\n"
        "# References\n\nBSBX. 2017a. “Indicator R.” https://example.org/r.\n\n"
        "———. 2017b. “Indicator S.” https://example.org/s.\n\n"
        "Kell, Robert, and Duncan Temple Lang. 2007. “Reproducible Research.” Journal 16 (1).\n"
    )
    report = analyze(doc.encode(), "thesis.md")
    assert report["style"] == "chicago"
    assert [(c["verdict"], c["references"]) for c in report["citations"]] == [
        ("verified", [0, 1]),
        ("verified", [2]),
    ]


# ---------------------------------------------------------------- APA, Harvard, numbered


def test_apa_short_capital_surnames_and_particles_behind_initials():
    assert _ref("UGX, M. L. (2020). MarineRef. http://example.org/").authors == ["UGX"]
    assert _ref("S, S. V., & R, P. (2022). Text methods. Journal, 1, 2.").authors == ["S", "R"]
    assert _ref("Sebalt, E. van, Aliano, S., & Law, K. (2020). Drift. Env, 2, 3.").authors == [
        "Sebalt",
        "Aliano",
        "Law",
    ]
    assert _ref("Gurobo Optimization, LLC. (2023). Manual. https://x.org").authors == [
        "Gurobo Optimization, LLC"
    ]


def test_every_registered_style_reads_its_own_entry():
    samples = {
        "apa": "Smith, J., & Lee, K. (2020). A study. Journal of Effects, 1, 1-2.",
        "harvard": "Smith, J. and Lee, K. (2020) 'A study', Journal of Effects, 1, pp. 1-2.",
        "german": "SMITH, JOHN ; LEE, KIM: A study. In: Journal of Effects Bd. 1 (2020), S. 1",
        "chicago": "Smith, John, and Kim Lee. 2020. “A Study.” Journal of Effects 1: 1-2.",
        "ieee": '[1] J. Smith and K. Lee, "A study," Journal of Effects, vol. 1, 2020.',
        "vancouver": "1. Smith J, Lee K. A study. J Eff. 2020;1:1-2.",
    }
    assert set(samples) == set(REGISTRY)
    for name, text in samples.items():
        ref = _ref(text, numbered=REGISTRY[name].numeric)
        # DIN prints names in small caps: plain text has them in capitals
        assert [a.casefold() for a in ref.authors] == ["smith", "lee"], (name, ref.authors)
        assert ref.year == "2020", (name, ref.year)
