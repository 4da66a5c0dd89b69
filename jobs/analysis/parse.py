"""Parse a document's HTML into its style, citations and references (:class:`ParsedDocument`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .blocks import Block, html_blocks
from .citations import language_hint, parse_citations
from .extract import ExtractedDocument
from .references import Reference, add_abbreviations, parse_references
from .styles import NUMERIC, detect_style


@dataclass
class ParsedDocument:
    """Style, citations and reference entries of one document; small and JSON round-trippable.

    ``citations`` and ``references`` are lists of plain dicts (see :meth:`Citation.to_dict` and
    :meth:`Reference.to_dict`) so that a pipeline step can checkpoint them as they are.
    """

    style: str
    citations: list[dict] = field(default_factory=list)
    references: list[dict] = field(default_factory=list)
    language: str = "en"

    def to_dict(self) -> dict:
        return {
            "style": self.style,
            "language": self.language,
            "citations": self.citations,
            "references": self.references,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ParsedDocument:
        return cls(
            style=data["style"],
            citations=list(data.get("citations", [])),
            references=list(data.get("references", [])),
            language=data.get("language", "en"),
        )


def parse_blocks(blocks: list[Block]) -> ParsedDocument:
    # Entries are parsed twice only when the first guess (author-year) turns out numeric, so
    # that list-item ordinals count as entry numbers for numbered styles only.
    refs, section = parse_references(blocks, numbered=False)
    in_refs = range(*section) if section else range(0)
    body = [b for b in blocks if b.index not in in_refs and not b.is_heading]
    style = detect_style(body, refs)
    if style in NUMERIC:
        refs, section = parse_references(blocks, numbered=True)
    elif any(r.authors and " " in r.authors[0] for r in refs):
        # Only group authors have abbreviations worth looking for; most lists have none.
        add_abbreviations(refs, "\n".join(b.text for b in body))
    style, citations = parse_citations(blocks, refs, section, style)
    return ParsedDocument(
        style=style,
        citations=[c.to_dict() for c in citations],
        references=[r.to_dict() for r in refs],
        language=language_hint(blocks),
    )


def parse(html_or_extracted: str | ExtractedDocument) -> ParsedDocument:
    """Parse sanitised document HTML (or an :class:`ExtractedDocument`)."""
    if isinstance(html_or_extracted, ExtractedDocument):
        blocks = html_or_extracted.blocks
    else:
        blocks = html_blocks(html_or_extracted)
    return parse_blocks(blocks)


def references_of(parsed: ParsedDocument | dict | list) -> list[Reference]:
    """Reference objects from a ParsedDocument, its dict form, or a list of reference dicts."""
    if isinstance(parsed, ParsedDocument):
        items = parsed.references
    elif isinstance(parsed, dict):
        items = parsed.get("references", [])
    else:
        items = parsed
    return [r if isinstance(r, Reference) else Reference.from_dict(r) for r in items]
