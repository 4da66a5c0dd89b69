"""The upload form: a thesis and an optional reference library, checked before anything is queued.

The checks here are the cheap ones that need no parsing: size (``ACURIO_MAX_UPLOAD_MB``), an
extension we can analyse, and content that looks like what the extension promises (a DOCX is a
ZIP, a PDF starts with ``%PDF-``, text formats decode and hold no NUL bytes). A file that passes
but is corrupt inside is the analysis library's to judge: its ``AnalysisInputError`` becomes the
failed job's user-facing error, so the user still gets a clear message and nothing is lost.
"""

from __future__ import annotations

from pathlib import PurePath

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat

from jobs.analysis.library import JsonTooDeep, load_json

THESIS_EXTENSIONS = (".docx", ".pdf", ".html", ".htm", ".md", ".markdown", ".txt")
LIBRARY_EXTENSIONS = (".bib", ".json", ".ris")
TEXT_EXTENSIONS = (".html", ".htm", ".md", ".markdown", ".txt", ".bib", ".json", ".ris")


def max_upload_bytes() -> int:
    return int(settings.ACURIO_MAX_UPLOAD_MB) * 1024 * 1024


def too_big_message(size: int | None = None) -> str:
    limit = settings.ACURIO_MAX_UPLOAD_MB
    got = f" (this one is {filesizeformat(size)})" if size else ""
    return f"The file is too large{got}: the limit is {limit} MB."


def _extension(name: str) -> str:
    return PurePath(name).suffix.lower()


def _read_all(upload: UploadedFile) -> bytes:
    upload.seek(0)
    return b"".join(upload.chunks())


# Byte-order marks of the Unicode encodings a text file may be saved in (Notepad's "Unicode"
# is UTF-16 LE with a BOM). UTF-32 first: its LE mark begins with UTF-16 LE's.
BOMS = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)
# The longest file name we keep (the job's column); a longer one is refused with a message
# rather than cut, so the report names the file the user knows.
MAX_FILENAME_CHARS = 255


def decode_bom(data: bytes) -> str | None:
    """The text of ``data`` when it starts with a Unicode byte-order mark, else None.

    Raises ``UnicodeDecodeError`` when the mark promises an encoding the bytes do not hold.
    """
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding)
    return None


def _looks_like_text(data: bytes) -> bool:
    try:
        text = decode_bom(data)
    except UnicodeDecodeError:
        return False
    if text is not None:
        return "\x00" not in text[:65536]
    if b"\x00" in data[:65536]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        # Older exports are often Windows-1252 or Latin-1; those decode, binaries mostly don't
        # get past the NUL check above.
        try:
            data.decode("cp1252")
        except UnicodeDecodeError:
            return False
    return True


def check_content(name: str, data: bytes, allowed: tuple[str, ...], what: str) -> str | None:
    """Return a user-facing reason why ``data`` cannot be a ``what`` named ``name``, or None."""
    if len(name) > MAX_FILENAME_CHARS:
        return (
            f"The file name has {len(name):,} characters; the limit is {MAX_FILENAME_CHARS}. "
            "Rename the file and upload it again."
        )
    ext = _extension(name)
    if ext not in allowed:
        listed = ", ".join(allowed)
        shown = ext or "no extension"
        return f"{name}: {shown} is not a supported {what} format (use one of {listed})."
    if not data:
        return f"{name} is empty."
    if ext == ".docx" and not data.startswith(b"PK\x03\x04"):
        return f"{name} is not a Word document (.docx files are ZIP archives; this one is not)."
    # Readers accept the header anywhere in the first KiB (some producers prepend junk).
    if ext == ".pdf" and b"%PDF-" not in data[:1024]:
        return f"{name} is not a PDF file (it does not start with a PDF header)."
    if ext in TEXT_EXTENSIONS and not _looks_like_text(data):
        return f"{name} does not look like a text file ({ext} files must be plain text)."
    if ext == ".json":
        try:
            text = decode_bom(data)
            parsed = load_json(text if text is not None else data.decode("utf-8"))
        except JsonTooDeep as exc:
            return f"{name}: {exc}"
        except (UnicodeDecodeError, ValueError):
            return f"{name} is not valid JSON (CSL-JSON libraries must be a JSON array)."
        if not isinstance(parsed, list | dict):
            return f"{name} is not a CSL-JSON library (expected a list of items)."
    return None


class UploadForm(forms.Form):
    """A thesis and, optionally, the author's reference library (BibTeX, CSL-JSON or RIS)."""

    file = forms.FileField(
        label="Thesis",
        help_text="DOCX, PDF, HTML, Markdown or plain text.",
        allow_empty_file=True,  # we say "is empty" ourselves, more clearly than Django's text
    )
    library = forms.FileField(
        label="Reference library (optional)",
        required=False,
        help_text="BibTeX (.bib), CSL-JSON (.json) or RIS (.ris): the references are checked against it.",
        allow_empty_file=True,
    )

    def _clean_upload(self, field: str, allowed: tuple[str, ...], what: str) -> UploadedFile | None:
        upload: UploadedFile | None = self.cleaned_data.get(field)
        if upload is None:
            return None
        if upload.size is not None and upload.size > max_upload_bytes():
            raise forms.ValidationError(too_big_message(upload.size), code="too_big")
        data = _read_all(upload)
        reason = check_content(upload.name or "", data, allowed, what)
        if reason:
            raise forms.ValidationError(reason, code="invalid_content")
        # Keep the bytes: the view stores them without reading the temp file again.
        upload.acurio_bytes = data  # type: ignore[attr-defined]
        return upload

    def clean_file(self) -> UploadedFile | None:
        return self._clean_upload("file", THESIS_EXTENSIONS, "thesis")

    def clean_library(self) -> UploadedFile | None:
        return self._clean_upload("library", LIBRARY_EXTENSIONS, "reference library")

    def error_text(self) -> str:
        """All errors as one line, for the JSON API."""
        parts = []
        for field, errors in self.errors.items():
            for message in errors:
                label = self.fields[field].label if field in self.fields else ""
                if message == forms.Field.default_error_messages["required"]:
                    message = f"{label or field}: a file is required (multipart field '{field}')."
                parts.append(str(message))
        return " ".join(parts)
