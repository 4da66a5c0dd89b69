"""Benchmark: the operator dashboard (and the big change lists) against 1,000,000 jobs.

Fills a separate database (default ``acurio_bench_admin``, dropped and re-created unless
``--reuse``) with a realistic mix made by ``INSERT ... SELECT generate_series``:

* jobs over the last 60 days, oldest first (ids follow creation); most terminal (1 in 37
  failed) with a run row; ``doc_html`` trimmed after 24 h; a few dozen queued/running in the
  last minutes; ghosts at every age (1 in 5,000 jobs; a few within grace); 1 in 211 soft-deleted;
* runs for every saved job: 1 in 8 recorded by the sweeper (``worker``), legacy NULL rows on
  the oldest days, the rest ``client``;
* events: ``recorded`` + ``judged`` for each sweeper-recorded run, ``trimmed`` for each trimmed
  job (about 1.25 M rows);
* sweeper heartbeats: two alive, one stopped.

Then it renders the dashboard through Django's test ``Client`` as staff several times and
prints the median and max render time and each query's time (``--explain`` adds each query's
plan, to check that every one is index-driven). Target: < 500 ms.

    .venv/bin/python bench/dashboard_bench.py                 # fill 1,000,000 jobs, render
    .venv/bin/python bench/dashboard_bench.py --reuse --explain
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1_000_000, help="jobs to insert (default 1,000,000)")
    p.add_argument("--db", default="acurio_bench_admin", help="database to (re)create and fill")
    p.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="server URL")
    p.add_argument("--renders", type=int, default=9, help="timed renders after one warm-up")
    p.add_argument("--reuse", action="store_true", help="keep an already filled database")
    p.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of each query")
    return p.parse_args()


def recreate_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


FILL_SQL = [
    # 1,000 owners.
    """
    INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                           is_staff, is_active, date_joined)
    SELECT '!', false, 'student' || g, '', '', '', false, true, now() - interval '90 days'
    FROM generate_series(1, 1000) g
    """,
    # Jobs, oldest first over 60 days. :n is the number of jobs; the last 40 are still active.
    """
    INSERT INTO jobs_analysisjob (owner_id, filename, upload, library_filename, library, status,
        doc_html, results, run_id, workflow_id, progress_step, progress_done, progress_total,
        error, created_at, updated_at, finished_at, run_saved_at, deleted_at)
    SELECT
        (SELECT min(id) FROM auth_user) + (i %% 1000),
        'thesis-' || i || '.docx',
        '\\x00'::bytea, '', NULL, s.status,
        CASE WHEN s.status IN ('queued', 'running') THEN NULL
             WHEN s.ghost OR s.finished_at > now() - interval '24 hours' THEN '<p>Body.</p>'
             END,
        CASE WHEN s.status IN ('complete', 'failed')
             THEN '{"summary": {"verified": 3, "missing_reference": 1}}'::jsonb END,
        gen_random_uuid(), gen_random_uuid(),
        CASE s.status WHEN 'running' THEN 'verify' WHEN 'queued' THEN '' ELSE 'finalize' END,
        CASE s.status WHEN 'running' THEN i %% 10 WHEN 'queued' THEN 0 ELSE 1 END,
        CASE s.status WHEN 'running' THEN 10 WHEN 'queued' THEN 0 ELSE 1 END,
        CASE WHEN s.status = 'failed' THEN
            CASE WHEN i %% 2 = 0 THEN 'Could not read the file: the DOCX is damaged'
                 ELSE 'Gave up after 5 attempts: lease expired' END
             ELSE '' END,
        s.created_at,
        coalesce(s.finished_at, s.created_at),
        s.finished_at,
        CASE WHEN s.finished_at IS NULL OR s.ghost THEN NULL
             WHEN i %% 8 = 0 THEN s.finished_at + make_interval(secs => 125 + i %% 300)
             ELSE s.finished_at + make_interval(secs => 2 + i %% 50) END,
        CASE WHEN i %% 211 = 0 AND s.finished_at < now() - interval '1 hour'
             THEN s.finished_at + interval '1 hour' END
    FROM generate_series(1, %(n)s) i
    CROSS JOIN LATERAL (
        SELECT now() - interval '60 days' * ((%(n)s - i)::float8 / %(n)s) AS created_at
    ) c
    CROSS JOIN LATERAL (
        SELECT
            c.created_at,
            CASE WHEN i > %(n)s - 40 THEN (CASE WHEN i %% 2 = 0 THEN 'queued' ELSE 'running' END)
                 WHEN i %% 37 = 0 THEN 'failed' ELSE 'complete' END AS status,
            CASE WHEN i > %(n)s - 40 THEN NULL
                 ELSE least(c.created_at + make_interval(secs => 30 + i %% 90), now()) END
                AS finished_at,
            -- ghosts at every age, and a few in the last minutes (within grace)
            (i <= %(n)s - 40 AND (i %% 5000 = 17 OR (i > %(n)s - 400 AND i %% 7 = 0))) AS ghost
    ) s
    """,
    # Runs for every saved job. Legacy NULL writers on the oldest days, 1 in 8 by the sweeper.
    """
    INSERT INTO jobs_analysisrun (id, owner_id, job_id, document, status, doc_html, report,
        error, saved_by, saved_at, created_at, judged_job_id, judgment, judged_at)
    SELECT run_id, owner_id, id, filename, status, '', '{}'::jsonb, error,
        CASE WHEN id % 8 = 0 THEN 'worker'
             WHEN created_at < now() - interval '50 days' AND id % 10 < 3 THEN NULL
             ELSE 'client' END,
        run_saved_at, run_saved_at,
        CASE WHEN id % 8 = 0 THEN id END,
        CASE WHEN id % 8 = 0 THEN '{"score": 0.9}'::jsonb END,
        CASE WHEN id % 8 = 0 THEN run_saved_at + interval '2 seconds' END
    FROM jobs_analysisjob WHERE run_saved_at IS NOT NULL
    """,
    # The sweeper's events: recorded and judged for its runs, trimmed for every trimmed job.
    """
    INSERT INTO jobs_runevent (kind, job_id, run_id, writer, lag_seconds, sweeper, details,
                               created_at)
    SELECT 'recorded', id, run_id, 'worker',
           extract(epoch FROM run_saved_at - finished_at), 'sweep-a:101', '{}', run_saved_at
    FROM jobs_analysisjob WHERE run_saved_at IS NOT NULL AND id % 8 = 0
    """,
    """
    INSERT INTO jobs_runevent (kind, job_id, run_id, writer, lag_seconds, sweeper, details,
                               created_at)
    SELECT 'judged', id, run_id, 'worker', NULL, 'sweep-a:101', '{}',
           run_saved_at + interval '2 seconds'
    FROM jobs_analysisjob WHERE run_saved_at IS NOT NULL AND id % 8 = 0
    """,
    """
    INSERT INTO jobs_runevent (kind, job_id, run_id, writer, lag_seconds, sweeper, details,
                               created_at)
    SELECT 'trimmed', id, run_id, '', NULL, 'sweep-b:202', '{}', finished_at + interval '24 hours'
    FROM jobs_analysisjob
    WHERE doc_html IS NULL AND finished_at IS NOT NULL AND run_saved_at IS NOT NULL
    """,
    """
    INSERT INTO jobs_sweeperheartbeat (name, started_at, last_tick_at, last_backstop_at,
        backstop_in_flight, tick_seconds, stopped_at)
    VALUES ('sweep-a:101', now() - interval '3 days', now() - interval '4 seconds',
            now() - interval '4 seconds', true, 30, NULL),
           ('sweep-b:202', now() - interval '3 days', now() - interval '12 seconds',
            now() - interval '40 seconds', false, 30, NULL),
           ('sweep-old:99', now() - interval '5 days', now() - interval '3 hours',
            now() - interval '3 hours', false, 30, now() - interval '3 hours')
    """,
]


def fill(n: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            started = time.perf_counter()
            cursor.execute(sql, {"n": n} if "%(n)s" in sql else None)
            first = " ".join(sql.split()[:3])
            print(
                f"  {first:<40} {cursor.rowcount:>10,} rows  {time.perf_counter() - started:6.1f} s"
            )
    # Autocommit is on: VACUUM sets the visibility map so index-only scans stay index-only.
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute("VACUUM (ANALYZE)")
        print(f"  VACUUM (ANALYZE) {time.perf_counter() - started:6.1f} s")


def table_sizes() -> list[tuple[str, int, str]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT relname, n_live_tup, pg_size_pretty(pg_total_relation_size(relid))
            FROM pg_stat_user_tables WHERE relname LIKE 'jobs_%' ORDER BY relname
            """
        )
        return cursor.fetchall()


def render(
    client, url: str, renders: int
) -> tuple[float, list[float], list[float], list[float], list[dict]]:
    """Warm-up once, then time ``renders`` renders: wall clock, this process's CPU time, and
    the summed wall time of the SQL queries (client side)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    started = time.perf_counter()
    response = client.get(url)
    warm = time.perf_counter() - started
    assert response.status_code == 200, response.status_code
    walls, cpus, sqls, queries = [], [], [], []
    for _ in range(renders):
        with CaptureQueriesContext(connection) as ctx:
            started, cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        assert response.status_code == 200, response.status_code
        queries = ctx.captured_queries
        sqls.append(sum(float(q["time"]) for q in queries))
    return warm, walls, cpus, sqls, queries


def explain(sql: str) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql)
        return [row[0] for row in cursor.fetchall()]


def main() -> None:
    args = parse_args()
    url = f"{args.server}/{args.db}"
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault(
        "SECRET_KEY", "bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum"
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")

    if not args.reuse:
        recreate_database(args.server, args.db)

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from jobs.models import AnalysisJob

    call_command("migrate", verbosity=0)
    if not args.reuse or not AnalysisJob.objects.exists():
        print(f"Filling {args.db} with {args.jobs:,} jobs ...")
        started = time.perf_counter()
        fill(args.jobs)
        print(f"  filled in {time.perf_counter() - started:.0f} s")
    for name, rows, size in table_sizes():
        print(f"  {name:<28} {rows:>10,} rows  {size}")

    setup_test_environment()  # lets the test Client's "testserver" host through
    User = get_user_model()
    staff, _ = User.objects.get_or_create(
        username="bench-staff", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(staff)

    print(
        f"Load average before rendering: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"on {os.cpu_count()} CPUs"
    )
    pages = [
        ("dashboard", reverse("admin:jobs_analysisjob_dashboard")),
        ("jobs change list", reverse("admin:jobs_analysisjob_changelist")),
        ("jobs: ghosts", reverse("admin:jobs_analysisjob_changelist") + "?has_run=ghost"),
        ("jobs: failed", reverse("admin:jobs_analysisjob_changelist") + "?status__exact=failed"),
        (
            "jobs: saved by legacy",
            reverse("admin:jobs_analysisjob_changelist") + "?saved_by=legacy",
        ),
        ("runs change list", reverse("admin:jobs_analysisrun_changelist")),
        ("runs: not judged", reverse("admin:jobs_analysisrun_changelist") + "?judged=no"),
        ("events change list", reverse("admin:jobs_runevent_changelist")),
    ]
    summary = []
    for label, page in pages:
        renders = args.renders if label == "dashboard" else max(3, args.renders // 3)
        warm, times, cpus, sqls, queries = render(client, page, renders)
        median, worst = statistics.median(times) * 1000, max(times) * 1000
        cpu, sql = statistics.median(cpus) * 1000, statistics.median(sqls) * 1000
        summary.append((label, median, worst, cpu, sql, len(queries)))
        print(f"\n{label}: {page}")
        print(
            f"  warm-up {warm * 1000:.0f} ms; {renders} renders: median {median:.1f} ms, "
            f"max {worst:.1f} ms (Python CPU {cpu:.1f} ms, SQL {sql:.1f} ms); "
            f"{len(queries)} queries"
        )
        if label != "dashboard" and not args.explain:
            continue
        executed = 0.0
        for q in queries:
            sql = " ".join(q["sql"].split())
            print(f"  {float(q['time']) * 1000:8.1f} ms  {sql[:150]}")
            if args.explain and sql.upper().startswith("SELECT") and "django_session" not in sql:
                for line in explain(q["sql"]):
                    print("             | " + line)
                    if line.startswith("Execution Time:"):
                        executed += float(line.split()[2])
        if args.explain:
            print(
                f"  PostgreSQL execution time of these queries (EXPLAIN ANALYZE, summed): "
                f"{executed:.1f} ms; fastest render {min(times) * 1000:.1f} ms"
            )

    print("\nSummary (ms; CPU = this process, SQL = summed query wall time, both medians)")
    print(f"  {'page':<24} {'median':>8} {'max':>8} {'CPU':>8} {'SQL':>8} {'queries':>8}")
    for label, median, worst, cpu, sql, n in summary:
        print(f"  {label:<24} {median:8.1f} {worst:8.1f} {cpu:8.1f} {sql:8.1f} {n:8d}")
    dash = summary[0]
    verdict = "meets" if dash[2] < 500 else "MISSES"
    print(f"\nDashboard max {dash[2]:.1f} ms: {verdict} the < 500 ms target.")
    print(
        f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"on {os.cpu_count()} CPUs (other processes share this machine)."
    )


if __name__ == "__main__":
    main()
