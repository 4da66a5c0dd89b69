"""The verbs that start and steer instances: start, status, result, error, cancel, signal and
instances. All are importable from ``jobs.durable``; reading what an instance is doing
(explain, current_step, waits) is :mod:`jobs.durable.inspection`, and the sweeper's lease
recovery is :mod:`jobs.durable.recovery`.

Each verb runs in the caller's transaction when there is one (``start()`` in particular: a
rolled-back start leaves nothing behind), else in its own.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobs.durable import launch, lifecycle, statements
from jobs.durable.engine import Txn, load_graph
from jobs.durable.errors import (
    DefinitionError,
    InstanceNotFound,
    SignalError,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowNotFinished,
)
from jobs.durable.graph import NAME_RE, Node, iter_spec
from jobs.durable.kinds.timers import lock_signal
from jobs.durable.models import (
    Instance,
    InstanceQuerySet,
    InstanceStatus,
    Signal,
    parse_instance_id,
)


def start(
    workflow: Node,
    *,
    label: str = "",
    owner: Any = None,
    input: Any = None,
    on_failure: str = "",
    user: Any = None,
    id: str | None = None,
    queue: str = "default",
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | None = None,
) -> WorkflowHandle:
    """Store the workflow's graph as a new instance and make its first step(s) ready.

    Joins the caller's transaction. ``owner`` is a user (or None); ``input`` is any JSON data,
    read by steps as ``ctx.input``; ``on_failure`` is the dotted path of
    ``fn(instance_id, error)``, called in the transaction that fails or cancels the instance.
    Raises DefinitionError for a malformed workflow, an unimportable task or hook, or input
    that JSON cannot hold. ``user`` is the person starting it (the owner unless ``owner`` is
    given): NotPermitted unless they hold the permissions it needs (jobs.durable.permissions).
    Returns a :class:`WorkflowHandle` (a UUID: usable wherever an instance id is).

    ``id``: the caller's id for it ("order-42"); the same start again returns the existing
    instance's handle, a different workflow or input raises WorkflowIdConflict
    (:mod:`jobs.durable.launch`). ``queue`` and ``priority`` (0..9, higher first) place its
    steps (:mod:`jobs.durable.queues`); ``run_at`` (an aware datetime) or ``delay`` (seconds)
    hold its first step back until then.
    """
    options = launch.prepare(
        workflow, label=label, owner=owner, on_failure=on_failure, user=user, queue=queue,
        priority=priority, run_at=run_at, delay=delay,
    )  # fmt: skip
    pks = launch.create(options, [input], None if id is None else [id])
    return WorkflowHandle(pks[0])


def start_many(
    workflow: Node,
    inputs: list[Any],
    *,
    label: str = "",
    owner: Any = None,
    on_failure: str = "",
    user: Any = None,
    ids: list[str] | None = None,
    queue: str = "default",
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | None = None,
) -> list[WorkflowHandle]:
    """``start()`` once per input, all in one statement (instances and their first steps);
    the handles in input order. ``ids``: one workflow id per input, as ``start(id=...)``."""
    inputs = list(inputs)
    if ids is not None and len(ids) != len(inputs):
        raise DefinitionError("start_many(): give one id per input")
    options = launch.prepare(
        workflow, label=label, owner=owner, on_failure=on_failure, user=user, queue=queue,
        priority=priority, run_at=run_at, delay=delay,
    )  # fmt: skip
    if not inputs:
        return []
    return [WorkflowHandle(pk) for pk in launch.create(options, inputs, ids)]


# Seconds between status reads while a handle waits: a safety net for a notification lost
# with a dropped connection, not the way a finish is noticed (that is the NOTIFY).
RESULT_RECHECK_SECONDS = 5.0


class WorkflowHandle(uuid.UUID):
    """An instance id (a :class:`uuid.UUID`, so ``str(h)``, filters and URLs take it as is)
    with the verbs that read its outcome.

    ``status()`` reads the status; ``result(timeout=None)`` waits until the instance finishes
    and returns its result, or raises :class:`WorkflowFailed` / :class:`WorkflowCancelled`,
    or :class:`TimeoutError` after ``timeout`` seconds. Waiting costs one idle connection of
    its own that LISTENs on ``durable_finished`` (the statement finishing an instance sends
    it): no polling. An instance started in the caller's still-open transaction cannot finish
    before that transaction commits, so waiting inside it only ends with the timeout.
    """

    __slots__ = ()

    def __init__(self, value: uuid.UUID | str) -> None:
        if isinstance(value, uuid.UUID):
            super().__init__(int=value.int)
        else:
            super().__init__(str(value))

    @property
    def id(self) -> uuid.UUID:
        """The plain UUID."""
        return uuid.UUID(int=self.int)

    def __repr__(self) -> str:
        return f"WorkflowHandle('{self}')"

    def status(self) -> str:
        return status(self)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the instance to finish; its result, or the exception its end calls for."""
        deadline = None if timeout is None else time.monotonic() + timeout
        state = status(self)  # InstanceNotFound for an id that does not exist
        if state not in ("pending", "running"):
            return result(self)
        with _listener() as listener:
            while True:
                # Read after LISTEN: a finish committed before it is seen here, one after it
                # is notified.
                if listener.status(self.id) not in ("pending", "running"):
                    return result(self)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"workflow instance {self} did not finish within {timeout:g}s"
                    )
                wait = RESULT_RECHECK_SECONDS if left is None else min(left, RESULT_RECHECK_SECONDS)
                listener.wait_for(str(self.id), wait)


class _listener:
    """A connection of its own, in autocommit, listening for instances finishing."""

    def __enter__(self) -> _listener:
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        # LISTEN needs a session: past a transaction pooler, the direct route (db.py).
        params.update(getattr(settings, "DATABASE_DIRECT", None) or {})
        self.conn = psycopg.connect(**params, autocommit=True)
        self.conn.execute(statements.LISTEN_FINISHED)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def status(self, instance_id: uuid.UUID) -> str | None:
        row = self.conn.execute(statements.INSTANCE_STATUS, [instance_id]).fetchone()
        return None if row is None else row[0]

    def wait_for(self, payload: str, seconds: float) -> None:
        """Return when ``payload`` is notified or ``seconds`` have passed."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            for note in self.conn.notifies(timeout=left, stop_after=1):
                if note.payload == payload:
                    return


def get_handle(instance_id: uuid.UUID | str) -> WorkflowHandle:
    """The handle of an existing instance (InstanceNotFound otherwise)."""
    pk = parse_instance_id(instance_id)
    Instance.objects.values_of(pk, "status")
    return WorkflowHandle(pk)


def status(instance_id: uuid.UUID | str) -> str:
    """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``."""
    return Instance.objects.values_of(instance_id, "status")[0]


def result(instance_id: uuid.UUID | str) -> Any:
    """The last step's output (JSON data) of a completed instance, without waiting.

    Raises WorkflowNotFinished while it is pending or running (a finished ``None`` result and
    "not yet" are told apart), WorkflowFailed or WorkflowCancelled when it ended so. To wait,
    use ``get_handle(id).result(timeout=...)``.
    """
    state, value, error_text = Instance.objects.values_of(instance_id, "status", "result", "error")
    if state == InstanceStatus.COMPLETED:
        return value
    if state == InstanceStatus.FAILED:
        raise WorkflowFailed(instance_id, error_text)
    if state == InstanceStatus.CANCELLED:
        raise WorkflowCancelled(instance_id)
    raise WorkflowNotFinished(f"workflow instance {instance_id} is {state}: no result yet")


def error(instance_id: uuid.UUID | str) -> str:
    """The error of a failed instance ('' otherwise)."""
    return Instance.objects.find(instance_id).error


def cancel(instance_id: uuid.UUID | str | None = None, **filters: Any) -> bool | int:
    """Cancel an unfinished instance: its unfinished steps never run (or never checkpoint),
    and its unfinished child workflows (and theirs) are cancelled in the same transaction
    (:func:`jobs.durable.engine.cancel_descendants`).

    Returns False when the instance had already finished (its unfinished descendants, if
    any, are cancelled all the same). The on_failure hook is called with the error
    ``"cancelled"``. Without an id, cancel every unfinished instance matching the filters
    (``label``, ``owner``, ``queue``, ``status``, ``created_before``, ``user``) in batches
    and return how many (:func:`jobs.durable.lifecycle.cancel_where`).
    """
    if instance_id is None:
        return lifecycle.cancel_where(**filters)
    if filters:
        raise TypeError("cancel() takes an instance id or filters, not both")
    pk = parse_instance_id(instance_id)
    with transaction.atomic():
        if not Instance.objects.filter(pk=pk).exists():
            raise InstanceNotFound(f"no workflow instance {pk}")
        txn = Txn(load_graph(pk))
        cancelled = txn.finish_instance(InstanceStatus.CANCELLED, "cancelled")
        if not cancelled:  # finish_instance cascades; a finished instance's live children
            lifecycle.cancel_descendants([pk], txn.now)
        return cancelled


def instances(
    owner: Any = None,
    status: str | None = None,
    label: str | None = None,
    *,
    user: Any = None,
) -> InstanceQuerySet:
    """Instances newest first, filtered; a lazy QuerySet (slice or paginate it).

    ``user``: restrict to what that user may see (staff everything, others their own).
    """
    qs = Instance.objects.defer("graph", "input", "result").order_by("-created_at")
    if status is not None:
        if status not in InstanceStatus.values:
            raise ValueError(
                f"unknown status {status!r}; expected one of {', '.join(InstanceStatus.values)}"
            )
        qs = qs.filter(status=status)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if label is not None:
        qs = qs.filter(label=label)
    if user is not None:
        qs = qs.visible_to(user)
    return qs


def signal(instance_id: uuid.UUID | str, name: str, data: Any = None, *, user: Any = None) -> bool:
    """Send the event ``name`` with ``data`` (JSON) to an unfinished instance.

    True when a waiting step took it (it runs as soon as a worker is free), False when no wait
    is open yet: the signal is kept for the next ``wait_for_signal(name)``. Raises
    InstanceNotFound for a missing instance (or one ``user`` may not see) and SignalError for a
    finished instance, a workflow that never waits for ``name``, or data JSON cannot hold.
    Joins the caller's transaction. (How waits take signals: :mod:`jobs.durable.kinds.timers`.)
    """
    pk = parse_instance_id(instance_id)
    if not isinstance(name, str) or not NAME_RE.match(name):
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
            cursor.execute(statements.LOCK_INSTANCE_FOR_SIGNAL, [pk])
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
        lock_signal(pk, name)
        with connection.cursor() as cursor:
            cursor.execute(statements.WAITING_STEP, [pk, nodes])
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
                cursor.execute(statements.WAKE_STEP, [now, waiting[0]])
                cursor.execute(statements.NOTIFY)
    return waiting is not None
