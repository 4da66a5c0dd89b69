"""Benchmark of durable waits and signals: what a waiting instance costs.

Figures, on its own database ``acurio_bench_waits`` (dropped and re-created each run):

1. start cost: ``N`` instances that wait (half ``sleep(3600) >> noop``, half
   ``wait_for_signal("go") >> noop``), started in one transaction — ms per instance;
2. what they hold while waiting: server connections to the database (``pg_stat_activity``)
   with no worker running — waiting is rows, not processes or connections;
3. the worker's claim with ``N`` waits in the table and none due: mean ms per claim (the
   partial index on ready steps' ``run_at`` stops at the first row not due);
4. ``signal()`` cost: mean ms per call (lock the instance, find the wait, insert, NOTIFY);
5. signal-to-done latency with one ``manage.py worker`` running (poll interval 1 s, so a
   latency well under 1 s shows that the NOTIFY woke it): median and p95 over ``--signals``
   signals, each measured from ``signal()`` returning to the instance reading ``completed``
   (polled every 2 ms).

Usage::

    .venv/bin/python bench/durable_waits.py [--waiting 10000] [--signals 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DB = "acurio_bench_waits"
SERVER = "postgres://postgres@127.0.0.1:5432"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--signals", type=int, default=100)
    args = parser.parse_args()

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    env = {**os.environ, "DATABASE_URL": f"{SERVER}/{DB}", "DEBUG": "1", "LOG_LEVEL": "WARNING"}
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from jobs.durable import Worker, signal, sleep, start, status, task, wait_for_signal

    call_command("migrate", verbosity=0)
    noop = task("jobs.durable.testing.noop")
    half = args.waiting // 2

    t0 = time.perf_counter()
    with transaction.atomic():
        for _ in range(half):
            start(sleep(3600) >> noop)
        signalled = [start(wait_for_signal("go") >> noop) for _ in range(args.waiting - half)]
    start_ms = (time.perf_counter() - t0) * 1000 / args.waiting
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE durable_step")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB],
        )
        other_connections = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM durable_step WHERE status = 'ready'")
        waiting_rows = cursor.fetchone()[0]

    with connection.cursor() as cursor:
        # The claim's inner SELECT, timed inside PostgreSQL (free of client and load noise).
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM durable_step WHERE status = 'ready'"
            " AND run_at <= now() ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        plan = cursor.fetchone()[0]
        plan = plan[0] if isinstance(plan, list) else plan
        claim_exec_ms = plan["Execution Time"]
        scan = plan["Plan"]
        while "Plans" in scan:
            scan = scan["Plans"][0]
        claim_plan = f"{scan['Node Type']} on {scan.get('Index Name', scan.get('Relation Name'))}"

    worker = Worker(worker_id="bench-claim")
    for _ in range(20):  # warm up
        worker.claim(1)
    rounds = 500
    t0 = time.perf_counter()
    for _ in range(rounds):
        assert worker.claim(1) == []
    claim_ms = (time.perf_counter() - t0) * 1000 / rounds

    # signal() with no worker: each wakes its wait (the step's run_at becomes now).
    sample = signalled[: args.signals]
    t0 = time.perf_counter()
    for iid in sample:
        signal(iid, "go", {"n": 1})
    signal_ms = (time.perf_counter() - t0) * 1000 / len(sample)

    proc = subprocess.Popen(
        [sys.executable, "manage.py", "worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # the signalled ones drain first; then measure one signal at a time
        deadline = time.monotonic() + 120
        while any(status(i) != "completed" for i in sample[-1:]) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # let the worker go idle (waiting on LISTEN)
        latencies = []
        for iid in signalled[args.signals : 2 * args.signals]:
            signal(iid, "go")
            t0 = time.perf_counter()
            while status(iid) != "completed":
                time.sleep(0.002)
            latencies.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)

    latencies.sort()
    print(f"load average at the end:           {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
    print(f"waiting instances:                 {args.waiting} ({waiting_rows} ready step rows)")
    print(f"start, per waiting instance:       {start_ms:.3f} ms (one transaction)")
    print(f"other connections while waiting:   {other_connections} (no worker running)")
    print(f"claim with none due, per claim:    {claim_ms:.3f} ms round trip from Python")
    print(f"  inside PostgreSQL:               {claim_exec_ms:.3f} ms ({claim_plan})")
    print(f"signal() per call:                 {signal_ms:.3f} ms")
    print(
        f"signal to completed (1 worker):    median {statistics.median(latencies):.1f} ms,"
        f" p95 {p95:.1f} ms over {len(latencies)} signals (worker poll interval 1000 ms)"
    )


if __name__ == "__main__":
    main()
