"""Every kind of bad upload raises AnalysisInputError with a clear message."""

from __future__ import annotations

import io
import zipfile

import pypdf
import pytest

from jobs.analysis import AnalysisInputError, analyze, extract, load_library

from .builders import make_docx, make_pdf, set_encrypted_flag, text_pdf, zip_of


def _error(data: bytes, name: str, **kw) -> str:
    with pytest.raises(AnalysisInputError) as info:
        extract(data, name, **kw)
    return str(info.value)


def test_empty_file_is_rejected():
    assert "empty" in _error(b"", "thesis.docx")
    assert "empty" in _error(b"   \n\t ", "thesis.txt")


def test_oversize_file_is_rejected_before_reading():
    data = b"Some text. " * 2000
    assert "limit" in _error(data, "thesis.txt", max_bytes=1000)


def test_corrupt_pdf_is_rejected():
    good = text_pdf(["Hello world (Smith, 2020)."])
    corrupt = good[:40] + b"\x00garbage" * 50
    assert "damaged" in _error(corrupt, "thesis.pdf") or "no extractable text" in _error(
        corrupt, "thesis.pdf"
    )


def test_truncated_pdf_header_only_is_rejected():
    assert "PDF" in _error(b"%PDF-1.7\n%%EOF\n", "thesis.pdf")


def test_password_protected_pdf_is_rejected():
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(text_pdf(["Secret text."]))))
    writer.encrypt(user_password="secret", owner_password="owner")
    buf = io.BytesIO()
    writer.write(buf)
    assert "password" in _error(buf.getvalue(), "thesis.pdf")


def test_pdf_without_text_layer_is_rejected():
    assert "no extractable text" in _error(make_pdf([[]]), "scan.pdf")


def test_corrupt_docx_is_rejected():
    assert "damaged" in _error(b"PK\x03\x04" + b"\x00not a zip" * 20, "thesis.docx")


def test_zip_without_word_document_is_rejected():
    assert "not a Word document" in _error(zip_of({"readme.txt": b"hello"}), "thesis.docx")


def test_docx_with_broken_xml_is_rejected():
    data = make_docx([["Hello"]])
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "word/document.xml":
                body = body[: len(body) // 2]  # cut mid-element
            dst.writestr(info, body)
    assert "damaged" in _error(buf.getvalue(), "thesis.docx")


def test_zip_bomb_by_ratio_is_rejected():
    bomb = zip_of({"word/document.xml": b"\x00" * (12 * 1024 * 1024)})
    assert len(bomb) < 100_000
    assert "zip bomb" in _error(bomb, "thesis.docx")


def test_zip_bomb_by_entry_count_is_rejected():
    files = {f"word/media/{i}.xml": b"x" for i in range(2100)}
    files["word/document.xml"] = b"<w:document/>"
    assert "zip bomb" in _error(zip_of(files), "thesis.docx")


def test_encrypted_zip_member_is_rejected():
    data = set_encrypted_flag(make_docx([["Hello"]]))
    assert "encrypted" in _error(data, "thesis.docx")


def test_legacy_or_encrypted_office_container_is_rejected():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600
    assert "legacy Word" in _error(ole, "thesis.docx")


def test_image_is_rejected_whatever_its_name():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
    assert "PNG image" in _error(png, "thesis.docx")


def test_binary_garbage_is_rejected():
    garbage = bytes(range(256)) * 40
    assert "not a supported document" in _error(garbage, "thesis.txt")


@pytest.mark.parametrize("name", ["thesis.docx", "thesis.PDF"])
def test_text_named_as_docx_or_pdf_is_rejected_not_read_as_text(name):
    message = _error(b"Chapter 1. Some words (Smith, 2020).", name)
    assert "is not a" in message and "damaged or renamed" in message


def test_html_without_text_is_rejected():
    assert "no text" in _error(b"<html><body><script>alert(1)</script></body></html>", "t.html")


def test_unreadable_library_is_rejected():
    with pytest.raises(AnalysisInputError):
        load_library(b"[{broken json", "library.json")
    with pytest.raises(AnalysisInputError):
        load_library(b"\x00\x01 binary", "library.dat")


def test_analyze_raises_the_same_error_type():
    with pytest.raises(AnalysisInputError):
        analyze(b"", "thesis.pdf")
