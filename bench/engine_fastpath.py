"""A measured sketch of three worker fast paths for the durable engine (benchmark aid only).

Nothing here is used by the application: ``jobs/durable/`` belongs to the engine's engineer.
This module shows, with numbers, what three changes to the worker's hot path would buy, so
that they can be judged before anyone ports them:

1. **One-statement claim** — the claim also marks a pending instance running and returns the
   instance's stored graph, input and hook (the stock worker sends a second autocommit
   UPDATE for a first step, and a ``SELECT graph`` for every step once more instances are in
   flight than its 512-entry graph cache holds, which is every step when 10,000 workflows
   are queued, since the queue is served breadth first).
2. **Checkpoint returns the parent** — the fenced checkpoint UPDATE and the read of the
   parent step are one statement (a CTE), not two.
3. **Continuation** — when a checkpoint activates the next ``task`` leaf of the same
   instance, that step is inserted already claimed by this worker (``running``, attempt 1,
   its lease set), and the worker runs it next: no claim statement, no commit of a claim,
   no ``NOTIFY``. The fencing is unchanged (attempt 1 is the claim token; a lost lease is
   recovered by the sweeper as for any running step), and a worker told to stop releases
   the step it had queued for itself.

``python bench/engine_fastpath.py`` drains the same no-op 3-step workflows with the stock
``Worker`` and with :class:`FastWorker` in this process, interleaved, counting statements
(client side) and transactions (``pg_stat_database``), and checks that every workflow
completed with every task step run exactly once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peers.common import dsn, url  # noqa: E402

DEFAULT_DB = "acurio_bench_engprof"


def build_fast_worker() -> type:
    """Define the sketch against the engine importable now (after ``django.setup()``)."""
    from django.conf import settings
    from django.db import connection

    from jobs.durable import engine as engine_module
    from jobs.durable import worker as worker_module
    from jobs.durable.engine import STEP_COLUMNS, Fenced, Graph, StepRow, Txn, _decode
    from jobs.durable.kinds import get_kind
    from jobs.durable.worker import Worker

    step_cols = [c.strip() for c in STEP_COLUMNS.split(",")]
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
        RETURNING {", ".join("s." + c for c in step_cols)}
    ), started AS (
        UPDATE durable_instance AS i SET status = 'running', started_at = %(now)s
        FROM claimed WHERE i.id = claimed.instance_id AND i.status = 'pending'
        RETURNING i.id
    )
    SELECT {", ".join("c." + c for c in step_cols)}, i.status, i.graph, i.input, i.on_failure
    FROM claimed AS c JOIN durable_instance AS i ON i.id = c.instance_id
    """
    checkpoint_sql = f"""
    WITH done AS (
        UPDATE durable_step SET status = 'completed', output = %s::jsonb, finished_at = %s,
            lease_owner = '', lease_expires_at = NULL, error = ''
        WHERE id = %s AND status = 'running' AND attempts = %s
        RETURNING parent_id
    )
    SELECT done.parent_id, {", ".join("p." + c for c in step_cols)}
    FROM done LEFT JOIN durable_step AS p ON p.id = done.parent_id
    """

    class ContinuingTxn(Txn):
        """Txn whose first ready ``task`` leaf is inserted claimed by ``worker``."""

        def __init__(self, graph: Graph, now: Any = None, *, worker: FastWorker) -> None:
            super().__init__(graph, now)
            self.worker = worker
            self.continuation: StepRow | None = None
            worker._last_txn = self

        def insert_step(self, node, parent, *, status, run_at=None, remaining=0, **kw):
            if not (
                self.continuation is None
                and status == "ready"
                and node["kind"] == "task"
                and kw.get("chunk_index") is None
                and run_at is not None
                and run_at <= self.now
            ):
                return super().insert_step(
                    node, parent, status=status, run_at=run_at, remaining=remaining, **kw
                )
            key = self.child_key(node, parent, None)
            max_attempts = int(
                node.get("opts", {}).get("max_attempts", settings.ACURIO_MAX_ATTEMPTS)
            )
            expires = self.now + timedelta(seconds=self.worker.lease_seconds)
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO durable_step (instance_id, parent_id, key, node_id, kind, name,"
                    " status, attempts, max_attempts, run_at, lease_owner, lease_expires_at,"
                    " remaining, error, created_at, started_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, 'running', 1, %s, %s, %s, %s, 0, '', %s, %s)"
                    " RETURNING id",
                    [
                        self.graph.instance_id,
                        parent.id if parent else None,
                        key,
                        node["id"],
                        node["kind"],
                        node.get("name", ""),
                        max_attempts,
                        run_at,
                        self.worker.worker_id,
                        expires,
                        self.now,
                        self.now,
                    ],
                )
                step_id = cursor.fetchone()[0]
            self.continuation = StepRow(
                step_id,
                self.graph.instance_id,
                parent.id if parent else None,
                key,
                node["id"],
                node["kind"],
                node.get("name", ""),
                "running",
                1,
                max_attempts,
                None,
                None,
            )
            return self.continuation

        def checkpoint(self, step: StepRow, output: Any) -> None:
            from jobs.durable.context import to_json
            from jobs.durable.errors import Break

            if isinstance(output, Break):
                return super().checkpoint(step, output)
            with connection.cursor() as cursor:
                cursor.execute(checkpoint_sql, [to_json(output), self.now, step.id, step.attempts])
                row = cursor.fetchone()
            if row is None:
                raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
            if row[0] is None:
                return self.advance(step, output)  # the root: finishes the instance
            parent = StepRow.from_row(row[1:])
            if parent.status != "running":
                return None
            node = self.graph.nodes[parent.node_id]
            get_kind(node["kind"]).child_done(self, node, parent, step, output)
            return None

    class FastWorker(Worker):
        """The stock worker with the three fast paths of the module docstring."""

        _last_txn: ContinuingTxn | None = None

        def claim(self, limit: int = 1, now: Any = None) -> list[StepRow]:
            now = now or self.clock()
            with connection.cursor() as cursor:
                cursor.execute(
                    claim_sql,
                    {
                        "now": now,
                        "limit": limit,
                        "owner": self.worker_id,
                        "expires": now + timedelta(seconds=self.lease_seconds),
                    },
                )
                rows = cursor.fetchall()
            steps = []
            n = len(step_cols)
            for row in rows:
                step = StepRow.from_row(row[:n])
                instance_status, graph, input_, on_failure = row[n:]
                if instance_status not in ("pending", "running"):
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "UPDATE durable_step SET status = 'cancelled', finished_at = %s,"
                            " lease_owner = '', lease_expires_at = NULL WHERE id = %s",
                            [now, step.id],
                        )
                    continue
                if step.instance_id not in engine_module._graphs:
                    engine_module._graphs[step.instance_id] = Graph.build(
                        step.instance_id, _decode(graph), _decode(input_), on_failure
                    )
                steps.append(step)
            return steps

        def execute(self, step: StepRow) -> str:
            self._last_txn = None
            with _swap(
                worker_module, "Txn", lambda g, now=None: ContinuingTxn(g, now, worker=self)
            ):
                outcome = super().execute(step)
            txn, self._last_txn = self._last_txn, None
            self._next = txn.continuation if outcome == "completed" and txn else None
            return outcome

        def run_one(self) -> bool:
            steps = self.claim(1)
            for step in steps:
                self.execute(step)
                while self._next is not None:
                    step, self._next = self._next, None
                    if self.shutdown:
                        self.release(step)
                        break
                    self.execute(step)
            return bool(steps)

    return FastWorker


@contextmanager
def _swap(module: Any, name: str, value: Callable[..., Any]) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
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
    import django

    django.setup()
    import psycopg
    from django.db import connection, transaction

    from bench.engine_profile import StatementLog
    from bench.peers.engine_tasks import NOOP
    from jobs.durable import engine as engine_module
    from jobs.durable import start, task
    from jobs.durable.worker import Worker

    fast_worker = build_fast_worker()
    workflow = task(NOOP) >> task(NOOP) >> task(NOOP)

    def xacts() -> int:
        with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                (args.db,),
            ).fetchone()
        return int(row[0]) if row else 0

    print(f"{'variant':8} {'steps/s':>8} {'stmts/step':>10} {'xacts/step':>10} {'cpu ms/step':>11}")
    for _ in range(args.repeats):
        for name, cls in (("stock", Worker), ("fastpath", fast_worker)):
            connection.close()
            engine_module._graphs.clear()
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
            log = StatementLog()
            worker = cls(once=True)
            cpu = time.process_time()
            began = time.perf_counter()
            with connection.execute_wrapper(log):
                worker.drain()
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
            print(
                f"{name:8} {steps / elapsed:8,.0f} {sum(log.count.values()) / steps:10.2f} "
                f"{(xacts() - before) / steps:10.2f} {1000 * cpu / steps:11.2f}"
                + ("" if ok else f"  CHECK FAILED: {unfinished} unfinished, {once}/{total}"),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
