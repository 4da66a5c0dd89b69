"""The numbers Word prints in front of automatically numbered paragraphs.

A reference list numbered by Word (``w:numPr`` on each entry) has no number in its text: Word
draws ``[1]``, ``[2]`` from ``numbering.xml``. mammoth turns such paragraphs into ``<ol><li>``
and, when the list is interrupted by another paragraph, starts the next ``<ol>`` at 1 again,
while Word continues the count (and honours a list's own start value). This module counts the
way Word does and gives every list item its printed number as ``<li value="N">``, which the
block walker reads as the item's number.

Word's rule, simplified to what reference lists use: paragraphs of one abstract numbering
definition share one counter per level, whichever ``w:num`` instance they name; a level starts
at its ``w:start``; an instance with a ``w:startOverride`` restarts that level the first time
it is used; numbering a level resets the levels below it.
"""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree.ElementTree import ParseError, iterparse

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_LI = re.compile(r"<li>")


def _val(el, name: str) -> str | None:
    child = el.find(_W + name)
    return None if child is None else child.get(_W + "val")


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _definitions(xml: bytes) -> tuple[dict[str, str], dict[tuple[str, int], int], dict]:
    """numId -> abstractNumId, (abstractNumId, level) -> start, (numId, level) -> override."""
    abstract_of: dict[str, str] = {}
    starts: dict[tuple[str, int], int] = {}
    overrides: dict[tuple[str, int], int] = {}
    for _, el in iterparse(io.BytesIO(xml), events=("end",)):
        if el.tag == _W + "abstractNum":
            aid = el.get(_W + "abstractNumId") or ""
            for lvl in el.iter(_W + "lvl"):
                starts[aid, _int(lvl.get(_W + "ilvl"), 0)] = _int(_val(lvl, "start"), 1)
            el.clear()
        elif el.tag == _W + "num":
            nid = el.get(_W + "numId") or ""
            abstract_of[nid] = _val(el, "abstractNumId") or ""
            for ov in el.iter(_W + "lvlOverride"):
                start = _val(ov, "startOverride")
                if start is not None:
                    overrides[nid, _int(ov.get(_W + "ilvl"), 0)] = _int(start, 1)
            el.clear()
    return abstract_of, starts, overrides


def _list_paragraphs(xml: bytes) -> list[tuple[str, int]]:
    """(numId, level) of every numbered paragraph of the document body, in order."""
    out: list[tuple[str, int]] = []
    # Word writes numbering.xml into nearly every file, numbered paragraphs or not: a body
    # without the tag's name has none, and parsing it again (after mammoth) would only find
    # that out. UTF-16 XML spells the name with zero bytes between, so it is always parsed.
    if b"numPr" not in xml and not xml.startswith((b"\xff\xfe", b"\xfe\xff")):
        return out
    stack: list[str] = []
    for event, el in iterparse(io.BytesIO(xml), events=("start", "end")):
        if event == "start":
            stack.append(el.tag)
            continue
        stack.pop()
        # A tracked change keeps the paragraph's old properties; they number nothing.
        if el.tag == _W + "numPr" and _W + "pPrChange" not in stack:
            nid = _val(el, "numId")
            if nid is not None and nid != "0":
                out.append((nid, _int(_val(el, "ilvl"), 0)))
        if el.tag == _W + "p" and len(stack) <= 2:
            el.clear()  # body paragraphs are done with; keep memory flat
    return out


def list_numbers(data: bytes) -> list[int] | None:
    """Word's number for each numbered paragraph of a DOCX, in document order (None if the
    document has no numbering or cannot be read)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            if "word/numbering.xml" not in names:
                return None
            numbering = zf.read("word/numbering.xml")
            document = zf.read("word/document.xml")
        abstract_of, starts, overrides = _definitions(numbering)
        paragraphs = _list_paragraphs(document)
    except (zipfile.BadZipFile, KeyError, ParseError, OSError, ValueError):
        return None
    counters: dict[str, dict[int, int]] = {}
    used: set[str] = set()
    numbers: list[int] = []
    for nid, level in paragraphs:
        aid = abstract_of.get(nid, nid)
        levels = counters.setdefault(aid, {})
        if nid not in used:
            used.add(nid)
            for (oid, olevel), start in overrides.items():
                if oid == nid:
                    levels[olevel] = start - 1
        value = levels.get(level, starts.get((aid, level), 1) - 1) + 1
        levels[level] = value
        for deeper in [lv for lv in levels if lv > level]:
            del levels[deeper]
        numbers.append(value)
    return numbers


def number_list_items(html: str, numbers: list[int] | None) -> str:
    """Give mammoth's list items (``<li>``, one per numbered paragraph, in order) Word's
    numbers; the HTML is returned unchanged if the counts do not agree."""
    if not numbers:
        return html
    if len(_LI.findall(html)) != len(numbers):
        return html
    values = iter(numbers)
    return _LI.sub(lambda _: f'<li value="{next(values)}">', html)
