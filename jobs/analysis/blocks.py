"""Walk sanitised HTML into blocks (paragraphs, headings, list items, table rows).

The stored ``doc_html`` is the single source both for parsing (which needs each paragraph's plain
text) and for the report page (which marks every citation in place). Both read it through this
walker, so a citation's ``(paragraph, start, end)`` computed by the parser points at the same
characters when the annotator puts a ``<mark>`` around them.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from .text import line_starts, normalize, normalize_with_map

BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
VOID_TAGS = frozenset({"br", "hr", "img", "wbr", "col", "area", "input", "meta", "link", "source"})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Footnote reference numbers inserted by extraction; they are not part of the prose.
SKIP_CLASS = "fnref"
# Containers of footnotes or endnotes: extraction's <aside class="footnote"> (DOCX), pandoc's
# <section class="footnotes">, Python-Markdown's <div class="footnote">, Word's <div id="ftn1">.
NOTE_CLASSES = frozenset({"footnote", "footnotes", "endnote", "endnotes"})
_NOTE_ID = re.compile(r"^(?:footnotes?|endnotes?|_?ftn\d+|_?edn\d+)$", re.IGNORECASE)
# A link or superscript that is a note's number, not a citation ("#fn1", "fnref:1", "_ftn1",
# "footnote-ref", "cite_note-3").
_NOTE_REF = re.compile(r"(?:^|[#:_\-])(?:fn|footnote|endnote|note|ftn|edn)", re.IGNORECASE)


def _is_note_ref(attrs: dict[str, str | None]) -> bool:
    return any(_NOTE_REF.search(attrs.get(name) or "") for name in ("href", "id", "class"))


@dataclass(slots=True)
class Block:
    """One paragraph-like unit of the document, with its normalised text.

    Slotted, and without a list of its own unless the annotator keeps the pieces: a document
    holds one per paragraph in every step that reads it, and a list and an attribute dict of
    their own cost about 100 bytes a paragraph more (150,000 paragraphs are allowed).
    """

    index: int
    tag: str
    text: str
    number: int | None = None  # position in an ordered list, if it is an <ol> item
    # Offsets in ``text`` where a source line began (after a newline or ``<br>``). Most blocks
    # have none; a reference list typed one entry per line into a single paragraph needs them.
    breaks: tuple[int, ...] = ()
    # (event index or -1 for a synthetic separator, text) pieces; only kept for annotation.
    pieces: Sequence[tuple[int, str]] = field(default=(), repr=False)
    # ``(start, end)`` offsets in ``text`` of each superscript run (``<sup>``), where numeric
    # styles put their citation numbers ("effect.¹⁻³" typed as superscript digits).
    sups: tuple[tuple[int, int], ...] = ()
    # Inside a footnote or endnote, where short citations go without parentheses.
    note: bool = False
    # ``(start, end)`` offsets in ``text`` of inline code (``<code>``, ``<kbd>``, ``<samp>``):
    # "f(x, 2020)" or "x[3]" there is program text, never a citation.
    codes: tuple[tuple[int, int], ...] = ()

    @property
    def is_heading(self) -> bool:
        return self.tag in HEADINGS

    def lines(self) -> list[str]:
        """The block's text cut at its source line breaks (one item if it has none)."""
        cuts = [0, *self.breaks, len(self.text) + 1]
        return [self.text[a : b - 1] for a, b in pairwise(cuts)]


_TOKEN = re.compile(
    r"<!--.*?(?:-->|$)|<![^>]*>|<\?[^>]*>"
    r"|<(/?)([A-Za-z][A-Za-z0-9:-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>"
    r"|([^<]+)|<",
    re.S,
)
_ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?""")
_CODE_TAGS = frozenset({"code", "kbd", "samp"})
_RAW_TEXT = frozenset(
    {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"}
)


def _attrs(raw: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for m in _ATTR.finditer(raw):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        if value is None:
            value = m.group(4)
        out.append((m.group(1).lower(), html.unescape(value) if value is not None else None))
    return out


class _Walker:
    """Tokenises HTML with one regular expression (the stdlib parser is several times slower
    on a 300-page thesis) and feeds the tokens to the block bookkeeping below."""

    def feed(self, doc: str) -> None:
        pos = 0
        n = len(doc)
        while pos < n:
            m = _TOKEN.match(doc, pos)
            pos = m.end()
            if m.group(2):
                tag = m.group(2).lower()
                if m.group(1):
                    self.handle_endtag(tag)
                    continue
                raw = m.group(3)
                attrs = _attrs(raw)
                if raw.rstrip().endswith("/"):
                    self.handle_startendtag(tag, attrs)
                    continue
                self.handle_starttag(tag, attrs)
                if tag in _RAW_TEXT:
                    # Raw-text elements end only at their own end tag; never text for analysis.
                    end = doc.lower().find(f"</{tag}", pos)
                    end = n if end < 0 else end
                    if end > pos:
                        self.handle_data(doc[pos:end])
                    pos = end
            elif m.group(4) is not None:
                self.handle_data(html.unescape(m.group(4)))
            elif m.group(0) == "<":
                self.handle_data("<")

    def __init__(self, keep_events: bool) -> None:
        self.keep_events = keep_events
        self.events: list[tuple] = []
        self.blocks: list[Block] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.block_tags: list[str] = []
        self.lists: list[list] = []  # [tag, counter]
        self.pieces: list[tuple[int, str]] = []
        self.cur_tag = "p"
        self.cur_number: int | None = None
        self.skip_depth = 0
        self.in_row = 0
        self.raw_len = 0  # characters in self.pieces
        # [raw offset where an open <sup> began, whether it is a note number]
        self.sup_open: list[list] = []
        self.sup_spans: list[tuple[int, int]] = []  # raw (start, end) of closed ones
        self.code_open: list[int] = []  # raw offsets where open <code>/<kbd>/<samp> began
        self.code_spans: list[tuple[int, int]] = []
        self.note_levels: set[int] = set()  # stack depths of open note containers
        self.note_link_levels: set[int] = set()  # stack depths of open note-number links

    def _piece(self, idx: int, text: str) -> None:
        self.pieces.append((idx, text))
        self.raw_len += len(text)

    # -- block bookkeeping
    def _flush(self) -> None:
        if self.pieces:
            raw = "".join(t for _, t in self.pieces)
            text = normalize(raw)
            if text:
                self.blocks.append(
                    Block(
                        index=len(self.blocks),
                        tag=self.cur_tag,
                        text=text,
                        number=self.cur_number,
                        breaks=line_starts(raw, text) if "\n" in raw else (),
                        pieces=self.pieces if self.keep_events else (),
                        sups=_text_spans(raw, text, self.sup_spans) if self.sup_spans else (),
                        note=bool(self.note_levels),
                        codes=_text_spans(raw, text, self.code_spans) if self.code_spans else (),
                    )
                )
            self.pieces = []
        self.raw_len = 0
        self.sup_open = []
        self.sup_spans = []
        self.code_open = [0] * len(self.code_open)  # code still open goes on in the next block
        self.code_spans = []

    def _event(self, ev: tuple) -> int:
        if self.keep_events:
            self.events.append(ev)
            return len(self.events) - 1
        return -1

    # -- HTMLParser hooks
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._event(("start", tag, attrs))
        if tag in VOID_TAGS:
            if tag == "br" and not self.skip_depth:
                self._piece(-1, "\n")
            return
        attr_map = dict(attrs)
        classes = (attr_map.get("class") or "").split()
        skipped = SKIP_CLASS in classes
        if NOTE_CLASSES.intersection(classes) or _NOTE_ID.match(attr_map.get("id") or ""):
            self._flush()  # the note's text is a block of its own, never the paragraph's
            self.note_levels.add(len(self.stack))
        self.stack.append((tag, skipped))
        if skipped:
            self.skip_depth += 1
            return
        if tag == "a" and _is_note_ref(attr_map):
            self.note_link_levels.add(len(self.stack) - 1)
            if self.sup_open:
                self.sup_open[-1][1] = True
        if tag in _CODE_TAGS and not self.skip_depth:
            self.code_open.append(self.raw_len)
        if tag == "sup" and not self.skip_depth:
            self.sup_open.append(
                [self.raw_len, bool(self.note_link_levels) or _is_note_ref(attr_map)]
            )
        if tag in ("td", "th") and self.in_row:
            # Cells of one row form one block: a numbered reference table reads "[1] Author...".
            self._piece(-1, " ")
            return
        if tag in BLOCK_TAGS:
            self._flush()
            if tag == "tr":
                self.in_row += 1
            if tag in ("ol", "ul"):
                start = dict(attrs).get("start")
                counter = int(start) - 1 if start and start.strip().lstrip("-").isdigit() else 0
                self.lists.append([tag, counter])
            self.block_tags.append(tag)
            self.cur_tag = tag
            self.cur_number = None
            if tag == "li" and self.lists:
                lst = self.lists[-1]
                value = dict(attrs).get("value")
                if value and value.strip().lstrip("-").isdigit():
                    lst[1] = int(value)
                else:
                    lst[1] += 1
                if lst[0] == "ol":
                    self.cur_number = lst[1]

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._event(("start", tag, attrs))
        if tag == "br" and not self.skip_depth:
            self._piece(-1, "\n")

    def handle_endtag(self, tag: str) -> None:
        self._event(("end", tag))
        if tag in VOID_TAGS:
            return
        # Tolerate mis-nesting: close up to the matching open tag, if there is one.
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            t, skipped = self.stack.pop()
            self.note_link_levels.discard(len(self.stack))
            if len(self.stack) in self.note_levels:
                # A note container closes: its text is a block of its own.
                self._flush()
                self.note_levels.discard(len(self.stack))
            if skipped:
                self.skip_depth -= 1
                if t == tag:
                    return
                continue
            if t in _CODE_TAGS and self.code_open:
                start = self.code_open.pop()
                if self.raw_len > start:
                    self.code_spans.append((start, self.raw_len))
            if t == "sup" and self.sup_open:
                start, note_number = self.sup_open.pop()
                if self.raw_len > start and not note_number:
                    self.sup_spans.append((start, self.raw_len))
            if t in ("td", "th") and self.in_row:
                if t == tag:
                    return
                continue
            if t in BLOCK_TAGS:
                self._flush()
                if t == "tr":
                    self.in_row -= 1
                if t in ("ol", "ul") and self.lists:
                    self.lists.pop()
                if self.block_tags:
                    self.block_tags.pop()
                self.cur_tag = self.block_tags[-1] if self.block_tags else "p"
                self.cur_number = None
            if t == tag:
                return

    def handle_data(self, data: str) -> None:
        idx = self._event(("data", data))
        if not self.skip_depth:
            self._piece(idx, data)

    def close(self) -> None:
        self._flush()


def _text_spans(raw: str, text: str, spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Raw ``(start, end)`` spans as offsets in ``text`` (``normalize(raw)``); none if the
    mapping cannot be rebuilt."""
    mapped_text, src = normalize_with_map(raw)
    if mapped_text != text:
        return ()
    out = []
    for start, end in sorted(spans):
        lo, hi = bisect_left(src, start), bisect_left(src, end)
        if hi > lo:
            out.append((lo, hi))
    return tuple(out)


def walk(doc_html: str, *, keep_events: bool = False) -> tuple[list[Block], list[tuple]]:
    """Split ``doc_html`` into blocks; with ``keep_events`` also return the parse events."""
    w = _Walker(keep_events)
    w.feed(doc_html)
    w.close()
    return w.blocks, w.events


def html_blocks(doc_html: str) -> list[Block]:
    """The blocks of ``doc_html`` in document order."""
    return walk(doc_html)[0]


def serialize_start(tag: str, attrs: list[tuple[str, str | None]]) -> str:
    parts = [tag]
    for name, value in attrs:
        if value is None:
            parts.append(name)
        else:
            parts.append(f'{name}="{html.escape(value, quote=True)}"')
    return "<" + " ".join(parts) + ">"


def serialize(events: list[tuple], inserts: dict[int, list[tuple[int, int, str, str]]]) -> str:
    """Rebuild HTML from parse events, wrapping ranges of data events.

    ``inserts`` maps a data event index to ``(start, end, open_tag, close_tag)`` ranges, sorted
    and non-overlapping.
    """
    out: list[str] = []
    for i, ev in enumerate(events):
        kind = ev[0]
        if kind == "start":
            out.append(serialize_start(ev[1], ev[2]))
        elif kind == "end":
            if ev[1] not in VOID_TAGS:
                out.append(f"</{ev[1]}>")
        else:
            data = ev[1]
            ranges = inserts.get(i)
            if not ranges:
                out.append(html.escape(data, quote=False))
                continue
            pos = 0
            for start, end, open_tag, close_tag in ranges:
                out.append(html.escape(data[pos:start], quote=False))
                out.append(open_tag)
                out.append(html.escape(data[start:end], quote=False))
                out.append(close_tag)
                pos = end
            out.append(html.escape(data[pos:], quote=False))
    return "".join(out)


def piece_offsets(pieces: Sequence[tuple[int, str]]) -> list[int]:
    """Start offset of each piece in the block's raw text."""
    offs = []
    pos = 0
    for _, t in pieces:
        offs.append(pos)
        pos += len(t)
    return offs


def locate(offsets: list[int], raw_pos: int) -> int:
    """Index of the piece that holds raw position ``raw_pos``."""
    return bisect_right(offsets, raw_pos) - 1
