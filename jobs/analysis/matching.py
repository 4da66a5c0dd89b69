"""Match citation keys to reference entries and give each citation its verdict.

Every lookup goes through dictionaries built once per call (surname + year, surname, year,
number), so a thesis with n citations and m entries costs O(n + m); the fuzzy surname search
only scans the entries of the cited year. Verdicts follow DESIGN.md: ``verified`` (exactly one
entry), ``missing_reference``, ``year_mismatch`` (the author is listed, with other years),
``author_mismatch`` (the year is listed under a surname a small edit away), ``ambiguous`` (several
entries fit and neither an a/b suffix nor the co-authors the marker names tell them apart); a
marker gets the worst verdict of its keys.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict

from rapidfuzz import process
from rapidfuzz.distance import OSA

from .references import Reference
from .text import fold

VERDICTS = ("verified", "missing_reference", "year_mismatch", "author_mismatch", "ambiguous")
# Worst first.
SEVERITY = {
    "missing_reference": 4,
    "ambiguous": 3,
    "year_mismatch": 2,
    "author_mismatch": 1,
    "verified": 0,
}
_YEAR = re.compile(r"^(\d{4}|n\.d\.|o\.J\.)([a-z]?)$")


def split_year(year: str | None) -> tuple[str, str]:
    """``"2020a"`` -> ``("2020", "a")``."""
    if not year:
        return "", ""
    y = year.replace(" ", "")
    m = _YEAR.match(y)
    return (m.group(1), m.group(2)) if m else (y, "")


def _ascii(s: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))


def close_enough(a: str, b: str) -> bool:
    """Whether two surnames differ by a small edit (a typo, a dropped accent)."""
    if a == b:
        return True
    if _ascii(a) == _ascii(b):
        return True
    # One typo: an insertion, deletion, substitution or swap of neighbours.
    return OSA.distance(a, b, score_cutoff=1) <= 1


class Index:
    """Lookup tables over the reference list."""

    def __init__(self, refs: list[Reference]) -> None:
        self.refs = refs
        self.by_author_year: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.by_author: dict[str, list[int]] = defaultdict(list)
        self.by_year: dict[str, list[int]] = defaultdict(list)
        self.by_number: dict[int, list[int]] = defaultdict(list)
        self.surnames: dict[str, str] = {}
        self.folded: dict[int, str] = {}
        self._choices: list[str] | None = None
        for r in refs:
            if r.number is not None:
                self.by_number[r.number].append(r.index)
            if not r.authors:
                continue
            a = fold(r.authors[0])
            self.folded[r.index] = a
            base, _ = split_year(r.year)
            self.by_author_year[a, base].append(r.index)
            self.by_author[a].append(r.index)
            self.by_year[base].append(r.index)
            self.surnames.setdefault(a, r.authors[0])
            # "van der Berg" is also cited as "Berg" by some authors.
            last = a.split()[-1]
            if last != a:
                self.by_author_year[last, base].append(r.index)
                self.by_author[last].append(r.index)
            # A group author's abbreviation ("WHO" for "World Health Organization").
            for alias in {fold(x) for x in r.aliases} - {a, last}:
                self.by_author_year[alias, base].append(r.index)
                self.by_author[alias].append(r.index)

    def closest(self, author: str) -> Reference | None:
        if not self.surnames:
            return None
        if self._choices is None:
            self._choices = list(self.surnames)
        hit = process.extractOne(fold(author), self._choices)
        if not hit:
            return None
        return self.refs[self.by_author[hit[0]][0]]


_TRUNCATED = re.compile(r"\b(?:et\s+al\.?|u\.\s?a\.|and others)", re.IGNORECASE)


def _author_count(ref: Reference) -> tuple[int, bool]:
    """(authors listed, whether the list is cut short with "et al." / "u. a.")."""
    head = ref.text
    if ref.year:
        cut = head.find(split_year(ref.year)[0])
        head = head[:cut] if cut > 0 else head[:200]
    return len(ref.authors), bool(_TRUNCATED.search(head))


def _fits(key: dict, ref: Reference) -> bool:
    """Whether what a marker says of the other authors fits this entry's author list.

    "Smith & Lee" names a second author and no more; "Smith et al." means three or more (two
    authors are always both named); a bare "Smith" means Smith alone.
    """
    count, truncated = _author_count(ref)
    others = key.get("_with") or []
    etal = bool(key.get("_etal"))
    for position, name in enumerate(others, start=1):
        if position >= len(ref.authors):
            if not truncated:
                return False
            continue
        if not close_enough(fold(name), fold(ref.authors[position])):
            return False
    named = 1 + len(others)
    if etal:
        return truncated or count > max(named, 2)
    return count == named or (truncated and count <= named)


def narrow(key: dict, refs: list[Reference], idx: list[int]) -> list[int]:
    """The entries among ``idx`` (same first author and year) whose author lists fit the
    marker's; all of them when none fits, so a marker that misnames its co-authors still reads
    as matching its first author."""
    fitting = [i for i in idx if _fits(key, refs[i])]
    return fitting or idx


def _years(refs: list[Reference], idx: list[int]) -> str:
    ys = sorted({refs[i].year or "n.d." for i in idx})
    return ", ".join(ys)


def judge_key(key: dict, index: Index) -> tuple[str, list[int], str]:
    """(verdict, matched entry indices, reason) for one key of a citation."""
    refs = index.refs
    if "number" in key:
        n = key["number"]
        hits = index.by_number.get(n, [])
        if len(hits) == 1:
            return "verified", hits, f"entry [{n}]"
        if hits:
            return "ambiguous", hits, f"{len(hits)} entries are numbered [{n}]"
        return "missing_reference", [], f"no entry numbered [{n}]"
    author, year = key.get("author", ""), key.get("year", "")
    a = fold(author)
    base, suffix = split_year(year)
    cands = index.by_author_year.get((a, base), [])
    if cands:
        if suffix:
            exact = [i for i in cands if split_year(refs[i].year)[1] == suffix]
            if len(exact) > 1:
                exact = narrow(key, refs, exact)
            if len(exact) == 1:
                return "verified", exact, f"matches {refs[exact[0]].label()}"
            if len(exact) > 1:
                return (
                    "ambiguous",
                    exact,
                    f"{len(exact)} entries by {author} {year}; give them distinct a/b suffixes",
                )
            return (
                "year_mismatch",
                [],
                f"no entry by {author} for {year}; listed: {_years(refs, cands)}",
            )
        if len(cands) > 1:
            cands = narrow(key, refs, cands)
        if len(cands) == 1:
            return "verified", cands, f"matches {refs[cands[0]].label()}"
        return (
            "ambiguous",
            cands,
            f"{len(cands)} entries by {author} {year} without a/b suffixes; the citation cannot tell them apart",
        )
    listed = index.by_author.get(a)
    if listed:
        # The entries of other years are not what the marker cites, so they stay uncited.
        return (
            "year_mismatch",
            [],
            f"{author} is listed for {_years(refs, listed)}, not {year}",
        )
    near = [i for i in index.by_year.get(base, []) if close_enough(a, index.folded[i])]
    if near:
        if suffix:
            same = [i for i in near if split_year(refs[i].year)[1] == suffix]
            near = same or near
        first = refs[near[0]]
        return (
            "author_mismatch",
            near,
            f"no entry by {author}; closest: {first.authors[0]} {first.year} (surname spelt differently)",
        )
    closest = index.closest(author)
    hint = f"; closest: {closest.authors[0]} {closest.year or 'n.d.'}" if closest else ""
    return "missing_reference", [], f"no entry by {author} for {year}{hint}"


def judge(citation: dict, index: Index) -> dict:
    """The verdict of one citation (worst of its keys), with reason and matched entries."""
    worst = "verified"
    matched: list[int] = []
    reasons: list[str] = []
    for key in citation.get("keys", []):
        verdict, hits, reason = judge_key(key, index)
        if SEVERITY[verdict] > SEVERITY[worst]:
            worst = verdict
        for h in hits:
            if h not in matched:
                matched.append(h)
        if verdict != "verified" or len(citation["keys"]) == 1:
            reasons.append(reason)
    if not citation.get("keys"):
        worst = "missing_reference"
        reasons.append("no readable key")
    out = dict(citation)
    out["verdict"] = worst
    out["references"] = matched
    out["reason"] = "; ".join(reasons) if reasons else "all keys match an entry"
    return out
