"""Durable time and external events: ``sleep``, ``wait_for_schedule``, ``wait_for_signal``,
and ``signal()`` that wakes a waiting instance.

A waiting instance holds no worker and no connection: a wait is one ``ready`` step row whose
``run_at`` is when it is due (the end of a sleep, the next cron time, a signal wait's timeout;
NULL for a signal wait without timeout). The worker's ordinary claim query picks it when due,
through the same partial index as any ready step. ``signal()`` stores a :class:`Signal` row,
binds it to a waiting step if there is one, moves that step's ``run_at`` to now and NOTIFYs
the workers; a signal sent before its wait starts is kept, and the wait takes it when it is
activated. The step's output is ``{"signal", "timed_out", "data"}``.

Due times are recomputed from the step's ``created_at`` when it runs, so a wait woken early
(a lease recovery puts a step back with ``run_at = now``) goes back to waiting without using
an attempt (:class:`~jobs.durable.errors.RetryLater` with ``counts=False``).

Cron expressions have five fields and are read in UTC (``croniter``).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.db import connection, transaction
from django.utils import timezone

from jobs.durable.context import Context
from jobs.durable.errors import DefinitionError, DurableError, InstanceNotFound, RetryLater
from jobs.durable.graph import _NAME_RE, Node
from jobs.durable.kinds import Kind, register

__all__ = [
    "SignalError",
    "signal",
    "sleep",
    "wait_for_schedule",
    "wait_for_signal",
    "waits",
]

WAIT_KINDS = ("sleep", "wait_for_schedule", "wait_for_signal")


class SignalError(DurableError):
    """A signal that cannot be delivered (finished instance, no such wait, bad data)."""


def _seconds(value: Any, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise DefinitionError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _created_at(step_id: int) -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT created_at FROM durable_step WHERE id = %s", [step_id])
        return cursor.fetchone()[0]


def _not_yet(due: datetime, now: datetime) -> RetryLater:
    return RetryLater(
        f"woken before due ({due.isoformat()}); waiting again",
        (due - now).total_seconds(),
        counts=False,
    )


# --- sleep ------------------------------------------------------------------------------------
class Sleep(Node):
    kind = "sleep"

    def __init__(self, seconds: float) -> None:
        self.seconds = _seconds(seconds, "sleep()")

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "seconds": self.seconds, "opts": {}}


@register
class SleepKind(Kind):
    name = "sleep"
    leaf = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        return txn.insert_step(
            node,
            parent,
            status="ready",
            run_at=txn.now + timedelta(seconds=node["seconds"]),
            chunk_index=chunk_index,
        )

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        due = _created_at(ctx.step_id) + timedelta(seconds=node["seconds"])
        now = timezone.now()
        if now < due:
            raise _not_yet(due, now)
        return {"slept": node["seconds"]}

    def describe(self, node):
        label = f"sleep {node['seconds']:g}s"
        return f"{node['name']} ({label})" if node["name"] else label


def sleep(seconds: float) -> Sleep:
    """Wait ``seconds`` (durably: a deploy or a crash does not restart the wait)."""
    return Sleep(seconds)


# --- wait_for_schedule --------------------------------------------------------------------------
def next_fire(expression: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that the 5-field cron expression matches (UTC)."""
    return croniter(expression, after.astimezone(UTC)).get_next(datetime)


class WaitForSchedule(Node):
    kind = "wait_for_schedule"

    def __init__(self, cron: str) -> None:
        if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
            raise DefinitionError(
                f"wait_for_schedule({cron!r}) needs a 5-field cron expression"
                " (minute hour day-of-month month day-of-week), e.g. '*/5 * * * *'"
            )
        self.cron = " ".join(cron.split())

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "cron": self.cron, "opts": {}}


@register
class WaitForScheduleKind(Kind):
    name = "wait_for_schedule"
    leaf = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        return txn.insert_step(
            node,
            parent,
            status="ready",
            run_at=next_fire(node["cron"], txn.now),
            chunk_index=chunk_index,
        )

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        due = next_fire(node["cron"], _created_at(ctx.step_id))
        now = timezone.now()
        if now < due:
            raise _not_yet(due, now)
        return {"scheduled": due.isoformat()}

    def describe(self, node):
        label = f"wait for schedule {node['cron']!r}"
        return f"{node['name']} ({label})" if node["name"] else label


def wait_for_schedule(cron: str) -> WaitForSchedule:
    """Wait until the next time the 5-field cron expression matches (UTC)."""
    return WaitForSchedule(cron)


# --- wait_for_signal ----------------------------------------------------------------------------
class WaitForSignal(Node):
    kind = "wait_for_signal"

    def __init__(self, signal: str, *, timeout: float | None = None) -> None:
        if not isinstance(signal, str) or not _NAME_RE.match(signal):
            raise DefinitionError(f"wait_for_signal({signal!r}): the name must be an identifier")
        self.signal = signal
        self.timeout = None if timeout is None else _seconds(timeout, "wait_for_signal(timeout=)")

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "signal": self.signal, "timeout": self.timeout, "opts": {}}


def _lock_signal(instance_id: uuid.UUID, name: str) -> None:
    """Serialise signal() with the activation of a wait for the same signal.

    Without it, a signal committed while a wait is being activated could be missed by both:
    signal() finds no waiting step (not yet committed), the activation finds no kept signal
    (not yet committed), and the wait sleeps through its signal. Whichever takes this
    transaction-scoped lock second sees the other's committed row. Only these two paths take
    it, so it cannot deadlock with the engine's row locks.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"signal/{instance_id}/{name}"],
        )


def _take_kept(instance_id: uuid.UUID, name: str, step_id: int, now: datetime) -> tuple | None:
    """Bind the oldest kept signal of this name to the step; ``(data,)`` or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE durable_signal SET step_id = %s, consumed_at = %s WHERE id = ("
            " SELECT id FROM durable_signal WHERE instance_id = %s AND name = %s"
            " AND step_id IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING data",
            [step_id, now, instance_id, name],
        )
        row = cursor.fetchone()
    return None if row is None else (_decode(row[0]),)


def _decode(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


@register
class WaitForSignalKind(Kind):
    name = "wait_for_signal"
    leaf = True

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        timeout = node["timeout"]
        run_at = None if timeout is None else txn.now + timedelta(seconds=timeout)
        step = txn.insert_step(node, parent, status="ready", run_at=run_at, chunk_index=chunk_index)
        # A signal sent before this wait started was kept: take it and be due at once.
        _lock_signal(step.instance_id, node["signal"])
        if _take_kept(step.instance_id, node["signal"], step.id, txn.now) is not None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE durable_step SET run_at = %s WHERE id = %s", [txn.now, step.id]
                )
            txn.notify = True
        return step

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        name = node["signal"]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT data FROM durable_signal WHERE step_id = %s ORDER BY id LIMIT 1",
                [ctx.step_id],
            )
            row = cursor.fetchone()
        now = timezone.now()
        taken = (_decode(row[0]),) if row else _take_kept(ctx.instance_id, name, ctx.step_id, now)
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


def wait_for_signal(name: str, *, timeout: float | None = None) -> WaitForSignal:
    """Wait for ``signal(instance_id, name, data)``; the result is ``{"signal", "timed_out",
    "data"}``. With ``timeout`` (seconds) the wait ends with ``timed_out: true``."""
    return WaitForSignal(name, timeout=timeout)


# --- signal() and waits() -----------------------------------------------------------------------
def signal(instance_id: uuid.UUID | str, name: str, data: Any = None, *, user: Any = None) -> bool:
    """Send the event ``name`` with ``data`` (JSON) to an unfinished instance.

    True when a waiting step took it (it runs as soon as a worker is free), False when no wait
    is open yet: the signal is kept for the next ``wait_for_signal(name)``. Raises
    InstanceNotFound for a missing instance (or one ``user`` may not see) and SignalError for a
    finished instance, a workflow that never waits for ``name``, or data JSON cannot hold.
    Joins the caller's transaction.
    """
    from jobs.durable.api import _instance_id
    from jobs.durable.engine import NOTIFY_CHANNEL, load_graph
    from jobs.durable.graph import iter_spec
    from jobs.durable.models import Signal

    pk = _instance_id(instance_id)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise SignalError(f"signal name {name!r} must be an identifier")
    try:
        data = json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise SignalError(f"signal data must be JSON-serialisable: {exc}") from exc
    now = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Locking the instance row orders this signal against the transaction that
            # finishes the instance: either it sees the instance running, or finished.
            cursor.execute(
                "SELECT status, owner_id FROM durable_instance WHERE id = %s FOR UPDATE", [pk]
            )
            row = cursor.fetchone()
        if row is None or (user is not None and not user.is_staff and row[1] != user.pk):
            raise InstanceNotFound(f"no workflow instance {pk}")
        if row[0] not in ("pending", "running"):
            raise SignalError(
                f"workflow instance {pk} is {row[0]}: signal {name!r} cannot be delivered"
            )
        graph = load_graph(pk)
        nodes = [
            n["id"]
            for n in iter_spec(graph.spec)
            if n["kind"] == "wait_for_signal" and n["signal"] == name
        ]
        if not nodes:
            raise SignalError(f"workflow instance {pk} never waits for a signal named {name!r}")
        _lock_signal(pk, name)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s.id FROM durable_step AS s WHERE s.instance_id = %s"
                " AND s.node_id = ANY(%s) AND s.status = 'ready'"
                " AND NOT EXISTS (SELECT 1 FROM durable_signal AS g WHERE g.step_id = s.id)"
                " ORDER BY s.id LIMIT 1 FOR UPDATE",
                [pk, nodes],
            )
            waiting = cursor.fetchone()
        Signal.objects.create(
            instance_id=pk,
            name=name,
            data=data,
            step_id=waiting[0] if waiting else None,
            created_at=now,
            consumed_at=now if waiting else None,
        )
        if waiting:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE durable_step SET run_at = %s WHERE id = %s", [now, waiting[0]]
                )
                cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")
    return waiting is not None


def waits(instance_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """The open waits of an instance: ``[{"step", "kind", "label", "until", "signal",
    "signalled"}]`` — ``until`` is when the wait ends by itself (None: only a signal ends it),
    ``signal`` the awaited signal's name (None for timers), ``signalled`` whether a signal has
    arrived and the step only waits for a worker."""
    from jobs.durable.api import _instance_id
    from jobs.durable.engine import load_graph, node_label

    pk = _instance_id(instance_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id, s.key, s.node_id, s.kind, s.created_at,"
            " EXISTS (SELECT 1 FROM durable_signal AS g WHERE g.step_id = s.id)"
            " FROM durable_step AS s WHERE s.instance_id = %s AND s.kind = ANY(%s)"
            " AND s.status = 'ready' ORDER BY s.id",
            [pk, list(WAIT_KINDS)],
        )
        rows = cursor.fetchall()
    if not rows:
        return []
    graph = load_graph(pk)
    result = []
    for _id, key, node_id, kind, created_at, signalled in rows:
        node = graph.nodes[node_id]
        if kind == "sleep":
            until = created_at + timedelta(seconds=node["seconds"])
        elif kind == "wait_for_schedule":
            until = next_fire(node["cron"], created_at)
        elif node["timeout"] is not None:
            until = created_at + timedelta(seconds=node["timeout"])
        else:
            until = None
        result.append(
            {
                "step": key,
                "kind": kind,
                "label": node_label(node),
                "until": until,
                "signal": node.get("signal"),
                "signalled": bool(signalled),
            }
        )
    return result
