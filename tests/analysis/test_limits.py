"""Extraction is bounded: each limit refuses a document past it at once, with a message naming
the limit and the document's figure, and accepts one within it."""

from __future__ import annotations

import io
import random
import string
import time
import zipfile

import pytest

from jobs.analysis import AnalysisInputError, Limits, analyze, extract
from jobs.analysis.limits import DEFAULT_LIMITS, MB

from .builders import make_docx, make_pdf, text_pdf


def _error(data: bytes, name: str, **limits) -> str:
    with pytest.raises(AnalysisInputError) as exc:
        extract(data, name, limits=Limits(**limits))
    return str(exc.value)


def test_defaults_are_the_documented_ones():
    documented = Limits(
        max_bytes=50 * MB,
        max_text_chars=10_000_000,
        docx_part_bytes=25 * MB,
        docx_xml_bytes=60 * MB,
        pdf_pages=1_000,
        pdf_seconds=120.0,
        html_depth=400,
        max_paragraphs=150_000,
    )
    assert documented == DEFAULT_LIMITS


def test_pdf_page_count_limit():
    pdf = make_pdf([[(72, 700, 11, f"Page {i} text (Smith, 2020).")] for i in range(3)])
    assert _error(pdf, "t.pdf", pdf_pages=2) == "The PDF has 3 pages; the limit is 2."
    assert extract(pdf, "t.pdf", limits=Limits(pdf_pages=3)).blocks


def test_pdf_page_count_message_groups_thousands():
    pages = [[(72, 700, 11, "x")]] * 1001
    msg = _error(make_pdf(pages), "t.pdf")
    assert msg == "The PDF has 1,001 pages; the limit is 1,000."


def test_pdf_reading_time_limit():
    pdf = text_pdf([f"Paragraph {i} about a finding (Smith, 2020)." for i in range(200)])
    msg = _error(pdf, "t.pdf", pdf_seconds=0.0)
    assert msg.startswith("Reading the PDF's text took more than 0 seconds (stopped at page 1 of")
    assert msg.endswith("the limit is 0 seconds.")


def test_pdf_text_size_limit():
    pdf = text_pdf(["A sentence of some length about a result (Smith, 2020)."] * 40)
    msg = _error(pdf, "t.pdf", max_text_chars=500)
    assert "characters of text in its first 1 pages; the limit is 500." in msg


def test_docx_part_limit_names_the_part():
    docx = make_docx([["A paragraph (Smith, 2020). " * 50]])
    msg = _error(docx, "t.docx", docx_part_bytes=1000)
    assert msg.startswith("The DOCX part word/document.xml holds ")
    assert msg.endswith(" of XML; the limit is 1,000 bytes.")


def test_docx_part_limit_is_independent_of_the_compression_ratio():
    # 3 MB of ordinary prose XML: it compresses like any document (no bomb check fires), and
    # still counts as the 3 MB of XML the reader would parse.
    rng = random.Random(0)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(7)) for _ in range(2000)]
    para = []
    size = 0
    while size < 3 * MB:
        run = " ".join(rng.choice(words) for _ in range(40))
        para.append(f"<w:p><w:r><w:t>{run}</w:t></w:r></w:p>")
        size += len(para[-1])
    filler = "".join(para)
    buf = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(make_docx([["Hello"]]))) as src,
        zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body>" + filler.encode())
            dst.writestr(info.filename, data)
    data = buf.getvalue()
    assert len(data) < 2 * MB
    started = time.monotonic()
    msg = _error(data, "long.docx", docx_part_bytes=2 * MB)
    assert time.monotonic() - started < 2.0  # refused before any XML is parsed
    assert msg == "The DOCX part word/document.xml holds 3.0 MB of XML; the limit is 2.0 MB."


def test_docx_total_xml_limit():
    docx = make_docx([["A paragraph (Smith, 2020). " * 50]], footnotes={1: "A note. " * 50})
    msg = _error(docx, "t.docx", docx_xml_bytes=1500)
    assert msg.startswith("The DOCX file holds ") and msg.endswith("the limit is 1,500 bytes.")
    assert extract(docx, "t.docx", limits=Limits(docx_xml_bytes=1 * MB)).blocks


def test_html_depth_limit_is_fast_and_clear():
    deep = ("<html><body>" + "<div>" * 100_000 + "x" + "</div>" * 100_000).encode()
    started = time.monotonic()
    msg = _error(deep, "deep.html")
    assert time.monotonic() - started < 2.0
    assert msg == "The HTML nests elements more than 400 deep; the limit is 400."


def test_paragraph_limit_every_format():
    text = b"a.\n\n" * 1_001
    html = b"<html><body>" + b"<p>a.</p>" * 1_001
    md = b"# Title\n\n" + b"a.\n\n" * 1_000
    docx = make_docx([["a."]] * 1_001)
    for data, name in ((text, "t.txt"), (html, "t.html"), (md, "t.md"), (docx, "t.docx")):
        assert _error(data, name, max_paragraphs=1_000) == (
            "The document has more than 1,000 paragraphs; the limit is 1,000."
        ), name
    assert len(extract(text, "t.txt", limits=Limits(max_paragraphs=1_001)).blocks) == 1_001


def test_table_cells_and_list_items_in_a_row_count_once():
    # A row's cells are one paragraph (the parser reads them as one block), and so are the
    # paragraphs Word puts inside a cell: only the rows count.
    rows = "".join(f"<tr><td><p>[{i}]</p></td><td><p>Author {i}.</p></td></tr>" for i in range(50))
    html = f"<html><body><table>{rows}</table></body></html>".encode()
    doc = extract(html, "t.html", limits=Limits(max_paragraphs=55))
    assert len(doc.blocks) == 50


def test_unclosed_paragraphs_do_not_count_as_nesting():
    # Old HTML leaves <p> and <li> open; a browser closes them, and so does the depth count.
    html = "<html><body>" + "<p>A finding (Smith, 2020)." * 5000 + "<ul>" + "<li>x" * 5000
    doc = extract(html.encode(), "old.html")
    assert len(doc.blocks) == 10_000


def test_text_size_limit_for_text_formats_and_html():
    assert _error(b"a" * 2000, "t.txt", max_text_chars=1000) == (
        "The document holds 2,000 characters of text; the limit is 1,000."
    )
    # HTML: markup does not count, the text does.
    html = ("<html><body>" + "<p><b></b>ab</p>" * 600).encode()
    assert _error(html, "t.html", max_text_chars=1000) == (
        "The document holds 1,200 characters of text; the limit is 1,000."
    )
    assert extract(html, "t.html", limits=Limits(max_text_chars=1200)).blocks


def test_max_bytes_keyword_still_overrides_the_file_size_limit():
    with pytest.raises(AnalysisInputError, match=r"the limit is 0 MB"):
        extract(b"Hello (Smith, 2020).", "t.txt", max_bytes=10)
    msg = _error(b"Hello (Smith, 2020).", "t.txt", max_bytes=10)
    assert msg.startswith("The file is 0.0 MB; the limit is 0 MB")


def test_analyze_passes_the_limits_through():
    pdf = make_pdf([[(72, 700, 11, "Text (Smith, 2020).")]] * 2)
    with pytest.raises(AnalysisInputError, match=r"The PDF has 2 pages; the limit is 1\."):
        analyze(pdf, "t.pdf", limits=Limits(pdf_pages=1))
