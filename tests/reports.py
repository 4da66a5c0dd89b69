"""Reports of real corpus theses for the report pages' tests, without a worker.

``analysed(path)`` runs the analysis library on a corpus thesis (and its ``.bib`` library beside
it) once per process; ``saved_report(owner, path)`` stores it as a complete job and saves the
run through the single writer, as the tab does, then judges it. The workflow itself is tested
elsewhere (tests/web/test_pipeline.py, tests/browser/test_report_flow.py): these tests are about
what the pages make of a report.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from django.utils import timezone

from jobs import analysis
from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.runs import judge_run, save_run
from tests.corpus import corpus_dir
from tests.prerequisites import missing


def corpus_file(relative: str) -> Path:
    path = corpus_dir() / relative
    if not path.exists():
        missing(f"no corpus thesis at {path}")
    return path


def _library_of(path: Path) -> Path | None:
    for candidate in (path.with_suffix(".bib"), path.parent / (path.name.split(".")[0] + ".bib")):
        if candidate.exists():
            return candidate
    return None


@lru_cache(maxsize=8)
def analysed(path: Path) -> tuple[str, dict]:
    """(doc_html, report) of a corpus thesis, with its library when one lies beside it."""
    data = path.read_bytes()
    document = analysis.extract(data, path.name)
    parsed = analysis.parse(document.html)
    verdicts = analysis.verify(parsed.citations, parsed.references, parsed.style)
    library = _library_of(path)
    lib = analysis.load_library(library.read_bytes(), library.name) if library else None
    report = analysis.build_report(path.name, parsed, verdicts, library=lib)
    return document.html, report


def saved_report(owner, path: Path, **fields) -> AnalysisRun:
    """A complete job of ``path`` for ``owner``, saved by the client and judged."""
    doc_html, report = analysed(path)
    job = AnalysisJob.objects.create(
        owner=owner,
        filename=fields.pop("filename", path.name),
        upload=path.read_bytes(),
        status=JobStatus.COMPLETE,
        doc_html=doc_html,
        results=report,
        finished_at=timezone.now(),
        progress_step=JobStatus.COMPLETE,
        **fields,
    )
    run_id = save_run(job.pk, "client").run_id
    judge_run(run_id)
    return AnalysisRun.objects.get(pk=run_id)
