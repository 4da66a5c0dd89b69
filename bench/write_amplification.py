"""Write amplification of the AnalysisRun writers: tuples and WAL per finished run, by mode.

500 finished jobs, each with a ~2 MB ``doc_html``; the run rows are then written in each mode
in turn, from a clean slate (runs deleted, jobs unmarked, VACUUM, CHECKPOINT between modes):

* ``tab open``            — the tab POSTs: ``save_run(job, 'client')`` per job, nothing else;
* ``tab closed, 1 sweeper`` / ``4 sweepers`` — no tab: the run backstop (``record_jobs``) in 1
  or 4 concurrent threads, each with its own connection (``SKIP LOCKED`` contention is real);
* ``closed, tab back``    — the sweeper records, then every tab comes back and saves: a claim;
* ``dual writer``         — the old design, simulated: an unconditional upsert at finalize and
  again by the client (two full writes of the body);
* ``judge (add-on)``      — the judge's own store, once per run, the same in every mode.

The writer modes run with the judge switched off so the figures are the writers' alone; the
judge's cost is its own row. Tuple writes come from ``pg_stat_user_tables`` (n_tup_ins +
n_tup_upd of jobs_analysisrun) and of its TOAST relation; WAL from ``pg_current_wal_lsn()``.

WAL positions are cluster-wide, and the shared development PostgreSQL has other writers, so by
default this starts a private, throwaway PostgreSQL 15 cluster (initdb in a temporary directory,
autovacuum off so nothing else writes WAL during a mode; fsync off only for speed, which
changes no WAL byte). ``--database-url`` uses an existing server instead.

    .venv/bin/python bench/write_amplification.py [--jobs 500] [--mb 2] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")


# --- a private PostgreSQL cluster -----------------------------------------------------------


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; the Debian package's "postgres" user runs it then.
    if os.geteuid() != 0:
        return cmd
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{c}'" for c in cmd)]


@contextmanager
def private_cluster():
    tmp = Path(tempfile.mkdtemp(prefix="acurio-bench-pg-"))
    data = tmp / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres", "postgres")
    subprocess.run(
        _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]),
        check=True,
        capture_output=True,
    )
    options = (
        f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c autovacuum=off -c fsync=off "
        "-c max_wal_size=50GB -c checkpoint_timeout=1d -c shared_buffers=256MB"
    )
    subprocess.run(
        _as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(tmp / "log"),
                "-o",
                options,
                "-w",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/acurio_bench_wa"
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


# --- data -----------------------------------------------------------------------------------


def documents(count: int, mb: float, seed: int = 7):
    """Distinct ~``mb`` MB HTML bodies of random words: they compress like prose, not zeros."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10))) for _ in range(20000)
    ]
    paragraphs = [
        "<p>" + " ".join(rng.choices(words, k=80)) + " (Smith, 2020).</p>\n" for _ in range(3000)
    ]
    per_doc = int(mb * 1024 * 1024 / (sum(map(len, paragraphs)) / len(paragraphs)))
    for _ in range(count):
        yield "".join(rng.choices(paragraphs, k=per_doc))


def make_jobs(count: int, mb: float) -> list[int]:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.models import AnalysisJob, JobStatus

    user, _ = get_user_model().objects.get_or_create(username="bench")
    results = {
        "document": "thesis.docx",
        "style": "apa",
        "citations": [
            {
                "text": f"(Smith, {2000 + i % 20})",
                "keys": [{"author": "Smith", "year": str(2000 + i % 20)}],
                "verdict": "verified" if i % 7 else "missing_reference",
                "references": [i % 40],
            }
            for i in range(120)
        ],
        "references": [
            {"text": f"Smith, J. ({2000 + i}). Work {i}.", "verdict": "cited"} for i in range(40)
        ],
        "summary": {"verified": 102, "missing_reference": 18},
    }
    ids: list[int] = []
    batch: list[AnalysisJob] = []
    for i, html in enumerate(documents(count, mb)):
        batch.append(
            AnalysisJob(
                owner=user,
                filename=f"thesis-{i}.docx",
                upload=b"",
                status=JobStatus.COMPLETE,
                run_id=uuid.uuid4(),
                doc_html=html,
                results=results,
                finished_at=timezone.now(),
            )
        )
        if len(batch) == 20:
            ids += [j.pk for j in AnalysisJob.objects.bulk_create(batch)]
            batch = []
    ids += [j.pk for j in AnalysisJob.objects.bulk_create(batch)]
    return ids


# --- measuring ------------------------------------------------------------------------------


def counters() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            """
            SELECT t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, ts.n_tup_ins, ts.n_tup_del,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
            FROM pg_class c
            JOIN pg_stat_all_tables t ON t.relid = c.oid
            JOIN pg_stat_all_tables ts ON ts.relid = c.reltoastrelid
            WHERE c.oid = 'jobs_analysisrun'::regclass
            """
        )
        ins, upd, hot, toast_ins, toast_del, lsn = cur.fetchone()
    return {
        "ins": ins,
        "upd": upd,
        "hot": hot,
        "toast_ins": toast_ins,
        "toast_del": toast_del,
        "lsn": lsn,
    }


def flush_stats() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cur:
        cur.execute("SELECT 1")


def settled_counters() -> dict[str, int]:
    # Other connections (the sweeper threads) flush their counters as they close: wait for it.
    flush_stats()
    last = counters()
    for _ in range(50):
        time.sleep(0.2)
        now = counters()
        if {k: v for k, v in now.items() if k != "lsn"} == {
            k: v for k, v in last.items() if k != "lsn"
        }:
            return last
        last = now
    return last


def reset(job_ids: list[int]) -> None:
    from django.db import connection

    from jobs.models import AnalysisJob, AnalysisRun, RunEvent

    AnalysisRun.objects.all().delete()
    RunEvent.objects.all().delete()
    AnalysisJob.objects.filter(pk__in=job_ids).update(run_saved_at=None)
    with connection.cursor() as cur:
        cur.execute("VACUUM (ANALYZE) jobs_analysisrun")
        cur.execute("VACUUM (ANALYZE) jobs_analysisjob")
        cur.execute("CHECKPOINT")


def in_threads(n: int, target) -> None:
    from django.db import connection

    def run():
        try:
            target()
        finally:
            flush_stats()
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --- the modes ------------------------------------------------------------------------------

DUAL_SQL = """
INSERT INTO jobs_analysisrun (id, owner_id, job_id, document, status, doc_html, report, error,
                              saved_by, saved_at, created_at)
SELECT run_id, owner_id, id, filename, status, doc_html, results, error, %s, now(), now()
FROM jobs_analysisjob WHERE id = %s
ON CONFLICT (id) DO UPDATE SET owner_id = EXCLUDED.owner_id, job_id = EXCLUDED.job_id,
    document = EXCLUDED.document, status = EXCLUDED.status, doc_html = EXCLUDED.doc_html,
    report = EXCLUDED.report, error = EXCLUDED.error, saved_by = EXCLUDED.saved_by,
    saved_at = EXCLUDED.saved_at
"""


def tab_open(job_ids):
    from jobs.runs import save_run

    for pk in job_ids:
        save_run(pk, "client")


def sweepers(n: int):
    def mode(job_ids):
        from jobs.runs import record_jobs

        def loop():
            while record_jobs(limit=50, grace=0, sweeper_name=threading.current_thread().name):
                pass

        in_threads(n, loop)

    return mode


def closed_then_tab_back(job_ids):
    sweepers(1)(job_ids)
    tab_open(job_ids)


def dual_writer(job_ids):
    from django.db import connection

    with connection.cursor() as cur:
        for pk in job_ids:
            cur.execute(DUAL_SQL, ["worker", pk])  # the old finalize
            cur.execute(DUAL_SQL, ["client", pk])  # and the tab again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--mb", type=float, default=2.0)
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
    from django.db import connection

    import jobs.runs.saving
    from jobs.models import AnalysisRun
    from jobs.runs import judge_runs

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    job_ids = make_jobs(n_jobs, mb)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT avg(octet_length(doc_html)), avg(pg_column_size(doc_html)) FROM jobs_analysisjob"
        )
        raw, stored = cur.fetchone()
    print(
        f"{len(job_ids)} jobs, doc_html {raw / 2**20:.2f} MB each ({stored / 2**20:.2f} MB "
        f"stored after compression), made in {time.perf_counter() - started:.0f}s"
    )

    # The writers alone: the judge is measured on its own below.
    real_judge = jobs.runs.saving.judge_runs
    jobs.runs.saving.judge_runs = lambda run_ids, **kw: ({}, {})
    modes = [
        ("tab open (client save_run)", tab_open),
        ("tab closed, 1 sweeper", sweepers(1)),
        ("tab closed, 4 sweepers", sweepers(4)),
        ("closed, then tab back (claim)", closed_then_tab_back),
        ("dual writer (old design)", dual_writer),
    ]
    rows = []
    for name, mode in modes:
        reset(job_ids)
        before = settled_counters()
        t0 = time.perf_counter()
        mode(job_ids)
        seconds = time.perf_counter() - t0
        after = settled_counters()
        assert AnalysisRun.objects.count() == len(job_ids), name
        rows.append((name, before, after, seconds))
    jobs.runs.saving.judge_runs = real_judge

    # The judge's add-on, identical in every mode: one store per run.
    before = settled_counters()
    t0 = time.perf_counter()
    run_ids = list(AnalysisRun.objects.values_list("pk", flat=True))
    for i in range(0, len(run_ids), 50):
        judge_runs(run_ids[i : i + 50])
    rows.append(("judge (add-on, any mode)", before, settled_counters(), time.perf_counter() - t0))

    n = len(job_ids)
    dual_wal = next((a["lsn"] - b["lsn"]) / n for name, b, a, _ in rows if name.startswith("dual"))
    print()
    print(
        "| mode | run tuple writes / run | of which updates | TOAST chunks / run | WAL / run | WAL vs dual | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, b, a, seconds in rows:
        writes = (a["ins"] - b["ins"] + a["upd"] - b["upd"]) / n
        updates = (a["upd"] - b["upd"]) / n
        chunks = (a["toast_ins"] - b["toast_ins"]) / n
        wal = (a["lsn"] - b["lsn"]) / n
        print(
            f"| {name} | {writes:.2f} | {updates:.2f} | {chunks:.1f} | {wal / 1024:,.1f} KiB "
            f"| {wal / dual_wal:.2f}x | {seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
