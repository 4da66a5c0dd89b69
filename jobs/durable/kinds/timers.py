"""Durable time and external events at run time: ``sleep``, ``wait_for_schedule``,
``wait_for_signal``.

A waiting instance holds no worker and no connection: a wait is one ``ready`` step row whose
``run_at`` is when it is due (the end of a sleep, the next cron time, a signal wait's timeout;
NULL for a signal wait without timeout). The worker's ordinary claim picks it when due,
through the same partial index as any ready step. ``signal()`` (:mod:`jobs.durable.api`)
stores a ``Signal`` row, binds it to a waiting step if there is one, moves that step's
``run_at`` to now and NOTIFYs the workers; a signal sent before its wait starts is kept, and
the wait takes it when it is activated. The step's output is ``{"signal", "timed_out",
"data"}``.

Due times are recomputed from the step's ``created_at`` when it runs, so a wait woken early
(a lease recovery puts a step back with ``run_at = now``) goes back to waiting without using
an attempt (:class:`~jobs.durable.errors.RetryLater` with ``counts=False``).

Cron expressions have five fields and are read in UTC (``croniter``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.db import connection
from django.utils import timezone

from jobs.durable import statements
from jobs.durable.context import Context
from jobs.durable.db import decode_json
from jobs.durable.errors import RetryLater
from jobs.durable.kinds.base import Kind, register


def next_fire(expression: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that the 5-field cron expression matches (UTC)."""
    return croniter(expression, after.astimezone(UTC)).get_next(datetime)


def _created_at(step_id: int) -> datetime:
    with connection.cursor() as cursor:
        cursor.execute(statements.STEP_CREATED_AT, [step_id])
        return cursor.fetchone()[0]


def _not_yet(due: datetime, now: datetime) -> RetryLater:
    return RetryLater(
        f"woken before due ({due.isoformat()}); waiting again",
        (due - now).total_seconds(),
        counts=False,
    )


def lock_signal(instance_id: uuid.UUID, name: str) -> None:
    """Serialise signal() with the activation of a wait for the same signal.

    Without it, a signal committed while a wait is being activated could be missed by both:
    signal() finds no waiting step (not yet committed), the activation finds no kept signal
    (not yet committed), and the wait sleeps through its signal. Whichever takes this
    transaction-scoped lock second sees the other's committed row. Only these two paths take
    it, so it cannot deadlock with the engine's row locks.
    """
    with connection.cursor() as cursor:
        cursor.execute(statements.LOCK_SIGNAL, [f"signal/{instance_id}/{name}"])


def take_kept_signal(
    instance_id: uuid.UUID, name: str, step_id: int, now: datetime
) -> tuple[Any] | None:
    """Bind the oldest kept signal of this name to the step; ``(data,)`` or None."""
    with connection.cursor() as cursor:
        cursor.execute(statements.TAKE_KEPT_SIGNAL, [step_id, now, instance_id, name])
        row = cursor.fetchone()
    return None if row is None else (decode_json(row[0]),)


@register
class SleepKind(Kind):
    name = "sleep"
    leaf = True
    waits = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        return txn.insert_step(
            node,
            parent,
            status="ready",
            run_at=txn.now + timedelta(seconds=node["seconds"]),
            chunk_index=chunk_index,
        )

    def wait_until(self, node, created_at):
        return created_at + timedelta(seconds=node["seconds"])

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        due = self.wait_until(node, _created_at(ctx.step_id))
        now = timezone.now()
        if now < due:
            raise _not_yet(due, now)
        return {"slept": node["seconds"]}

    def describe(self, node):
        label = f"sleep {node['seconds']:g}s"
        return f"{node['name']} ({label})" if node["name"] else label


@register
class WaitForScheduleKind(Kind):
    name = "wait_for_schedule"
    leaf = True
    waits = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        return txn.insert_step(
            node,
            parent,
            status="ready",
            run_at=next_fire(node["cron"], txn.now),
            chunk_index=chunk_index,
        )

    def wait_until(self, node, created_at):
        return next_fire(node["cron"], created_at)

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        due = self.wait_until(node, _created_at(ctx.step_id))
        now = timezone.now()
        if now < due:
            raise _not_yet(due, now)
        return {"scheduled": due.isoformat()}

    def describe(self, node):
        label = f"wait for schedule {node['cron']!r}"
        return f"{node['name']} ({label})" if node["name"] else label


@register
class WaitForSignalKind(Kind):
    name = "wait_for_signal"
    leaf = True
    waits = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        timeout = node["timeout"]
        run_at = None if timeout is None else txn.now + timedelta(seconds=timeout)
        step = txn.insert_step(node, parent, status="ready", run_at=run_at, chunk_index=chunk_index)
        # A signal sent before this wait started was kept: take it and be due at once.
        lock_signal(step.instance_id, node["signal"])
        if take_kept_signal(step.instance_id, node["signal"], step.id, txn.now) is not None:
            with connection.cursor() as cursor:
                cursor.execute(statements.WAKE_STEP, [txn.now, step.id])
            txn.notify = True
        return step

    def wait_until(self, node, created_at):
        if node["timeout"] is None:
            return None
        return created_at + timedelta(seconds=node["timeout"])

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        name = node["signal"]
        with connection.cursor() as cursor:
            cursor.execute(statements.SIGNAL_OF_STEP, [ctx.step_id])
            row = cursor.fetchone()
        now = timezone.now()
        taken = (
            (decode_json(row[0]),)
            if row
            else take_kept_signal(ctx.instance_id, name, ctx.step_id, now)
        )
        if taken is not None:
            return {"signal": name, "timed_out": False, "data": taken[0]}
        if node["timeout"] is None:
            # Woken without a signal (a lease recovery): back to waiting, with no timer.
            raise RetryLater(f"no signal {name!r} yet; waiting again", None, counts=False)
        due = _created_at(ctx.step_id) + timedelta(seconds=node["timeout"])
        if now < due:
            raise _not_yet(due, now)
        return {"signal": name, "timed_out": True, "data": None}

    def describe(self, node):
        label = f"wait for signal {node['signal']!r}"
        if node["timeout"] is not None:
            label += f", timeout {node['timeout']:g}s"
        return f"{node['name']} ({label})" if node["name"] else label
