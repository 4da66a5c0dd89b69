"""The admin's building blocks for tables of millions of rows: pagination, search, filters.

``jobs.admin`` registers the models and wires these in. Every piece here is written to be
served by an index (the comment of each says which) and never to count or scan a whole table.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import F, Max, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.text import smart_split, unescape_string_literal

from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent, SavedBy
from jobs.sql import FAILED_REASONS, explain_json

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
            cursor.execute(explain_json(sql), params)
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
                FAILED_REASONS,
                {"since": since, "failed": JobStatus.FAILED, "limit": self.MAX_REASONS},
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


class EventSinceFilter(admin.SimpleListFilter):
    """Events of the last hour, day or week: the periods the dashboard's counters count, so a
    counter and the list it links to show the same number. With a kind, served by
    runevent_kind_time_idx (kind, created_at)."""

    title = "when"
    parameter_name = "since"
    PERIODS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days")]

    def queryset(self, request, queryset):
        period = self.PERIODS.get(self.value() or "")
        if period is None:
            return queryset
        return queryset.filter(created_at__gte=timezone.now() - period)


class EventByFilter(admin.SimpleListFilter):
    """Who did it: a sweeper on its own, or an operator (a manual "record now")."""

    title = "by"
    parameter_name = "by"

    def lookups(self, request, model_admin):
        return [("sweeper", "The sweeper"), ("manual", "An operator (manual)")]

    def queryset(self, request, queryset):
        match self.value():
            case "manual":
                return queryset.filter(RunEvent.manual())
            case "sweeper":
                return queryset.exclude(RunEvent.manual())
        return queryset


class FinishedWithinFilter(admin.SimpleListFilter):
    """Jobs finished within the last N minutes (``?finished_within=N``): the dashboard's
    window, so its failed card links to the very jobs it counts. Served by job_finished_idx
    (or job_failed_idx with the failed status)."""

    title = "finished within"
    parameter_name = "finished_within"

    def lookups(self, request, model_admin):
        window = int(settings.ACURIO_INFLIGHT_WINDOW_MINUTES)
        choices = {window: f"The dashboard's window ({window} min)", 60: "Last hour"}
        choices.setdefault(1440, "Last 24 hours")
        choices.setdefault(10080, "Last 7 days")
        return [(str(minutes), label) for minutes, label in choices.items()]

    def queryset(self, request, queryset):
        try:
            minutes = int(self.value() or "")
        except ValueError:
            return queryset
        if minutes <= 0:
            return queryset
        return queryset.filter(finished_at__gte=timezone.now() - timedelta(minutes=minutes))
