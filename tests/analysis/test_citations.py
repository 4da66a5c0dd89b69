"""In-text citation parsing for the five styles, and style detection."""

from __future__ import annotations

from jobs.analysis import parse


def _doc(body: list[str], refs: list[str], heading: str = "References") -> str:
    paras = "".join(f"<p>{p}</p>" for p in body)
    entries = "".join(f"<p>{r}</p>" for r in refs)
    return f"<h1>Thesis</h1>{paras}<h2>{heading}</h2>{entries}"


APA_REFS = [
    "Smith, J., & Lee, K. (2020a). A first study. Journal of Tests, 1(2), 3\u20134. https://doi.org/10.1234/abc",
    "Smith, J., & Lee, K. (2020b). A second study. Journal of Tests, 1(2), 5\u20136.",
    "O'Connor, P. (2019). Title here. Publisher.",
    "Brandt-Wallin, A., Haas, B., & Cole, C. (2018). Another title. Journal, 2, 1\u20132.",
]


def test_apa_parenthetical_narrative_and_multiple_works():
    body = [
        "Evidence is mixed (Smith & Lee, 2020a, p. 12; O'Connor, 2019). "
        "Brandt-Wallin et al. (2018) disagree. However, Smith and Lee (2020b) argue otherwise "
        "(see also Brandt-Wallin et al., 2018)."
    ]
    parsed = parse(_doc(body, APA_REFS))
    assert parsed.style == "apa"
    texts = [c["text"] for c in parsed.citations]
    assert texts == [
        "(Smith & Lee, 2020a, p. 12; O'Connor, 2019)",
        "Brandt-Wallin et al. (2018)",
        "Smith and Lee (2020b)",
        "(see also Brandt-Wallin et al., 2018)",
    ]
    assert parsed.citations[0]["keys"] == [
        {"author": "Smith", "year": "2020a", "_with": ["Lee"]},
        {"author": "O'Connor", "year": "2019"},
    ]
    assert parsed.citations[2]["keys"] == [{"author": "Smith", "year": "2020b", "_with": ["Lee"]}]
    assert parsed.citations[1]["keys"] == [
        {"author": "Brandt-Wallin", "year": "2018", "_etal": True}
    ]


def test_harvard_three_authors_and_prose_prefix():
    refs = [
        "Hart, A., Hammond, B. and Friedman, C. (2009) 'A title', Journal, 1(1), pp. 1\u20132.",
        "Lynch, D. and Webb, E. (2021) Book title. London: Routledge.",
    ]
    body = [
        "Text (Hart, Hammond and Friedman 2009, p. 225). More (cf. the meta-analysis by Lynch and Webb 2021)."
    ]
    parsed = parse(_doc(body, refs, "Bibliography"))
    assert parsed.style == "harvard"
    assert [c["keys"][0]["author"] for c in parsed.citations] == ["Hart", "Lynch"]
    assert parsed.citations[1]["text"] == "(cf. the meta-analysis by Lynch and Webb 2021)"


def test_german_author_year_with_vgl_ua_pages_umlauts_and_ebd():
    refs = [
        "Müller, Jürgen; Voigt, Anna (2022): Titel. In: Zeitschrift 3 (2), S. 1\u201320.",
        "Vetter, Hans u. a. (2020): Ein Buch. Wiesbaden: Springer VS.",
        "Klieme, Eckhard; Walters, Sue (2016): Noch ein Titel. Weinheim: Beltz.",
    ]
    body = [
        "Das ist belegt (vgl. Müller und Voigt 2022, S. 12 f.) und bestätigt (ebd., S. 14). "
        "Vetter u. a. (2020) zeigen das. Ähnlich Klieme/Walters (2016)."
    ]
    parsed = parse(_doc(body, refs, "Literaturverzeichnis"))
    assert parsed.style == "german"
    assert [c["text"] for c in parsed.citations] == [
        "(vgl. Müller und Voigt 2022, S. 12 f.)",
        "(ebd., S. 14)",
        "Vetter u. a. (2020)",
        "Klieme/Walters (2016)",
    ]
    assert parsed.citations[1]["keys"] == [{"author": "Müller", "year": "2022", "_with": ["Voigt"]}]


def test_ieee_brackets_with_ranges():
    refs = [
        f"[{i}] A. Author, “Title {i},” Journal, vol. 1, pp. 1\u20132, 2020." for i in range(1, 7)
    ]
    parsed = parse(_doc(["As shown [1], [2\u20134] and [1, 6]."], refs))
    assert parsed.style == "ieee"
    assert [c["keys"] for c in parsed.citations][1] == [{"number": n} for n in (2, 3, 4)]
    assert [r["number"] for r in parsed.references] == [1, 2, 3, 4, 5, 6]


def test_vancouver_parentheses_and_years_are_not_numbers():
    refs = [f"{i}. Author A, Other B. Title {i}. J Test. 2019;1(2):3\u20134." for i in (1, 2, 3, 5)]
    parsed = parse(
        _doc(["Known (1). Also (2,3). Ranges (1\u20133). Data from (2019) are old."], refs)
    )
    assert parsed.style == "vancouver"
    assert [c["text"] for c in parsed.citations] == ["(1)", "(2,3)", "(1\u20133)"]
    assert [r["number"] for r in parsed.references] == [1, 2, 3, 5]


def test_marker_text_is_normalised_like_the_truth():
    html = _doc(
        ["Shown (Hayes\u00a0&amp; Morten\u00adsen, 2023)."],
        ["Hayes, A., & Mortensen, B. (2023). T. J."],
    )
    parsed = parse(html)
    assert parsed.citations[0]["text"] == "(Hayes & Mortensen, 2023)"


def test_group_author_with_abbreviation_and_possessive():
    refs = [
        "World Health Organization. (2019). Guidelines on physical activity. WHO.",
        "Porter, M. E. (1985). Competitive advantage. Free Press.",
    ]
    body = [
        "Adults need activity (World Health Organization [WHO], 2019), as the guideline says "
        "(WHO, 2019, p. 4). Porter\u2019s (1985) value chain; the Localism Act (2011) aside."
    ]
    parsed = parse(_doc(body, refs))
    assert [(c["text"], c["keys"][0]["author"]) for c in parsed.citations] == [
        ("(World Health Organization [WHO], 2019)", "World Health Organization"),
        ("(WHO, 2019, p. 4)", "WHO"),
        ("Porter\u2019s (1985)", "Porter"),
    ]
    assert parsed.references[0]["authors"] == ["World Health Organization"]
    assert parsed.references[0]["aliases"] == ["WHO"]


def test_prose_list_before_one_author_and_ibid_with_lead_in():
    refs = ["Lucksnat, Christin/Richter, Eric (2022): Titel. Münster: Waxmann."]
    body = [
        "Schülerinnen und Schüler, Lucksnat u. a. (2022) zufolge, lernen anders "
        "(dazu ausführlich ebd., S. 9)."
    ]
    parsed = parse(_doc(body, refs, heading="Literaturverzeichnis"))
    assert [c["text"] for c in parsed.citations] == [
        "Lucksnat u. a. (2022)",
        "(dazu ausführlich ebd., S. 9)",
    ]
    assert parsed.citations[1]["keys"] == [{"author": "Lucksnat", "year": "2022", "_etal": True}]


def test_ieee_ranges_across_brackets_pinpoints_and_non_citations():
    refs = [
        f'[{n}] A. Author, "Title {n}," J. Test, vol. 1, pp. 1\u20132, 2020.' for n in range(1, 8)
    ]
    body = [
        "Known [1]\u2013[3], see [4, p. 5] and [5, Fig. 2]; values lie in [0, 1] and hist[6] "
        "holds the last sample [7]."
    ]
    parsed = parse(_doc(body, refs))
    assert parsed.style == "ieee"
    assert [(c["text"], [k["number"] for k in c["keys"]]) for c in parsed.citations] == [
        ("[1]\u2013[3]", [1, 2, 3]),
        ("[4, p. 5]", [4]),
        ("[5, Fig. 2]", [5]),
        ("[7]", [7]),
    ]


def test_vancouver_equation_numbers_and_enumerations_are_not_citations():
    refs = [f"{n}. Author A, Author B. Title {n}. J Test. 2020;1(2):3-4." for n in range(1, 6)]
    body = [
        "Eligible were adults who (1) were aged 18 or over and (2) had diabetes (1,2). "
        "The model in Equation (3) follows earlier work (4), imputed by chained equations (3,5)."
    ]
    parsed = parse(_doc(body, refs))
    assert parsed.style == "vancouver"
    assert [c["text"] for c in parsed.citations] == ["(1,2)", "(4)", "(3,5)"]


def test_harvard_comma_list_with_et_al_and_possessive_et_al():
    refs = [
        "Holstead, K.L., Kenyon, W., Rouillard, J.J. and Hopkins, J. (2017) 'Title', Journal, 10(2).",
        "Smith, A., Jones, B. and Patel, R. (2018) 'Paying for slow water', Land Use Policy, 72.",
    ]
    body = [
        "Farmers matter (Holstead, Kenyon, Rouillard et al. 2017). Smith et al.'s (2018) survey."
    ]
    parsed = parse(_doc(body, refs))
    assert [(c["text"], c["keys"][0]["author"]) for c in parsed.citations] == [
        ("(Holstead, Kenyon, Rouillard et al. 2017)", "Holstead"),
        ("Smith et al.'s (2018)", "Smith"),
    ]


SUPERSCRIPT_REFS = "".join(
    f"<li>{who}. A study number {n}. Lancet. 20{10 + n};{n}:1-2.</li>"
    for n, who in enumerate(["Smith J", "Brown A", "Green P", "White T", "Black R", "Gray S"], 1)
)


def test_superscript_citation_numbers_in_html():
    from jobs.analysis import analyze

    body = (
        "<p>Obesity raises risk.<sup>1</sup> Cohorts confirmed it<sup>2,3</sup> and a review "
        "pooled them.<sup>4\u20136</sup> The ward has 25 m<sup>2</sup> for 10<sup>3</sup> "
        "patients, and one claim cites nothing listed.<sup>7</sup> Ordinals stay prose: the "
        "1<sup>st</sup> visit.</p>"
    )
    html = f"<h1>Intro</h1>{body}<h2>References</h2><ol>{SUPERSCRIPT_REFS}</ol>"
    report = analyze(html.encode(), "thesis.html")
    assert report["style"] == "vancouver"
    found = [
        (c["text"], [k["number"] for k in c["keys"]], c["verdict"]) for c in report["citations"]
    ]
    assert found == [
        ("1", [1], "verified"),
        ("2,3", [2, 3], "verified"),
        ("4\u20136", [4, 5, 6], "verified"),
        ("7", [7], "missing_reference"),
    ]
    assert report["summary"]["uncited"] == 0


def test_superscript_citation_numbers_in_docx_are_marked_in_the_report():
    from jobs.analysis import analyze, annotate_html, extract

    from .builders import make_docx

    refs = [
        [f"{n}. {who}. A study number {n}. Lancet. 2019;{n}:1-2."]
        for n, who in enumerate(["Smith J", "Brown A", "Green P"], 1)
    ]
    data = make_docx(
        [
            ["Introduction"],
            ["Obesity raises risk.", ("sup", "1"), " Cohorts agree.", ("sup", "2,3")],
            ["References"],
            *refs,
        ]
    )
    report = analyze(data, "thesis.docx")
    assert [(c["text"], c["verdict"]) for c in report["citations"]] == [
        ("1", "verified"),
        ("2,3", "verified"),
    ]
    marked = annotate_html(extract(data, "thesis.docx").html, report["citations"])
    assert '<sup><mark class="cite cite-verified"' in marked


def test_footnote_short_citations_without_parentheses():
    from jobs.analysis import analyze, annotate_html, extract

    from .builders import make_docx

    data = make_docx(
        [
            ["Einleitung"],
            ["Die Digitalisierung verändert die Arbeit.", 1, " Das gilt auch für Schulen.", 2],
            ["Die Studie begann früh.", 3, " Sie endete spät.", 4],
            ["Literaturverzeichnis"],
            ["Müller, Hans (2019): Arbeit im Wandel. Berlin: Springer."],
            [
                "Schmidt, Anna/Weber, Tom (2020): Schule digital. In: Zeitschrift 66 (2), S. 1\u201320."
            ],
            ["Krause, Eva (2018): Lernen. München: Beck."],
        ],
        footnotes={
            1: "Vgl. Müller 2019, S. 12; Schmidt/Weber 2020, S. 3.",
            2: "Ebd., S. 14.",
            # a capitalised noun before a year is no author; a known lead-in opens a citation
            3: "Die Befragung fand im Sommer 2019 statt; siehe Krause 2018, 2021.",
            4: "Vgl. Lorenz 2017, S. 9.",
        },
    )
    report = analyze(data, "arbeit.docx")
    assert report["style"] == "german"
    found = [
        (c["text"], [(k["author"], k["year"]) for k in c["keys"]], c["verdict"])
        for c in report["citations"]
    ]
    assert found == [
        (
            "Müller 2019, S. 12; Schmidt/Weber 2020, S. 3",
            [("Müller", "2019"), ("Schmidt", "2020")],
            "verified",
        ),
        ("Ebd., S. 14", [("Müller", "2019"), ("Schmidt", "2020")], "verified"),
        ("Krause 2018, 2021", [("Krause", "2018"), ("Krause", "2021")], "year_mismatch"),
        ("Lorenz 2017, S. 9", [("Lorenz", "2017")], "missing_reference"),
    ]
    marked = annotate_html(extract(data, "arbeit.docx").html, report["citations"])
    assert marked.count('<mark class="cite') == 4


def test_note_numbers_are_not_superscript_citations():
    """Pandoc and Python-Markdown link note numbers in a <sup>; a numbered document must not
    read them as citations, while the notes' own text is still searched."""
    from jobs.analysis import analyze

    html = (
        "<h1>Intro</h1><p>Risk rises.<sup>1</sup> A remark"
        '<a href="#fn1" class="footnote-ref" id="fnref1"><sup>2</sup></a> and another'
        '<sup id="fnref:2"><a class="footnote-ref" href="#fn:2">3</a></sup>.</p>'
        f"<h2>References</h2><ol>{SUPERSCRIPT_REFS}</ol>"
        '<section id="footnotes" class="footnotes"><ol><li id="fn1"><p>An aside, see (4).'
        '<a href="#fnref1" class="footnote-back">\u21a9\ufe0e</a></p></li></ol></section>'
    )
    report = analyze(html.encode(), "thesis.html")
    assert [(c["text"], c["verdict"]) for c in report["citations"]] == [
        ("1", "verified"),
        ("(4)", "verified"),
    ]
