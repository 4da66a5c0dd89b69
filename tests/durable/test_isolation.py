"""Isolated steps (task(..., isolate=True)): computed in a child process under a memory and a
time budget; past either the step fails permanently with a clear message and the worker
takes the next step; a cancel stops a running isolated step within 2 seconds."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import pytest

from jobs.durable import DefinitionError, cancel, result, start, status, task
from jobs.durable.isolation import BudgetExceeded, Stopped, run_isolated
from jobs.durable.models import Instance, Step
from tests.durable.support import spawn_worker, wait_for

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def hog(mb: int) -> int:
    block = bytearray(mb * 1024 * 1024)
    return len(block)


def raise_value_error() -> None:
    raise ValueError("bad chunk 7")


def test_run_isolated_returns_the_result_and_enforces_both_budgets():
    assert run_isolated(pow, 7, 2, memory_mb=64, timeout=10) == 49
    with pytest.raises(BudgetExceeded, match="more memory than its budget of 32 MB"):
        run_isolated(hog, 512, memory_mb=32, timeout=10, what="hog")
    started = time.monotonic()
    with pytest.raises(BudgetExceeded, match=r"time budget of 0\.5 s"):
        run_isolated(time.sleep, 30, memory_mb=32, timeout=0.5)
    assert time.monotonic() - started < 2
    with pytest.raises(ValueError, match="bad chunk 7") as info:
        run_isolated(raise_value_error, memory_mb=32, timeout=10)
    assert "in the isolated child process" in "".join(info.value.__notes__)
    calls = []

    def stop_now() -> bool:
        calls.append(1)
        return True

    with pytest.raises(Stopped):
        run_isolated(time.sleep, 30, memory_mb=32, timeout=30, should_stop=stop_now)
    assert calls


def _heap_report() -> tuple[int, int]:
    """In the child: how many objects are frozen, and what a full collection finds of a
    cycle the child made itself."""
    frozen = gc.get_freeze_count()
    cycle: list = []
    cycle.append(cycle)
    del cycle
    return frozen, gc.collect()


def test_the_child_keeps_the_collector_off_the_parents_heap():
    """The child freezes what it inherited (its collections skip the parent's heap, whose pages
    they would copy), collects its own garbage as usual, and the parent stays unfrozen."""
    before = gc.get_freeze_count()
    frozen, collected = run_isolated(_heap_report, memory_mb=64, timeout=10)
    assert frozen > len(gc.get_objects()) // 2  # the inherited heap, not a few constants
    assert collected >= 1  # the child's own cycle
    assert gc.get_freeze_count() == before


def test_isolate_options_are_checked():
    with pytest.raises(DefinitionError, match="add isolate=True"):
        t("compute_square", memory_mb=100)
    with pytest.raises(DefinitionError, match="isolate must be True or False"):
        t("compute_square", isolate="yes")
    with pytest.raises(DefinitionError, match="positive whole number of megabytes"):
        t("compute_square", isolate=True, memory_mb=0)
    with pytest.raises(DefinitionError, match="unknown step option"):
        task("jobs.durable.sql", memory="x")


@pytest.mark.django_db
@pytest.mark.usefixtures("rows_table")
def test_a_step_over_its_memory_budget_fails_permanently_and_the_worker_goes_on(worker):
    hog_id = start(t("hog_memory", isolate=True, memory_mb=64), input={"mb": 512})
    assert worker.drain() == 1
    instance = Instance.objects.get(pk=hog_id)
    assert instance.status == "failed"
    assert "needed more memory than its budget of 64 MB" in instance.error
    assert Step.objects.get(instance_id=hog_id, kind="task").attempts == 1, "no retry"
    fine = start(t("compute_square", isolate=True), input={"n": 12})
    plain = start(t("number"), input={"n": 3})
    worker.drain()
    assert (result(fine), result(plain)) == (144, 3)


@pytest.mark.django_db
@pytest.mark.usefixtures("rows_table")
def test_a_step_over_its_time_budget_fails_permanently(worker):
    iid = start(t("spin", isolate=True, timeout=0.5), input={"seconds": 30})
    started = time.monotonic()
    worker.drain()
    assert time.monotonic() - started < 5
    assert status(iid) == "failed"
    assert "took longer than its time budget of 0.5 s" in Instance.objects.get(pk=iid).error


def _children(pid: int) -> list[int]:
    found = []
    for task_dir in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task_dir / "children").read_text().split()]
    return found


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("rows_table")
def test_cancel_stops_a_running_isolated_step_within_two_seconds():
    proc = spawn_worker("--poll-interval", "0.2")
    try:
        iid = start(t("spin", isolate=True), input={"seconds": 120})
        wait_for(lambda: _children(proc.pid), timeout=60, what="the isolated child")
        (child,) = _children(proc.pid)
        cancelled_at = time.monotonic()
        assert cancel(iid)
        wait_for(lambda: not os.path.exists(f"/proc/{child}"), timeout=10, what="the kill")
        took = time.monotonic() - cancelled_at
        # The worker lives on and takes the next step.
        nxt = start(t("number"), input={"n": 5})
        wait_for(lambda: status(nxt) == "completed", timeout=30, what="the next step")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert took <= 2, f"the isolated step ran on {took:.1f}s after the cancel"
    assert status(iid) == "cancelled"
    assert proc.returncode == 0, out
