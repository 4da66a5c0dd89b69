"""The report's exports: CSV of citations and of references, the annotated DOCX, and the entries
not found in the student's library as BibTeX and RIS.

The annotated DOCX is the student's own Word file with a Word comment at each problem citation
(python-docx's ``add_comment``), so the fixes can be made where the problems are; a thesis that
came in another format gets a DOCX generated from its extracted text, commented the same way.
Each function takes the report JSON (and the bytes it needs) and returns bytes or text: the
views only fetch the rows and send the file.
"""

from __future__ import annotations

import copy
import csv
import io
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Any

import bibtexparser
import rispy
from bibtexparser.model import Entry, Field
from docx import Document
from docx.document import Document as DocxDocument
from docx.table import Table
from docx.text.paragraph import Paragraph
from docx.text.run import Run
from lxml import html as lxml_html

from jobs.analysis.judging import PROBLEM_VERDICTS
from jobs.reporting import KIND_LABELS, KIND_TEXTS, style_name

COMMENT_AUTHOR = "Acurio"
COMMENT_INITIALS = "AC"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _csv(rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows(rows)
    # A BOM lets spreadsheet programs read the umlauts of German theses as UTF-8.
    return "\ufeff" + out.getvalue()


def _keys_text(keys: list[dict]) -> str:
    parts = []
    for key in keys or []:
        if "number" in key:
            parts.append(f"[{key['number']}]")
        else:
            parts.append(" ".join(str(key[k]) for k in ("author", "year") if key.get(k)))
    return "; ".join(p for p in parts if p)


def citations_csv(report: dict[str, Any]) -> str:
    """One row per in-text citation, in document order."""
    references = report.get("references") or []
    rows: list[list[Any]] = [
        ["number", "citation", "verdict", "reason", "cited works", "matched reference entries"]
    ]
    for number, citation in enumerate(report.get("citations") or [], start=1):
        verdict = citation.get("verdict", "")
        matched = [
            references[i].get("text", "")
            for i in citation.get("references") or []
            if isinstance(i, int) and 0 <= i < len(references)
        ]
        rows.append(
            [
                number,
                citation.get("text", ""),
                KIND_LABELS.get(verdict, verdict),
                citation.get("reason") or KIND_TEXTS.get(verdict, ""),
                _keys_text(citation.get("keys") or []),
                " | ".join(matched),
            ]
        )
    return _csv(rows)


_LIBRARY = {"found": "found", "not_found": "not in library", "unchecked": "not checked"}


def references_csv(report: dict[str, Any]) -> str:
    """One row per entry of the reference list."""
    rows: list[list[Any]] = [
        ["number", "entry", "cited", "DOI", "DOI well-formed", "in your library", "lookup"]
    ]
    for number, ref in enumerate(report.get("references") or [], start=1):
        doi_valid = ref.get("doi_valid")
        resolver = ref.get("resolver") if isinstance(ref.get("resolver"), dict) else {}
        rows.append(
            [
                number,
                ref.get("text", ""),
                "yes" if ref.get("verdict") == "cited" else "no",
                ref.get("doi") or "",
                "" if not ref.get("doi") else "yes" if doi_valid else "no",
                _LIBRARY.get(ref.get("library") or "unchecked", ref.get("library")),
                resolver.get("status", ""),
            ]
        )
    return _csv(rows)


# --- entries not in the library ---------------------------------------------------------------


def not_in_library(report: dict[str, Any]) -> list[dict]:
    """The reference entries the library check did not find in the student's library."""
    return [r for r in report.get("references") or [] if r.get("library") == "not_found"]


def _cite_key(ref: dict, taken: set[str]) -> str:
    author = (ref.get("authors") or ["anon"])[0]
    ascii_name = unicodedata.normalize("NFKD", author.split(",")[0]).encode("ascii", "ignore")
    base = re.sub(r"[^A-Za-z0-9]", "", ascii_name.decode()) or "anon"
    base = f"{base}{ref.get('year') or ''}".lower()
    key, n = base, 1
    while key in taken:
        n += 1
        key = f"{base}{chr(ord('a') + n - 2) if n <= 27 else n}"
    taken.add(key)
    return key


def _bibtex_value(value: str) -> str:
    # The writer wraps the value in braces; a stray brace in an entry's text would break them.
    return str(value).replace("{", "(").replace("}", ")")


def bibtex_of(entries: list[dict]) -> str:
    """Entries as BibTeX ``@misc`` records (author, year, title, venue as howpublished, DOI)."""
    library = bibtexparser.Library()
    taken: set[str] = set()
    for ref in entries:
        fields = []
        if ref.get("authors"):
            fields.append(Field("author", _bibtex_value(" and ".join(ref["authors"]))))
        for name, value in (
            ("year", ref.get("year")),
            ("title", ref.get("title")),
            ("howpublished", ref.get("venue")),
            ("doi", ref.get("doi")),
            ("note", f"As listed in the thesis: {ref.get('text', '')}"),
        ):
            if value:
                fields.append(Field(name, _bibtex_value(value)))
        library.add(Entry("misc", _cite_key(ref, taken), fields))
    return bibtexparser.write_string(library)


def ris_of(entries: list[dict]) -> str:
    """Entries as RIS records (type GEN: the thesis's entry does not say which kind of work)."""
    records = []
    for ref in entries:
        record: dict[str, Any] = {"type_of_reference": "GEN"}
        if ref.get("authors"):
            record["authors"] = list(ref["authors"])
        if ref.get("year"):
            record["year"] = str(ref["year"])
        record["title"] = ref.get("title") or ref.get("text", "")
        if ref.get("venue"):
            record["secondary_title"] = ref["venue"]
        if ref.get("doi"):
            record["doi"] = ref["doi"]
        record["notes"] = [f"As listed in the thesis: {ref.get('text', '')}"]
        records.append(record)
    return rispy.dumps(records)


# --- the annotated DOCX -----------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split())


class _ParagraphText:
    """A paragraph's text (its runs', hyperlinks included) and where each run starts in it."""

    def __init__(self, paragraph: Paragraph) -> None:
        self.paragraph = paragraph
        self.refresh()

    def refresh(self) -> None:
        self.runs: list[Run] = []
        for item in self.paragraph.iter_inner_content():
            self.runs.extend([item] if isinstance(item, Run) else item.runs)
        texts = [run.text for run in self.runs]
        self.text = "".join(texts)
        self.starts = list(accumulate((len(t) for t in texts[:-1]), initial=0)) if texts else []

    def at(self, position: int) -> tuple[Run, int]:
        """The run holding character ``position`` and the offset in its text."""
        i = bisect_right(self.starts, position) - 1
        return self.runs[i], position - self.starts[i]


@lru_cache(maxsize=4096)
def _pattern(needle: str) -> re.Pattern:
    # The citation's text has its whitespace collapsed; the file's may have line breaks, tabs
    # or no-break spaces there.
    return re.compile(r"\s+".join(re.escape(word) for word in needle.split()))


def _simple(run: Run) -> bool:
    """A run of formatting and one text element only: safe to cut in two."""
    tags = [child.tag.rsplit("}", 1)[-1] for child in run._r]
    return tags.count("t") == 1 and set(tags) <= {"rPr", "t"}


def _split(run: Run, offset: int) -> Run:
    """Cut ``run`` before ``offset``; return the new run holding the text from there."""
    text = run.text
    twin = copy.deepcopy(run._r)
    run._r.addnext(twin)
    run.text = text[:offset]
    right = Run(twin, run._parent)
    right.text = text[offset:]
    return right


def _anchor(para: _ParagraphText, start: int, end: int) -> list[Run]:
    """The runs covering characters ``start``-``end`` of the paragraph, cut to fit exactly
    where the runs allow it, so the comment marks the citation and not its whole sentence."""
    head, lo = para.at(start)
    tail, hi = para.at(end - 1)
    hi += 1
    if head._r is tail._r:
        if _simple(head):
            if hi < len(head.text):
                _split(head, hi)
            if lo > 0:
                head = _split(head, lo)
        return [head]
    if _simple(tail) and hi < len(tail.text):
        _split(tail, hi)
    if _simple(head) and lo > 0:
        head = _split(head, lo)
    return [head, tail]


def _paragraphs(container) -> list[Paragraph]:
    found: list[Paragraph] = []
    for item in container.iter_inner_content():
        if isinstance(item, Paragraph):
            found.append(item)
        elif isinstance(item, Table):
            for row in item.rows:
                for cell in row.cells:
                    found.extend(_paragraphs(cell))
    return found


@dataclass
class Annotated:
    data: bytes
    placed: int  # problem citations with a comment at their text
    unplaced: int  # problem citations whose text was not found in the file
    generated: bool  # True when the DOCX was generated from the extracted text


def _comment_text(citation: dict) -> str:
    verdict = citation.get("verdict", "")
    reason = citation.get("reason") or KIND_TEXTS.get(verdict, "")
    return f"{KIND_LABELS.get(verdict, verdict)}: {reason}"


def _comment_citations(doc: DocxDocument, citations: list[dict]) -> tuple[int, list[dict]]:
    """Comment each problem citation at its text; walk every citation in document order, so
    a flagged marker is found after the verified ones before it, not at an earlier twin."""
    paragraphs = _paragraphs(doc)
    texts: dict[int, _ParagraphText] = {}
    position, offset = 0, 0
    placed, unplaced = 0, []
    for citation in citations:
        needle = _norm(citation.get("text", ""))
        problem = citation.get("verdict") in PROBLEM_VERDICTS
        if not needle:
            if problem:
                unplaced.append(citation)
            continue
        pattern = _pattern(needle)
        found = None
        for p in range(position, len(paragraphs)):
            para = texts.get(p) or texts.setdefault(p, _ParagraphText(paragraphs[p]))
            match = pattern.search(para.text, offset if p == position else 0)
            if match:
                found = (p, match.start(), match.end())
                break
        if found is None:
            if problem:
                unplaced.append(citation)
            continue
        p, start, end = found
        position, offset = p, end
        if problem:
            para = texts[p]
            runs = _anchor(para, start, end)
            doc.add_comment(
                runs, text=_comment_text(citation), author=COMMENT_AUTHOR, initials=COMMENT_INITIALS
            )
            para.refresh()  # the runs were cut; the text (and so the offsets) is unchanged
            placed += 1
    return placed, unplaced


def _note_unplaced(doc: DocxDocument, unplaced: list[dict]) -> None:
    if not unplaced:
        return
    lines = "; ".join(f"{c.get('text', '')} ({_comment_text(c)})" for c in unplaced[:50])
    more = f" … and {len(unplaced) - 50} more" if len(unplaced) > 50 else ""
    paragraphs = _paragraphs(doc)
    target = next((p for p in paragraphs if p.runs), None)
    if target is None:
        target = doc.add_paragraph("Citation report")
    doc.add_comment(
        target.runs,
        text=(
            f"{len(unplaced)} problem citation(s) could not be placed in the text "
            f"(in footnotes, text boxes or split differently): {lines}{more}"
        ),
        author=COMMENT_AUTHOR,
        initials=COMMENT_INITIALS,
    )


_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "td", "th", "blockquote", "pre"}


def _blocks(doc_html: str) -> list[tuple[str, str]]:
    """(tag, text) of the innermost block elements of the extracted HTML, in order."""
    if not doc_html.strip():
        return []
    root = lxml_html.fragment_fromstring(doc_html, create_parent="div")
    found = []
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag not in _BLOCKS:
            continue
        if any(isinstance(d.tag, str) and d.tag in _BLOCKS for d in el.iterdescendants()):
            continue
        text = _norm(el.text_content())
        if text:
            found.append((el.tag, text))
    return found


def _generated(document: str, report: dict[str, Any], doc_html: str) -> DocxDocument:
    doc = Document()
    doc.add_heading(f"Citation report: {document}", level=0)
    style = style_name(report.get("style"))
    doc.add_paragraph(
        "Generated by Acurio from the text of your file"
        + (f" ({style} style)" if style else "")
        + ": each problem citation carries a comment with the reason."
    )
    for tag, text in _blocks(doc_html):
        if tag[0] == "h" and tag[1:].isdigit():
            doc.add_heading(text, level=min(int(tag[1:]), 9))
        else:
            doc.add_paragraph(text)
    return doc


def annotated_docx(
    report: dict[str, Any], *, upload: bytes | None, document: str, doc_html: str
) -> Annotated:
    """The student's DOCX with a comment at each problem citation, or, for a file that is not
    a DOCX (or cannot be opened as one), a DOCX generated from the extracted text."""
    doc = None
    if upload and document.lower().endswith(".docx"):
        try:
            doc = Document(io.BytesIO(upload))
        except Exception:  # any unreadable package falls back to a generated one
            doc = None
    generated = doc is None
    if doc is None:
        doc = _generated(document, report, doc_html)
    placed, unplaced = _comment_citations(doc, report.get("citations") or [])
    _note_unplaced(doc, unplaced)
    out = io.BytesIO()
    doc.save(out)
    return Annotated(out.getvalue(), placed, len(unplaced), generated)
