"""Periodic workflows: ``schedule(name, workflow, cron=..., input=...)`` starts an instance at
every slot of a cron expression (UTC), kept in the database (:class:`~jobs.durable.models.Schedule`).

Who starts a slot: whoever sees it due first — a sweeper tick (``maintain()``) or an idle
worker (:meth:`jobs.durable.worker.Worker` every few seconds) calls :func:`run_due_schedules`.
Exactly once per slot, whatever the number of processes:

* the due schedule rows are locked ``FOR UPDATE SKIP LOCKED``: one process handles a schedule
  at a time, the others skip it;
* in that same transaction the slot's instance is started and ``next_run_at`` moves past the
  slot, so a committed start and an advanced schedule go together (a crash loses neither);
* and the instance's workflow id is ``schedule:<name>:<slot>``, so even a process that read
  the row before another's commit could not start the slot twice (the id is the primary key).

After a restart (every process was down), the slots missed within the schedule's catch-up
window (``catch_up`` seconds, default an hour) are started, each once, oldest first; older
ones are skipped (an hourly report missed for a week does not run 168 times on restart).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.db import transaction
from django.utils import timezone

from jobs.durable import launch
from jobs.durable.errors import DefinitionError
from jobs.durable.graph import Node
from jobs.durable.kinds.timers import next_fire
from jobs.durable.models import Schedule
from jobs.durable.queues import DEFAULT_QUEUE

DUE_BATCH = 50
# At most this many missed slots of one schedule are started in one pass (the rest next pass).
MAX_SLOTS_PER_PASS = 100


def schedule(
    name: str,
    workflow: Node,
    *,
    cron: str,
    input: Any = None,
    label: str = "",
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    on_failure: str = "",
    catch_up: float = 3600.0,
    enabled: bool = True,
) -> Schedule:
    """Create or replace the schedule ``name``; returns its row.

    Its workflow is compiled and stored now (like ``start()``), so a later deploy does not
    change what it starts until it is scheduled again. The next slot is the first one after
    now; replacing a schedule with the same cron keeps its next slot.
    """
    if not isinstance(name, str) or not name or len(name) > 150:
        raise DefinitionError(f"schedule name {name!r} must be a non-empty string")
    if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise DefinitionError(
            f"schedule({name!r}): cron {cron!r} must be a 5-field cron expression (UTC)"
        )
    if not isinstance(catch_up, int | float) or catch_up < 0:
        raise DefinitionError("catch_up must be a number of seconds >= 0")
    options = launch.prepare(
        workflow, label=label or name, on_failure=on_failure, queue=queue, priority=priority
    )
    cron = " ".join(cron.split())
    now = timezone.now()
    with transaction.atomic():
        row = Schedule.objects.select_for_update().filter(name=name).first()
        next_run_at = (
            row.next_run_at if row is not None and row.cron == cron else next_fire(cron, now)
        )
        fields = {
            "graph": options.spec,
            "input": launch.json_input(input),
            "cron": cron,
            "label": options.label,
            "queue": queue,
            "priority": priority,
            "on_failure": on_failure,
            "catch_up_seconds": float(catch_up),
            "enabled": enabled,
            "next_run_at": next_run_at,
        }
        row, _ = Schedule.objects.update_or_create(
            name=name, defaults=fields, create_defaults={**fields, "created_at": now}
        )
    return row


def unschedule(name: str) -> bool:
    """Delete the schedule ``name`` (instances it started stay). False if there was none."""
    deleted, _ = Schedule.objects.filter(name=name).delete()
    return bool(deleted)


def slot_id(name: str, slot: datetime) -> str:
    """The workflow id of a schedule's instance for one slot."""
    return f"schedule:{name}:{slot.astimezone(UTC).isoformat()}"


def run_due_schedules(now: datetime | None = None) -> int:
    """Start the instances of every due slot (see the module docstring); returns how many."""
    now = now or timezone.now()
    started = 0
    while True:
        with transaction.atomic():
            due = list(
                Schedule.objects.filter(enabled=True, next_run_at__lte=now)
                .order_by("next_run_at")
                .select_for_update(skip_locked=True)[:DUE_BATCH]
            )
            for row in due:
                started += _start_slots(row, now)
        if len(due) < DUE_BATCH:
            return started


def _start_slots(row: Schedule, now: datetime) -> int:
    """Start the schedule's due slots within its catch-up window; advance ``next_run_at``."""
    slot = row.next_run_at
    window = timedelta(seconds=row.catch_up_seconds)
    options = launch.StartOptions(
        spec=row.graph,
        label=row.label,
        owner_id=None,
        on_failure=row.on_failure,
        queue=row.queue,
        priority=row.priority,
        run_at=None,
    )
    started = 0
    slots = []
    while slot <= now and len(slots) < MAX_SLOTS_PER_PASS:
        if now - slot <= window:
            slots.append(slot)
        slot = next_fire(row.cron, slot)
    if slots:
        launch.create(options, [row.input] * len(slots), [slot_id(row.name, s) for s in slots])
        started = len(slots)
    Schedule.objects.filter(pk=row.pk).update(
        next_run_at=slot, last_run_at=now if slots else row.last_run_at
    )
    return started
