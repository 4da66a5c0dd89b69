"""Creating instances: what ``start()``, ``start_many()``, schedules, forks and child
workflows share.

A start is one statement (``statements.START_INSTANCES``): the instance rows (``ON CONFLICT
(id) DO NOTHING`` for ids given by the caller), every step row their first activation creates,
and the ``NOTIFY`` that wakes idle workers. The activation itself is the kinds' own code
(``Txn.activate``), run against :class:`PlannedTxn`, which records the rows it would insert
instead of sending them; a kind that does more on activation than insert rows (a ``when``
whose condition is false and that has no ``otherwise`` completes at once) makes the start fall
back to the ordinary transaction for that instance. ``start_many`` plans every instance and
sends them all in that one statement.

Workflow ids: ``start(flow, id="order-42")`` stores the instance under a primary key derived
from the id (:func:`jobs.durable.models.instance_pk_for`), so the database's primary key is
the uniqueness check: a second start with the same id (another process, a retried request)
finds the row, and returns it when its workflow and input are the same, or raises
:class:`~jobs.durable.errors.WorkflowIdConflict` otherwise. The id stays taken while the
instance is retained (``purge`` frees it).
"""

from __future__ import annotations

import json
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable import statements
from jobs.durable.db import decode_json, execute_prepared
from jobs.durable.engine import Txn
from jobs.durable.errors import DefinitionError, WorkflowIdConflict
from jobs.durable.graph import Node, as_workflow, compile_graph, iter_spec
from jobs.durable.kinds import children, get_kind
from jobs.durable.models import Instance, instance_pk_for
from jobs.durable.permissions import check_start
from jobs.durable.queues import DEFAULT_QUEUE, check_priority, check_queue_name
from jobs.durable.state import Graph, StepRow


@dataclass
class StartOptions:
    """Everything of a start but the input, checked once (``start_many`` shares it)."""

    spec: dict[str, Any]
    label: str
    owner_id: int | None
    on_failure: str
    queue: str
    priority: int
    run_at: datetime | None
    parent_instance: uuid.UUID | None = None
    parent_step_id: int | None = None
    forked_from: uuid.UUID | None = None


def prepare(
    workflow: Node | dict[str, Any],
    *,
    label: str = "",
    owner: Any = None,
    on_failure: str = "",
    user: Any = None,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | None = None,
) -> StartOptions:
    """Compile and check a start's workflow and options (DefinitionError, NotPermitted)."""
    spec = workflow if isinstance(workflow, dict) else compile_graph(as_workflow(workflow))
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
    check_queue_name(queue)
    check_priority(priority)
    if run_at is not None and delay is not None:
        raise DefinitionError("give run_at= or delay=, not both")
    if delay is not None:
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            raise DefinitionError(f"delay={delay!r} must be a number of seconds >= 0")
        run_at = timezone.now() + timedelta(seconds=delay)
    if run_at is not None and (not isinstance(run_at, datetime) or timezone.is_naive(run_at)):
        raise DefinitionError("run_at must be a timezone-aware datetime")
    return StartOptions(
        spec=spec,
        label=label,
        owner_id=getattr(owner, "pk", owner),
        on_failure=on_failure,
        queue=queue,
        priority=priority,
        run_at=run_at,
    )


def json_input(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"workflow input must be JSON-serialisable: {exc}") from exc


def check_workflow_id(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise DefinitionError(f"workflow id {value!r} must be a non-empty string of 200 characters")
    return value


class _NotPlannable(Exception):
    """The activation does more than insert rows: start this instance the ordinary way."""


class PlannedTxn(Txn):
    """A :class:`Txn` for a brand-new instance that records the step rows the activation
    inserts (numbered ``ord``; parents by their ``ord``) instead of sending them."""

    def __init__(self, graph: Graph, now: datetime, rows: list[dict[str, Any]]) -> None:
        super().__init__(graph, now)
        self.rows = rows
        self._status: dict[int, str] = {}

    def insert_step(self, node, parent, *, status, run_at=None, remaining=0, chunk_index=None,
                    chunk=None) -> StepRow:  # fmt: skip
        if run_at is not None and self.not_before is not None and run_at < self.not_before:
            run_at = self.not_before
        ord_ = len(self.rows) + 1
        key = self.child_key(node, parent, chunk_index)
        self.rows.append(
            {
                "ord": ord_,
                "parent": parent.id if parent else None,
                "instance": self.graph.instance_id,
                "key": key,
                "node": node["id"],
                "kind": node["kind"],
                "name": node.get("name", ""),
                "status": status,
                "max_attempts": max_attempts(node),
                "run_at": run_at,
                "remaining": remaining,
                "chunk_index": chunk_index,
                "chunk": None if chunk is None else json.dumps(chunk),
            }
        )
        self._status[ord_] = status
        if status == "ready" and run_at is not None and run_at <= self.now:
            self.notify = True
        # The row's ``id`` is its ord until the statement assigns real ids.
        return StepRow(
            ord_, self.graph.instance_id, parent.id if parent else None, key, node["id"],
            node["kind"], node.get("name", ""), status, 0, max_attempts(node), chunk_index, chunk,
        )  # fmt: skip

    def named(self, name: str) -> tuple[bool, Any]:
        return False, None  # a new instance has no completed step yet

    def is_running(self, step: StepRow) -> bool:
        return self._status.get(step.id) == "running"

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _NotPlannable

    # Anything that finishes, fails or reads steps: not a plain activation.
    insert_ready_children = complete = fail_step = cancel_below = delete_below = _refuse
    children_outputs = decrement = set_remaining = load_step = advance = _refuse
    finish_instance = checkpoint = break_out = _refuse


def max_attempts(node: dict[str, Any]) -> int:
    from jobs.durable.engine import _max_attempts

    return _max_attempts(node)


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    names = ("ord", "parent", "instance", "key", "node", "kind", "name", "status",
             "max_attempts", "run_at", "remaining", "chunk_index", "chunk")  # fmt: skip
    return {f"s_{name}": [row[name] for row in rows] for name in names}


def create(
    options: StartOptions,
    inputs: list[Any],
    workflow_ids: list[str] | None = None,
) -> list[uuid.UUID]:
    """Create one instance per input (in the caller's transaction, if any); returns their
    primary keys in input order. With ``workflow_ids``, an id already taken by an instance
    with the same workflow and input yields that instance; otherwise WorkflowIdConflict."""
    now = timezone.now()
    if workflow_ids is not None:
        pks = [instance_pk_for(check_workflow_id(w)) for w in workflow_ids]
        if len(set(pks)) != len(pks):
            raise DefinitionError("start_many(): the same workflow id is given twice")
    else:
        pks = [uuid.uuid4() for _ in inputs]
    inputs = [json_input(value) for value in inputs]
    rows: list[dict[str, Any]] = []
    unplanned: list[int] = []
    notify = False
    for index, (pk, value) in enumerate(zip(pks, inputs, strict=True)):
        graph = Graph.build(
            pk, options.spec, value, options.on_failure, options.queue, options.priority
        )
        txn = PlannedTxn(graph, now, rows)
        txn.not_before = options.run_at
        mark = len(rows)
        try:
            txn.activate(options.spec, None)
        except _NotPlannable:
            del rows[mark:]
            unplanned.append(index)
            continue
        notify = notify or txn.notify
    graph_json = json.dumps(options.spec)
    # One statement is atomic on its own: outside the caller's transaction, and with nothing
    # to activate the ordinary way, it is sent in autocommit (one round trip, no BEGIN).
    alone = not unplanned and not transaction.get_connection().in_atomic_block
    with nullcontext() if alone else transaction.atomic():
        created = {
            row[0]
            for row in execute_prepared(
                statements.START_INSTANCES,
                {
                    "ids": pks,
                    "inputs": [json.dumps(value) for value in inputs],
                    "wids": workflow_ids or [""] * len(pks),
                    "label": options.label,
                    "owner": options.owner_id,
                    "graph": graph_json,
                    "on_failure": options.on_failure,
                    "now": now,
                    "queue": options.queue,
                    "priority": options.priority,
                    "parent": options.parent_instance,
                    "parent_step": options.parent_step_id,
                    "forked_from": options.forked_from,
                    "n": len(rows),
                    "notify": notify,
                    **_columns(rows),
                },
            )
        }
        for index in unplanned:
            if pks[index] in created:
                graph = Graph.build(
                    pks[index], options.spec, inputs[index], options.on_failure,
                    options.queue, options.priority,
                )  # fmt: skip
                txn = Txn(graph, now)
                txn.not_before = options.run_at
                txn.activate(options.spec, None)
                txn.flush()
        if workflow_ids is not None:
            taken = [i for i, pk in enumerate(pks) if pk not in created]
            if taken:
                _check_same(options, [pks[i] for i in taken], [inputs[i] for i in taken],
                            [workflow_ids[i] for i in taken])  # fmt: skip
    return pks


def _check_same(
    options: StartOptions, pks: list[uuid.UUID], inputs: list[Any], workflow_ids: list[str]
) -> None:
    """Ids already taken: the same start again is fine, anything else is a conflict."""
    stored = {
        pk: (graph, value)
        for pk, graph, value in Instance.objects.filter(pk__in=pks).values_list(
            "pk", "graph", "input"
        )
    }
    for pk, value, workflow_id in zip(pks, inputs, workflow_ids, strict=True):
        graph, stored_input = stored.get(pk, (None, None))
        if pk not in stored:
            # Taken and purged again between the insert and this read: a conflict to retry.
            raise WorkflowIdConflict(f"workflow id {workflow_id!r} was taken meanwhile; retry")
        if decode_json(graph) != options.spec:
            raise WorkflowIdConflict(
                f"workflow id {workflow_id!r} is taken by an instance of another workflow"
            )
        if decode_json(stored_input) != value:
            raise WorkflowIdConflict(
                f"workflow id {workflow_id!r} is taken by an instance with another input"
            )


def start_child(
    parent_id: uuid.UUID, step_id: int, workflow_id: str, spec: dict[str, Any], input: Any
) -> None:
    """Create the child instance of a ``call`` step (see :mod:`jobs.durable.kinds.children`):
    the parent's owner, queue and priority, the parent recorded; an existing child with the
    same id (an earlier attempt's) is kept."""
    owner_id, queue, priority, label = Instance.objects.values_list(
        "owner_id", "queue", "priority", "label"
    ).get(pk=parent_id)
    options = StartOptions(
        spec=spec,
        label=f"{label} (child)" if label else "child",
        owner_id=owner_id,
        on_failure="",
        queue=queue,
        priority=priority,
        run_at=None,
        parent_instance=parent_id,
        parent_step_id=step_id,
    )
    create(options, [input], [workflow_id])


children.starter = start_child
