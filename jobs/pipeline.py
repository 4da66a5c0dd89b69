"""The citation analysis as a durable workflow; queueing it, re-analysing, judging a saved run.

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

Bad input (``AnalysisInputError``) is a ``PermanentError``: the instance fails at once and the
``on_failure`` hook marks the job failed with the message the user sees. The same hook covers
retries exhausted, a lease the sweeper could not recover, and an operator's cancel.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from jobs import analysis
from jobs.durable import PermanentError, fan_out, start, task
from jobs.models import AnalysisJob, JobCitation, JobStatus

logger = logging.getLogger("jobs.pipeline")

# Citations per fan-out child. A child's fixed cost (claim, loading the "parsed" checkpoint it
# verifies against, checkpoint) is ~100 ms on a loaded 2-core machine, while verifying one
# citation takes ~0.2 ms: 200 keeps that overhead small and still splits a 300-page thesis
# (~2,000 citations) into ten pieces for whichever workers are free (bench/web_pipeline.py).
VERIFY_CHUNK = 200
ON_FAILURE = "jobs.pipeline.on_failure"
# A remote judge's calls have their own timeouts and retries; this bounds the whole step.
JUDGE_STEP_TIMEOUT = 300
# What verify adds to a citation; the rest of it is already in the "parsed" checkpoint.
VERDICT_FIELDS = ("verdict", "references", "reason")
# What a user reads when the failure was ours, not their file's.
INTERNAL_ERROR = (
    "The analysis stopped because of an internal error, not because of your file. "
    "Try again with Re-analyse; if it keeps failing, please contact us."
)
CANCELLED_ERROR = "The analysis was cancelled by an operator. Use Re-analyse to run it again."
# The engine hands on_failure only the error text. Messages meant for the user carry this
# prefix (it also reads well in the admin), so on_failure can tell them from the engine's own
# ("step x failed after 5 attempt(s): KeyError: ...", lease loss), which the user never sees.
USER_ERROR_PREFIX = "Unusable upload: "


class UploadError(PermanentError):
    """Bad input: no retry can fix it, and its message is for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(USER_ERROR_PREFIX + message)


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
        source = AnalysisJob.objects.only(
            "owner", "filename", "upload", "library", "library_filename", "run_id"
        ).get(pk=job.pk)
        new = AnalysisJob.objects.create(
            owner_id=source.owner_id,
            filename=source.filename,
            upload=source.upload,
            library=source.library,
            library_filename=source.library_filename,
            run_id=source.run_id,
            status=JobStatus.QUEUED,
            progress_step=Stage.QUEUED,
        )
        return _start(new)


# --- Steps --------------------------------------------------------------------------------


def _job_id(ctx) -> int:
    return int(ctx.input["job_id"])


def _progress(job_id: int, step: str, **fields: Any) -> None:
    AnalysisJob.objects.filter(pk=job_id).update(
        status=JobStatus.RUNNING, progress_step=step, updated_at=timezone.now(), **fields
    )


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
        document = analysis.extract(
            bytes(job.upload), job.filename, max_bytes=settings.ACURIO_MAX_UPLOAD_MB * 1024 * 1024
        )
        # An unreadable library fails the job now rather than after all the verifying.
        _library(job)
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    _progress(job_id, Stage.PARSE, doc_html=document.html, progress_done=0, progress_total=0)
    return {"job_id": job_id, "format": document.format, "chars": len(document.html)}


def parse(ctx) -> dict:
    """Find the citations and references in the job's doc_html (re-read, never passed along)."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "doc_html")
    if job.doc_html is None:
        raise UploadError("its extracted text is gone; please upload it again.")
    try:
        parsed = analysis.parse(job.doc_html)
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    data = parsed.to_dict()
    for citation in data["citations"]:
        # The sentence around each marker is a piece of the body: all of them together are a
        # good part of the document again, and nothing downstream needs them (the report page
        # shows every marker in place in doc_html).
        citation.pop("context", None)
    _progress(job_id, Stage.VERIFY, progress_done=0, progress_total=len(data["citations"]))
    return data


def plan(ctx) -> list[int]:
    """The positions of the citations, the list the verify fan-out is cut from."""
    return list(range(len(ctx["parsed"]["citations"])))


def verify(ctx) -> list[dict]:
    """Verdicts of one chunk of citations against the reference list."""
    parsed = ctx["parsed"]
    ids = list(ctx.chunk)
    citations = [parsed["citations"][i] for i in ids]
    verdicts = analysis.verify(citations, parsed["references"], parsed["style"])
    # Checkpoint only what verify added: finalize has the citations themselves in "parsed",
    # so repeating them here would store every marker and its context twice more.
    slim = [{k: v[k] for k in VERDICT_FIELDS if k in v} for v in verdicts]
    # The update comes last so the job row is locked only for the end of this transaction.
    count_verified(
        _job_id(ctx),
        len(ids),
        next_stage=Stage.RESOLVE if ctx.input.get("resolver_url") else Stage.FINALIZE,
    )
    return slim


def count_verified(job_id: int, count: int, next_stage: str = Stage.FINALIZE) -> None:
    """Add ``count`` verified citations to the job's progress, atomically.

    Children run in parallel on several workers, so this adds to the count rather than
    setting it; whichever chunk completes the count hands the progress to the next stage.
    """
    done = F("progress_done") + count
    AnalysisJob.objects.filter(pk=job_id).update(
        progress_done=done,
        progress_step=Case(
            When(progress_total__lte=done, then=Value(next_stage)),
            default=F("progress_step"),
        ),
        updated_at=timezone.now(),
    )


def resolve(ctx) -> list[dict]:
    """Look every reference up in the Crossref-compatible resolver (outside effects only)."""
    parsed = ctx["parsed"]
    resolver = analysis.Resolver(ctx.input["resolver_url"], mailto=settings.ACURIO_RESOLVER_MAILTO)
    try:
        results = [resolver.check(ref) for ref in analysis.references_of(parsed)]
    finally:
        resolver.close()
    _progress(_job_id(ctx), Stage.FINALIZE)
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
    try:
        report = analysis.build_report(
            job.filename,
            parsed,
            verdicts,
            library=_library(job),
            resolver=_Resolved(resolved) if resolved is not None else None,
        )
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
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
    now = timezone.now()
    total = len(citations)
    AnalysisJob.objects.filter(pk=job_id).update(
        status=JobStatus.COMPLETE,
        results=report,
        error="",
        progress_step=Stage.DONE,
        progress_done=total,
        progress_total=total,
        finished_at=now,
        updated_at=now,
    )
    return {"job_id": job_id, "citations": total, "summary": report["summary"]}


def _library(job: AnalysisJob):
    if job.library is None:
        return None
    return analysis.load_library(bytes(job.library), job.library_filename)


# --- Judging a saved run ---------------------------------------------------------------------


def judge_soon(run_id) -> None:
    """Judge a run the tab just wrote, without keeping the tab waiting on a remote judge.

    The built-in judge takes milliseconds and runs right here. A remote judge (network,
    timeouts, retries) runs as a one-step durable workflow that the next free worker picks up.
    Either way, a failure leaves the run unjudged for its job, and the sweeper's judge backstop
    judges it later.
    """
    from jobs.judge import JudgeError, judge_run

    if not settings.ACURIO_JUDGE_URL:
        try:
            judge_run(run_id)
        except JudgeError as exc:
            logger.warning("run %s saved but not judged yet (the sweeper will): %s", run_id, exc)
        return
    start(
        task("jobs.pipeline.judge", timeout=JUDGE_STEP_TIMEOUT),
        label=f"judge run {run_id}",
        input={"run_id": str(run_id)},
    )


def judge(ctx) -> dict:
    """The durable step behind judge_soon (at least once: judging twice stores the same)."""
    from jobs.judge import judge_run

    judgment = judge_run(ctx.input["run_id"])
    return {"run_id": ctx.input["run_id"], "score": judgment.get("score")}


# --- Failure ------------------------------------------------------------------------------


def on_failure(instance_id, error: str) -> None:
    """The engine failed this job's instance: mark the job failed with a message for the user.

    Runs in the transaction that fails (or cancels) the instance. An UploadError's message is
    the user's (it explains what is wrong with the file); anything else is ours: it is logged,
    and the user reads a plain explanation instead of a stack trace.
    """
    job = AnalysisJob.objects.only("id", "status").filter(workflow_id=instance_id).first()
    if job is None or job.is_terminal:
        return
    message = user_message(error)
    if message == INTERNAL_ERROR:
        logger.error("analysis job %s failed (instance %s): %s", job.pk, instance_id, error)
    now = timezone.now()
    AnalysisJob.objects.filter(pk=job.pk).update(
        status=JobStatus.FAILED, error=message, finished_at=now, updated_at=now
    )


def user_message(error: str) -> str:
    """The engine's error text as the user should read it."""
    error = (error or "").strip()
    if error.startswith(USER_ERROR_PREFIX) and error[len(USER_ERROR_PREFIX) :].strip():
        return error[len(USER_ERROR_PREFIX) :].strip()
    if error == "cancelled":
        return CANCELLED_ERROR
    return INTERNAL_ERROR
