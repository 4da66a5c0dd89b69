"""The citation analysis as a durable workflow; queueing it and re-analysing.

::

    extract >> parse.as_("parsed") >> plan.as_("citation_ids")
        >> fan_out(verify, over="citation_ids", chunk=VERIFY_CHUNK).as_("verdicts")
        [>> resolve.as_("resolved")]  >> finalize

Large data has one home, the ``AnalysisJob`` row: ``extract`` reads the upload from it and writes
``doc_html`` to it once; ``parse`` reads ``doc_html`` back from it. Checkpoints hold only small
data: the parsed citations and reference entries (marker texts, keys and positions, entry texts;
no document body, not even the sentence around each marker), the citation positions the fan-out
cuts into chunks (plain integers, so a child row stores no copy of a citation), each chunk's
verdicts (verdict, matched entries, reason) and, with a resolver, one lookup result per entry.
``finalize`` writes the ``JobCitation`` rows and the report to the job and marks it complete in
the same transaction as its checkpoint, and it does not write ``AnalysisRun``: the browser tab
saves the run, or the sweeper's backstop does.

Every step's writes commit with its checkpoint, so the progress a step records becomes visible
when the step is done: ``progress_step`` names the stage now under way.

Bad input (``AnalysisInputError``) becomes an ``UploadError``, a ``PermanentError``: the instance
fails at once and the ``on_failure`` hook marks the job failed (``FailureKind.INPUT``) with the
message the user sees. The same hook covers retries exhausted, a lease the sweeper could not
recover (``INTERNAL``), and an operator's cancel (``CANCELLED``).
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.db import transaction

from jobs import analysis
from jobs.durable import PermanentError, fan_out, start, task
from jobs.durable.isolation import BudgetExceeded, run_isolated
from jobs.models import AnalysisJob, FailureKind, JobCitation, JobStatus

logger = logging.getLogger("jobs.pipeline")

# Citations per fan-out child. A child's fixed cost (claim, loading the "parsed" checkpoint it
# verifies against, checkpoint) is ~100 ms on a loaded 2-core machine, while verifying one
# citation takes ~0.2 ms: 200 keeps that overhead small and still splits a 300-page thesis
# (~2,000 citations) into ten pieces for whichever workers are free (bench/web_pipeline.py).
VERIFY_CHUNK = 200
ON_FAILURE = "jobs.pipeline.on_failure"
# What verify adds to a citation; the rest of it is already in the "parsed" checkpoint.
VERDICT_FIELDS = ("verdict", "references", "reason")
# What a user reads when the failure was ours, not their file's.
INTERNAL_ERROR = (
    "The analysis stopped because of an internal error, not because of your file. "
    "Try again with Re-analyse; if it keeps failing, please contact us."
)
CANCELLED_ERROR = "The analysis was cancelled by an operator. Use Re-analyse to run it again."


class UploadError(PermanentError):
    """Bad input: no retry can fix it, and ``user_message`` is for the user.

    Its text (what the engine stores and its admin shows) names it an unusable upload; the job
    gets ``user_message`` alone, with ``FailureKind.INPUT``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(f"Unusable upload: {message}")
        self.user_message = message


class Stage:
    QUEUED = "queued"
    EXTRACT = "extract"
    PARSE = "parse"
    VERIFY = "verify"
    RESOLVE = "resolve"
    FINALIZE = "finalize"
    DONE = "complete"


def analysis_workflow(*, resolve: bool = False):
    """The workflow graph; ``start()`` stores it, so a deploy never changes a running one.

    With ``resolve`` (a resolver URL is configured) a ``resolve`` step looks the references up
    before ``finalize``: the network calls run in a step of their own that writes nothing, so
    no transaction holds a row lock while it waits on the network, and a retry repeats only
    the lookups.
    """
    flow = (
        task("jobs.pipeline.extract")
        >> task("jobs.pipeline.parse").as_("parsed")
        >> task("jobs.pipeline.plan").as_("citation_ids")
        >> fan_out(task("jobs.pipeline.verify"), over="citation_ids", chunk=VERIFY_CHUNK).as_(
            "verdicts"
        )
    )
    if resolve:
        flow = flow >> task("jobs.pipeline.resolve").as_("resolved")
    return flow >> task("jobs.pipeline.finalize")


# --- Queueing -----------------------------------------------------------------------------


def _start(job: AnalysisJob) -> AnalysisJob:
    resolver_url = settings.ACURIO_RESOLVER_URL
    job.workflow_id = start(
        analysis_workflow(resolve=bool(resolver_url)),
        label=f"analysis of {job.filename} (job {job.pk})"[:200],
        owner=job.owner,
        input={"job_id": job.pk, "resolver_url": resolver_url},
        on_failure=ON_FAILURE,
    )
    job.save(update_fields=["workflow_id", "updated_at"])
    return job


def submit_analysis(
    owner,
    filename: str,
    data: bytes,
    library: bytes | None = None,
    library_filename: str = "",
) -> AnalysisJob:
    """Create a queued job for an upload and start its workflow, in one transaction."""
    with transaction.atomic():
        job = AnalysisJob.objects.create(
            owner=owner,
            filename=filename,
            upload=data,
            library=library,
            library_filename=library_filename if library is not None else "",
            status=JobStatus.QUEUED,
            progress_step=Stage.QUEUED,
        )
        return _start(job)


def requeue(job: AnalysisJob) -> AnalysisJob:
    """A re-analysis: a new job of the same run (same upload), started like a fresh one.

    When it finishes, its content replaces the run's (a newer job wins, whoever saves it).
    """
    with transaction.atomic():
        return _start(job.new_attempt())


# --- Steps --------------------------------------------------------------------------------


def _isolated(ctx, what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a child process under the step budgets (ACURIO_STEP_MEMORY_MB,
    ACURIO_STEP_TIMEOUT_SECONDS): a document past them fails its job with a clear message, the
    worker lives on, and a cancel kills the computation (jobs.durable.isolation). The step's
    reads and writes stay here, in its checkpoint transaction."""
    try:
        return run_isolated(
            fn,
            *args,
            memory_mb=settings.ACURIO_STEP_MEMORY_MB,
            timeout=settings.ACURIO_STEP_TIMEOUT_SECONDS,
            should_stop=ctx.stopped,
            what=what,
            **kwargs,
        )
    except BudgetExceeded as exc:
        raise UploadError(f"analysing it needs more than this server allows ({exc}).") from exc


def _job_id(ctx) -> int:
    return int(ctx.input["job_id"])


def _alive_job(job_id: int, *fields: str) -> AnalysisJob:
    job = AnalysisJob.objects.only("id", "deleted_at", *fields).filter(pk=job_id).first()
    if job is None or job.deleted_at is not None:
        raise UploadError("it was deleted before its analysis finished.")
    return job


def extract(ctx) -> dict:
    """Upload → sanitised HTML, written once to the job row; returns only its size."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "filename", "upload", "library", "library_filename")
    try:
        document = _isolated(
            ctx,
            "extract",
            analysis.extract,
            bytes(job.upload),
            job.filename,
            max_bytes=settings.ACURIO_MAX_UPLOAD_MB * 1024 * 1024,
        )
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    job.mark_stage(Stage.PARSE, doc_html=document.html, progress_done=0, progress_total=0)
    return {"job_id": job_id, "format": document.format, "chars": len(document.html)}


def parse(ctx) -> dict:
    """Find the citations and references in the job's doc_html (re-read, never passed along)."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "doc_html")
    if job.doc_html is None:
        raise UploadError("its extracted text is gone; please upload it again.")
    try:
        data = _isolated(ctx, "parse", lambda html: analysis.parse(html).to_dict(), job.doc_html)
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    for citation in data["citations"]:
        # The sentence around each marker is a piece of the body: all of them together are a
        # good part of the document again, and nothing downstream needs them (the report page
        # shows every marker in place in doc_html).
        citation.pop("context", None)
    job.mark_stage(Stage.VERIFY, progress_done=0, progress_total=len(data["citations"]))
    return data


def plan(ctx) -> list[int]:
    """The positions of the citations, the list the verify fan-out is cut from."""
    return list(range(len(ctx["parsed"]["citations"])))


def verify(ctx) -> list[dict]:
    """Verdicts of one chunk of citations against the reference list."""
    parsed = ctx["parsed"]
    ids = list(ctx.chunk)
    citations = [parsed["citations"][i] for i in ids]
    verdicts = _isolated(
        ctx, "verify", analysis.verify, citations, parsed["references"], parsed["style"]
    )
    # Checkpoint only what verify added: finalize has the citations themselves in "parsed",
    # so repeating them here would store every marker and its context twice more.
    slim = [{k: v[k] for k in VERDICT_FIELDS if k in v} for v in verdicts]
    # The update comes last so the job row is locked only for the end of this transaction.
    AnalysisJob.objects.filter(pk=_job_id(ctx)).add_verified(
        len(ids), next_stage=Stage.RESOLVE if ctx.input.get("resolver_url") else Stage.FINALIZE
    )
    return slim


def resolve(ctx) -> list[dict]:
    """Look every reference up in the Crossref-compatible resolver (outside effects only)."""
    parsed = ctx["parsed"]
    resolver = analysis.Resolver(ctx.input["resolver_url"], mailto=settings.ACURIO_RESOLVER_MAILTO)
    try:
        results = [resolver.check(ref) for ref in analysis.references_of(parsed)]
    finally:
        resolver.close()
    AnalysisJob.objects.filter(pk=_job_id(ctx)).mark_stage(Stage.FINALIZE)
    return results


class _Resolved:
    """Hands build_report the lookups the resolve step already made, by entry position."""

    def __init__(self, results: list[dict]) -> None:
        self.results = results

    def check(self, ref) -> dict:
        return self.results[ref.index]


def finalize(ctx) -> dict:
    """Write the citations and the report to the job and mark it complete. No AnalysisRun."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "filename", "library", "library_filename")
    parsed = ctx["parsed"]
    # The fan-out joined its chunks' lists in document order: one verdict per citation.
    verdicts = [
        {**citation, **verdict}
        for citation, verdict in zip(parsed["citations"], ctx["verdicts"], strict=True)
    ]
    resolved = ctx.get("resolved")
    library, warnings = _library(job)
    try:
        report = analysis.build_report(
            job.filename,
            parsed,
            verdicts,
            library=library,
            resolver=_Resolved(resolved) if resolved is not None else None,
        )
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    if warnings:
        report["warnings"] = warnings
    for citation in report["citations"]:
        if not citation.get("context"):
            citation.pop("context", None)  # dropped at parse (see there)
    citations = [
        JobCitation(
            job_id=job_id,
            index=index,
            text=citation["text"],
            keys=citation.get("keys", []),
            verdict=citation["verdict"],
            reason=citation.get("reason", ""),
            references=citation.get("references", []),
        )
        for index, citation in enumerate(report["citations"])
    ]
    # A retried finalize starts over from a rolled-back transaction, so normally there is
    # nothing to replace; the delete keeps the step safe to re-run by hand all the same.
    JobCitation.objects.filter(job_id=job_id).delete()
    JobCitation.objects.bulk_create(citations, batch_size=1000)
    job.complete(report, citations=len(citations))
    return {"job_id": job_id, "citations": len(citations), "summary": report["summary"]}


def _library(job: AnalysisJob) -> tuple[analysis.Library | None, list[str]]:
    """The job's library, and the warnings for the report.

    The library is optional: one that cannot be read must not cost the student the analysis of
    the thesis, so its error becomes a warning on the report and the library check is skipped.
    """
    if job.library is None:
        return None, []
    try:
        return analysis.load_library(bytes(job.library), job.library_filename), []
    except analysis.AnalysisInputError as exc:
        reason = str(exc).strip().rstrip(".")
        reason = reason[:1].lower() + reason[1:]
        name = job.library_filename or "The library"
        return None, [f"{name} could not be read: {reason}; the library check was skipped."]


# --- Failure ------------------------------------------------------------------------------


def on_failure(instance_id, error: str) -> None:
    """The engine failed this job's instance: mark the job failed with a message for the user.

    Runs in the transaction that fails (or cancels) the instance. Whose failure it is comes
    from the exception's type: a worker calls this hook while it handles the exception its
    step raised, so an ``UploadError`` in flight is the user's (its message explains what is
    wrong with the file); the engine's ``"cancelled"`` is an operator's; anything else is
    ours: it is logged, and the user reads a plain explanation instead of a stack trace.
    """
    job = AnalysisJob.objects.only("id", "status").filter(workflow_id=instance_id).first()
    if job is None or job.is_terminal:
        return
    kind, message = failure_of(sys.exception(), error)
    if kind == FailureKind.INTERNAL:
        logger.error("analysis job %s failed (instance %s): %s", job.pk, instance_id, error)
    job.fail(message, kind)


def failure_of(exc: BaseException | None, error: str) -> tuple[FailureKind, str]:
    """Whose failure it is, and what the user reads: from the step's exception (if any) and
    the engine's error text."""
    if isinstance(exc, UploadError) and exc.user_message.strip():
        return FailureKind.INPUT, exc.user_message.strip()
    if (error or "").strip() == "cancelled":
        return FailureKind.CANCELLED, CANCELLED_ERROR
    return FailureKind.INTERNAL, INTERNAL_ERROR
