"""Hostile inputs for the analysis, built on demand: what an attacker (or a careless export)
uploads to make one job cost minutes or gigabytes.

Each :class:`Case` builds its bytes when asked (some are tens of MB) and says what must come of
them: ``"error"`` (a clear ``AnalysisInputError`` whose message matches ``match``), ``"ok"`` (a
completed analysis) or ``"bounded"`` (either of the two: the point is that it ends in bounded
time and memory). Used by tests/hostile/test_hostile.py and bench/hostile_bench.py.
"""

from __future__ import annotations

import io
import json
import random
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from xml.sax.saxutils import escape

from tests.analysis.builders import make_docx, make_pdf, zip_of

MB = 1024 * 1024
SYLLABLES = [
    "ba",
    "ke",
    "lo",
    "mi",
    "nu",
    "ra",
    "se",
    "ti",
    "vo",
    "wa",
    "zen",
    "dor",
    "fal",
    "gri",
    "hul",
    "jas",
    "kor",
    "lin",
    "mar",
    "nes",
    "pol",
]


@dataclass(frozen=True)
class Case:
    """One hostile input: ``build()`` gives ``(filename, bytes)``; ``kind`` thesis or library."""

    name: str
    build: Callable[[], tuple[str, bytes]]
    expect: str = "bounded"  # "error", "ok" or "bounded"
    match: str = ""  # a substring of the error message, when one is expected
    kind: str = "thesis"
    heavy: bool = False  # worth a run through the worker (end to end)


def _surname(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()


def invented(markers: int, entries: int, seed: int = 13) -> str:
    """A plain-text thesis: ``markers`` invented APA markers, then ``entries`` invented entries."""
    rng = random.Random(seed)
    refs = []
    seen = set()
    while len(refs) < entries:
        first, year = _surname(rng), rng.randint(1900, 2024)
        if (first, year) not in seen:
            seen.add((first, year))
            refs.append((first, _surname(rng), year))
    body, sentence = [], []
    for i in range(markers):
        first, _second, year = refs[i % len(refs)]
        sentence.append(f"A claim about the matter ({first}, {year}).")
        if len(sentence) == 8:
            body.append(" ".join(sentence))
            sentence = []
    if sentence:
        body.append(" ".join(sentence))
    listing = [
        f"{a}, A., & {b}, B. ({y}). On the study of things {i}. Journal of Studies, {i % 90}(2), 1-9."
        for i, (a, b, y) in enumerate(refs)
    ]
    return "\n\n".join(["Introduction", *body, "References", *listing]) + "\n"


def numbered(markers: int, entries: int) -> str:
    body = [
        " ".join(f"A result was shown [{(i + k) % entries + 1}]." for k in range(8))
        for i in range(0, markers, 8)
    ]
    listing = [
        f'[{i + 1}] A. Author{i}, "Title {i}," J. Things, vol. {i % 50}, pp. 1-9, 2020.'
        for i in range(entries)
    ]
    return "\n\n".join(["Introduction", *body, "References", *listing]) + "\n"


SMALL = invented(12, 6, seed=1)


def _text(name: str, text: str | bytes) -> Callable[[], tuple[str, bytes]]:
    return lambda: (name, text if isinstance(text, bytes) else text.encode())


def _lazy_text(name: str, make: Callable[[], str | bytes]) -> Callable[[], tuple[str, bytes]]:
    def build() -> tuple[str, bytes]:
        text = make()
        return name, text if isinstance(text, bytes) else text.encode()

    return build


def _with_refs(body: str) -> str:
    return body + "\n\nReferences\n\nSmith, J. (2020). A title. Journal, 1, 2.\n"


def _prose(chars: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9)))
        for _ in range(3000)
    ]
    out, size = [], 0
    while size < chars:
        para = " ".join(rng.choice(words) for _ in range(120)) + "."
        out.append(para)
        size += len(para) + 2
    return "\n\n".join(out)


# --- DOCX ------------------------------------------------------------------------------------

_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _docx_with_xml(document_xml: bytes, extra: dict[str, bytes] | None = None) -> bytes:
    base = zipfile.ZipFile(io.BytesIO(make_docx([["x"]])))
    files = {n: base.read(n) for n in base.namelist()}
    files["word/document.xml"] = document_xml
    files.update(extra or {})
    return zip_of(files)


def _docx_paragraphs(paragraphs: list[str]) -> bytes:
    body = "".join(
        f'<w:p><w:r><w:t xml:space="preserve">{escape(p)}</w:t></w:r></w:p>' for p in paragraphs
    )
    return f'<?xml version="1.0" encoding="UTF-8"?><w:document {_W}><w:body>{body}</w:body></w:document>'.encode()


def docx_xml_of_size(megabytes: float) -> bytes:
    """A DOCX whose document.xml is ``megabytes`` of ordinary prose paragraphs (it compresses
    like any document: no ratio check fires)."""
    text = _prose(int(megabytes * MB * 0.8))
    return _docx_with_xml(_docx_paragraphs(text.split("\n\n")))


def docx_zero_bomb() -> bytes:
    """A 500 MB member of spaces, compressed about 1000:1."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", b"<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as member:
            chunk = b" " * MB
            for _ in range(500):
                member.write(chunk)
    return buf.getvalue()


def docx_nested_zip() -> bytes:
    inner = docx_xml_of_size(0.05)
    return zip_of({"[Content_Types].xml": b"<Types/>", "word/document.zip": inner * 50})


def docx_many_parts(n: int) -> bytes:
    files = {f"word/media/part{i}.xml": b"<x/>" for i in range(n)}
    return _docx_with_xml(_docx_paragraphs(["A paragraph (Smith, 2020)."]), files)


def docx_nested_tables(depth: int) -> bytes:
    inner = "<w:p><w:r><w:t>deep (Smith, 2020)</w:t></w:r></w:p>"
    xml = "<w:tbl><w:tr><w:tc>" * depth + inner + "</w:tc></w:tr></w:tbl>" * depth
    return _docx_with_xml(
        f'<?xml version="1.0"?><w:document {_W}><w:body>{xml}</w:body></w:document>'.encode()
    )


def docx_billion_laughs() -> bytes:
    entities = '<!ENTITY a0 "ha">' + "".join(
        f'<!ENTITY a{i} "{("&a" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    )
    xml = (
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]>'
        f"<w:document {_W}><w:body><w:p><w:r><w:t>&a9;</w:t></w:r></w:p></w:body></w:document>"
    )
    return _docx_with_xml(xml.encode())


def docx_external_entity() -> bytes:
    xml = (
        '<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        f"<w:document {_W}><w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p></w:body></w:document>"
    )
    return _docx_with_xml(xml.encode())


# --- PDF ---------------------------------------------------------------------------------------


def pdf_pages(n: int) -> bytes:
    return make_pdf([[(72, 700, 11, f"Page {i} (Smith, 2020).")] for i in range(n)])


def pdf_flate_bomb() -> bytes:
    """A one-page PDF whose content stream inflates to 300 MB of spaces."""
    stream = zlib.compress(b" " * (300 * MB), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def pdf_long_page(lines: int) -> bytes:
    return make_pdf([[(72, 700 - (i % 600), 11, f"Line {i} (Smith, 2020).") for i in range(lines)]])


# --- The cases ---------------------------------------------------------------------------------


def _cases() -> list[Case]:
    c: list[Case] = []

    def add(name, build, expect="bounded", match="", kind="thesis", heavy=False):
        c.append(Case(name, build, expect, match, kind, heavy))

    # Many citations and entries.
    add(
        "invented-60k-citations-20k-entries",
        _lazy_text("t.txt", lambda: invented(60_000, 20_000)),
        "error",
        "entries; the limit is 5,000",
        heavy=True,
    )
    add(
        "invented-30k-citations-2k-entries",
        _lazy_text("t.txt", lambda: invented(30_000, 2_000)),
        "error",
        "citations; the limit is 20,000",
    )
    add(
        "invented-19k-citations-4k-entries",
        _lazy_text("t.txt", lambda: invented(19_000, 4_000)),
        "ok",
    )
    add(
        "giant-reference-list-6000",
        _lazy_text("t.txt", lambda: invented(100, 6_000)),
        "error",
        "6,000 entries; the limit is 5,000",
    )
    add(
        "numbered-25k-markers",
        _lazy_text("t.txt", lambda: numbered(25_000, 500)),
        "error",
        "citations; the limit is 20,000",
    )
    add(
        "numbered-6000-entries",
        _lazy_text("t.txt", lambda: numbered(100, 6_000)),
        "error",
        "the limit is 5,000",
    )
    # Size.
    add(
        "text-29mb",
        _lazy_text("t.txt", lambda: (invented(8_000, 500) * 40)[: 29 * MB]),
        "error",
        "characters of text; the limit is 10,000,000",
        heavy=True,
    )
    add("text-9mb-prose", _lazy_text("t.txt", lambda: _prose(9 * MB)), "ok")
    add(
        "huge-single-line",
        _lazy_text(
            "t.txt", lambda: _with_refs("A claim and some more words. " * 150_000 + "(Smith, 2020)")
        ),
        "ok",
    )
    add("one-5mb-word", _lazy_text("t.txt", lambda: _with_refs("a" * 5 * MB)), "ok")
    # Each paragraph costs about 2 KB however short it is: 400,000 of them peaked at 803 MB.
    add(
        "many-tiny-paragraphs",
        _lazy_text("t.txt", lambda: _with_refs("a.\n\n" * 200_000)),
        "error",
        "paragraphs; the limit is 150,000",
    )
    add(
        "tiny-paragraphs-within-the-limit",
        _lazy_text("t.txt", lambda: _with_refs("a.\n\n" * 140_000)),
        "ok",
    )
    # Every marker keeps the sentence around it: with no sentence end after it, that was the
    # rest of the paragraph (19,000 markers in one 440 KB paragraph: gigabytes).
    add(
        "markers-in-one-endless-sentence",
        _lazy_text("t.txt", lambda: _with_refs("a claim (Smith, 2020); " * 19_000)),
        "ok",
    )
    add(
        "whitespace-runs",
        _lazy_text("t.txt", lambda: _with_refs(" \t" * 2_000_000 + "(Smith, 2020)")),
        "ok",
    )
    # Encodings and bytes.
    add(
        "control-characters",
        _text("t.txt", bytes(range(1, 32)) * 20_000),
        "error",
        "not a supported document",
    )
    add("some-control-characters", _text("t.txt", (SMALL + "\x01\x02").encode()), "ok")
    add("invalid-utf8", _text("t.txt", SMALL.encode() + b"\xff\xfe\xc3\x28" * 1000), "ok")
    add("nul-bytes", _text("t.txt", b"abc\x00" * 10_000), "error", "not a supported document")
    add("utf16-bom", _text("t.txt", SMALL.encode("utf-16")), "ok")
    add("utf32-bom", _text("t.txt", SMALL.encode("utf-32")), "ok")
    add("utf16-be-bom", _text("t.txt", b"\xfe\xff" + SMALL.encode("utf-16-be")), "ok")
    add("empty", _text("t.txt", b""), "error", "")
    add("bom-only", _text("t.txt", b"\xef\xbb\xbf"), "bounded")
    add(
        "combining-marks", _lazy_text("t.txt", lambda: _with_refs("a" + "\u0301" * 2_000_000)), "ok"
    )
    add(
        "zero-width-and-bidi",
        _lazy_text("t.txt", lambda: _with_refs("\u200b\u202e\u2066(Smith, 2020)" * 100_000)),
        "error",
        "citations; the limit is 20,000",
    )
    add(
        "astral-characters",
        _lazy_text("t.txt", lambda: _with_refs("\U0001f600 (Smith, 2020) " * 100_000)),
        "error",
        "citations; the limit is 20,000",
    )
    # Against the marker and entry patterns (backtracking candidates).
    add(
        "aa-hyphen-name-run",
        _lazy_text("t.txt", lambda: _with_refs("Aa-" * 300_000 + " (2020)")),
        "ok",
    )
    add(
        "capitalised-word-run",
        _lazy_text("t.txt", lambda: _with_refs("Smith Jones Brown Taylor " * 25_000 + "(2020)")),
        "ok",
    )
    add(
        "capitalised-run-in-parens",
        _lazy_text("t.txt", lambda: _with_refs("(" + "Smith Jones " * 25_000 + "2020)")),
        "ok",
    )
    add(
        "comma-run",
        _lazy_text("t.txt", lambda: _with_refs("(Smith" + ", " * 150_000 + "2020)")),
        "ok",
    )
    add(
        "author-comma-run",
        _lazy_text("t.txt", lambda: _with_refs("(" + "Smith, " * 50_000 + "2020)")),
        "ok",
    )
    add(
        "et-al-repeated",
        _lazy_text("t.txt", lambda: _with_refs("(Smith" + " et al." * 50_000 + ", 2020)")),
        "ok",
    )
    add(
        "and-run",
        _lazy_text("t.txt", lambda: _with_refs("(Smith" + " and Jones" * 50_000 + ", 2020)")),
        "ok",
    )
    add(
        "ampersand-run",
        _lazy_text("t.txt", lambda: _with_refs("Smith" + " & Jones" * 50_000 + " (2020)")),
        "ok",
    )
    add(
        "digits-with-dashes",
        _lazy_text("t.txt", lambda: _with_refs("[" + "1-" * 300_000 + "2]")),
        "ok",
    )
    add(
        "number-list-marker",
        _lazy_text(
            "t.txt", lambda: _with_refs("[" + ", ".join(str(i) for i in range(1, 150_000)) + "]")
        ),
        "ok",
    )
    add(
        "year-run",
        _lazy_text(
            "t.txt",
            lambda: _with_refs(
                "(Smith, " + ", ".join(str(1900 + i % 120) for i in range(200_000)) + ")"
            ),
        ),
        "ok",
    )
    add(
        "year-suffix-run",
        _lazy_text("t.txt", lambda: _with_refs("(Smith, 2020" + ", a" * 300_000 + ")")),
        "ok",
    )
    add("open-parens", _lazy_text("t.txt", lambda: _with_refs("(" * 1_000_000)), "ok")
    add("close-parens", _lazy_text("t.txt", lambda: _with_refs(")" * 1_000_000)), "ok")
    add("open-brackets", _lazy_text("t.txt", lambda: _with_refs("[1" * 500_000)), "ok")
    add(
        "page-locators",
        _lazy_text("t.txt", lambda: _with_refs("(Smith, 2020, " + "p. 1, " * 50_000 + ")")),
        "ok",
    )
    add("ibid-repeated", _lazy_text("t.txt", lambda: _with_refs("Ibid. " * 75_000)), "ok")
    add("doi-like-strings", _lazy_text("t.txt", lambda: _with_refs("10.1234/" * 75_000)), "ok")
    add(
        "references-heading-repeated",
        _lazy_text("t.txt", lambda: "References\n\n" * 20_000 + SMALL),
        "ok",
    )
    add(
        "entry-heads-repeated",
        _lazy_text("t.txt", lambda: "References\n\n" + "Smith, J. (2020). " * 75_000),
        "bounded",
    )
    add(
        "secondary-as-cited-run",
        _lazy_text("t.txt", lambda: _with_refs("(as cited in " * 25_000 + "Smith, 2020)")),
        "ok",
    )
    # Markdown.
    add(
        "md-nested-lists",
        _lazy_text(
            "t.md", lambda: _with_refs("\n".join("  " * i + "- item" for i in range(2_000)))
        ),
        "bounded",
    )
    add(
        "md-nested-quotes",
        _lazy_text("t.md", lambda: _with_refs(">" * 50_000 + " deep (Smith, 2020)")),
        "bounded",
    )
    add(
        "md-huge-table",
        _lazy_text(
            "t.md",
            lambda: _with_refs(
                "\n".join(
                    ["|" + "a|" * 50, "|" + "-|" * 50] + ["|" + "x (Smith, 2020)|" * 50] * 5_000
                )
            ),
        ),
        "bounded",
    )
    add("md-emphasis-run", _lazy_text("t.md", lambda: _with_refs("*" * 200_000 + "a")), "ok")
    add("md-backtick-run", _lazy_text("t.md", lambda: _with_refs("`" * 200_000 + "a")), "ok")
    add("md-link-brackets", _lazy_text("t.md", lambda: _with_refs("[" * 100_000 + "a](b)")), "ok")
    # HTML.
    add(
        "html-100k-nested-divs",
        _lazy_text("t.html", lambda: "<html><body>" + "<div>" * 100_000 + "x" + "</div>" * 100_000),
        "error",
        "the limit is 400",
        heavy=True,
    )
    add(
        "html-401-nested-divs",
        _lazy_text(
            "t.html", lambda: "<html><body>" + "<div>" * 401 + "(Smith, 2020)" + "</div>" * 401
        ),
        "error",
        "the limit is 400",
    )
    add(
        "html-300-nested-divs",
        _lazy_text(
            "t.html",
            lambda: "<html><body>" + "<div>" * 300 + _with_refs("(Smith, 2020)") + "</div>" * 300,
        ),
        "ok",
    )
    add(
        "html-nested-tables",
        _lazy_text(
            "t.html",
            lambda: "<html><body>" + "<table><tr><td>" * 5_000 + "x" + "</td></tr></table>" * 5_000,
        ),
        "error",
        "the limit is 400",
    )
    add(
        "html-nested-lists",
        _lazy_text("t.html", lambda: "<html><body>" + "<ul><li>" * 10_000 + "x"),
        "error",
        "the limit is 400",
    )
    add(
        "html-unclosed-inline",
        _lazy_text("t.html", lambda: "<html><body><p>" + "<b>x" * 100_000),
        "bounded",
    )
    add(
        "html-100k-paragraphs",
        _lazy_text(
            "t.html",
            lambda: (
                "<html><body>"
                + "<p>A claim (Smith, 2020).</p>" * 100_000
                + "<h2>References</h2><p>Smith, J. (2020). A title. Journal, 1, 2.</p>"
            ),
        ),
        "error",
        "citations; the limit is 20,000",
    )
    add(
        "html-huge-attribute",
        _lazy_text(
            "t.html", lambda: '<html><body><p title="' + "a" * 5 * MB + '">x (Smith, 2020)</p>'
        ),
        "ok",
    )
    add(
        "html-many-attributes",
        _lazy_text(
            "t.html",
            lambda: "<html><body><p " + " ".join(f"a{i}=x" for i in range(200_000)) + ">x</p>",
        ),
        "ok",
    )
    add(
        "html-entities",
        _lazy_text("t.html", lambda: "<html><body><p>" + "&amp;&#x41;&lt;" * 300_000 + "</p>"),
        "ok",
    )
    add(
        "html-script-style",
        _lazy_text(
            "t.html",
            lambda: "<html><body>" + "<script>alert(1)</script><style>p{}</style><p>x</p>" * 50_000,
        ),
        "ok",
    )
    add(
        "html-unterminated-comment",
        _lazy_text("t.html", lambda: "<html><body><p>x</p><!--" + "a" * 2 * MB),
        "bounded",
    )
    add(
        "html-many-br",
        _lazy_text("t.html", lambda: "<html><body><p>" + "<br>" * 500_000 + "</p>"),
        "bounded",
    )
    # DOCX.
    add(
        "docx-40mb-xml",
        lambda: ("t.docx", docx_xml_of_size(40)),
        "error",
        "the limit is 25.0 MB",
        heavy=True,
    )
    add("docx-8mb-xml", lambda: ("t.docx", docx_xml_of_size(8)), "ok")
    add("docx-zip-bomb", lambda: ("t.docx", docx_zero_bomb()), "error", "")
    add("docx-nested-zip", lambda: ("t.docx", docx_nested_zip()), "error", "")
    add("docx-5000-parts", lambda: ("t.docx", docx_many_parts(5_000)), "bounded")
    add(
        "docx-many-tiny-paragraphs",
        lambda: ("t.docx", _docx_with_xml(_docx_paragraphs(["a."] * 200_000))),
        "bounded",
    )
    add("docx-nested-tables", lambda: ("t.docx", docx_nested_tables(2_000)), "bounded")
    add(
        "docx-no-document",
        lambda: ("t.docx", zip_of({"[Content_Types].xml": b"<Types/>"})),
        "error",
        "",
    )
    add("docx-truncated", lambda: ("t.docx", make_docx([["A (Smith, 2020)."]])[:300]), "error", "")
    add("docx-billion-laughs", lambda: ("t.docx", docx_billion_laughs()), "bounded")
    add("docx-external-entity", lambda: ("t.docx", docx_external_entity()), "bounded")
    # PDF.
    add(
        "pdf-2999-pages",
        lambda: ("t.pdf", pdf_pages(2_999)),
        "error",
        "2,999 pages; the limit is 1,000",
        heavy=True,
    )
    add("pdf-flate-bomb", lambda: ("t.pdf", pdf_flate_bomb()), "bounded")
    add("pdf-20k-lines-on-a-page", lambda: ("t.pdf", pdf_long_page(20_000)), "bounded")
    add("pdf-truncated", lambda: ("t.pdf", pdf_pages(3)[:400]), "error", "")
    add("pdf-header-only", _text("t.pdf", b"%PDF-1.7\n" + b"0" * 100_000), "error", "")
    # Libraries.
    add(
        "csl-json-100k-nested",
        _text("lib.json", b"[" * 100_000 + b"]" * 100_000),
        "error",
        "the limit is 64",
        kind="library",
    )
    add(
        "csl-json-odd-shapes",
        _text(
            "lib.json",
            json.dumps([{"author": 5, "issued": {"date-parts": {}}, "title": "x"}] * 1000).encode(),
        ),
        "ok",
        kind="library",
    )
    add(
        "bibtex-unbalanced-braces",
        _text("lib.bib", b"@article{x, title={" + b"{" * 1_000_000),
        "bounded",
        kind="library",
    )
    add(
        "bibtex-100k-entries",
        _lazy_text(
            "lib.bib",
            lambda: "".join(
                f"@article{{k{i}, author={{A{i}}}, title={{T{i}}}, year={{2020}}}}\n"
                for i in range(100_000)
            ),
        ),
        "bounded",
        kind="library",
    )
    add(
        "ris-huge",
        _lazy_text(
            "lib.ris", lambda: "TY  - JOUR\nAU  - Smith\nTI  - x\nPY  - 2020\nER  - \n" * 200_000
        ),
        "bounded",
        kind="library",
    )
    add(
        "library-21mb",
        _text("lib.bib", b"%" * (21 * MB)),
        "error",
        "larger than 20 MB",
        kind="library",
    )
    return c


CASES = _cases()
BY_NAME = {case.name: case for case in CASES}
