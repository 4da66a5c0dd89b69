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

import json
import logging
import math
import re
import sys
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from jobs import analysis
from jobs.analysis.blocks import html_blocks
from jobs.analysis.parse import parse_blocks
from jobs.analysis.references import parse_references
from jobs.durable import PermanentError, fan_out, start, task
from jobs.durable.isolation import BudgetExceeded, run_isolated
from jobs.models import AnalysisJob, FailureKind, JobCitation, JobStatus

logger = logging.getLogger("jobs.pipeline")

# Citations per fan-out child. Why a fan-out at all: its chunks run on whichever worker
# threads are free (in parallel, each in a child process of its own), a failed chunk retries
# only its piece, and a chunk is a short step, so another thesis's next step never waits
# long behind it. Why this size: a child's fixed cost (claim, loading the "parsed" checkpoint
# it verifies against, forking the isolated child, checkpoint) is 25-50 ms of worker time
# (60-130 ms wall on a loaded 2-core machine), while verifying one citation takes ~0.04 ms
# (0.1 ms loaded). At 200, a 300-page thesis (~1,900 citations) was ten chunks whose overhead
# was ten times the verifying itself (0.9-1.2 s of a 4.4 s analysis with one worker thread);
# at 1,000 it is two chunks (~0.2 s), still two pieces for two free threads, each chunk
# still far shorter than the thesis's extract step, and a document at the citation limit
# (20,000) still twenty pieces (BENCHMARKS.md, upload → report).
VERIFY_CHUNK = 1000
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


class TooManyJobs(Exception):
    """A user past a fairness limit (active jobs, or uploads per window): nothing was queued.

    ``retry_after`` is the seconds until an upload can succeed again, when that is known.
    """

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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

# An upload of this size or less runs at the highest priority; each doubling beyond it is one
# priority lower (64 KB: 9, 1 MB: 5, 16 MB and more: 1 or 0). A 30-page thesis is a few
# hundred KB of text, a 300-page one 1-3 MB: a short job's steps are claimed before the next
# step of a giant one, so it does not wait for the giant's whole fan-out (bench/hostile_bench.py).
PRIORITY_BASE_BYTES = 64 * 1024


def priority_of(size: int) -> int:
    """The engine priority (0..9, higher first) of an analysis of an upload of ``size`` bytes."""
    if size <= PRIORITY_BASE_BYTES:
        return 9
    return max(0, 9 - math.ceil(math.log2(size / PRIORITY_BASE_BYTES)))


# Priority alone decides only which step starts *next*: a small thesis uploaded while every
# worker thread is inside a long step of a giant one (a 2,000-page extract takes many seconds)
# still waits for that step to end. So the analyses of large uploads run in a queue of their
# own whose concurrency, across all workers, is capped (ACURIO_LARGE_ANALYSIS_SLOTS, declared
# in settings.ACURIO_DURABLE_QUEUES, fair between owners): with more worker threads than that,
# a thread is always free for the small ones (bench/hostile_bench.py --fairness).
LARGE_QUEUE = "analysis-large"


def queue_of(size: int) -> str:
    """The engine queue of an analysis of an upload of ``size`` bytes."""
    if settings.ACURIO_LARGE_ANALYSIS_SLOTS and size > settings.ACURIO_LARGE_UPLOAD_KB * 1024:
        return LARGE_QUEUE
    return "default"


def extraction_limits() -> analysis.Limits:
    """The extraction bounds of this deployment (settings; README, "Limits")."""
    mb = 1024 * 1024
    return analysis.Limits(
        max_bytes=settings.ACURIO_MAX_UPLOAD_MB * mb,
        max_text_chars=settings.ACURIO_MAX_TEXT_CHARS,
        docx_part_bytes=settings.ACURIO_DOCX_PART_MB * mb,
        docx_xml_bytes=settings.ACURIO_DOCX_XML_MB * mb,
        pdf_pages=settings.ACURIO_PDF_MAX_PAGES,
        pdf_seconds=settings.ACURIO_PDF_MAX_SECONDS,
        html_depth=settings.ACURIO_HTML_MAX_DEPTH,
        max_paragraphs=settings.ACURIO_MAX_PARAGRAPHS,
    )


def check_fairness(owner) -> None:
    """Raise :class:`TooManyJobs` when ``owner`` may not queue another analysis now.

    Call inside the transaction that creates the job: the owner's user row is locked first, so
    parallel uploads of one user are counted one after the other (50 at once cannot all see
    room for one more), while other users are not held up.
    """
    active_limit = settings.ACURIO_MAX_ACTIVE_JOBS
    rate_limit = settings.ACURIO_UPLOAD_RATE_LIMIT
    if not active_limit and not rate_limit:
        return
    get_user_model().objects.select_for_update().only("pk").get(pk=owner.pk)
    jobs = AnalysisJob.objects.filter(owner_id=owner.pk)
    if active_limit:
        active = jobs.filter(
            status__in=(JobStatus.QUEUED, JobStatus.RUNNING), deleted_at__isnull=True
        ).count()
        if active >= active_limit:
            raise TooManyJobs(
                f"You have {active} analyses queued or running; the limit is {active_limit}. "
                "Upload again when one of them has finished."
            )
    if rate_limit:
        window = settings.ACURIO_UPLOAD_RATE_WINDOW_SECONDS
        since = timezone.now() - timedelta(seconds=window)
        recent = list(
            jobs.filter(created_at__gte=since)
            .order_by("-created_at")
            .values_list("created_at", flat=True)[:rate_limit]
        )
        if len(recent) >= rate_limit:
            # Room again when the oldest of the last rate_limit uploads leaves the window.
            free_at = recent[-1] + timedelta(seconds=window)
            retry = max(1, math.ceil((free_at - timezone.now()).total_seconds()))
            raise TooManyJobs(
                f"You have started {len(recent)} analyses in the last {_duration(window)}; "
                f"the limit is {rate_limit}. Try again in {_duration(retry)}.",
                retry_after=retry,
            )


def _duration(seconds: int) -> str:
    if seconds % 60 == 0 and seconds >= 60:
        minutes = seconds // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def _start(job: AnalysisJob, size: int) -> AnalysisJob:
    resolver_url = settings.ACURIO_RESOLVER_URL
    job.workflow_id = start(
        analysis_workflow(resolve=bool(resolver_url)),
        label=f"analysis of {job.filename} (job {job.pk})"[:200],
        owner=job.owner,
        input={"job_id": job.pk, "resolver_url": resolver_url},
        on_failure=ON_FAILURE,
        queue=queue_of(size),
        priority=priority_of(size),
    )
    job.save(update_fields=["workflow_id", "updated_at"])
    return job


def submit_analysis(
    owner,
    filename: str,
    data: bytes,
    library: bytes | None = None,
    library_filename: str = "",
    *,
    fair: bool = False,
) -> AnalysisJob:
    """Create a queued job for an upload and start its workflow, in one transaction.

    ``fair`` (the upload page and the API pass it): raises :class:`TooManyJobs`, with nothing
    queued, when the owner is past a fairness limit (``check_fairness``). Operators' scripts
    and benchmarks queue without it.
    """
    with transaction.atomic():
        if fair:
            check_fairness(owner)
        job = AnalysisJob.objects.create(
            owner=owner,
            filename=filename,
            upload=data,
            library=library,
            library_filename=library_filename if library is not None else "",
            status=JobStatus.QUEUED,
            progress_step=Stage.QUEUED,
        )
        return _start(job, len(data))


def requeue(job: AnalysisJob) -> AnalysisJob:
    """A re-analysis: a new job of the same run (same upload), started like a fresh one.

    When it finishes, its content replaces the run's (a newer job wins, whoever saves it).
    """
    with transaction.atomic():
        new = job.new_attempt()
        return _start(new, len(new.upload or b""))


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


def extract_html(data: bytes, filename: str, limits: analysis.Limits) -> tuple[str, str]:
    """The extraction the ``extract`` step runs in its child: ``(sanitised HTML, format)``.

    Only what the step stores comes back through the pipe: the document's paragraphs
    (``ExtractedDocument.blocks``) would double the pickle (1.9 MB instead of 0.9 MB for the
    300-page corpus thesis, 0.1-0.3 s to pickle and unpickle), and parse reads them again
    from the stored HTML anyway."""
    document = analysis.extract(data, filename, limits=limits)
    return document.html, document.format


def extract(ctx) -> dict:
    """Upload → sanitised HTML, written once to the job row; returns only its size."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "filename", "upload", "library", "library_filename")
    try:
        html, fmt = _isolated(
            ctx,
            "extract",
            extract_html,
            bytes(job.upload),
            job.filename,
            limits=extraction_limits(),
        )
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    job.mark_stage(Stage.PARSE, doc_html=html, progress_done=0, progress_total=0)
    return {"job_id": job_id, "format": fmt, "chars": len(html)}


def parse(ctx) -> dict:
    """Find the citations and references in the job's doc_html (re-read, never passed along)."""
    job_id = _job_id(ctx)
    job = _alive_job(job_id, "doc_html")
    if job.doc_html is None:
        raise UploadError("its extracted text is gone; please upload it again.")
    try:
        data = _isolated(
            ctx,
            "parse",
            parse_bounded,
            job.doc_html,
            max_citations=settings.ACURIO_MAX_CITATIONS,
            max_entries=settings.ACURIO_MAX_ENTRIES,
        )
    except analysis.AnalysisInputError as exc:
        raise UploadError(str(exc)) from exc
    for citation in data["citations"]:
        # The sentence around each marker is a piece of the body: all of them together are a
        # good part of the document again, and nothing downstream needs them (the report page
        # shows every marker in place in doc_html).
        citation.pop("context", None)
    job.mark_stage(Stage.VERIFY, progress_done=0, progress_total=len(data["citations"]))
    return data


# A parenthesis holding a year, or a bracket of numbers: what most markers look like.
_MARKER_LIKE = re.compile(
    r"\([^()]{0,300}?(?<!\d)(?:1[5-9]\d\d|20\d\d)(?!\d)[^()]{0,300}?\)"
    r"|\[\s*\d{1,4}(?:\s*[,\u2013-]\s*\d{1,4}){0,50}\s*\]"
)


def parse_bounded(html: str, *, max_citations: int, max_entries: int) -> dict:
    """``analysis.parse(html).to_dict()``, refused when the document has more citations or
    entries than allowed (``ACURIO_MAX_CITATIONS``, ``ACURIO_MAX_ENTRIES``).

    Runs in the isolated child: the counts are checked there, before the citations travel
    to the worker and before the matching (verify, the costly part) is planned. The entries
    are counted first, before any marker is looked for (the citation search reads every
    entry's names: 20,000 entries and 60,000 markers took a minute before this check).
    """
    blocks = html_blocks(html)
    dated = None
    if max_entries:
        # One reading of the list (a tenth of the parse's time), which the parse reuses; the
        # other reading is checked below.
        dated = parse_references(blocks, numbered=False)
        if len(dated[0]) > max_entries:
            raise _too_many_entries(len(dated[0]), max_entries)
    if max_citations:
        # A cheap count of marker-like groups first: finding 100,000 markers costs a gigabyte
        # before any of them could be counted. Past half again the limit, the document is
        # refused here; below, the exact count after the parse decides.
        rough = sum(len(_MARKER_LIKE.findall(block.text)) for block in blocks)
        if rough > max_citations * 3 // 2:
            raise analysis.AnalysisInputError(
                f"This document has about {rough:,} citations; the limit is {max_citations:,}."
            )
    parsed = parse_blocks(blocks, dated)
    if max_entries and len(parsed.references) > max_entries:
        raise _too_many_entries(len(parsed.references), max_entries)
    if max_citations and len(parsed.citations) > max_citations:
        raise analysis.AnalysisInputError(
            f"This document has {len(parsed.citations):,} citations; "
            f"the limit is {max_citations:,}."
        )
    return parsed.to_dict()


def _too_many_entries(entries: int, limit: int) -> analysis.AnalysisInputError:
    return analysis.AnalysisInputError(
        f"This document's reference list has {entries:,} entries; the limit is {limit:,}."
    )


def plan(ctx) -> list[int]:
    """The positions of the citations, the list the verify fan-out is cut from.

    Their count is the job's ``progress_total``, which ``parse`` wrote in its checkpoint's
    transaction: one small read instead of loading and decoding the whole "parsed"
    checkpoint (half a megabyte for 300 pages) for its length.
    """
    return list(range(_alive_job(_job_id(ctx), "progress_total").progress_total))


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
    # A retried finalize starts over from a rolled-back transaction, so normally there is
    # nothing to replace; the delete keeps the step safe to re-run by hand all the same.
    JobCitation.objects.filter(job_id=job_id).delete()
    count = _copy_citations(job_id, report["citations"])
    job.complete(report, citations=count)
    return {"job_id": job_id, "citations": count, "summary": report["summary"]}


# The JobCitation columns finalize writes, in COPY order.
_CITATION_FIELDS = ("job", "index", "text", "keys", "verdict", "reason", "references")


def _copy_citations(job_id: int, citations: list[dict]) -> int:
    """Insert one ``JobCitation`` row per citation of the report with one ``COPY``, in this
    step's transaction; returns the count.

    COPY, not ``bulk_create``: for a 300-page thesis's ~2,000 rows, building the model
    instances and their parameters took 90-260 ms of the worker's CPU, COPY a tenth of it
    (BENCHMARKS.md, upload → report). The table's constraints hold as for any insert.
    """
    meta = JobCitation._meta
    columns = ", ".join(
        connection.ops.quote_name(meta.get_field(name).column) for name in _CITATION_FIELDS
    )
    statement = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for index, citation in enumerate(citations):
            copy.write_row(
                (
                    job_id,
                    index,
                    citation["text"],
                    json.dumps(citation.get("keys", [])),
                    citation["verdict"],
                    citation.get("reason", ""),
                    json.dumps(citation.get("references", [])),
                )
            )
    return len(citations)


def _library(job: AnalysisJob) -> tuple[analysis.Library | None, list[str]]:
    """The job's library, and the warnings for the report.

    The library is optional: one that cannot be read must not cost the student the analysis of
    the thesis, so its error becomes a warning on the report and the library check is skipped.
    """
    if job.library is None:
        return None, []
    try:
        return analysis.load_library(
            bytes(job.library),
            job.library_filename,
            max_json_depth=settings.ACURIO_JSON_MAX_DEPTH,
        ), []
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
