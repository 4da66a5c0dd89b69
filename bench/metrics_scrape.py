"""The cost of ``/metrics``' database gauges on a grown database.

Run after ``bench/table_growth.py`` (it reuses that database, ``acurio_bench_growth``): adds
``--rows`` copies of a finished job (without its upload) and of a completed step, the jobs'
times spread over the past year, then times ``jobs.metrics.DatabaseCollector`` (7 scrapes) and
prints each query's execution time inside PostgreSQL and the indexes its plan used.

Usage::

    .venv/bin/python bench/metrics_scrape.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "acurio_bench_growth"
DSN = f"host=127.0.0.1 port=5432 user=postgres dbname={DB}"


def fill(rows: int) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:

        def columns(table: str, skip: set[str]) -> list[str]:
            found = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                " ORDER BY ordinal_position",
                [table],
            ).fetchall()
            return [c for (c,) in found if c not in skip]

        job = columns("jobs_analysisjob", {"id", "upload", "library", "doc_html", "results"})
        job = [c for c in job if c not in ("run_id", "finished_at", "created_at", "updated_at")]
        shift = "(g % 365 + 1) * interval '1 day'"
        conn.execute(
            f"INSERT INTO jobs_analysisjob ({', '.join(job)}, run_id, upload, finished_at,"
            " created_at, updated_at)"
            f" SELECT {', '.join('j.' + c for c in job)}, gen_random_uuid(), ''::bytea,"
            f" j.finished_at - {shift}, j.created_at - {shift}, j.updated_at - {shift}"
            " FROM (SELECT * FROM jobs_analysisjob WHERE status = 'complete' ORDER BY id"
            f" LIMIT 1) j, generate_series(1, {rows}) g"
        )
        step = columns("durable_step", {"id", "key"})
        conn.execute(
            f"INSERT INTO durable_step ({', '.join(step)}, key)"
            f" SELECT {', '.join('s.' + c for c in step)}, s.key || '/copy' || g"
            " FROM (SELECT * FROM durable_step WHERE status = 'completed' ORDER BY id LIMIT 1) s,"
            f" generate_series(1, {rows}) g"
        )
        conn.execute("VACUUM ANALYZE jobs_analysisjob")
        conn.execute("VACUUM ANALYZE durable_step")


def indexes(node: dict[str, Any], found: set[str]) -> set[str]:
    if "Index Name" in node:
        found.add(node["Index Name"])
    if node.get("Node Type") == "Seq Scan":
        found.add(f"seq scan of {node.get('Relation Name')}")
    for child in node.get("Plans", []):
        indexes(child, found)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    started = time.monotonic()
    fill(args.rows)
    print(f"added {args.rows:,} jobs and steps in {time.monotonic() - started:.0f} s")

    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from jobs.metrics import QUERIES, DatabaseCollector, _tables

    collector = DatabaseCollector()
    times = []
    for _ in range(7):
        begun = time.monotonic()
        list(collector.collect())
        times.append((time.monotonic() - begun) * 1000)
    print(
        f"scrape (database gauges): median {statistics.median(times):.1f} ms,"
        f" min {min(times):.1f}, max {max(times):.1f}"
    )
    now = timezone.now()
    params = {
        "now": now,
        "window_start": now - timedelta(minutes=settings.ACURIO_INFLIGHT_WINDOW_MINUTES),
        "grace_cutoff": now - timedelta(seconds=settings.ACURIO_SWEEP_GRACE_SECONDS),
        "hour_ago": now - timedelta(hours=1),
    }
    with connection.cursor() as cursor:
        for name, sql in QUERIES.items():
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql.format(**_tables()), params)
            plan = cursor.fetchone()[0][0]
            used = ", ".join(sorted(indexes(plan["Plan"], set())))
            print(f"{name}: {plan['Execution Time']:.2f} ms ({used})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
