"""Find the reference list and parse each entry into authors, year, title, venue and DOI.

The list starts after the last heading called "References", "Bibliography", "Literaturverzeichnis"
and the like (the table of contents names it too, earlier) and runs until the next heading or an
appendix. Each entry is read by the grammars of the styles (``styles``), by shape, not by its
wording: author-year entries put the year in parentheses after the names, IEEE entries open with
``[n]`` and quote the title, Vancouver entries open with ``n.`` and put the initials after the
surname.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .blocks import Block
from .styles import apa, chicago, german, parse_entry
from .styles.base import ANY_YEAR as _ANY_YEAR

_HEADING = re.compile(
    r"^(?:(?:\d+(?:\.\d+)*|[IVXLC]+|[A-Z])[.)]?\s+)?"
    r"(references|reference list|bibliography|works cited|literature cited|cited literature|"
    r"literature|sources|list of references|literaturverzeichnis|literatur|quellenverzeichnis|"
    r"quellen|bibliografie|bibliographie|références|referencias)\s*:?$",
    re.IGNORECASE,
)
_END = re.compile(
    r"^(?:(?:\d+(?:\.\d+)*|[IVXLC]+|[A-Z])[.)]?\s+)?(appendix|appendices|anhang|annex|"
    r"eidesstattliche|declaration|erklärung|acknowledg|danksagung|index)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"^\s*(?:\[(\d{1,4})\]|(\d{1,4})\.(?=\s)|\((\d{1,4})\))\s*")
_DOI = re.compile(
    r"(?:https?://(?:dx\.)?doi\.org/|\bdoi:\s*|\bDOI:?\s+|\bdoi\.org/)(\S+)",
    re.IGNORECASE,
)
_BARE_DOI = re.compile(r"(?<![\w/])(10\.\S+/\S*)")
# Crossref's recommended pattern for modern DOIs.
DOI_VALID = re.compile(r"^10\.\d{4,9}/[-._;()/:A-Za-z0-9]+$")
_PAREN_YEAR = apa.PAREN_YEAR
# The start of an author-year entry: optional lower-case particles, then a capital.
_ENTRY_HEAD = re.compile(r"^(?:[a-z]{1,4}\s+){0,3}[^\W\d_a-z]")


@dataclass
class Reference:
    """One entry of the reference list."""

    index: int
    text: str
    paragraph: int
    number: int | None = None
    authors: list[str] = field(default_factory=list)
    year: str | None = None
    title: str | None = None
    venue: str | None = None
    doi: str | None = None
    doi_valid: bool = False
    # Other names the text cites the first author by (a group author's abbreviation).
    aliases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Reference:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def first_author(self) -> str:
        return self.authors[0] if self.authors else ""

    def label(self) -> str:
        """A short human label: ``Smith 2020`` or ``[12] Smith``."""
        who = self.first_author or self.text[:30]
        if len(self.authors) == 2:
            who = f"{self.authors[0]} & {self.authors[1]}"
        elif len(self.authors) > 2:
            who = f"{self.authors[0]} et al."
        parts = [f"[{self.number}]"] if self.number is not None else []
        parts.append(who)
        if self.year:
            parts.append(self.year)
        return " ".join(parts)


def find_section(blocks: list[Block]) -> tuple[int, int] | None:
    """Block index range ``[start, end)`` of the reference entries, or None.

    The last heading named like a reference list whose following blocks read like entries; the
    table of contents names the list too, but is followed by more headings, not entries.
    """
    for b in reversed(blocks):
        if len(b.text) >= 60 or not _HEADING.match(b.text):
            continue
        start = b.index + 1
        end = len(blocks)
        for nxt in blocks[start:]:
            # Notes printed after the list (pandoc's footnote section) are not entries.
            if nxt.is_heading or nxt.note or (len(nxt.text) < 60 and _END.match(nxt.text)):
                end = nxt.index
                break
        sample = blocks[start : min(end, start + 12)]
        if sample and sum(_looks_like_entry(x.text) for x in sample) >= 0.5 * len(sample):
            return start, end
    return None


def extract_doi(text: str) -> str | None:
    """The DOI printed in an entry, as written (so a malformed one can be reported)."""
    m = _DOI.search(text)
    if m:
        doi = m.group(1)
    else:
        m = _BARE_DOI.search(text)
        if not m:
            return None
        doi = m.group(1)
    # "DOI: https://doi.org/10..." names the resolver twice; the DOI is what follows it.
    doi = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", doi, flags=re.IGNORECASE)
    doi = doi.rstrip(".,;")
    # A closing parenthesis belongs to the DOI only if it opened one.
    while doi.endswith(")") and doi.count("(") < doi.count(")"):
        doi = doi[:-1]
    return doi or None


def doi_is_valid(doi: str | None) -> bool:
    return bool(doi) and bool(DOI_VALID.match(doi))


def parse_reference(index: int, block: Block, numbered: bool) -> Reference:
    """Parse one entry. ``numbered`` says whether the document uses a numeric style."""
    text = block.text
    ref = Reference(index=index, text=text, paragraph=block.index)
    body = text
    m = _NUMBER.match(text)
    if m:
        ref.number = int(next(g for g in m.groups() if g))
        body = text[m.end() :]
    elif numbered and block.number is not None:
        ref.number = block.number
    ref.doi = extract_doi(text)
    ref.doi_valid = doi_is_valid(ref.doi)
    label = text[: m.end()].strip() if m else ("[" if text.lstrip().startswith("[") else "")
    entry = parse_entry(body, label)
    ref.authors, ref.year, ref.title = entry.authors, entry.year, entry.title
    ref.venue, ref.aliases = entry.venue, entry.aliases
    return ref


def _looks_like_entry(text: str) -> bool:
    if len(text) >= 25 and (
        _NUMBER.match(text) or _PAREN_YEAR.search(text[:400]) or _ANY_YEAR.search(text)
    ):
        return True
    # A short entry without a year ("LIU, X. ; CHOW, E.: StokesDT.", "R CORE TEAM: Tcl/tk
    # interface."): DIN 1505-2 prints no date for many software and web sources.
    return len(text) >= 12 and german.parse_entry(text) is not None


def _starts_entry(line: str) -> bool:
    """Whether a line reads like the first line of an entry (not the continuation of one)."""
    if _NUMBER.match(line):
        return True
    return bool(_ENTRY_HEAD.match(line)) and bool(_PAREN_YEAR.search(line[:250]))


def _entries_of(block: Block) -> list[Block]:
    """The entries of one block: usually the block itself.

    A list typed one entry per line into a single paragraph (Markdown without blank lines,
    entries separated by line breaks in Word or HTML) is cut at the lines that start an entry;
    lines that do not (a hard-wrapped entry's continuation) stay with the entry before them.
    """
    if not block.breaks:
        return [block]
    lines = [ln for ln in block.lines() if ln]
    starts = [_starts_entry(ln) for ln in lines]
    if len(lines) < 2 or not starts[0] or sum(starts) < 2:
        return [block]
    entries: list[list[str]] = []
    for ln, is_start in zip(lines, starts, strict=True):
        if is_start:
            entries.append([ln])
        else:
            entries[-1].append(ln)
    # An ordinal of the enclosing list item numbers the block, not each entry in it.
    return [Block(block.index, block.tag, " ".join(e)) for e in entries]


def parse_references(
    blocks: list[Block], numbered: bool
) -> tuple[list[Reference], tuple[int, int] | None]:
    """The reference entries of the document, in list order, and the block range they span."""
    section = find_section(blocks)
    if section is None:
        return [], None
    start, end = section
    refs: list[Reference] = []
    for b in blocks[start:end]:
        if not _looks_like_entry(b.text) and len(b.text) < 40:
            continue  # stray furniture such as a lone page label
        for entry in _entries_of(b):
            ref = parse_reference(len(refs), entry, numbered)
            if refs and not ref.authors and chicago.REPEATED.match(_NUMBER.sub("", entry.text)):
                # "———. 2017b. Title.": the same authors as the entry before (Chicago, MLA).
                ref.authors = list(refs[-1].authors)
                ref.aliases = list(refs[-1].aliases)
            refs.append(ref)
    cut = _notes_after(refs)
    if cut is not None:
        refs = refs[:cut]
        section = (start, refs[-1].paragraph + 1 if refs else start)
    return refs, section


def _notes_after(refs: list[Reference]) -> int | None:
    """Where notes printed after the list begin, if they do: pandoc's plain text puts the
    footnotes ("[1] https://...") right after the last entry, with no heading between.

    In a numbered list the numbering starting again at 1 ends the list; in an author-date
    list, a trailing run of numbered items does.
    """
    printed = [r for r in refs if _NUMBER.match(r.text)]
    if len(printed) > len(refs) / 2:
        for i in range(1, len(refs)):
            prev, cur = refs[i - 1].number, refs[i].number
            if cur == 1 and prev is not None and prev >= 2 and _NUMBER.match(refs[i].text):
                return i
        return None
    i = len(refs)
    while i > 0 and _NUMBER.match(refs[i - 1].text):
        i -= 1
    return i if 0 < i < len(refs) else None


def add_abbreviations(refs: list[Reference], body_text: str) -> None:
    """Record the short forms a text defines for group authors: ``Name [ABBR]``/``Name (ABBR)``.

    APA introduces a group author's abbreviation at its first citation, ``(World Health
    Organization [WHO], 2019)``, and cites ``(WHO, 2019)`` afterwards while the list keeps the
    full name; the abbreviation becomes an alias of that entry's first author.
    """
    for r in refs:
        if not r.authors or " " not in r.authors[0]:
            continue
        pattern = re.escape(r.authors[0]).replace(r"\ ", r"\s+")
        for m in re.finditer(rf"{pattern}\s*[\[(]\s*([A-Z][A-Za-z&]{{1,11}})\s*[\])]", body_text):
            if m.group(1) not in r.aliases:
                r.aliases.append(m.group(1))
