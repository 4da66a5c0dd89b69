"""Durable timers and signals under frozen time: sleep, cron waits, signal waits, signal()."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from jobs.durable import (
    DefinitionError,
    InstanceNotFound,
    SignalError,
    Worker,
    cancel,
    result,
    signal,
    sleep,
    start,
    status,
    task,
    wait_for_schedule,
    wait_for_signal,
    waits,
)
from jobs.durable.models import Signal, Step
from tests.durable.support import T0

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str) -> object:
    return task(S + name)


def wait_step(iid, kind="wait_for_signal") -> Step:
    return Step.objects.get(instance_id=iid, kind=kind)


# --- sleep --------------------------------------------------------------------------------------
def test_sleep_is_a_timer_row_claimed_when_due(worker, clock):
    iid = start(sleep(90) >> t("after"))
    step = wait_step(iid, "sleep")
    assert step.status == "ready" and step.run_at == T0 + timedelta(seconds=90)
    clock.shift(89)
    assert worker.drain() == 0, "not due yet: no worker is held meanwhile"
    clock.shift(1)
    assert worker.drain() == 2
    assert status(iid) == "completed"
    assert Step.objects.get(pk=step.pk).output == {"slept": 90.0}


def test_a_timer_woken_early_waits_again_without_using_an_attempt(worker, clock):
    iid = start(sleep(60) >> t("after"))
    step = wait_step(iid, "sleep")
    allowed = step.max_attempts
    # A lease recovery (or a released claim) puts a step back with run_at = now.
    Step.objects.filter(pk=step.pk).update(run_at=T0)
    assert worker.run_one()
    step.refresh_from_db()
    assert step.status == "ready" and step.run_at == T0 + timedelta(seconds=60)
    assert (step.attempts, step.max_attempts) == (1, allowed + 1), "the early wake is free"
    clock.shift(60)
    worker.drain()
    assert status(iid) == "completed"


def test_sleep_rejects_a_negative_duration():
    with pytest.raises(DefinitionError, match="seconds >= 0"):
        sleep(-1)


# --- wait_for_schedule --------------------------------------------------------------------------
def test_cron_wait_across_a_minute_boundary(worker, clock):
    # T0 is 09:59:30 UTC: "every minute" is due at 10:00:00, across the hour boundary.
    iid = start(wait_for_schedule("* * * * *") >> t("after"))
    step = wait_step(iid, "wait_for_schedule")
    assert step.run_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    clock.shift(29)
    assert worker.drain() == 0
    clock.shift(1)
    assert worker.drain() == 2
    assert Step.objects.get(pk=step.pk).output == {"scheduled": "2026-03-02T10:00:00+00:00"}
    assert status(iid) == "completed"


def test_cron_wait_for_a_later_time_of_day(worker, clock):
    iid = start(wait_for_schedule("15 10 * * 1-5"))  # weekdays 10:15; T0 is a Monday
    assert wait_step(iid, "wait_for_schedule").run_at == datetime(2026, 3, 2, 10, 15, tzinfo=UTC)
    clock.shift(15 * 60 + 30)
    worker.drain()
    assert result(iid) == {"scheduled": "2026-03-02T10:15:00+00:00"}


@pytest.mark.parametrize("expr", ["* * * *", "61 * * * *", "every minute", "* * * * * *"])
def test_cron_expressions_are_checked_where_the_workflow_is_written(expr):
    with pytest.raises(DefinitionError, match="5-field cron"):
        wait_for_schedule(expr)


# --- wait_for_signal and signal() ---------------------------------------------------------------
def approval_flow(timeout=None):
    return wait_for_signal("approval", timeout=timeout).as_("approval") >> t("echo_signal")


def test_signal_during_its_wait_wakes_the_step(worker, clock):
    iid = start(approval_flow(timeout=3600))
    worker.drain()
    assert wait_step(iid).status == "ready", "waiting: claimed by nobody"
    with connection.cursor() as cursor:
        cursor.execute("LISTEN durable_ready")
    assert signal(iid, "approval", {"by": "ada"}) is True
    assert connection.connection.notifies(timeout=0, stop_after=1), "workers were woken"
    assert worker.drain() == 2
    assert result(iid) == {"signal": "approval", "timed_out": False, "data": {"by": "ada"}}
    assert Signal.objects.get(instance_id=iid).step_id == wait_step(iid).pk


def test_signal_before_its_wait_is_kept_and_taken_when_the_wait_starts(worker, clock):
    iid = start(sleep(10) >> approval_flow())
    assert signal(iid, "approval", "early") is False, "no wait open yet: kept"
    kept = Signal.objects.get(instance_id=iid)
    assert kept.step_id is None
    clock.shift(10)
    worker.drain()
    assert result(iid)["data"] == "early" and result(iid)["timed_out"] is False
    kept.refresh_from_db()
    assert kept.step_id == wait_step(iid).pk and kept.consumed_at is not None


def test_signal_after_its_wait_ended_is_kept_for_a_later_wait(worker, clock):
    flow = (
        wait_for_signal("approval", timeout=5).as_("first")
        >> sleep(60)
        >> wait_for_signal("approval", timeout=5).as_("approval")
        >> t("echo_signal")
    )
    iid = start(flow)
    clock.shift(5)
    worker.drain()
    first = Step.objects.get(instance_id=iid, name="first")
    assert first.output == {"signal": "approval", "timed_out": True, "data": None}
    assert signal(iid, "approval", 2) is False, "its wait is over, the next not begun"
    clock.shift(60)
    worker.drain()
    assert result(iid) == {"signal": "approval", "timed_out": False, "data": 2}


def test_signal_wait_times_out(worker, clock):
    iid = start(approval_flow(timeout=120))
    clock.shift(119)
    assert worker.drain() == 0
    clock.shift(1)
    assert worker.drain() == 2
    assert result(iid) == {"signal": "approval", "timed_out": True, "data": None}


def test_signal_wait_without_timeout_waits_for_ever_without_a_timer(worker, clock):
    iid = start(approval_flow())
    assert wait_step(iid).run_at is None
    clock.shift(365 * 24 * 3600)
    assert worker.drain() == 0
    # woken spuriously (lease recovery): back to waiting with no timer, no attempt used
    Step.objects.filter(pk=wait_step(iid).pk).update(run_at=T0)
    assert worker.drain() == 1  # claimed, found no signal, put back
    assert wait_step(iid).run_at is None and wait_step(iid).status == "ready"
    signal(iid, "approval", None)
    worker.drain()
    assert result(iid) == {"signal": "approval", "timed_out": False, "data": None}


def test_two_signals_feed_two_waits_in_order(worker, clock):
    flow = (
        wait_for_signal("approval").as_("one")
        >> wait_for_signal("approval").as_("approval")
        >> t("echo_signal")
    )
    iid = start(flow)
    assert signal(iid, "approval", 1) is True
    assert signal(iid, "approval", 2) is False  # the second wait has not begun
    worker.drain()
    assert Step.objects.get(instance_id=iid, name="one").output["data"] == 1
    assert result(iid)["data"] == 2


def test_signal_errors_the_caller_sees(worker, clock):
    iid = start(approval_flow(timeout=1))
    with pytest.raises(SignalError, match="never waits for a signal named 'payment'"):
        signal(iid, "payment")
    with pytest.raises(SignalError, match="JSON-serialisable"):
        signal(iid, "approval", object())
    with pytest.raises(SignalError, match="must be an identifier"):
        signal(iid, "not a name")
    with pytest.raises(InstanceNotFound, match="no workflow instance"):
        signal("00000000-0000-0000-0000-000000000000", "approval")
    with pytest.raises(InstanceNotFound, match="no workflow instance"):
        signal("nonsense", "approval")  # a workflow id never started
    with pytest.raises(InstanceNotFound, match="not a workflow instance id"):
        signal("", "approval")
    clock.shift(1)
    worker.drain()
    assert status(iid) == "completed"
    with pytest.raises(SignalError, match="is completed: signal 'approval' cannot be delivered"):
        signal(iid, "approval")
    other = start(approval_flow())
    cancel(other)
    with pytest.raises(SignalError, match="is cancelled"):
        signal(other, "approval")
    assert Signal.objects.count() == 0, "refused signals leave nothing behind"


def test_waits_lists_until_when_and_which_signal(worker, clock):
    iid = start(sleep(30) & wait_for_signal("approval", timeout=600) & approval_flow_branch())
    listed = {w["kind"]: w for w in waits(iid)}
    assert listed["sleep"]["until"] == T0 + timedelta(seconds=30)
    assert listed["sleep"]["signal"] is None
    assert listed["wait_for_signal"]["until"] == T0 + timedelta(seconds=600)
    assert listed["wait_for_signal"]["signal"] == "approval"
    assert listed["wait_for_schedule"]["until"] == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert listed["wait_for_signal"]["signalled"] is False
    signal(iid, "approval")
    assert {w["kind"]: w for w in waits(iid)}["wait_for_signal"]["signalled"] is True


def approval_flow_branch():
    return wait_for_schedule("0 12 * * *")


@pytest.mark.django_db(transaction=True)
def test_a_signal_racing_the_activation_of_its_wait_is_not_lost():
    """signal() commits while the wait is being activated in another transaction: the
    activation waits for it (an advisory lock) and takes the kept signal."""
    iid = start(t("fast") >> sleep(0) >> approval_flow())
    # Run the first step, so the instance is running: the sleep's checkpoint then activates
    # the wait without touching the instance row (which signal() locks).
    Worker(worker_id="race-test").drain(max_steps=1)
    assert status(iid) == "running" and wait_step(iid, "sleep").status == "ready"
    sent, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def send() -> None:
        try:
            with transaction.atomic():
                outcome["taken"] = signal(iid, "approval", "raced")
                sent.set()
                release.wait(30)
        finally:
            connection.close()

    def work() -> None:
        try:
            outcome["steps"] = Worker(worker_id="race-test").drain()
        finally:
            connection.close()

    sender = threading.Thread(target=send)
    sender.start()
    assert sent.wait(30)
    worker_thread = threading.Thread(target=work)
    worker_thread.start()
    # Wait until the worker's activation is blocked on the signal's lock.
    with connection.cursor() as cursor:
        for _ in range(3000):
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            if cursor.fetchone()[0]:
                break
            threading.Event().wait(0.01)
        else:
            release.set()
            pytest.fail("the activation never waited for the signal's lock")
    release.set()
    sender.join(30)
    worker_thread.join(60)
    assert outcome["taken"] is False, "no wait was open when it was sent: kept"
    assert outcome["steps"] >= 2, "the sleep, then the wait woken by the kept signal"
    assert result(iid) == {"signal": "approval", "timed_out": False, "data": "raced"}
