"""Heap tuples per *judged* run: the write of the run row plus the judge's stamp on it.

``bench/write_amplification.py`` measures the writers with the judge switched off. This runs
the two real paths end to end, judge included, and counts what PostgreSQL wrote to
``jobs_analysisrun`` (``pg_stat_user_tables``: ``n_tup_ins``, ``n_tup_upd``,
``n_tup_hot_upd``; TOAST chunks of its TOAST table) and, beside it, the diagnostics events
(``jobs_runevent``):

* ``tab open``    — ``save_and_judge(job, 'client')`` per job: the tab's save, built-in judge;
* ``tab closed``  — ``record_jobs`` (the sweeper's backstop) in batches of 50: the record, its
  recorded event (same transaction), the judgment and its judged event.

The counters are settled (every backend's statistics flushed) before and after each path; the
runs are deleted and the tables vacuumed between them. Like ``write_amplification.py`` it starts
a private, throwaway PostgreSQL 15 cluster unless ``--database-url`` is given; tuple counts do
not depend on the machine's load.

    .venv/bin/python bench/judged_run_tuples.py [--jobs 200] [--mb 0.5] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from write_amplification import (  # noqa: E402 - the sibling benchmark's helpers
    ensure_database,
    make_jobs,
    private_cluster,
    reset,
    settled_counters,
)


def event_rows() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            "SELECT n_tup_ins FROM pg_stat_all_tables WHERE relid = 'jobs_runevent'::regclass"
        )
        return cur.fetchone()[0]


def tab_open(job_ids: list[int]) -> None:
    from jobs.models import AnalysisJob, SavedBy
    from jobs.runs import save_and_judge

    for pk in job_ids:
        save_and_judge(AnalysisJob.objects.filter(pk=pk), SavedBy.CLIENT)


def tab_closed(job_ids: list[int]) -> None:
    from jobs.runs import record_jobs

    while record_jobs(limit=50, grace=0, sweeper_name="bench:1"):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--mb", type=float, default=0.5)
    parser.add_argument("--database-url", help="use this database instead of a private cluster")
    args = parser.parse_args()
    with nullcontext(args.database_url) if args.database_url else private_cluster() as url:
        run(url, args.jobs, args.mb)


def run(url: str, n_jobs: int, mb: float) -> None:
    ensure_database(url)
    os.environ.update(DATABASE_URL=url, DEBUG="1", LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from jobs.models import AnalysisRun

    call_command("migrate", verbosity=0)
    job_ids = make_jobs(n_jobs, mb)
    n = len(job_ids)
    print(f"{n} finished jobs, doc_html {mb} MB each; judge: built-in")
    print()
    print(
        "| path | run heap tuples / judged run | inserts | updates | of which HOT "
        "| TOAST chunks / run | events / run |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, path in (
        ("tab open (client save + judge)", tab_open),
        ("tab closed (backstop)", tab_closed),
    ):
        reset(job_ids)
        before, events_before = settled_counters(), event_rows()
        path(job_ids)
        after, events_after = settled_counters(), event_rows()
        assert AnalysisRun.objects.count() == n, name
        assert not AnalysisRun.objects.unjudged().exists(), name
        ins = (after["ins"] - before["ins"]) / n
        upd = (after["upd"] - before["upd"]) / n
        hot = (after["hot"] - before["hot"]) / n
        chunks = (after["toast_ins"] - before["toast_ins"]) / n
        events = (events_after - events_before) / n
        print(
            f"| {name} | {ins + upd:.2f} | {ins:.2f} | {upd:.2f} | {hot:.2f} | {chunks:.1f} "
            f"| {events:.2f} |"
        )


if __name__ == "__main__":
    main()
