"""Turn an uploaded file into sanitised HTML plus the plain text of every paragraph.

Formats are told apart by their bytes (``%PDF-``, a zip holding ``word/document.xml``, HTML tags,
Markdown structure), the file name being only a hint. Each reader produces HTML made of block
elements; the HTML is then sanitised with nh3 and its text normalised (soft hyphens, zero-width
characters, ligatures, line-end hyphenation), so that the stored ``doc_html`` alone is enough to
parse the citations again later.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from dataclasses import dataclass, field, replace

# Imported with the package, not when the first DOCX comes: the pipeline extracts in a child
# forked from the worker (jobs.durable.isolation), which would otherwise import mammoth again
# for every upload.
import mammoth
import nh3

from .blocks import Block, html_blocks, serialize, walk
from .docxlists import list_numbers, number_list_items
from .errors import AnalysisInputError
from .htmlprep import CANONICAL_CLASSES, prepare_html
from .limits import DEFAULT_LIMITS, Limits, megabytes
from .pdf import pdf_paragraphs
from .text import INVISIBLE, LIGATURES, clean_chars, join_line_hyphens

DEFAULT_MAX_BYTES = DEFAULT_LIMITS.max_bytes
# A DOCX is a zip: bound what it may expand to before anything reads it. Beyond these
# bomb checks, the XML a reader must parse is bounded by ``Limits.docx_part_bytes`` and
# ``Limits.docx_xml_bytes``.
MAX_ZIP_ENTRIES = 2000
MAX_ZIP_TOTAL = 300 * 1024 * 1024
MAX_ZIP_RATIO = 200

FORMATS = ("docx", "pdf", "html", "markdown", "text")

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "caption",
    "cite",
    "code",
    "dd",
    "del",
    "div",
    "dl",
    "dt",
    "em",
    "figcaption",
    "figure",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "ins",
    "li",
    "mark",
    "ol",
    "p",
    "pre",
    "q",
    "s",
    "section",
    "aside",
    "small",
    "span",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "u",
    "ul",
}
# No ``id`` and no free ``class``: user HTML must not reuse the report page's own ids and
# classes. What classes meant is turned into structure first (:mod:`jobs.analysis.htmlprep`);
# only its canonical class names survive.
ALLOWED_ATTRIBUTES = {
    "a": {"href"},
    "ol": {"start"},
    "li": {"value"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
}
DROP_WITH_CONTENT = {"script", "style", "title", "head", "noscript", "template", "iframe", "object"}


@dataclass
class ExtractedDocument:
    """The result of :func:`extract`: sanitised HTML and the paragraphs read from it."""

    filename: str
    format: str
    html: str
    blocks: list[Block] = field(default_factory=list, repr=False)

    @property
    def paragraphs(self) -> list[dict]:
        """Each paragraph's text with its position in :attr:`text` (paragraphs joined by a blank line)."""
        out = []
        pos = 0
        for b in self.blocks:
            out.append(
                {
                    "index": b.index,
                    "tag": b.tag,
                    "text": b.text,
                    "start": pos,
                    "end": pos + len(b.text),
                }
            )
            pos += len(b.text) + 2
        return out

    @property
    def text(self) -> str:
        """The plain text of the document, one paragraph per line pair."""
        return "\n\n".join(b.text for b in self.blocks)


def sanitize(raw_html: str, *, extra_attributes: dict[str, set[str]] | None = None) -> str:
    """Sanitise HTML with nh3 to the tags and attributes a report page may show.

    ``extra_attributes`` widens the allow-list per tag (the report's citation marks).
    """
    attributes = ALLOWED_ATTRIBUTES
    if extra_attributes:
        attributes = {**ALLOWED_ATTRIBUTES}
        for tag, names in extra_attributes.items():
            attributes[tag] = set(attributes.get(tag, set())) | names
    classes = {
        tag: set(CANONICAL_CLASSES)
        for tag in ALLOWED_TAGS
        if "class" not in attributes.get(tag, ())
    }
    return nh3.clean(
        raw_html,
        tags=ALLOWED_TAGS,
        clean_content_tags=DROP_WITH_CONTENT,
        attributes=attributes,
        allowed_classes=classes,
        url_schemes={"http", "https", "mailto"},
        strip_comments=True,
    )


_NEEDS_CLEANING = re.compile(
    "[" + INVISIBLE + "".join(LIGATURES) + r"\u00a0\u2000-\u200a\u202f\u3000]|-[ \t]*\r?\n"
)


def _normalize_text_nodes(safe_html: str) -> str:
    """Clean every text node of already-sanitised HTML (which stays safe: text is re-escaped)."""
    if not _NEEDS_CLEANING.search(safe_html):
        return safe_html
    _, events = walk(safe_html, keep_events=True)
    for i, ev in enumerate(events):
        if ev[0] == "data":
            events[i] = ("data", join_line_hyphens(clean_chars(ev[1])))
    return serialize(events, {})


# ---------------------------------------------------------------- format detection

_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_BINARY_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"\x1f\x8b": "a gzip archive",
    b"Rar!": "a RAR archive",
    b"7z\xbc\xaf": "a 7-Zip archive",
    b"{\\rtf": "an RTF document",
}
_HTML_START = re.compile(
    r"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b", re.I | re.S
)
_HTML_TAG = re.compile(r"</(?:p|div|h[1-6]|li|td|body|section|span|a)>", re.I)
_MD_SIGNAL = re.compile(
    r"^(?:#{1,6}\s|\s{0,3}(?:[-*+]|\d{1,4}[.)])\s|\s{0,3}>\s|={3,}\s*$|-{3,}\s*$)", re.M
)


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):  # before UTF-16's
        return data.decode("utf-32", errors="replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if b"\x00" in data[:4096]:
            raise AnalysisInputError(
                "The file is not a supported document (DOCX, PDF, HTML, Markdown or plain text)."
            ) from None
        text = data.decode("cp1252", errors="replace")
    sample = text[:20000]
    controls = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f")
    if sample and controls / len(sample) > 0.02:
        raise AnalysisInputError(
            "The file is not a supported document (DOCX, PDF, HTML, Markdown or plain text)."
        )
    return text


def detect_format(data: bytes, filename: str = "") -> str:
    """Tell the format from the content; the extension only breaks ties between text formats."""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return "docx"
    if data.startswith(_OLE):
        raise AnalysisInputError(
            "This is a legacy Word (.doc) file or a password-protected Office document. "
            "Save it as an unprotected .docx or PDF and upload it again."
        )
    for magic, what in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise AnalysisInputError(
                f"The file is {what}, not a thesis document (DOCX, PDF, HTML, Markdown or plain text)."
            )
    ext = filename.lower().rsplit(".", 1)[-1] if "." in filename else ""
    text = _decode(data[:65536])
    if _HTML_START.match(text):
        return "html"
    if ext in ("md", "markdown", "mdown", "mkd"):
        return "markdown"
    if len(_HTML_TAG.findall(text)) >= (1 if ext in ("html", "htm", "xhtml") else 5):
        return "html"
    # Bytes with a binary format's name that are neither that format nor recognisable HTML:
    # a damaged or renamed file. Reading it as plain text would report "no citations" where
    # the user needs to hear that the file is broken.
    if ext in ("docx", "pdf"):
        raise AnalysisInputError(
            f"The file is named .{ext} but is not a {ext.upper()} document (it may be damaged "
            "or renamed). Upload the original DOCX or PDF."
        )
    if ext == "txt":
        return "text"
    if len(_MD_SIGNAL.findall(text)) >= 3:
        return "markdown"
    return "text"


# ---------------------------------------------------------------- readers


def _check_zip(data: bytes, limits: Limits = DEFAULT_LIMITS) -> zipfile.ZipFile:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise AnalysisInputError("The DOCX file is damaged (not a readable zip archive).") from exc
    if len(infos) > MAX_ZIP_ENTRIES:
        raise AnalysisInputError(
            f"The DOCX file holds {len(infos)} parts (more than {MAX_ZIP_ENTRIES}); refusing a likely zip bomb."
        )
    total = 0
    for info in infos:
        if info.flag_bits & 0x1:
            raise AnalysisInputError(
                "The DOCX file is encrypted. Remove the password and upload it again."
            )
        total += info.file_size
        if info.file_size > 10 * 1024 * 1024 and info.file_size > MAX_ZIP_RATIO * max(
            info.compress_size, 1
        ):
            raise AnalysisInputError(
                "The DOCX file expands to far more than it weighs; refusing a likely zip bomb."
            )
    if total > MAX_ZIP_TOTAL:
        raise AnalysisInputError(
            f"The DOCX file would expand to {total // (1024 * 1024)} MB; refusing a likely zip bomb."
        )
    # The declared sizes bound what zipfile will inflate (it stops there and checks the CRC),
    # so they are a safe measure of the XML the reader would parse.
    xml_total = 0
    for info in infos:
        if not info.filename.endswith((".xml", ".rels")):
            continue
        xml_total += info.file_size
        if info.file_size > limits.docx_part_bytes:
            raise AnalysisInputError(
                f"The DOCX part {info.filename[:80]} holds {megabytes(info.file_size)} of XML; "
                f"the limit is {megabytes(limits.docx_part_bytes)}."
            )
    if xml_total > limits.docx_xml_bytes:
        raise AnalysisInputError(
            f"The DOCX file holds {megabytes(xml_total)} of XML; the limit is "
            f"{megabytes(limits.docx_xml_bytes)}."
        )
    names = {i.filename for i in infos}
    if "word/document.xml" not in names:
        if "EncryptedPackage" in names:
            raise AnalysisInputError(
                "The DOCX file is encrypted. Remove the password and upload it again."
            )
        raise AnalysisInputError(
            "The zip archive is not a Word document (no word/document.xml). Upload a .docx, PDF, "
            "HTML, Markdown or text file."
        )
    return zf


_FN_REF = re.compile(
    r'<sup><a href="#((?:footnote|endnote)-\d+)" id="(?:footnote|endnote)-ref-\d+">\[(\d+)\]</a></sup>'
)
_FN_ITEM = re.compile(r'<li id="((?:footnote|endnote)-\d+)">(.*?)</li>', re.S)
_FN_BACKLINK = re.compile(r'\s*<a href="#(?:footnote|endnote)-ref-\d+">\u2191</a>')
_BLOCK_END = re.compile(r"</(?:p|li|h[1-6]|td|th|blockquote)>")


def _place_notes(body: str) -> str:
    """Move mammoth's footnote/endnote list next to the paragraphs that cite the notes.

    Citations inside a note then come in reading order, right after the paragraph that refers to
    them, and the note number in the text no longer looks like a numeric citation.
    """
    notes: dict[str, str] = {}
    for m in _FN_ITEM.finditer(body):
        notes[m.group(1)] = _FN_BACKLINK.sub("", m.group(2)).strip()
    if not notes:
        return body
    # Drop the trailing note lists (mammoth appends footnotes, then endnotes).
    body = re.sub(r'<ol>(?:<li id="(?:footnote|endnote)-\d+">.*?</li>)+</ol>', "", body, flags=re.S)
    out: list[str] = []
    pos = 0
    pending: list[str] = []
    for m in _FN_REF.finditer(body):
        out.append(body[pos : m.start()])
        out.append(f'<sup class="fnref">{m.group(2)}</sup>')
        pos = m.end()
        note = notes.get(m.group(1))
        if note is not None:
            pending.append(f'<aside class="footnote" id="{m.group(1)}">{note}</aside>')
        end = _BLOCK_END.search(body, pos)
        nxt = _FN_REF.search(body, pos)
        if pending and (nxt is None or end is None or end.end() <= nxt.start()):
            stop = end.end() if end else len(body)
            out.append(body[pos:stop])
            out.extend(pending)
            pending = []
            pos = stop
    out.append(body[pos:])
    out.extend(pending)
    return "".join(out)


def _docx_html(data: bytes, limits: Limits = DEFAULT_LIMITS) -> str:
    zf = _check_zip(data, limits)
    zf.close()
    try:
        result = mammoth.convert_to_html(
            io.BytesIO(data),
            # Images are never shown in the report; do not base64 them into the HTML.
            convert_image=mammoth.images.img_element(lambda image: {}),
        )
    except Exception as exc:  # mammoth surfaces XML and zip errors of many kinds
        raise AnalysisInputError("The DOCX file is damaged and cannot be read.") from exc
    # Word's automatic numbers are not in the text; give each list item the one Word prints.
    return _place_notes(number_list_items(result.value, list_numbers(data)))


def _markdown_html(text: str) -> str:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = md.parse(text)
    # Keep an ordered list's numbers as written: "1. ... 3. ..." is a numbered reference list
    # with a gap, which HTML <ol> rendering would renumber.
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type in ("ordered_list_open", "ordered_list_close"):
            tok.tag = "div"
            if tok.type == "ordered_list_open":
                tok.attrs = {"class": "ol"}
                depth += 1
            else:
                depth -= 1
        elif tok.type == "list_item_open" and tok.info and tok.info.isdigit():
            tok.tag = "div"
            tok.attrs = {"class": "li"}
            for follower in tokens[i + 1 :]:
                if follower.type == "inline":
                    number = Token("text", "", 0, content=f"{tok.info}{tok.markup} ")
                    follower.children = [number, *(follower.children or [])]
                    break
                if follower.type == "list_item_close":
                    break
        elif tok.type == "list_item_close" and tok.markup in (".", ")"):
            tok.tag = "div"
    return md.renderer.render(tokens, md.options, {})


def _text_html(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    blank = sum(1 for ln in lines if not ln.strip())
    if blank * 10 < len(lines):
        chunks = [ln for ln in lines if ln.strip()]  # one paragraph per line
    else:
        chunks = [c for c in re.split(r"\n\s*\n", text) if c.strip()]
    return "\n".join(f"<p>{html.escape(c.strip(), quote=False)}</p>" for c in chunks)


def _pdf_html(data: bytes, limits: Limits = DEFAULT_LIMITS) -> str:
    out = []
    paragraphs = pdf_paragraphs(
        data,
        max_pages=limits.pdf_pages,
        max_seconds=limits.pdf_seconds,
        max_chars=limits.max_text_chars,
    )
    for kind, text in paragraphs:
        tag = "h2" if kind == "h" else "p"
        out.append(f"<{tag}>{html.escape(text, quote=False)}</{tag}>")
    return "\n".join(out)


def _too_much_text(n: int, limit: int) -> AnalysisInputError:
    return AnalysisInputError(
        f"The document holds {n:,} characters of text; the limit is {limit:,}."
    )


def extract(
    data: bytes, filename: str, *, max_bytes: int | None = None, limits: Limits | None = None
) -> ExtractedDocument:
    """Read an uploaded thesis into sanitised HTML and its paragraphs.

    ``limits`` bounds the work (:class:`~jobs.analysis.limits.Limits`; its defaults when
    omitted); ``max_bytes``, if given, overrides ``limits.max_bytes``. Raises
    :class:`AnalysisInputError` for empty, oversize, corrupt, encrypted, bomb-like or
    unsupported files, and for documents past a limit (the message names the limit and the
    document's figure).
    """
    limits = limits or DEFAULT_LIMITS
    if max_bytes is not None:
        limits = replace(limits, max_bytes=max_bytes)
    limit = limits.max_bytes
    if not data or not data.strip():
        raise AnalysisInputError("The file is empty.")
    if len(data) > limit:
        raise AnalysisInputError(
            f"The file is {len(data) / 1048576:.1f} MB; the limit is {limit / 1048576:.0f} MB."
        )
    fmt = detect_format(data, filename)
    if fmt == "pdf":
        raw = _pdf_html(data, limits)
    elif fmt == "docx":
        raw = _docx_html(data, limits)
    else:
        text = _decode(data)
        # HTML's markup is not text; its extracted text is measured below.
        if fmt != "html" and len(text) > limits.max_text_chars:
            raise _too_much_text(len(text), limits.max_text_chars)
        if fmt == "html":
            raw = text
        elif fmt == "markdown":
            raw = _markdown_html(text)
        else:
            raw = _text_html(text)
    prepared = prepare_html(
        raw,
        max_depth=limits.html_depth,
        max_paragraphs=limits.max_paragraphs,
        keep_attributes=ALLOWED_ATTRIBUTES,
    )
    safe = _normalize_text_nodes(sanitize(prepared))
    blocks = html_blocks(safe)
    if not blocks:
        raise AnalysisInputError("The document contains no text.")
    chars = sum(len(b.text) for b in blocks)
    if chars > limits.max_text_chars:
        raise _too_much_text(chars, limits.max_text_chars)
    return ExtractedDocument(filename=filename, format=fmt, html=safe, blocks=blocks)
