"""Crash isolation under group commit: a step lost to a crash before runs alone, so a step
that kills its worker every time (a poison step) costs the steps grouped with it one crash at
most, and then fails alone on ACURIO_MAX_CRASHES.

A worker's death is played in-process by a task raising a BaseException the worker does not
catch: the group's transaction rolls back, and every step the worker claimed keeps its lease
until it expires and lease recovery counts a crash, as after a SIGKILL."""

from __future__ import annotations

import pytest
import time_machine
from django.db import connection

from jobs.durable import Worker, recover_expired_leases, start, status, task
from jobs.durable.models import Instance, Step
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."
POISON = "tests.durable.test_crash_isolation.poison"


class WorkerLost(BaseException):
    """The worker process is gone (a segfault, the OOM killer): nothing of it catches this."""


def poison(ctx):
    raise WorkerLost(f"step {ctx.step_id} took its worker down")


def t(name: str, **options) -> object:
    return task(S + name, **options)


def crash_once(clock, *handles) -> None:
    """Claim the first step of each instance (with nothing else ready) and lose the worker.
    (A claim takes one priority at a time: one claim per priority among them.)"""
    lost = Worker(worker_id="lost", lease_seconds=5, group=len(handles))
    claimed = 0
    while claimed < len(handles) and (steps := lost.claim(len(handles) - claimed)):
        claimed += len(steps)
    clock.shift(6)
    assert recover_expired_leases() == len(handles)


def test_a_poison_step_fails_alone_and_its_group_mates_complete(settings):
    settings.ACURIO_MAX_CRASHES = 3
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        innocents = [start(t("record") >> t("record")) for _ in range(3)]
        doomed = start(task(POISON))
        deaths = 0
        for round_ in range(10):
            worker = Worker(worker_id=f"w{round_}", lease_seconds=5, group=4)
            try:
                worker.drain()
            except WorkerLost:
                deaths += 1
            clock.shift(6)
            recover_expired_leases()
            if Step.objects.filter(status__in=["ready", "running"]).count() == 0:
                break
    assert [status(h) for h in innocents] == ["completed"] * 3
    instance = Instance.objects.get(pk=doomed.id)
    assert instance.status == "failed"
    assert "its worker was lost 4 times (the bound is ACURIO_MAX_CRASHES = 3)" in instance.error
    bad = Step.objects.get(instance_id=doomed.id)
    # Its four claims all ran it (a claim that handed it back gave its attempt back).
    assert (bad.status, bad.crashes, bad.attempts) == ("failed", 3, 4)
    assert deaths == 4
    for handle in innocents:
        first, second = Step.objects.filter(instance_id=handle.id, kind="task").order_by("id")
        # The first group's death cost each group-mate one crash, never more; its attempts
        # count the claims that ran it or were lost (two), not the hand-backs.
        assert (first.status, first.crashes, first.attempts) == ("completed", 1, 2)
        # The next step was chained, then handed back unrun (attempt given back) while the
        # poison step ran alone, and finally ran on its one claim.
        assert (second.status, second.crashes, second.attempts) == ("completed", 0, 1)
    assert len(rows()) == 6, "each innocent step committed once"


def test_a_claim_that_takes_a_crashed_step_runs_it_alone_and_hands_back_the_others(
    transactional_db,
):
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        suspect = start(t("record"))
        crash_once(clock, suspect)
        # Of the same priority: a claim takes one priority only (a more urgent step would be
        # claimed without the suspect).
        others = [start(t("record")) for _ in range(3)]
        with connection.cursor() as cursor:
            cursor.execute("LISTEN durable_ready")
        list(connection.connection.notifies(timeout=0))  # the starts' wake-ups
        claimed = Worker(worker_id="first", lease_seconds=5, group=4).claim(4)
        assert [s.instance_id for s in claimed] == [suspect.id]
        assert list(connection.connection.notifies(timeout=0, stop_after=1)), "workers woken"
        handed = list(Step.objects.filter(instance_id__in=[h.id for h in others]).order_by("id"))
        for step in handed:
            assert (step.status, step.attempts, step.lease_owner) == ("ready", 0, "")
            assert step.started_at is None and step.lease_expires_at is None
        # Claimable by another worker at once, in their place (run_at kept).
        taken = Worker(worker_id="second", lease_seconds=5, group=4).claim(4)
        assert sorted(s.id for s in taken) == [s.id for s in handed]
        assert all(s.attempts == 1 for s in taken)
        kept = Step.objects.get(instance_id=suspect.id)
        assert (kept.status, kept.lease_owner, kept.attempts, kept.crashes) == (
            "running",
            "first",
            2,
            1,
        )


def test_of_two_crashed_steps_the_most_urgent_runs_alone(settings):
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        low = start(t("record"), priority=1)
        high = start(t("record"), priority=7)
        crash_once(clock, low, high)
        claimed = Worker(worker_id="w", lease_seconds=5, group=4).claim(4)
        assert [s.instance_id for s in claimed] == [high.id]
        back = Step.objects.get(instance_id=low.id)
        # Back as the recovery left it: its lost claim counted, the hand-back's given back.
        assert (back.status, back.attempts, back.crashes) == ("ready", 1, 1)
        assert back.started_at is not None, "a claim did run it before"


def test_a_group_without_crashed_steps_is_claimed_whole():
    handles = [start(t("record")) for _ in range(4)]
    claimed = Worker(worker_id="w", lease_seconds=5, group=4).claim(4)
    assert sorted(s.instance_id for s in claimed) == sorted(h.id for h in handles)


def test_the_hand_back_is_fenced_by_the_claim(settings):
    """A step whose claim was lost before the hand-back (recovered and claimed again by
    another worker) is left to its new claim."""
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        suspect = start(t("record"))
        crash_once(clock, suspect)
        other = start(t("record"))
        worker = Worker(worker_id="slow", lease_seconds=5, group=4)
        rows_, _ = worker._claim_plain(4, worker._claim_params(worker.clock()))
        assert len(rows_) == 2
        # The other step's lease expires, and another worker claims it again.
        clock.shift(6)
        recover_expired_leases()
        Step.objects.filter(instance_id=suspect.id).update(status="cancelled")  # not this one
        retaken = Worker(worker_id="fast", lease_seconds=5).claim(1)
        assert [s.instance_id for s in retaken] == [other.id]
        kept, chained = worker._isolate_suspect(rows_)
        assert [r[1] for r in kept] == [suspect.id] and chained == []
        step = Step.objects.get(instance_id=other.id)
        assert (step.status, step.lease_owner, step.attempts) == ("running", "fast", 2)
