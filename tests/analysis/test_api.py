"""The public API: formats, HTML-only re-parse, JSON round trips, report shape, annotation."""

from __future__ import annotations

import json
import re

from jobs.analysis import (
    ParsedDocument,
    analyze,
    annotate_html,
    build_report,
    extract,
    parse,
    verify,
)

from .builders import make_docx, text_pdf

BODY = "Prior work agrees (Smith &amp; Lee, 2020). Jones (2018) disagrees (Brown, 2017)."
REFS = [
    "Jones, A. (2018). On disagreement. Journal of Tests, 2(1), 1\u20139.",
    "Smith, J., &amp; Lee, K. (2020). A study. Journal of Tests, 1(2), 3\u20134. https://doi.org/10.1234/abc",
    "Unused, U. (2001). Never cited. Publisher. https://doi.org/10.12/",
]
HTML = f"<h1>T</h1><p>{BODY}</p><h2>References</h2>" + "".join(f"<p>{r}</p>" for r in REFS)


def test_report_follows_the_contract():
    report = analyze(HTML.encode(), "thesis.html")
    assert set(report) >= {"document", "style", "citations", "references", "summary"}
    assert report["style"] == "apa"
    assert [c["verdict"] for c in report["citations"]] == [
        "verified",
        "verified",
        "missing_reference",
    ]
    assert report["citations"][0]["keys"] == [{"author": "Smith", "year": "2020"}]
    assert report["citations"][0]["references"] == [1]
    assert [r["verdict"] for r in report["references"]] == ["cited", "cited", "uncited"]
    assert report["references"][1]["doi"] == "10.1234/abc" and report["references"][1]["doi_valid"]
    assert report["references"][2]["doi_valid"] is False
    assert {r["library"] for r in report["references"]} == {"unchecked"}
    assert report["summary"] == {
        "verified": 2,
        "missing_reference": 1,
        "year_mismatch": 0,
        "author_mismatch": 0,
        "ambiguous": 0,
        "uncited": 1,
    }
    json.dumps(report)


def test_parse_from_stored_html_equals_parse_from_extraction():
    doc = extract(HTML.encode(), "thesis.html")
    assert parse(doc.html) == parse(doc)


def test_parsed_document_round_trips_through_json():
    parsed = parse(extract(HTML.encode(), "t.html"))
    again = ParsedDocument.from_dict(json.loads(json.dumps(parsed.to_dict())))
    assert again == parsed
    verdicts = verify(again.citations, again.references, again.style)
    report = build_report(
        "t.html", json.loads(json.dumps(parsed.to_dict())), json.loads(json.dumps(verdicts))
    )
    assert report["summary"]["verified"] == 2


def test_format_is_detected_from_content_not_name():
    assert extract(HTML.encode(), "misnamed.pdf").format == "html"
    assert extract(text_pdf(["Hello (Smith, 2020)."]), "upload.bin").format == "pdf"
    assert extract(make_docx([["Hello"]]), "x.txt").format == "docx"
    assert extract(b"# Title\n\n- a\n- b\n\nText.", "notes").format == "markdown"
    assert extract(b"Just some words.\n\nAnother paragraph.", "x").format == "text"


def test_html_is_sanitised():
    doc = extract(
        b'<p onclick="x()">Hi<script>alert(1)</script><a href="javascript:x">l</a></p>', "t.html"
    )
    assert "script" not in doc.html and "onclick" not in doc.html and "javascript" not in doc.html


def test_markdown_keeps_printed_list_numbers():
    md = b"Text (1) and (3).\n\n## References\n\n1. Alpha A. Title. J. 2020;1:1.\n\n3. Beta B. Title. J. 2021;1:2.\n"
    parsed = parse(extract(md, "t.md"))
    assert [r["text"][:3] for r in parsed.references] == ["1. ", "3. "]
    assert [r["number"] for r in parsed.references] == [1, 3]


def test_docx_footnotes_follow_their_paragraph():
    data = make_docx(
        [
            ["Main text (Smith ", "& Lee, 2020).", 1, " More text."],
            ["Next paragraph (Jones, 2018)."],
            ["References"],
            ["Jones, A. (2018). On disagreement. Journal, 1, 2."],
            ["Smith, J., & Lee, K. (2020). A study. Journal, 1, 2."],
        ],
        footnotes={1: "See Brown (2017)."},
    )
    doc = extract(data, "t.docx")
    texts = [b.text for b in doc.blocks]
    assert texts[:3] == [
        "Main text (Smith & Lee, 2020). More text.",
        "See Brown (2017).",
        "Next paragraph (Jones, 2018).",
    ]
    markers = [c["text"] for c in parse(doc).citations]
    assert markers == ["(Smith & Lee, 2020)", "Brown (2017)", "(Jones, 2018)"]


def test_pdf_running_headers_page_numbers_and_hyphenation():
    paragraphs = [
        f"Paragraph {i} says something about the topic (Morten-\nsen, 2023) in detail."
        for i in range(40)
    ]
    data = text_pdf([p.replace("-\n", "- ") for p in paragraphs], header="My Thesis Title")
    doc = extract(data, "t.pdf")
    text = doc.text
    assert "My Thesis Title" not in text
    assert not re.search(r"(?m)^\d+$", text)
    assert doc.format == "pdf"


def test_annotate_marks_each_citation_safely():
    html = HTML.replace("Jones (2018)", "<b>Jones</b> (2018)")
    report = analyze(html.encode(), "t.html")
    doc = extract(html.encode(), "t.html")
    marked = annotate_html(doc.html, report["citations"])
    assert marked.count('data-index="0"') == 1
    assert marked.count('data-index="1"') == 2  # the marker spans <b>: one mark per text run
    assert 'class="cite cite-missing_reference"' in marked
    assert 'title="no entry by Brown' in marked
    evil = [dict(report["citations"][0], reason='"><script>alert(1)</script>')]
    assert "<script>" not in annotate_html(doc.html, evil)


def test_summary_of_a_document_without_citations_does_not_claim_it_is_clean():
    from jobs.analysis.summary import format_summary

    report = analyze(b"Just a paragraph of prose.\n\nAnd another one.", "notes.txt")
    text = format_summary(report)
    assert "nothing could be checked" in text
    assert "No problems found" not in text
