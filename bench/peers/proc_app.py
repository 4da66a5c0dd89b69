"""The Procrastinate peer: its app (psycopg connector), no-op task and enqueuer.

The worker is Procrastinate's own CLI (``python -m procrastinate --app
bench.peers.proc_app.app worker --one-shot``); ``python -m bench.peers.proc_app N`` defers
``N`` no-op jobs with one batch insert. The database is ``BENCH_PROC_DB``.
"""

from __future__ import annotations

import asyncio
import os
import sys

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


def main() -> None:
    asyncio.run(_enqueue(int(sys.argv[1])))


if __name__ == "__main__":
    main()
