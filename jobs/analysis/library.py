"""The user's reference library (BibTeX, CSL-JSON or RIS) as an offline check on the entries.

An entry of the thesis is ``found`` when the library holds the same work: the same DOI, or the
same first-author surname and year with a similar title. An invented reference is, by nature,
in nobody's library.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from .errors import AnalysisInputError
from .references import Reference
from .text import fold

MAX_LIBRARY_BYTES = 20 * 1024 * 1024
# JSON nesting accepted (a CSL-JSON item is 4-5 levels deep); deeper is refused with a message
# instead of Python's RecursionError.
MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    """JSON nested deeper than allowed; the message names the limit."""


def json_depth(value: object) -> int:
    """How deep lists and objects nest in a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def load_json(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> object:
    """``json.loads`` with nesting capped at ``max_depth``.

    Raises :class:`JsonTooDeep` past it (also where the parser itself would run out of stack)
    and ``ValueError`` for text that is not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(
            f"the JSON nests too deeply (more than {max_depth} levels; the limit is {max_depth})."
        ) from None
    depth = json_depth(value)
    if depth > max_depth:
        raise JsonTooDeep(f"the JSON nests {depth:,} levels deep; the limit is {max_depth}.")
    return value


TITLE_SIMILARITY = 85.0


@dataclass
class LibraryItem:
    authors: list[str]
    year: str
    title: str
    doi: str | None = None


def _norm_doi(doi: str | None) -> str | None:
    if not doi:
        return None
    doi = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", doi.strip(), flags=re.I)
    return doi.rstrip(".").lower() or None


def _norm_title(title: str | None) -> str:
    return re.sub(r"[{}\\]", "", title or "").strip().casefold()


def _surname(name: str) -> str:
    name = re.sub(r"[{}]", "", name).strip()
    if "," in name:
        return name.split(",", 1)[0].strip()
    parts = name.split()
    return parts[-1] if parts else name


def _year(value) -> str:
    m = re.search(r"\d{4}", str(value or ""))
    return m.group(0) if m else ""


def _from_bibtex(text: str) -> list[LibraryItem]:
    import bibtexparser

    try:
        lib = bibtexparser.parse_string(text)
    except Exception as exc:  # bibtexparser raises assorted errors on broken input
        raise AnalysisInputError("The BibTeX library cannot be read.") from exc
    items = []
    for entry in lib.entries:
        fields = {f.key.lower(): str(f.value) for f in entry.fields}
        authors = fields.get("author") or fields.get("editor") or ""
        names = [_surname(a) for a in re.split(r"\s+and\s+", authors) if a.strip()]
        items.append(
            LibraryItem(
                names,
                _year(fields.get("year") or fields.get("date")),
                fields.get("title", ""),
                fields.get("doi"),
            )
        )
    return items


def _from_csl_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> list[LibraryItem]:
    try:
        data = load_json(text, max_depth)
    except JsonTooDeep as exc:
        raise AnalysisInputError(f"The CSL-JSON library is not usable: {exc}") from exc
    except ValueError as exc:
        raise AnalysisInputError("The CSL-JSON library is not valid JSON.") from exc
    if isinstance(data, dict):
        data = data.get("items", [data])
    if not isinstance(data, list):
        raise AnalysisInputError("The CSL-JSON library must be a list of items.")
    items = []
    for it in data:
        if not isinstance(it, dict):
            continue
        names = []
        people = it.get("author") or it.get("editor") or []
        for a in people if isinstance(people, list) else []:
            if isinstance(a, dict):
                names.append(str(a.get("family") or a.get("literal") or ""))
        issued = it.get("issued") or {}
        year = ""
        if isinstance(issued, dict):
            parts = issued.get("date-parts") or [[issued.get("raw", "")]]
            # A hostile or broken file may put anything here; only [[year, ...]] has a year.
            if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
                year = _year(parts[0][0])
        doi = it.get("DOI") or it.get("doi")
        items.append(
            LibraryItem(
                names, year, str(it.get("title", "")), doi if isinstance(doi, str) else None
            )
        )
    return items


def _from_ris(text: str) -> list[LibraryItem]:
    import rispy

    try:
        entries = rispy.loads(text)
    except Exception as exc:  # rispy raises on malformed tags
        raise AnalysisInputError("The RIS library cannot be read.") from exc
    items = []
    for e in entries:
        names = [_surname(a) for a in (e.get("first_authors") or e.get("authors") or [])]
        year = _year(e.get("year") or e.get("publication_year") or e.get("date"))
        title = e.get("title") or e.get("primary_title") or ""
        items.append(LibraryItem(names, year, title, e.get("doi")))
    return items


def detect_library_format(data: bytes, filename: str = "") -> str:
    """'bibtex', 'csl-json' or 'ris', from the content first and the extension second."""
    head = _library_text(data[:4096]).lstrip("\ufeff \t\r\n")
    if head.startswith(("[", "{")):
        return "csl-json"
    if re.search(r"^TY  - ", head, re.M):
        return "ris"
    if re.search(r"^\s*@\w+\s*[{(]", head, re.M):
        return "bibtex"
    ext = filename.lower().rsplit(".", 1)[-1]
    if ext in ("bib", "bibtex"):
        return "bibtex"
    if ext == "ris":
        return "ris"
    if ext == "json":
        return "csl-json"
    raise AnalysisInputError("The library is not BibTeX, CSL-JSON or RIS.")


@dataclass
class Library:
    """Indexed library items; :meth:`check` answers ``found`` or ``not_found`` for an entry."""

    items: list[LibraryItem]
    by_doi: dict[str, int] = field(default_factory=dict)
    by_author_year: dict[tuple[str, str], list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def __post_init__(self) -> None:
        for i, it in enumerate(self.items):
            doi = _norm_doi(it.doi)
            if doi:
                self.by_doi[doi] = i
            if it.authors:
                self.by_author_year[fold(it.authors[0]), it.year].append(i)

    def check(self, ref: Reference) -> str:
        doi = _norm_doi(ref.doi)
        if doi and doi in self.by_doi:
            return "found"
        if not ref.authors:
            return "not_found"
        year = _year(ref.year)
        title = _norm_title(ref.title)
        for i in self.by_author_year.get((fold(ref.authors[0]), year), []):
            other = _norm_title(self.items[i].title)
            if not title or not other or fuzz.token_set_ratio(title, other) >= TITLE_SIMILARITY:
                return "found"
        return "not_found"


def _library_text(data: bytes) -> str:
    """The library's text: UTF-8, or UTF-16/32 when a byte-order mark says so."""
    for bom, encoding in (
        (b"\x00\x00\xfe\xff", "utf-32-be"),
        (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\xfe\xff", "utf-16-be"),
        (b"\xff\xfe", "utf-16-le"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def load_library(
    data: bytes, filename: str = "", *, max_json_depth: int = MAX_JSON_DEPTH
) -> Library:
    """Parse a BibTeX, CSL-JSON or RIS library. Raises :class:`AnalysisInputError` if unreadable.

    A CSL-JSON library nested deeper than ``max_json_depth`` is refused with a message."""
    if not data or not data.strip():
        raise AnalysisInputError("The library file is empty.")
    if len(data) > MAX_LIBRARY_BYTES:
        raise AnalysisInputError("The library file is larger than 20 MB.")
    fmt = detect_library_format(data, filename)
    text = _library_text(data)
    if fmt == "bibtex":
        items = _from_bibtex(text)
    elif fmt == "ris":
        items = _from_ris(text)
    else:
        items = _from_csl_json(text, max_json_depth)
    if not items:
        names = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON"}
        raise AnalysisInputError(
            f"it holds no {names[fmt]} entries (expected BibTeX, CSL-JSON or RIS)."
        )
    return Library(items)
