"""Rebuild paragraphs from a PDF's positioned text.

A PDF has no paragraphs, only glyph runs at coordinates. pypdf reports each run with its text
matrix; from those we rebuild lines, drop running headers and page-number footers, put the
columns of a two-column page in reading order, and join lines into paragraphs using the cues a
reader uses: a larger gap, a first-line indent or a hanging indent, a change of font size.
Line-end hyphenation and ligatures are undone later by :mod:`jobs.analysis.text`.
"""

from __future__ import annotations

import contextvars
import io
import itertools
import logging
import re
import time
from collections import Counter
from dataclasses import dataclass

# Imported with the package, not when the first PDF comes: the pipeline extracts in a child
# forked from the worker (jobs.durable.isolation), which would otherwise import pypdf again
# for every upload (~0.1 s each time).
import pypdf
from pypdf.errors import PdfReadError
from pypdf.generic._font import Font

from .errors import AnalysisInputError
from .limits import DEFAULT_LIMITS
from .text import normalize

_PAGE_NUMBER = re.compile(
    r"^[\W_]*(?:page|seite|p\.|s\.)?\s*(?:\d{1,4}|[ivxlcdm]{1,7})"
    r"(?:\s*(?:of|von|/)\s*\d{1,4})?[\W_]*$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")


@dataclass
class Line:
    page: int
    x0: float
    y: float
    size: float
    text: str
    x1: float
    column: int = 0
    rel_x: float = 0.0
    high: bool = False
    region: int = 0  # lines of one flow and size with no paragraph gap between them
    labelled: bool = False  # opens with a list label printed apart from its text

    @property
    def est_width(self) -> float:
        return self.x1 - self.x0


class _Overtime(Exception):
    """Reading the text took longer than the limit allows."""


# The fonts read so far from the document being extracted, by the identity of their font
# dictionary (kept in the value, so the id is not reused while the cache lives).
_FONTS: contextvars.ContextVar[dict[int, tuple[object, Font]] | None] = contextvars.ContextVar(
    "acurio_pdf_fonts", default=None
)


def _cache_fonts() -> None:
    """Let pypdf read each font of a document once, not once per page that uses it.

    pypdf's ``extract_text`` builds a :class:`~pypdf.generic._font.Font` for every font of a
    page's resources, parsing its widths and ``/ToUnicode`` CMap each time: the 300-page
    corpus PDF has 9 fonts and built 570 of them, ~0.5 s of its ~3 s. While
    :func:`pdf_paragraphs` reads a document it sets :data:`_FONTS`, and a font dictionary
    pypdf already resolved (the same object on every page that refers to it) gives the Font
    built the first time; outside (no cache set) pypdf behaves as shipped. The extraction
    never changes a Font it is handed, so sharing one between pages is safe.
    """
    original = Font.__dict__.get("from_font_resource")
    if not isinstance(original, classmethod) or getattr(original, "_acurio_cached", False):
        return  # another pypdf than this was written for, or already installed
    build = original.__func__

    def from_font_resource(cls, pdf_font_dict):
        cache = _FONTS.get()
        if cache is None or cls is not Font:
            return build(cls, pdf_font_dict)
        hit = cache.get(id(pdf_font_dict))
        if hit is None or hit[0] is not pdf_font_dict:
            hit = (pdf_font_dict, build(cls, pdf_font_dict))
            cache[id(pdf_font_dict)] = hit
        return hit[1]

    cached = classmethod(from_font_resource)
    cached._acurio_cached = True  # type: ignore[attr-defined]
    Font.from_font_resource = cached  # type: ignore[method-assign]


_cache_fonts()


def _open(data: bytes, max_pages: int = DEFAULT_LIMITS.pdf_pages):
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            # Permission-only encryption opens with the empty password; anything else needs one.
            try:
                ok = reader.decrypt("")
            except Exception as exc:  # unsupported algorithm, broken /Encrypt dictionary
                raise AnalysisInputError(
                    "The PDF is encrypted and cannot be opened. Remove the password and upload it again."
                ) from exc
            if not ok:
                raise AnalysisInputError(
                    "The PDF is password-protected. Remove the password and upload it again."
                )
        pages = reader.pages
        n = len(pages)
    except AnalysisInputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise AnalysisInputError("The PDF is damaged and cannot be read.") from exc
    except Exception as exc:  # pypdf raises a wide range of errors on corrupt files
        raise AnalysisInputError("The PDF is damaged and cannot be read.") from exc
    if n == 0:
        raise AnalysisInputError("The PDF has no pages.")
    if n > max_pages:
        raise AnalysisInputError(f"The PDF has {n:,} pages; the limit is {max_pages:,}.")
    return reader


def _page_lines(
    page, page_no: int, deadline: float = float("inf")
) -> tuple[list[Line], float, float]:
    items: list[tuple[float, float, float, str]] = []

    def visit(text, cm, tm, font_dict, font_size):
        if len(items) % 256 == 0 and time.monotonic() > deadline:
            raise _Overtime
        if not text or not text.strip("\n"):
            return
        x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(tm[3] * cm[3]) or abs(tm[0] * cm[0]) or 1.0
        items.append((x, y, float(font_size) * scale, text))

    page.extract_text(visitor_text=visit)
    box = page.mediabox
    return runs_to_lines(items, page_no), float(box.width), float(box.height)


def _glyph_width(items: list[tuple[float, float, float, str]]) -> float:
    """The page's mean glyph width in ems, measured between runs that follow on one line.

    Only where a run starts tells its width; a line's end is estimated from its last run's
    glyph count, so the estimate is calibrated on the page's own font (half an em otherwise).
    """
    dx = chars = 0.0
    for a, b in itertools.pairwise(items):
        n = len(a[3])
        if n >= 3 and abs(a[1] - b[1]) < 0.1 and a[2] == b[2] and 0 < b[0] - a[0] < n * a[2]:
            dx += b[0] - a[0]
            chars += n * a[2]
    return dx / chars if chars >= 200 else 0.5


def runs_to_lines(items: list[tuple[float, float, float, str]], page_no: int = 0) -> list[Line]:
    """One page's text runs ``(x, y, size, text)``, in content order, as lines."""
    em = _glyph_width(items)
    lines: list[Line] = []
    cur: list[tuple[float, float, float, str]] = []

    def close() -> None:
        if not cur:
            return
        size = _line_size(cur)
        text = _run_text(cur, size).replace("\n", " ").strip()
        if text:
            last = cur[-1]
            x1 = last[0] + len(last[3].rstrip()) * last[2] * em
            lines.append(Line(page_no, cur[0][0], cur[0][1], size, text, x1))
        cur.clear()

    for it in items:
        if cur:
            ref = cur[-1]
            # A new baseline, or a jump back to the left, starts a new line.
            if abs(it[1] - ref[1]) > 0.4 * max(ref[2], 1.0) or (
                it[0] < ref[0] - 1 and (abs(it[1] - ref[1]) > 0.1)
            ):
                close()
        cur.append(it)
    close()
    return _attach_labels(lines)


def _small_caps_ratio(small: float, large: float) -> bool:
    """Whether ``small`` is the size of synthesized small capitals beside ``large`` capitals."""
    return large > 0 and 0.55 <= small / large <= 0.9


def _run_text(runs: list[tuple[float, float, float, str]], line_size: float) -> str:
    """The text of one line's runs, small capitals rejoined and read as lower case.

    Small capitals are printed as a full-size capital and a run of smaller capitals
    (``M`` + ``OORE``), and pypdf starts every run whose font size changes with a space:
    ``M OORE , J OHN``. The smaller capitals become the lower-case letters they stand for,
    and a space that only marks the size change is dropped: before the small capitals that
    continue a capital, and before a comma, full stop, hyphen or closing parenthesis right
    after them (no style sets a space there). ``Moore, John`` is what the source said.
    """
    if len(runs) == 1:
        return runs[0][3]  # one run is set at the line's size: nothing to rejoin
    parts: list[str] = []
    prev_size = 0.0
    prev_text = ""
    for _, _, size, text in runs:
        if _small_caps_ratio(size, line_size) and text.isupper():
            # Small capitals stand for lower-case letters: the source read "Moore", not
            # "MOORE" (its capitals are printed at full size).
            text = text.lower()
        if text.startswith(" ") and prev_text and not prev_text[-1].isspace():
            body = text.lstrip(" ")
            if (
                _small_caps_ratio(size, prev_size)
                and prev_text[-1].isupper()
                and body[:1].islower()
                and body.islower()
            ):
                text = text[1:]
            elif (
                _small_caps_ratio(prev_size, size)
                and prev_text.strip().islower()
                and body[:1] in (",", ".", ")", "-", "'", "\u2019")
            ):
                text = body
        parts.append(text)
        prev_size, prev_text = size, text
    return "".join(parts)


def _line_size(runs: list[tuple[float, float, float, str]]) -> float:
    """The font size of a line: the size most of its characters have, small capitals counted
    at the size of their capitals (a name in small caps is body text, not a footnote)."""
    if len(runs) == 1:
        return round(runs[0][2], 1)  # one size: no smaller capitals beside larger ones
    sizes: Counter[float] = Counter()
    upper: Counter[float] = Counter()
    for _, _, s, t in runs:
        sizes[round(s, 1)] += len(t)
        if (t.strip() and t.isupper()) or not any(c.isalpha() for c in t):
            upper[round(s, 1)] += len(t)
    size = sizes.most_common(1)[0][0]
    if upper[size] >= 0.9 * sizes[size]:
        larger = [s for s in sizes if _small_caps_ratio(size, s)]
        if larger:
            return max(larger, key=lambda s: sizes[s])
    return size


# A list label printed on its own: "[12]", "12.", "(12)", "12)" or a bare number.
_LABEL = re.compile(r"^(?:\[\d{1,4}\]|\(\d{1,4}\)|\d{1,4}[.)]?)$")


def _attach_labels(lines: list[Line]) -> list[Line]:
    """Put each lone list label in front of the text that starts right of it on its baseline.

    Browsers print a numbered list's labels (CSS floats, ``<ol>`` markers, citeproc's
    ``csl-left-margin``) apart from the item's text, often all labels of a page first. Read in
    content order, the numbers would become paragraphs of their own and the entries would lose
    them; joined to their line, the entry reads ``[12] Author ...`` as it is printed.
    """
    labels = [ln for ln in lines if _LABEL.match(ln.text)]
    if not labels:
        return lines
    # Lines by rounded baseline, for a constant-time look-up per label.
    by_y: dict[int, list[Line]] = {}
    for ln in lines:
        by_y.setdefault(round(ln.y), []).append(ln)
    gone: set[int] = set()
    for lab in labels:
        best: Line | None = None
        tol = 0.3 * max(lab.size, 1.0)
        for key in (round(lab.y) - 1, round(lab.y), round(lab.y) + 1):
            for ln in by_y.get(key, ()):
                if (
                    ln is lab
                    or id(ln) in gone
                    or abs(ln.y - lab.y) > tol
                    or ln.x0 <= lab.x0
                    # The text starts within a label column's width of the label.
                    or ln.x0 - lab.x0 > 8 * max(lab.size, 1.0)
                    or _LABEL.match(ln.text)
                ):
                    continue
                if best is None or ln.x0 < best.x0:
                    best = ln
        if best is not None:
            best.text = f"{lab.text} {best.text}"
            best.x0 = lab.x0
            best.labelled = True
            gone.add(id(lab))
    return [ln for ln in lines if id(ln) not in gone] if gone else lines


def _strip_furniture(pages: list[list[Line]], height: float, body_size: float) -> None:
    """Remove running headers and page-number footers in place.

    Furniture is the top or bottom line of a page, set apart from the text by a gap, at a height
    where such a set-apart line recurs on many pages, and whose text recurs there too (digits
    aside) or is a page number or is set smaller than the body. The first line of ordinary text
    also recurs at one height, but is set apart from the next line only now and then (by a
    paragraph gap), never page after page.
    """
    top_band, bottom_band = height * 0.88, height * 0.12
    active = {"t", "b"}
    for _ in range(2):  # a running header and a page number may be stacked
        for where in sorted(active):
            removed = 0
            seen: Counter[int] = Counter()
            apart: Counter[int] = Counter()
            cands: list[tuple[list[Line], Line, bool]] = []
            for lines in pages:
                if len(lines) < 2:
                    continue
                by_y = sorted(lines, key=lambda ln: -ln.y)
                cand, neighbour = (by_y[0], by_y[1]) if where == "t" else (by_y[-1], by_y[-2])
                if (where == "t" and cand.y < top_band) or (where == "b" and cand.y > bottom_band):
                    continue
                separated = abs(cand.y - neighbour.y) >= 1.6 * max(cand.size, neighbour.size)
                seen[round(cand.y)] += 1
                apart[round(cand.y)] += separated
                cands.append((lines, cand, separated))
            n_pages = sum(1 for lines in pages if lines)
            heights = {
                y for y, n in seen.items() if n >= max(2, 0.25 * n_pages) and apart[y] >= 0.8 * n
            }
            texts = Counter((round(c.y), _DIGITS.sub("#", c.text)) for _, c, _ in cands)
            for lines, cand, separated in cands:
                if not separated:
                    continue
                y = round(cand.y)
                at_height = y in heights or y - 1 in heights or y + 1 in heights
                # A chapter heading opening a page also sits at one height; furniture repeats
                # its text (digits aside) or is set smaller than the text it frames.
                key = _DIGITS.sub("#", cand.text)
                same_text = sum(texts[y + d, key] for d in (-1, 0, 1))
                repeats = same_text >= max(2, 0.05 * n_pages) or cand.size < body_size - 0.4
                if at_height and (repeats or _PAGE_NUMBER.match(cand.text)):
                    lines.remove(cand)
                    removed += 1
            # Look for a second layer only where a first one was found on many pages.
            if removed < max(2, 0.25 * n_pages):
                active.discard(where)


def _order_columns(lines: list[Line], width: float) -> list[Line]:
    mid = width / 2
    right = [ln for ln in lines if ln.x0 > mid - 10]
    left_narrow = [ln for ln in lines if ln.x0 < mid and ln.x1 < mid + 20]
    if len(right) < 4 or len(left_narrow) < 4:
        return lines
    # Columns are runs of prose starting at one left edge each; a table's cells are short and
    # start at several edges, and reading them column by column would scatter the text around.
    left = [ln for ln in lines if ln.x0 <= mid - 10]
    if not _one_edge(left) or not _one_edge(right):
        return lines
    if sorted(len(ln.text) for ln in right)[len(right) // 2] < 25:
        return lines
    for ln in lines:
        ln.column = 1 if ln.x0 > mid - 10 else 0
    # Stable sort keeps the content-stream order inside each column.
    return sorted(lines, key=lambda ln: ln.column)


def _one_edge(lines: list[Line]) -> bool:
    """Whether most lines start at one left edge (give or take an indent)."""
    if not lines:
        return False
    edge = _mode_x([ln.x0 for ln in lines])
    return sum(1 for ln in lines if abs(ln.x0 - edge) <= 30) >= 0.7 * len(lines)


def _mode_x(xs: list[float]) -> float:
    return Counter(round(x) for x in xs).most_common(1)[0][0]


def _classify(group: list[Line]) -> str:
    """'hanging', 'indent' or 'flat' for lines of one font size, with their ``high`` flags set.

    A line is high when it starts right of the group's leftmost edge. With hanging indents the
    high lines come in runs (the continuations of an entry); with first-line indents the low
    lines do (the bodies of paragraphs).
    """
    low = min(ln.rel_x for ln in group)
    for ln in group:
        ln.high = ln.rel_x > low + 2 and ln.rel_x < low + 60
    high_n = sum(ln.high for ln in group)
    if high_n == 0:
        return "flat"
    hh = ll = 0
    for a, b in itertools.pairwise(group):
        if a.page == b.page and a.column == b.column:
            if a.high and b.high:
                hh += 1
            elif not a.high and not b.high:
                ll += 1
    return "hanging" if hh > ll else "indent"


def _layouts(lines: list[Line]) -> dict[tuple[int, float], str]:
    """Layout kind per (page, font size), falling back to the whole document's for thin pages."""
    by_size: dict[float, list[Line]] = {}
    by_page: dict[tuple[int, float], list[Line]] = {}
    for ln in lines:
        by_size.setdefault(ln.size, []).append(ln)
        by_page.setdefault((ln.page, ln.size), []).append(ln)
    overall = {size: _classify(group) for size, group in by_size.items()}
    out: dict[tuple[int, float], str] = {}
    for key, group in by_page.items():
        kind = _classify(group)
        if len(group) < 6 or (kind == "flat" and overall[key[1]] != "flat" and len(group) < 12):
            kind = overall[key[1]]
            # Re-flag against the whole document's left edge for this size.
            low = min(ln.rel_x for ln in by_size[key[1]])
            for ln in group:
                ln.high = ln.rel_x > low + 2 and ln.rel_x < low + 60
        out[key] = kind
    return out


def _set_rel_x(lines: list[Line]) -> None:
    """Left edges relative to the column start, so both columns of a page share one layout."""
    col0 = [ln.x0 for ln in lines if ln.column == 0]
    col1 = [ln.x0 for ln in lines if ln.column == 1]
    offset = (min(col1) - min(col0)) if col0 and col1 else 0.0
    for ln in lines:
        ln.rel_x = ln.x0 - offset if ln.column == 1 else ln.x0


def _modal_gaps(lines: list[Line]) -> dict[float, float]:
    gaps: dict[float, Counter] = {}
    for a, b in itertools.pairwise(lines):
        if a.page == b.page and a.column == b.column and a.size == b.size:
            g = round(a.y - b.y, 1)
            if g > 0:
                gaps.setdefault(a.size, Counter())[g] += 1
    # Lines are rarely set wider than twice their size; a size seen only in a few headings
    # has no reliable mode of its own (two one-line headings would read as one paragraph).
    return {s: min(c.most_common(1)[0][0], 1.8 * s) for s, c in gaps.items()}


_SENTENCE_END = re.compile(r"[.!?]$")
# Abbreviations that end a line without ending its sentence ("(vgl.", "et al.", "pp.").
_ABBREVIATION_END = re.compile(
    r"(?:^|[\s(\[])(?:vgl|bzw|cf|ca|al|pp|vs|e\.g|i\.e|z\.\s?B|u\.\s?a|ff|Hrsg|[Vv]ol|[Nn]o|eds?|S|p)\.$"
)


def _ends_sentence(text: str) -> bool:
    """Whether a line ends a sentence: a full stop outside brackets, not an abbreviation's."""
    if not _SENTENCE_END.search(text) or _ABBREVIATION_END.search(text):
        return False
    # An unclosed bracket ("(vgl. Lübke 2024;" ...) holds the sentence open.
    return text.count("(") <= text.count(")") and text.count("[") <= text.count("]")


_REF_START = re.compile(
    r"^(?:\[\d+\]|\d{1,4}\.\s|[^\W\d_][\w'\u2019-]*(?:\s[a-z]{1,4})*,\s(?:[A-Z]\.|[^\W\d_]+[;,\s]))"
)


def _gap_breaks(a: Line, b: Line, gaps: dict[float, float]) -> bool:
    """Whether ``b`` is set apart from ``a`` (same flow) by more than a line's spacing."""
    gap = a.y - b.y
    normal = gaps.get(a.size, gap)
    return gap > normal * 1.2 + 0.5 or gap < -1


def _set_regions(lines: list[Line], gaps: dict[float, float]) -> dict[int, tuple[str, float]]:
    """Cut the lines into regions; classify each as 'hanging', 'indent' or 'flat' with its
    left edge.

    A region is a run of lines of one size in one flow (page and column) with no paragraph gap:
    a reference list, or the paragraphs of a page set without space between them. Reading the
    layout per region rather than per page keeps a hanging reference list apart from the body
    text printed above it on the same page.
    """
    kinds: dict[int, tuple[str, float]] = {}
    group: list[Line] = []
    region = 0

    def classify() -> None:
        if not group:
            return
        low = min(ln.rel_x for ln in group)
        kinds[region] = (_region_kind(group, low), low)

    prev: Line | None = None
    for ln in lines:
        if prev is not None and (
            prev.page != ln.page
            or prev.column != ln.column
            or abs(prev.size - ln.size) > 0.3
            or _gap_breaks(prev, ln, gaps)
        ):
            classify()
            group = []
            region += 1
        ln.region = region
        group.append(ln)
        prev = ln
    classify()
    return kinds


def _region_kind(group: list[Line], low: float) -> str:
    high = [low + 2 < ln.rel_x < low + 60 for ln in group]
    if not any(high):
        return "flat"
    hh = sum(1 for x, y in itertools.pairwise(high) if x and y)
    ll = sum(1 for x, y in itertools.pairwise(high) if not x and not y)
    if hh != ll:
        return "hanging" if hh > ll else "indent"
    # Too few lines to count runs: an entry starts low, a paragraph starts indented.
    return "indent" if high[0] else "hanging"


def _entry_ends(a: Line, b: Line, right: float, *, page_break: bool = False) -> bool:
    """Whether a paragraph or entry ends after ``a`` and ``b`` starts the next, by content.

    The cue where the layout gives none (a page break, a list set flush left without gaps):
    ``a`` ends a sentence or a URL and is short of the right margin, or ``b`` opens like an
    entry (``[12]``, ``12.``, ``Surname, I.``). At a page break, where no gap can tell,
    a short last line ends its paragraph even without a full stop (DIN 1505-2 entries end in
    a page range or an ISBN).
    """
    if _URL_START.match(b.text):
        return False  # a DOI or URL wrapped onto the next line still belongs to its entry
    url = _URLISH.search(a.text)
    if url and (
        a.text[-1] in "-_=?&#~"
        or (a.text[-1] == "/" and not b.text[:1].isupper() and b.text[:1] != "[")
    ):
        return False  # a URL broken inside itself
    # The line was ended on purpose if the next line's first word would have fitted on it
    # (widths are estimated from the glyph count, hence the margin).
    word = b.text.split(" ", 1)[0]
    room = right - a.x1 - 0.05 * max(right - a.x0, 1)
    short = room > (len(word) + 1) * b.size * 0.5
    if not (url or _ends_sentence(a.text)):
        return page_break and short and a.text[-1] not in ",;:-\u2013("
    return bool(short or _REF_START.match(b.text))


def _joins(
    a: Line,
    b: Line,
    layouts,
    kinds: dict[int, tuple[str, float]],
    gaps,
    rights: dict,
    col_right: float,
) -> bool:
    """Whether line ``b`` continues the paragraph of line ``a``."""
    if abs(a.size - b.size) > 0.3:
        return False
    if b.labelled:
        # A label set apart from its text opens a list item, wherever the label stands
        # (right-aligned numbers move "[9]" right of "[10]").
        return False
    same_flow = a.page == b.page and a.column == b.column
    if same_flow:
        if _gap_breaks(a, b, gaps):
            return False
        kind, low = kinds.get(a.region, ("flat", 0.0))
        dx = b.rel_x - a.rel_x
        if kind == "hanging":
            # Every line at the left edge opens an entry, even after a one-line entry.
            return b.rel_x > low + 2
        if kind == "indent":
            return dx < 2
        if abs(dx) > 2:
            return False
        return not _entry_ends(a, b, rights.get((a.page, a.column), col_right))
    # A page or column break: no gap to go by, so use the indents and the line ends. A hanging
    # list on either side decides by its own left edge (an entry opens flush with it).
    for line in (a, b):
        kind, low = kinds.get(line.region, ("flat", 0.0))
        if kind == "hanging":
            return b.rel_x > low + 2
    kind_b, low_b = kinds.get(b.region, ("flat", 0.0))
    if kind_b == "indent":
        return b.rel_x <= low_b + 2  # an indented line opens a paragraph
    if kinds.get(a.region, ("flat", 0.0))[0] == "flat" and kind_b == "flat":
        # Both sides set flush: only the content can tell (the page's indents elsewhere,
        # in captions or lists, say nothing about these lines).
        return not _entry_ends(a, b, rights.get((a.page, a.column), col_right), page_break=True)
    kind = layouts.get((b.page, b.size), "flat")
    if kind == "hanging":
        return b.high
    if kind == "indent":
        return not b.high
    return not _entry_ends(a, b, rights.get((a.page, a.column), col_right), page_break=True)


_URL_START = re.compile(r"^(?:https?://|doi:|DOI:?\s|10\.\d{4,9}/)", re.IGNORECASE)
_URLISH = re.compile(r"(?:https?://|doi:\s*|10\.\d{4,9}/)\S+$", re.IGNORECASE)


def pdf_paragraphs(
    data: bytes,
    *,
    max_pages: int = DEFAULT_LIMITS.pdf_pages,
    max_seconds: float = DEFAULT_LIMITS.pdf_seconds,
    max_chars: int = DEFAULT_LIMITS.max_text_chars,
) -> list[tuple[str, str]]:
    """The PDF's text as ``(kind, text)`` paragraphs in reading order; kind is 'h' or 'p'.

    Refuses a PDF of more than ``max_pages`` pages, one whose text takes more than
    ``max_seconds`` (wall clock) to read, or holds more than ``max_chars`` characters.
    """
    started = time.monotonic()
    deadline = started + max_seconds
    reader = _open(data, max_pages)
    pages: list[list[Line]] = []
    width = height = 0.0
    total = 0
    fonts = _FONTS.set({})
    try:
        for i, page in enumerate(reader.pages):
            if time.monotonic() > deadline:
                raise _Overtime
            lines, width, height = _page_lines(page, i, deadline)
            total += sum(len(ln.text) for ln in lines)
            if total > max_chars:
                raise AnalysisInputError(
                    f"The PDF holds {total:,} characters of text in its first {i + 1:,} "
                    f"pages; the limit is {max_chars:,}."
                )
            pages.append(lines)
    except AnalysisInputError:
        raise
    except _Overtime:
        raise AnalysisInputError(
            f"Reading the PDF's text took more than {max_seconds:,g} seconds (stopped at page "
            f"{len(pages) + 1:,} of {len(reader.pages):,}); the limit is {max_seconds:,g} seconds."
        ) from None
    except Exception as exc:  # corrupt content streams surface only while reading pages
        raise AnalysisInputError("The PDF is damaged and its text cannot be read.") from exc
    finally:
        _FONTS.reset(fonts)
    return page_paragraphs(pages, width, height)


def page_paragraphs(
    pages: list[list[Line]], width: float = 0.0, height: float = 0.0
) -> list[tuple[str, str]]:
    """Paragraphs from the positioned lines of each page (``width`` x ``height`` points).

    The layout half of :func:`pdf_paragraphs`, apart so that it can be fed the positions of a
    real page.
    """
    sizes: Counter[float] = Counter()
    for lines in pages:
        for ln in lines:
            sizes[ln.size] += len(ln.text)
    if not sizes:
        raise AnalysisInputError(
            "The PDF contains no extractable text (is it a scan?). Upload a PDF with a text layer."
        )
    body_size = sizes.most_common(1)[0][0]
    _strip_furniture(pages, height or 842.0, body_size)
    ordered: list[Line] = []
    for lines in pages:
        ordered.extend(_order_columns(lines, width or 595.0))
    if not ordered:
        raise AnalysisInputError("The PDF contains no extractable text.")
    _set_rel_x(ordered)
    layouts = _layouts(ordered)
    gaps = _modal_gaps(ordered)
    col_right: dict[tuple[int, int], float] = {}
    for ln in ordered:
        key = (ln.page, ln.column)
        col_right[key] = max(col_right.get(key, 0.0), ln.x1)
    doc_right = Counter(round(v) for v in col_right.values()).most_common(1)[0][0]
    kinds = _set_regions(ordered, gaps)
    # The right margin per flow, from its longer lines (x1 is an estimate from the glyph count,
    # so the longest lines overshoot it).
    ends: dict[tuple[int, int], list[float]] = {}
    for ln in ordered:
        if len(ln.text) > 20:
            ends.setdefault((ln.page, ln.column), []).append(ln.x1)
    rights = {k: sorted(v)[int(len(v) * 0.75)] for k, v in ends.items() if len(v) >= 3}

    paragraphs: list[tuple[str, str]] = []
    buf: list[str] = []
    prev: Line | None = None

    def flush(kind_of: Line) -> None:
        if buf:
            text = _join_lines(buf)
            kind = "h" if kind_of.size > body_size * 1.05 and len(text) < 200 else "p"
            paragraphs.append((kind, text))
            buf.clear()

    for ln in ordered:
        if prev is not None and not _joins(prev, ln, layouts, kinds, gaps, rights, doc_right):
            flush(prev)
        buf.append(ln.text)
        prev = ln
    if prev is not None:
        flush(prev)
    return paragraphs


_URLISH_END = re.compile(r"(?:doi|https?://|10\.\d{4,9}/)\S*-$", re.IGNORECASE)


def _join_lines(lines: list[str]) -> str:
    parts: list[str] = []
    for i, text in enumerate(lines):
        if i and parts[-1].endswith("-") and _URLISH_END.search(parts[-1]) and text[:1].isalnum():
            # A DOI or URL broken at one of its own hyphens: keep the hyphen, drop the break.
            parts[-1] += text
        else:
            parts.append(text)
    return normalize("\n".join(parts))
