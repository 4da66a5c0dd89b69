"""Cost of the run backstop's query as the job table grows: time and plan at 100k and 1M jobs.

For each size the job table is refilled with ``INSERT ... SELECT generate_series``: mostly old
jobs whose run was saved (half of them already trimmed), a few failed, queued and running, a
few soft-deleted ghosts, and exactly 1,000 ghosts (terminal, body kept, no run row) spread
through the table. Then the exact statement ``record_jobs`` sends (built by the same QuerySet,
``SELECT ... ORDER BY updated_at LIMIT 50 FOR UPDATE OF ... SKIP LOCKED``) runs many times, each
in a rolled-back transaction, and its median / p95 time and its EXPLAIN plan are printed.
Targets: index-driven, <= 20 ms, time(1M) / time(100k) <= 1.5.

Runs in its own database (default ``acurio_bench_sweep`` on the server of ``$DATABASE_URL``,
or ``postgres://postgres@127.0.0.1:5432``), never a test one:

    .venv/bin/python bench/sweep_cost.py [--sizes 100000 1000000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GHOSTS = 1000

FILL_SQL = """
INSERT INTO jobs_analysisjob (owner_id, filename, upload, library_filename, status, doc_html,
    results, run_id, progress_step, progress_done, progress_total, error, created_at,
    updated_at, finished_at, run_saved_at, deleted_at)
SELECT %(owner)s, 'thesis-' || g || '.docx', '\\x'::bytea, '',
       s.status,
       CASE WHEN s.ghost OR (g %% 2 = 0 AND s.status IN ('complete', 'failed'))
            THEN '<p>body ' || g || '</p>' END,
       CASE WHEN s.status IN ('complete', 'failed')
            THEN '{"citations": [{"text": "(A, 2001)", "verdict": "verified"}]}'::jsonb END,
       gen_random_uuid(), '', 0, 0, '',
       s.t - interval '5 minutes', s.t,
       CASE WHEN s.status IN ('complete', 'failed') THEN s.t END,
       CASE WHEN s.status IN ('complete', 'failed') AND NOT s.ghost THEN s.t + interval '10 s' END,
       CASE WHEN g %% %(deleted_every)s = 0 THEN s.t END
FROM generate_series(1, %(n)s) AS g,
LATERAL (
    SELECT now() - (%(n)s - g + 10) * interval '1 minute' AS t,
           g %% %(ghost_every)s = 0 AS ghost,
           CASE WHEN g %% %(ghost_every)s = 0 THEN 'complete'
                WHEN g %% 97 = 0 THEN 'failed'
                WHEN g > %(n)s - 20 THEN 'running'
                WHEN g > %(n)s - 40 THEN 'queued'
                ELSE 'complete' END AS status
) AS s
"""


def setup_django(url: str) -> None:
    os.environ.update(DATABASE_URL=url, DEBUG="1", LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def prepare_database(url: str) -> None:
    """Create the database if needed and migrate it (a subprocess: one Django per database)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "1", "LOG_LEVEL": "WARNING"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)


def fill(url: str, n: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        owner = conn.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,"
            " email, is_staff, is_active, date_joined)"
            " VALUES ('!', false, 'bench', '', '', '', false, true, now())"
            " ON CONFLICT (username) DO UPDATE SET is_active = true RETURNING id"
        ).fetchone()[0]
        conn.execute("TRUNCATE jobs_analysisjob CASCADE")
        # Every 1009th job is soft-deleted: such a ghost is not in the index, not a ghost.
        conn.execute(
            FILL_SQL,
            {"owner": owner, "n": n, "ghost_every": n // GHOSTS, "deleted_every": 1009},
        )
        conn.execute("VACUUM (ANALYZE) jobs_analysisjob")


def backstop_statement(grace: float, limit: int) -> tuple[str, tuple]:
    """The SQL record_jobs sends, built by the same QuerySet it uses."""
    from django.db import transaction

    from jobs.models import AnalysisJob

    qs = (
        AnalysisJob.objects.ghosts(grace)
        .order_by("updated_at")
        .select_for_update(skip_locked=True, of=("self",))
        .values_list("pk", "run_id", "finished_at")[:limit]
    )
    with transaction.atomic():  # Django compiles FOR UPDATE only inside a transaction
        return qs.query.get_compiler("default").as_sql()


def describe(conn) -> dict:
    counts = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE status IN ('complete', 'failed')"
        " AND deleted_at IS NULL AND run_saved_at IS NULL AND doc_html IS NOT NULL"
        " AND updated_at <= now() - interval '120 s'), pg_relation_size('job_ghost_idx'),"
        " pg_relation_size('jobs_analysisjob') FROM jobs_analysisjob"
    ).fetchone()
    return dict(zip(("jobs", "ghosts", "index_bytes", "table_bytes"), counts, strict=True))


def measure(urls: dict[int, str], sql: str, params, repeat: int) -> dict[int, dict]:
    """Run the statement on every size in turn, ``repeat`` rounds: load noise hits all alike."""
    import psycopg

    conns = {n: psycopg.connect(url) for n, url in urls.items()}
    wall: dict[int, list[float]] = {n: [] for n in urls}
    server: dict[int, list[float]] = {n: [] for n in urls}
    rows: dict[int, int] = {}
    try:
        for _ in range(repeat):
            for n, conn in conns.items():
                t0 = time.perf_counter()
                rows[n] = len(conn.execute(sql, params).fetchall())
                wall[n].append((time.perf_counter() - t0) * 1000)
                conn.rollback()  # release the row locks: every round sees the same ghosts
                [[plan]] = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchall()[
                    0
                ]
                server[n].append(plan["Planning Time"] + plan["Execution Time"])
                conn.rollback()
        out = {}
        for n, conn in conns.items():
            text = "\n".join(
                r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
            )
            conn.rollback()
            out[n] = {
                **describe(conn),
                "rows": rows[n],
                "wall_median": statistics.median(wall[n]),
                "wall_p95": sorted(wall[n])[int(repeat * 0.95) - 1],
                "server_median": statistics.median(server[n]),
                "server_p95": sorted(server[n])[int(repeat * 0.95) - 1],
                "plan": text,
            }
        return out
    finally:
        for conn in conns.values():
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--database", default="acurio_bench_sweep", help="name prefix")
    args = parser.parse_args()

    server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x").rsplit("/", 1)[
        0
    ]
    urls = {n: f"{server}/{args.database}_{n}" for n in args.sizes}
    for n, url in urls.items():
        t0 = time.perf_counter()
        prepare_database(url)
        fill(url, n)
        print(f"filled {url.rsplit('/', 1)[1]} with {n:,} jobs in {time.perf_counter() - t0:.0f}s")
    setup_django(urls[args.sizes[0]])
    sql, params = backstop_statement(grace=120, limit=args.batch)
    results = measure(urls, sql, params, args.repeat)
    for r in results.values():
        print(
            f"\n## {r['jobs']:,} jobs, {r['ghosts']:,} ghosts past the grace (table "
            f"{r['table_bytes'] / 2**20:.0f} MiB, job_ghost_idx {r['index_bytes'] / 1024:.0f} KiB)\n"
        )
        print(
            f"backstop query (LIMIT {args.batch}, {r['rows']} rows locked), {args.repeat} runs:"
            f" server (planning + execution) median {r['server_median']:.3f} ms, p95"
            f" {r['server_p95']:.3f} ms; round trip from Python median {r['wall_median']:.2f} ms,"
            f" p95 {r['wall_p95']:.2f} ms\n"
        )
        print("```\n" + r["plan"] + "\n```")
    if len(args.sizes) >= 2:
        small, large = results[args.sizes[0]], results[args.sizes[-1]]
        print(
            f"\ntime({args.sizes[-1]:,}) / time({args.sizes[0]:,}): server median "
            f"{large['server_median'] / small['server_median']:.2f}, round-trip median "
            f"{large['wall_median'] / small['wall_median']:.2f}"
        )


if __name__ == "__main__":
    main()
