"""Build small real documents (PDF, DOCX, zip variants) for the analysis tests."""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(pages: list[list[tuple[float, float, float, str]]]) -> bytes:
    """A PDF whose pages hold ``(x, y, size, text)`` lines in Helvetica (WinAnsi text only)."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    pages_id = len(objects) + 1 + 2 * len(pages)  # placeholder id of the /Pages object
    page_ids = []
    for lines in pages:
        ops = []
        for x, y, size, text in lines:
            ops.append(f"BT /F1 {size} Tf {x} {y} Td {_pdf_string(text)} Tj ET")
        stream = "\n".join(ops).encode("cp1252")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(
            add(
                (
                    f"<< /Type /Page /Parent {pages_id} 0 R /MediaBox [0 0 595 842] "
                    f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>"
                ).encode()
            )
        )
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    assert add(f"<< /Type /Pages /Kids [{kids}] /Count {len(page_ids)} >>".encode()) == pages_id
    catalog = add(f"<< /Type /Catalog /Pages {pages_id} 0 R >>".encode())
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(
        b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
        % (len(objects) + 1, catalog, xref)
    )
    return out.getvalue()


def text_pdf(paragraphs: list[str], *, header: str | None = None, per_page: int = 30) -> bytes:
    """A simple one-column PDF of wrapped paragraphs, with an optional running header and numbers."""
    lines: list[tuple[float, str, bool]] = []  # (size, text, starts paragraph)
    for p in paragraphs:
        words = p.split()
        cur: list[str] = []
        first = True
        for w in words:
            if len(" ".join([*cur, w])) > 80 and cur:
                lines.append((11, " ".join(cur), first))
                cur, first = [], False
            cur.append(w)
        if cur:
            lines.append((11, " ".join(cur), first))
    pages = []
    for start in range(0, len(lines), per_page):
        y = 760.0
        page = []
        if header:
            page.append((72, 800, 9, header))
        for i, (size, text, starts) in enumerate(lines[start : start + per_page]):
            if starts and i:
                y -= 8  # paragraph gap
            page.append((72, y, size, text))
            y -= 16
        page.append((290, 40, 10, str(len(pages) + 1)))
        pages.append(page)
    return make_pdf(pages)


_CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"/>
</Types>"""
_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>"""
_DOC_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes" Target="footnotes.xml"/>
</Relationships>"""
_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def make_docx(
    paragraphs: list[list[str | int | tuple[str, str]]], footnotes: dict[int, str] | None = None
) -> bytes:
    """A DOCX; each paragraph is a list of runs (str), footnote references (int ids) and
    superscript runs (``("sup", text)``)."""
    body = []
    for para in paragraphs:
        runs = []
        for item in para:
            if isinstance(item, tuple):
                runs.append(
                    '<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
                    f'<w:t xml:space="preserve">{escape(item[1])}</w:t></w:r>'
                )
            elif isinstance(item, int):
                runs.append(
                    f'<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteReference w:id="{item}"/></w:r>'
                )
            else:
                runs.append(_run(item))
        body.append("<w:p>" + "".join(runs) + "</w:p>")
    document = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {_W}><w:body>{"".join(body)}</w:body></w:document>'
    notes = "".join(
        f'<w:footnote w:id="{i}"><w:p>{_run(" " + text)}</w:p></w:footnote>'
        for i, text in (footnotes or {}).items()
    )
    footnotes_xml = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes {_W}>{notes}</w:footnotes>'
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("_rels/.rels", _RELS)
        zf.writestr("word/_rels/document.xml.rels", _DOC_RELS)
        zf.writestr("word/document.xml", document)
        zf.writestr("word/footnotes.xml", footnotes_xml)
    return buf.getvalue()


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def set_encrypted_flag(zip_bytes: bytes) -> bytes:
    """Mark every member as encrypted (general-purpose bit 0) in local and central headers."""
    data = bytearray(zip_bytes)
    for sig, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (i := data.find(sig, start)) >= 0:
            data[i + flag_offset] |= 0x01
            start = i + 4
    return bytes(data)
