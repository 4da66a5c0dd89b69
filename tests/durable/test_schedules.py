"""Periodic workflows: schedule() kept in the database, each slot started once (three
competing processes), the catch-up window after a restart, and the upkeep the sweeper calls
(due schedules, retention)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from croniter import croniter
from django.utils import timezone

from jobs.durable import (
    DefinitionError,
    maintain,
    run_due_schedules,
    schedule,
    start_many,
    task,
    unschedule,
)
from jobs.durable.models import Instance, Schedule
from jobs.durable.schedules import slot_id
from tests.processes import ROOT, child_env

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."
FLOW = task(S + "number")


def test_a_schedule_is_stored_with_its_next_slot_and_replaced_by_name(clock):
    row = schedule("report", FLOW, cron="*/5 * * * *", input={"n": 1})
    assert row.next_run_at > timezone.now()
    assert row.next_run_at.minute % 5 == 0 and row.next_run_at.second == 0
    again = schedule("report", FLOW, cron="*/5  * * * *", input={"n": 2})
    assert again.next_run_at == row.next_run_at  # same cron: the next slot is kept
    assert Schedule.objects.get().input == {"n": 2}
    for bad in ("* * *", "61 * * * *", ""):
        with pytest.raises(DefinitionError, match="cron"):
            schedule("bad", FLOW, cron=bad)
    assert unschedule("report") is True
    assert unschedule("report") is False


def test_each_due_slot_starts_one_instance_and_only_once(clock, worker):
    schedule("minutely", FLOW, cron="* * * * *", input={"n": 3})
    assert run_due_schedules() == 0
    clock.shift(61)
    assert run_due_schedules() == 1
    assert run_due_schedules() == 0  # the slot moved on
    instance = Instance.objects.get()
    row = Schedule.objects.get()
    assert instance.workflow_id == slot_id("minutely", row.next_run_at - timedelta(minutes=1))
    assert (instance.label, instance.input) == ("minutely", {"n": 3})
    worker.drain()
    assert Instance.objects.get().result == 3


def test_after_a_restart_the_missed_slots_within_the_window_are_caught_up(clock):
    schedule("minutely", FLOW, cron="* * * * *", input={"n": 1}, catch_up=180)
    first = Schedule.objects.get().next_run_at
    clock.shift(10 * 60)  # every process was down for ten minutes
    now = timezone.now()
    expected = [slot for slot in croniter_range(first, now) if (now - slot).total_seconds() <= 180]
    assert 2 <= len(expected) <= 4
    assert run_due_schedules() == len(expected)
    assert sorted(Instance.objects.values_list("workflow_id", flat=True)) == sorted(
        slot_id("minutely", slot) for slot in expected
    )
    assert Schedule.objects.get().next_run_at > now


def croniter_range(first, now):
    slot = first
    while slot <= now:
        yield slot
        slot = croniter("* * * * *", slot).get_next(type(slot))


def test_a_disabled_schedule_starts_nothing(clock):
    schedule("off", FLOW, cron="* * * * *", enabled=False)
    clock.shift(120)
    assert run_due_schedules() == 0


def test_upkeep_starts_due_schedules_and_applies_retention(clock, settings):
    schedule("minutely", FLOW, cron="* * * * *", input={"n": 1})
    old = start_many(FLOW, [{"n": i} for i in range(5)])
    Instance.objects.filter(pk__in=old).update(
        status="completed", finished_at=timezone.now() - timedelta(days=10)
    )
    clock.shift(61)
    settings.ACURIO_DURABLE_RETENTION_DAYS = None
    assert maintain() == {"scheduled": 1, "purged": 0}
    settings.ACURIO_DURABLE_RETENTION_DAYS = 7
    assert maintain() == {"scheduled": 0, "purged": 5}
    assert Instance.objects.count() == 1


RACE = """
import sys
import time
from jobs.durable import run_due_schedules
print("ready", flush=True)
sys.stdin.readline()  # the go, once every process is ready
end = time.time() + 1.5  # each process keeps looking for a while
started = 0
while time.time() < end:
    started += run_due_schedules()
print("started", started)
"""


def race(processes: int = 3) -> int:
    """``processes`` shells started at once, all let go together once each is set up."""
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", RACE],
            cwd=ROOT,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    try:
        for p in procs:  # a barrier: each is set up and waiting for the go
            lines = []
            while (line := p.stdout.readline()) not in ("ready\n", ""):
                lines.append(line)
            assert line == "ready\n", (lines, p.stderr.read())
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * processes, outputs
    return sum(
        int(line.split()[1])
        for out, _ in outputs
        for line in out.splitlines()
        if line.startswith("started ")
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_three_competing_processes_start_each_slot_exactly_once_and_catch_up_after_restart():
    schedule("minutely", FLOW, cron="* * * * *", input={"n": 1}, catch_up=600)
    # Three slots are due (the schedule's last run was three minutes ago).
    now = timezone.now()
    last = now.replace(second=0, microsecond=0) - timedelta(minutes=2)
    Schedule.objects.update(next_run_at=last)
    before = timezone.now()
    started = race()
    after = timezone.now()
    ids = list(Instance.objects.values_list("workflow_id", flat=True))
    # Every start made one instance of its own slot: no slot twice, none missed.
    assert started == len(ids) == len(set(ids))
    assert minute_slots(last, before) <= set(ids) <= minute_slots(last, after)
    # A restart after downtime: the schedule's row says its next slot is long past (as if
    # the processes that would have advanced it were down); the slots already started are
    # not started again, the missed ones within the window are.
    Schedule.objects.update(next_run_at=last - timedelta(minutes=3))
    race()
    after = timezone.now()
    ids = list(Instance.objects.values_list("workflow_id", flat=True))
    assert len(ids) == len(set(ids))
    assert minute_slots(last - timedelta(minutes=3), before) <= set(ids)
    assert set(ids) <= minute_slots(last - timedelta(minutes=3), after)
    assert Schedule.objects.get().next_run_at > before


def minute_slots(first, until) -> set[str]:
    """The workflow ids of the minutely schedule's slots from ``first`` to ``until``."""
    slots, slot = set(), first
    while slot <= until:
        slots.add(slot_id("minutely", slot))
        slot += timedelta(minutes=1)
    return slots
