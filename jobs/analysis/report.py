"""Assemble the report JSON of DESIGN.md and mark citations in the document HTML."""

from __future__ import annotations

import html as htmlmod
from collections import Counter
from typing import TYPE_CHECKING

from .blocks import locate, piece_offsets, serialize, walk
from .extract import sanitize
from .matching import VERDICTS
from .text import normalize_with_map

if TYPE_CHECKING:
    from .library import Library
    from .parse import ParsedDocument
    from .resolver import Resolver

SUMMARY_KEYS = (*VERDICTS, "uncited")


def reference_verdicts(n_refs: int, citation_verdicts: list[dict]) -> list[str]:
    """``cited`` for every entry some citation points to, else ``uncited``."""
    cited = [False] * n_refs
    for c in citation_verdicts:
        for i in c.get("references", []):
            if 0 <= i < n_refs:
                cited[i] = True
    return ["cited" if x else "uncited" for x in cited]


def public_key(key: dict) -> dict:
    """A citation key as the report shows it: ``author``/``year`` or ``number``; the parser's
    private hints (``_with``, ``_etal``) stay out."""
    return {k: v for k, v in key.items() if not k.startswith("_")}


def build_report(
    document_name: str,
    parsed: ParsedDocument | dict,
    citation_verdicts: list[dict],
    *,
    library: Library | None = None,
    resolver: Resolver | None = None,
) -> dict:
    """The report JSON (DESIGN.md "Report JSON"), with ``reason`` and ``context`` extras."""
    from .parse import ParsedDocument, references_of

    if isinstance(parsed, dict):
        parsed = ParsedDocument.from_dict(parsed)
    refs = references_of(parsed)
    verdicts = reference_verdicts(len(refs), citation_verdicts)
    citations = []
    for c in citation_verdicts:
        citations.append(
            {
                "text": c["text"],
                "keys": [public_key(k) for k in c["keys"]],
                "verdict": c["verdict"],
                "references": c.get("references", []),
                "reason": c.get("reason", ""),
                "context": c.get("context", ""),
                "paragraph": c.get("paragraph"),
                "start": c.get("start"),
                "end": c.get("end"),
            }
        )
    references = []
    for r, verdict in zip(refs, verdicts, strict=True):
        entry = {
            "text": r.text,
            "verdict": verdict,
            "doi": r.doi,
            "doi_valid": r.doi_valid,
            "library": "unchecked",
            "number": r.number,
            "authors": r.authors,
            "year": r.year,
            "title": r.title,
            "venue": r.venue,
        }
        if r.doi and not r.doi_valid:
            entry["doi_reason"] = f"malformed DOI {r.doi!r}"
        if library is not None:
            entry["library"] = library.check(r)
        references.append(entry)
    if resolver is not None:
        for entry, r in zip(references, refs, strict=True):
            entry["resolver"] = resolver.check(r)
    summary = Counter({k: 0 for k in SUMMARY_KEYS})
    for c in citations:
        summary[c["verdict"]] += 1
    summary["uncited"] = verdicts.count("uncited")
    return {
        "document": document_name,
        "style": parsed.style,
        "language": parsed.language,
        "citations": citations,
        "references": references,
        "summary": {k: summary[k] for k in SUMMARY_KEYS},
    }


def annotate_html(doc_html: str, citation_verdicts: list[dict]) -> str:
    """Wrap each citation of ``doc_html`` in ``<mark class="cite cite-<verdict>">``.

    Each mark carries ``data-index`` (the citation's position in the report) and ``title`` (its
    reason). A marker spanning inline tags gets one mark per text run, all with the same index.
    The result is sanitised again, so it is as safe as the input.
    """
    blocks, events = walk(doc_html, keep_events=True)
    by_block: dict[int, list[tuple[int, dict]]] = {}
    for i, c in enumerate(citation_verdicts):
        if c.get("paragraph") is None or c.get("start") is None:
            continue
        by_block.setdefault(c["paragraph"], []).append((i, c))
    inserts: dict[int, list[tuple[int, int, str, str]]] = {}
    for b in blocks:
        cites = by_block.get(b.index)
        if not cites:
            continue
        raw = "".join(t for _, t in b.pieces)
        norm, src = normalize_with_map(raw)
        if norm != b.text:
            continue  # the HTML changed since parsing; leave this paragraph unmarked
        offsets = piece_offsets(b.pieces)
        for i, c in cites:
            s, e = c["start"], c["end"]
            if not (0 <= s < e <= len(src)):
                continue
            raw_s, raw_e = src[s], src[e - 1] + 1
            verdict = c.get("verdict", "verified")
            title = htmlmod.escape(c.get("reason", ""), quote=True)
            open_tag = f'<mark class="cite cite-{verdict}" data-index="{i}" title="{title}">'
            p = locate(offsets, raw_s)
            while p < len(b.pieces) and offsets[p] < raw_e:
                ev, text = b.pieces[p]
                lo = max(raw_s, offsets[p]) - offsets[p]
                hi = min(raw_e, offsets[p] + len(text)) - offsets[p]
                if ev >= 0 and hi > lo:
                    inserts.setdefault(ev, []).append((lo, hi, open_tag, "</mark>"))
                p += 1
    for ranges in inserts.values():
        ranges.sort()
    marked = serialize(events, inserts)
    return sanitize(marked, extra_attributes={"mark": {"class", "data-index", "title"}})
