"""Views of the jobs app: the user's pages and the JSON API (paths and shapes fixed by DESIGN.md).

Pages: My reports (every job, grouped by thesis, with delete), the upload page, a job's progress
page, the report (HTML and JSON), its marked document, its exports and its re-analyse action. API: ``POST /api/analysis-jobs`` (upload), ``GET /api/analysis-jobs/<id>``
(progress, polled by the tab) and ``POST /api/analysis-runs`` (the tab's save: the single writer,
then the judge, ``jobs.runs.save_and_judge``). A user reaches only their own jobs and runs:
anything else is a 404, so ids of other users' work are not even confirmed to exist.

Views only turn requests into calls and results into responses: the queries are QuerySet
methods of the models, the work is ``jobs.pipeline``'s and ``jobs.runs``'.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from uuid import UUID

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.db import connection
from django.db.utils import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views import defaults
from django.views.csrf import csrf_failure as default_csrf_failure
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs import analysis, exports, report_html, reporting
from jobs.analysis.judging import problem_counts
from jobs.analysis.library import JsonTooDeep, load_json
from jobs.forms import UploadForm, max_upload_bytes, too_big_message
from jobs.models import (
    AnalysisJob,
    AnalysisRun,
    JobStatus,
    SavedBy,
    SweeperHeartbeat,
)
from jobs.pipeline import TooManyJobs, requeue, submit_analysis
from jobs.runs import JobNotFound, SaveRunError, save_and_judge
from jobs.sql import PING

# The reference resolver's statuses, as the report page says them.
LOOKUP_LABELS = {
    "found": "found",
    "not_found": "not found",
    "doi_not_found": "DOI not found",
    "doi_mismatch": "DOI of another work",
    "error": "lookup failed",
}
# My reports lists this many of a user's jobs (newest first); older ones are rare and still
# reachable by their links.
JOBS_LISTED = 500
# Problems shown per group before "Show all": the rest is in the page (for print and search)
# but hidden, so a 300-page thesis's first screen is quick to lay out.
PROBLEMS_SHOWN = 20
ANNOTATED_CACHE_SECONDS = 15 * 60
ANNOTATED_CACHE_MAX_CHARS = 8 * 1024 * 1024
# The declared body may exceed the file limit by the multipart envelope and the optional library
# (itself up to the limit); beyond that we refuse before reading a byte of it.
_ENVELOPE_SLACK = 1024 * 1024


def json_error(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def too_many(exc: TooManyJobs) -> JsonResponse:
    """A fairness limit's 429, with ``Retry-After`` when the wait is known."""
    response = json_error(str(exc), status=429)
    if exc.retry_after:
        response["Retry-After"] = str(exc.retry_after)
    return response


# --- Errors of the JSON API raised before or outside a view -------------------------------
# Django answers a body it cannot parse (multipart without a boundary, too many fields), a
# failed CSRF check or an unknown URL with an HTML page, also from middleware that reads the
# body before any view runs. Under /api/ these handlers answer JSON instead.

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: JSON under /api/, Django's page elsewhere."""
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, MultiPartParserError):
        return json_error(f"The multipart body could not be read: {exception}.")
    return json_error(f"Bad request: {exception or 'the request could not be read'}.")


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _is_api(request):
        return defaults.permission_denied(request, exception)
    return json_error("Forbidden.", status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _is_api(request):
        return defaults.page_not_found(request, exception)
    return json_error("No such API endpoint.", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if not _is_api(request):
        return defaults.server_error(request)
    return json_error("Internal server error.", status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: JSON under /api/ (send the csrftoken cookie's value as X-CSRFToken)."""
    if not _is_api(request):
        return default_csrf_failure(request, reason)
    return json_error(
        f"CSRF check failed ({reason}): send the csrftoken cookie's value in X-CSRFToken.",
        status=403,
    )


def api_methods(*methods: str) -> Callable:
    """Like require_http_methods, but the 405 has a JSON ``error`` and an ``Allow`` header."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                response = json_error(
                    f"Method {request.method} not allowed; use {' or '.join(methods)}.", 405
                )
                response["Allow"] = ", ".join(methods)
                return response
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def api_login_required(view: Callable) -> Callable:
    """Like login_required, but a JSON 401 instead of a redirect to the login page."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return json_error("Authentication required: sign in first.", status=401)
        return view(request, *args, **kwargs)

    return wrapped


def _declared_size_too_big(request: HttpRequest) -> int | None:
    """The declared body size when it alone proves the upload too large, else None."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return length if length > 2 * max_upload_bytes() + _ENVELOPE_SLACK else None


def _submit(request: HttpRequest, form: UploadForm) -> AnalysisJob:
    thesis = form.cleaned_data["file"]
    library = form.cleaned_data.get("library")
    return submit_analysis(
        request.user,
        thesis.name,
        thesis.acurio_bytes,
        library=library.acurio_bytes if library else None,
        library_filename=library.name if library else "",
        fair=True,
    )


def job_payload(job: AnalysisJob) -> dict:
    """The progress document of ``GET /api/analysis-jobs/<id>``."""
    return {
        "id": job.pk,
        "run_id": str(job.run_id),
        "status": job.status,
        "progress": {
            "step": job.progress_step or job.status,
            "done": job.progress_done,
            "total": job.progress_total,
        },
        "error": job.error or None,
        "run_saved": job.run_saved_at is not None,
    }


# --- Pages --------------------------------------------------------------------------------


@dataclass
class Version:
    """One version of a thesis in My reports: a run id, with its newest job and its run row."""

    job: AnalysisJob  # the newest job of the run
    run: AnalysisRun | None
    attempts: int = 1
    counts: dict | None = None

    @property
    def opens_job_page(self) -> bool:
        """Whether the link goes to the job page: the work is not in the run row yet.

        A finished job no tab saved is listed at once; its job page saves it through the
        client writer when opened, so the student never waits for the sweeper.
        """
        if not self.job.is_terminal:
            return True
        if self.run is None:
            return True
        return self.run.job_id != self.job.pk and self.job.run_saved_at is None

    @property
    def state(self) -> str:
        if not self.job.is_terminal:
            return "running"
        if self.opens_job_page:
            return "failed" if self.job.status == JobStatus.FAILED else "finished"
        return self.run.status


@dataclass
class Thesis:
    """Every version of one document name of the user (re-analyses and re-uploads)."""

    filename: str
    versions: list[Version] = field(default_factory=list)

    @property
    def latest(self) -> Version:
        return self.versions[0]

    @property
    def earlier(self) -> list[Version]:
        return self.versions[1:]


def _counts_of(runs: list[AnalysisRun]) -> dict[UUID, dict]:
    """problem_counts of each run's current content: from its judgment when that is of the
    current job (the judge stored the same function's result), else from its report."""
    counts: dict[UUID, dict] = {}
    stale = []
    for run in runs:
        judged = run.judgment if isinstance(run.judgment, dict) else {}
        if run.judged_job_id == run.job_id and "total" in (judged.get("counts") or {}):
            counts[run.pk] = judged["counts"]
        elif run.status == JobStatus.COMPLETE:
            stale.append(run.pk)
    for run_id, report in AnalysisRun.objects.filter(pk__in=stale).values_list("id", "report"):
        counts[run_id] = problem_counts(report)
    return counts


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    """My reports: every job of the user at once, whatever its run's state, grouped by thesis.

    A job is listed from the moment it is queued; a finished job no tab saved links to its job
    page (which saves it). Versions of one thesis (re-analyses share a run id, re-uploads the
    file name) are listed together, newest first. The counts come from ``problem_counts``.
    """
    jobs = list(
        AnalysisJob.objects.owned_by(request.user)
        .only(
            "id",
            "filename",
            "status",
            "run_id",
            "progress_step",
            "progress_done",
            "progress_total",
            "error",
            "created_at",
            "finished_at",
            "run_saved_at",
        )
        .order_by("-created_at")[:JOBS_LISTED]
    )
    runs = {
        run.pk: run
        for run in AnalysisRun.objects.owned_by(request.user)
        .filter(pk__in={job.run_id for job in jobs})
        .only("id", "job_id", "status", "saved_at", "judged_job_id", "judgment")
    }
    counts = _counts_of(list(runs.values()))
    theses: dict[str, Thesis] = {}
    versions: dict[UUID, Version] = {}
    for job in jobs:  # newest first: the first job of a run is its newest
        if job.run_id in versions:
            versions[job.run_id].attempts += 1
            continue
        run = runs.get(job.run_id)
        version = Version(job=job, run=run, counts=counts.get(job.run_id) if run else None)
        versions[job.run_id] = version
        theses.setdefault(job.filename, Thesis(job.filename)).versions.append(version)
    return render(request, "jobs/runs_list.html", {"theses": list(theses.values())})


def _alive_runs(request: HttpRequest):
    """The user's runs whose current job is not deleted: a deleted version is gone for them."""
    return AnalysisRun.objects.owned_by(request.user).filter(job__deleted_at__isnull=True)


@login_required
@require_http_methods(["GET", "POST"])
def run_delete(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """Delete one version (every job of a run id) for its owner: a confirmation, then a soft
    delete (the rows stay for the operators; the owner no longer sees them)."""
    jobs = AnalysisJob.objects.owned_by(request.user).filter(run_id=run_id)
    latest = jobs.only("id", "filename", "created_at").order_by("-created_at").first()
    if latest is None:
        raise Http404("No such report.")
    if request.method == "POST":
        jobs.soft_delete()
        return redirect("runs")
    return render(request, "jobs/delete.html", {"job": latest, "run_id": run_id})


def _upload_page(request: HttpRequest, form: UploadForm, status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "max_mb": max_upload_bytes() // (1024 * 1024),
        "max_bytes": max_upload_bytes(),
    }
    return render(request, "jobs/upload.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def upload(request: HttpRequest) -> HttpResponse:
    """The upload page: a thesis and an optional library; on success, the job's progress page."""
    if request.method == "POST":
        declared = _declared_size_too_big(request)
        if declared is not None:
            form = UploadForm()
            form.add_error(None, too_big_message(declared))
            return _upload_page(request, form, status=400)
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                job = _submit(request, form)
            except TooManyJobs as exc:
                form.add_error(None, str(exc))
                response = _upload_page(request, form, status=429)
                if exc.retry_after:
                    response["Retry-After"] = str(exc.retry_after)
                return response
            return redirect("job_page", job_id=job.pk)
        return _upload_page(request, form, status=400)
    return _upload_page(request, UploadForm())


@login_required
@require_GET
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """One job's progress page; its script polls the API and saves the run when it is done."""
    job = get_object_or_404(
        AnalysisJob.objects.owned_by(request.user).defer(
            "upload", "library", "doc_html", "results"
        ),
        pk=job_id,
    )
    return render(request, "jobs/job.html", {"job": job, "initial": job_payload(job)})


def _document_html(run: AnalysisRun) -> str:
    """doc_html with every citation marked and made keyboard-reachable, cached per (run, job).

    Marking a long thesis takes a while (0.4-2 s for 300 pages), and a report is usually opened
    several times soon after it is saved. The row's body changes only together with its job,
    so the pair is a safe key; the cache is the process's own memory, never the database (a
    second stored copy of the body is what this design avoids).
    """
    if not run.doc_html:
        return ""
    key = f"acurio:document:{run.pk}:{run.job_id}"
    html = cache.get(key)
    if html is None:
        citations = (run.report or {}).get("citations") or []
        html = reporting.accessible_document(analysis.annotate_html(run.doc_html, citations))
        if len(html) <= ANNOTATED_CACHE_MAX_CHARS:
            cache.set(key, html, ANNOTATED_CACHE_SECONDS)
    return html


def _judgment(run: AnalysisRun) -> dict | None:
    if not isinstance(run.judgment, dict) or run.judged_job_id != run.job_id:
        return None  # not judged yet, or judged for the content this run held before
    judgment = dict(run.judgment)
    judgment["problems"] = [
        {**p, "verdict_label": reporting.KIND_LABELS.get(p.get("verdict"), p.get("verdict"))}
        for p in judgment.get("problems") or []
        if isinstance(p, dict)
    ]
    return judgment


def _previous_report(request: HttpRequest, run: AnalysisRun) -> tuple[dict, str, object] | None:
    """The report of this thesis's previous version, what it was, and when.

    A re-analysis is a newer job of the same run: its previous version is the run's newest
    complete job before the current one. Otherwise a re-upload (the same file name by the same
    owner) is compared with the newest other report of that name saved before this one.
    """
    jobs = AnalysisJob.objects.owned_by(request.user)
    current = jobs.only("id", "created_at").filter(pk=run.job_id).first()
    if current is not None:
        earlier = (
            jobs.filter(run_id=run.pk, status=JobStatus.COMPLETE, created_at__lt=current.created_at)
            .exclude(results__isnull=True)
            .only("id", "results", "finished_at")
            .order_by("-created_at")
            .first()
        )
        if earlier is not None:
            return earlier.results, "the previous analysis", earlier.finished_at
    other = (
        _alive_runs(request)
        .filter(document=run.document, status=JobStatus.COMPLETE, created_at__lt=run.created_at)
        .exclude(pk=run.pk)
        .only("id", "report", "saved_at")
        .order_by("-created_at")
        .first()
    )
    if other is not None:
        return other.report or {}, "the previous upload", other.saved_at
    return None


def _references(report: dict) -> list[dict]:
    references = [dict(ref) for ref in report.get("references") or [] if isinstance(ref, dict)]
    for number, ref in enumerate(references):
        ref["number"] = number
        if isinstance(ref.get("resolver"), dict):
            status = ref["resolver"].get("status", "")
            ref["lookup_label"] = LOOKUP_LABELS.get(status, status)
    return references


@login_required
@require_GET
def run_report(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """The HTML report of one run: summary, judge, problems by kind, changes, references.

    The marked document is fetched by the page's script from ``run_document`` once the first
    screen is shown (``?document=inline`` puts it in the page, for readers without script), so
    a 300-page thesis's report answers quickly. The time the view took is in the
    ``Server-Timing`` header.
    """
    started = time.perf_counter()
    run = get_object_or_404(_alive_runs(request).defer("doc_html"), pk=run_id)
    report = run.report or {}
    latest = (
        AnalysisJob.objects.owned_by(request.user)
        .only("id", "status", "created_at")
        .latest_of_run(run.pk)
    )
    groups = reporting.problem_groups(report)
    for group in groups:
        group.html = report_html.problem_items(group, PROBLEMS_SHOWN)
    counts = problem_counts(report)
    previous = _previous_report(request, run) if run.status == JobStatus.COMPLETE else None
    change = None
    if previous is not None:
        change = {
            "diff": reporting.what_changed(previous[0], report),
            "what": previous[1],
            "when": previous[2],
        }
    references = _references(report)
    inline = request.GET.get("document") == "inline"
    context = {
        "run": run,
        "report": report,
        "style": reporting.style_name(report.get("style")),
        "counts": counts,
        "groups": groups,
        # The summary cards: each kind of problem with its count ("3 year mismatches").
        "kind_counts": [
            {
                "key": key,
                "name": label,
                "icon": icon,
                "n": counts[key],
                "label": label.lower() if counts[key] == 1 else reporting.PLURALS[key],
            }
            for key, label, icon, _text in reporting.KINDS
        ],
        "shown": PROBLEMS_SHOWN,
        "reference_rows": report_html.reference_rows(
            references, any(r.get("resolver") for r in references)
        ),
        "has_document": run.status == JobStatus.COMPLETE and "citations" in report,
        "doc_html": _document_html(
            AnalysisRun.objects.only("id", "job_id", "doc_html", "report").get(pk=run.pk)
        )
        if inline
        else "",
        "judgment": _judgment(run),
        "change": change,
        "library_checked": any(r.get("library") not in (None, "unchecked") for r in references),
        "resolver_checked": any(r.get("resolver") for r in references),
        "warnings": [w for w in report.get("warnings") or [] if isinstance(w, str)],
        # A newer job of this run still working: its report replaces this one when it is done.
        "newer_job": latest
        if latest and latest.pk != run.job_id and not latest.is_terminal
        else None,
        "can_reanalyse": latest is not None,
    }
    response = render(request, "jobs/run_report.html", context)
    response["Server-Timing"] = f"view;dur={(time.perf_counter() - started) * 1000:.1f}"
    return response


@login_required
@require_GET
def run_document(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """The marked document of a run, as an HTML fragment the report page inserts."""
    run = get_object_or_404(
        _alive_runs(request).only("id", "job_id", "doc_html", "report"), pk=run_id
    )
    response = HttpResponse(_document_html(run), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "private, no-cache"
    return response


@login_required
@require_GET
def run_report_json(request: HttpRequest, run_id: UUID) -> JsonResponse:
    """The report JSON of DESIGN.md, as stored on the run, with ``problem_counts`` added."""
    run = get_object_or_404(_alive_runs(request).only("id", "report"), pk=run_id)
    report = dict(run.report or {})
    report["problem_counts"] = problem_counts(report)
    return JsonResponse(report, json_dumps_params={"ensure_ascii": False})


def _download(body: bytes | str, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _stem(document: str) -> str:
    stem = document.rsplit(".", 1)[0] if "." in document else document
    # A header-safe file name: letters, digits and a few marks.
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in stem)[:80] or "report"


EXPORTS = {
    "citations.csv": "text/csv; charset=utf-8",
    "references.csv": "text/csv; charset=utf-8",
    "annotated.docx": exports.DOCX_MIME,
    "not-in-library.bib": "application/x-bibtex; charset=utf-8",
    "not-in-library.ris": "application/x-research-info-systems; charset=utf-8",
}


@login_required
@require_GET
def run_export(request: HttpRequest, run_id: UUID, name: str) -> HttpResponse:
    """``/runs/<run_id>/export/<name>``: the report's exports (owner only, 404 otherwise)."""
    if name not in EXPORTS:
        raise Http404("No such export.")
    run = get_object_or_404(_alive_runs(request).defer("doc_html"), pk=run_id)
    report = run.report or {}
    stem = _stem(run.document)
    if name == "citations.csv":
        body: bytes | str = exports.citations_csv(report)
    elif name == "references.csv":
        body = exports.references_csv(report)
    elif name == "annotated.docx":
        job = AnalysisJob.objects.only("id", "upload").get(pk=run.job_id)
        doc_html = AnalysisRun.objects.only("doc_html").get(pk=run.pk).doc_html
        body = exports.annotated_docx(
            report, upload=bytes(job.upload or b""), document=run.document, doc_html=doc_html
        ).data
    elif name == "not-in-library.bib":
        body = exports.bibtex_of(exports.not_in_library(report))
    else:
        body = exports.ris_of(exports.not_in_library(report))
    return _download(body, f"{stem}-{name}", EXPORTS[name])


@login_required
@require_POST
def run_reanalyse(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """Queue a new job of the same run from its latest upload; the new report replaces this one."""
    job = AnalysisJob.objects.owned_by(request.user).latest_of_run(run_id)
    if job is None:
        # The run exists only if it is ours; either way there is nothing of ours to re-analyse.
        get_object_or_404(_alive_runs(request), pk=run_id)
        return render(
            request,
            "jobs/message.html",
            {"title": "Cannot re-analyse", "message": "The upload of this report is gone."},
            status=404,
        )
    new_job = requeue(job)
    return redirect("job_page", job_id=new_job.pk)


# --- JSON API -----------------------------------------------------------------------------


@api_login_required
@api_methods("POST")
def api_create_job(request: HttpRequest) -> JsonResponse:
    """``POST /api/analysis-jobs`` (multipart ``file``, optional ``library``) → 201.

    400 for a malformed request (a JSON ``error`` says what), 429 past a fairness limit
    (``ACURIO_MAX_ACTIVE_JOBS``, ``ACURIO_UPLOAD_RATE_LIMIT``; ``Retry-After`` when known).
    """
    declared = _declared_size_too_big(request)
    if declared is not None:
        return json_error(too_big_message(declared))
    if not request.content_type.startswith("multipart/form-data"):
        return json_error("Send the thesis as multipart/form-data with the file in field 'file'.")
    try:
        form = UploadForm(request.POST, request.FILES)
    except MultiPartParserError as exc:
        return json_error(f"The multipart body could not be read: {exc}.")
    except (BadRequest, SuspiciousOperation) as exc:
        return json_error(f"The multipart body was refused: {exc}.")
    if not form.is_valid():
        return json_error(form.error_text())
    try:
        job = _submit(request, form)
    except TooManyJobs as exc:
        return too_many(exc)
    return JsonResponse({"id": job.pk, "run_id": str(job.run_id), "status": job.status}, status=201)


@api_login_required
@api_methods("GET", "HEAD")
def api_job(request: HttpRequest, job_id: int) -> JsonResponse:
    """``GET /api/analysis-jobs/<id>``: status and progress, polled by the tab."""
    job = (
        AnalysisJob.objects.owned_by(request.user)
        .only(
            "id",
            "owner_id",
            "run_id",
            "status",
            "progress_step",
            "progress_done",
            "progress_total",
            "error",
            "run_saved_at",
            "workflow_id",
        )
        .filter(pk=job_id)
        .first()
    )
    if job is None:
        return json_error("No such analysis job.", status=404)
    payload = job_payload(job)
    if job.status == JobStatus.QUEUED and job.first_step_running():
        payload["progress"]["step"] = "extract"
    return JsonResponse(payload)


@api_login_required
@api_methods("POST")
def api_save_run(request: HttpRequest) -> JsonResponse:
    """``POST /api/analysis-runs`` ``{"job_id"}``: the tab's save; 201 written, 200 no-op.

    The row is built from the job itself by the single writer; the client supplies nothing but
    the id. New content is judged at once (built-in judge) or very soon (a worker calls the
    remote one), so the report the tab opens next carries its assessment.
    """
    try:
        body = load_json(request.body or b"null", settings.ACURIO_JSON_MAX_DEPTH)
    except JsonTooDeep as exc:
        return json_error(f'The body must be JSON: {{"job_id": <id>}}; {exc}')
    except (ValueError, UnicodeDecodeError):
        return json_error('The body must be JSON: {"job_id": <id>}.')
    job_id = body.get("job_id") if isinstance(body, dict) else None
    if isinstance(job_id, str) and job_id.isdigit():
        job_id = int(job_id)
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        return json_error('The body must be JSON: {"job_id": <id>} with an integer id.')
    job = (
        AnalysisJob.objects.owned_by(request.user)
        .only("id", "owner_id", "status")
        .filter(pk=job_id)
        .first()
    )
    if job is None:
        return json_error("No such analysis job.", status=404)
    if not job.is_terminal:
        return json_error(
            f"The analysis is still {job.status}; save it once it is complete or failed.",
            status=409,
        )
    try:
        saved = save_and_judge(
            AnalysisJob.objects.filter(pk=job.pk), SavedBy.CLIENT, hand_remote_to_worker=True
        )
    except JobNotFound as exc:
        return json_error(str(exc), status=404)
    except SaveRunError as exc:
        return json_error(str(exc), status=409)
    if not saved:  # deleted for good since it was read above
        return json_error("No such analysis job.", status=404)
    result = saved[0].result
    return JsonResponse(
        {"id": str(result.run_id), "saved_by": result.saved_by, "job_id": result.job_id},
        status=201 if result.action in ("write", "claim") else 200,
    )


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Database reachable, and the age of the last sweeper tick (seconds, or null)."""
    body: dict = {"database": False, "sweeper_last_tick_age": None}
    try:
        with connection.cursor() as cursor:
            cursor.execute(PING)
        body["database"] = True
        last = SweeperHeartbeat.objects.last_tick_at()
        if last is not None:
            body["sweeper_last_tick_age"] = round((timezone.now() - last).total_seconds(), 1)
    except DatabaseError as exc:
        body["error"] = str(exc).strip().splitlines()[0] if str(exc).strip() else "database error"
        return JsonResponse(body, status=503)
    return JsonResponse(body)
