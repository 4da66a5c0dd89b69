"""Acurio's citation analysis: pure Python, no Django.

The pipeline calls the steps one by one, each with small JSON in and out; ``analyze`` runs them
all synchronously (``manage.py analyze`` uses it).

    doc = extract(data, "thesis.pdf")              # ExtractedDocument: .html, .format, .blocks
    parsed = parse(doc.html)                        # ParsedDocument: .style, .citations, .references
    verdicts = verify(parsed.citations[:200], parsed.references, parsed.style)   # per chunk
    report = build_report("thesis.pdf", parsed, verdicts)                         # DESIGN.md JSON
    marked = annotate_html(doc.html, report["citations"])                       # for the report page

Bad input of any kind raises :class:`AnalysisInputError` with a message for the user.
"""

from __future__ import annotations

from .errors import AnalysisInputError
from .extract import ExtractedDocument
from .extract import extract as _extract
from .library import Library, load_library
from .limits import Limits
from .matching import index_for, judge
from .parse import ParsedDocument, references_of
from .parse import parse as _parse
from .report import annotate_html, build_report
from .resolver import Resolver

__all__ = [
    "AnalysisInputError",
    "ExtractedDocument",
    "Library",
    "Limits",
    "ParsedDocument",
    "Resolver",
    "analyze",
    "annotate_html",
    "build_report",
    "extract",
    "load_library",
    "parse",
    "references_of",
    "verify",
]


def extract(
    data: bytes, filename: str, *, max_bytes: int | None = None, limits: Limits | None = None
) -> ExtractedDocument:
    """Read an uploaded thesis (DOCX, PDF, HTML, Markdown, plain text) into sanitised HTML.

    The format is detected from the bytes; ``filename`` is only a hint. ``limits`` bounds the
    work (:class:`Limits`: file size, text size, DOCX XML, PDF pages and time, HTML nesting;
    documented defaults when omitted); ``max_bytes`` overrides ``limits.max_bytes`` (50 MB).
    The result has ``.html`` (safe to store and show), ``.format``, ``.blocks`` and
    ``.paragraphs`` (each paragraph's text with its offsets in ``.text``).
    Raises :class:`AnalysisInputError` for empty, oversize, corrupt, encrypted, bomb-like or
    unsupported files and for documents past a limit.
    """
    return _extract(data, filename, max_bytes=max_bytes, limits=limits)


def parse(html_or_extracted: str | ExtractedDocument) -> ParsedDocument:
    """Find the style, the citations and the reference entries of a document.

    Accepts the stored sanitised ``doc_html`` alone (or the :class:`ExtractedDocument`). Each
    citation is a dict ``{"text", "keys", "paragraph", "start", "end", "context"}`` in document
    order; each reference a dict ``{"index", "text", "number", "authors", "year", "title",
    "venue", "doi", "doi_valid", "paragraph"}`` in list order. ``ParsedDocument.to_dict()`` /
    ``from_dict()`` round-trip through JSON.
    """
    return _parse(html_or_extracted)


def verify(citations_chunk: list[dict], references: list[dict], style: str) -> list[dict]:
    """Verdicts for a chunk of citations, in the chunk's order.

    Pure and deterministic: chunks may run on different workers and be concatenated in order.
    Each result is the citation dict plus ``verdict``, ``references`` (indices of the matched
    entries) and ``reason`` (a sentence for the user). ``style`` is accepted so that callers
    need not know which keys a style uses; the keys themselves say whether they are numeric.
    """
    index = index_for(references)
    return [judge(c, index) for c in citations_chunk]


def analyze(
    data: bytes,
    filename: str,
    *,
    library: bytes | None = None,
    library_filename: str | None = None,
    resolver_url: str | None = None,
    max_bytes: int | None = None,
    limits: Limits | None = None,
) -> dict:
    """Extract, parse, verify and report in one go; returns the report JSON of DESIGN.md."""
    doc = _extract(data, filename, max_bytes=max_bytes, limits=limits)
    parsed = _parse(doc)
    verdicts = verify(parsed.citations, parsed.references, parsed.style)
    lib = load_library(library, library_filename or "") if library is not None else None
    resolver = Resolver(resolver_url) if resolver_url else None
    try:
        return build_report(filename, parsed, verdicts, library=lib, resolver=resolver)
    finally:
        if resolver is not None:
            resolver.close()
