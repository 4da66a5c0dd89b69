"""Cancelling a parent while its child workflows run in a real worker process: the children
and grandchildren are cancelled in the cancel's transaction, a running step stops (an isolated
one is killed) or its checkpoint is fenced off, and a child finishing at that very moment is
handled once, without an error. A parent that fails in the worker does the same."""

from __future__ import annotations

import signal
import subprocess

import pytest
from django.db import connection

from jobs.durable import call, cancel, start, status, task, wait_for_signal
from jobs.durable import signal as send_signal
from jobs.durable.models import Instance, Step
from tests.durable.support import rows, spawn_worker, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rows_table"),
    pytest.mark.slow,
]

S = "tests.durable.steps."
C = "tests.durable.children_steps."


@pytest.fixture
def worker_process():
    """One ``manage.py worker`` on the test database; its log, once stopped, in ``.log``."""
    procs: list[subprocess.Popen] = []

    class Handle:
        log = ""

        def start(self, *args: str) -> None:
            procs.append(spawn_worker("--poll-interval", "0.2", *args))

        def stop(self) -> str:
            proc = procs.pop()
            proc.send_signal(signal.SIGTERM)
            try:
                self.log, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.log, _ = proc.communicate()
            return self.log

    handle = Handle()
    yield handle
    while procs:
        handle.stop()


def below(root, depth: int):
    """Instances ``depth`` levels below ``root`` (1: its children)."""
    field = "__".join(["parent_instance"] * depth)
    return Instance.objects.filter(**{field: root})


def wait_for_child_step(root) -> None:
    """Until a task step of a child of ``root`` runs (in the worker process)."""
    wait_for(
        lambda: Step.objects.filter(
            instance__in=below(root, 1), name="", kind="task", status="running"
        ).exists(),
        what="the child's step to run",
    )


def statuses(*pks) -> list[str]:
    return [Instance.objects.get(pk=pk).status for pk in pks]


def test_cancel_stops_a_grandchilds_isolated_step_in_a_worker_process(worker_process):
    handle = start(call(call(task(S + "spin", isolate=True))), input={"seconds": 120})
    worker_process.start()
    wait_for(
        lambda: Step.objects.filter(
            instance__in=below(handle, 2), kind="task", status="running"
        ).exists(),
        what="the grandchild's step to run",
    )
    (child,), (grand,) = below(handle, 1), below(handle, 2)

    assert cancel(handle) is True

    # At once, in the cancel's transaction: the whole tree, and every step of it.
    assert statuses(handle, child.pk, grand.pk) == ["cancelled"] * 3
    assert not Step.objects.filter(
        instance__in=[handle, child.pk, grand.pk], status__in=("ready", "running")
    ).exists()
    # The worker kills the computation and is free again long before its 120 s are up.
    quick = start(task(S + "number"), input={"n": 7})
    wait_for(lambda: status(quick) == "completed", timeout=30, what="the worker to be free")
    spin = Step.objects.get(instance=grand.pk, kind="task")
    assert (spin.status, spin.attempts, spin.output) == ("cancelled", 1, None)
    log = worker_process.stop()
    assert "lost its claim" in log and "Traceback" not in log


def test_a_running_child_step_is_fenced_off_when_its_parent_is_cancelled(worker_process):
    handle = start(call(task(C + "linger") >> task(C + "done")), input={"linger": 5})
    worker_process.start()
    wait_for_child_step(handle)
    (child,) = below(handle, 1)

    assert cancel(handle) is True

    assert statuses(handle, child.pk) == ["cancelled", "cancelled"]
    # The lingering step's transaction ends in its checkpoint, which finds the step cancelled:
    # the step's write rolls back, and the child's next step never exists.
    quick = start(task(S + "number"), input={"n": 7})
    wait_for(lambda: status(quick) == "completed", timeout=30, what="the worker to go on")
    assert rows() == []
    linger = Step.objects.get(instance=child.pk, kind="task")
    assert (linger.status, linger.attempts) == ("cancelled", 1)
    assert Step.objects.filter(instance=child.pk, kind="task").count() == 1
    log = worker_process.stop()
    assert "lost its claim; rolled back" in log and "Traceback" not in log


@pytest.fixture
def paused_checkpoint(django_db_blocker):
    """A step named ``pause_here`` pauses 2 s inside its checkpoint's UPDATE, its row locked
    (a child finishing at the moment its parent is cancelled)."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION engine_pause_checkpoint() RETURNS trigger AS $$"
            " BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$ LANGUAGE plpgsql;"
            "CREATE OR REPLACE TRIGGER engine_pause_checkpoint BEFORE UPDATE ON durable_step"
            " FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status = 'completed'"
            " AND NEW.name = 'pause_here') EXECUTE FUNCTION engine_pause_checkpoint();"
        )
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER IF EXISTS engine_pause_checkpoint ON durable_step;"
            "DROP FUNCTION IF EXISTS engine_pause_checkpoint();"
        )


def paused() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event = 'PgSleep'"
        )
        return cursor.fetchone() is not None


def test_a_child_finishing_while_its_parent_is_cancelled_counts_once(
    worker_process, paused_checkpoint
):
    child = task(S + "number").as_("n") >> task(C + "done").as_("pause_here")
    handle = start(call(child), input={"n": 1})
    worker_process.start()
    wait_for(paused, what="the child's last checkpoint to pause")
    (kid,) = below(handle, 1)

    # The cascade waits for the checkpoint holding the child's step (steps first, as the
    # checkpoint locks them): no deadlock, and the child stays completed, once.
    assert cancel(handle) is True

    kid.refresh_from_db()
    assert (status(handle), kid.status, kid.result) == ("cancelled", "completed", "done")
    assert [r[1] for r in rows()] == ["done"]
    # Its result goes nowhere: the parent's call step was cancelled first.
    assert Step.objects.get(instance=handle, kind="call").status == "cancelled"
    quick = start(task(S + "number"), input={"n": 7})
    wait_for(lambda: status(quick) == "completed", timeout=30, what="the worker to go on")
    assert Instance.objects.get(pk=handle).result is None
    log = worker_process.stop()
    assert "deadlock" not in log and "Traceback" not in log


def test_a_parent_failing_in_a_worker_process_fences_its_childs_running_step(worker_process):
    child = task(C + "linger") >> task(C + "done")
    flow = call(child) & (wait_for_signal("fail") >> task(S + "permanent"))
    handle = start(flow, input={"linger": 5})
    worker_process.start("--concurrency", "2")  # one thread lingers, the other fails
    wait_for_child_step(handle)
    (child_row,) = below(handle, 1)

    send_signal(handle, "fail")
    wait_for(lambda: status(handle) == "failed", timeout=30, what="the parent to fail")

    # Cancelled in the failing step's transaction: the child, and every step of it.
    assert statuses(child_row.pk) == ["cancelled"]
    assert not Step.objects.filter(
        instance__in=[handle, child_row.pk], status__in=("ready", "running")
    ).exists()
    log = worker_process.stop()  # lets the lingering step end: its checkpoint is fenced off
    assert rows() == []
    linger = Step.objects.get(instance=child_row.pk, kind="task")
    assert (linger.status, linger.attempts) == ("cancelled", 1)
    assert "lost its claim; rolled back" in log and "Traceback" not in log
