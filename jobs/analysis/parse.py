"""Parse a document's HTML into its style, citations and references (:class:`ParsedDocument`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .blocks import Block, html_blocks
from .citations import (
    author_year_citations,
    body_blocks,
    language_hint,
    numeric_citations,
    resolvable,
)
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


def parse_blocks(
    blocks: list[Block],
    dated_references: tuple[list[Reference], tuple[int, int] | None] | None = None,
) -> ParsedDocument:
    """Style, citations and entries of a document's blocks.

    Both marker families are read, author-date and numbered, and the reference list decides
    between them: the family whose keys name more entries of the list wins, so a wrong first
    guess of the style never erases the markers. The style's name within the family (APA or
    Harvard, IEEE or Vancouver) changes no verdict.

    ``dated_references`` is ``parse_references(blocks, numbered=False)`` when the caller has
    read it already (the pipeline counts the entries first); it is not read twice then.
    """
    # Entries are parsed as author-date first; list-item ordinals count as entry numbers only
    # for the numbered reading.
    if dated_references is None:
        dated_references = parse_references(blocks, numbered=False)
    refs, section = dated_references
    style = detect_style(body_blocks(blocks, section), refs)
    num_refs, num_section = parse_references(blocks, numbered=True)
    if style in NUMERIC:
        numeric_style = style
    else:
        numeric_style = detect_style(body_blocks(blocks, num_section), num_refs, numeric=True)
    numbered = numeric_citations(blocks, num_refs, num_section, numeric_style)
    if any(r.authors and " " in r.authors[0] for r in refs):
        # Only group authors have abbreviations worth looking for; most lists have none.
        add_abbreviations(refs, "\n".join(b.text for b in body_blocks(blocks, section)))
    dated = author_year_citations(blocks, refs, section)
    score_num, score_dated = resolvable(numbered, num_refs), resolvable(dated, refs)
    # Ties go to the first guess.
    use_numbers = score_num >= score_dated if style in NUMERIC else score_num > score_dated
    if use_numbers:
        style, citations, refs = numeric_style, numbered, num_refs
    else:
        if style in NUMERIC:
            style = detect_style(body_blocks(blocks, section), refs, numeric=False)
        citations = dated
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
