"""Chicago author-date (17th ed.), pandoc citeproc's default style.

Markers ``(Rodwell 1991, 1992a)``, ``(Bunce et al. 1999, 12)``, narrative ``Rodwell (1992a)``: the
name and year without a comma between them. Entries ``Surname, Given, Given2 Surname2, and
Given3 Surname3. 2020. “Title.” Venue.``: the first author inverted, the others given name
first, the year after the names between full stops; ``———.`` repeats the authors of the entry
before (see ``references``).
"""

from __future__ import annotations

import re

from .base import YEAR, Entry, Style
from .names import PARTICLES, group_author

# "Names. 2020a. Title": the year (or "n.d.", "forthcoming") standing alone between full stops.
_NAMES_YEAR = re.compile(
    rf"^(?P<names>.{{1,400}}?)\.\s+(?P<year>{YEAR}[a-z]?|n\.d\.|forthcoming)\.\s+(?P<rest>.*)$",
    re.S,
)
# The 3-em dash Chicago prints for "the same authors as the entry before".
REPEATED = re.compile(r"^(?:\u2014{2,3}|\u2015{2,3}|-{3,6}|_{3,6})\.?\s*")
_SUFFIX = re.compile(r"^(?:Jr\.?|Sr\.?|II|III|IV)$")


def _given_first(name: str) -> str:
    """``Yihui Xie`` -> ``Xie``; ``Erik van Sebille`` -> ``van Sebille``; ``Martin Luther King
    Jr.`` -> ``King``."""
    words = name.split()
    while len(words) > 1 and _SUFFIX.match(words[-1]):
        words.pop()
    if not words:
        return name
    i = len(words) - 1
    while i > 0 and words[i - 1].lower() in PARTICLES:
        i -= 1
    return " ".join(words[i:])


def split_names(names: str) -> list[str]:
    """Surnames of ``Allaire, JJ, Yihui Xie, and Kevin Ushey`` (first inverted, rest not)."""
    names = re.sub(r",?\s+(?:and\s+)?et\s+al\.?$", "", names.strip())
    group = group_author(names)
    if group is not None:
        return [group]
    pieces = [p.strip() for p in re.split(r",\s+(?:and\s+)?|\s+and\s+", names) if p.strip()]
    if not pieces:
        return []
    out = [pieces[0]]
    # pieces[1] is the first author's given names; the others are "Given Surname".
    out.extend(_given_first(p) for p in pieces[2:])
    return out


def parse_entry(body: str, label: str = "") -> Entry | None:
    """Authors, then the year between full stops; None when the entry lacks that shape."""
    if label:
        return None
    m = _NAMES_YEAR.match(body)
    if not m:
        return None
    names = m.group("names")
    if re.search(r"[\"\u201c\u201d()]|\d", names) and not REPEATED.match(names):
        return None
    year = m.group("year")
    entry = Entry(year=None if year == "forthcoming" else year)
    entry.authors = [] if REPEATED.match(names) else split_names(names)
    rest = m.group("rest").strip()
    quoted = re.match(r"[\"\u201c](.+?)[,.]?[\"\u201d]", rest)
    if quoted:
        entry.title = quoted.group(1).strip()
        tail = rest[quoted.end() :].strip()
    else:
        title, _, tail = rest.partition(". ")
        entry.title = title.strip() or None
    tail = re.sub(r"^In\s+", "", tail)
    entry.venue = re.split(r"[,.(]|\s\d", tail, maxsplit=1)[0].strip() or None
    return entry


STYLE = Style(
    name="chicago",
    numeric=False,
    description="Chicago author-date: (Smith and Lee 2020); Smith, John, and Bo Lee. 2020. Title.",
    parse_entry=parse_entry,
    # Before APA's grammar, which would take a parenthesised number such as "(1702)" for the
    # year, and IEEE's, which takes any entry quoting its title; a Chicago entry's names hold
    # no digit or parenthesis, so an APA or DIN entry never has this shape.
    entry_priority=8,
)
