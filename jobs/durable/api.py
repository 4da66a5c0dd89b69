"""The verbs that start and steer instances: start, status, result, error, cancel, signal and
instances. All are importable from ``jobs.durable``; reading what an instance is doing
(explain, current_step, waits) is :mod:`jobs.durable.inspection`, and the sweeper's lease
recovery is :mod:`jobs.durable.recovery`.

Each verb runs in the caller's transaction when there is one (``start()`` in particular: a
rolled-back start leaves nothing behind), else in its own.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable import statements
from jobs.durable.engine import Txn, load_graph
from jobs.durable.errors import DefinitionError, InstanceNotFound, SignalError
from jobs.durable.graph import NAME_RE, Node, compile_graph, iter_spec
from jobs.durable.kinds import get_kind
from jobs.durable.kinds.timers import lock_signal
from jobs.durable.models import (
    Instance,
    InstanceQuerySet,
    InstanceStatus,
    Signal,
    parse_instance_id,
)
from jobs.durable.permissions import check_start
from jobs.durable.state import Graph


def start(
    workflow: Node,
    *,
    label: str = "",
    owner: Any = None,
    input: Any = None,
    on_failure: str = "",
    user: Any = None,
) -> uuid.UUID:
    """Store the workflow's graph as a new instance and make its first step(s) ready.

    Joins the caller's transaction. ``owner`` is a user (or None); ``input`` is any JSON data,
    read by steps as ``ctx.input``; ``on_failure`` is the dotted path of
    ``fn(instance_id, error)``, called in the transaction that fails or cancels the instance.
    Raises DefinitionError for a malformed workflow, an unimportable task or hook, or input
    that JSON cannot hold. ``user`` is the person starting it (the owner unless ``owner`` is
    given): NotPermitted unless they hold the permissions it needs (jobs.durable.permissions).
    """
    spec = compile_graph(workflow)
    for node in iter_spec(spec):
        get_kind(node["kind"]).check(node)
    if user is not None:
        check_start(user, spec)
        if owner is None:
            owner = user
    if not isinstance(label, str) or len(label) > 200:
        raise DefinitionError("label must be a string of at most 200 characters")
    if on_failure:
        try:
            hook = import_string(on_failure)
        except ImportError as exc:
            raise DefinitionError(f"on_failure {on_failure!r} cannot be imported: {exc}") from exc
        if not callable(hook):
            raise DefinitionError(f"on_failure {on_failure!r} is not callable")
    try:
        input = json.loads(json.dumps(input))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"workflow input must be JSON-serialisable: {exc}") from exc

    now = timezone.now()
    with transaction.atomic():
        instance = Instance.objects.create(
            label=label,
            owner=owner,
            graph=spec,
            input=input,
            on_failure=on_failure,
            created_at=now,
        )
        txn = Txn(Graph.build(instance.id, spec, input, on_failure), now)
        txn.activate(spec, None)
        txn.flush()
    return instance.id


def status(instance_id: uuid.UUID | str) -> str:
    """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``."""
    return Instance.objects.values_of(instance_id, "status")[0]


def result(instance_id: uuid.UUID | str) -> Any:
    """The last step's output (JSON data) of a completed instance; None until it completes."""
    state, value = Instance.objects.values_of(instance_id, "status", "result")
    return value if state == InstanceStatus.COMPLETED else None


def error(instance_id: uuid.UUID | str) -> str:
    """The error of a failed instance ('' otherwise)."""
    return Instance.objects.find(instance_id).error


def cancel(instance_id: uuid.UUID | str) -> bool:
    """Cancel an unfinished instance: its unfinished steps never run (or never checkpoint).

    Returns False when the instance had already finished. The on_failure hook is called with
    the error ``"cancelled"``.
    """
    pk = parse_instance_id(instance_id)
    with transaction.atomic():
        if not Instance.objects.filter(pk=pk).exists():
            raise InstanceNotFound(f"no workflow instance {pk}")
        return Txn(load_graph(pk)).finish_instance(InstanceStatus.CANCELLED, "cancelled")


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
