"""IEEE: markers ``[3]``, ``[2]-[5]``, ``[10, p. 5]``; entries ``[n] A. Author and B. Author,
"Title," Venue, year.`` (given names first, the title in quotes)."""

from __future__ import annotations

import re

from .base import ANY_YEAR, Entry, Style
from .names import surname_from_given_first

NUM_LIST = (
    r"\d{1,4}(?:\s*[\u2013\-\u2014]\s*\d{1,4})?"
    r"(?:\s*[,;]\s*\d{1,4}(?:\s*[\u2013\-\u2014]\s*\d{1,4})?)*"
)
# IEEE puts a pinpoint after the number: "[10, p. 5]", "[7, Ch. 4]", "[3, Eq. (2)]".
PINPOINT = (
    r"\s*,\s*(?i:pp?|ch|chap|sec|secs|fig|figs|eq|eqs|thm|tab|table|app|appx|para|l|ll|s|kap|abschn)"
    r"\.?\s*\(?[\w.]+\)?(?:\s*[\u2013\-]\s*[\w.]+)?"
)
# "[2]\u2013[5]" is IEEE's range across brackets: one marker citing 2, 3, 4 and 5.
BRACKETS = re.compile(
    rf"\[\s*({NUM_LIST})(?:{PINPOINT})?\s*\](?:\s*[\u2013\-\u2014]\s*\[\s*(\d{{1,4}})\s*\])?"
)


def parse_entry(body: str, label: str = "") -> Entry | None:
    """Given-name-first authors, a quoted title, the venue after it, the last year printed.
    None unless the entry is numbered in brackets or quotes a title early on."""
    if not label.startswith("[") and not re.search(r"[\"\u201c]", body[:300]):
        return None
    entry = Entry()
    q = re.search(r"[\"\u201c](.+?)[,.]?[\"\u201d]", body)
    head = body[: q.start()] if q else body.split(",", 1)[0]
    head = head.strip().rstrip(",")
    head = re.sub(r"\s*et al\.?$", "", head)
    names = re.split(r",\s*(?:and\s+)?|\s+and\s+", head)
    entry.authors = [surname_from_given_first(n.strip()) for n in names if n.strip()]
    if q:
        entry.title = q.group(1).strip()
        tail = body[q.end() :].lstrip(", ")
        tail = re.sub(r"^in\s+", "", tail)
        entry.venue = re.split(r",", tail, maxsplit=1)[0].strip() or None
    years = ANY_YEAR.findall(body)
    if years:
        entry.year = years[-1][0]
    return entry


STYLE = Style(
    name="ieee",
    numeric=True,
    description='IEEE numeric: [3], [2]-[5]; [3] A. Smith, "Title," Venue, 2020.',
    parse_entry=parse_entry,
    entry_priority=20,
)
