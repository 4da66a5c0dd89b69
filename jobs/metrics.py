"""Prometheus metrics: ``GET /metrics`` and the in-process counters of web, worker and sweeper.

Two sources, one page (the text format Prometheus scrapes, from prometheus-client):

* **Counters and histograms in each process** — step attempts by kind and outcome and their
  duration (the worker, through the engine's ``jobs.durable.observe`` hook), lease recoveries
  and sweeper ticks (the sweeper), judge calls and failures (whoever judges: the sweeper's
  backstop, a worker's judge step, the web process for a tab's save). Each process keeps its
  own; they reach Prometheus either through ``PROMETHEUS_MULTIPROC_DIR`` (every process on
  one host writes its figures to files in that directory and ``/metrics`` adds them up:
  prometheus-client's multiprocess mode) or through a port per process
  (``manage.py worker --metrics-port 9101``, ``manage.py sweeper --metrics-port 9102``).
* **Gauges read from the database at scrape time** (:class:`DatabaseCollector`): queue depth
  per state of jobs, workflow instances and engine steps, ghost runs within and past grace,
  the backstop's lag, runs not judged, the sweepers' last tick. Every query reads a partial
  or time index whose size is bounded by the work in flight (or by one window of finished
  work), never by the tables' history: seven small queries per scrape (their indexes are
  named beside each one below). Nothing is counted from a whole table.

``/metrics`` is closed unless configured: ``ACURIO_METRICS_TOKEN`` (the scraper sends
``Authorization: Bearer <token>``) and/or ``ACURIO_METRICS_ALLOW`` (client addresses or
networks); with neither it answers 404, and when both are set a scrape must pass both.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from acurio.security import client_ip
from jobs.durable import observe

logger = logging.getLogger(__name__)

# The *_created series (a timestamp per counter) only double the page; rates need none.
disable_created_metrics()

# --- in-process metrics ------------------------------------------------------------------

# From a no-op step (milliseconds) to a remote call or a long extraction (minutes).
STEP_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
JUDGE_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

STEP_SECONDS = Histogram(
    "acurio_durable_step_duration_seconds",
    "Duration of one step attempt (run and checkpoint), by node kind.",
    ["kind"],
    buckets=STEP_BUCKETS,
)
STEPS = Counter(
    "acurio_durable_steps",
    "Step attempts by node kind and outcome (completed, retry, failed, fenced, waiting,"
    " handed back, interrupted).",
    ["kind", "outcome"],
)
LEASES_RECOVERED = Counter(
    "acurio_durable_leases_recovered",
    "Steps whose worker stopped renewing its lease (crashed, killed, hung), put back or failed"
    " by the sweeper.",
)
SWEEPER_TICKS = Counter("acurio_sweeper_ticks", "Sweeper ticks run.")
SWEEPER_TICK_SECONDS = Histogram(
    "acurio_sweeper_tick_duration_seconds",
    "Duration of a sweeper tick (heartbeat, lease recovery, backstop start, trim).",
    buckets=TICK_BUCKETS,
)
JUDGE_SECONDS = Histogram(
    "acurio_judge_duration_seconds",
    "Duration of one judgment (built-in, or remote with its retries), by judge.",
    ["judge"],
    buckets=JUDGE_BUCKETS,
)
JUDGE_FAILURES = Counter(
    "acurio_judge_failures",
    "Judgments that failed (the run stays unjudged for the judge backstop), by judge.",
    ["judge"],
)

for _judge in ("builtin", "remote"):  # present (0) before the first failure
    JUDGE_FAILURES.labels(judge=_judge)


def record_step(kind: str, outcome: str, seconds: float) -> None:
    """The engine's step hook (``jobs.durable.observe.on_step``)."""
    STEPS.labels(kind=kind, outcome=outcome).inc()
    STEP_SECONDS.labels(kind=kind).observe(seconds)


def install() -> None:
    """Subscribe to the engine's hooks (``JobsConfig.ready``; idempotent)."""
    observe.on_step(record_step)


def timed_tick[F: Callable[..., Any]](tick: F) -> F:
    """Decorate ``Sweeper.tick``: count the tick and observe its duration."""

    @functools.wraps(tick)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return tick(*args, **kwargs)
        finally:
            SWEEPER_TICKS.inc()
            SWEEPER_TICK_SECONDS.observe(time.monotonic() - started)

    return timed  # type: ignore[return-value]


def leases_recovered(count: int) -> None:
    """The sweeper recovered ``count`` expired leases."""
    if count:
        LEASES_RECOVERED.inc(count)


def timed_judgment[F: Callable[..., Any]](assess: F) -> F:
    """Decorate ``jobs.runs.judge.assess(run)``: its duration by judge, and its failures."""

    @functools.wraps(assess)
    def timed(run: Any, *args: Any, **kwargs: Any) -> Any:
        judge = "remote" if settings.ACURIO_JUDGE_URL and run.status == "complete" else "builtin"
        started = time.monotonic()
        try:
            return assess(run, *args, **kwargs)
        except Exception:
            JUDGE_FAILURES.labels(judge=judge).inc()
            raise
        finally:
            JUDGE_SECONDS.labels(judge=judge).observe(time.monotonic() - started)

    return timed  # type: ignore[return-value]


# --- gauges from the database, at scrape time ----------------------------------------------


def _tables() -> dict[str, str]:
    from jobs.durable.models import Instance, Step
    from jobs.models import AnalysisJob, AnalysisRun, RunEvent, SweeperHeartbeat

    return {
        "job": AnalysisJob._meta.db_table,
        "run": AnalysisRun._meta.db_table,
        "event": RunEvent._meta.db_table,
        "heartbeat": SweeperHeartbeat._meta.db_table,
        "instance": Instance._meta.db_table,
        "step": Step._meta.db_table,
    }


# Each statement names the index it reads; %(now)s and friends are bound per scrape.
QUERIES = {
    # job_active_idx (partial: queued or running) for the first two, job_finished_idx for the
    # window of finished jobs.
    "jobs": """
        SELECT
          (SELECT count(*) FROM {job} WHERE status = 'queued'),
          (SELECT count(*) FROM {job} WHERE status = 'running'),
          count(*) FILTER (WHERE status = 'complete'),
          count(*) FILTER (WHERE status = 'failed')
        FROM {job} WHERE finished_at >= %(window_start)s
    """,
    # job_ghost_idx (partial: terminal, not deleted, no run row, body kept): only ghosts.
    "ghosts": """
        SELECT
          count(*) FILTER (WHERE updated_at > %(grace_cutoff)s),
          count(*) FILTER (WHERE updated_at <= %(grace_cutoff)s),
          min(finished_at) FILTER (WHERE updated_at <= %(grace_cutoff)s)
        FROM {job}
        WHERE status IN ('complete', 'failed') AND deleted_at IS NULL
          AND run_saved_at IS NULL AND doc_html IS NOT NULL
          AND results IS NOT NULL AND results <> '{{}}'::jsonb
    """,
    # The partial indexes of ready steps and of leased running steps (durable_step_ready,
    # durable_step_lease or their per-queue twins): only steps in flight.
    "steps": """
        SELECT
          count(*) FILTER (WHERE run_at <= %(now)s),
          count(*) FILTER (WHERE run_at > %(now)s OR run_at IS NULL),
          min(run_at) FILTER (WHERE run_at <= %(now)s),
          (SELECT count(*) FROM {step}
            WHERE status = 'running' AND lease_expires_at IS NOT NULL),
          (SELECT count(*) FROM {step}
            WHERE status = 'running' AND lease_expires_at IS NOT NULL
              AND lease_expires_at < %(now)s)
        FROM {step} WHERE status = 'ready'
    """,
    # durable_inst_status (status, created_at): only the unfinished instances' entries.
    "instances": """
        SELECT
          (SELECT count(*) FROM {instance} WHERE status = 'pending'),
          (SELECT count(*) FROM {instance} WHERE status = 'running')
    """,
    # runevent_kind_time_idx (kind, created_at): one hour of recordings.
    "backstop": """
        SELECT count(*), max(lag_seconds),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_seconds)
        FROM {event} WHERE kind = 'recorded' AND created_at >= %(hour_ago)s
    """,
    # One row per sweeper process: a handful of rows.
    "sweepers": """
        SELECT max(last_tick_at),
               count(*) FILTER (WHERE stopped_at IS NULL
                 AND last_tick_at >= %(now)s - make_interval(secs => 3 * tick_seconds))
        FROM {heartbeat}
    """,
}


def _gauge(name: str, documentation: str, value: float | None, **labels: str) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    family.add_metric(list(labels.values()), float("nan") if value is None else float(value))
    return family


class DatabaseCollector(Collector):
    """The gauges read from the database at scrape time (see the module docstring)."""

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        try:
            rows = self._read()
        except DatabaseError as exc:
            logger.warning("metrics: database unavailable: %s", exc)
            with_error = True
            rows = {}
        else:
            with_error = False
        yield _gauge(
            "acurio_database_up",
            "1 when the scrape could read the database, else 0 (the other gauges are then absent).",
            0 if with_error else 1,
        )
        yield _gauge(
            "acurio_metrics_scrape_duration_seconds",
            "Time the database gauges of this scrape took.",
            time.monotonic() - started,
        )
        if with_error:
            return
        yield from self._families(rows)

    @staticmethod
    def _read() -> dict[str, tuple]:
        now = timezone.now()
        params = {
            "now": now,
            "window_start": now - timedelta(minutes=settings.ACURIO_INFLIGHT_WINDOW_MINUTES),
            "grace_cutoff": now - timedelta(seconds=settings.ACURIO_SWEEP_GRACE_SECONDS),
            "hour_ago": now - timedelta(hours=1),
        }
        from jobs.models import AnalysisRun

        tables = _tables()
        rows: dict[str, tuple] = {}
        with connection.cursor() as cursor:
            for name, sql in QUERIES.items():
                cursor.execute(sql.format(**tables), params)
                rows[name] = cursor.fetchone()
        # run_unjudged_idx (partial, the very condition of unjudged()): only the backlog.
        rows["unjudged"] = (AnalysisRun.objects.unjudged().count(),)
        rows["now"] = (now,)
        return rows

    @staticmethod
    def _families(rows: dict[str, tuple]) -> Iterator[Metric]:
        now = rows["now"][0]

        def age(moment: Any) -> float | None:
            return None if moment is None else max(0.0, (now - moment).total_seconds())

        queued, running, complete, failed = rows["jobs"]
        jobs = GaugeMetricFamily(
            "acurio_jobs",
            "Analysis jobs queued and running now; complete and failed within the in-flight"
            " window (ACURIO_INFLIGHT_WINDOW_MINUTES).",
            labels=["status"],
        )
        for status, value in (
            ("queued", queued),
            ("running", running),
            ("complete", complete),
            ("failed", failed),
        ):
            jobs.add_metric([status], value)
        yield jobs

        within, past, oldest = rows["ghosts"]
        ghosts = GaugeMetricFamily(
            "acurio_ghost_runs",
            "Finished jobs whose report no run row holds yet, within and past the grace.",
            labels=["grace"],
        )
        ghosts.add_metric(["within"], within)
        ghosts.add_metric(["past"], past)
        yield ghosts
        yield _gauge(
            "acurio_backstop_oldest_ghost_age_seconds",
            "Age (since the job finished) of the oldest ghost past grace: the backstop's lag"
            " building now; 0 when there is none.",
            age(oldest) or 0.0,
        )

        ready, waiting, oldest_ready, leased, expired = rows["steps"]
        steps = GaugeMetricFamily(
            "acurio_durable_steps_in_flight",
            "Engine steps in flight: ready (due now), waiting (a timer, a signal or a retry's"
            " backoff), running (leased by a worker), lease_expired (its worker is gone; the"
            " sweeper recovers it).",
            labels=["state"],
        )
        for state, value in (
            ("ready", ready),
            ("waiting", waiting),
            ("running", leased),
            ("lease_expired", expired),
        ):
            steps.add_metric([state], value)
        yield steps
        yield _gauge(
            "acurio_durable_oldest_ready_age_seconds",
            "How long the oldest due step has waited for a worker; 0 when none is due.",
            age(oldest_ready) or 0.0,
        )

        pending, inst_running = rows["instances"]
        instances = GaugeMetricFamily(
            "acurio_durable_instances",
            "Workflow instances not finished, by status.",
            labels=["status"],
        )
        instances.add_metric(["pending"], pending)
        instances.add_metric(["running"], inst_running)
        yield instances

        recorded, lag_max, lag_median = rows["backstop"]
        yield _gauge(
            "acurio_backstop_recorded_last_hour",
            "Runs the backstop recorded in the last hour.",
            recorded,
        )
        lag = GaugeMetricFamily(
            "acurio_backstop_lag_seconds",
            "Lag from a job finishing to the backstop recording its run, over the last hour's"
            " recordings (NaN when there was none).",
            labels=["stat"],
        )
        lag.add_metric(["max"], float("nan") if lag_max is None else lag_max)
        lag.add_metric(["median"], float("nan") if lag_median is None else lag_median)
        yield lag

        yield _gauge(
            "acurio_runs_unjudged",
            "Runs not judged for their current job (the judge backstop's backlog).",
            rows["unjudged"][0],
        )

        last_tick, alive = rows["sweepers"]
        yield _gauge(
            "acurio_sweeper_last_tick_age_seconds",
            "Seconds since any sweeper last ticked (NaN when none ever did).",
            age(last_tick),
        )
        yield _gauge(
            "acurio_sweepers_alive",
            "Sweeper processes that ticked within three of their ticks and did not stop.",
            alive,
        )


# --- the endpoint ---------------------------------------------------------------------------


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """Why this request may not read the metrics, as the response to send; None if it may."""
    token: str = settings.ACURIO_METRICS_TOKEN
    allow: list[str] = settings.ACURIO_METRICS_ALLOW
    if not token and not allow:
        return HttpResponse(
            "metrics are off: set ACURIO_METRICS_TOKEN and/or ACURIO_METRICS_ALLOW\n",
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    if allow:
        address = client_ip(request) or ""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            ip = None
        if ip is None or not any(ip in ipaddress.ip_network(net, strict=False) for net in allow):
            return HttpResponse(
                "forbidden: this address may not read the metrics\n",
                status=403,
                content_type="text/plain; charset=utf-8",
            )
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            response = HttpResponse(
                "unauthorized: send Authorization: Bearer <ACURIO_METRICS_TOKEN>\n",
                status=401,
                content_type="text/plain; charset=utf-8",
            )
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return None


def exposition() -> bytes:
    """The metrics page: this host's processes (multiprocess mode) or this process, then the
    database gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        processes = CollectorRegistry()
        MultiProcessCollector(processes)
    else:
        processes = REGISTRY
    database = CollectorRegistry(auto_describe=False)
    database.register(DatabaseCollector())
    return generate_latest(processes) + generate_latest(database)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the Prometheus text format, for an allowed scraper only."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
