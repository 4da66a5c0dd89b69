"""Turn what an HTML document's classes and ids mean into structure, before sanitising.

The sanitiser drops ``id`` and ``class`` from user HTML (a thesis could reuse the report page's
own ids and classes), yet several of them carry meaning the parser needs:

* citeproc's numbered bibliography puts the number in a block of its own
  (``<div class="csl-entry"><div class="csl-left-margin">[1]</div>
  <div class="csl-right-inline">Author ...</div></div>``); the inner blocks become inline spans
  separated by a space, so the entry reads ``[1] Author ...`` as one paragraph, as a printed
  list does; paragraphs inside table cells likewise (Word's numbered lists saved as HTML
  tables: ``<td><p>[1]</p></td><td><p>Author ...</p></td>``), since a row reads as one block;
* footnote and endnote containers (``class="footnotes"``, ``id="fn1"``, Word's ``id="ftn1"``)
  and note-number links (``class="footnote-ref"``, ``id="fnref1"``) are given one of a few
  canonical class names (:data:`CANONICAL_CLASSES`), the only classes the sanitiser keeps.

The pass also bounds the nesting depth (a document of 100,000 nested ``<div>`` costs minutes in
any HTML parser) and the number of paragraphs (each costs about 2 KB in the sanitiser, the
parser and the report page, however short it is). It reuses the tokenizer of
:mod:`jobs.analysis.blocks`, so it is one linear scan.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping

from .blocks import (
    _TOKEN,
    BLOCK_TAGS,
    NOTE_CLASSES,
    SKIP_CLASS,
    VOID_TAGS,
    _attrs,
    serialize_start,
)
from .errors import AnalysisInputError
from .limits import DEFAULT_LIMITS

# A note container's canonical class, a note-number link's, and extraction's own skipped
# footnote number (DOCX). Nothing else survives sanitising.
NOTE_CLASS = "footnote"
NOTE_REF_CLASS = "footnote-ref"
CANONICAL_CLASSES = frozenset({NOTE_CLASS, NOTE_REF_CLASS, SKIP_CLASS})

_NOTE_ID = re.compile(r"^(?:footnotes?|endnotes?|_?ftn\d+|_?edn\d+|fn:?\d+)$", re.IGNORECASE)
_NOTE_REF = re.compile(
    r"(?:^|[#:_\-])(?:fn|footnote|endnote|note|ftn|edn)(?:-?ref|\d|:|$)", re.IGNORECASE
)
_NOTE_REF_CLASS = re.compile(r"^(?:footnote-?ref|fnref|noteref|endnote-?ref)", re.IGNORECASE)
# Elements HTML closes implicitly (an unclosed <p> or <li> does not nest in a browser), so
# they do not count towards the nesting depth.
_IMPLIED_END = frozenset(
    {"p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "tbody", "thead", "tfoot"}
)
_RAW_TEXT = frozenset(
    {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"}
)
_CSL_ENTRY = "csl-entry"
# Block tags flattened inside one bibliography entry or one table cell (a row's cells already
# form one block: Word's "[1] | Author ..." tables keep their paragraphs in the cells).
_ENTRY_INNER = frozenset({"div", "p", "section"})
_CELLS = frozenset({"td", "th"})

DEFAULT_MAX_DEPTH = 400


def _canonical(
    tag: str,
    attrs: list[tuple[str, str | None]],
    keep_attributes: Mapping[str, Collection[str]] | None = None,
) -> list[tuple[str, str | None]]:
    """The element's attributes with ``class`` replaced by its canonical meaning (or none);
    with ``keep_attributes``, only those it lists for the tag besides."""
    amap = {k: v or "" for k, v in attrs}
    classes = set(amap.get("class", "").split())
    ident = amap.get("id", "")
    keep: list[str] = []
    if SKIP_CLASS in classes:
        keep.append(SKIP_CLASS)
    if NOTE_CLASSES.intersection(c.lower() for c in classes) or _NOTE_ID.match(ident):
        keep.append(NOTE_CLASS)
    elif tag in ("a", "sup", "span") and (
        any(_NOTE_REF_CLASS.match(c) for c in classes)
        or (ident and _NOTE_REF.search(ident) and not _NOTE_ID.match(ident))
    ):
        keep.append(NOTE_REF_CLASS)
    if keep_attributes is None:
        out = [(k, v) for k, v in attrs if k not in ("class", "id")]
    else:
        kept = keep_attributes.get(tag, ())
        out = [(k, v) for k, v in attrs if k in kept and k not in ("class", "id")]
    if keep:
        out.append(("class", " ".join(keep)))
    return out


# Opening one of these closes an open element of the listed kinds first (HTML's implied end
# tags, simplified): what a browser does, and it keeps the open-element stack short.
_BLOCKISH = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "div",
        "dl",
        "fieldset",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "ul",
    }
)
_CLOSES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # opening tag: (open tags it closes, tags that stop the search)
    "li": (frozenset({"li", "p"}), frozenset({"ol", "ul", "menu"})),
    "dt": (frozenset({"dt", "dd", "p"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd", "p"}), frozenset({"dl"})),
    "tr": (frozenset({"tr", "td", "th"}), frozenset({"table", "tbody", "thead", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "tbody": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset({"table"})),
    "thead": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset({"table"})),
    "tfoot": (frozenset({"tbody", "thead", "tfoot", "tr", "td", "th"}), frozenset({"table"})),
    "option": (frozenset({"option"}), frozenset({"select", "optgroup"})),
    "optgroup": (frozenset({"option", "optgroup"}), frozenset({"select"})),
}
_P_ONLY = (frozenset({"p"}), frozenset())


class _Stack:
    """Open elements with the counters the pass needs, kept in step on every push and pop."""

    def __init__(self, out: list[str], max_depth: int) -> None:
        self.out = out
        self.max_depth = max_depth
        # (tag, counts towards depth, flattened inside an entry, opens an entry)
        self.items: list[tuple[str, bool, bool, bool]] = []
        self.depth = 0
        self.entries = 0

    def push(self, tag: str, flat: bool, opens: bool) -> None:
        counted = tag not in _IMPLIED_END
        self.depth += counted
        if self.depth > self.max_depth:
            raise AnalysisInputError(
                f"The HTML nests elements more than {self.max_depth:,} deep; the limit is "
                f"{self.max_depth:,}."
            )
        self.entries += opens
        self.items.append((tag, counted, flat, opens))

    def pop(self) -> str:
        tag, counted, flat, opens = self.items.pop()
        self.depth -= counted
        self.entries -= opens
        self.out.append("</span> " if flat else f"</{tag}>")
        return tag

    def close_to(self, tag: str) -> None:
        """An end tag: close up to the matching open element, if there is one."""
        # The stack stays short (implied ends are applied), so this scan is cheap.
        if any(t == tag for t, *_ in self.items):
            while self.items and self.pop() != tag:
                pass

    def close_implied(self, tag: str) -> None:
        rule = _CLOSES.get(tag) or (_P_ONLY if tag in _BLOCKISH else None)
        if rule is None:
            return
        closes, stops = rule
        # Look down through the implicitly closed elements only; close to the deepest match.
        target = -1
        for i in range(len(self.items) - 1, -1, -1):
            t = self.items[i][0]
            if t in closes:
                target = i
            elif t in stops or t not in _IMPLIED_END:
                break
        while target >= 0 and len(self.items) > target:
            self.pop()


def prepare_html(
    raw: str,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_paragraphs: int = DEFAULT_LIMITS.max_paragraphs,
    keep_attributes: Mapping[str, Collection[str]] | None = None,
) -> str:
    """Rewrite ``raw`` HTML so that its meaningful classes survive sanitising as structure.

    Raises :class:`AnalysisInputError` if elements nest deeper than ``max_depth``, or once
    more than ``max_paragraphs`` block-level elements have opened (table cells and blocks
    flattened into an entry or a cell join their row's or entry's paragraph, so they do not
    count): before the sanitiser and the parser have built anything per paragraph.

    ``keep_attributes`` (tag → attribute names): drop every other attribute here, in this
    linear pass, rather than leave it to the sanitiser, whose parser spends time quadratic in
    the number of attributes on one element (one ``<p>`` with 200,000 attributes: 65 s of
    CPU in nh3, against under a second with them dropped here).
    """
    out: list[str] = []
    stack = _Stack(out, max_depth)
    paragraphs = 0
    lower: str | None = None
    pos = 0
    n = len(raw)
    while pos < n:
        m = _TOKEN.match(raw, pos)
        pos = m.end()
        name = m.group(2)
        if name:
            tag = name.lower()
            if m.group(1):
                if tag not in VOID_TAGS:
                    stack.close_to(tag)
                continue
            attrs = _attrs(m.group(3))
            if tag in VOID_TAGS or m.group(3).rstrip().endswith("/"):
                out.append(serialize_start(tag, _canonical(tag, attrs, keep_attributes)))
                continue
            stack.close_implied(tag)
            classes = next((v or "" for k, v in attrs if k == "class"), "").lower().split()
            flat = bool(stack.entries) and tag in _ENTRY_INNER
            if tag in BLOCK_TAGS and not flat and tag not in _CELLS:
                paragraphs += 1
                if paragraphs > max_paragraphs:
                    raise AnalysisInputError(
                        f"The document has more than {max_paragraphs:,} paragraphs; the limit "
                        f"is {max_paragraphs:,}."
                    )
            stack.push(tag, flat, _CSL_ENTRY in classes or tag in _CELLS)
            out.append(
                " <span>" if flat else serialize_start(tag, _canonical(tag, attrs, keep_attributes))
            )
            if tag in _RAW_TEXT:
                if lower is None:
                    lower = raw.lower()
                end = lower.find(f"</{tag}", pos)
                end = n if end < 0 else end
                out.append(html.escape(raw[pos:end], quote=False))
                pos = end
        elif m.group(4) is not None:
            out.append(m.group(4))  # text stays as written (entities included)
        elif m.group(0) == "<":
            out.append("&lt;")
    while stack.items:
        stack.pop()
    return "".join(out)
