"""Models of the jobs app: the work queue, the user-facing report rows, their citations.

``AnalysisJob`` is one analysis attempt of an uploaded thesis; ``AnalysisRun`` is the report a
user reads (one per run id, written by exactly one function: ``jobs.runs.writer.save_run``);
``JobCitation`` holds one row per in-text citation with its verdict. ``SweeperHeartbeat`` and
``RunEvent`` let operators see the sweeper working.

A job's state changes are its own methods (``mark_stage``, ``complete``, ``fail``,
``soft_delete``, ``new_attempt``) or, where a step knows only the job's id, methods of its
QuerySet; the named selections (``ghosts``, ``in_flight``, ``unjudged``...) are QuerySet methods.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import (
    Case,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Upper
from django.utils import timezone

from jobs.durable.graph import iter_spec
from jobs.durable.kinds import composite_kinds, node_label
from jobs.durable.models import Instance, Step, StepStatus


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETE = "complete", "Complete"
    FAILED = "failed", "Failed"


TERMINAL_STATUSES = (JobStatus.COMPLETE, JobStatus.FAILED)


class FailureKind(models.TextChoices):
    """Whose failure a failed job is: it decides what the user reads."""

    INPUT = "input", "Unusable input"  # the file itself: its message is for the user
    INTERNAL = "internal", "Internal error"  # ours: the user reads a plain explanation
    CANCELLED = "cancelled", "Cancelled by an operator"


class SavedBy(models.TextChoices):
    CLIENT = "client", "Client"
    WORKER = "worker", "Worker"


class Verdict(models.TextChoices):
    VERIFIED = "verified", "Verified"
    MISSING_REFERENCE = "missing_reference", "Missing reference"
    YEAR_MISMATCH = "year_mismatch", "Year mismatch"
    AUTHOR_MISMATCH = "author_mismatch", "Author mismatch"
    AMBIGUOUS = "ambiguous", "Ambiguous"


class AnalysisJobQuerySet(models.QuerySet):
    def alive(self) -> AnalysisJobQuerySet:
        """Jobs not soft-deleted."""
        return self.filter(deleted_at__isnull=True)

    def owned_by(self, user) -> AnalysisJobQuerySet:
        return self.alive().filter(owner=user)

    def terminal(self) -> AnalysisJobQuerySet:
        return self.filter(status__in=TERMINAL_STATUSES)

    def ghosts(self, grace: timedelta | float | None = None) -> AnalysisJobQuerySet:
        """Terminal jobs with a report body that no run row holds yet.

        With ``grace`` (seconds or a timedelta), only those untouched for at least that long:
        the run backstop's selection. Without it, every ghost (the admin shows both).
        """
        qs = (
            self.alive()
            .terminal()
            .filter(run_saved_at__isnull=True, doc_html__isnull=False)
            .exclude(results__isnull=True)
            .exclude(results={})
        )
        if grace is not None:
            if not isinstance(grace, timedelta):
                grace = timedelta(seconds=grace)
            qs = qs.filter(updated_at__lte=timezone.now() - grace)
        return qs

    def in_flight(self, window: timedelta) -> AnalysisJobQuerySet:
        """Jobs queued or running, or terminal within ``window``: the admin's in-flight panel."""
        since = timezone.now() - window
        return self.alive().filter(
            Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]) | Q(finished_at__gte=since)
        )

    def latest_of_run(self, run_id: uuid.UUID) -> AnalysisJob | None:
        """The newest job of a run: the one a re-analysis copies, the one a report waits for."""
        return self.filter(run_id=run_id).order_by("-created_at").first()

    def unsaved_work(self, failed_within: timedelta) -> AnalysisJobQuerySet:
        """Work no run shows: queued or running jobs, and failures within ``failed_within`` that
        no run records (the runs list offers them, so a closed tab's job can be picked up).

        A failure a newer job of its run has replaced (a re-queue, a re-analysis) is left out:
        the newer job is the run's state now, and listing both would show "Failed" for work
        that is in fact queued again.
        """
        newer = AnalysisJob.objects.filter(run_id=OuterRef("run_id"), pk__gt=OuterRef("pk"))
        return self.filter(
            Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING])
            | Q(
                Q(
                    status=JobStatus.FAILED,
                    run_saved_at__isnull=True,
                    finished_at__gte=timezone.now() - failed_within,
                )
                & ~Exists(newer)
            )
        )

    # --- state changes of jobs known by id (the pipeline's steps) ---

    def mark_stage(self, stage: str, **fields) -> int:
        """The jobs are running, now at ``stage``; ``fields`` are written with it."""
        return self.update(
            status=JobStatus.RUNNING, progress_step=stage, updated_at=timezone.now(), **fields
        )

    def add_verified(self, count: int, next_stage: str) -> int:
        """Add ``count`` verified citations to the progress, atomically.

        Fan-out children run in parallel on several workers, so this adds to the count rather
        than setting it; whichever chunk completes the count hands the progress to
        ``next_stage``.
        """
        done = F("progress_done") + count
        return self.update(
            progress_done=done,
            progress_step=Case(
                When(progress_total__lte=done, then=Value(next_stage)),
                default=F("progress_step"),
            ),
            updated_at=timezone.now(),
        )

    def soft_delete(self) -> int:
        """Soft-delete the jobs not deleted yet; return how many were."""
        return self.filter(deleted_at__isnull=True).update(deleted_at=timezone.now())


class AnalysisJob(models.Model):
    """One analysis attempt of an uploaded thesis; driven by one durable workflow instance."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="analysis_jobs"
    )
    filename = models.CharField(max_length=255)
    upload = models.BinaryField(help_text="The uploaded thesis, as sent.")
    library_filename = models.CharField(max_length=255, blank=True, default="")
    library = models.BinaryField(null=True, blank=True, help_text="Optional reference library.")
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=False
    )
    # NULL means "not extracted yet, or trimmed": distinct from an empty document.
    doc_html = models.TextField(null=True, blank=True)  # noqa: DJ001
    results = models.JSONField(null=True, blank=True, help_text="The report payload (verdicts).")
    run_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    workflow_id = models.UUIDField(null=True, blank=True, db_index=True)
    progress_step = models.CharField(max_length=32, blank=True, default="")
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # Set with error when the job fails; "" otherwise.
    failure_kind = models.CharField(
        max_length=16, choices=FailureKind.choices, blank=True, default=""
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set (in the same statement) when the run row first holds this job's content, or a newer
    # job's: the job is then no ghost. Keeps the backstop's index down to the ghosts alone.
    run_saved_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = AnalysisJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="job_status_valid"
            ),
            models.CheckConstraint(
                condition=~Q(status__in=TERMINAL_STATUSES) | Q(finished_at__isnull=False),
                name="job_terminal_has_finished_at",
            ),
        ]
        indexes = [
            # The run backstop (jobs.runs.backstop, AnalysisJob.objects.ghosts(grace)):
            #   SELECT ... FROM jobs_analysisjob WHERE status IN ('complete','failed')
            #     AND deleted_at IS NULL AND run_saved_at IS NULL AND doc_html IS NOT NULL
            #     AND updated_at <= now() - grace ORDER BY updated_at LIMIT batch
            #     FOR UPDATE OF jobs_analysisjob SKIP LOCKED
            # Only ghosts are in it, so it stays tiny however large the table grows.
            models.Index(
                fields=["updated_at"],
                name="job_ghost_idx",
                condition=Q(
                    status__in=TERMINAL_STATUSES,
                    deleted_at__isnull=True,
                    run_saved_at__isnull=True,
                    doc_html__isnull=False,
                ),
            ),
            # The trim (jobs.sweeper): terminal jobs whose run row exists and still hold
            # doc_html, finished before now() - ttl.
            models.Index(
                fields=["finished_at"],
                name="job_trim_idx",
                condition=Q(doc_html__isnull=False, run_saved_at__isnull=False),
            ),
            # The admin's in-flight panel and the dashboard's hourly charts: jobs finished
            # within a window (finished_at >= now() - window).
            models.Index(fields=["finished_at"], name="job_finished_idx"),
            # The in-flight panel's queued/running part.
            models.Index(
                fields=["created_at"],
                name="job_active_idx",
                condition=Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]),
            ),
            # A user's job list: WHERE owner_id = ? ORDER BY created_at DESC.
            models.Index(fields=["owner", "-created_at"], name="job_owner_idx"),
            # The admin's search by file name (jobs.admin_tools.OwnerSearchMixin):
            #   WHERE UPPER(filename::text) LIKE UPPER('%term%') OR owner_id IN (...)
            # A trigram index serves a substring match; with job_owner_idx the OR is a BitmapOr.
            GinIndex(OpClass(Upper("filename"), name="gin_trgm_ops"), name="job_filename_trgm_idx"),
            # The admin's "failed reason" filter (jobs.admin_tools.FailedReasonFilter):
            #   SELECT split_part(error, ':', 1), count(*) FROM jobs_analysisjob
            #     WHERE status = 'failed' AND finished_at >= now() - 7 days GROUP BY 1
            # and the bounded count of the failed change list; only failed jobs are in it.
            models.Index(
                fields=["finished_at"],
                name="job_failed_idx",
                condition=Q(status=JobStatus.FAILED),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.filename} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    # --- state changes ---

    def mark_stage(self, stage: str, **fields) -> None:
        """The job is running, now at ``stage``; ``fields`` (model fields) are saved with it."""
        self.status = JobStatus.RUNNING
        self.progress_step = stage
        for name, value in fields.items():
            setattr(self, name, value)
        self.save(update_fields=["status", "progress_step", "updated_at", *fields])

    def complete(self, report: dict, citations: int) -> None:
        """The analysis is done: ``report`` is its result, ``citations`` were verified."""
        self.status = JobStatus.COMPLETE
        self.results = report
        self.error = ""
        self.failure_kind = ""
        self.progress_step = JobStatus.COMPLETE
        self.progress_done = self.progress_total = citations
        self.finished_at = timezone.now()
        self.save(
            update_fields=[
                "status",
                "results",
                "error",
                "failure_kind",
                "progress_step",
                "progress_done",
                "progress_total",
                "finished_at",
                "updated_at",
            ]
        )

    def fail(self, message: str, kind: FailureKind) -> bool:
        """Fail the job with ``message`` (what the user reads); False if it had already ended.

        A compare-and-set: of two callers failing the same job (a worker's permanent error and
        an operator's cancel), only the first changes it.
        """
        now = timezone.now()
        changed = (
            type(self)
            .objects.filter(pk=self.pk)
            .exclude(status__in=TERMINAL_STATUSES)
            .update(
                status=JobStatus.FAILED,
                error=message,
                failure_kind=kind,
                finished_at=now,
                updated_at=now,
            )
        )
        if changed != 1:
            return False
        self.status, self.error, self.failure_kind = JobStatus.FAILED, message, kind
        self.finished_at = self.updated_at = now
        return True

    def soft_delete(self) -> bool:
        """Hide the job from its owner and from the backstop; False if it already was."""
        return type(self).objects.filter(pk=self.pk).soft_delete() == 1

    def new_attempt(self) -> AnalysisJob:
        """A new queued job of the same run, from the same upload (a re-analysis).

        When it finishes, its content replaces the run's: a newer job wins, whoever saves it.
        """
        source = (
            type(self)
            .objects.only("owner", "filename", "upload", "library", "library_filename", "run_id")
            .get(pk=self.pk)
        )
        return type(self).objects.create(
            owner_id=source.owner_id,
            filename=source.filename,
            upload=source.upload,
            library=source.library,
            library_filename=source.library_filename,
            run_id=source.run_id,
            status=JobStatus.QUEUED,
            progress_step=JobStatus.QUEUED,
        )

    def first_step_running(self) -> bool:
        """Whether the workflow's first task is running while the row still says queued.

        A step's writes show only when it commits, so while the first one (extract) runs the
        job row still says queued; the engine knows better, for the price of one lookup.
        """
        if self.workflow_id is None:
            return False
        return Step.objects.of_instance(self.workflow_id).running_tasks().exists()

    def failing_step(self) -> dict | None:
        """The workflow step this job failed at, from the engine's step table; None if none.

        ``{"label", "kind", "attempts", "max_attempts", "error", "finished_at"}``: the leaf
        step that failed (the composite steps around it fail with it and say less). The job's
        own ``progress_step`` cannot tell: a step's writes roll back when it fails, so a job
        that failed in ``extract`` still says "queued". Two small queries (the steps of one
        instance on durable_step_key, the instance's graph by primary key).
        """
        if self.workflow_id is None:
            return None
        step = (
            Step.objects.of_instance(self.workflow_id)
            .filter(status=StepStatus.FAILED)
            .exclude(kind__in=composite_kinds())
            .only("node_id", "kind", "attempts", "max_attempts", "error", "finished_at")
            .order_by("-finished_at", "-id")
            .first()
        )
        if step is None:
            return None
        graph = Instance.objects.filter(pk=self.workflow_id).values_list("graph", flat=True).first()
        node = next((n for n in iter_spec(graph or {}) if n.get("id") == step.node_id), None)
        return {
            "label": node_label(node) if node else step.kind,
            "kind": step.kind,
            "attempts": step.attempts,
            "max_attempts": step.max_attempts,
            "error": step.error,
            "finished_at": step.finished_at,
        }


class AnalysisRunQuerySet(models.QuerySet):
    def owned_by(self, user) -> AnalysisRunQuerySet:
        return self.filter(owner=user)

    def unjudged(self) -> AnalysisRunQuerySet:
        """Runs whose current job has not been judged: the judge backstop's selection."""
        return self.filter(Q(judged_job__isnull=True) | ~Q(judged_job=models.F("job")))


class AnalysisRun(models.Model):
    """The report a user reads. Written only by ``jobs.runs.writer.save_run``."""

    id = models.UUIDField(primary_key=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="analysis_runs"
    )
    job = models.ForeignKey(
        AnalysisJob,
        on_delete=models.RESTRICT,
        related_name="+",
        help_text="The job whose content this row holds.",
    )
    document = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=JobStatus.choices)
    doc_html = models.TextField(blank=True, default="")
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    # NULL is meaningful: a legacy row from before saved_by existed (counts as client).
    saved_by = models.CharField(  # noqa: DJ001
        max_length=8,
        choices=SavedBy.choices,
        null=True,
        blank=True,
        help_text="Who saved this row; NULL for legacy rows, which count as client.",
    )
    saved_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    judged_job = models.ForeignKey(
        AnalysisJob,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The job whose content the judge assessed.",
    )
    judgment = models.JSONField(null=True, blank=True)
    judged_at = models.DateTimeField(null=True, blank=True)

    objects = AnalysisRunQuerySet.as_manager()

    class Meta:
        ordering = ["-saved_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(saved_by__isnull=True) | Q(saved_by__in=SavedBy.values),
                name="run_saved_by_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=TERMINAL_STATUSES), name="run_status_terminal"
            ),
        ]
        indexes = [
            # A user's runs list: WHERE owner_id = ? ORDER BY saved_at DESC.
            models.Index(fields=["owner", "-saved_at"], name="run_owner_idx"),
            # The admin's search by document name (as job_filename_trgm_idx).
            GinIndex(OpClass(Upper("document"), name="gin_trgm_ops"), name="run_document_trgm_idx"),
            # The judge backstop: WHERE judged_job_id IS DISTINCT FROM job_id.
            models.Index(
                fields=["saved_at"],
                name="run_unjudged_idx",
                condition=Q(judged_job__isnull=True) | ~Q(judged_job=models.F("job")),
            ),
            # The admin's writers panel: runs per saved_by per day.
            models.Index(fields=["saved_at", "saved_by"], name="run_writer_idx"),
            # The writers panel's non-client part (jobs.dashboard.writers_per_day):
            #   SELECT saved_at::date, saved_by, count(*) FROM jobs_analysisrun
            #     WHERE saved_at >= ? AND (saved_by IS NULL OR saved_by = 'worker') GROUP BY 1, 2
            # Clients write most runs; the client count is the day's total minus these.
            models.Index(
                fields=["saved_at", "saved_by"],
                name="run_nonclient_idx",
                condition=Q(saved_by__isnull=True) | Q(saved_by=SavedBy.WORKER),
            ),
            # The admin's jobs "saved by: legacy" filter (jobs.admin_tools.JobSavedByFilter):
            #   WHERE jobs_analysisjob.id IN (SELECT job_id FROM jobs_analysisrun
            #     WHERE saved_by IS NULL) ORDER BY id DESC LIMIT 50
            # Legacy rows are never written again, so this index only shrinks.
            models.Index(
                fields=["job"], name="run_legacy_job_idx", condition=Q(saved_by__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document} ({self.saved_by or 'legacy'})"

    @property
    def effective_saved_by(self) -> str:
        return self.saved_by or SavedBy.CLIENT


class JobCitation(models.Model):
    """One in-text citation of a job, with its verdict."""

    job = models.ForeignKey(AnalysisJob, on_delete=models.CASCADE, related_name="citations")
    index = models.PositiveIntegerField(help_text="Position in document order, from 0.")
    text = models.TextField()
    keys = models.JSONField(default=list)
    verdict = models.CharField(max_length=24, choices=Verdict.choices)
    reason = models.TextField(blank=True, default="")
    references = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="citation_job_index_unique"),
            models.CheckConstraint(
                condition=Q(verdict__in=Verdict.values), name="citation_verdict_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.text} → {self.verdict}"


class SweeperHeartbeatQuerySet(models.QuerySet):
    def silent_for(self, now: datetime, ticks: float) -> SweeperHeartbeatQuerySet:
        """Rows of processes that have not ticked for ``ticks`` of their own tick interval.

        A process that never ticked counts from its start. Stopped rows are included: a
        drained sweeper is silent too.
        """
        span = ExpressionWrapper(
            F("tick_seconds") * Value(timedelta(seconds=ticks)), output_field=DurationField()
        )
        return self.annotate(
            _silent_since=Coalesce("last_tick_at", "started_at"),
            _deadline=ExpressionWrapper(Value(now) - span, output_field=models.DateTimeField()),
        ).filter(_silent_since__lt=F("_deadline"))

    def expired(self, now: datetime) -> SweeperHeartbeatQuerySet:
        """Rows no operator needs any more: a process silent for ``EXPIRY_TICKS`` of its
        ticks (killed: nothing marked it stopped), or stopped more than ``STOPPED_KEPT`` ago.
        Every sweeper deletes them on its tick, so dead processes do not pile up."""
        model = self.model
        killed = self.filter(stopped_at__isnull=True).silent_for(now, model.EXPIRY_TICKS)
        return self.filter(
            Q(pk__in=killed.values("pk")) | Q(stopped_at__lt=now - model.STOPPED_KEPT)
        )

    def last_tick_at(self) -> datetime | None:
        """When any sweeper last ticked (None if none ever did): /healthz reports its age."""
        return (
            self.filter(last_tick_at__isnull=False)
            .order_by("-last_tick_at")
            .values_list("last_tick_at", flat=True)
            .first()
        )


class SweeperHeartbeat(models.Model):
    """One row per sweeper process, touched every tick, so operators see who is alive."""

    # A row silent this many of its ticks is deleted (the dashboard shows it "gone" before).
    EXPIRY_TICKS = 20
    # A drained (stopped) sweeper stays listed this long, so a deploy's exit is visible.
    STOPPED_KEPT = timedelta(days=1)

    name = models.CharField(max_length=200, unique=True, help_text="host:pid")
    started_at = models.DateTimeField(default=timezone.now)
    last_tick_at = models.DateTimeField(null=True, blank=True)
    last_backstop_at = models.DateTimeField(null=True, blank=True)
    backstop_in_flight = models.BooleanField(default=False)
    tick_seconds = models.FloatField(default=30)
    stopped_at = models.DateTimeField(null=True, blank=True)

    objects = SweeperHeartbeatQuerySet.as_manager()

    class Meta:
        ordering = ["-last_tick_at"]

    def __str__(self) -> str:
        return self.name


class RunEventKind(models.TextChoices):
    # Recorded by the sweeper's backstop, or by an operator's "record now" (``operator`` set).
    RECORDED = "recorded", "Recorded"
    JUDGED = "judged", "Judged"
    TRIMMED = "trimmed", "doc_html trimmed"


class RunEvent(models.Model):
    """An ops diagnostics event: a run was recorded (by the sweeper or an operator), a
    judgment stored, or job bodies trimmed."""

    Kind = RunEventKind

    kind = models.CharField(max_length=16, choices=RunEventKind.choices)
    job = models.ForeignKey(AnalysisJob, on_delete=models.SET_NULL, null=True, related_name="+")
    run_id = models.UUIDField(null=True, blank=True)
    writer = models.CharField(max_length=16, blank=True, default="")
    lag_seconds = models.FloatField(null=True, blank=True, help_text="Terminal → recorded.")
    sweeper = models.CharField(max_length=200, blank=True, default="")
    # The operator who asked for it (the admin's "record now"); empty for the sweeper's work.
    operator = models.CharField(max_length=150, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=RunEventKind.values), name="runevent_kind_valid"
            )
        ]
        indexes = [
            # The dashboard's counts and charts: WHERE kind = ? AND created_at >= now() - window.
            models.Index(fields=["kind", "created_at"], name="runevent_kind_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.run_id}"

    @staticmethod
    def manual() -> Q:
        """Events of an operator's "record now": ``operator`` set, or, in rows from before
        that field existed, a sweeper name of "admin:<operator>"."""
        return ~Q(operator="") | Q(sweeper__startswith="admin:")

    @property
    def by(self) -> str:
        """Who did it, as the admin says it: "manual: olga" or "sweeper host:pid"."""
        if self.operator:
            return f"manual: {self.operator}"
        if self.sweeper:
            return f"sweeper {self.sweeper}"
        return ""
