"""Instances after the fact: resume after a fixed bug, fork from a step, purge in batches
(without long locks, ids freed), and cancel by filter."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from jobs.durable import (
    NotResumable,
    cancel,
    fork,
    purge,
    result,
    resume,
    start,
    start_many,
    status,
    task,
)
from jobs.durable.models import Instance, Signal, Step
from tests.durable import lifecycle_steps
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

L = "tests.durable.lifecycle_steps."
S = "tests.durable.steps."


@pytest.fixture
def bug():
    lifecycle_steps.BROKEN["buggy"] = True
    yield lifecycle_steps.BROKEN
    lifecycle_steps.BROKEN["buggy"] = True


def tags(instance_id) -> list[str]:
    return sorted(tag for iid, tag, *_ in rows() if iid == str(instance_id) or iid == instance_id)


def test_resume_after_a_fixed_bug_reruns_only_the_failed_step(worker, bug):
    flow = task(L + "first").as_("made") >> task(L + "buggy") >> task(L + "third")
    iid = start(flow, input=5)
    worker.drain()
    assert status(iid) == "failed"
    assert tags(iid) == ["first"]
    with pytest.raises(NotResumable, match="failed or cancelled"):
        resume(start(task(L + "first"), input=1))  # pending: nothing to resume
    bug["buggy"] = False  # the fix is deployed
    assert resume(iid) is True
    assert status(iid) == "running"
    worker.drain()
    assert status(iid) == "completed"
    assert result(iid) == "third"
    # The completed checkpoint was kept: "first" ran once.
    assert tags(iid) == ["buggy", "first", "third"]
    with pytest.raises(NotResumable, match="completed"):
        resume(iid)


def test_resume_reopens_a_join_whose_sibling_was_cancelled(worker, bug):
    iid = start(task(L + "buggy") & task(L + "third"))
    buggy, third = sorted(worker.claim(limit=2), key=lambda s: s.node_id)
    worker.execute(buggy)
    assert status(iid) == "failed"
    assert worker.execute(third) == "fenced"  # cancelled with its instance
    bug["buggy"] = False
    resume(iid)
    worker.drain()
    assert status(iid) == "completed"
    assert result(iid) == ["fixed", "third"]


def test_a_cancelled_instance_resumes_and_an_unknown_one_is_not_found(worker):
    iid = start(task(L + "first") >> task(L + "third"), input=1)
    cancel(iid)
    resume(iid)
    assert status(iid) == "pending"  # it never started
    worker.drain()
    assert status(iid) == "completed"
    with pytest.raises(Exception, match="no workflow instance"):
        resume("never-started")


def test_fork_reuses_checkpoints_before_the_step_and_runs_it_and_the_rest_anew(worker):
    flow = task(L + "first").as_("made") >> task(L + "second") >> task(L + "third")
    iid = start(flow, input={"order": 1}, label="orig")
    worker.drain()
    forked = fork(iid, from_step="second")
    assert forked != iid
    copy = Instance.objects.get(pk=forked)
    assert (copy.forked_from, copy.label, copy.input) == (iid, "orig", {"order": 1})
    first_step = Step.objects.get(instance_id=forked, node_id=1)
    assert first_step.status == "completed"
    assert first_step.output == {"made": {"order": 1}}
    worker.drain()
    assert result(forked) == "third"
    assert tags(forked) == ["second", "third"]  # "first" was not run again
    assert Step.objects.get(instance_id=forked, node_id=2).output == [
        {"made": {"order": 1}},
        "second",
    ]


def test_fork_from_an_unknown_or_unstarted_step_is_refused(worker, bug):
    iid = start(task(L + "buggy") >> task(L + "third"))
    worker.drain()
    with pytest.raises(Exception, match="no step named"):
        fork(iid, from_step="nope")
    with pytest.raises(Exception, match="never started"):
        fork(iid, from_step="third")
    # Forking from the failed step itself reruns it (the bug fixed meanwhile).
    bug["buggy"] = False
    forked = fork(iid, from_step="buggy")
    worker.drain()
    assert result(forked) == "third"


def finished_long_ago(n: int, state: str = "completed") -> list:
    handles = start_many(task(S + "number"), [{"n": i} for i in range(n)])
    Instance.objects.filter(pk__in=handles).update(
        status=state, finished_at=timezone.now() - timedelta(days=40)
    )
    return handles


def test_purge_deletes_old_finished_instances_with_their_steps_and_frees_their_ids(worker):
    old = finished_long_ago(12)
    failed = finished_long_ago(3, "failed")
    fresh = start(task(S + "number"), id="keep-me", input={"n": 1})
    worker.drain()  # fresh completes now: too young to purge
    reused = start(task(S + "number"), id="reuse-me", input={"n": 1})
    Instance.objects.filter(pk=reused).update(
        status="completed", finished_at=timezone.now() - timedelta(days=40)
    )
    Signal.objects.create(instance_id=old[0], name="x", created_at=timezone.now())
    assert purge(older_than=timedelta(days=30), status="failed", batch=2) == 3
    assert purge(older_than=timedelta(days=30), batch=5) == 13
    assert set(Instance.objects.values_list("pk", flat=True)) == {fresh}
    assert not Step.objects.exclude(instance_id=fresh).exists()
    assert not Signal.objects.exists()
    assert failed  # gone above
    # The id is free again once its instance is purged.
    start(task(S + "number"), id="reuse-me", input={"n": 2})
    for bad in ({"older_than": 5}, {"older_than": timedelta(days=1), "status": "running"}):
        with pytest.raises(ValueError):
            purge(**bad)


@pytest.mark.django_db(transaction=True)
def test_purge_works_in_short_batches_that_never_hold_locks_for_long():
    old = finished_long_ago(300)
    deletes = []

    def count_deletes(execute, sql, params, many, context):
        if sql.startswith("DELETE FROM"):
            deletes.append(time.monotonic())
        return execute(sql, params, many, context)

    blocked: list[str] = []
    done = threading.Event()

    def touch_rows() -> None:
        # Another session updates rows the purge has not reached yet; with a short lock
        # timeout it would fail if a batch held its locks for long.
        with connections["default"].cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
            for pk in reversed(old):
                if done.is_set():
                    break
                try:
                    cursor.execute(
                        "UPDATE durable_instance SET label = 'touched' WHERE id = %s", [pk]
                    )
                except Exception as exc:  # a lock timeout
                    blocked.append(str(exc))
        connections["default"].close()

    toucher = threading.Thread(target=touch_rows)
    with connection.execute_wrapper(count_deletes):
        toucher.start()
        purged = purge(older_than=timedelta(days=30), batch=40)
        done.set()
    toucher.join()
    assert blocked == []
    # 8 batches at least (the last one empty); a row the other session held at that moment
    # was skipped, not waited for, and goes with the next purge.
    assert len(deletes) >= 8
    assert purged + purge(older_than=timedelta(days=30)) == 300
    assert not Instance.objects.exists()


def test_cancel_by_filter_cancels_every_match_in_batches():
    bulk = start_many(task(S + "number") >> task(S + "record"), [{"n": i} for i in range(25)],
                      label="bulk", on_failure=S + "on_failure")  # fmt: skip
    other = start(task(S + "number"), label="other", input={"n": 1})
    queued = start(task(S + "number"), queue="q2", input={"n": 1})
    assert cancel(label="bulk", batch=10) == 25
    assert set(Instance.objects.filter(pk__in=bulk).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert not Step.objects.filter(instance_id__in=bulk, status__in=["ready", "running"]).exists()
    # Each cancelled instance's hook ran, in the transaction that cancelled it.
    hooked = [r[0] for r in rows("on_failure")]
    assert sorted(map(str, hooked)) == sorted(map(str, bulk))
    assert status(other) == "pending"
    assert cancel(queue="q2") == 1 and status(queued) == "cancelled"
    assert cancel(label="bulk") == 0  # nothing unfinished left
    with pytest.raises(ValueError, match="at least one filter"):
        cancel()
    with pytest.raises(TypeError):
        cancel(other, label="x")
