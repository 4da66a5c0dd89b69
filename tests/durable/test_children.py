"""Child workflows: call() binds a child instance's result; fan_out runs a whole sub-workflow
per chunk; one child per step however often the step runs; a failed child fails the step."""

from __future__ import annotations

import pytest

from jobs.durable import (
    DefinitionError,
    call,
    fan_out,
    purge,
    result,
    start,
    status,
    task,
)
from jobs.durable.models import Instance

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."
L = "tests.durable.lifecycle_steps."


def drain_until_done(worker, handle, rounds: int = 200) -> None:
    """Run steps (the call step polls its child with short pauses) until the instance ends."""
    import time

    for _ in range(rounds):
        worker.drain()
        if status(handle) not in ("pending", "running"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{handle} did not finish")


def test_call_runs_a_child_instance_and_binds_its_result(worker):
    child = task(S + "number").as_("n") >> task(S + "plus_one")
    parent = task(S + "number").as_("start") >> call(child, input_from="input").as_("got")
    handle = start(parent, input={"n": 41}, label="parent")
    drain_until_done(worker, handle)
    assert result(handle) == 42
    kid = Instance.objects.get(parent_instance=handle)
    assert (kid.status, kid.result, kid.label, kid.input) == (
        "completed",
        42,
        "parent (child)",
        {"n": 41},
    )


def test_fan_out_of_a_whole_sub_workflow_starts_one_child_per_chunk(worker):
    per_chunk = task(L + "sum_input").as_("s") >> task(L + "s_plus_one")
    flow = task(S + "input_items").as_("xs") >> fan_out(per_chunk, over="xs", chunk=2)
    handle = start(flow, input={"items": [1, 2, 3, 4, 5]})
    drain_until_done(worker, handle)
    assert Instance.objects.filter(parent_instance=handle).count() == 3
    # Each child's own named result "s", its chunk as its input; joined in chunk order.
    assert result(handle) == [1 + 2 + 1, 3 + 4 + 1, 5 + 1]


def test_a_failed_child_fails_the_calling_step(worker):
    handle = start(call(task(S + "permanent")))
    drain_until_done(worker, handle)
    assert status(handle) == "failed"
    assert "child workflow" in Instance.objects.get(pk=handle).error


def test_a_child_is_started_once_even_if_its_step_runs_again(worker):
    handle = start(call(task(S + "number"), input_from="input"), input={"n": 3})
    (step,) = worker.claim()
    assert worker.execute(step) == "waiting"
    (again,) = worker.claim()
    worker.execute(again)  # the same step again (its child unfinished): no second child
    assert Instance.objects.filter(parent_instance=handle).count() == 1
    drain_until_done(worker, handle)
    assert result(handle) == 3


def test_purging_a_parent_purges_its_children(worker):
    from datetime import timedelta

    handle = start(call(task(S + "number"), input_from="input"), input={"n": 1})
    drain_until_done(worker, handle)
    assert purge(older_than=timedelta(0)) >= 1
    assert not Instance.objects.exists()


def test_call_checks_what_it_is_given():
    with pytest.raises(DefinitionError, match="not a workflow"):
        call("tests.durable.steps.number")
    with pytest.raises(DefinitionError, match="input_from"):
        call(task(S + "number"), input_from="not a name")
