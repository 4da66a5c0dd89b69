"""The operator's admin: the dashboard page, the change lists, and the actions.

The dashboard's numbers come from ``jobs.dashboard`` (plain functions); this module only wires
them into the admin (``get_urls`` + ``admin_view`` + ``each_context``, as Django's own
``UserAdmin`` does for its password page). The tables grow to millions of rows, so every change
list uses ``CheapPaginator`` and ``show_full_result_count = False``, defers the wide columns,
and orders by an indexed column.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import connections, transaction
from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from . import dashboard, pipeline
from .backstop import record_jobs
from .models import (
    AnalysisJob,
    AnalysisRun,
    JobCitation,
    JobStatus,
    RunEvent,
    SavedBy,
    SweeperHeartbeat,
)

# --- Pagination without COUNT(*) -----------------------------------------------------------


class CheapPaginator(Paginator):
    """A paginator that never counts a big table.

    It counts at most ``EXACT_LIMIT + 1`` rows (``SELECT count(*) FROM (... LIMIT n)``), which is
    exact and cheap for small filtered lists; beyond that it takes the planner's row estimate
    (``EXPLAIN``, no scan), which is what the page links need. Both run over the primary keys
    alone, so the change list's per-row annotations are not evaluated for counting.
    """

    EXACT_LIMIT = 1_000

    @cached_property
    def count(self) -> int:
        qs = self.object_list
        if not isinstance(qs, QuerySet):
            return len(qs)
        bounded = qs.order_by().values("pk")[: self.EXACT_LIMIT + 1].count()
        if bounded <= self.EXACT_LIMIT:
            return bounded
        return max(self._estimate(qs), bounded)

    @staticmethod
    def _estimate(qs: QuerySet) -> int:
        sql, params = qs.order_by().values("pk").query.sql_with_params()
        with connections[qs.db].cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
        if isinstance(plan, str):  # psycopg parses json itself; a str means another adapter
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"])


class BigTableAdmin(admin.ModelAdmin):
    """Change-list settings shared by the large tables."""

    paginator = CheapPaginator
    show_full_result_count = False
    list_per_page = 50


class OwnerSearchMixin:
    """The change-list search over a name column and the owner's username, without a join.

    Django's admin ORs ``name ILIKE`` with ``owner.username ILIKE`` across a JOIN, which no
    index can serve: a sequential scan of the big table per search. Here the matching owners
    are looked up first (the users table is small) and each term becomes ``UPPER(name) LIKE …
    OR owner_id IN (<their ids>)``: a BitmapOr of the name's trigram index and the owner index.
    (An ``IN (subquery)`` arm would be a hashed subplan filter, and scan the table again.) A
    term matching more than ``OWNER_IDS_MAX`` users keeps the subquery. Terms are split as the
    admin splits them ("quoted phrases" stay whole); every term must match.
    """

    search_name_field = ""
    OWNER_IDS_MAX = 1000

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        from django.contrib.auth import get_user_model
        from django.utils.text import smart_split, unescape_string_literal

        users = get_user_model().objects
        for bit in smart_split(search_term):
            if bit.startswith(('"', "'")) and bit[0] == bit[-1]:
                bit = unescape_string_literal(bit)
            if not bit:
                continue
            owners = users.filter(username__icontains=bit).values("pk")
            ids = list(owners.values_list("pk", flat=True)[: self.OWNER_IDS_MAX + 1])
            match = Q(**{f"{self.search_name_field}__icontains": bit})
            if len(ids) > self.OWNER_IDS_MAX:
                match |= Q(owner__in=owners)
            elif ids:
                match |= Q(owner_id__in=ids)
            queryset = queryset.filter(match)
        return queryset, False


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
    message says how many were written, claimed or left as they were.
    """
    results = record_jobs(
        job_ids=list(job_ids),
        source="admin",
        sweeper_name=f"admin:{request.user.get_username()}",
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


# --- Change-list filters -----------------------------------------------------------------


class HasRunFilter(admin.SimpleListFilter):
    title = "run saved"
    parameter_name = "has_run"

    def lookups(self, request, model_admin):
        return [
            ("yes", "Saved (this job's or a newer job's run)"),
            ("no", "Not saved"),
            ("ghost", "Ghost: terminal with verdicts, no run"),
        ]

    def queryset(self, request, queryset):
        match self.value():
            case "yes":
                return queryset.filter(run_saved_at__isnull=False)
            case "no":
                return queryset.filter(run_saved_at__isnull=True)
            case "ghost":
                return queryset.ghosts()
        return queryset


class SavedByFilter(admin.SimpleListFilter):
    """Who saved the run row: client, worker, or a legacy row (saved_by NULL, counts as client)."""

    title = "saved by"
    parameter_name = "saved_by"
    # The run's column, as seen from the filtered model.
    run_field = "saved_by"

    def lookups(self, request, model_admin):
        return [
            (SavedBy.CLIENT, "Client"),
            (SavedBy.WORKER, "Worker"),
            ("legacy", "Legacy (NULL)"),
        ]

    def _condition(self) -> Q | None:
        match self.value():
            case SavedBy.CLIENT | SavedBy.WORKER as value:
                return Q(**{self.run_field: value})
            case "legacy":
                return Q(**{f"{self.run_field}__isnull": True})
        return None

    def queryset(self, request, queryset):
        cond = self._condition()
        return queryset if cond is None else queryset.filter(cond)


class JobSavedByFilter(SavedByFilter):
    """On jobs: jobs whose content a run row holds, by that run's writer.

    ``id IN (SELECT job_id FROM jobs_analysisrun WHERE <writer>)`` runs as a merge semi-join
    of two backward index scans (jobs' primary key; the runs' job index, or for the legacy
    writer its own partial index run_legacy_job_idx). The planner assumes matches are spread
    evenly; legacy rows are all old, so the jobs side would walk most of the table before the
    first match. Starting it at the newest matching job id (one index probe) avoids that.
    """

    def queryset(self, request, queryset):
        cond = self._condition()
        if cond is None:
            return queryset
        runs = AnalysisRun.objects.filter(cond)
        newest = runs.aggregate(newest=Max("job_id"))["newest"]
        if newest is None:
            return queryset.none()
        return queryset.filter(pk__lte=newest, pk__in=runs.values("job_id"))


class FailedReasonFilter(admin.SimpleListFilter):
    """Failed jobs by reason: the error text up to its first colon ("Could not read the file")."""

    title = "failed reason"
    parameter_name = "reason"
    # Reasons are listed from the failed jobs of this recent period (a job_failed_idx range),
    # so the filter's own lookup reads a week's failures, never the whole table.
    LOOKBACK_DAYS = 7
    MAX_REASONS = 12

    def lookups(self, request, model_admin):
        since = timezone.now() - timedelta(days=self.LOOKBACK_DAYS)
        with connections[AnalysisJob.objects.db].cursor() as cursor:
            cursor.execute(
                """
                SELECT left(split_part(error, ':', 1), 80) AS reason, count(*) AS n
                FROM jobs_analysisjob
                WHERE finished_at >= %s AND status = %s AND error <> ''
                GROUP BY 1 ORDER BY n DESC, reason LIMIT %s
                """,
                [since, JobStatus.FAILED, self.MAX_REASONS],
            )
            return [(reason, f"{reason} ({n})") for reason, n in cursor.fetchall()]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(status=JobStatus.FAILED, error__startswith=self.value())
        return queryset


class EventWriterFilter(SavedByFilter):
    """Diagnostics events by the writer they report (worker, client, or none)."""

    title = "writer"
    parameter_name = "writer"

    def lookups(self, request, model_admin):
        return [(SavedBy.WORKER, "Worker"), (SavedBy.CLIENT, "Client"), ("none", "None")]

    def queryset(self, request, queryset):
        match self.value():
            case SavedBy.CLIENT | SavedBy.WORKER as value:
                return queryset.filter(writer=value)
            case "none":
                return queryset.filter(writer="")
        return queryset


class DeletedFilter(admin.SimpleListFilter):
    title = "deleted"
    parameter_name = "deleted"

    def lookups(self, request, model_admin):
        return [("no", "Not deleted"), ("yes", "Soft-deleted")]

    def queryset(self, request, queryset):
        match self.value():
            case "no":
                return queryset.filter(deleted_at__isnull=True)
            case "yes":
                return queryset.filter(deleted_at__isnull=False)
        return queryset


class JudgedFilter(admin.SimpleListFilter):
    title = "judged"
    parameter_name = "judged"

    def lookups(self, request, model_admin):
        return [("yes", "Judged (current job)"), ("no", "Not judged for its current job")]

    def queryset(self, request, queryset):
        match self.value():
            case "yes":
                return queryset.filter(judged_job=F("job"))
            case "no":
                return queryset.unjudged()
        return queryset


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
        FailedReasonFilter,
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
        "current_step",
        "error",
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
        ("State", {"fields": ["status", "current_step", "error"]}),
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
        if not obj.progress_step:
            return "—"
        if obj.progress_total:
            return f"{obj.progress_step} {obj.progress_done}/{obj.progress_total}"
        return obj.progress_step

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
        failed = list(queryset.filter(status=JobStatus.FAILED, deleted_at__isnull=True))
        skipped = queryset.count() - len(failed)
        new_ids, errors = [], []
        for job in failed:
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
        done = queryset.filter(deleted_at__isnull=True).update(deleted_at=timezone.now())
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
                "dashboard/record/",
                self.admin_site.admin_view(self.dashboard_record_view),
                name=f"{app}_{model}_dashboard_record",
            ),
            *super().get_urls(),
        ]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
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
        return TemplateResponse(request, "admin/jobs/dashboard.html", context)

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
    list_display = [
        "id",
        "document",
        "owner",
        "status",
        "saved_by_column",
        "job_link",
        "judged_column",
        "saved_at",
    ]
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
        return False  # runs are written by jobs.persistence.save_run only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the single writer owns this table; the admin only reads

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
        "started_at",
        "last_tick_at",
        "last_backstop_at",
        "backstop_in_flight",
        "tick_seconds",
        "stopped_at",
    ]


@admin.register(RunEvent)
class RunEventAdmin(BigTableAdmin):
    list_display = [
        "created_at",
        "kind",
        "job_link",
        "run_link",
        "writer",
        "lag",
        "sweeper",
    ]
    # Both filters list fixed choices: a "writer" field filter would run SELECT DISTINCT
    # writer over every event to build its options.
    list_filter = ["kind", EventWriterFilter]
    search_fields = ["sweeper"]
    # Ids follow creation; "-created_at" alone has no index (kind leads runevent_kind_time_idx).
    ordering = ["-id"]
    readonly_fields = [
        "kind",
        "job",
        "run_id",
        "writer",
        "lag_seconds",
        "sweeper",
        "details",
        "created_at",
    ]
    raw_id_fields = ["job"]

    def has_add_permission(self, request) -> bool:
        return False

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
