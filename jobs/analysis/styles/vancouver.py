"""Vancouver (NLM citation-sequence): markers ``(2,3)``, ``(4-6)`` or superscript numbers;
entries ``1. Smith J, Lee B. Title. Venue. 2020;12(3):45-67.`` (surname, then initials without
full stops)."""

from __future__ import annotations

import re

from .base import ANY_YEAR, YEAR, Entry, Style
from .ieee import NUM_LIST

PARENS_NUM = re.compile(rf"\(\s*({NUM_LIST})\s*\)")
# A superscript run that holds only citation numbers: "1", "2,5", "3-6", "1, 4-7".
SUP_NUMBERS = re.compile(rf"^\s*({NUM_LIST})\s*$")


def parse_entry(body: str, label: str = "") -> Entry:
    """Surname-initials authors up to the first full stop, the title up to the next, then the
    venue and the year before ``;``. Reads any entry: it is the grammar of last resort."""
    entry = Entry()
    head, _, rest = body.partition(". ")
    names = [n.strip() for n in head.split(",") if n.strip() and n.strip() != "et al"]
    for n in names:
        words = n.split()
        if len(words) > 1 and re.match(r"^[A-Z]{1,4}$", words[-1]):
            entry.authors.append(" ".join(words[:-1]))
        else:
            entry.authors.append(n)
    title, _, tail = rest.partition(". ")
    entry.title = title.strip() or None
    tail = re.sub(r"^In:\s*", "", tail)
    entry.venue = re.split(r"\.\s|;|\d", tail, maxsplit=1)[0].strip() or None
    m = re.search(rf"(?<![\d/])({YEAR})(?=\s*[;.:]|\s*$)", rest)
    years = [m.group(1)] if m else [y for y, _ in ANY_YEAR.findall(rest)]
    if years:
        entry.year = years[0]
    return entry


STYLE = Style(
    name="vancouver",
    numeric=True,
    description="Vancouver numeric: (2,3) or superscripts; 1. Smith J. Title. Venue. 2020;1:2.",
    parse_entry=parse_entry,
    entry_priority=90,
)
