"""The engine's start and priority cases (``bench/engine_bench.py --start-cases``).

``python -m bench.peers.engine_starts '{"starts": 3000, ...}'`` (with the engine peer's
environment: ``DJANGO_SETTINGS_MODULE=acurio.settings``, ``DATABASE_URL`` at the bench
database) runs, each on emptied tables, and prints one ``RESULT {json}`` line:

- ``start``:      ``start()`` one by one, each in its own transaction (as a web request
                  would), of a 1-step workflow: workflows per second. The same workflow
                  object every time, as a module-level workflow a view starts would be: its
                  compiled spec and first activation are cached after the first start
                  (:mod:`jobs.durable.launch`);
- ``start_many``: ``start_many()`` of the same workflow, all inputs in one call;

  both run ``rounds`` times (default 3), each on emptied tables: the median run is reported,
  with every run's rate;
- ``latency``:    with one idle worker process (``manage.py worker``) waiting on NOTIFY,
                  ``start()`` of a 1-step workflow, then the time until that step was
                  claimed (the step's ``started_at`` minus the instance's ``created_at``,
                  both from this machine's clock), one start at a time;
- ``priority``:   two worker processes busy with a 400-chunk fan-out (each chunk a 10 ms
                  task, priority 0); once chunks are running, ``start(priority=9)`` of a
                  1-step workflow: the time until it completed, and how many chunks were
                  still waiting then.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

NOOP = "bench.peers.engine_tasks.noop"
CHUNK = "bench.peers.engine_starts.chunk"
ITEMS = "bench.peers.engine_starts.items"


def chunk(ctx: Any) -> int:
    """A fan-out chunk that does 10 ms of work (a stand-in for a reference lookup)."""
    time.sleep(0.01)
    return len(ctx.chunk)


def items(ctx: Any) -> list[int]:
    return list(range(ctx.input["chunks"]))


def _reset() -> None:
    from django.db import connection

    from jobs.durable.engine import clear_graph_cache

    # TRUNCATE alone: it leaves the tables' size unknown to the planner, as on a table that
    # has rows. ANALYZE of the emptied tables would record them as empty, and the plan of the
    # foreign-key check each start's step row makes at commit (cached by the session) would
    # then be a sequential scan of durable_instance, which grows with every start: the case
    # measured that scan (one run fell from 893 to 512 starts/s over 3,000 starts).
    # Then CHECKPOINT, as the throughput cases do before they start the clock: the dirty pages
    # and WAL of what ran before (the throughput cases, in engine_bench.py) are written out
    # now, not by the checkpointer while the starts wait on their own commits' fsyncs.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE durable_instance, durable_step, durable_signal CASCADE")
        cursor.execute("CHECKPOINT")
    clear_graph_cache()


def _worker(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", *args],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=60)


def _wait_idle(count: int, timeout: float = 60) -> None:
    """Until ``count`` worker connections sit idle after an empty claim (waiting on NOTIFY)."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state = 'idle' AND pid <> pg_backend_pid() AND query LIKE %s",
                # The worker's last statement before it waits: the claim that found nothing,
                # or the look-up of the next step due later.
                ["%durable_step%"],
            )
            if cursor.fetchone()[0] >= count:
                return
        time.sleep(0.1)
    raise RuntimeError("the workers did not come up")


def case_start(n: int) -> dict[str, Any]:
    from jobs.durable import start, task

    _reset()
    flow = task(NOOP)
    began = time.perf_counter()
    for i in range(n):
        start(flow, label="bench", input={"n": i})
    elapsed = time.perf_counter() - began
    return {"count": n, "seconds": elapsed, "per_s": n / elapsed}


def case_start_many(n: int) -> dict[str, Any]:
    from jobs.durable import start_many, task

    _reset()
    flow = task(NOOP)
    inputs = [{"n": i} for i in range(n)]
    began = time.perf_counter()
    handles = start_many(flow, inputs, label="bench")
    elapsed = time.perf_counter() - began
    assert len(handles) == n
    return {"count": n, "seconds": elapsed, "per_s": n / elapsed}


def case_latency(samples: int) -> dict[str, Any]:
    from jobs.durable import start, task
    from jobs.durable.models import Instance, Step

    _reset()
    proc = _worker("--poll-interval", "5")
    try:
        _wait_idle(1)
        flow = task(NOOP)
        latencies = []
        for i in range(samples):
            handle = start(flow, label="latency", input={"n": i})
            deadline = time.monotonic() + 10
            while True:
                row = (
                    Step.objects.filter(instance_id=handle, kind="task")
                    .values_list("started_at", flat=True)
                    .first()
                )
                if row is not None:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("a started step was never claimed")
                time.sleep(0.001)
            created = Instance.objects.values_list("created_at", flat=True).get(pk=handle)
            latencies.append((row - created).total_seconds() * 1000)
            time.sleep(0.02)  # the worker goes back to waiting on NOTIFY
    finally:
        _stop([proc])
    latencies.sort()
    return {
        "samples": samples,
        "median_ms": statistics.median(latencies),
        "p90_ms": latencies[int(0.9 * (len(latencies) - 1))],
        "max_ms": latencies[-1],
    }


def case_priority(chunks: int, workers: int = 2) -> dict[str, Any]:
    from jobs.durable import fan_out, start, task
    from jobs.durable.models import Instance, Step

    _reset()
    busy = start(
        task(ITEMS).as_("xs") >> fan_out(task(CHUNK), over="xs", chunk=1),
        label="fan-out",
        input={"chunks": chunks},
    )
    procs = [_worker("--poll-interval", "0.5") for _ in range(workers)]
    try:
        deadline = time.monotonic() + 60
        while Step.objects.filter(instance_id=busy, chunk_index__isnull=False).filter(
            status="completed"
        ).count() < min(20, chunks // 10):
            if time.monotonic() > deadline:
                raise RuntimeError("the fan-out did not get going")
            time.sleep(0.01)
        urgent = start(task(NOOP), label="urgent", priority=9, input={})
        deadline = time.monotonic() + 120
        while Instance.objects.filter(pk=urgent, status="completed").count() == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the urgent workflow did not finish")
            time.sleep(0.002)
        waiting = Step.objects.filter(instance_id=busy, status="ready").count()
        created, finished = Instance.objects.values_list("created_at", "finished_at").get(pk=urgent)
        while Instance.objects.filter(pk=busy, status="completed").count() == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the fan-out did not finish")
            time.sleep(0.05)
        busy_created, busy_finished = Instance.objects.values_list("created_at", "finished_at").get(
            pk=busy
        )
    finally:
        _stop(procs)
    return {
        "chunks": chunks,
        "workers": workers,
        "urgent_s": (finished - created).total_seconds(),
        "chunks_still_waiting": waiting,
        "fan_out_s": (busy_finished - busy_created).total_seconds(),
    }


def _median_of(rounds: int, case: Any, n: int) -> dict[str, Any]:
    """``case(n)`` run ``rounds`` times: the run of the median rate, with every run's rate
    (``rounds_per_s``). One 2-second sample of a one-client commit loop swings by a third
    from one minute to the next on this machine."""
    runs = sorted((case(n) for _ in range(max(1, rounds))), key=lambda r: r["per_s"])
    return {**runs[len(runs) // 2], "rounds_per_s": [r["per_s"] for r in runs]}


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    django.setup()
    config = json.loads(sys.argv[1])
    rounds = config.get("rounds", 3)
    result = {
        "start": _median_of(rounds, case_start, config.get("starts", 3000)),
        "start_many": _median_of(rounds, case_start_many, config.get("start_many", 20000)),
        "latency": case_latency(config.get("latency_samples", 200)),
        "priority": case_priority(config.get("priority_chunks", 400)),
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
