"""Text normalisation shared by extraction, parsing and annotation.

A citation marker must read the same whatever the source format did to it: soft hyphens and
zero-width characters dropped, ligature glyphs spelled out, every kind of white space (no-break
spaces included) collapsed to one space, and a hyphen at a line end between two letters joined
(``Morten-\\nsen`` -> ``Mortensen``). Two implementations of the same rules live here: a fast one
built from regular expressions (used by parsing) and a character walk that also returns, for every
output character, the index of the input character it came from (used to place ``<mark>`` tags
back into the HTML). A property test keeps the two in step.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that carry no visible text and only break matching.
INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff\u180e"
LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}
# Horizontal spaces other than U+0020 that word processors and PDF producers emit.
SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"

_TRANSLATE = {ord(c): None for c in INVISIBLE}
_TRANSLATE.update({ord(k): v for k, v in LIGATURES.items()})
_TRANSLATE.update({ord(c): " " for c in SPACES})

_LETTER = r"[^\W\d_]"
# A hyphen at a line end between two letters: the line break came from justification.
_LINE_HYPHEN = re.compile(rf"(?<={_LETTER})-[ \t]*\r?\n\s*(?={_LETTER})")
_WS = re.compile(r"\s+")


_SPECIAL = re.compile("[" + re.escape(INVISIBLE + "".join(LIGATURES) + SPACES) + "]")


def clean_chars(text: str) -> str:
    """Drop invisible characters, spell out ligatures and turn exotic spaces into plain ones."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
        if _SPECIAL.search(text):
            # str.translate with a dict is slow; most text needs no translation at all.
            text = text.translate(_TRANSLATE)
    return text


def join_line_hyphens(text: str) -> str:
    """Join words split by a hyphen at a line end (``deci-\\nsion`` -> ``decision``)."""
    return _LINE_HYPHEN.sub("", text)


def normalize(text: str) -> str:
    """Normalise a block of extracted text to the canonical single-line form."""
    return _WS.sub(" ", join_line_hyphens(clean_chars(text))).strip()


def line_starts(raw: str, text: str) -> tuple[int, ...]:
    """Offsets in ``text`` (``normalize(raw)``) at which a line of ``raw`` begins, first excepted.

    Lines are cut where :func:`normalize` collapsed a newline; a hyphenated line end that
    :func:`normalize` joins is no break. Empty tuple if the offsets cannot be reconstructed.
    """
    starts: list[int] = []
    pos = 0
    parts = 0
    for line in join_line_hyphens(clean_chars(raw)).split("\n"):
        t = _WS.sub(" ", line).strip()
        if not t:
            continue
        if parts:
            pos += 1  # the single space that replaced the line break
            starts.append(pos)
        pos += len(t)
        parts += 1
    # Any other white space normalisation would shift the offsets; then there are none.
    return tuple(starts) if pos == len(text) else ()


def _is_letter(ch: str) -> bool:
    return ch.isalpha()


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Like :func:`normalize`, plus the source index of every output character.

    ``text`` must already be NFC (extraction stores NFC); composing here would shift indices.
    """
    out: list[str] = []
    src: list[int] = []
    n = len(text)
    i = 0
    pending_space = -1  # source index of a collapsed run of white space, -1 if none
    while i < n:
        ch = text[i]
        if ch in INVISIBLE:
            i += 1
            continue
        if ch == "-" and pending_space < 0 and out and _is_letter(out[-1]):
            # Look ahead for "-", optional blanks, a newline, any white space, then a letter.
            j = i + 1
            while j < n and (text[j] in " \t" or text[j] in SPACES or text[j] in INVISIBLE):
                j += 1
            if j < n and text[j] == "\r":
                j += 1
            if j < n and text[j] == "\n":
                k = j + 1
                while k < n and (text[k].isspace() or text[k] in SPACES or text[k] in INVISIBLE):
                    k += 1
                if k < n and _is_letter(LIGATURES.get(text[k], text[k])[0]):
                    i = k
                    continue
        if ch.isspace() or ch in SPACES:
            if pending_space < 0:
                pending_space = i
            i += 1
            continue
        if pending_space >= 0:
            if out:
                out.append(" ")
                src.append(pending_space)
            pending_space = -1
        rep = LIGATURES.get(ch, ch)
        for r in rep:
            out.append(r)
            src.append(i)
        i += 1
    return "".join(out), src


def fold(name: str) -> str:
    """Comparison key for surnames: case-folded, one apostrophe, no stray punctuation."""
    name = unicodedata.normalize("NFC", name).replace("\u2019", "'").replace("`", "'")
    return name.casefold().strip(" .,;:")
