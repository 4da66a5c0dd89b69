"""Child workflows: call() binds a child instance's result; fan_out runs a whole sub-workflow
per chunk; one child per step however often the step runs; a failed child fails the step."""

from __future__ import annotations

import time

import pytest

from jobs.durable import (
    DefinitionError,
    call,
    cancel,
    fan_out,
    loop,
    purge,
    result,
    resume,
    signal,
    start,
    status,
    task,
    wait_for_signal,
)
from jobs.durable.models import Instance, Step
from tests.durable import lifecycle_steps
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."
L = "tests.durable.lifecycle_steps."


@pytest.fixture
def bug():
    lifecycle_steps.BROKEN["buggy"] = True
    yield lifecycle_steps.BROKEN
    lifecycle_steps.BROKEN["buggy"] = True


def drain_until_done(worker, handle, rounds: int = 200) -> None:
    """Run steps (the call step polls its child with short pauses) until the instance ends."""
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


# --- cancel cascades, resume reattaches, purge leaves no orphan -------------------------------
C = "tests.durable.children_steps."


def descendants(root) -> list[Instance]:
    """The instances below ``root``, level by level (children, then grandchildren)."""
    found, level = [], [root]
    while level:
        level = list(Instance.objects.filter(parent_instance__in=level).order_by("created_at"))
        found += level
    return found


def live_steps(*instances) -> int:
    return Step.objects.filter(instance__in=instances, status__in=("ready", "running")).count()


def claim_step_of(worker, wanted, rounds: int = 400):
    """Run the steps the worker claims until it claims one ``wanted(step)`` accepts; that one
    is returned claimed (running) and not executed."""
    for _ in range(rounds):
        for step in worker.claim():
            if wanted(step):
                return step
            worker.execute(step)
        time.sleep(0.02)
    raise AssertionError("the wanted step was never claimed")


def depth(instance_id) -> int:
    row = Instance.objects.values_list("parent_instance", "parent_instance__parent_instance").get(
        pk=instance_id
    )
    return sum(1 for parent in row if parent is not None)


def test_cancelling_a_parent_cancels_children_and_grandchildren_and_fences_their_steps(worker):
    grandchild = task(S + "record")
    parent = task(S + "number").as_("n") >> call(call(grandchild))
    handle = start(parent, input={"n": 1})
    running = claim_step_of(worker, lambda step: depth(step.instance_id) == 2)
    child, grand = descendants(handle)
    assert (child.status, grand.status) == ("running", "running")

    assert cancel(handle) is True

    tree = [Instance.objects.get(pk=pk) for pk in (handle, child.pk, grand.pk)]
    assert [i.status for i in tree] == ["cancelled"] * 3
    assert [i.error for i in tree] == ["cancelled"] * 3
    assert live_steps(*tree) == 0
    # The grandchild's running step checkpoints nothing; nothing else runs.
    assert worker.execute(running) == "fenced"
    assert rows() == []
    assert worker.drain() == 0
    assert [i.result for i in Instance.objects.filter(pk__in=[i.pk for i in tree])] == [None] * 3


def test_a_child_that_finished_first_stays_finished_and_its_result_goes_nowhere(worker):
    handle = start(call(task(C + "done")), input={})
    # The child completes; the parent's call step has not read it yet (it polls later).
    for _ in range(400):
        worker.drain()
        kids = descendants(handle)
        if kids and kids[0].status == "completed":
            break
        time.sleep(0.02)
    (kid,) = descendants(handle)
    assert kid.status == "completed" and status(handle) == "running"

    assert cancel(handle) is True

    kid.refresh_from_db()
    assert (kid.status, kid.result) == ("completed", "done")  # finished once, left alone
    worker.drain()
    assert status(handle) == "cancelled"
    assert Instance.objects.get(pk=handle).result is None
    assert Step.objects.filter(instance=handle, kind="call").get().status == "cancelled"
    assert [r[1] for r in rows()] == ["done"]


def test_a_call_step_cancelled_after_its_claim_starts_no_child(worker):
    handle = start(call(task(S + "record")), input={})
    (step,) = worker.claim()
    cancel(handle)
    assert worker.execute(step) == "fenced"
    assert not Instance.objects.filter(parent_instance=handle).exists()


def test_cancel_by_filter_cascades_to_fan_out_children(worker):
    per_chunk = task(L + "sum_input").as_("s") >> wait_for_signal("go") >> task(L + "s_plus_one")
    flow = task(S + "input_items").as_("xs") >> fan_out(per_chunk, over="xs", chunk=2)
    batch = [start(flow, input={"items": [1, 2, 3, 4, 5]}, label="batch") for _ in range(2)]
    other = start(flow, input={"items": [1, 2]}, label="other")
    for _ in range(400):
        worker.drain()
        if sum(len(descendants(h)) for h in batch) == 6 and descendants(other):
            break
        time.sleep(0.02)
    kids = [k for h in batch for k in descendants(h)]
    assert len(kids) == 6 and {k.label for k in kids} == {"batch (child)"}
    kids = [k.pk for k in kids]

    assert cancel(label="batch") == 2  # the instances matched; their children go with them

    assert set(
        Instance.objects.filter(pk__in=[*batch, *kids]).values_list("status", flat=True)
    ) == {"cancelled"}
    assert live_steps(*batch, *kids) == 0
    (other_kid,) = descendants(other)
    assert (status(other), Instance.objects.get(pk=other_kid.pk).status) == ("running", "running")


def test_the_cli_and_the_admin_cancel_cascade(worker, staff_client):
    from io import StringIO

    from django.core.management import call_command
    from django.urls import reverse

    flow = call(wait_for_signal("go") >> task(S + "record"))
    by_cli, by_admin = start(flow, input={}), start(flow, input={})
    for _ in range(400):
        worker.drain()
        if descendants(by_cli) and descendants(by_admin):
            break
        time.sleep(0.02)
    out = StringIO()
    call_command("durable", "cancel", str(by_cli), stdout=out)
    assert out.getvalue().strip() == f"cancelled {by_cli}"
    staff_client.post(
        reverse("admin:durable_instance_changelist"),
        {"action": "cancel_instances", "_selected_action": [str(by_admin)]},
    )
    for handle in (by_cli, by_admin):
        (kid,) = descendants(handle)
        assert (status(handle), kid.status) == ("cancelled", "cancelled")


def test_resume_after_cancel_resumes_the_same_children_from_their_checkpoints(worker):
    child = task(C + "done") >> wait_for_signal("go") >> task(L + "third")
    handle = start(task(L + "first").as_("made") >> call(child), input={"x": 1})
    for _ in range(400):
        worker.drain()
        kids = descendants(handle)
        if kids and Step.objects.filter(instance=kids[0], kind="wait_for_signal").exists():
            break
        time.sleep(0.02)
    (kid,) = descendants(handle)
    cancel(handle)
    assert Instance.objects.get(pk=kid.pk).status == "cancelled"

    resume(handle)

    # The same child (its id derives from the call step), running again; nothing rerun.
    assert [k.pk for k in descendants(handle)] == [kid.pk]
    assert (status(handle), status(kid.pk)) == ("running", "running")
    signal(kid.pk, "go")
    drain_until_done(worker, handle)
    assert result(handle) == "third"
    assert sorted(r[1] for r in rows()) == ["done", "first", "third"]  # each ran once


def test_resume_after_a_child_failed_resumes_the_child_from_its_failed_step(worker, bug):
    child = task(L + "first").as_("made") >> task(L + "buggy")
    handle = start(call(child, input_from="input"), input={"x": 2})
    drain_until_done(worker, handle)
    (kid,) = descendants(handle)
    assert (status(handle), status(kid.pk)) == ("failed", "failed")
    bug["buggy"] = False  # the fix is deployed

    resume(handle)

    drain_until_done(worker, handle)
    assert result(handle) == "fixed"
    assert [k.pk for k in descendants(handle)] == [kid.pk]
    assert sorted(r[1] for r in rows()) == ["buggy", "first"]


def test_purging_a_parent_leaves_no_descendant_behind(worker):
    from datetime import timedelta

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT confdeltype FROM pg_constraint WHERE conrelid = 'durable_instance'::regclass"
            " AND confrelid = 'durable_instance'::regclass AND contype = 'f'"
        )
        assert cursor.fetchall() == [("c",)]  # parent_instance: ON DELETE CASCADE
    grandchild = wait_for_signal("go") >> task(S + "record")
    handle = start(call(call(grandchild)), input={})
    for _ in range(400):
        worker.drain()
        if len(descendants(handle)) == 2:
            break
        time.sleep(0.02)
    tree = [handle, *(k.pk for k in descendants(handle))]
    cancel(handle)
    parent_done = Instance.objects.get(pk=handle).finished_at
    # The descendants finished after the cutoff: only the parent is purged by the filter, and
    # its descendants go with it.
    Instance.objects.filter(pk__in=tree[1:]).update(finished_at=parent_done + timedelta(hours=1))
    assert purge(older_than=timedelta(minutes=1), now=parent_done + timedelta(minutes=2)) == 1
    assert not Instance.objects.filter(pk__in=tree).exists()
    assert not Step.objects.filter(instance_id__in=tree).exists()


# --- a failing parent, a lost race and a Break cascade too; purge takes whole trees ---------------
def drain_until(worker, predicate, rounds: int = 400) -> None:
    """Run steps (call steps poll with short pauses) until ``predicate()`` holds."""
    for _ in range(rounds):
        worker.drain()
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("the awaited state was never reached")


def waiting(instance) -> bool:
    """Whether the instance has reached its wait_for_signal step."""
    return Step.objects.filter(instance=instance, kind="wait_for_signal").exists()


def tree_waits(handle, size: int) -> bool:
    """``size`` descendants below ``handle``, the deepest waiting for a signal."""
    kids = descendants(handle)
    return len(kids) == size and waiting(kids[-1])


def test_a_failing_parent_cancels_its_live_children_and_grandchildren(worker):
    child = call(wait_for_signal("go") >> task(S + "record"))
    # The other branch fails once its signal comes: its attempt is its last.
    flow = call(child) & (wait_for_signal("fail") >> task(S + "always_fail", max_attempts=1))
    handle = start(flow, input={})
    drain_until(worker, lambda: tree_waits(handle, 2))
    kid, grand = descendants(handle)

    signal(handle, "fail")
    worker.drain()

    assert status(handle) == "failed"
    assert "after 1 attempt" in Instance.objects.get(pk=handle).error
    tree = [Instance.objects.get(pk=pk) for pk in (kid.pk, grand.pk)]
    assert [(i.status, i.error) for i in tree] == [("cancelled", "cancelled")] * 2
    assert live_steps(handle, kid.pk, grand.pk) == 0
    assert worker.drain() == 0
    assert rows() == []


def test_a_parent_failed_by_a_child_cancels_the_other_fan_out_children(worker):
    per_chunk = task(L + "sum_input").as_("s") >> wait_for_signal("go") >> task(L + "s_plus_one")
    flow = task(S + "input_items").as_("xs") >> fan_out(per_chunk, over="xs", chunk=2)
    handle = start(flow, input={"items": [1, 2, 3, 4, 5]})
    drain_until(
        worker, lambda: len(descendants(handle)) == 3 and all(map(waiting, descendants(handle)))
    )
    kids = [k.pk for k in descendants(handle)]

    cancel(kids[0])  # its call step fails the fan-out, which fails the parent
    drain_until(worker, lambda: status(handle) == "failed")

    assert [status(k) for k in kids] == ["cancelled"] * 3
    assert live_steps(handle, *kids) == 0

    # Resume reattaches: the failed call step and its cancelled siblings reopen, and the same
    # three children are resumed from their checkpoints (their waits), not started again.
    resume(handle)
    assert [k.pk for k in descendants(handle)] == kids
    assert [status(k) for k in [handle, *kids]] == ["running"] * 4
    for kid in kids:
        signal(kid, "go")
    drain_until_done(worker, handle)
    assert result(handle) == [1 + 2 + 1, 3 + 4 + 1, 5 + 1]
    assert Step.objects.filter(instance__in=kids, node_id=2, status="completed").count() == 3


def test_resume_after_a_parent_failed_resumes_its_cancelled_children(worker, bug):
    child = call(task(L + "first") >> wait_for_signal("go") >> task(L + "third"))
    flow = call(child) & (wait_for_signal("fail") >> task(L + "buggy"))
    handle = start(flow, input={"x": 1})
    drain_until(worker, lambda: tree_waits(handle, 2))
    kid, grand = descendants(handle)
    signal(handle, "fail")
    worker.drain()
    assert [status(pk) for pk in (handle, kid.pk, grand.pk)] == ["failed", "cancelled", "cancelled"]
    bug["buggy"] = False  # the fix is deployed

    resume(handle)

    # The failed step reruns; the cancelled call steps find the same children, resumed with
    # the parent down the tree (the grandchild's wait reopened, its signal still to come).
    assert [k.pk for k in descendants(handle)] == [kid.pk, grand.pk]
    assert [status(pk) for pk in (handle, kid.pk, grand.pk)] == ["running"] * 3
    signal(grand.pk, "go")
    drain_until_done(worker, handle)
    assert result(handle) == ["third", "fixed"]
    assert sorted(r[1] for r in rows()) == ["buggy", "first", "third"]  # each ran once


def test_a_call_step_that_loses_a_race_has_its_children_cancelled(worker):
    flow = call(call(wait_for_signal("go") >> task(S + "record"))) | (
        wait_for_signal("stop") >> task(S + "number")
    )
    handle = start(flow, input={"n": 5})
    drain_until(worker, lambda: tree_waits(handle, 2))
    kid, grand = descendants(handle)
    # The call step is claimed (running, polling its child) when the other branch wins.
    polling = claim_step_of(worker, lambda step: step.instance_id == handle)
    assert polling.kind == "call"

    signal(handle, "stop")
    drain_until_done(worker, handle)

    assert result(handle) == 5
    assert [status(pk) for pk in (kid.pk, grand.pk)] == ["cancelled", "cancelled"]
    assert live_steps(kid.pk, grand.pk) == 0
    assert worker.execute(polling) == "fenced"
    assert Step.objects.get(pk=polling.id).status == "cancelled"
    assert worker.drain() == 0
    assert rows() == []


def test_a_break_cancels_the_call_step_in_the_loop_body_and_its_child(worker):
    body = call(wait_for_signal("go") >> task(S + "record")) & (
        wait_for_signal("stop") >> task(S + "count")
    )
    handle = start(loop(body), input={"stop": 1})
    drain_until(worker, lambda: tree_waits(handle, 1))
    (kid,) = descendants(handle)
    call_step = Step.objects.get(instance=handle, kind="call")
    assert call_step.status in ("ready", "running")

    signal(handle, "stop")
    drain_until_done(worker, handle)

    assert result(handle) == {"stopped_at": 1}
    assert Step.objects.get(pk=call_step.pk).status == "cancelled"
    assert status(kid.pk) == "cancelled" and live_steps(kid.pk) == 0
    assert worker.drain() == 0
    assert [r[1] for r in rows()] == ["count"]


def test_purge_never_takes_a_finished_child_whose_parent_still_waits_for_it(
    worker, clock, settings
):
    from datetime import timedelta

    from jobs.durable import maintain

    handle = start(call(task(S + "record")).as_("n") >> task(S + "plus_one"), input={})
    worker.drain()  # the child runs and completes; the call step polls it later (time stands)
    (kid,) = descendants(handle)
    assert (status(handle), status(kid.pk)) == ("running", "completed")
    later = kid.finished_at + timedelta(days=40)

    assert purge(older_than=timedelta(days=30), now=later) == 0
    settings.ACURIO_DURABLE_RETENTION_DAYS = 30
    assert maintain(now=later)["purged"] == 0
    assert Instance.objects.filter(pk=kid.pk).exists()

    clock.shift(5)
    drain_until_done(worker, handle)
    # The call step read the child's result: no second child, its step ran once.
    (step_id,) = [r[1] for r in rows()]
    assert result(handle) == int(step_id.removeprefix("step")) + 1
    assert [k.pk for k in descendants(handle)] == [kid.pk]


def test_purge_deletes_whole_trees_and_keeps_one_that_still_runs(worker):
    from datetime import timedelta

    from django.utils import timezone

    done = start(call(call(task(S + "number"), input_from="input"), input_from="input"),
                 input={"n": 1})  # fmt: skip
    drain_until_done(worker, done)
    alone = start(task(S + "number"), input={"n": 2})
    worker.drain()
    assert status(alone) == "completed"
    # A tree whose child was resumed on its own after its parent was cancelled.
    still = start(call(wait_for_signal("go") >> task(S + "record")), input={})
    drain_until(worker, lambda: tree_waits(still, 1))
    (resumed,) = descendants(still)
    cancel(still)
    resume(resumed.pk)
    assert status(still) == "cancelled" and status(resumed.pk) in ("pending", "running")
    old = timezone.now() - timedelta(days=40)
    Instance.objects.filter(finished_at__isnull=False).update(finished_at=old)
    Instance.objects.filter(pk=still).update(finished_at=old - timedelta(days=1))  # oldest

    # One root per batch: the kept tree comes first, and the batches after it go on.
    assert purge(older_than=timedelta(days=30), batch=1) == 2  # the roots: done, alone

    assert set(Instance.objects.values_list("pk", flat=True)) == {still, resumed.pk}
    assert not Step.objects.exclude(instance__in=[still, resumed.pk]).exists()


def test_an_instance_whose_graph_has_a_kind_unknown_here_still_cancels_with_its_children(worker):
    from jobs.durable.engine import clear_graph_cache

    handle = start(wait_for_signal("later") & call(wait_for_signal("go")), input={})
    drain_until(worker, lambda: tree_waits(handle, 1))
    (kid,) = descendants(handle)
    # As a graph stored by a newer release reads to an older process (a rolling deploy).
    spec = Instance.objects.get(pk=handle).graph
    later = next(c for c in spec["children"] if c["kind"] == "wait_for_signal")
    later["kind"] = "from_the_future"
    Instance.objects.filter(pk=handle).update(graph=spec)
    clear_graph_cache()

    assert cancel(handle) is True

    assert (status(handle), status(kid.pk)) == ("cancelled", "cancelled")


def test_purge_reads_finished_roots_only_however_many_old_children_a_running_tree_holds():
    import json
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from jobs.durable import start_many
    from jobs.durable.statements import purge_sql

    parent = start(wait_for_signal("go"), input={})
    old = timezone.now() - timedelta(days=40)
    children = start_many(task(S + "number"), [{"n": i} for i in range(60)])
    Instance.objects.filter(pk__in=children).update(
        parent_instance=parent, status="completed", finished_at=old
    )
    roots = start_many(task(S + "number"), [{"n": i} for i in range(3)])
    Instance.objects.filter(pk__in=roots).update(status="completed", finished_at=old)

    with connection.cursor() as cursor:
        # The plan purge gets on a big table: an index walk (tiny tables here favour a scan).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + purge_sql(500),
            [timezone.now() - timedelta(days=30), ["completed"], []],
        )
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    (walk,) = [n for n in nodes(plan[0]["Plan"]) if n.get("Index Name")]
    assert walk["Index Name"] == "durable_inst_finished_root"
    # The 60 old children of the running tree are not in the index: none read, none filtered.
    assert (walk["Actual Rows"], walk.get("Rows Removed by Filter", 0)) == (3, 0)
    assert purge(older_than=timedelta(days=30)) == 3
    assert Instance.objects.filter(parent_instance=parent).count() == 60


@pytest.mark.django_db(transaction=True)
def test_a_child_resumed_while_its_tree_is_purged_keeps_the_tree(worker):
    import threading
    from datetime import timedelta

    from django.db import connection, connections, transaction
    from django.utils import timezone

    from tests.durable.support import wait_for

    still = start(call(wait_for_signal("go") >> task(S + "record")), input={})
    drain_until(worker, lambda: tree_waits(still, 1))
    (kid,) = descendants(still)
    cancel(still)
    Instance.objects.update(finished_at=timezone.now() - timedelta(days=40))
    resumed, release, purged = threading.Event(), threading.Event(), []

    def resume_and_hold() -> None:
        try:
            with transaction.atomic():
                resume(kid.pk)
                resumed.set()
                release.wait(30)
        finally:
            connections["default"].close()

    def purging() -> None:
        try:
            purged.append(purge(older_than=timedelta(days=30)))
        finally:
            connections["default"].close()

    def purge_waits() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone() is not None

    holder = threading.Thread(target=resume_and_hold)
    holder.start()
    assert resumed.wait(30)
    purger = threading.Thread(target=purging)
    purger.start()
    wait_for(purge_waits, timeout=30, what="the purge to wait for the resumed child")
    release.set()
    holder.join()
    purger.join()

    # The purge read the child as the resume left it (unfinished): the whole tree is kept.
    assert purged == [0]
    assert Instance.objects.filter(pk=still).exists()
    assert status(kid.pk) in ("pending", "running")
