"""How much work one uploaded document may cause during extraction.

Every bound is a parameter of the pure extraction function with a documented default, so that
callers (the pipeline, ``manage.py analyze``, tests) choose them without settings; a document
past a bound fails at once with :class:`~jobs.analysis.errors.AnalysisInputError` naming the
limit and the figure ("The PDF has 2,999 pages; the limit is 1,000.").

Defaults, and why:

* ``max_bytes`` 50 MB: the upload itself.
* ``max_text_chars`` 10,000,000: the extracted text; a 300-page thesis holds about 1 million
  characters, a 2,000-page one about 6 million.
* ``docx_part_bytes`` 25 MB and ``docx_xml_bytes`` 60 MB: a DOCX part's XML uncompressed, one
  part and all parts together, whatever the compression ratio. A 300-page thesis written in Word
  has 2-10 MB of ``document.xml``; the XML reader needs about 35 times the XML in memory and
  several seconds per MB.
* ``pdf_pages`` 1,000 and ``pdf_seconds`` 120: a PDF's page count, and the wall-clock time its
  text may take to read (a crafted content stream can make one page slow).
* ``html_depth`` 400: how deep HTML elements may nest; real documents stay below 40, while
  100,000 nested ``<div>`` take minutes in any HTML parser.
* ``max_paragraphs`` 150,000: block-level elements (paragraphs, headings, list items, table
  rows), counted before the HTML is sanitised. Each costs about 2 KB on its way through the
  analysis however short it is (the sanitiser's tree, the parser's blocks, the report page's
  marking), so 10 million characters of two-letter paragraphs would need gigabytes; a
  300-page thesis has about 2,200 paragraphs, a 2,000-page one about 15,000.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Bounds on the work of reading one document (see the module docstring for defaults)."""

    max_bytes: int = 50 * MB
    max_text_chars: int = 10_000_000
    docx_part_bytes: int = 25 * MB
    docx_xml_bytes: int = 60 * MB
    pdf_pages: int = 1_000
    pdf_seconds: float = 120.0
    html_depth: int = 400
    max_paragraphs: int = 150_000


DEFAULT_LIMITS = Limits()


def megabytes(n: int) -> str:
    """``n`` bytes as a figure for a message: ``"40.2 MB"`` (``"2,048 bytes"`` below 1 MB)."""
    return f"{n / MB:,.1f} MB" if n >= MB else f"{n:,} bytes"
