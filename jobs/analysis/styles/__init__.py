"""The citation styles Acurio reads, one module each, and the detection of a document's style.

Each module (``apa``, ``harvard``, ``german``, ``chicago``, ``ieee``, ``vancouver``) exports ``STYLE``: its
name, whether its markers are numbers, and the grammar of its reference entries; its marker
forms and detection cues are module constants used here and by ``citations``. Adding a style is
adding a module and naming it in ``_MODULES``.
"""

from __future__ import annotations

import re

from ..blocks import Block
from . import apa, chicago, german, harvard, ieee, vancouver
from .base import YEAR, Entry, EntryLike, Style

# A cited name in the style counts below: it starts where no letter precedes it and has at
# most 60 more characters. Unbounded, a long word (or "Aa-Aa-...") is tried from each of its
# letters, each try running to its end: quadratic, and a 1,000,000-letter word took hours.
# Possessive: a space, a comma or "et al." follows the name, never a letter of it, so giving
# letters back can never match (the same matches, a third less time).
_NAME_START = r"(?<![^\W\d_])"
_SHORT_NAME = r"[^\W\d_](?:[^\W\d]|['\u2019\-]){0,60}+"

_MODULES = (apa, harvard, german, chicago, ieee, vancouver)
REGISTRY: dict[str, Style] = {m.STYLE.name: m.STYLE for m in _MODULES}
STYLES: tuple[str, ...] = tuple(REGISTRY)
NUMERIC: tuple[str, ...] = tuple(name for name, s in REGISTRY.items() if s.numeric)
# Each distinct entry grammar once, in the order they are tried.
_GRAMMARS = list(
    dict.fromkeys(s.parse_entry for s in sorted(REGISTRY.values(), key=lambda s: s.entry_priority))
)

__all__ = [
    "NUMERIC",
    "REGISTRY",
    "STYLES",
    "Entry",
    "Style",
    "detect_style",
    "parse_entry",
]


def parse_entry(body: str, label: str = "") -> Entry:
    """The first entry grammar (by priority) that reads ``body``; the last one reads anything."""
    for grammar in _GRAMMARS:
        entry = grammar(body, label)
        if entry is not None:
            return entry
    return Entry()


def detect_style(body: list[Block], refs: list[EntryLike], numeric: bool | None = None) -> str:
    """The citation style of the document, from its markers and its reference list.

    ``numeric`` True or False asks only which style of that family (numbered or author-date)
    the document reads like, when the family is already known.
    """
    brackets = parens_num = sups = ay_comma = ay_plain = german_cues = 0
    # An even sample of the body is plenty to tell the style and keeps long theses cheap.
    step = max(1, len(body) // 150)
    for b in body[::step]:
        t = b.text
        brackets += sum(1 for _ in ieee.BRACKETS.finditer(t))
        sups += sum(1 for a, z in b.sups if vancouver.SUP_NUMBERS.match(t[a:z]))
        for m in vancouver.PARENS_NUM.finditer(t):
            if not re.fullmatch(rf"\s*{YEAR}\s*", m.group(1)):
                parens_num += 1
        ay_comma += len(
            re.findall(rf"{_NAME_START}{_SHORT_NAME}(?:\s+et al\.)?,\s+{YEAR}[a-z]?[,;)]", t)
        )
        ay_plain += len(
            re.findall(
                rf"{_NAME_START}{_SHORT_NAME}(?:\s+et al\.|\s+u\.\s?a\.)?\s+{YEAR}[a-z]?[,;)]", t
            )
        )
        german_cues += len(german.MARKER_CUES.findall(t))
    ref_numbered_brackets = sum(1 for r in refs if r.text.startswith("["))
    ref_numbered_dots = sum(1 for r in refs if re.match(r"^\d{1,4}\.\s", r.text))
    ref_colon_year = sum(1 for r in refs if apa.COLON_YEAR.search(r.text[:300]))
    # DIN 1505-2 entries: "MÜLLER, HANS ; WEBER, ANNA: Titel ..." (no year before the colon).
    ref_din = sum(1 for r in refs if german.parse_entry(r.text) is not None)
    ref_chicago = sum(1 for r in refs if chicago.parse_entry(r.text) is not None)
    ref_quoted = sum(1 for r in refs if apa.QUOTED_AFTER_YEAR.search(r.text[:300]))
    author_year = ay_comma + ay_plain
    numbers = brackets + parens_num + sups
    n_refs = max(len(refs), 1)
    numbered = numbers > author_year or (ref_numbered_brackets + ref_numbered_dots) > 0.5 * n_refs
    if numeric is not None:
        numbered = numeric
    if numbered:
        # Superscript numbers are Vancouver's (and AMA's) other way of citing.
        if brackets + 3 * ref_numbered_brackets >= parens_num + sups + 3 * ref_numbered_dots:
            return "ieee"
        return "vancouver"
    if (
        german_cues > 0.05 * max(author_year, 1)
        or ref_colon_year > 0.3 * n_refs
        or ref_din > 0.5 * n_refs
    ):
        return "german"
    if ref_chicago > 0.5 * n_refs and ay_plain >= ay_comma:
        return "chicago"
    # The list tells APA from Harvard best: a full stop after "(2020)" or none.
    ref_stop = sum(1 for r in refs if apa.YEAR_THEN_STOP.search(r.text[:300]))
    ref_no_stop = sum(1 for r in refs if apa.YEAR_NO_STOP.search(r.text[:300]))
    if ref_stop + ref_no_stop > 0.5 * n_refs:
        return "apa" if ref_stop >= ref_no_stop else "harvard"
    if ay_comma > ay_plain or (ref_quoted < 0.2 * n_refs and ay_comma >= 0.5 * ay_plain):
        return "apa"
    return "harvard"
