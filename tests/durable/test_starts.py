"""Starting instances: workflow ids (idempotent start, conflicts, two processes racing),
queue and priority on every step, delayed start, start_many, and the claim's priority order."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.durable import (
    DefinitionError,
    Worker,
    WorkflowIdConflict,
    get_handle,
    loop,
    result,
    start,
    start_many,
    status,
    task,
    wait_for_signal,
    when,
)
from jobs.durable.models import Instance, Step, instance_pk_for
from tests.processes import ROOT, child_env

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def test_a_second_start_with_the_same_id_and_input_returns_the_same_instance(worker):
    flow = t("number") >> t("record")
    first = start(flow, id="order-42", input={"n": 1})
    again = start(flow, id="order-42", input={"n": 1})
    assert first == again == instance_pk_for("order-42")
    assert Instance.objects.count() == 1
    assert Step.objects.filter(instance_id=first, kind="task").count() == 1
    assert Instance.objects.get().workflow_id == "order-42"
    # The workflow id reaches the instance wherever an instance id does.
    assert status("order-42") == "pending"
    assert get_handle("order-42") == first
    worker.drain()
    assert result("order-42") == Step.objects.get(instance_id=first, node_id=2).output


def test_the_same_id_with_another_input_or_workflow_is_a_conflict():
    start(t("number"), id="order-7", input={"n": 1})
    with pytest.raises(WorkflowIdConflict, match="another input"):
        start(t("number"), id="order-7", input={"n": 2})
    with pytest.raises(WorkflowIdConflict, match="another workflow"):
        start(t("record"), id="order-7", input={"n": 1})
    assert Instance.objects.count() == 1


def test_bad_ids_queues_priorities_and_delays_are_refused():
    for kwargs, message in [
        ({"id": ""}, "workflow id"),
        ({"id": "x" * 201}, "workflow id"),
        ({"queue": ""}, "queue name"),
        ({"priority": 10}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": True}, "priority"),
        ({"delay": -1}, "delay"),
        ({"delay": 1, "run_at": timezone.now()}, "not both"),
        ({"run_at": timezone.now().replace(tzinfo=None)}, "timezone-aware"),
    ]:
        with pytest.raises(DefinitionError, match=message):
            start(t("number"), input={"n": 1}, **kwargs)
    assert Instance.objects.count() == 0


def test_a_rolled_back_start_with_an_id_frees_the_id():
    with pytest.raises(RuntimeError), transaction.atomic():
        start(t("number"), id="order-9", input={"n": 1})
        raise RuntimeError("the caller's transaction fails")
    assert Instance.objects.count() == 0
    start(t("number"), id="order-9", input={"n": 2})
    assert Instance.objects.get().input == {"n": 2}


def test_queue_and_priority_are_copied_onto_every_step(worker):
    iid = start(t("number") >> (t("record") & t("record")), input={"n": 1}, queue="q1", priority=7)
    worker.drain()
    assert status(iid) == "completed"
    steps = Step.objects.filter(instance_id=iid)
    assert steps.count() == 5
    assert set(steps.values_list("queue", "priority")) == {("q1", 7)}


def test_the_claim_takes_the_highest_priority_first_then_the_oldest(worker):
    low = [start(t("record"), priority=0) for _ in range(3)]
    high = start(t("record"), priority=9)
    middle = start(t("record"), priority=5)
    order = [worker.claim()[0].instance_id for _ in range(5)]
    assert order == [high, middle, *low]


def test_a_worker_serving_some_queues_claims_nothing_else():
    mine = start(t("record"), queue="mine")
    other = start(t("record"), queue="other")
    plain = start(t("record"))
    served = Worker(worker_id="served", chain=False, queues=["mine"])
    assert [s.instance_id for s in served.claim(limit=5)] == [mine]
    everything = Worker(worker_id="all", chain=False)
    assert {s.instance_id for s in everything.claim(limit=5)} == {other, plain}


def test_a_delayed_start_waits_until_its_time(worker, clock):
    iid = start(t("number") >> t("record"), input={"n": 3}, delay=60)
    at = start(t("number"), input={"n": 4}, run_at=timezone.now() + timedelta(seconds=30))
    assert worker.drain() == 0
    clock.shift(31)
    worker.drain()
    assert (status(at), status(iid)) == ("completed", "pending")
    clock.shift(30)
    worker.drain()
    assert status(iid) == "completed"


def test_start_many_creates_every_instance_in_one_go(worker):
    handles = start_many(t("number").as_("n") >> t("plus_one"), [{"n": n} for n in range(50)])
    assert len(handles) == 50 == Instance.objects.count()
    worker.drain()
    assert [result(h) for h in handles] == [n + 1 for n in range(50)]
    assert start_many(t("number"), []) == []


def test_start_many_with_ids_skips_the_ones_already_started():
    start(t("number"), id="a", input={"n": 1})
    handles = start_many(t("number"), [{"n": 1}, {"n": 2}], ids=["a", "b"])
    assert handles == [instance_pk_for("a"), instance_pk_for("b")]
    assert Instance.objects.count() == 2
    with pytest.raises(WorkflowIdConflict):
        start_many(t("number"), [{"n": 5}], ids=["b"])
    with pytest.raises(DefinitionError, match="one id per input"):
        start_many(t("number"), [{"n": 1}], ids=["c", "d"])
    with pytest.raises(DefinitionError, match="twice"):
        start_many(t("number"), [{"n": 1}, {"n": 1}], ids=["c", "c"])


def test_start_many_plans_composites_waits_and_falls_back_for_what_completes_at_once(worker):
    # A when() without otherwise whose condition is false completes while it is activated:
    # that instance is started the ordinary way; the others in the one statement.
    flow = when(S + "input_flag", t("yes")) >> t("after")
    handles = start_many(flow, [{"flag": True}, {"flag": False}])
    waits = start_many(wait_for_signal("go", timeout=60) >> t("after"), [None, None])
    looped = start_many(loop(t("count_up").as_("n"), while_=S + "below_three"), [None])
    assert Step.objects.filter(instance_id__in=waits, kind="wait_for_signal").count() == 2
    worker.drain()
    assert [status(h) for h in handles] == ["completed", "completed"]
    assert Instance.objects.get(pk=looped[0]).status == "completed"


def test_two_processes_racing_the_same_id_make_one_instance(transactional_db):
    """Each process starts inside its own transaction and holds it open for a moment, so the
    second insert meets the first's uncommitted row: it waits for the commit, then finds it."""
    code = (
        "import time, sys\n"
        "from django.db import transaction\n"
        "from jobs.durable import start, task\n"
        f"go = {time.time() + 2.0}\n"
        "time.sleep(max(0, go - time.time()))\n"
        "with transaction.atomic():\n"
        f"    h = start(task('{S}number'), id='race-1', input={{'n': 1}})\n"
        "    time.sleep(0.5)\n"
        'print("handle", h)\n'
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    handles = {
        line for out, _ in outputs for line in out.splitlines() if line.startswith("handle ")
    }
    assert handles == {f"handle {instance_pk_for('race-1')}"}
    assert Instance.objects.count() == 1
    assert Step.objects.count() == 1
