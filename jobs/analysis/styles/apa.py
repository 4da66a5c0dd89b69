"""APA 7: ``(Smith & Lee, 2020)``, ``Smith et al. (2020)``; entries ``Smith, J., & Lee, B. (2020).
Title. Venue.``: the year in parentheses after the names, then a full stop.

Harvard (Cite Them Right) shares the entry grammar (see ``harvard.py``); the two differ in
punctuation only, and no verdict depends on telling them apart.
"""

from __future__ import annotations

import re

from .base import YEAR, Entry, Style
from .names import split_surname_first, with_alias

PAREN_YEAR = re.compile(
    rf"\(\s*({YEAR}[a-z]?|n\.\s?d\.|o\.\s?J\.|in press|im Druck)\s*\)", re.IGNORECASE
)
_QUOTED = re.compile(r"[\"\u201c\u2018'](.+?)[,.]?[\"\u201d\u2019'](?=[\s,.]|$)")
# "(2020):" in an entry: the German author-year habit of a colon after the year.
COLON_YEAR = re.compile(rf"\({YEAR}[a-z]?\):")
# "(2020). Title": APA's full stop after the year; Harvard (Cite Them Right) has none.
YEAR_THEN_STOP = re.compile(rf"\((?:{YEAR}[a-z]?|n\.\s?d\.)\)\.")
YEAR_NO_STOP = re.compile(rf"\((?:{YEAR}[a-z]?|no date)\)\s+[^\s.]")
# "(2020) 'Title'": Harvard's quoted article title right after the year.
QUOTED_AFTER_YEAR = re.compile(rf"\({YEAR}[a-z]?\)\s+['\u2018]")


def parse_entry(body: str, label: str = "") -> Entry | None:
    """Names, ``(year)``, title, venue; None when no parenthesised year follows the names."""
    m = PAREN_YEAR.search(body)
    if not m or m.start() > 400:
        return None
    entry = Entry(year=m.group(1).replace(" ", ""))
    entry.authors, entry.aliases = with_alias(split_surname_first(body[: m.start()]))
    rest = body[m.end() :].lstrip(".: ")
    q = _QUOTED.match(rest)
    if q:
        entry.title = q.group(1).strip()
        tail = rest[q.end() :].lstrip(",. ")
    else:
        cut = re.search(r"(?<=[^\s.][^\s.])[.?!](?:\s|$)", rest)
        entry.title = (rest[: cut.start() + 1] if cut else rest).strip().rstrip(".")
        tail = rest[cut.end() :] if cut else ""
    tail = re.sub(r"^(?:In:?\s+)", "", tail.strip())
    entry.venue = re.split(r",|\.\s|\(|\d", tail, maxsplit=1)[0].strip() or None
    return entry


STYLE = Style(
    name="apa",
    numeric=False,
    description="APA 7 author-date: (Smith & Lee, 2020); Smith, J. (2020). Title.",
    parse_entry=parse_entry,
    entry_priority=10,
)
