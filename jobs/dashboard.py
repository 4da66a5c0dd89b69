"""The operator dashboard's queries: plain functions that return plain data.

The admin view (``jobs.admin``) only renders what ``build_dashboard()`` returns, so every
number on the page can be tested here without a request. Each query is written to be served
by an index on a large table (the comment above each names it); ``bench/dashboard_bench.py``
checks the whole page against 1,000,000 jobs.

Ages are measured from ``finished_at`` (time since the job turned terminal) for terminal jobs
and from ``created_at`` for jobs still queued or running. The ghost split "within / past
grace" follows the backstop's own rule: ``updated_at`` against ``ACURIO_SWEEP_GRACE_SECONDS``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Aggregate, Count, F, FloatField, Func, Max, Min, Q, TextField, Value
from django.db.models.functions import Left, TruncDate, TruncHour
from django.utils import timezone

from jobs.charts import bar_chart
from jobs.models import (
    AnalysisJob,
    AnalysisRun,
    FailureKind,
    JobStatus,
    RunEvent,
    RunEventKind,
    SavedBy,
    SweeperHeartbeat,
)
from jobs.sql import range_counts

# How many rows the dashboard lists in its tables (the change lists show the rest).
LIST_LIMIT = 25
# A sweeper is gone when it has missed this many ticks: the red banner ("no sweeper ticked
# for 3 of its ticks"). Its row stays, shown as gone, until the sweepers delete it after
# SweeperHeartbeat.EXPIRY_TICKS of silence.
MISSED_TICKS = 3
# Stopped sweepers stay on the page this long (then the sweepers delete their rows).
STOPPED_VISIBLE = SweeperHeartbeat.STOPPED_KEPT
WRITER_DAYS = 7
CHART_HOURS = 48


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(f) WITHIN GROUP (ORDER BY expr)``: an exact median in SQL."""

    function = "percentile_cont"
    name = "PercentileCont"
    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)%(filter)s"

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be within [0, 1], not {fraction!r}")
        super().__init__(expression, fraction=float(fraction), **extra)


def format_age(seconds: float | None) -> str:
    """A compact age for tables: "42 s", "7 min", "3 h 05 min", "2 d 4 h"."""
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else (now - then).total_seconds()


def _with_usernames(rows: list[dict]) -> list[dict]:
    """Add ``owner__username`` to listed rows with one primary-key lookup for their owners.

    A join in the list query itself lets the planner hash the whole user table before the
    LIMIT; this reads only the owners of the rows shown.
    """
    User = get_user_model()
    ids = {r["owner_id"] for r in rows}
    names = dict(User.objects.filter(pk__in=ids).values_list("pk", User.USERNAME_FIELD))
    for r in rows:
        r["owner__username"] = names.get(r["owner_id"], "")
    return rows


# --- In-flight window ---------------------------------------------------------------------


def in_flight(now: datetime, window: timedelta, limit: int = LIST_LIMIT) -> dict:
    """Jobs queued, running, or terminal within ``window``: counts per status and the newest rows.

    ``counts`` has the queued and running jobs (at any age) and the complete and failed ones
    finished within the window; ``active`` is queued + running only: what is in flight now.
    Index: a BitmapOr of ``job_active_idx`` (queued/running, partial) and ``job_finished_idx``
    (finished_at >= now - window); only the window's rows are read, however old the table.
    """
    since = now - window
    qs = AnalysisJob.objects.alive().filter(
        Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]) | Q(finished_at__gte=since)
    )
    counts = {status: 0 for status in JobStatus.values}
    for row in qs.values("status").annotate(n=Count("*")).order_by():
        counts[row["status"]] = row["n"]
    rows = []
    # .values() keeps the wide columns (upload, doc_html, results) out of the fetch.
    for job in qs.order_by("-created_at").values(
        "id",
        "filename",
        "owner_id",
        "status",
        "progress_step",
        "progress_done",
        "progress_total",
        "created_at",
        "finished_at",
        "workflow_id",
        "error",
        "failure_kind",
    )[:limit]:
        terminal = job["status"] in (JobStatus.COMPLETE, JobStatus.FAILED)
        age = _age(now, job["finished_at"] if terminal else job["created_at"])
        rows.append({**job, "terminal": terminal, "age_seconds": age, "age": format_age(age)})
    _with_usernames(rows)
    total = sum(counts.values())
    return {
        "window_minutes": int(window.total_seconds() // 60),
        "counts": counts,
        "active": counts[JobStatus.QUEUED] + counts[JobStatus.RUNNING],
        "total": total,
        "rows": rows,
        "truncated": total > len(rows),
    }


# --- Failures -----------------------------------------------------------------------------


def failure_reasons(now: datetime, window: timedelta, limit: int = 5) -> dict:
    """Failed jobs finished within ``window``, grouped by reason and whose failure it was.

    A reason is the error text up to its first colon, as the jobs list's "failed reason"
    filter reads it, so each row links to exactly the jobs it counts. Index: ``job_failed_idx``
    (partial: failed jobs, finished_at), one range.
    """
    since = now - window
    failed = AnalysisJob.objects.alive().filter(status=JobStatus.FAILED, finished_at__gte=since)
    reason = Left(
        Func(F("error"), Value(":"), Value(1), function="split_part", output_field=TextField()),
        80,
    )
    grouped = (
        failed.annotate(reason=reason)
        .values("reason", "failure_kind")
        .annotate(n=Count("*"))
        .order_by("-n", "reason", "failure_kind")
    )
    labels = dict(FailureKind.choices)
    # Every group is read (a window's failures have few distinct reasons) so the total is exact.
    groups = [{**row, "kind_label": labels.get(row["failure_kind"], "unknown")} for row in grouped]
    return {
        "total": sum(g["n"] for g in groups),
        "rows": groups[:limit],
        "more": max(0, len(groups) - limit),
    }


# --- Ghost runs ---------------------------------------------------------------------------


def ghosts(now: datetime, grace: timedelta, window: timedelta, limit: int = LIST_LIMIT) -> dict:
    """Terminal jobs with verdicts and no run row, at any age, split within / past grace.

    Index: ``job_ghost_idx`` (partial: only ghosts are in it), so the cost is the number of
    ghosts, not the size of the table.
    """
    cutoff = now - grace
    since = now - window
    qs = AnalysisJob.objects.ghosts()
    agg = qs.aggregate(
        within=Count("id", filter=Q(updated_at__gt=cutoff)),
        past=Count("id", filter=Q(updated_at__lte=cutoff)),
        outside_window=Count("id", filter=Q(finished_at__lt=since)),
        oldest_within=Min("finished_at", filter=Q(updated_at__gt=cutoff)),
        oldest_past=Min("finished_at", filter=Q(updated_at__lte=cutoff)),
    )
    rows = []
    # Oldest first, like the backstop: the ones most overdue lead the list.
    for job in qs.order_by("updated_at").values(
        "id",
        "filename",
        "owner_id",
        "status",
        "run_id",
        "finished_at",
        "updated_at",
    )[:limit]:
        age = _age(now, job["finished_at"])
        rows.append(
            {
                **job,
                "age_seconds": age,
                "age": format_age(age),
                "past_grace": job["updated_at"] <= cutoff,
                "in_window": job["finished_at"] is not None and job["finished_at"] >= since,
            }
        )
    _with_usernames(rows)
    total = agg["within"] + agg["past"]
    oldest_within = _age(now, agg["oldest_within"])
    oldest_past = _age(now, agg["oldest_past"])
    return {
        "grace_seconds": int(grace.total_seconds()),
        "total": total,
        "within_grace": agg["within"],
        "past_grace": agg["past"],
        "outside_window": agg["outside_window"],
        "oldest_within_seconds": oldest_within,
        "oldest_within": format_age(oldest_within),
        "oldest_past_seconds": oldest_past,
        "oldest_past": format_age(oldest_past),
        "rows": rows,
        "truncated": total > len(rows),
    }


# --- Sweeper health -----------------------------------------------------------------------


def sweeper_state(hb: SweeperHeartbeat, now: datetime) -> str:
    """ "stopped" (drained), "alive" (ticked within MISSED_TICKS of its ticks) or "gone"."""
    if hb.stopped_at is not None:
        return "stopped"
    limit = timedelta(seconds=hb.tick_seconds * MISSED_TICKS)
    if hb.last_tick_at is not None and now - hb.last_tick_at <= limit:
        return "alive"
    return "gone"


def sweepers(now: datetime) -> dict:
    """One row per sweeper process with its state; ``banner`` when none ticked for 3 ticks.

    A sweeper is alive while it has not stopped and its last tick is younger than
    ``MISSED_TICKS`` of its own tick interval; silent longer it is *gone* (killed: nothing
    marked it stopped), and its row is deleted after ``SweeperHeartbeat.EXPIRY_TICKS`` of
    silence (``expires_in``). The table is one row per process: no index needed.
    """
    rows = []
    qs = SweeperHeartbeat.objects.filter(
        Q(stopped_at__isnull=True) | Q(stopped_at__gte=now - STOPPED_VISIBLE)
    ).order_by("-last_tick_at", "name")
    for hb in qs:
        state = sweeper_state(hb, now)
        tick_age = _age(now, hb.last_tick_at)
        silent_since = hb.last_tick_at or hb.started_at
        expires = silent_since + timedelta(seconds=hb.tick_seconds * SweeperHeartbeat.EXPIRY_TICKS)
        backstop_age = _age(now, hb.last_backstop_at)
        rows.append(
            {
                "name": hb.name,
                "state": state,
                "started_at": hb.started_at,
                "last_tick_at": hb.last_tick_at,
                "last_tick_age": format_age(tick_age),
                "last_tick_age_seconds": tick_age,
                "last_backstop_at": hb.last_backstop_at,
                "last_backstop_age": format_age(backstop_age),
                "backstop_in_flight": hb.backstop_in_flight and state == "alive",
                "tick_seconds": hb.tick_seconds,
                "stopped_at": hb.stopped_at,
                "expires_in": format_age(_age(expires, now)) if state == "gone" else None,
                "overdue": state == "gone" and expires <= now,
            }
        )
    alive = [r for r in rows if r["state"] == "alive"]
    last_tick = max((r["last_tick_at"] for r in rows if r["last_tick_at"]), default=None)
    return {
        "rows": rows,
        "alive": len(alive),
        "banner": not alive,
        "last_tick_age": format_age(_age(now, last_tick)) if last_tick else None,
        "backstop_in_flight": any(r["backstop_in_flight"] for r in alive),
        "missed_ticks": MISSED_TICKS,
        "expiry_ticks": SweeperHeartbeat.EXPIRY_TICKS,
    }


def event_counts(now: datetime) -> dict:
    """Rows recorded, judged and trimmed in the last hour and the last day.

    Each count is what the events list shows for the same kind and period (the page links
    ``?kind__exact=<kind>&since=1h|24h``, ``jobs.admin_tools.EventSinceFilter``); "recorded"
    also says how many were manual (an operator's "record now", ``operator`` set). Index:
    ``runevent_kind_time_idx`` (kind, created_at): one range per kind.
    """
    hour, day = now - timedelta(hours=1), now - timedelta(days=1)
    counts = {
        kind: {"hour": 0, "day": 0, "label": label, "manual_hour": 0, "manual_day": 0}
        for kind, label in RunEventKind.choices
    }
    manual = RunEvent.manual()
    qs = (
        RunEvent.objects.filter(kind__in=RunEventKind.values, created_at__gte=day)
        .values("kind")
        .annotate(
            day=Count("*"),
            hour=Count("created_at", filter=Q(created_at__gte=hour)),
            manual_day=Count("created_at", filter=manual),
            manual_hour=Count("created_at", filter=manual & Q(created_at__gte=hour)),
        )
        .order_by()
    )
    for row in qs:
        kind = row.pop("kind")
        counts[kind].update(row)
    return counts


def recording_lag(now: datetime) -> dict:
    """Lag between a job turning terminal and the backstop recording its run: median and max.

    Computed in SQL (``percentile_cont``) over the last hour and day of "recorded" events.
    Index: ``runevent_kind_time_idx`` (kind = 'recorded' AND created_at >= now - 1 day).
    """
    hour, day = now - timedelta(hours=1), now - timedelta(days=1)
    in_hour = Q(created_at__gte=hour)
    agg = RunEvent.objects.filter(
        kind=RunEventKind.RECORDED, created_at__gte=day, lag_seconds__isnull=False
    ).aggregate(
        median_day=PercentileCont("lag_seconds", 0.5),
        max_day=Max("lag_seconds"),
        median_hour=PercentileCont("lag_seconds", 0.5, filter=in_hour),
        max_hour=Max("lag_seconds", filter=in_hour),
        n_day=Count("*"),
        n_hour=Count("created_at", filter=in_hour),
    )
    out = dict(agg)
    for key in ("median_day", "max_day", "median_hour", "max_hour"):
        out[f"{key}_text"] = format_age(agg[key]) if agg[key] is not None else "—"
    return out


# --- Writers ------------------------------------------------------------------------------


def writers_per_day(now: datetime, days: int = WRITER_DAYS) -> list[dict]:
    """Runs saved per day by writer: client, worker, and legacy rows (saved_by NULL).

    Newest day first; days without runs are listed with zeros so gaps show. Two queries, both
    index-only, and neither evaluates a per-row expression over the client rows (the bulk):

    * each day's total: one ``count(*)`` per day range on ``run_writer_idx`` (saved_at, ...);
    * worker and legacy rows per day, grouped: ``run_nonclient_idx`` (partial: non-client only).

    The client count is the total minus the other two.
    """
    today = timezone.localdate(now)
    day_list = [today - timedelta(days=i) for i in range(days)]
    bounds = [
        (
            timezone.make_aware(datetime.combine(day, datetime.min.time())),
            timezone.make_aware(datetime.combine(day + timedelta(days=1), datetime.min.time())),
        )
        for day in day_list
    ]
    totals = {
        timezone.localdate(lo): n
        for lo, n in _range_counts(AnalysisRun._meta.db_table, "saved_at", bounds).items()
    }
    table = {day: {"client": 0, "worker": 0, "legacy": 0} for day in day_list}
    others = (
        AnalysisRun.objects.filter(saved_at__gte=bounds[-1][0])
        .filter(Q(saved_by__isnull=True) | Q(saved_by=SavedBy.WORKER))
        .annotate(day=TruncDate("saved_at"))
        .values("day", "saved_by")
        .annotate(n=Count("*"))
        .order_by()
    )
    for row in others:
        bucket = table.get(row["day"])
        if bucket is None:  # a saved_at in the future (clock skew): not this table's business
            continue
        bucket["legacy" if row["saved_by"] is None else "worker"] += row["n"]
    out = []
    for day in day_list:
        b = table[day]
        total = totals.get(day, 0)
        b["client"] = total - b["worker"] - b["legacy"]
        out.append({"day": day, **b, "total": total})
    return out


# --- Hourly series (drawn by jobs.charts) --------------------------------------------------


def _hourly(qs, column: str, since: datetime) -> dict[datetime, int]:
    rows = qs.annotate(hour=TruncHour(column)).values("hour").annotate(n=Count("*")).order_by()
    return {
        row["hour"]: row["n"] for row in rows if row["hour"] is not None and row["hour"] >= since
    }


def _range_counts(table: str, column: str, bounds: list[tuple[datetime, datetime]]) -> dict:
    """``count(*)`` of rows with ``lo <= column < hi`` for each (lo, hi), keyed by ``lo``
    (``jobs.sql.range_counts``: one index-only range count per bucket)."""
    with connections[AnalysisJob.objects.db].cursor() as cursor:
        cursor.execute(
            range_counts(table, column),
            [[lo for lo, _ in bounds], [hi for _, hi in bounds]],
        )
        return dict(cursor.fetchall())


def hourly_series(now: datetime, hours: int = CHART_HOURS) -> dict[str, list[tuple[datetime, int]]]:
    """Per hour over the last ``hours``: finished jobs, current ghosts (by the hour they
    finished), runs recorded by the sweeper's backstop. Every hour is present (zeros included).

    Indexes: ``job_finished_idx`` (48 index-only range counts), ``job_ghost_idx`` (partial),
    ``runevent_kind_time_idx`` (kind = 'recorded').
    """
    current = now.replace(minute=0, second=0, microsecond=0)
    first = current - timedelta(hours=hours - 1)
    # The whole table's finished jobs, soft-deleted included: this is throughput, and the
    # deleted_at test would cost a heap visit per row where the index alone answers.
    finished = _range_counts(
        AnalysisJob._meta.db_table,
        "finished_at",
        [(h, h + timedelta(hours=1)) for h in (first + timedelta(hours=i) for i in range(hours))],
    )
    ghost = _hourly(
        AnalysisJob.objects.ghosts().filter(finished_at__gte=first), "finished_at", first
    )
    recorded = _hourly(
        # The sweeper's own work: manual records are left out.
        RunEvent.objects.filter(kind=RunEventKind.RECORDED, created_at__gte=first).exclude(
            RunEvent.manual()
        ),
        "created_at",
        first,
    )
    hours_list = [first + timedelta(hours=i) for i in range(hours)]
    return {
        "finished": [(h, finished.get(h, 0)) for h in hours_list],
        "ghosts": [(h, ghost.get(h, 0)) for h in hours_list],
        "recorded": [(h, recorded.get(h, 0)) for h in hours_list],
    }


# --- The whole page -----------------------------------------------------------------------


def build_dashboard(now: datetime | None = None) -> dict:
    """Everything the dashboard shows, as plain data (one call = one page render)."""
    now = now or timezone.now()
    window = timedelta(minutes=settings.ACURIO_INFLIGHT_WINDOW_MINUTES)
    grace = timedelta(seconds=settings.ACURIO_SWEEP_GRACE_SECONDS)
    series = hourly_series(now)
    return {
        "now": now,
        "in_flight": in_flight(now, window),
        "failures": failure_reasons(now, window),
        "ghosts": ghosts(now, grace, window),
        "sweepers": sweepers(now),
        "events": event_counts(now),
        "lag": recording_lag(now),
        "writers": writers_per_day(now),
        "writer_labels": [SavedBy.CLIENT.label, SavedBy.WORKER.label, "Legacy (NULL)"],
        "charts": [
            bar_chart("Finished jobs per hour", series["finished"], css_class="finished"),
            bar_chart("Ghost runs per hour (by finish time)", series["ghosts"], css_class="ghost"),
            bar_chart(
                "Runs recorded by the sweeper per hour", series["recorded"], css_class="recorded"
            ),
        ],
        "chart_hours": CHART_HOURS,
    }
