"""German author-date forms.

Two kinds are read. DIN 1505-2 (the CSL style ``din-1505-2``): markers ``(Müller, 2019)``,
``Müller u. a. (2019)``, ``(BSBI, 2017aa)``; entries ``MÜLLER, HANS ; WEBER, ANNA ; u. a.: Titel.
In: Zeitschrift Bd. 15 (2020), Nr. 11, S. 1-9`` or ``...: Titel. Ort : Verlag, 2019 — ISBN ...``:
authors in small caps joined by `` ; ``, a colon before the title, the year late in the entry
(in parentheses after the journal, or after the publisher) and often no year at all for web
sources. The German author-year habit of reference managers (Citavi): markers
``(Müller 2019, S. 12)``, ``(vgl. Müller/Weber 2020)``; entries ``Bauer, Wolfgang; Ek, Jing
(2023): Titel. In: ...`` (read by APA's grammar: the year in parentheses after the names).
"""

from __future__ import annotations

import re

from .base import YEAR, Entry, Style
from .names import is_company_suffix

# Words and locators only German texts use: "u. a. 2019", "(vgl. ...", ", S. 12".
MARKER_CUES = re.compile(r"\bu\.\s?a\.\s+(?:\(?\d{4})|\(vgl\.|\bvgl\.\s|,\s+S\.\s+\d")
# A DIN 1505-2 entry head: the authors, then ": " and the title.
_HEAD = re.compile(r"^(.{2,400}?):\s")
_EDITOR = re.compile(r"\s*\((?:hrsg|hg|ed|eds)\.?\)\s*$", re.IGNORECASE)
_TRUNCATED = re.compile(r"^(?:u\.\s?a\.|et\s+al\.?|and others)$", re.IGNORECASE)
_TRUNCATED_TAIL = re.compile(r"\s+(?:u\.\s?a\.|et\s+al\.?)$", re.IGNORECASE)
# What follows the year and is not it: addresses and identifiers.
_NOISE = re.compile(
    r"https?://\S+|\bdoi:?\s*\S+|\b10\.\d{4,9}/\S+|\s[\u2014\u2013-]\s*ISBN.*$|\bISBN\s[\d\-X ]+|"
    r"\bISSN\s[\d\-X]+",
    re.IGNORECASE,
)
_PAREN_YEAR = re.compile(rf"\(\s*((?:{YEAR})[a-z]{{0,2}}|o\.\s?J\.)\s*\)")
# "Cambridge University Press, 1991", "systems, 2015": the year closing a segment.
_LATE_YEAR = re.compile(rf"[,.:]\s+((?:{YEAR})[a-z]{{0,2}}|o\.\s?J\.)(?=\s*(?:[,.;]|$))")
# Vancouver's "Smith J, Lee B. Title: ..." must not read as a DIN head.
_VANCOUVER_NAME = re.compile(r"\s[A-Z]{1,3}$")


def _person_or_group(part: str) -> str | None:
    """The surname of ``SURNAME, Given`` or the whole of a group name; None if neither."""
    part = _EDITOR.sub("", part).strip()
    if not part or len(part) > 90 or re.search(r"\d|[\"\u201c\u201d()\[\]]", part):
        return None
    if "," not in part:
        # A group author ("R Core Team", "APPLE INC", "CHOLLET ET AL."): no sentence inside.
        if re.search(r"[^\W\d_]{2,}\.\s+\S", part):
            return None
        return _TRUNCATED_TAIL.sub("", part)
    surname, given = (p.strip() for p in part.split(",", 1))
    if is_company_suffix(given):
        return part
    if not surname or not given or "," in given or len(given.split()) > 5:
        return None
    if _VANCOUVER_NAME.search(surname) and ". " in given:
        return None
    return surname


def parse_entry(body: str, label: str = "") -> Entry | None:
    """Authors joined by " ; " before a colon, the year late in the entry; None otherwise."""
    if label:
        return None  # DIN 1505-2's author-date lists are not numbered
    m = _HEAD.match(body)
    if not m:
        return None
    head = m.group(1)
    if re.search(rf"{YEAR}|[\"\u201c\u201d\u2018]", head):
        return None
    authors = []
    for part in re.split(r"\s;\s", head):
        if _TRUNCATED.match(part.strip()):
            continue
        name = _person_or_group(part)
        if name is None:
            return None
        authors.append(name)
    if not authors:
        return None
    rest = body[m.end() :]
    title, _, tail = rest.partition(". ")
    entry = Entry(authors=authors, title=title.strip().rstrip(".") or None)
    venue = re.match(r"In:\s*([^,(]+?)(?:\s+Bd\.|\s*[,(]|$)", tail.strip())
    entry.venue = venue.group(1).strip() if venue else None
    clean = _NOISE.sub(" ", rest)
    year = _PAREN_YEAR.search(clean) or None
    if year is None:
        late = list(_LATE_YEAR.finditer(clean))
        year = late[-1] if late else None
    if year is not None:
        entry.year = year.group(1).replace(" ", "")
    return entry


STYLE = Style(
    name="german",
    numeric=False,
    description="German author-date: DIN 1505-2 (MÜLLER, HANS ; WEBER, ANNA: Titel ... 2019) "
    "and (Müller 2019, S. 12); Müller, Hans (2019): Titel.",
    parse_entry=parse_entry,
    # Before APA's grammar: a DIN journal entry has "(2020)" after the journal, which APA's
    # grammar would take for the year after the names.
    entry_priority=5,
)
