"""Author names as reference lists print them, shared by the entry grammars of every style.

Personal names come as ``Smith, J. A.`` (surname first) or ``J. A. Smith`` (given names first);
group authors (``World Bank``, ``R Core Team``, ``Agency for Healthcare Research and Quality``)
are one name with no initials, and may carry the short form the text cites them by.
"""

from __future__ import annotations

import re

INITIALS = re.compile(r"^(?:[A-Z][a-z]?\.\s?-?)+$|^[A-Z]{1,3}$")
# "Kultusministerkonferenz (KMK)", "World Health Organization [WHO]": a group author with the
# short form the text cites it by.
ABBREVIATED = re.compile(r"^(.*?\S)\s*[\[(]\s*([A-Z][A-Za-z&]{1,11})\s*[\])]$")
# "DLT \u2013 Deutscher Landkreistag": the short form first, then the full name.
ABBREVIATION_FIRST = re.compile(r"^([A-Z][A-Za-z&0-9]{1,11})\s+[\u2013\u2014-]\s+(\S.*)$")
# Lower-case name particles a marker may keep or drop: "van Sebille" is listed as "van Sebille,
# E." (Harvard), "Sebille, E. van" (APA) or "SEBILLE, ERIK VAN" (DIN 1505-2).
PARTICLES = frozenset(
    {"van", "von", "de", "der", "den", "del", "della", "di", "da", "du", "le", "la", "ten", "ter"}
    | {"dos", "das", "des", "zu", "vom", "zum", "zur", "af", "av", "op"}
)
# Lower-case words that occur inside the name of an organisation but not in a personal name list.
_ORG_WORD = re.compile(r"\s(?:of|for|on|the|für)\s")


# "Gurobi Optimization, LLC", "Apple, Inc.": the legal form of a company is part of its name.
_COMPANY_SUFFIX = re.compile(
    r"^(?:LLC|L\.L\.C\.|Inc\.?|Ltd\.?|Limited|GmbH|AG|SE|S\.A\.|SA|plc|PLC|Corp\.?|Co\.?|"
    r"LLP|LP|N\.V\.|B\.V\.|e\.\s?V\.)$",
    re.IGNORECASE,
)


def is_company_suffix(word: str) -> bool:
    """Whether ``word`` is the legal form that ends a company's name ("LLC", "Inc.", "GmbH")."""
    return bool(_COMPANY_SUFFIX.match(word.strip()))


def surname_from_given_first(name: str) -> str:
    """``L. N. Gauthier`` -> ``Gauthier``; ``J.-P. de la Cruz`` -> ``de la Cruz``."""
    words = name.split()
    rest = [w for w in words if not re.match(r"^(?:[A-Z][a-z]?\.-?)+$", w)]
    return " ".join(rest) if rest else name


def group_author(segment: str) -> str | None:
    """The whole segment if it names one organisation rather than a list of people.

    ``World Bank``, ``R Core Team``, ``OECD``, ``Agency for Healthcare Research and Quality``,
    ``Department for Business, Energy and Industrial Strategy``: no initials anywhere, and
    either no separator at all or a lower-case function word inside the first name.
    """
    seg = re.sub(r"\s*\((?:ed|eds|hrsg|hg)\.?\)\s*$", "", segment.strip(), flags=re.IGNORECASE)
    seg = seg.rstrip(" .")
    if not seg or ";" in seg or "/" in seg or re.search(r"(?:^|[\s,])[A-Z][a-z]?\.", seg):
        return None
    if "," in seg and is_company_suffix(seg.rsplit(",", 1)[1]) and seg.count(",") == 1:
        return seg
    first = seg.split(",")[0]
    # "and" alone joins two people ("Smith and Jones"); an organisation has other small words.
    org = _ORG_WORD.search(f" {re.sub(r'\s(?:and|und)\s', ' ', first)} ")
    if "," not in seg and not re.search(r"\s(?:&|and|und)\s", seg):
        return seg
    return seg if org else None


def split_surname_first(segment: str) -> list[str]:
    """Surnames from ``Smith, J. A., Jones, B., & Lee, C.`` or ``Bauer, W.; Ek, J.``."""
    segment = re.sub(r"\s*(?:et al\.?|u\.\s?a\.|and others|\.\.\.)\s*$", "", segment.strip())
    group = group_author(segment)
    if group is not None:
        return [group]
    if ";" in segment:
        parts = [p.strip() for p in segment.split(";")]
        return [p.split(",")[0].strip() for p in parts if p.strip()]
    segment = re.sub(r",?\s+(?:&|and|und)\s+", ", ", segment)
    pieces = [p.strip() for p in segment.split(",") if p.strip()]
    names: list[str] = []
    # Pieces alternate surname, initials: a short capital surname ("UGA, M. L.", "S, S. V., &
    # R, P.") stands where a surname is due, so it is not taken for initials.
    surname_due = True
    for i, p in enumerate(pieces):
        initials = bool(INITIALS.match(p) or re.match(r"^(?:[A-Z]\.\s?)+(?:[A-Z]\.)?$", p))
        # "E. van": initials with the particle APA moves behind them ("Sebille, E. van").
        words = p.split()
        if len(words) > 1 and all(w.lower() in PARTICLES for w in words[1:]):
            initials = initials or bool(re.match(r"^(?:[A-Z][a-z]?\.-?)+$", words[0]))
        dotted_next = i + 1 < len(pieces) and re.match(r"^(?:[A-Z]\.\s?-?)+$", pieces[i + 1])
        if initials and not (surname_due and "." not in p and (not names or dotted_next)):
            surname_due = True
            continue
        surname_due = False
        if re.match(r"^(?:[A-Z][a-z]?\.\s?-?)+\s", p):
            # "J. Smith" (given name first) inside an author-year list
            names.append(surname_from_given_first(p))
            continue
        names.append(p)
    return names


def with_alias(authors: list[str]) -> tuple[list[str], list[str]]:
    """Split a group author's printed short form off its name: (authors, aliases)."""
    aliases: list[str] = []
    if authors:
        short = ABBREVIATED.match(authors[0])
        if short:
            authors[0] = short.group(1)
            aliases.append(short.group(2))
        elif short := ABBREVIATION_FIRST.match(authors[0]):
            authors[0] = short.group(2)
            aliases.append(short.group(1))
    return authors, aliases
