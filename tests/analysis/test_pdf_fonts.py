"""A PDF's fonts are read once per document, not once per page (jobs.analysis.pdf)."""

from __future__ import annotations

import io

import pypdf
import pypdf.generic._font as pypdf_font

from jobs.analysis.pdf import pdf_paragraphs
from tests.analysis.builders import make_pdf


def _pages(n: int) -> bytes:
    return make_pdf(
        [[(72, 700, 11, f"Page {i} cites a study (Smith, 2020, p. {i}).")] for i in range(n)]
    )


def _count_font_reads(monkeypatch) -> list[int]:
    """Counts pypdf's font builds (each reads the font's encoding once)."""
    calls = [0]
    real = pypdf_font.get_encoding

    def counting(font_dict):
        calls[0] += 1
        return real(font_dict)

    monkeypatch.setattr(pypdf_font, "get_encoding", counting)
    return calls


def test_one_font_on_every_page_is_read_once(monkeypatch):
    calls = _count_font_reads(monkeypatch)
    paragraphs = pdf_paragraphs(_pages(12))
    assert calls[0] == 1
    text = " ".join(text for _, text in paragraphs)
    for i in range(12):  # the shared Font reads every page's text
        assert f"Page {i} cites a study (Smith, 2020, p. {i})." in text


def test_outside_an_extraction_pypdf_reads_fonts_as_shipped(monkeypatch):
    calls = _count_font_reads(monkeypatch)
    reader = pypdf.PdfReader(io.BytesIO(_pages(3)))
    texts = [page.extract_text() for page in reader.pages]
    assert calls[0] == 3  # once per page: no cache leaks out of pdf_paragraphs
    assert texts[2].startswith("Page 2 cites")


def test_the_cache_ends_with_the_document(monkeypatch):
    calls = _count_font_reads(monkeypatch)
    pdf_paragraphs(_pages(2))
    pdf_paragraphs(_pages(2))
    assert calls[0] == 2  # one per document: the second does not reuse the first's fonts
