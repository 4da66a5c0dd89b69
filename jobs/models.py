"""Models of the jobs app: the work queue, the user-facing report rows, their citations.

``AnalysisJob`` is one analysis attempt of an uploaded thesis; ``AnalysisRun`` is the report a
user reads (one per run id, written by exactly one function: ``jobs.persistence``);
``JobCitation`` holds one row per in-text citation with its verdict. ``SweeperHeartbeat`` and
``RunEvent`` let operators see the sweeper working.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import Q
from django.db.models.functions import Upper
from django.utils import timezone


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETE = "complete", "Complete"
    FAILED = "failed", "Failed"


TERMINAL_STATUSES = (JobStatus.COMPLETE, JobStatus.FAILED)


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
            # The run backstop (jobs.sweeper, AnalysisJob.objects.ghosts(grace)):
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
            # The admin's search by file name (jobs.admin.OwnerSearchMixin):
            #   WHERE UPPER(filename::text) LIKE UPPER('%term%') OR owner_id IN (...)
            # A trigram index serves a substring match; with job_owner_idx the OR is a BitmapOr.
            GinIndex(OpClass(Upper("filename"), name="gin_trgm_ops"), name="job_filename_trgm_idx"),
            # The admin's "failed reason" filter (jobs.admin.FailedReasonFilter):
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


class AnalysisRunQuerySet(models.QuerySet):
    def owned_by(self, user) -> AnalysisRunQuerySet:
        return self.filter(owner=user)

    def unjudged(self) -> AnalysisRunQuerySet:
        """Runs whose current job has not been judged: the judge backstop's selection."""
        return self.filter(Q(judged_job__isnull=True) | ~Q(judged_job=models.F("job")))


class AnalysisRun(models.Model):
    """The report a user reads. Written only by ``jobs.persistence.save_run``."""

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
            # The admin's jobs "saved by: legacy" filter (jobs.admin.JobSavedByFilter):
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


class SweeperHeartbeat(models.Model):
    """One row per sweeper process, touched every tick, so operators see who is alive."""

    name = models.CharField(max_length=200, unique=True, help_text="host:pid")
    started_at = models.DateTimeField(default=timezone.now)
    last_tick_at = models.DateTimeField(null=True, blank=True)
    last_backstop_at = models.DateTimeField(null=True, blank=True)
    backstop_in_flight = models.BooleanField(default=False)
    tick_seconds = models.FloatField(default=30)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_tick_at"]

    def __str__(self) -> str:
        return self.name


class RunEventKind(models.TextChoices):
    RECORDED = "recorded", "Recorded by sweeper"
    JUDGED = "judged", "Judged"
    TRIMMED = "trimmed", "doc_html trimmed"


class RunEvent(models.Model):
    """An ops diagnostics event: the sweeper recorded, judged or trimmed something."""

    Kind = RunEventKind

    kind = models.CharField(max_length=16, choices=RunEventKind.choices)
    job = models.ForeignKey(AnalysisJob, on_delete=models.SET_NULL, null=True, related_name="+")
    run_id = models.UUIDField(null=True, blank=True)
    writer = models.CharField(max_length=16, blank=True, default="")
    lag_seconds = models.FloatField(null=True, blank=True, help_text="Terminal → recorded.")
    sweeper = models.CharField(max_length=200, blank=True, default="")
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
