"""A/B of the durable worker's fast paths on no-op 3-step workflows (benchmark aid only).

Nothing here is used by the application: ``jobs/durable/`` belongs to the engine's engineer.
Three variants drain the same queue in this process, one after the other, repeated:

- ``chain-off``  the stock ``Worker(chain=False)``: every step is claimed from the queue;
- ``chain-on``   the stock ``Worker()``: a checkpoint that activates the next ``task`` of the
                 same instance inserts it already claimed, and the worker runs it next;
- ``one-claim``  ``chain-on`` plus a sketch of the one remaining suggestion: the claim
                 statement also marks a pending instance running and returns the instance's
                 graph, input and hook (the stock claim sends a second autocommit UPDATE for
                 a first step, and a ``SELECT graph`` whenever the instance is not in the
                 worker's 512-entry graph cache, which with a queue served oldest first is the
                 first step of every instance). A sketch: its one statement holds the
                 step's row lock while waiting for the instance's, the reverse of
                 ``cancel()``'s order, so it could deadlock against a cancel; see
                 bench/results/engine.md before porting it.

Each run counts statements (client side, a Django ``execute_wrapper``; the engine's prepared
statements go through psycopg directly and are counted by wrapping its ``execute_prepared``),
transactions (``pg_stat_database``) and CPU, and checks that every workflow completed with
every task step run exactly once (one attempt).

Usage (the database is created and migrated if needed)::

    .venv/bin/python bench/engine_fastpath.py [--workflows 1000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.common import dsn, url  # noqa: E402

DEFAULT_DB = "acurio_bench_engprof"


def one_claim_worker() -> type:
    """The stock worker with the one-statement claim (defined after ``django.setup()``)."""
    from jobs.durable import engine
    from jobs.durable.engine import STEP_COLUMNS, Graph, StepRow, _decode
    from jobs.durable.worker import Worker

    cols = [c.strip() for c in STEP_COLUMNS.split(",")]
    claim_sql = f"""
    WITH picked AS (
        SELECT id FROM durable_step
        WHERE status = 'ready' AND run_at <= %(now)s
        ORDER BY run_at LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE durable_step AS s
        SET status = 'running', attempts = s.attempts + 1, lease_owner = %(owner)s,
            lease_expires_at = %(expires)s, started_at = COALESCE(s.started_at, %(now)s)
        FROM picked WHERE s.id = picked.id
        RETURNING {", ".join("s." + c for c in cols)}
    ), started AS (
        UPDATE durable_instance AS i SET status = 'running', started_at = %(now)s
        FROM claimed WHERE i.id = claimed.instance_id AND i.status = 'pending'
        RETURNING i.id
    )
    SELECT {", ".join("c." + c for c in cols)}, i.status, i.graph, i.input, i.on_failure
    FROM claimed AS c JOIN durable_instance AS i ON i.id = c.instance_id
    """

    class OneClaimWorker(Worker):
        def claim(self, limit: int = 1, now: Any = None) -> list[StepRow]:
            now = now or self.clock()
            rows = engine.execute_prepared(  # looked up per call, so the A/B counts it
                claim_sql,
                {
                    "now": now,
                    "limit": limit,
                    "owner": self.worker_id,
                    "expires": now + timedelta(seconds=self.lease_seconds),
                },
            )
            steps = []
            for row in rows:
                step = StepRow.from_row(row[: len(cols)])
                step.status = "running"
                status, graph, input_, on_failure = row[len(cols) :]
                if status not in ("pending", "running"):
                    # The stock claim's path for a cancelled instance (rare): not sketched.
                    self.release(step)
                    continue
                if step.instance_id not in engine._graphs:
                    engine._graphs[step.instance_id] = Graph.build(
                        step.instance_id, _decode(graph), _decode(input_), on_failure
                    )
                steps.append(step)
            return steps

    return OneClaimWorker


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--db", default=DEFAULT_DB)
    args = parser.parse_args()
    if not args.db.startswith("acurio_bench_"):
        parser.error("only an acurio_bench_* database may be used")
    os.environ["DATABASE_URL"] = url(args.db)
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    import psycopg

    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (args.db,)).fetchone():
            conn.execute(f'CREATE DATABASE "{args.db}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True
    )

    import django

    django.setup()
    from django.db import connection, transaction

    from bench.engine_profile import StatementLog
    from bench.peers.engine_tasks import NOOP
    from jobs.durable import engine, start, task
    from jobs.durable import worker as worker_module
    from jobs.durable.worker import Worker

    workflow = task(NOOP) >> task(NOOP) >> task(NOOP)
    variants: list[tuple[str, Any]] = [
        ("chain-off", lambda: Worker(once=True, chain=False)),
        ("chain-on", lambda: Worker(once=True)),
        ("one-claim", lambda: one_claim_worker()(once=True)),
    ]

    def xacts() -> int:
        with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                (args.db,),
            ).fetchone()
        return int(row[0]) if row else 0

    log = StatementLog()
    stock_prepared = engine.execute_prepared

    def counted_prepared(sql: str, params: Any) -> list[tuple]:
        return log(lambda s, p, m, c: stock_prepared(s, p), sql, params, False, None)

    print(
        f"{'variant':10} {'steps/s':>8} {'stmts/step':>10} {'xacts/step':>10} "
        f"{'cpu ms/step':>11}  load",
        flush=True,
    )
    for repeat in range(args.repeats):
        for name, make in variants if repeat % 2 == 0 else variants[::-1]:
            engine._graphs.clear()
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE durable_instance, durable_step CASCADE")
            with transaction.atomic():
                for i in range(args.workflows):
                    start(workflow, label="bench", input={"n": i})
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE durable_step")
                cursor.execute("VACUUM ANALYZE durable_instance")
            connection.close()  # its statistics reach pg_stat_database as it closes
            time.sleep(0.5)
            before = xacts()
            log.count.clear()
            log.seconds.clear()
            worker = make()
            engine.execute_prepared = worker_module.execute_prepared = counted_prepared
            cpu = time.process_time()
            began = time.perf_counter()
            try:
                with connection.execute_wrapper(log):
                    while worker.drain():
                        pass
            finally:
                engine.execute_prepared = worker_module.execute_prepared = stock_prepared
            elapsed = time.perf_counter() - began
            cpu = time.process_time() - cpu
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT (SELECT count(*) FROM durable_instance WHERE status <> 'completed'),"
                    " (SELECT count(*) FROM durable_step WHERE kind = 'task'"
                    "  AND status = 'completed' AND attempts = 1),"
                    " (SELECT count(*) FROM durable_step WHERE kind = 'task')"
                )
                unfinished, once, total = cursor.fetchone()
            connection.close()
            time.sleep(0.5)
            steps = 3 * args.workflows
            ok = unfinished == 0 and once == total == steps
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            print(
                f"{name:10} {steps / elapsed:8,.0f} {sum(log.count.values()) / steps:10.2f} "
                f"{(xacts() - before) / steps:10.2f} {1000 * cpu / steps:11.2f}  {load}"
                + ("" if ok else f"  CHECK FAILED: {unfinished} unfinished, {once}/{total}"),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
