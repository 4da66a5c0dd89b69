"""Find in-text citation markers and read their keys.

Author-year markers (APA, Harvard, German) are found from their years: a parenthesis holding a
year preceded by a chain of capitalised surnames (``Smith & Lee, 2020``, ``Hart, Hammond and
Friedman 2009``, ``Vetter u. a. 2020``, ``Klieme/Walters 2016``), or, for narrative citations, a
parenthesis holding only a year right after such a chain (``Smith et al. (2020)``). Prose in front
of the names (``see``, ``vgl.``, ``for a review, see``) stays in the marker text but not in the
key. ``ebd.``/``ibid.`` repeats the previous citation. Numeric markers are ``[3]``, ``[2-5]``
(IEEE) and ``(2,3)`` (Vancouver); ranges list every number.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from rapidfuzz.distance import OSA

from .blocks import Block
from .references import Reference
from .styles import NUMERIC, STYLES, detect_style
from .styles.base import NAME as _NAME
from .styles.base import YEAR
from .styles.ieee import BRACKETS as _BRACKETS
from .styles.names import is_company_suffix
from .styles.vancouver import PARENS_NUM as _PARENS_NUM
from .styles.vancouver import SUP_NUMBERS as _SUP_NUMBERS
from .text import fold

__all__ = [
    "NUMERIC",
    "STYLES",
    "Citation",
    "author_year_citations",
    "body_blocks",
    "detect_style",
    "language_hint",
    "numeric_citations",
    "parse_citations",
    "resolvable",
]
# Words joining the names of one work's authors.
_CONN = r"(?:\s*,\s*(?:&|and|und)\s+|\s+(?:&|and|und)\s+|\s*/\s*|\s*,\s*)"
# "et al." (possessive "et al.'s" included), German "u. a.".
# APA 7 may name several authors before it ("Huppmann, Rogelj, Kriegler, Krey, et al., 2018").
_ETAL = r"(?:\s*,?\s+(?:et\s+al\.?(?:['\u2019]s)?|u\.\s?a\.|et\s+al\.,?))"
# Initials in front of a surname: APA disambiguates same-surname authors so ("E. A. Abozinadah").
_INITIALS = r"[A-Z]\.(?:\s?-?[A-Z]\.)*\s"
_INITIALS_BEFORE = rf"(?:{_INITIALS})?"
# A name of the chain, taken whole: what follows a name is a connector, "et al.", a comma, a
# space or the end, none of which can follow a name cut short inside its word, so giving back
# letters can never lead to a match (possessive: the search does not try it).
assert _NAME.endswith(")*")
_WHOLE_NAME = f"{_NAME}+"
# The author chain that ends a window (``$``). The search tries each start in turn; a chain
# without initials starting inside a word would also match from that word's first letter,
# found earlier, so only starts after a non-letter are tried (the lookbehind). Both cuts leave
# every match as it was and make the search ~9x faster (the parse's costliest search).
_CHAIN = re.compile(
    rf"((?:{_INITIALS}|(?<![^\W\d_])){_WHOLE_NAME}(?:{_CONN}{_INITIALS_BEFORE}{_WHOLE_NAME})*)"
    rf"({_ETAL})?\s*,?\s*$"
)
# The year of a marker with its suffix: "2020a", and citeproc's doubled "2020aa" (DIN 1505-2).
# A republished work gives the original year first: "(Ward, 2014/2022)" cites the 2022 edition.
_YEAR_TOKEN = re.compile(
    rf"(?<![\w/.\-\u2013])(?:{YEAR}/(?={YEAR}))?"
    rf"({YEAR}|n\.\s?d\.|o\.\s?J\.|no\s+date)([a-z]{{1,2}})?(?![\w])"
)
_LOCATOR_BEFORE = re.compile(r"(?:\b(?:p|pp|S|s|Rn|para|ch|Kap|vol|Bd|no|Nr)\.?\s*)$")
_NARRATIVE_CONTENT = re.compile(
    rf"^\s*(?:(?:{YEAR}/)?{YEAR}[a-z]{{0,2}}|n\.\s?d\.|o\.\s?J\.|no\s+date)"
    rf"(?:\s*,\s*(?:{YEAR}[a-z]{{0,2}}))*"
    r"(?:\s*,\s*(?:p|pp|S|s)\.\s*[\dIVXivx]+(?:\s*[\u2013\-]\s*\d+)?(?:\s*f{1,2}\.)?"
    # Harvard's colon locator: "Helfat et al. (2007: 4)".
    r"|\s*:\s*\d+(?:\s*[\u2013\-]\s*\d+)?)?\s*$"
)
# "ebd." may carry the same lead-in as any other marker: "(vgl. ebd., S. 41)",
# "(dazu ausführlich ebd.)".
_IBID = re.compile(
    r"^\s*(?:[^\W\d_]+\.?,?\s+){0,3}(?:ebd\.|ebenda|ibid\.?|ibidem)(?![^\W\d_])", re.IGNORECASE
)
# The phrase of a secondary citation: the work before it was read in the work after it.
_SECONDARY = re.compile(
    r"\b(?:as\s+)?(?:cited|quoted)\s+(?:in|by)\b|\bzit(?:\.|iert)\s*(?:n\.|nach\b)"
    r"|\bcit\.\s+in\b",
    re.IGNORECASE,
)
# A narrative secondary citation's parenthesis: "Brown (2019, as cited in Green, 2021)".
_NARRATIVE_SECONDARY = re.compile(
    rf"^\s*(?:{YEAR}[a-z]?|n\.\s?d\.|o\.\s?J\.)\s*,?\s*(?:{_SECONDARY.pattern})", re.IGNORECASE
)
# A group author's abbreviation introduced in the marker: "(World Health Organization [WHO], 2019)".
_ABBR_TAIL = re.compile(r"\s*\[[^\[\]]{1,15}\](\s*,?\s*)$")
# Names of laws and agreements read like a surname before a year ("the Localism Act (2011)");
# unless the reference list has such an author, they are not citations.
_DOCUMENT_NOUNS = frozenset(
    [
        "act",
        "accord",
        "agreement",
        "amendment",
        "charter",
        "convention",
        "declaration",
        "directive",
        "protocol",
        "regulation",
        "statute",
        "treaty",
        "census",
        "gesetz",
        "verordnung",
        "richtlinie",
        "abkommen",
        "novelle",
    ]
)
# Units whose square or cube is written as a superscript: "25 m²" is no citation.
_UNITS = frozenset(
    [
        "m",
        "cm",
        "mm",
        "km",
        "dm",
        "nm",
        "µm",
        "μm",
        "ft",
        "in",
        "yd",
        "mi",
        "s",
        "ms",
        "kg",
        "g",
        "mg",
        "l",
        "ml",
    ]
)
# One number in parentheses after these words refers to an equation or a part of the document
# ("Equation (3)", "the formula in (2)", "Table (4)"), not to a reference entry. Plurals are left
# out on purpose: "imputed by chained equations (15,16)" cites two entries.
_NOT_A_CITATION_BEFORE = re.compile(
    r"\b(?:equation|eqs?\.|formula|inequality|table|figs?\.|figure|section|chapter|appendix|step|"
    r"gleichung|formel|tabelle|abb\.|abbildung|kapitel|schritt)\s+(?:(?:in|of|from|aus)\s+)?$",
    re.IGNORECASE,
)
_PARTICLES = {
    "van",
    "von",
    "de",
    "der",
    "den",
    "del",
    "della",
    "di",
    "da",
    "du",
    "le",
    "la",
    "ten",
    "ter",
    "dos",
    "das",
    "st.",
    "mc",
}
_PARTICLE_WORDS = "van|von|de|der|den|del|della|di|da|du|le|la|ten|ter|dos|das|des|zu"
# "Sebille, E. van", "WALT, STÉFAN J. VAN DER": a particle after the given names of a surname.
_INVERTED_PARTICLE = re.compile(
    rf"(?:^|[;&]\s*|,\s+)([^\W\d_][\w'\u2019\-]*),\s+(?:[^\W\d_][\w.\-]*\s+){{1,4}}?"
    rf"((?i:{_PARTICLE_WORDS})(?:\s+(?i:{_PARTICLE_WORDS}))*)(?=\s*[,;:.(&]|\s+(?:and|&)\s)"
)
_DIGITS_AS_LETTERS = str.maketrans("0123456789", "oizeasgtbq")
_MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "januar",
        "februar",
        "märz",
        "mai",
        "juni",
        "juli",
        "oktober",
        "dezember",
    ]
)
# Sentence adverbs that open a sentence with a comma, like a surname in an author list would.
_CONNECTIVES = frozenset(
    [
        "however",
        "moreover",
        "furthermore",
        "nevertheless",
        "nonetheless",
        "consequently",
        "therefore",
        "thus",
        "hence",
        "additionally",
        "indeed",
        "notably",
        "accordingly",
        "conversely",
        "likewise",
        "finally",
        "firstly",
        "secondly",
        "also",
        "yet",
        "still",
        "again",
        "here",
        "there",
        "similarly",
        "specifically",
        "importantly",
        "overall",
        "instead",
        "meanwhile",
        "dennoch",
        "jedoch",
        "zudem",
        "außerdem",
        "allerdings",
        "ebenso",
        "folglich",
        "daher",
        "somit",
        "auch",
        "ferner",
        "insbesondere",
        "schließlich",
        "zunächst",
        "hingegen",
        "demnach",
    ]
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|[(\[]\s*)$")


@dataclass
class Citation:
    """One in-text citation marker."""

    text: str
    keys: list[dict]
    paragraph: int
    start: int
    end: int
    context: str = ""

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "keys": self.keys,
            "paragraph": self.paragraph,
            "start": self.start,
            "end": self.end,
            "context": self.context,
        }


# ---------------------------------------------------------------- author-year markers


class _Vocabulary:
    """Words of the document used to tell surnames from capitalised prose words."""

    def __init__(self, blocks: list[Block], refs: list[Reference]) -> None:
        self.lower: set[str] = set()
        for b in blocks:
            self.lower.update(w for w in re.findall(r"\b[a-zäöüß]+\b", b.text))
        # "al" of "et al." is no evidence that "Al" is a word of the prose ("Al Fayez").
        self.lower.discard("al")
        self.surnames: set[str] = set()
        self.multiword: set[str] = set()
        self._blocks: dict[tuple[str, str], list[str]] | None = None
        for r in refs:
            for a in [*r.authors, *r.aliases]:
                f = fold(a)
                self.surnames.add(f)
                self.surnames.update(w.strip(",.") for w in f.split())
                if "," in f and is_company_suffix(f.rsplit(",", 1)[1]):
                    self.multiword.add(f)
                    f = f.rsplit(",", 1)[0].strip()  # also cited without its legal form
                    self.surnames.add(f)
                if " " in f:
                    self.multiword.add(f)
        # Surnames with their particles as the text cites them: "van Sebille" whether the list
        # prints "van Sebille, E." or moves the particle behind the given names, as APA and
        # DIN 1505-2 do ("Sebille, E. van", "WALT, STÉFAN J. VAN DER").
        self.particled: set[str] = {m for m in self.multiword if m.split()[0] in _PARTICLES}
        for r in refs:
            for m in _INVERTED_PARTICLE.finditer(r.text[:400]):
                self.particled.add(fold(f"{m.group(2)} {m.group(1)}"))
        # Names longer than eight words are not looked for in the text (cost stays linear).
        self.longest = min(8, max((len(m.split()) for m in self.multiword), default=0))
        self.multi_first = {m.split()[0] for m in self.multiword}
        # _chain_before's answers by window: a thesis repeats its markers ("Deng et al., "),
        # and the answer depends on the window and this (fixed) vocabulary alone.
        self.chains: dict[str, tuple[int, tuple[str, ...], bool] | None] = {}

    def near_surname(self, name: str) -> bool:
        """Whether a surname of the list is one edit away from ``name``. One edit leaves the
        first two or the last two letters of a name longer than four letters as they were, so
        only the surnames sharing either are compared."""
        if self._blocks is None:
            self._blocks = {}
            for s in self.surnames:
                self._blocks.setdefault(("<", s[:2]), []).append(s)
                self._blocks.setdefault((">", s[-2:]), []).append(s)
        cands = [*self._blocks.get(("<", name[:2]), []), *self._blocks.get((">", name[-2:]), [])]
        return any(OSA.distance(name, c, score_cutoff=1) <= 1 for c in cands)

    def is_prose(self, word: str) -> bool:
        f = fold(word)
        if f in self.surnames:
            return False
        return word.lower() in self.lower or f in _CONNECTIVES or (f.endswith("ly") and len(f) > 5)


def _split_chain(chain: str) -> list[str]:
    return [p for p in re.split(_CONN, chain) if p]


def _bare(name: str) -> str:
    """A chain name without the initials APA puts before it: "E. A. Abozinadah" -> "Abozinadah"."""
    return re.sub(r"^[A-Z]\.(?:\s?-?[A-Z]\.)*\s", "", name)


def _protect(window: str, vocab: _Vocabulary) -> tuple[str, dict[str, str]]:
    """``window`` with the words of each name known to be one joined by underscores, and the
    joined forms mapped back to the text.

    Names of several words ("R Core Team", "Temple Lang", "Gurobi Optimization, LLC") are
    known from the reference list; a particle before a capitalised surname ("van Sebille",
    "de Valpine") is one name wherever the list has that surname. The result has the length
    of ``window``, so offsets found in it hold in the text.
    """
    words = list(re.finditer(r"[^\s(\[\"\u201c\u2018]+", window))
    if len(words) < 2:
        return window, {}
    out = list(window)
    joined: dict[str, str] = {}
    i = 0
    while i < len(words) - 1:
        done = 0
        if fold(words[i].group()) in vocab.multi_first:
            for k in range(min(vocab.longest, len(words) - i), 1, -1):
                a, z = words[i].start(), words[i + k - 1].end()
                cand = window[a:z].rstrip(",;.")
                if fold(cand) in vocab.multiword:
                    done = k
                    z = a + len(cand)
                    break
        if not done:
            k = i
            while k < len(words) - 1 and words[k].group().lower() in _PARTICLES:
                k += 1
            if k > i and words[k].group()[:1].isupper():
                a, z = words[i].start(), words[k].end()
                surname = re.sub(r"[^\w'\u2019\-]+$", "", words[k].group())
                if fold(window[a:z].replace(words[k].group(), surname)) in vocab.particled:
                    done = k - i + 1
                    z = words[k].start() + len(surname)
        if (
            not done
            and i + 1 < len(words)
            and re.fullmatch(r"(?:Jr|Sr)\.?,?", words[i + 1].group())
        ):
            # "Jones Jr": a generational suffix belongs to the name before it.
            done = 2
            a = words[i].start()
            z = words[i + 1].start() + len(words[i + 1].group().rstrip(","))
        if not done and i + 1 < len(words):
            # "Korkmaz, Debelec Butuner", "Gentleman and Temple Lang": after another author, a
            # capitalised word the text does not use as a word elsewhere, before a surname of
            # the list, belongs to that surname (a list printing given names first cannot say
            # where a compound surname begins).
            first, second = words[i].group(), words[i + 1].group()
            second_bare = re.sub(r"[^\w'\u2019\-]+$", "", second)
            if (
                first[:1].isupper()
                and re.fullmatch(r"[^\W\d_][\w'\u2019\-]+", first)
                and fold(first) not in vocab.surnames
                and not vocab.is_prose(first)
                and second_bare[:1].isupper()
                and fold(second_bare) in vocab.surnames
                and window[words[i].end() : words[i + 1].start()] == " "
                # Only after another author: "Gemäß Frank (2024)" opens with a German noun.
                and re.search(r"(?:,|\band|&|\bund)\s+$", window[: words[i].start()])
            ):
                done = 2
                a, z = words[i].start(), words[i + 1].start() + len(second_bare)
        if done:
            # Digits become letters in the token: a standard's title ("ISO 9001") is a name.
            token = re.sub(r"[^\w'\u2019\-]", "_", window[a:z]).translate(_DIGITS_AS_LETTERS)
            out[a:z] = token
            joined[token] = window[a:z]
            i += done
        else:
            i += 1
    return ("".join(out), joined) if joined else (window, {})


def _known_name_before(window: str, vocab: _Vocabulary) -> tuple[int, str] | None:
    """A multi-word author of the list ending ``window`` as the sole author, or None.

    Group authors (``World Health Organization``, ``Department for Business, Energy and
    Industrial Strategy``) and particle surnames (``van der Borg``) contain words, commas and
    "and" that the name-chain grammar would split. The longest known name wins; one that
    follows a connector is the last of several authors and is left to the chain grammar.
    """
    if not vocab.multiword:
        return None
    text = window.rstrip().rstrip(",").rstrip()
    words = text.split()
    for k in range(min(len(words), 8), 1, -1):
        cand = " ".join(words[-k:])
        if fold(cand) not in vocab.multiword:
            continue
        start = len(text) - len(cand)
        if re.search(r"(?:&|\band|\bund|,|/)\s*$", text[:start]):
            return None
        return start, cand
    return None


def _chain_before(prefix: str, vocab: _Vocabulary) -> tuple[int, list[str], bool] | None:
    """The author chain ending ``prefix``: (start offset in prefix, surnames, whether it ends
    in "et al.") or None.

    Only the last 160 characters are read, so the answer is remembered per window (the
    search with its ``$`` anchor is most of the parse's time, and half the windows of a
    thesis recur)."""
    window = prefix[-160:]
    offset = len(prefix) - len(window)
    if window in vocab.chains:
        found = vocab.chains[window]
    else:
        found = vocab.chains[window] = _chain_in_window(window, vocab)
    if found is None:
        return None
    start, names, etal = found
    return offset + start, list(names), etal


def _chain_in_window(window: str, vocab: _Vocabulary) -> tuple[int, tuple[str, ...], bool] | None:
    """:func:`_chain_before` of a window of at most 160 characters, offsets in the window."""
    known = _known_name_before(window, vocab)
    if known:
        return known[0], (known[1],), False
    window, joined = _protect(window, vocab)
    m = _CHAIN.search(window)
    if not m:
        return None
    etal = bool(m.group(2))
    chain = m.group(1)
    start = m.start(1)
    names = _split_chain(chain)

    def text_of(name: str) -> str:
        return joined.get(name, name)

    def drop_first() -> None:
        nonlocal chain, start
        first = names.pop(0)
        rest = chain[len(first) :]
        stripped = re.match(_CONN, rest)
        cut = len(first) + (stripped.end() if stripped else 0)
        chain = chain[cut:]
        start += cut

    # Cut at the first name that does not start with a capital (prose such as "see"); a
    # particle joined to its surname ("van_Sebille") is a name.
    while names and not names[0][0].isupper() and names[0] not in joined:
        drop_first()
    if not names or not (names[-1][0].isupper() or names[-1] in joined):
        return None
    # "However, Qian, Hart and Dekker": a leading capitalised prose word is not an author.
    if len(names) > 1 and vocab.is_prose(text_of(names[0])):
        drop_first()
    elif (
        len(names) == 1
        and vocab.is_prose(text_of(names[0]))
        and _SENTENCE_START.search(window[:start])
    ):
        return None
    # An author list joins its last name with "and": "Schüler und Schülerinnen, Lucksnat" is prose
    # followed by one author, so only the names after the last comma are kept.
    joins = [c for c in re.finditer(_CONN, chain) if re.search(r"&|\band\b|\bund\b|/", c.group())]
    if joins:
        commas = [
            c
            for c in re.finditer(_CONN, chain[joins[-1].end() :])
            if re.fullmatch(r"\s*,\s*", c.group())
        ]
        if commas:
            cut = joins[-1].end() + commas[-1].end()
            chain = chain[cut:]
            start += cut
            names = _split_chain(chain)
    # A comma list without a final "and" is a sentence, not an author list: keep the last name.
    # "Holstead, Kenyon, Rouillard et al." is an author list all the same, but a leading word
    # the reference list does not know is not part of it ("BEP, Martilli et al. (2002)").
    if len(names) > 1 and not m.group(2) and not re.search(r"(?:&|\band\b|\bund\b|/)", chain):
        last = names[-1]
        idx = chain.rfind(last)
        start += idx
        chain = chain[idx:]
        names = [last]
    elif len(names) > 1 and etal and not joins and vocab.surnames:
        while len(names) > 1 and fold(_bare(text_of(names[0]))) not in vocab.surnames:
            drop_first()
    # "BEP, Martilli, Clappier and Rotach (2002)": a leading word the reference list does not
    # know, before one it knows, is prose (here the name of a scheme).
    # A misspelt first author ("Perton & Furnon") is a name all the same, and so is one the
    # list lacks in an author pair ("Schumacher/Frank"): only a comma sets the word apart.
    while (
        len(names) > 1
        and _comma_after_first(chain, names[0])
        and vocab.surnames
        and fold(_bare(text_of(names[0]))) not in vocab.surnames
        and fold(_bare(text_of(names[1]))) in vocab.surnames
        and not vocab.near_surname(fold(_bare(text_of(names[0]))))
    ):
        drop_first()
    # Multi-word surnames ("van der Berg", "De Vries") known from the reference list.
    before = window[:start].rstrip()
    words = before.split()
    for k in (3, 2, 1):
        if len(words) >= k:
            cand = " ".join([*words[-k:], names[0]])
            if fold(cand) in vocab.multiword or (
                k == 1 and words[-1].lower() in _PARTICLES and fold(cand) in vocab.surnames
            ):
                start = len(before) - len(" ".join(words[-k:]))
                names[0] = cand
                break
    names = [re.sub(r"\s+(?:Jr|Sr)\.?$", "", _bare(text_of(n))) for n in names]
    if len(names) == 1:
        # A possessive ("Porter\u2019s (1985) value chain") cites Porter.
        names[0] = re.sub(r"(?<=\w)['\u2019]s?$", "", names[0])
        f = fold(names[0])
        if f in _DOCUMENT_NOUNS and f not in vocab.surnames:
            return None
        # "(15 January 2024)", "(accessed March 2023)": a date, not a citation of Ms January.
        if f in _MONTHS and f not in vocab.surnames:
            return None
    return start, tuple(names), etal


def _comma_after_first(chain: str, first: str) -> bool:
    """Whether the first name of ``chain`` is followed by a bare comma (not "&", "and", "/")."""
    conn = re.match(_CONN, chain[len(first) :])
    return bool(conn and re.fullmatch(r"\s*,\s*", conn.group()))


def _year_key(
    author: str, year: str, suffix: str | None, names: list[str] | None = None, etal: bool = False
) -> dict:
    """A key ``{"author", "year"}``, plus what the marker says of the other authors, used
    only to tell apart entries of one first author and year (``matching.narrow``) and kept
    out of the report: ``_with`` (the co-authors it names) and ``_etal``. A key with neither
    cites a single author."""
    year = year.replace(" ", "")
    if year == "nodate":
        year = "n.d."
    key = {"author": author, "year": year + (suffix or "")}
    if names and len(names) > 1:
        key["_with"] = list(names[1:])
    if etal:
        key["_etal"] = True
    return key


def _parse_paren_group(content: str, vocab: _Vocabulary) -> list[dict]:
    keys: list[dict] = []
    for part in re.split(r";", content):
        pos = 0
        author = None
        names: list[str] = []
        etal = False
        last_end = None
        found_keys: list[tuple[int, dict]] = []  # (offset of the year, key)
        for m in _YEAR_TOKEN.finditer(part):
            if _LOCATOR_BEFORE.search(part[: m.start()]):
                continue
            if (
                author is not None
                and last_end is not None
                and re.fullmatch(r"\s*,\s*", part[last_end : m.start()])
            ):
                found_keys.append(
                    (m.start(), _year_key(author, m.group(1), m.group(2), names, etal))
                )
                last_end = m.end()
                continue
            found = _chain_before(_ABBR_TAIL.sub(r"\1", part[pos : m.start()]), vocab)
            if not found:
                continue
            _, names, etal = found
            author = names[0]
            found_keys.append((m.start(), _year_key(author, m.group(1), m.group(2), names, etal)))
            last_end = m.end()
            pos = m.end()
        # A secondary citation ("Brown, 2019, as cited in Green, 2021") cites the source that
        # was read: only that one belongs in the reference list (APA 8.6; "zit. n." in German).
        secondary = _SECONDARY.search(part)
        if secondary and any(at >= secondary.end() for at, _ in found_keys):
            found_keys = [(at, key) for at, key in found_keys if at >= secondary.end()]
        keys.extend(key for _, key in found_keys)
    return keys


def _matching_paren(text: str, i: int) -> int:
    depth = 0
    for j in range(i, min(len(text), i + 600)):
        c = text[j]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


_CONTEXT_CHARS = 160


def _context(text: str, start: int, end: int) -> str:
    """The marker's sentence, at most 160 characters either side of the marker (cut at a word).

    Bounded on both sides: every marker keeps its own copy, so a context that ran to the end
    of the paragraph made 20,000 markers in one 490 KB paragraph (a PDF page whose lines all
    fall on one baseline) cost 4.8 GB. The searches are bounded too, so a marker costs the
    same in a long paragraph as in a short one.
    """
    reach = _CONTEXT_CHARS
    stop = text.rfind(". ", max(0, start - reach - 2), start)
    left = max(stop + 2 if stop >= 0 else 0, start - reach)
    if left >= 2 and text[left - 2 : left] != ". ":
        left = text.find(" ", left, start) + 1 or left
    right = text.find(". ", end, end + reach + 2)
    if right >= 0:
        right += 1
    elif end + reach >= len(text):
        right = len(text)
    else:
        # No sentence end near: stop at the last word boundary within reach.
        right = text.rfind(" ", end, end + reach)
        if right < 0:
            right = end + reach
    return text[left:right].strip()


def _author_year_markers(
    block: Block, vocab: _Vocabulary, previous: list[dict] | None
) -> list[Citation]:
    text = block.text
    out: list[Citation] = []
    i = text.find("(")
    while i >= 0:
        j = _matching_paren(text, i)
        if j < 0:
            break
        content = text[i + 1 : j]
        cite = None
        if "(" in content:
            # "(based on (Grevesse et al., 2007), (Scott et al., 2015))", "(e.g. ICON (Giorgetta
            # u. a., 2018), CESM (...))": the markers are the inner parentheses.
            i = text.find("(", i + 1)
            continue
        if _IBID.match(content):
            prior = out[-1].keys if out else previous
            if prior:
                cite = Citation(text[i : j + 1], [dict(k) for k in prior], block.index, i, j + 1)
        elif _NARRATIVE_CONTENT.match(content):
            found = _chain_before(text[:i].rstrip(), vocab)
            gap = text[:i]
            if found and len(gap) - len(gap.rstrip()) <= 1:
                start, names, etal = found
                keys = [
                    _year_key(names[0], m.group(1), m.group(2), names, etal)
                    for m in _YEAR_TOKEN.finditer(content)
                    if not _LOCATOR_BEFORE.search(content[: m.start()])
                ]
                if keys:
                    cite = Citation(text[start : j + 1], keys, block.index, start, j + 1)
        elif _YEAR_TOKEN.search(content):
            keys = _parse_paren_group(content, vocab)
            start = i
            if keys and _NARRATIVE_SECONDARY.match(content):
                # "Brown (2019, as cited in Green, 2021)": the marker starts at the primary
                # author, whose work is not in the reference list (only Green's is).
                found = _chain_before(text[:i].rstrip(), vocab)
                gap = text[:i]
                if found and len(gap) - len(gap.rstrip()) <= 1:
                    start = found[0]
            if keys:
                cite = Citation(text[start : j + 1], keys, block.index, start, j + 1)
        if cite:
            cite.context = _context(text, cite.start, cite.end)
            out.append(cite)
            i = text.find("(", j + 1)
        else:
            i = text.find("(", i + 1)
    if block.note and not out:
        note = _note_marker(block, vocab, previous)
        if note:
            out.append(note)
    return out


# Words that may open a short citation in a note: "Vgl. Müller 2019, S. 12", "See Smith 2020".
_NOTE_LEAD = re.compile(
    r"^(?:\s*(?:vgl\.|siehe|s\.|dazu|hierzu|auch|so|ebenso|ausführlich|näher|etwa|z\.\s?b\.|"
    r"see|also|cf\.|e\.g\.|for example|in|bei|u\.\s?a\.|zum)[,:]?\s*)*$",
    re.IGNORECASE,
)
_NOTE_TAIL = re.compile(r"[\s.,;:\u2191\u21a9\ufe0e]+$")


def _note_marker(block: Block, vocab: _Vocabulary, previous: list[dict] | None) -> Citation | None:
    """The short citation a footnote makes without parentheses ("Vgl. Müller 2019, S. 12;
    Schmidt/Weber 2020." or "Ebd., S. 14."), as one marker spanning its sources.

    A name before a year counts when the reference list has that surname, or when it opens
    the note (or a ``;``-separated part of it) after at most a few lead-in words: German nouns
    are capitalised, and "im Sommer 2019" must not read as a citation of Sommer.
    """
    text = block.text
    if _IBID.match(text):
        if not previous:
            return None
        end = len(_NOTE_TAIL.sub("", text))
        cite = Citation(text[:end], [dict(k) for k in previous], block.index, 0, end)
        cite.context = text
        return cite
    keys: list[dict] = []
    names: list[str] = []
    etal = False
    first = last = None
    offset = 0
    for part in text.split(";"):
        pos = 0
        for m in _YEAR_TOKEN.finditer(part):
            if _LOCATOR_BEFORE.search(part[: m.start()]):
                continue
            if keys and pos and re.fullmatch(r"\s*,\s*", part[pos : m.start()]):
                # "Müller 2019, 2020": another work of the same authors
                keys.append(_year_key(names[0], m.group(1), m.group(2), names, etal))
                last = offset + len(part)
                pos = m.end()
                continue
            found = _chain_before(part[pos : m.start()], vocab)
            if not found:
                continue
            at, names, etal = found
            if fold(names[0]) not in vocab.surnames and not (
                pos == 0 and _NOTE_LEAD.match(part[:at])
            ):
                continue
            keys.append(_year_key(names[0], m.group(1), m.group(2), names, etal))
            if first is None:
                first = offset + pos + at
            last = offset + len(part)
            pos = m.end()
        offset += len(part) + 1
    if not keys or first is None or last is None:
        return None
    end = first + len(_NOTE_TAIL.sub("", text[first:last]))
    cite = Citation(text[first:end], keys, block.index, first, end)
    cite.context = text
    return cite


# ---------------------------------------------------------------- numeric markers


def _expand(numbers: str) -> list[dict]:
    keys: list[dict] = []
    for part in re.split(r"\s*[,;]\s*", numbers.strip()):
        m = re.fullmatch(r"(\d+)\s*[\u2013\-\u2014]\s*(\d+)", part)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a <= b and b - a <= 200:
                keys.extend({"number": n} for n in range(a, b + 1))
                continue
            keys.extend([{"number": a}, {"number": b}])
        elif part.isdigit():
            keys.append({"number": int(part)})
    return keys


def _numeric_markers(block: Block, style: str, max_number: int) -> list[Citation]:
    pattern = _BRACKETS if style == "ieee" else _PARENS_NUM
    out = []
    for m in pattern.finditer(block.text):
        if style == "ieee" and m.group(2) and re.fullmatch(r"\s*\d{1,4}\s*", m.group(1)):
            keys = _expand(f"{m.group(1)}\u2013{m.group(2)}")
        else:
            keys = _expand(m.group(1))
        if not keys or any(k["number"] == 0 for k in keys):
            continue  # entries are numbered from 1: "[0, 1]" is an interval
        # "x[4]", "hist[4]": a bracket glued to a word indexes an array; IEEE puts a space first.
        if (
            style == "ieee"
            and m.start()
            and (block.text[m.start() - 1].isalnum() or block.text[m.start() - 1] == "_")
        ):
            continue
        if (
            style != "ieee"
            and len(keys) == 1
            and _NOT_A_CITATION_BEFORE.search(block.text[max(0, m.start() - 40) : m.start()])
        ):
            continue
        # "(2019)" in a numbered document is a year, not reference 2019; "(3000,4000)" is a
        # pair of quantities when the list has fewer than a thousand entries.
        if max_number < 1000 and any(k["number"] >= 1000 for k in keys):
            continue
        c = Citation(m.group(0), keys, block.index, m.start(), m.end())
        c.context = _context(block.text, c.start, c.end)
        out.append(c)
    if style != "ieee":
        out = _drop_enumerations(block.text, out)
        worded = _worded_numeric_markers(block, max_number, {c.start for c in out})
        if worded:
            out = sorted(out + worded, key=lambda c: c.start)
    if block.sups:
        out = sorted(out + _superscript_markers(block, max_number), key=lambda c: c.start)
    return out


# A citation number standing on its own inside prose: not part of a word ("SS3", "r4ss"), a
# decimal, a percentage or a quantity with its unit.
_LOOSE_NUMBER = re.compile(
    r"(?<![\w.%/\-\u2013])(\d{1,4})(?:\s*[\u2013\-\u2014]\s*(\d{1,4}))?(?![\w%]|\.\d|\s*%)"
)
# Words after which a number counts something or names a part, never an entry: "(step 2)",
# "(n = 25)", "(Figure 3)", "(version 4)".
_COUNTED = re.compile(
    r"(?:\b(?:n|p|fig|figs|figure|figures|table|tables|tab|eq|eqs|equation|equations|section|"
    r"sections|sec|chapter|chapters|ch|appendix|step|steps|phase|version|v|level|levels|group|"
    r"groups|model|models|day|days|week|weeks|month|months|year|years|age|aged|page|pages|pp|"
    r"line|lines|item|items|type|stage|wave|round|grade|class|case|cases|sample|experiment|part|"
    r"no|nr|number|id|run|trial|scenario|option|rule|point|points|question|task|unit|module|"
    r"abb|abbildung|tabelle|kapitel|schritt|seite|gleichung|ages|of|to|than|about|approximately|"
    r"ca|around|over|under|least|most|top|first|last|only|nearly|almost|some|all|is|are|was|were|"
    r"be|equals|default|set|value|values|size|max|min|maximum|minimum)\.?|[=<>\u00b1~\u00d7+*/^#$\u20ac\u00a3])"
    r"\s*$",
    re.IGNORECASE,
)


def _worded_numeric_markers(block: Block, max_number: int, taken: set[int]) -> list[Citation]:
    """Numbered-style markers with words inside their parentheses: "(see 11)", "(e.g., 6,8,9,24)",
    "(7, cf. 39, 40-42)", "(based on the algorithm proposed by 11)".

    The parenthesis must end in a citation number; every number standing on its own in it
    must be an entry number of the list and not follow a word that counts things.
    """
    text = block.text
    out: list[Citation] = []
    i = text.find("(")
    while i >= 0:
        j = _matching_paren(text, i)
        if j < 0:
            break
        content = text[i + 1 : j]
        if i not in taken and "(" not in content and re.search(r"[^\W\d_]", content):
            keys = _worded_numbers(content, max_number)
            if keys:
                c = Citation(text[i : j + 1], keys, block.index, i, j + 1)
                c.context = _context(text, i, j + 1)
                out.append(c)
                i = text.find("(", j + 1)
                continue
        i = text.find("(", i + 1)
    return out


def _worded_numbers(content: str, max_number: int) -> list[dict] | None:
    if not re.search(r"(?<![\w.])\d{1,4}(?:\s*[\u2013\-\u2014]\s*\d{1,4})?\s*$", content):
        return None
    keys: list[dict] = []
    for m in _LOOSE_NUMBER.finditer(content):
        if _COUNTED.search(content[: m.start()]):
            return None
        if m.group(2):
            found = _expand(f"{m.group(1)}\u2013{m.group(2)}")
        else:
            found = [{"number": int(m.group(1))}]
        if any(not 1 <= k["number"] <= max_number for k in found):
            return None
        keys.extend(found)
    return keys or None


def _superscript_markers(block: Block, max_number: int) -> list[Citation]:
    """Citation numbers typed as superscripts ("as shown before.<sup>2,5</sup>")."""
    text = block.text
    out = []
    for start, end in block.sups:
        m = _SUP_NUMBERS.match(text[start:end])
        if not m:
            continue  # "[3]" in a superscript is found as a bracket; anything else is no marker
        keys = _expand(m.group(1))
        numbers = [k["number"] for k in keys]
        # Entry numbers start at 1; a number far beyond the list is something else (a year).
        if not keys or min(numbers) < 1 or max(numbers) > max_number + 20:
            continue
        before = text[:start]
        if before and before[-1].isdigit():
            continue  # an exponent: "10⁶"
        unit = re.search(r"([^\W\d_]+)\s?$", before)
        if unit and unit.group(1) in _UNITS and numbers in ([2], [3]):
            continue  # "25 m²", "3 cm³"
        c = Citation(text[start:end], keys, block.index, start, end)
        c.context = _context(text, start, end)
        out.append(c)
    return out


def _drop_enumerations(text: str, found: list[Citation]) -> list[Citation]:
    """Leave out "(1) were aged 18-65 years, (2) had a BMI of 30 or more and (3) owned ...".

    An enumeration counts 1, 2, 3 within one sentence, each number opening a clause that goes
    on in lower case; citations rarely do all of that at once.
    """

    def opens_clause(c: Citation) -> bool:
        return bool(re.match(r"\s+[a-z\u00df-\u00ff]", text[c.end : c.end + 3]))

    drop: set[int] = set()
    for i, c in enumerate(found):
        if c.keys != [{"number": 1}] or not opens_clause(c):
            continue
        run = [i]
        for j in range(i + 1, len(found)):
            nxt = found[j]
            if (
                nxt.keys != [{"number": len(run) + 1}]
                or not opens_clause(nxt)
                or re.search(r"[.!?]\s", text[found[run[-1]].end : nxt.start])
            ):
                break
            run.append(j)
        if len(run) >= 2:
            drop.update(run)
    return [c for i, c in enumerate(found) if i not in drop] if drop else found


def body_blocks(blocks: list[Block], section: tuple[int, int] | None) -> list[Block]:
    """The blocks where citations stand: neither headings nor the reference list."""
    in_refs = range(*section) if section else range(0)
    # Program listings (<pre>) hold no citations: "f(x, 2020)", "a[3]" are code.
    body = [b for b in blocks if b.index not in in_refs and not b.is_heading and b.tag != "pre"]
    if section:
        # The reference heading itself is a heading-like block too.
        body = [b for b in body if b.index != section[0] - 1]
    return body


def numeric_citations(
    blocks: list[Block], refs: list[Reference], section: tuple[int, int] | None, style: str
) -> list[Citation]:
    """Every numbered-style marker (``[3]`` for IEEE, ``(3)`` for Vancouver) in document order.

    The number that opens a note printed after the reference list ("[1] https://...") is the
    note's, not a citation.
    """
    max_number = max((r.number or 0 for r in refs), default=0)
    after = section[1] if section else len(blocks) + 1
    out: list[Citation] = []
    for b in body_blocks(blocks, section):
        found = _numeric_markers(b, style, max_number)
        if b.index >= after and found and found[0].start == 0:
            found = found[1:]
        out.extend(_outside_code(b, found))
    return out


def author_year_citations(
    blocks: list[Block], refs: list[Reference], section: tuple[int, int] | None
) -> list[Citation]:
    """Every author-date marker in document order."""
    vocab = _Vocabulary(blocks, refs)
    out: list[Citation] = []
    for b in body_blocks(blocks, section):
        found = _author_year_markers(b, vocab, out[-1].keys if out else None)
        out.extend(_outside_code(b, found))
    return out


def _outside_code(block: Block, found: list[Citation]) -> list[Citation]:
    """The markers of ``found`` that do not touch inline code (``<code>f(x, 2020)</code>``)."""
    codes = getattr(block, "codes", ())
    if not codes or not found:
        return found
    return [c for c in found if not any(a < c.end and c.start < z for a, z in codes)]


def resolvable(citations: list[Citation], refs: list[Reference]) -> int:
    """How many keys of ``citations`` name an entry of the list (by number, or by a surname
    the list has): the measure by which the reference list decides between marker families."""
    numbers = {r.number for r in refs if r.number is not None}
    surnames: set[str] = set()
    for r in refs:
        for a in [*r.authors[:1], *r.aliases]:
            f = fold(a)
            surnames.update((f, f.split()[-1] if f.split() else f))
    count = 0
    for c in citations:
        for k in c.keys:
            if "number" in k:
                count += k["number"] in numbers
            else:
                f = fold(k.get("author", ""))
                count += f in surnames or (f.split()[-1] if f.split() else f) in surnames
    return count


def parse_citations(
    blocks: list[Block],
    refs: list[Reference],
    section: tuple[int, int] | None,
    style: str | None = None,
) -> tuple[str, list[Citation]]:
    """Detect the style (unless given) and return it with every citation in document order."""
    if style is None:
        style = detect_style(body_blocks(blocks, section), refs)
    if style in NUMERIC:
        return style, numeric_citations(blocks, refs, section, style)
    return style, author_year_citations(blocks, refs, section)


def language_hint(blocks: list[Block]) -> str:
    """'de' or 'en' from the commonest function words."""
    words = Counter()
    for b in blocks[:200]:
        words.update(w.lower() for w in re.findall(r"\b\w+\b", b.text))
    de = sum(words[w] for w in ("der", "die", "und", "das", "nicht", "mit", "wird"))
    en = sum(words[w] for w in ("the", "and", "of", "is", "with", "that", "are"))
    return "de" if de > en else "en"
