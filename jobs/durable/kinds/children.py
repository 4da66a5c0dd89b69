"""Child workflows: ``call(workflow)`` and ``fan_out`` of a whole sub-workflow.

A ``call`` step runs outside any transaction (like ``http``): its first attempt starts the
child instance — its graph was compiled into the parent's at start, so a deploy changes
neither — and goes back to waiting; later attempts read the child's status: its result
completes the step, a failed or cancelled child fails it (a permanent error), an unfinished
one sends the step back to waiting. Waiting uses no retry attempt (``RetryLater`` with
``counts=False``) and polls with a growing pause (``poll_delay``, at most
``MAX_POLL_SECONDS``).

Exactly one child per step: its workflow id is derived from the parent step
(``child:<instance>:<step>``), so an attempt that started the child and crashed before going
back to waiting finds that child again instead of starting another (the id is the child's
primary key). The child copies the parent's owner, queue and priority and records its parent
(``parent_instance``, ``parent_step_id``): purging the parent purges it too (``ON DELETE
CASCADE``), and a purge never takes a child on its own (:func:`jobs.durable.lifecycle.purge`).

Cancelling the parent, or its failing, cancels its unfinished children and theirs, in the
same transaction (:func:`jobs.durable.engine.cancel_descendants`); so does cancelling the
call step alone (a race it loses, a loop's ``Break``: :meth:`CallKind.child_instance` names
the step's child). The child is created in a transaction
that first share-locks the calling step, still running under this attempt's claim
(``LOCK_CALLING_STEP``): a cancel that reaches the step either waits for the child's insert,
and its cascade then finds the child, or came first, and no child starts. Resuming the
parent reopens the step, which finds the same child again; :func:`jobs.durable.lifecycle.resume`
resumes a failed or cancelled one with its parent.

How a child is created is the launcher's business (:mod:`jobs.durable.launch`, which sets
:data:`starter` when it is loaded); this module only asks, so the kinds need no import of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from jobs.durable import statements
from jobs.durable.context import Context
from jobs.durable.errors import DefinitionError, Fenced, PermanentError, RetryLater
from jobs.durable.graph import iter_spec
from jobs.durable.kinds.base import Kind, get_kind, register
from jobs.durable.models import Instance, instance_pk_for

MAX_POLL_SECONDS = 2.0

# fn(parent_id, step_id, workflow_id, spec, input) -> None: create the child instance.
starter: Callable[..., None] | None = None


def child_workflow_id(instance_id: Any, step_id: int) -> str:
    return f"child:{instance_id}:{step_id}"


def poll_delay(attempt: int) -> float:
    return min(MAX_POLL_SECONDS, 0.05 * 2 ** min(attempt, 6))


@register
class CallKind(Kind):
    name = "call"
    leaf = True
    transactional = False
    starts_instances = True

    def check(self, node: dict[str, Any]) -> None:
        if not isinstance(node.get("graph"), dict):
            raise DefinitionError("call(): no child workflow stored")
        for child in iter_spec(node["graph"]):
            get_kind(child["kind"]).check(child)

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        workflow_id = child_workflow_id(ctx.instance_id, ctx.step_id)
        row = (
            Instance.objects.filter(pk=instance_pk_for(workflow_id))
            .values_list("status", "result", "error")
            .first()
        )
        if row is None:
            if starter is None:
                raise RuntimeError("jobs.durable.launch is not loaded: cannot start a child")
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(statements.LOCK_CALLING_STEP, [ctx.step_id, ctx.attempt])
                    if cursor.fetchone() is None:
                        # Cancelled (its instance or an ancestor), or its lease recovered.
                        raise Fenced(f"call step {ctx.step_id} lost its claim: no child started")
                starter(
                    ctx.instance_id,
                    ctx.step_id,
                    workflow_id,
                    node["graph"],
                    child_input(ctx, node),
                )
            raise RetryLater("child workflow started", poll_delay(ctx.attempt), counts=False)
        status, result, error = row
        if status == "completed":
            return result
        if status in ("failed", "cancelled"):
            raise PermanentError(f"child workflow {workflow_id} {status}: {error}")
        raise RetryLater("child workflow unfinished", poll_delay(ctx.attempt), counts=False)

    def child_instance(self, instance_id: Any, step_id: int) -> uuid.UUID:
        return instance_pk_for(child_workflow_id(instance_id, step_id))

    def describe(self, node: dict[str, Any]) -> str:
        label = "call (child workflow)"
        return f"{node['name']} ({label})" if node["name"] else label


def child_input(ctx: Context, node: dict[str, Any]) -> Any:
    name = node.get("input_from")
    if name is None:
        return ctx.chunk if ctx.chunk_index is not None else ctx.input
    if name == "input":
        return ctx.input
    if name == "chunk":
        return ctx.chunk
    if name == "chunk_index":
        return ctx.chunk_index
    if name == "instance_id":
        return str(ctx.instance_id)
    return ctx[name]
