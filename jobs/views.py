"""Views of the jobs app: the user's pages and the JSON API (paths and shapes fixed by DESIGN.md).

Pages: the runs list, the upload page, a job's progress page, the report (HTML and JSON) and its
re-analyse action. API: ``POST /api/analysis-jobs`` (upload), ``GET /api/analysis-jobs/<id>``
(progress, polled by the tab) and ``POST /api/analysis-runs`` (the tab's save: the single writer,
then the judge, ``jobs.runs.save_and_judge``). A user reaches only their own jobs and runs:
anything else is a 404, so ids of other users' work are not even confirmed to exist.

Views only turn requests into calls and results into responses: the queries are QuerySet
methods of the models, the work is ``jobs.pipeline``'s and ``jobs.runs``'.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db import connection
from django.db.utils import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs import analysis
from jobs.forms import UploadForm, max_upload_bytes, too_big_message
from jobs.models import (
    AnalysisJob,
    AnalysisRun,
    JobCitation,
    JobStatus,
    SavedBy,
    SweeperHeartbeat,
    Verdict,
)
from jobs.pipeline import requeue, submit_analysis
from jobs.runs import JobNotFound, SaveRunError, save_and_judge
from jobs.sql import PING

PROBLEM_VERDICTS = (
    Verdict.MISSING_REFERENCE,
    Verdict.AMBIGUOUS,
    Verdict.YEAR_MISMATCH,
    Verdict.AUTHOR_MISMATCH,
)
# Shown when a citation carries no reason of its own (e.g. a report saved before reasons existed).
VERDICT_EXPLANATIONS = {
    Verdict.VERIFIED: "Matches exactly one entry of the reference list.",
    Verdict.MISSING_REFERENCE: "No entry of the reference list has this author and year (or number).",
    Verdict.YEAR_MISMATCH: "The author has an entry in the reference list, but with another year.",
    Verdict.AUTHOR_MISMATCH: "An entry of the same year has a slightly different surname.",
    Verdict.AMBIGUOUS: "Several entries match; their years need a/b suffixes to tell them apart.",
}
# The reference resolver's statuses, as the report page says them.
LOOKUP_LABELS = {
    "found": "found",
    "not_found": "not found",
    "doi_not_found": "DOI not found",
    "doi_mismatch": "DOI of another work",
    "error": "lookup failed",
}
ANNOTATED_CACHE_SECONDS = 15 * 60
ANNOTATED_CACHE_MAX_CHARS = 8 * 1024 * 1024
# The declared body may exceed the file limit by the multipart envelope and the optional library
# (itself up to the limit); beyond that we refuse before reading a byte of it.
_ENVELOPE_SLACK = 1024 * 1024


def json_error(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


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


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    """Every run of the signed-in user, whichever writer saved it, with its counts.

    The counts come from the report's JSON in SQL, so the list never loads a report payload or
    a (TOASTed) doc_html.
    """
    runs = (
        AnalysisRun.objects.owned_by(request.user)
        .only("id", "document", "status", "saved_by", "saved_at", "error")
        .with_counts(PROBLEM_VERDICTS)
        .order_by("-saved_at")[:200]
    )
    # Work not (yet) in a run: queued or running jobs, and recent failures no run records.
    # A tab closed mid-analysis can be picked up again from here.
    pending = (
        AnalysisJob.objects.owned_by(request.user)
        .unsaved_work(failed_within=timedelta(days=1))
        .only(
            "id",
            "filename",
            "status",
            "progress_step",
            "progress_done",
            "progress_total",
            "error",
            "created_at",
            "run_id",
        )
        .order_by("-created_at")[:20]
    )
    return render(request, "jobs/runs_list.html", {"runs": runs, "pending": pending})


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
            job = _submit(request, form)
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


def _citations_with_reasons(run: AnalysisRun) -> list[dict]:
    """The report's citations in document order, each with a reason and its position."""
    report_citations = (run.report or {}).get("citations") or []
    reasons: dict[int, str] = {}
    if any(not c.get("reason") for c in report_citations):
        # Reports from before reasons were stored in the JSON: the citation rows have them.
        reasons = dict(JobCitation.objects.filter(job_id=run.job_id).values_list("index", "reason"))
    rows = []
    for index, citation in enumerate(report_citations):
        verdict = citation.get("verdict", "")
        rows.append(
            {
                **citation,
                "index": index,
                "reason": citation.get("reason")
                or reasons.get(index)
                or VERDICT_EXPLANATIONS.get(verdict, ""),
                "verdict_label": Verdict(verdict).label if verdict in Verdict.values else verdict,
            }
        )
    return rows


def _annotated_html(run: AnalysisRun, citations: list[dict]) -> str:
    """doc_html with every citation marked, cached per (run, job).

    Marking a long thesis takes a while (about 2 s for 300 pages), and a report is usually
    opened several times soon after it is saved. The row's body changes only together with its
    job, so the pair is a safe key; the cache is the process's own memory, never the database
    (a second stored copy of the body is what this design avoids).
    """
    if not run.doc_html:
        return ""
    key = f"acurio:annotated:{run.pk}:{run.job_id}"
    html = cache.get(key)
    if html is None:
        html = analysis.annotate_html(run.doc_html, citations)
        if len(html) <= ANNOTATED_CACHE_MAX_CHARS:
            cache.set(key, html, ANNOTATED_CACHE_SECONDS)
    return html


def _judgment(run: AnalysisRun) -> dict | None:
    if not isinstance(run.judgment, dict):
        return None
    judgment = dict(run.judgment)
    labels = dict(Verdict.choices) | {"uncited": "Uncited"}
    judgment["problems"] = [
        {**p, "verdict_label": labels.get(p.get("verdict"), p.get("verdict"))}
        for p in judgment.get("problems") or []
        if isinstance(p, dict)
    ]
    return judgment


@login_required
@require_GET
def run_report(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """The HTML report of one run: counts, the marked-up document, problems, references, judge."""
    run = get_object_or_404(AnalysisRun.objects.owned_by(request.user), pk=run_id)
    report = run.report or {}
    citations = _citations_with_reasons(run)
    summary = report.get("summary") or {}
    references = report.get("references") or []
    for number, ref in enumerate(references):
        ref["number"] = number
        if isinstance(ref.get("resolver"), dict):
            status = ref["resolver"].get("status", "")
            ref["lookup_label"] = LOOKUP_LABELS.get(status, status)
    latest = (
        AnalysisJob.objects.owned_by(request.user)
        .only("id", "status", "created_at")
        .latest_of_run(run.pk)
    )
    problems = [c for c in citations if c.get("verdict") in PROBLEM_VERDICTS]
    uncited = [r for r in references if r.get("verdict") == "uncited"]
    invalid_dois = [r for r in references if r.get("doi") and r.get("doi_valid") is False]
    context = {
        "run": run,
        "report": report,
        "summary": summary,
        "citations": citations,
        "problems": problems,
        "references": references,
        "uncited": uncited,
        "invalid_dois": invalid_dois,
        "doc_html": _annotated_html(run, citations),
        "problem_total": len(problems) + len(uncited) + len(invalid_dois),
        "judgment": _judgment(run),
        "library_checked": any(r.get("library") not in (None, "unchecked") for r in references),
        "library_missing": sum(1 for r in references if r.get("library") == "not_found"),
        "resolver_checked": any(r.get("resolver") for r in references),
        # A newer job of this run still working: its report replaces this one when it is done.
        "newer_job": latest
        if latest and latest.pk != run.job_id and not latest.is_terminal
        else None,
        "can_reanalyse": latest is not None,
    }
    return render(request, "jobs/run_report.html", context)


@login_required
@require_GET
def run_report_json(request: HttpRequest, run_id: UUID) -> JsonResponse:
    """The report JSON of DESIGN.md, as stored on the run."""
    run = get_object_or_404(
        AnalysisRun.objects.owned_by(request.user).only("id", "report"), pk=run_id
    )
    return JsonResponse(run.report or {}, json_dumps_params={"ensure_ascii": False})


@login_required
@require_POST
def run_reanalyse(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """Queue a new job of the same run from its latest upload; the new report replaces this one."""
    job = AnalysisJob.objects.owned_by(request.user).latest_of_run(run_id)
    if job is None:
        # The run exists only if it is ours; either way there is nothing of ours to re-analyse.
        get_object_or_404(AnalysisRun.objects.owned_by(request.user), pk=run_id)
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
@require_POST
def api_create_job(request: HttpRequest) -> JsonResponse:
    """``POST /api/analysis-jobs`` (multipart ``file``, optional ``library``) → 201."""
    declared = _declared_size_too_big(request)
    if declared is not None:
        return json_error(too_big_message(declared))
    if not request.content_type.startswith("multipart/form-data"):
        return json_error("Send the thesis as multipart/form-data with the file in field 'file'.")
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return json_error(form.error_text())
    job = _submit(request, form)
    return JsonResponse({"id": job.pk, "run_id": str(job.run_id), "status": job.status}, status=201)


@api_login_required
@require_GET
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
@require_POST
def api_save_run(request: HttpRequest) -> JsonResponse:
    """``POST /api/analysis-runs`` ``{"job_id"}``: the tab's save; 201 written, 200 no-op.

    The row is built from the job itself by the single writer; the client supplies nothing but
    the id. New content is judged at once (built-in judge) or very soon (a worker calls the
    remote one), so the report the tab opens next carries its assessment.
    """
    try:
        body = json.loads(request.body or b"null")
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
