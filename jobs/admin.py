"""The operator's admin: the dashboard page, the change lists, and the actions.

The dashboard's numbers come from ``jobs.dashboard`` (plain functions); this module only wires
them into the admin (``get_urls`` + ``admin_view`` + ``each_context``, as Django's own
``UserAdmin`` does for its password page). The tables grow to millions of rows, so every change
list uses ``CheapPaginator`` and ``show_full_result_count = False`` (``jobs.admin_tools``, with
the search and the filters), defers the wide columns, and orders by an indexed column. Actions
call the models' state changes and ``jobs.runs``; they only report what happened.
"""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from jobs import dashboard, pipeline
from jobs.admin_tools import (
    BigTableAdmin,
    DeletedFilter,
    EventByFilter,
    EventSinceFilter,
    EventWriterFilter,
    FailedReasonFilter,
    FinishedWithinFilter,
    HasRunFilter,
    JobSavedByFilter,
    JudgedFilter,
    OwnerSearchMixin,
    SavedByFilter,
)
from jobs.models import (
    AnalysisJob,
    AnalysisRun,
    FailureKind,
    JobCitation,
    JobStatus,
    RunEvent,
    SweeperHeartbeat,
)
from jobs.runs import record_jobs

# --- Links --------------------------------------------------------------------------------


def workflow_url(workflow_id) -> str | None:
    """The engine admin's page of a workflow instance (its graph), or None without one."""
    if workflow_id is None:
        return None
    return reverse("admin:durable_instance_change", args=[workflow_id])


def _run_url(run_id) -> str:
    return reverse("admin:jobs_analysisrun_change", args=[run_id])


def _job_url(job_id) -> str:
    return reverse("admin:jobs_analysisjob_change", args=[job_id])


# --- Actions shared by the change list and the dashboard ------------------------------------


def record_now(request: HttpRequest, job_ids: list[int]) -> str:
    """Record the runs of ``job_ids`` through the backstop (single writer, saved_by='worker').

    Jobs that stopped being ghosts meanwhile are left alone by the backstop; the returned
    message says how many were written, claimed or left as they were. The events say it was
    manual and name the operator.
    """
    results = record_jobs(
        job_ids=list(job_ids), source="manual", operator=request.user.get_username()
    )
    by_action = Counter(r.action for r in results)
    skipped = len(set(job_ids)) - len(results)
    parts = []
    if by_action["write"]:
        parts.append(f"{by_action['write']} written")
    if by_action["claim"]:
        parts.append(f"{by_action['claim']} claimed")
    if by_action["noop"]:
        parts.append(f"{by_action['noop']} already saved (client or newer job), not rewritten")
    if skipped:
        parts.append(f"{skipped} no longer ghosts, left alone")
    return "Record now: " + ("; ".join(parts) or "nothing to record") + "."


# --- AnalysisJob ------------------------------------------------------------------------


@admin.register(AnalysisJob)
class AnalysisJobAdmin(OwnerSearchMixin, BigTableAdmin):
    list_display = [
        "id",
        "filename",
        "owner",
        "status_badge",
        "current_step",
        "run_column",
        "age",
        "created_at",
    ]
    list_display_links = ["id", "filename"]
    list_filter = [
        "status",
        HasRunFilter,
        JobSavedByFilter,
        "failure_kind",
        FailedReasonFilter,
        FinishedWithinFilter,
        DeletedFilter,
    ]
    search_fields = ["filename", "owner__username"]  # what the box searches (OwnerSearchMixin)
    search_name_field = "filename"
    # The primary key follows creation order and its index serves the page; "-created_at" has
    # no index of its own and would sort the whole table.
    ordering = ["-id"]
    list_select_related = ["owner"]
    actions = ["record_run_now", "requeue_failed", "soft_delete"]
    RECORD_ALL_LIMIT = 500
    readonly_fields = [
        "links",
        "owner",
        "filename",
        "library_filename",
        "status",
        "step_detail",
        "error",
        "failure_kind",
        "run_id",
        "workflow_id",
        "created_at",
        "updated_at",
        "finished_at",
        "run_saved_at",
        "deleted_at",
        "results",
    ]
    fieldsets = [
        (None, {"fields": ["links", "owner", "filename", "library_filename"]}),
        ("State", {"fields": ["status", "step_detail", "error", "failure_kind"]}),
        ("Identity", {"fields": ["run_id", "workflow_id"]}),
        (
            "Times",
            {"fields": ["created_at", "updated_at", "finished_at", "run_saved_at", "deleted_at"]},
        ),
        ("Verdicts", {"fields": ["results"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            # The upload and doc_html are megabytes each (TOAST): never fetched for a list.
            .defer("upload", "library", "doc_html")
            .annotate(
                # Cost: one primary-key probe into jobs_analysisrun per listed row (50 a page).
                run_saved_by=Subquery(
                    AnalysisRun.objects.filter(pk=OuterRef("run_id")).values("saved_by")[:1]
                ),
                # Cost: the same probe again (PostgreSQL caches the page): which job the run
                # holds, to tell "this job's run" from "a newer job's run".
                run_job_id=Subquery(
                    AnalysisRun.objects.filter(pk=OuterRef("run_id")).values("job_id")[:1]
                ),
            )
        )

    def has_add_permission(self, request) -> bool:
        return False  # jobs come from uploads, never from the admin

    def has_delete_permission(self, request, obj=None) -> bool:
        # Runs reference jobs (RESTRICT) and the design deletes softly: see the soft_delete action.
        return False

    # --- columns ---

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: AnalysisJob) -> str:
        label = obj.get_status_display()
        if obj.deleted_at:
            label += " (deleted)"
        return format_html('<span class="acurio-status acurio-{}">{}</span>', obj.status, label)

    @admin.display(description="current step")
    def current_step(self, obj: AnalysisJob) -> str:
        # A terminal job has no current step; its progress_step is the last stage that
        # committed (a job that failed in extract still says "queued").
        if obj.status == JobStatus.FAILED:
            return f"failed ({obj.get_failure_kind_display() or 'unknown'})"
        if obj.status == JobStatus.COMPLETE:
            return "complete"
        if not obj.progress_step:
            return "—"
        if obj.progress_total:
            return f"{obj.progress_step} {obj.progress_done}/{obj.progress_total}"
        return obj.progress_step

    @admin.display(description="step")
    def step_detail(self, obj: AnalysisJob) -> str:
        """The change page's step: where a failed job failed (the engine's step table), or
        where a live job is."""
        if obj.status != JobStatus.FAILED:
            if obj.status == JobStatus.QUEUED and obj.first_step_running():
                return "extract (running; the job row says queued until it commits)"
            return self.current_step(obj)
        step = obj.failing_step()
        if step is None:
            return format_html(
                '<span class="acurio-failed-step">failed, at no step of its workflow</span> ({})',
                obj.get_failure_kind_display() or "unknown",
            )
        return format_html(
            '<span class="acurio-failed-step">failed at <strong>{}</strong></span>'
            " after {} of {} attempt(s) ({})"
            '<div class="acurio-step-error">{}</div>',
            step["label"],
            step["attempts"],
            step["max_attempts"],
            obj.get_failure_kind_display() or "unknown",
            step["error"] or "(the step left no error text)",
        )

    @admin.display(description="run")
    def run_column(self, obj: AnalysisJob) -> str:
        saved_by = getattr(obj, "run_saved_by", None)
        run_job = getattr(obj, "run_job_id", None)
        if run_job is None:
            if obj.is_terminal and obj.run_saved_at is None and obj.deleted_at is None:
                return format_html('<span class="{}">ghost</span>', "acurio-ghost")
            return "—"
        who = saved_by or "legacy"
        if run_job == obj.pk:
            return format_html('<a href="{}">{}</a>', _run_url(obj.run_id), who)
        return format_html('<a href="{}">{} (job #{})</a>', _run_url(obj.run_id), who, run_job)

    @admin.display(description="age")
    def age(self, obj: AnalysisJob) -> str:
        start = obj.finished_at if obj.is_terminal else obj.created_at
        return dashboard.format_age((timezone.now() - start).total_seconds() if start else None)

    @admin.display(description="links")
    def links(self, obj: AnalysisJob) -> str:
        items: list[tuple[str, str]] = []
        url = workflow_url(obj.workflow_id)
        if url:
            items.append((url, "Workflow instance graph"))
        n = JobCitation.objects.filter(job=obj).count()
        items.append(
            (
                reverse("admin:jobs_jobcitation_changelist") + f"?job__id__exact={obj.pk}",
                f"Citations ({n})",
            )
        )
        run = AnalysisRun.objects.filter(pk=obj.run_id).only("saved_by", "job_id").first()
        if run is not None:
            holder = "this job" if run.job_id == obj.pk else f"job #{run.job_id}"
            items.append((_run_url(run.pk), f"Run ({run.saved_by or 'legacy'}, holds {holder})"))
        else:
            items.append(("", "No run row yet"))
        return format_html_join(
            " · ",
            "{}",
            (
                (format_html('<a href="{}">{}</a>', u, t) if u else format_html("{}", t),)
                for u, t in items
            ),
        )

    # --- actions ---

    @admin.action(description="Record run now (single writer, as worker)", permissions=["change"])
    def record_run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        self.message_user(request, record_now(request, ids), messages.SUCCESS)

    @admin.action(description="Re-queue failed jobs (new job, same run)", permissions=["change"])
    def requeue_failed(self, request: HttpRequest, queryset: QuerySet) -> None:
        """A new job of the same run for each failed job, except those that failed on the
        user's input: the same file would fail the same way at once, so they are refused,
        each with its reason (the student re-uploads a fixed file instead)."""
        failed = list(
            queryset.filter(status=JobStatus.FAILED, deleted_at__isnull=True).defer(
                "upload", "library", "doc_html", "results"
            )
        )
        skipped = queryset.count() - len(failed)
        refused = [job for job in failed if job.failure_kind == FailureKind.INPUT]
        new_ids, errors = [], []
        for job in failed:
            if job.failure_kind == FailureKind.INPUT:
                continue
            try:
                # One transaction per job: one bad job neither blocks nor undoes the others.
                with transaction.atomic():
                    new_ids.append(pipeline.requeue(job).pk)
            except Exception as exc:  # reported to the operator, the others proceed
                errors.append(f"#{job.pk}: {exc}")
        if new_ids:
            self.message_user(
                request,
                f"Re-queued {len(new_ids)} failed job(s) as new job(s) "
                + ", ".join(f"#{i}" for i in new_ids)
                + ".",
                messages.SUCCESS,
            )
        if refused:
            self.message_user(
                request,
                "Not re-queued: "
                + "; ".join(
                    f"#{job.pk} failed on the user's input ({job.error})" for job in refused
                )
                + ". The same file would fail the same way; the student must upload a new one.",
                messages.ERROR,
            )
        if skipped:
            self.message_user(
                request,
                f"{skipped} selected job(s) were not failed (or were deleted) and were skipped.",
                messages.WARNING,
            )
        if errors:
            self.message_user(request, "Could not re-queue " + "; ".join(errors), messages.ERROR)

    @admin.action(description="Soft-delete selected jobs", permissions=["change"])
    def soft_delete(self, request: HttpRequest, queryset: QuerySet) -> None:
        total = queryset.count()
        done = queryset.soft_delete()
        text = f"Soft-deleted {done} job(s)."
        if total - done:
            text += f" {total - done} were already deleted."
        self.message_user(request, text, messages.SUCCESS)

    # --- the dashboard ---

    def get_urls(self):
        app, model = self.opts.app_label, self.opts.model_name
        return [
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name=f"{app}_{model}_dashboard",
            ),
            path(
                "dashboard/panels/",
                self.admin_site.admin_view(self.dashboard_panels_view),
                name=f"{app}_{model}_dashboard_panels",
            ),
            path(
                "dashboard/record/",
                self.admin_site.admin_view(self.dashboard_record_view),
                name=f"{app}_{model}_dashboard_record",
            ),
            *super().get_urls(),
        ]

    def _dashboard_context(self, request: HttpRequest) -> dict:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Operations dashboard",
            "opts": self.opts,
            "can_record": self.has_change_permission(request),
            **dashboard.build_dashboard(),
        }
        for row in context["in_flight"]["rows"]:
            row["workflow_url"] = workflow_url(row["workflow_id"])
            row["job_url"] = _job_url(row["id"])
        for row in context["ghosts"]["rows"]:
            row["job_url"] = _job_url(row["id"])
        request.current_app = self.admin_site.name
        return context

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        return TemplateResponse(
            request, "admin/jobs/dashboard.html", self._dashboard_context(request)
        )

    def dashboard_panels_view(self, request: HttpRequest) -> HttpResponse:
        """The dashboard's panels alone (an HTML fragment): what its script swaps in every few
        seconds (``admin_view`` marks it never cached)."""
        return TemplateResponse(
            request, "admin/jobs/dashboard_panels.html", self._dashboard_context(request)
        )

    def dashboard_record_view(self, request: HttpRequest) -> HttpResponse:
        """The dashboard's "record now": the ghosts ticked, or every ghost past grace."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        back = reverse("admin:jobs_analysisjob_dashboard")
        if request.POST.get("all_past_grace"):
            # Bounded like a few backstop batches: an operator's click must stay a short request.
            ids = list(
                AnalysisJob.objects.ghosts(grace=settings.ACURIO_SWEEP_GRACE_SECONDS)
                .order_by("updated_at")
                .values_list("pk", flat=True)[: self.RECORD_ALL_LIMIT]
            )
        else:
            raw = request.POST.getlist("job_ids")
            try:
                ids = sorted({int(v) for v in raw})
            except ValueError:
                self.message_user(
                    request, f"Not a job id in {raw!r}: nothing was recorded.", messages.ERROR
                )
                return HttpResponseRedirect(back)
        if not ids:
            self.message_user(
                request, "No ghost was selected: nothing was recorded.", messages.WARNING
            )
            return HttpResponseRedirect(back)
        self.message_user(request, record_now(request, ids), messages.SUCCESS)
        return HttpResponseRedirect(back)


# --- AnalysisRun ------------------------------------------------------------------------


@admin.register(AnalysisRun)
class AnalysisRunAdmin(OwnerSearchMixin, BigTableAdmin):
    # Readable at 1366 px beside the filters: the id is cut to its first 8 characters (the
    # link leads to the whole row) and admin.css keeps each cell on one line.
    list_display = [
        "short_id",
        "document",
        "owner",
        "status",
        "saved_by_column",
        "job_link",
        "judged_column",
        "saved_at",
    ]
    list_display_links = ["short_id"]
    list_filter = [SavedByFilter, JudgedFilter, "status"]
    search_fields = ["document", "owner__username"]  # what the box searches (OwnerSearchMixin)
    search_name_field = "document"
    # run_writer_idx (saved_at, saved_by) hands rows over in saved_at order; PostgreSQL's
    # incremental sort adds the primary-key tie-break the change list appends.
    ordering = ["-saved_at"]
    list_select_related = ["owner"]
    exclude = ["doc_html"]
    readonly_fields = [
        "id",
        "owner",
        "job",
        "document",
        "status",
        "error",
        "saved_by",
        "saved_at",
        "created_at",
        "judged_job",
        "judged_at",
        "judgment",
        "report",
    ]

    def get_queryset(self, request):
        # No annotations: every column is on the row. The report body is deferred (TOAST).
        return super().get_queryset(request).defer("doc_html", "report")

    def has_add_permission(self, request) -> bool:
        return False  # runs are written by jobs.runs.writer.save_run only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the single writer owns this table; the admin only reads

    @admin.display(description="id", ordering="id")
    def short_id(self, obj: AnalysisRun) -> str:
        return format_html('<span title="{}">{}</span>', obj.pk, str(obj.pk)[:8])

    @admin.display(description="saved by", ordering="saved_by")
    def saved_by_column(self, obj: AnalysisRun) -> str:
        return obj.saved_by or "legacy (NULL)"

    @admin.display(description="job")
    def job_link(self, obj: AnalysisRun) -> str:
        return format_html('<a href="{}">#{}</a>', _job_url(obj.job_id), obj.job_id)

    @admin.display(description="judged", boolean=True)
    def judged_column(self, obj: AnalysisRun) -> bool:
        return obj.judged_job_id is not None and obj.judged_job_id == obj.job_id


# --- The rest -----------------------------------------------------------------------------


@admin.register(JobCitation)
class JobCitationAdmin(BigTableAdmin):
    list_display = ["job", "index", "text", "verdict", "reason"]
    list_filter = ["verdict"]
    # The citation_job_index_unique index serves both the job filter and this order.
    ordering = ["job", "index"]
    raw_id_fields = ["job"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(SweeperHeartbeat)
class SweeperHeartbeatAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "state",
        "started_at",
        "last_tick_at",
        "last_backstop_at",
        "backstop_in_flight",
        "tick_seconds",
        "stopped_at",
    ]

    @admin.display(description="state")
    def state(self, obj: SweeperHeartbeat) -> str:
        # As the dashboard says it; a gone row is deleted by the sweepers after
        # SweeperHeartbeat.EXPIRY_TICKS of its ticks of silence.
        return dashboard.sweeper_state(obj, timezone.now())


@admin.register(RunEvent)
class RunEventAdmin(BigTableAdmin):
    list_display = [
        "created_at",
        "kind",
        "by_column",
        "job_link",
        "run_link",
        "writer",
        "lag",
    ]
    # Every filter lists fixed choices: a "writer" field filter would run SELECT DISTINCT
    # writer over every event to build its options. "when" gives the dashboard's periods.
    list_filter = ["kind", EventSinceFilter, EventByFilter, EventWriterFilter]
    search_fields = ["sweeper", "operator"]
    # Ids follow creation; "-created_at" alone has no index (kind leads runevent_kind_time_idx).
    ordering = ["-id"]
    readonly_fields = [
        "kind",
        "job",
        "run_id",
        "writer",
        "lag_seconds",
        "sweeper",
        "operator",
        "details",
        "created_at",
    ]
    raw_id_fields = ["job"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="by")
    def by_column(self, obj: RunEvent) -> str:
        # Events from before RunEvent.operator named the operator as sweeper "admin:<name>".
        if not obj.operator and obj.sweeper.startswith("admin:"):
            return f"manual: {obj.sweeper.removeprefix('admin:')}"
        return obj.by or "—"

    @admin.display(description="job")
    def job_link(self, obj: RunEvent) -> str:
        if obj.job_id is None:
            return "—"
        return format_html('<a href="{}">#{}</a>', _job_url(obj.job_id), obj.job_id)

    @admin.display(description="run")
    def run_link(self, obj: RunEvent) -> str:
        if obj.run_id is None:
            return "—"
        return format_html('<a href="{}">{}</a>', _run_url(obj.run_id), str(obj.run_id)[:8])

    @admin.display(description="lag", ordering="lag_seconds")
    def lag(self, obj: RunEvent) -> str:
        return dashboard.format_age(obj.lag_seconds)
