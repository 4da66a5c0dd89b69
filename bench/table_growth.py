"""Table growth per 10,000 theses: what one PostgreSQL stores for the analyses it runs.

Runs the corpus's theses (``../shared/corpus``, each with its BibTeX library) through the real
pipeline on a database of its own (``acurio_bench_growth``, dropped and created afresh), has
the sweeper record and judge every run (no tab open), then reads ``pg_total_relation_size``
(heap + TOAST + indexes) of every table after ``VACUUM FULL``; then the sweeper's trim clears the
jobs' ``doc_html`` (as ``ACURIO_DOC_HTML_TTL_HOURS`` does a day later) and the sizes are read
again. Each figure is the growth over the freshly migrated database, scaled to 10,000 theses.

Usage::

    .venv/bin/python bench/table_growth.py [--rounds 3] [--out bench/results/growth.md]

The server is ``BENCH_PGHOST``/``BENCH_PGPORT`` (127.0.0.1:5432), user ``postgres``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HOST = os.environ.get("BENCH_PGHOST", "127.0.0.1")
PORT = int(os.environ.get("BENCH_PGPORT", "5432"))
DB = "acurio_bench_growth"
CORPUS = Path(os.environ.get("ACURIO_CORPUS") or ROOT.parent / "shared" / "corpus")
PER = 10_000


def recreate_database() -> None:
    with psycopg.connect(host=HOST, port=PORT, user="postgres", dbname="postgres") as conn:
        conn.autocommit = True
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")


def sizes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        # FULL: rewritten without the space a trim freed (plain VACUUM keeps the files' size
        # and only makes that space reusable), so the figure is what the rows occupy.
        cursor.execute("VACUUM FULL")
        cursor.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        )
        return dict(cursor.fetchall())


def rows(table: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # a few thousand rows at most
        return cursor.fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times the corpus is submitted")
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = parser.parse_args()

    recreate_database()
    os.environ["DATABASE_URL"] = f"postgres://postgres@{HOST}:{PORT}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from jobs import pipeline
    from jobs.durable import Worker
    from jobs.models import AnalysisJob, JobStatus
    from jobs.sweeper import Sweeper

    call_command("migrate", verbosity=0)
    empty = sizes()
    user = get_user_model().objects.create_user("growth", password="growth-bench-only")
    theses = sorted(  # the theses: each has its truth file beside it (not the README)
        p
        for p in CORPUS.iterdir()
        if p.suffix in {".docx", ".pdf", ".html", ".md"} and p.with_suffix(".truth.json").exists()
    )
    started = time.monotonic()
    for _ in range(args.rounds):
        for thesis in theses:
            library = thesis.with_suffix(".bib")
            pipeline.submit_analysis(
                user,
                thesis.name,
                thesis.read_bytes(),
                library.read_bytes() if library.exists() else None,
                library.name if library.exists() else "",
            )
    Worker(once=True).drain()
    jobs = AnalysisJob.objects.count()
    complete = AnalysisJob.objects.filter(status=JobStatus.COMPLETE).count()
    sweeper = Sweeper(name="growth", grace_seconds=0, ttl_hours=1_000)
    sweeper.tick()
    sweeper.wait_for_backstop()
    analysed = time.monotonic() - started
    full = sizes()
    Sweeper(name="growth-trim", grace_seconds=0, ttl_hours=0).trim()
    trimmed = sizes()
    counts = {
        t: rows(t)
        for t in (
            "jobs_analysisjob",
            "jobs_analysisrun",
            "jobs_jobcitation",
            "jobs_runevent",
            "durable_instance",
            "durable_step",
        )
    }

    def per(delta: int) -> str:
        return f"{delta / jobs * PER / 2**20:,.1f} MiB"

    tables = sorted(
        (t for t in full if full[t] - empty.get(t, 0) > 64 * 1024),
        key=lambda t: -(full[t] - empty.get(t, 0)),
    )
    lines = [
        f"{jobs} theses ({complete} complete; {len(theses)} corpus files, {args.rounds} rounds, each"
        f" with its library), analysed, recorded and judged in {analysed:.0f} s;"
        f" sizes after VACUUM FULL, growth over the empty schema, per {PER:,} theses:",
        "",
        "| table | rows per thesis | before the trim | after the doc_html trim |",
        "|---|---:|---:|---:|",
    ]
    for t in tables:
        count = counts.get(t)
        lines.append(
            f"| `{t}` | {count / jobs:,.1f} | {per(full[t] - empty.get(t, 0))} |"
            f" {per(trimmed[t] - empty.get(t, 0))} |"
            if count is not None
            else f"| `{t}` | | {per(full[t] - empty.get(t, 0))} |"
            f" {per(trimmed[t] - empty.get(t, 0))} |"
        )
    total_full = sum(full.values()) - sum(empty.values())
    total_trimmed = sum(trimmed.values()) - sum(empty.values())
    lines.append(f"| **all tables** | | **{per(total_full)}** | **{per(total_trimmed)}** |")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(f"# Table growth (bench/table_growth.py)\n\n{report}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
