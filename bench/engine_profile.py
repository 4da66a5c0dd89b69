"""Where a durable-engine worker spends its time per step (the benchmark's profiling aid).

Starts ``--workflows`` no-op 3-step workflows in the engine's bench database, then drains
them in this process with one ``Worker`` (the same claim -> execute -> checkpoint path as
``manage.py worker --once``, without the heartbeat thread) while counting every SQL statement
it sends (a Django ``execute_wrapper``: count and client-side time per statement shape) and
profiling Python with cProfile. Finally ``EXPLAIN (ANALYZE, BUFFERS)`` of the claim query with
a full ready queue. Prints a plain-text report.

Usage (from the repository root; the database must exist and be migrated, which
``bench/engine_bench.py`` does)::

    .venv/bin/python bench/engine_profile.py [--workflows 2000] [--db acurio_bench_engine]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.common import url  # noqa: E402

_WS = re.compile(r"\s+")


class StatementLog:
    """A Django execute_wrapper: count and time every statement by its first words."""

    def __init__(self) -> None:
        self.count: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        shape = _WS.sub(" ", str(sql)).strip()[:90]
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.count[shape] += 1
            self.seconds[shape] += time.perf_counter() - started

    def report(self, steps: int) -> str:
        lines = [f"{'per step':>8} {'ms/step':>8}  statement"]
        for shape in sorted(self.seconds, key=self.seconds.__getitem__, reverse=True):
            lines.append(
                f"{self.count[shape] / steps:8.2f} {1000 * self.seconds[shape] / steps:8.3f}  {shape}"
            )
        total = sum(self.count.values())
        lines.append(
            f"{total / steps:8.2f} {1000 * sum(self.seconds.values()) / steps:8.3f}  "
            "(all statements, client-side time incl. round trip; commits are not statements)"
        )
        return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--db", default="acurio_bench_engine")
    parser.add_argument("--top", type=int, default=30, help="cProfile rows to print")
    args = parser.parse_args()
    if not args.db.startswith("acurio_bench_"):
        parser.error("only an acurio_bench_* database may be used")

    os.environ["DATABASE_URL"] = url(args.db)
    os.environ.setdefault(
        "SECRET_KEY", "bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum"
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.db import connection, transaction

    from bench.peers.engine_tasks import NOOP
    from jobs.durable import start, task
    from jobs.durable.worker import Worker

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE durable_instance, durable_step CASCADE")
    workflow = task(NOOP) >> task(NOOP) >> task(NOOP)
    started = time.perf_counter()
    with transaction.atomic():
        for i in range(args.workflows):
            start(workflow, label="bench", input={"n": i})
    print(f"enqueued {args.workflows} workflows in {time.perf_counter() - started:.1f}s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE durable_step")
        cursor.execute("VACUUM ANALYZE durable_instance")

    print("\n== EXPLAIN (ANALYZE, BUFFERS) of the claim's SELECT, queue full ==")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS) SELECT id FROM durable_step"
            " WHERE status = 'ready' AND run_at <= now() ORDER BY run_at LIMIT 1"
            " FOR UPDATE SKIP LOCKED"
        )
        print("\n".join(row[0] for row in cursor.fetchall()))
        transaction.set_rollback(True)

    log = StatementLog()
    worker = Worker(once=True)
    profiler = cProfile.Profile()
    # The engine sends its hot statements as prepared statements straight through psycopg
    # (jobs.durable.engine.execute_prepared), past Django's execute wrappers: count those too.
    from jobs.durable import engine
    from jobs.durable import worker as worker_module

    stock_prepared = getattr(engine, "execute_prepared", None)
    if stock_prepared is not None:

        def counted_prepared(sql: str, params: Any) -> Any:
            return log(lambda s, p, m, c: stock_prepared(s, p), sql, params, False, None)

        engine.execute_prepared = worker_module.execute_prepared = counted_prepared
    cpu_started = time.process_time()
    started = time.perf_counter()
    try:
        with connection.execute_wrapper(log):
            profiler.enable()
            steps = worker.drain()
            profiler.disable()
    finally:
        if stock_prepared is not None:
            engine.execute_prepared = worker_module.execute_prepared = stock_prepared
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    print(
        f"\n== drained {steps} steps in {elapsed:.2f}s: {steps / elapsed:,.0f} steps/s "
        f"under the profiler; {1000 * cpu / steps:.2f} ms CPU/step in this process =="
    )
    print("\n== SQL statements per step (client side) ==")
    print(log.report(max(steps, 1)))
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(order).print_stats(args.top)
        print(f"\n== cProfile, by {order} ==")
        print(out.getvalue().split("\n", 6)[-1] if order else out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
