"""The Procrastinate peer: its app (psycopg connector), no-op task and enqueuer.

The worker is Procrastinate's own CLI (``python -m procrastinate --app
bench.peers.proc_app.app worker --one-shot``); ``python -m bench.peers.proc_app N`` defers
``N`` no-op jobs with one batch insert. The database is ``BENCH_PROC_DB``.

:func:`one_by_one` is the start-rate peer of ``bench/start_peers.py``: the sync API's
``noop.defer()`` one job at a time, each its own transaction (the pooled connection commits
as each call returns), as a web request would. Before each call the pool checks its
connection with an empty query, which ``pg_stat_database`` counts as a second transaction.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import procrastinate

from bench.peers.common import dsn

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=dsn(os.environ.get("BENCH_PROC_DB", "acurio_bench_proc"))
    )
)


@app.task(name="noop")
def noop() -> None:
    """Do nothing: the benchmark measures the queue, not the work."""


async def _enqueue(count: int) -> None:
    async with app.open_async():
        await noop.batch_defer_async(*({} for _ in range(count)))


def one_by_one(count: int) -> dict[str, Any]:
    """``noop.defer()`` ``count`` times, one job per call, with the sync API.

    The app must be open (``with app.open(): one_by_one(n)``): the connection pool is
    filled before the clock starts, as the engine's ``case_start`` has connected by then, and
    the caller can read what it needs from the server before the pool closes.
    """
    began = time.perf_counter()
    for _ in range(count):
        noop.defer()
    elapsed = time.perf_counter() - began
    return {"count": count, "seconds": elapsed, "per_s": count / elapsed}


def main() -> None:
    asyncio.run(_enqueue(int(sys.argv[1])))


if __name__ == "__main__":
    main()
