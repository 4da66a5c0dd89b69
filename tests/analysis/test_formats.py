# The fragments are real renderer output: their en dashes are the ones printed.
# ruff: noqa: RUF001
"""Document formats and layout: numbered lists whose number is its own element, PDF reference
lists without hanging indents, small capitals in PDF text, and what the sanitiser keeps.

Each case is built from a small real fragment: citeproc's HTML, the text runs (position, size,
text) pypdf reports for pages printed by Chromium and LibreOffice, Word's numbering XML.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from jobs.analysis import analyze, extract, parse
from jobs.analysis.blocks import html_blocks
from jobs.analysis.docxlists import list_numbers, number_list_items
from jobs.analysis.errors import AnalysisInputError
from jobs.analysis.htmlprep import prepare_html
from jobs.analysis.pdf import page_paragraphs, runs_to_lines

from .builders import make_pdf

# ---------------------------------------------------------------- citeproc HTML

# pandoc --citeproc with ieee.csl, as written into the HTML (the class names are what a browser
# lays out as a number column).
CITEPROC_IEEE = """<!DOCTYPE html><html><head><style>div.csl-left-margin{float:left}</style></head>
<body id="document"><p>Its carbon footprint is large [1], [2].</p>
<h1 class="unnumbered" id="references">References</h1>
<div id="refs" class="references csl-bib-body" role="doc-bibliography">
<div id="ref-PortegiesZwart_2020" class="csl-entry"
role="doc-biblioentry">
<div class="csl-left-margin">[1] </div><div class="csl-right-inline">S.
Portegies Zwart, <span>“The ecological impact of high-performance computing
in astrophysics,”</span> <em>Nature Astronomy</em>, vol. 4, no. 99, pp.
819–822, Sep. 2020, doi: <a
href="https://doi.org/10.1038/s41550-020-1208-y">10.1038/s41550-020-1208-y</a>.</div>
</div>
<div id="ref-Malmodin2024" class="csl-entry" role="doc-biblioentry">
<div class="csl-left-margin">[2] </div><div class="csl-right-inline">J.
Malmodin, N. Lövehagen, P. Bergmark, and D. Lundén, <span>“ICT sector
electricity consumption and greenhouse gas emissions – 2020 outcome,”</span>
<em>Telecommunications Policy</em>, vol. 48, no. 10, p. 102701, 2024.</div>
</div>
</div></body></html>"""


def test_citeproc_number_column_stays_with_its_entry():
    doc = extract(CITEPROC_IEEE.encode(), "paper.html")
    texts = [b.text for b in doc.blocks]
    assert texts[-2].startswith("[1] S. Portegies Zwart, “The ecological impact")
    assert texts[-1].startswith("[2] J. Malmodin, N. Lövehagen")
    assert "[1]" not in texts and "[2]" not in texts  # no number left on its own
    parsed = parse(doc.html)  # the stored HTML alone is enough
    assert [r["number"] for r in parsed.references] == [1, 2]
    report = analyze(CITEPROC_IEEE.encode(), "paper.html")
    assert [c["verdict"] for c in report["citations"]] == ["verified", "verified"]


def test_sanitised_html_has_no_ids_and_no_free_classes():
    doc = extract(CITEPROC_IEEE.encode(), "paper.html")
    assert "id=" not in doc.html
    assert "class=" not in doc.html  # csl-entry, references, unnumbered: all gone


def test_note_containers_keep_their_meaning_as_canonical_classes():
    # pandoc's endnotes and Word HTML's footnote ids; the sanitiser keeps no id, so what they
    # meant is carried by the one class name the parser knows.
    raw = (
        '<p>Claim<a href="#fn1" class="footnote-ref" id="fnref1" role="doc-noteref">'
        "<sup>1</sup></a> (Smith, 2020).</p>"
        '<section id="footnotes" class="footnotes footnotes-end-of-document" role="doc-endnotes">'
        '<ol><li id="fn1"><p>See Jones (2019).</p></li></ol></section>'
        '<div id="ftn2"><p>Word note (Brown, 2018).</p></div>'
    )
    doc = extract(raw.encode(), "t.html")
    assert 'class="footnote"' in doc.html and "id=" not in doc.html
    notes = [b.text for b in doc.blocks if b.note]
    assert notes == ["See Jones (2019).", "Word note (Brown, 2018)."]
    body = next(b for b in doc.blocks if not b.note)
    assert body.text == "Claim1 (Smith, 2020)." and body.sups == ()  # a note number, not a cite


def test_code_blocks_stay_recognisable_as_code():
    raw = "<p>Run it (see below).</p><pre><code>f(1, 2)  # (Smith, 2020)\n</code></pre>"
    doc = extract(raw.encode(), "t.html")
    assert "<pre><code>" in doc.html
    assert [b.tag for b in doc.blocks] == ["p", "pre"]


def test_ordered_list_and_word_table_entries_keep_their_numbers():
    raw = (
        "<p>As shown [3] and [4].</p><h2>References</h2>"
        '<ol start="3"><li>A. Smith, “One,” <em>J. X</em>, vol. 1, 2020.</li>'
        "<li>B. Jones, “Two,” <em>J. Y</em>, vol. 2, 2021.</li></ol>"
    )
    parsed = parse(extract(raw.encode(), "t.html").html)
    assert [r["number"] for r in parsed.references] == [3, 4]
    table = (
        "<p>As shown [1] and [2].</p><h2>References</h2><table>"
        "<tr><td><p>[1]</p></td><td><p>A. Smith, “One,” J. X, vol. 1, 2020.</p></td></tr>"
        "<tr><td><p>[2]</p></td><td><p>B. Jones, “Two,” J. Y, vol. 2, 2021.</p></td></tr>"
        "</table>"
    )
    blocks = extract(table.encode(), "t.html").blocks
    assert blocks[-1].text == "[2] B. Jones, “Two,” J. Y, vol. 2, 2021."


def test_prepare_html_closes_implied_elements_like_a_browser():
    out = prepare_html("<ul><li><p>a<li>b</ul><p>x<p>y<div>z</div>")
    assert out == "<ul><li><p>a</p></li><li>b</li></ul><p>x</p><p>y</p><div>z</div>"


def test_prepare_html_keeps_only_the_attributes_the_sanitiser_would():
    keep = {"a": {"href"}, "td": {"colspan"}}
    raw = (
        '<p style="x" onclick="y" class="footnotes">a <a href="#n1" title="t" id="fnref1">1</a></p>'
        '<table><tr><td colspan="2" width="9">c</td></tr></table>'
    )
    out = prepare_html(raw, keep_attributes=keep)
    assert out == (
        '<p class="footnote">a <a href="#n1" class="footnote-ref">1</a></p>'
        '<table><tr><td colspan="2">c</td></tr></table>'
    )
    # Without the allow-list every attribute but id and class is passed on, as before.
    assert 'style="x"' in prepare_html(raw)


def test_many_attributes_on_one_element_never_reach_the_sanitiser():
    # nh3's parser is quadratic in the attributes of one element (200,000 of them: 65 s of
    # CPU); the linear pass drops them first, so the sanitiser's input stays small.
    attributes = " ".join(f"a{i}=x" for i in range(200_000))
    raw = f"<html><body><p {attributes}>x (Smith, 2020)</p>"
    out = prepare_html(raw, keep_attributes={"a": {"href"}})
    assert out == "<html><body><p>x (Smith, 2020)</p></body></html>"
    assert extract(raw.encode(), "t.html").blocks[0].text == "x (Smith, 2020)"


# ---------------------------------------------------------------- DOCX automatic numbering

_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_NUMBERING = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:numbering {_W}>
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/>
<w:numFmt w:val="decimal"/><w:lvlText w:val="[%1]"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start w:val="1"/>
<w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl></w:abstractNum>
<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
<w:num w:numId="2"><w:abstractNumId w:val="1"/>
<w:lvlOverride w:ilvl="0"><w:startOverride w:val="5"/></w:lvlOverride></w:num>
</w:numbering>"""


def _numbered_docx(paragraphs: list[tuple[str, str | None]]) -> bytes:
    """A DOCX whose paragraphs are (text, numId or None), with Word's numbering part."""
    body = []
    for text, num in paragraphs:
        ppr = (
            f'<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="{num}"/></w:numPr></w:pPr>'
            if num
            else ""
        )
        body.append(f'<w:p>{ppr}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>')
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        f"<w:document {_W}><w:body>{''.join(body)}</w:body></w:document>"
    )
    ct = (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
        'package/2006/content-types"><Default Extension="rels" ContentType="application/'
        'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" '
        'ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType='
        '"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        "</Types>"
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
        'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://'
        "schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
        '" Target="word/document.xml"/></Relationships>'
    )
    doc_rels = (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
        'openxmlformats.org/package/2006/relationships"><Relationship Id="rId5" Type="http://'
        'schemas.openxmlformats.org/officeDocument/2006/relationships/numbering" '
        'Target="numbering.xml"/></Relationships>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", ct)
        zf.writestr("_rels/.rels", rels)
        zf.writestr("word/_rels/document.xml.rels", doc_rels)
        zf.writestr("word/document.xml", document)
        zf.writestr("word/numbering.xml", _NUMBERING)
    return buf.getvalue()


def test_word_numbering_continues_across_an_interruption():
    data = _numbered_docx(
        [
            ("Energy use grew [1], [2], [3].", None),
            ("References", None),
            ("A. Smith, “One,” J. X, vol. 1, 2020.", "1"),
            ("B. Jones, “Two,” J. Y, vol. 2, 2021.", "1"),
            ("(A note typed between two entries.)", None),
            ("C. Brown, “Three,” J. Z, vol. 3, 2022.", "1"),
        ]
    )
    assert list_numbers(data) == [1, 2, 3]
    report = analyze(data, "thesis.docx")
    assert [r["number"] for r in report["references"]] == [1, 2, 3]
    assert [c["verdict"] for c in report["citations"]] == ["verified"] * 3


def test_word_numbering_start_override_restarts_the_list():
    data = _numbered_docx([("a", "2"), ("b", "2"), ("c", "1")])
    assert list_numbers(data) == [5, 6, 1]


def test_list_numbers_are_applied_only_when_the_items_line_up():
    assert number_list_items("<ol><li>a</li><li>b</li></ol>", [4, 5]) == (
        '<ol><li value="4">a</li><li value="5">b</li></ol>'
    )
    unchanged = "<ol><li>a</li></ol>"
    assert number_list_items(unchanged, [4, 5]) == unchanged


# ---------------------------------------------------------------- PDF layout

# Chromium printing citeproc's IEEE list: the numbers are CSS floats, drawn (all of a page's)
# before the entries' text, in a column left of it. Runs as pypdf reports them.
CHROMIUM_IEEE_PAGE = [
    (90.0, 454.5, 12.0, "[1]"),
    (90.0, 382.5, 12.0, "[2]"),
    (90.0, 328.5, 12.0, "[3]"),
    (90.0, 614.3, 24.0, "Acknowledgments"),
    (
        90.0,
        576.0,
        12.0,
        "The study was funded in part by the project Rubin: NeuroMiR (03RU1U051A, federal",
    ),
    (90.0, 558.0, 12.0, "ministry of education and research, Germany)."),
    (90.0, 492.8, 24.0, "References"),
    (126.0, 454.5, 12.0, "C. Geithe "),
    (175.0, 454.5, 12.0, "et al."),
    (199.0, 454.5, 12.0, ", "),
    (205.0, 454.5, 12.0, "“A multiplex microchamber diffusion assay for the antibody-"),
    (126.0, 436.5, 12.0, "based detection of microRNAs on randomly ordered microbeads,”"),
    (444.6, 436.5, 12.0, " "),
    (447.6, 436.5, 12.0, "Biosensors and"),
    (126.0, 418.5, 12.0, "Bioelectronics: X"),
    (209.2, 418.5, 12.0, ", vol. 18, p. 100484, Jun. 2024, doi:"),
    (126.0, 400.5, 12.0, "10.1016/j.biosx.2024.100484"),
    (266.7, 400.5, 12.0, "."),
    (126.0, 382.5, 12.0, "S. Barthelmé and D. Tschumperlé, "),
    (294.2, 382.5, 12.0, "“Imager: An R package for image processing"),
    (126.0, 364.5, 12.0, "based on CImg,”"),
    (207.0, 364.5, 12.0, " "),
    (210.0, 364.5, 12.0, "Journal of Open Source Software"),
    (369.7, 364.5, 12.0, ", vol. 4, no. 38, p. 1012, 2019,"),
    (126.0, 346.5, 12.0, "doi: "),
    (147.7, 346.5, 12.0, "10.21105/joss.01012"),
    (247.2, 346.5, 12.0, "."),
    (126.0, 328.5, 12.0, "J. Ooms, "),
    (171.3, 328.5, 12.0, "Magick: Advanced graphics and image-processing in R"),
    (438.0, 328.5, 12.0, ". 2024. doi:"),
    (126.0, 310.5, 12.0, "10.32614/CRAN.package.magick"),
    (288.3, 310.5, 12.0, "."),
]


def _paragraphs(runs, width=612.0, height=792.0):
    return [text for _, text in page_paragraphs([runs_to_lines(runs, 0)], width, height)]


def test_label_column_printed_first_joins_each_entry():
    paras = _paragraphs(CHROMIUM_IEEE_PAGE)
    assert paras[0] == "Acknowledgments"
    assert paras[1].startswith("The study was funded") and paras[1].endswith("Germany).")
    assert paras[2] == "References"
    entries = paras[3:]
    assert len(entries) == 3
    assert entries[0].startswith("[1] C. Geithe et al., “A multiplex microchamber")
    assert entries[0].endswith("doi: 10.1016/j.biosx.2024.100484.")
    assert entries[1].startswith("[2] S. Barthelmé and D. Tschumperlé")
    assert entries[2].startswith("[3] J. Ooms, Magick")


def test_label_column_end_to_end_through_a_real_pdf():
    # The same order of drawing in an actual PDF file: labels first, then the lines.
    lines = [(x, y, size, text) for x, y, size, text in CHROMIUM_IEEE_PAGE if text.strip()]
    doc = extract(make_pdf([lines]), "paper.pdf")
    texts = [b.text for b in doc.blocks]
    assert any(t.startswith("[2] S. Barthelmé") for t in texts)
    assert not any(t in ("[1]", "[2]", "[3]") for t in texts)


# Chromium printing the Harvard list: flush left, no gap and no indent between entries.
CHROMIUM_HARVARD_PAGE = [
    (90.0, 333.0, 24.0, "References"),
    (90.0, 294.0, 12.0, "Bååth, R. (2012) "),
    (173.0, 294.0, 12.0, "“The State of Naming Conventions in R,”"),
    (374.0, 294.0, 12.0, " "),
    (377.0, 294.0, 12.0, "The R Journal"),
    (445.6, 294.0, 12.0, ", 4(2), pp. 74–"),
    (90.0, 276.0, 12.0, "75. Available at: "),
    (171.1, 276.0, 12.0, "https://doi.org/10.32614/RJ-2012-018"),
    (352.9, 276.0, 12.0, "."),
    (90.0, 258.0, 12.0, "Bannerman, D. and Wan, W. (2016) "),
    (264.8, 258.0, 12.0, "“Multifunctional microbeads for drug delivery in"),
    (90.0, 240.0, 12.0, "TACE,”"),
    (128.7, 240.0, 12.0, " "),
    (131.7, 240.0, 12.0, "Expert Opinion on Drug Delivery"),
    (293.7, 240.0, 12.0, ", 13(9), pp. 1289–1300. Available at:"),
    (90.0, 222.0, 12.0, "https://doi.org/10.1080/17425247.2016.1192122"),
    (322.7, 222.0, 12.0, "."),
    (90.0, 204.0, 12.0, "Barthelmé, S. and Tschumperlé, D. (2019) "),
    (296.2, 204.0, 12.0, "“Imager: An R package for image processing"),
    (90.0, 186.0, 12.0, "based on CImg,”"),
    (171.0, 186.0, 12.0, " "),
    (174.0, 186.0, 12.0, "Journal of Open Source Software"),
    (333.7, 186.0, 12.0, ", 4(38), p. 1012. Available at:"),
    (90.0, 168.0, 12.0, "https://doi.org/10.21105/joss.01012"),
    (260.4, 168.0, 12.0, "."),
]


def test_flush_left_list_is_split_where_an_entry_ends_and_the_next_opens():
    entries = _paragraphs(CHROMIUM_HARVARD_PAGE)[1:]
    assert [e.split(" (", 1)[0] for e in entries] == [
        "Bååth, R.",
        "Bannerman, D. and Wan, W.",
        "Barthelmé, S. and Tschumperlé, D.",
    ]
    assert entries[1].endswith("https://doi.org/10.1080/17425247.2016.1192122.")


def test_url_broken_inside_itself_does_not_end_the_entry():
    runs = [
        (
            90.0,
            700.0,
            12.0,
            "R Core Team (2023b) “Tcl/tk interface.” Available at: https://CRAN.R-",
        ),
        (90.0, 682.0, 12.0, "project.org/package=tcltk."),
        (
            90.0,
            664.0,
            12.0,
            "Reimert, M.M. et al. (2024) “Extendr: Frictionless bindings for R and rust,”",
        ),
        (90.0, 646.0, 12.0, "Journal of Open Source Software, 9(99), p. 6394."),
    ]
    paras = _paragraphs(runs)
    assert paras[0].endswith("https://CRAN.R-project.org/package=tcltk.")
    assert paras[1].startswith("Reimert, M.M.")


def test_sentence_held_open_by_an_abbreviation_or_a_bracket():
    runs = [
        (72.0, 700.0, 12.0, "Tabelle 1 Überblick über empirische Studien (vgl."),
        (72.0, 686.0, 12.0, "Lübke 2024; Schlüter u. a. 2022)"),
    ]
    assert _paragraphs(runs) == [
        "Tabelle 1 Überblick über empirische Studien (vgl. Lübke 2024; Schlüter u. a. 2022)"
    ]


# Body text, then a hanging reference list on the same page (LibreOffice, no gap between
# entries): the page's layout is read per region, not per page.
def test_hanging_list_below_flat_body_text_on_one_page():
    runs = [
        (90.0, 700.0, 12.0, "Body text set flush left, line after line, as a browser prints"),
        (90.0, 682.0, 12.0, "it, and another line of the same paragraph [1]."),
        (90.0, 640.0, 24.0, "References"),
        (90.0, 600.0, 12.0, "[1] B. Dobson and A. Mijic, “Protecting rivers by integrating"),
        (126.0, 582.0, 12.0, "supply-wastewater infrastructure planning,” Environmental"),
        (126.0, 564.0, 12.0, "Research Letters, vol. 15, 2020."),
        (90.0, 546.0, 12.0, "[2] L. Liu, B. Dobson, and A. Mijic, “Hierarchical systems"),
        (126.0, 528.0, 12.0, "integration,” Science of The Total Environment, vol. 806, 2022."),
        (90.0, 510.0, 12.0, "[3] W. Rauch et al., “Modelling transitions,” Water Research, 2017."),
        (90.0, 492.0, 12.0, "[4] J. G. Arnold et al., “SWAT: Model use, calibration, and"),
        (126.0, 474.0, 12.0, "validation,” Transactions of the ASABE, vol. 55, 2012."),
    ]
    paras = _paragraphs(runs)
    assert [p[:3] for p in paras[2:]] == ["[1]", "[2]", "[3]", "[4]"]


def test_a_table_is_not_read_as_two_columns():
    # LibreOffice's table cells: short lines at four left edges, right of the middle too.
    runs = [(72.0, 700.0, 12.0, "Function"), (306.0, 700.0, 12.0, "Description")]
    y = 680.0
    for name, what in [
        ("run_SSMSE()", "Run the MSE"),
        ("summary_all()", "Summarize output"),
        ("develop_OMs()", "Turn one OM"),
        ("run_EM()", "Run a model"),
        ("get_bin()", "Get the binary"),
    ]:
        runs += [(72.0, y, 12.0, name), (306.0, y, 12.0, what), (434.0, y, 12.0, "No")]
        y -= 14
    runs += [
        (72.0, 560.0, 16.0, "References"),
        (
            72.0,
            540.0,
            12.0,
            "[1] A. Smith, “Management strategy evaluation: The light on the hill,”",
        ),
        (72.0, 526.0, 12.0, "in Population dynamics for fisheries management, 1994, pp. 249–253."),
    ]
    paras = _paragraphs(runs)
    assert paras[-2] == "References"
    assert paras[-1].startswith("[1] A. Smith") and paras[-1].endswith("pp. 249–253.")


# Small capitals (DIN 1505-2 names). Chromium synthesises them: a full-size capital, then the
# other letters as smaller capitals, and pypdf opens every run of a new size with a space.
CHROMIUM_DIN_RUNS = [
    (90.0, 738.0, 24.0, "References"),
    (90.0, 699.8, 12.0, "A"),
    (98.7, 699.8, 8.2, " PPLE"),
    (117.9, 699.8, 12.0, "  I"),
    (124.9, 699.8, 8.2, " NC"),
    (136.4, 699.8, 12.0, ": "),
    (142.7, 699.8, 12.0, "Product environmental report: MacBook Pro 16-inch"),
    (397.0, 699.8, 12.0, "."),
    (90.0, 681.8, 12.0, "D"),
    (98.7, 681.8, 8.2, " OBSON"),
    (126.6, 681.8, 12.0, " , B"),
    (140.6, 681.8, 8.2, " ARNABY"),
    (175.5, 681.8, 12.0, " ; "),
    (184.8, 681.8, 12.0, "M"),
    (195.5, 681.8, 8.2, " IJIC"),
    (209.7, 681.8, 12.0, " , A"),
    (223.7, 681.8, 8.2, " NA"),
    (235.6, 681.8, 12.0, ": "),
    (242.0, 681.8, 12.0, "Protecting rivers by integrating supply-wastewater"),
    (108.0, 663.8, 12.0, "infrastructure planning and coordinating operational decisions"),
    (406.2, 663.8, 12.0, ". In: "),
    (428.6, 663.8, 12.0, "Environmental"),
    (108.0, 645.8, 12.0, "Research Letters"),
    (188.5, 645.8, 12.0, " Bd. 15, IOP Publishing (2020), Nr.\xa011, S.\xa0114025"),
]


def test_chromium_small_capitals_rejoined_in_source_case():
    lines = runs_to_lines(CHROMIUM_DIN_RUNS)
    assert " ".join(lines[1].text.split()) == (
        "Apple Inc: Product environmental report: MacBook Pro 16-inch."
    )
    assert lines[2].text.startswith("Dobson, Barnaby ; Mijic, Ana: Protecting rivers")
    assert lines[2].size == 12.0  # a line of small capitals is body text, not a footnote
    paras = _paragraphs(CHROMIUM_DIN_RUNS)
    assert paras[1] == "Apple Inc: Product environmental report: MacBook Pro 16-inch."
    assert paras[2].startswith("Dobson, Barnaby ; Mijic, Ana:")
    assert paras[2].endswith("S. 114025")


def test_libreoffice_small_capitals_and_hyphenated_names():
    # LibreOffice prints the small capitals without the extra space; a hyphen may follow.
    runs = [
        (72.1, 284.5, 12.0, "B"),
        (80.9, 284.5, 9.6, "RETNER"),
        (124.2, 284.5, 12.0, ", S"),
        (140.0, 284.5, 9.6, "YDNEY"),
        (175.8, 284.5, 12.0, " ; "),
        (187.5, 284.5, 12.0, "W"),
        (192.3, 284.5, 9.6, "OEI"),
        (210.0, 284.5, 12.0, " -Y"),
        (222.0, 284.5, 9.6, " UH"),
        (240.0, 284.5, 12.0, ": Gene expression"),
    ]
    (line,) = runs_to_lines(runs)
    assert line.text == "Bretner, Sydney ; Woei-Yuh: Gene expression"
    assert line.size == 12.0


def test_full_size_capitals_are_left_alone():
    (line,) = runs_to_lines([(72.0, 700.0, 12.0, "NASA and the WHO (WHO, 2019).")])
    assert line.text == "NASA and the WHO (WHO, 2019)."


# ---------------------------------------------------------------- errors stay clear


def test_html_nested_too_deep_is_refused_with_the_figures():
    with pytest.raises(AnalysisInputError, match=r"more than 400 deep; the limit is 400"):
        extract(("<html><body>" + "<div>" * 500 + "text").encode(), "deep.html")


def test_blocks_of_sanitised_html_read_the_canonical_note_class():
    blocks = html_blocks('<p>a</p><aside class="footnote"><p>note</p></aside>')
    assert [(b.text, b.note) for b in blocks] == [("a", False), ("note", True)]


# ---------------------------------------------------------------- page breaks


def _two_pages(first, second, width=612.0, height=792.0):
    pages = [runs_to_lines(first, 0), runs_to_lines(second, 1)]
    return [text for _, text in page_paragraphs(pages, width, height)]


def test_entry_without_full_stop_ends_at_a_page_break():
    # LibreOffice's DIN 1505-2 list (whole lines as runs): entries set flush left, apart by a
    # gap, ending without a full stop; the page ends on an entry's short last line.
    first = [
        (72.1, 250.8, 12.0, "Nordlander, T. F. ; Lybecker, A.: Saving CO2 using location and time"),
        (72.1, 236.8, 12.0, "shifting in Azure."),
        (72.1, 212.8, 12.0, "Portegies Zwart, Simon: The ecological impact of high-performance"),
        (
            72.1,
            198.8,
            12.0,
            "computing in astrophysics. In: Nature Astronomy Bd. 4, Nature Publishing",
        ),
        (72.1, 184.8, 12.0, "Group (2020), Nr.\xa099, S.\xa0819–822"),
        (
            72.1,
            116.9,
            12.0,
            "Campo, Javier del ; Sieracki, Michael E ; Molestina, Robert ; Keeling,",
        ),
        (
            72.1,
            102.9,
            12.0,
            "Patrick ; Massana, Ramon ; Ruiz-Trillo, Inaki: The others: Our biased",
        ),
        (
            72.1,
            88.9,
            12.0,
            "perspective of eukaryotic genomes. In: Trends in ecology & evolution Bd.",
        ),
        (72.1, 74.9, 12.0, "29, Elsevier (2014), Nr.\xa05, S.\xa0252–259"),
    ]
    second = [
        (
            72.1,
            708.8,
            12.0,
            "Caron, David A ; Alexander, Harriet ; Allen, Andrew E ; Archibald, John",
        ),
        (72.1, 694.8, 12.0, "M ; Armbrust, E Virginia ; Bachy, Charles ; Bell, Callum J ; Bharti,"),
        (
            72.1,
            680.8,
            12.0,
            "Arvind ; u.\xa0a.: Probing the evolution, ecology and physiology of marine",
        ),
        (
            72.1,
            666.8,
            12.0,
            "protists using transcriptomics. In: Nature Reviews Microbiology Bd. 15,",
        ),
        (72.1, 652.8, 12.0, "Nature Publishing Group (2017), Nr.\xa01, S.\xa06–20"),
    ]
    paras = _two_pages(first, second)
    assert [p.split(" ", 1)[0] for p in paras] == ["Nordlander,", "Portegies", "Campo,", "Caron,"]
    # A body paragraph running on over the page break stays one paragraph.
    body = _two_pages(
        [
            (
                72.1,
                100.0,
                12.0,
                "The model was run for every catchment in the region, and its output",
            ),
            (72.1, 86.0, 12.0, "was compared with the gauges that the agency maintains along the"),
        ],
        [(72.1, 708.8, 12.0, "river (Smith, 2020). Agreement was good in all seasons.")],
    )
    assert len(body) == 1


def test_hanging_entry_alone_on_the_last_page_is_its_own_entry():
    first = [
        (90.0, 700.0, 12.0, "Body text of the paper, set flush left as a browser prints it, and"),
        (90.0, 682.0, 12.0, "a second line (1)."),
        (90.0, 640.0, 24.0, "References"),
        (
            90.0,
            600.0,
            12.0,
            "1. T. Novosel, T. Pukšec, N. Duić, J. Domac. Heat demand mapping and district",
        ),
        (
            126.0,
            582.0,
            12.0,
            "heating assessment in data-pour areas. Renewable and Sustainable Energy",
        ),
        (126.0, 564.0, 12.0, "Reviews. 2020;131:109987. doi:10.1016/j.rser.2020.109987"),
        (
            90.0,
            546.0,
            12.0,
            "2. A. Jüstel, E. Humm, E. Herbst, F. Strozyk, P. Kukla, R. Bracke. Unveiling the",
        ),
        (
            126.0,
            528.0,
            12.0,
            "spatial distribution of heat demand in North-West-Europe compiled with national",
        ),
        (
            126.0,
            510.0,
            12.0,
            "heat Consumption data. Energies. 2024;17(2):481. doi:10.3390/en17020481",
        ),
    ]
    second = [
        (
            90.0,
            751.5,
            12.0,
            "3. E. Herbst, E. Khashfe, A. Jüstel, F. Strozyk, P. Kukla. A Heat Demand Map of",
        ),
        (
            126.0,
            733.5,
            12.0,
            "North-West Europe – its impact on supply areas and identification of potential",
        ),
        (
            126.0,
            715.5,
            12.0,
            "production areas for deep geothermal energy. GeoKarlsruhe. 2021;2021:1.",
        ),
        (126.0, 697.5, 12.0, "doi:10.48380/dggv-j2wj-nk88"),
    ]
    paras = _two_pages(first, second)
    assert [p[:2] for p in paras[2:]] == ["1.", "2.", "3."]
    assert paras[-1].endswith("doi:10.48380/dggv-j2wj-nk88")


def test_inline_code_survives_extraction_as_code_spans():
    doc = extract(b"Call `f(2020)` as in (Smith, 2020).\n\n    x = (Smith, 2020)\n", "t.md")
    para, listing = doc.blocks
    assert [para.text[a:b] for a, b in para.codes] == ["f(2020)"]
    assert listing.tag == "pre"


def test_right_aligned_labels_still_open_their_entries():
    # Numbers right-aligned in their column (as LaTeX sets them): "[9]" starts right of "[10]".
    runs = [
        (96.0, 700.0, 12.0, "[8]"),
        (96.0, 664.0, 12.0, "[9]"),
        (90.0, 628.0, 12.0, "[10]"),
        (120.0, 700.0, 12.0, "A. Smith, “First title of a paper,” Journal of Things, vol. 1,"),
        (120.0, 682.0, 12.0, "pp. 1–10, 2020."),
        (120.0, 664.0, 12.0, "B. Jones, “Second title of a paper,” Journal of Things, vol. 2,"),
        (120.0, 646.0, 12.0, "pp. 11–20, 2021."),
        (120.0, 628.0, 12.0, "C. Brown, “Third title of a paper,” Journal of Things, vol. 3,"),
        (120.0, 610.0, 12.0, "pp. 21–30, 2022."),
    ]
    assert [p.split(" ", 2)[:2] for p in _paragraphs(runs)] == [
        ["[8]", "A."],
        ["[9]", "B."],
        ["[10]", "C."],
    ]
