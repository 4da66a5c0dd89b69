"""A/B of the durable worker's fast paths on no-op 3-step workflows (benchmark aid only).

Three variants drain the same queue in this process, one after the other, repeated:

- ``unprepared``  the stock worker on a connection with prepared statements off (Django's
                  default, ``DATABASE_PREPARED_STATEMENTS=0``): PostgreSQL parses and plans
                  every claim and checkpoint afresh;
- ``chain-off``   ``Worker(chain=False)``: every step is claimed from the queue in its own
                  autocommit statement, then checkpointed in a second transaction;
- ``stock``       ``Worker()``: a sequence step's checkpoint inserts the next step already
                  claimed (one statement), and a checkpoint that chains nothing claims the
                  next ready step in its own transaction: one commit per step.

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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.common import dsn, url  # noqa: E402

DEFAULT_DB = "acurio_bench_engprof"


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
    os.environ.setdefault(
        "SECRET_KEY", "bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum"
    )
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
    variants: list[tuple[str, Any, bool]] = [
        ("unprepared", lambda: Worker(once=True), False),
        ("chain-off", lambda: Worker(once=True, chain=False), True),
        ("stock", lambda: Worker(once=True), True),
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
        for name, make, prepared in variants if repeat % 2 == 0 else variants[::-1]:
            engine.clear_graph_cache()
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
            connection.ensure_connection()
            if not prepared:
                connection.connection.prepare_threshold = None
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
