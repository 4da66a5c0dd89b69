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
from itertools import chain, islice

from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

from .references import Reference
from .styles.names import PARTICLES as _PARTICLES
from .styles.names import is_company_suffix
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
_YEAR = re.compile(r"^(\d{4}|n\.d\.|o\.J\.|nodate)([a-z]{0,2})$", re.IGNORECASE)
# "no date" in any of its spellings is one year key: the empty one.
_NO_DATE = frozenset(["n.d.", "o.j.", "nodate"])


def split_year(year: str | None) -> tuple[str, str]:
    """``"2020a"`` -> ``("2020", "a")``; no year, ``n.d.`` and ``o. J.`` -> ``("", "")``.

    citeproc doubles the suffix letter in some styles (DIN 1505-2 prints "2017aa" in the text
    for "2017a" in the list): a doubled letter counts once.
    """
    if not year:
        return "", ""
    y = year.replace(" ", "")
    m = _YEAR.match(y)
    if not m:
        return y, ""
    base, suffix = m.group(1), m.group(2).lower()
    if base.lower() in _NO_DATE:
        base = ""
    if len(suffix) == 2 and suffix[0] == suffix[1]:
        suffix = suffix[0]
    return base, suffix


def strip_particles(folded: str) -> str:
    """``"van der walt"`` -> ``"walt"``; a name of particles alone stays as it is."""
    words = folded.split()
    while len(words) > 1 and words[0] in _PARTICLES:
        words.pop(0)
    return " ".join(words)


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


# A "closest entry" hint is given only when the names are this similar (rapidfuzz ratio, 0-100):
# a far-fetched suggestion is noise, not help.
CLOSEST_CUTOFF = 75.0
# The hint looks at no more than this many entries (those of the cited year, then those whose
# surname starts alike), so its cost per citation is bounded whatever the list's length.
CLOSEST_CANDIDATES = 200


def _edit_blocks(name: str) -> set[str]:
    """Keys under which two surnames one edit apart always meet.

    One insertion, deletion, substitution or swap leaves the first two or the last two letters
    of a name of five letters or more as they were; shorter names share one block of their
    own. Comparing a name only with those sharing a block keeps the search for a misspelt
    surname to a handful of candidates, whatever the length of the list.
    """
    a = _ascii(name)
    if len(a) <= 5:
        return {"#short", "<" + a[:2], ">" + a[-2:]}
    return {"<" + a[:2], ">" + a[-2:]}


class Index:
    """Lookup tables over the reference list.

    Entries are keyed by first-author surname (case-folded; also without its leading
    particles, and by the last word of a multi-word name) and year (``""`` for an entry with
    no year). Every lookup is a dictionary access; the fuzzy searches look only at the entries
    of one year or one surname prefix.
    """

    def __init__(self, refs: list[Reference]) -> None:
        self.refs = refs
        self.by_author_year: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.by_author: dict[str, list[int]] = defaultdict(list)
        self.by_year: dict[str, list[int]] = defaultdict(list)
        self.by_prefix: dict[str, list[int]] = defaultdict(list)
        self.by_number: dict[int, list[int]] = defaultdict(list)
        self.folded: dict[int, str] = {}
        # (year, block) -> entries: the candidates for a surname one edit away (see near()).
        self.by_edit_block: dict[tuple[str, str], list[int]] = defaultdict(list)
        for r in refs:
            if r.number is not None:
                self.by_number[r.number].append(r.index)
            if not r.authors:
                continue
            a = fold(r.authors[0])
            self.folded[r.index] = a
            base, _ = split_year(r.year)
            self.by_year[base].append(r.index)
            self.by_prefix[_ascii(a)[:2]].append(r.index)
            for key in _edit_blocks(a) | _edit_blocks(strip_particles(a)):
                self.by_edit_block[base, key].append(r.index)
            # "van der Berg" is also cited as "Berg"; a group author by its abbreviation
            # ("WHO" for "World Health Organization").
            names = {a, strip_particles(a), a.split()[-1], *(fold(x) for x in r.aliases)}
            # "Uber Technologies, Inc." is cited as "Uber Technologies".
            if "," in a and is_company_suffix(a.rsplit(",", 1)[1]):
                names.add(a.rsplit(",", 1)[0].strip())
            for name in names:
                self.by_author_year[name, base].append(r.index)
                self.by_author[name].append(r.index)

    def lookup(self, author: str) -> list[str]:
        """The keys a cited surname may be listed under: as cited, without particles, and by
        its last word."""
        a = fold(author)
        keys = [a, strip_particles(a)]
        # "Temple Lang" cited, "Lang" read from a given-name-first list ("Duncan Temple Lang").
        keys.append(a.split()[-1] if a.split() else a)
        return list(dict.fromkeys(keys))

    def near(self, author: str, base: str) -> list[int]:
        """Entries of year ``base`` (or of no year) whose first author is a small edit away
        from ``author``."""
        a = fold(author)
        out = []
        years = (base, "") if base else (base,)
        seen: set[int] = set()
        for year in years:
            for key in _edit_blocks(a) | _edit_blocks(strip_particles(a)):
                seen.update(self.by_edit_block.get((year, key), ()))
        for i in sorted(seen):
            other = self.folded[i]
            if close_enough(a, other):
                out.append(i)
                continue
            bare, other_bare = strip_particles(a), strip_particles(other)
            if (bare != a or other_bare != other) and close_enough(bare, other_bare):
                out.append(i)
        return out

    def closest(self, author: str, base: str = "") -> Reference | None:
        """The entry whose first author is most like ``author``, if one is close enough.

        Candidates are the entries whose surname starts with the same two letters, then those
        of the cited year, at most ``CLOSEST_CANDIDATES`` of them: never the whole list.
        """
        a = fold(author)
        seen: dict[int, str] = {}
        pool = chain(self.by_prefix.get(_ascii(a)[:2], ()), self.by_year.get(base, ()))
        for i in islice(pool, CLOSEST_CANDIDATES):
            seen.setdefault(i, self.folded[i])
        if not seen:
            return None
        hit = process.extractOne(a, seen, scorer=fuzz.ratio, score_cutoff=CLOSEST_CUTOFF)
        return self.refs[hit[2]] if hit else None


_INDEX_CACHE: dict[tuple, Index] = {}
_INDEX_CACHE_SIZE = 4


def index_for(references: list[dict] | list[Reference]) -> Index:
    """The :class:`Index` of a reference list, built once per list.

    The pipeline verifies citations in chunks of a few hundred, each with the whole list; the
    index of the list is kept for the next chunk (keyed by the entries' texts and fields), so
    the chunks together cost one index, not one per chunk. Indexes are never changed after
    they are built, so sharing one is safe.
    """
    # An entry's fields are read from its text (and its list number), so those two identify it.
    key = tuple(
        (r.text, r.number) if isinstance(r, Reference) else (r.get("text"), r.get("number"))
        for r in references
    )
    index = _INDEX_CACHE.get(key)
    if index is None:
        refs = [r if isinstance(r, Reference) else Reference.from_dict(r) for r in references]
        index = Index(refs)
        if len(_INDEX_CACHE) >= _INDEX_CACHE_SIZE:
            _INDEX_CACHE.pop(next(iter(_INDEX_CACHE)))
        _INDEX_CACHE[key] = index
    return index


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
    if truncated:
        # A list cut short with "et al." has more authors than it prints, and at least three
        # (two are always both named): a marker naming exactly two is another work.
        return named >= max(count + 1, 3)
    return count == named


def narrow(key: dict, refs: list[Reference], idx: list[int]) -> list[int]:
    """The entries among ``idx`` (same first author and year) whose author lists fit the
    marker's; all of them when none fits, so a marker that misnames its co-authors still reads
    as matching its first author."""
    fitting = [i for i in idx if _fits(key, refs[i])]
    return fitting or idx


def _years(refs: list[Reference], idx: list[int]) -> str:
    ys = sorted({refs[i].year or "n.d." for i in idx})
    return ", ".join(ys)


def _pick(key: dict, refs: list[Reference], idx: list[int], suffix: str) -> list[int]:
    """Among entries of one first author and year, those the marker means: its suffix letter
    first, then the co-authors it names."""
    if suffix:
        exact = [i for i in idx if split_year(refs[i].year)[1] == suffix]
        if not exact:
            return []
        idx = exact
    return narrow(key, refs, idx) if len(idx) > 1 else idx


def _undated(key: dict, refs: list[Reference], idx: list[int], suffix: str) -> list[int]:
    """Entries printed without a year (DIN 1505-2 prints none for many web sources) that a dated
    marker may cite. citeproc gives the works of one author and year their suffix letters in
    list order, so with several such entries the letter picks one by position."""
    idx = narrow(key, refs, idx) if len(idx) > 1 else idx
    if len(idx) > 1 and suffix and len(suffix) == 1:
        pos = ord(suffix) - ord("a")
        if 0 <= pos < len(idx):
            return [idx[pos]]
    return idx


def _undated_verdict(
    key: dict, refs: list[Reference], undated: list[int], suffix: str, author: str
) -> tuple[str, list[int], str]:
    hits = _undated(key, refs, undated, suffix)
    if len(hits) == 1:
        return "verified", hits, f"matches {refs[hits[0]].label()} (the entry gives no year)"
    return (
        "ambiguous",
        hits,
        f"{len(hits)} entries by {author} without a year; the citation cannot tell them apart",
    )


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
    base, suffix = split_year(year)
    names = index.lookup(author)
    cands: list[int] = []
    for a in names:
        cands = index.by_author_year.get((a, base), [])
        if cands:
            break
    if cands:
        if not any(_fits(key, refs[i]) for i in cands):
            # "(Donegan & Morris, 2021)" beside "Donegan (2021)" and "Donegan et al. (2021)":
            # the work it names may be the entry of these authors that prints no year.
            listed = next((index.by_author[a] for a in names if a in index.by_author), [])
            undated = [i for i in listed if not split_year(refs[i].year)[0] and _fits(key, refs[i])]
            if len(undated) == 1 and base:
                return _undated_verdict(key, refs, undated, suffix, author)
        picked = _pick(key, refs, cands, suffix)
        if len(picked) == 1:
            return "verified", picked, f"matches {refs[picked[0]].label()}"
        if len(picked) > 1:
            how = "with the same suffix" if suffix else "without a/b suffixes"
            return (
                "ambiguous",
                picked,
                f"{len(picked)} entries by {author} {year} {how}; the citation cannot tell them apart",
            )
        listed = next((index.by_author[a] for a in names if a in index.by_author), [])
        undated = [i for i in listed if not split_year(refs[i].year)[0]]
        if undated and base:
            # "R Core Team (2023a, 2023bb)" beside one dated and one undated entry: the
            # suffix the dated one lacks belongs to a work whose year the list leaves out.
            return _undated_verdict(key, refs, undated, suffix, author)
        return (
            "year_mismatch",
            [],
            f"no entry by {author} for {year}; listed: {_years(refs, cands)}",
        )
    listed = next((index.by_author[a] for a in names if a in index.by_author), [])
    if listed:
        undated = [i for i in listed if not split_year(refs[i].year)[0]] if base else []
        if undated:
            return _undated_verdict(key, refs, undated, suffix, author)
        # The entries of other years are not what the marker cites, so they stay uncited (the
        # held-out theses' reading: the entry is flagged too, as never cited for its year).
        return (
            "year_mismatch",
            [],
            f"{author} is listed for {_years(refs, listed)}, not {year or 'n.d.'}",
        )
    near = index.near(author, base)
    if near:
        if suffix:
            same = [i for i in near if split_year(refs[i].year)[1] == suffix]
            near = same or near
        first = refs[near[0]]
        return (
            "author_mismatch",
            near,
            f"no entry by {author}; closest: {first.authors[0]} {first.year or 'n.d.'} (surname spelt differently)",
        )
    closest = index.closest(author, base)
    hint = f"; closest: {closest.authors[0]} {closest.year or 'n.d.'}" if closest else ""
    return "missing_reference", [], f"no entry by {author} for {year or 'n.d.'}{hint}"


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
