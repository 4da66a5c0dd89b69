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

What a start repeats is cached per spec (:class:`Compiled`, keyed by the compiled spec's JSON
text, itself cached per distinct tree by :func:`jobs.durable.graph.compile_graph_text`): the
kinds' checks, the JSON stored, and — when every kind the first activation runs says its
activation is fixed (``Kind.fixed_activation``: the rows depend on the node alone, a step due
at ``txn.now`` itself) — that activation's rows as the statement's arrays (:class:`Plan`),
so a start of such a workflow only adds its instance id. Anything else (a ``when`` reading
the input, a timer's due time, a signal wait reading the database) is planned per instance as
before. start() sends the statement prepared, and PostgreSQL then runs it on its generic plan:
planning this statement cost more than running it. start() of one instance of a planned spec
sends a statement of that plan's own instead (``statements.start_one_sql``: plain inserts with
the plan's rows and the graph written in), some 30-40% less server CPU than START_INSTANCES.

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
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable import statements
from jobs.durable.db import decode_json, execute_prepared
from jobs.durable.engine import Txn
from jobs.durable.errors import DefinitionError, WorkflowIdConflict
from jobs.durable.graph import Node, as_workflow, compile_graph_text, iter_spec
from jobs.durable.kinds import children, get_kind
from jobs.durable.models import Instance, instance_pk_for
from jobs.durable.permissions import check_start
from jobs.durable.queues import DEFAULT_QUEUE, check_priority, check_queue_name
from jobs.durable.sessions import code_version
from jobs.durable.state import Graph, StepRow


@dataclass
class Compiled:
    """A compiled workflow as start() needs it, shared by every start of the same spec.

    ``spec`` is shared: never change it. ``checked``: every node passed its kind's ``check``
    (importable tasks, parseable SQL), which depends on nothing but the node. ``plan``: the
    first activation, planned once when every kind it runs says it is fixed
    (:attr:`jobs.durable.kinds.Kind.fixed_activation`), with the default attempts it was
    planned under; None until planned, ``False`` when it cannot be reused.
    """

    spec: dict[str, Any]
    text: str
    checked: bool = False
    plan: Plan | bool | None = None
    plan_attempts: int | None = None


# Compiled workflows by their spec's JSON text, least recently used last.
_compiled: OrderedDict[str, Compiled] = OrderedDict()
_COMPILED_CACHE_SIZE = 256


def compiled(workflow: Node | dict[str, Any] | str) -> Compiled:
    """The cache entry of a workflow (a node, a ``@workflow`` function, or a compiled spec as
    a dict or as its JSON text). Keyed by the spec's text, so a changed node is never served
    the entry of what it was."""
    if isinstance(workflow, str):
        text = workflow
    elif isinstance(workflow, dict):
        text = json.dumps(workflow)
    else:
        text = compile_graph_text(as_workflow(workflow))
    entry = _compiled.get(text)
    if entry is not None:
        with suppress(KeyError):  # another thread may have just evicted it
            _compiled.move_to_end(text)
        return entry
    entry = Compiled(spec=json.loads(text), text=text)
    _compiled[text] = entry
    if len(_compiled) > _COMPILED_CACHE_SIZE:
        with suppress(KeyError):
            _compiled.popitem(last=False)
    return entry


def clear_compiled_cache() -> None:
    """Forget every compiled workflow and plan (tests that swap settings or code)."""
    _compiled.clear()


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
    # The spec's cache entry, when prepare() made the options (else found from ``spec``).
    compiled: Compiled | None = field(default=None, repr=False, compare=False)


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
    entry = compiled(workflow)
    spec = entry.spec
    if not entry.checked:
        for node in iter_spec(spec):
            get_kind(node["kind"]).check(node)
        entry.checked = True
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
    check_priority(priority, queue)
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
        compiled=entry,
    )


def json_input(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"workflow input must be JSON-serialisable: {exc}") from exc


def _input_text(value: Any) -> str:
    """The input as the JSON text stored (what json_input() would give, as text)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"workflow input must be JSON-serialisable: {exc}") from exc


def check_workflow_id(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise DefinitionError(f"workflow id {value!r} must be a non-empty string of 200 characters")
    return value


class _NotPlannable(Exception):
    """The activation does more than insert rows: start this instance the ordinary way."""


# The columns of a planned step row, as START_INSTANCES reads them (one array each): the row's
# number within its instance and its parent's, the step's columns, and its due time as ``due``
# (the start's own: now, or its run_at) or an explicit ``run_at``. The instance is a column of
# its own (``s_instance``): a plan serves every instance.
# Planned rows beyond which start() of one instance sends START_INSTANCES rather than a
# statement of the plan's own (each row is a CTE of its own there).
START_ONE_MAX_ROWS = 16

_ROW_FIELDS = ("ord", "parent", "key", "node", "kind", "name", "status", "max_attempts",
               "due", "run_at", "remaining", "chunk_index", "chunk")  # fmt: skip


def _literal(value: Any) -> str:
    """One element of a PostgreSQL array literal: NULL, a number or boolean, else quoted text
    (a chunk as its JSON text, a time in ISO 8601)."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array(elements: list[str]) -> str:
    return "{" + ",".join(elements) + "}"


class PlannedTxn(Txn):
    """A :class:`Txn` for a brand-new instance that records the step rows the activation
    inserts (numbered ``ord``; parents by their ``ord``) instead of sending them.

    A step due "now" (the kinds pass ``txn.now`` itself) is recorded as due at the start's
    time rather than at a timestamp, so a plan can serve a later start too; ``fixed`` stays
    True while every activated node's kind says its activation is fixed."""

    def __init__(self, graph: Graph, now: datetime, rows: list[dict[str, Any]]) -> None:
        super().__init__(graph, now)
        self.rows = rows
        self.first = len(rows)
        self._status: dict[int, str] = {}
        self.fixed = True

    def activate(self, node, parent, *, chunk_index=None, chunk=None):  # fmt: skip
        if not get_kind(node["kind"]).fixed_activation:
            self.fixed = False
        return super().activate(node, parent, chunk_index=chunk_index, chunk=chunk)

    def insert_step(self, node, parent, *, status, run_at=None, remaining=0, chunk_index=None,
                    chunk=None) -> StepRow:  # fmt: skip
        due = run_at is self.now
        if not due and run_at is not None:
            self.fixed = False  # a time of its own (a timer): true of this start only
        if run_at is not None and self.not_before is not None and run_at < self.not_before:
            run_at = self.not_before
        ord_ = len(self.rows) - self.first + 1
        key = self.child_key(node, parent, chunk_index)
        self.rows.append(
            {
                "ord": ord_,
                "parent": parent.id if parent else None,
                "key": key,
                "node": node["id"],
                "kind": node["kind"],
                "name": node.get("name", ""),
                "status": status,
                "max_attempts": max_attempts(node),
                "due": due,
                "run_at": None if due or run_at is None else run_at.isoformat(),
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


@dataclass(frozen=True)
class Plan:
    """A first activation that is the same for every start of its spec: per column, its
    rows' array elements (joined), and whether a step is ready at once."""

    rows: int
    columns: dict[str, str]  # "s_<field>" -> the elements of one instance's rows, joined
    ready_now: bool  # a ready step due at the start's time (a NOTIFY unless delayed)
    # The rows themselves (start_one_sql writes them into start()'s statement).
    planned: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    single: dict[str, str] = field(init=False, repr=False)
    # start()'s statements for this plan, by whether it skips an id already taken and whether
    # it has a workflow id, parent or fork (start_one_sql's ``lineage``).
    statements: dict[tuple[bool, bool], str] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        single = {name: _array([elements]) for name, elements in self.columns.items()}
        object.__setattr__(self, "single", single)

    def start_one_sql(self, graph: str, *, conflict: bool, lineage: bool = True) -> str:
        """The statement that starts one instance of this plan (``statements.start_one_sql``),
        made once per plan and variant."""
        sql = self.statements.get((conflict, lineage))
        if sql is None:
            sql = statements.start_one_sql(
                graph, list(self.planned), conflict=conflict, lineage=lineage
            )
            self.statements[conflict, lineage] = sql
        return sql

    def params(self, pks: list[str]) -> dict[str, str]:
        """The step arrays for these instances (their ids as text), each getting every row."""
        count = len(pks)
        if count == 1:  # start(): the same arrays every time but for the instance
            return {**self.single, "s_instance": _array(pks * self.rows)}
        params = {name: _array([elements] * count) for name, elements in self.columns.items()}
        per_instance = pks if self.rows == 1 else [pk for pk in pks for _ in range(self.rows)]
        params["s_instance"] = _array(per_instance)
        return params


def _columns(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """The step arrays of ``(instance id as text, row)`` pairs."""
    params = {f"s_{name}": _array([_literal(row[name]) for _, row in rows]) for name in _ROW_FIELDS}
    params["s_instance"] = _array([pk for pk, _ in rows])
    return params


def _plan_once(entry: Compiled, options: StartOptions, pk: uuid.UUID, value: Callable[[], Any],
               now: datetime) -> Plan | None:  # fmt: skip
    """The entry's reusable plan: made by activating once (for any start; ``value()`` gives
    the input to activate with), or None when this spec's first activation may depend on the
    input, the time or the database."""
    attempts = settings.ACURIO_MAX_ATTEMPTS
    if entry.plan is not None and entry.plan_attempts == attempts:
        return entry.plan or None
    graph = Graph.build(
        pk, entry.spec, value(), options.on_failure, options.queue, options.priority
    )
    rows: list[dict[str, Any]] = []
    txn = PlannedTxn(graph, now, rows)  # no not_before: a plan is made for any start time
    try:
        txn.activate(entry.spec, None)
    except _NotPlannable:
        txn.fixed = False
    plan: Plan | bool = False
    if txn.fixed:
        columns = {
            f"s_{name}": ",".join(_literal(row[name]) for row in rows) for name in _ROW_FIELDS
        }
        ready_now = any(row["status"] == "ready" and row["due"] for row in rows)
        plan = Plan(len(rows), columns, ready_now, planned=tuple(rows))
    entry.plan, entry.plan_attempts = plan, attempts
    return plan or None


def create(
    options: StartOptions,
    inputs: list[Any],
    workflow_ids: list[str] | None = None,
) -> list[uuid.UUID]:
    """Create one instance per input (in the caller's transaction, if any); returns their
    primary keys in input order. With ``workflow_ids``, an id already taken by an instance
    with the same workflow and input yields that instance; otherwise WorkflowIdConflict.

    The step rows of each instance's first activation come from the spec's plan when it has
    one (:func:`_plan_once`), else from activating it for this instance (PlannedTxn); an
    instance whose activation does more than insert rows is activated the ordinary way after
    the statement."""
    now = timezone.now()
    entry = options.compiled or compiled(options.spec)
    if workflow_ids is not None:
        pks = [instance_pk_for(check_workflow_id(w)) for w in workflow_ids]
        if len(set(pks)) != len(pks):
            raise DefinitionError("start_many(): the same workflow id is given twice")
    else:
        pks = [uuid.uuid4() for _ in inputs]
    plan = None
    if pks:
        plan = _plan_once(entry, options, pks[0], lambda: json_input(inputs[0]), now)
    due = now if options.run_at is None or options.run_at < now else options.run_at
    if plan is not None and len(pks) == 1 and plan.rows <= START_ONE_MAX_ROWS:
        return _create_one(options, entry, plan, pks[0], inputs[0], workflow_ids, now, due)
    inputs_text = _input_text(inputs)  # one JSON array, as the statement reads them
    ids = [str(pk) for pk in pks]
    unplanned: list[int] = []
    # The inputs as stored (decoded), where needed: to plan each instance, to compare with an
    # instance that holds the id already.
    values = json.loads(inputs_text) if plan is None or workflow_ids is not None else []
    if plan is not None:
        steps = plan.params(ids)
        notify = plan.ready_now and (options.run_at is None or options.run_at <= now)
    else:
        notify = False
        rows: list[tuple[str, dict[str, Any]]] = []
        for index, (pk, value) in enumerate(zip(pks, values, strict=True)):
            graph = Graph.build(
                pk, options.spec, value, options.on_failure, options.queue, options.priority
            )
            planned: list[dict[str, Any]] = []
            txn = PlannedTxn(graph, now, planned)
            txn.not_before = options.run_at
            try:
                txn.activate(options.spec, None)
            except _NotPlannable:
                unplanned.append(index)
                continue
            rows += [(ids[index], row) for row in planned]
            notify = notify or txn.notify
        steps = _columns(rows)
    params = {
        "ids": _array(ids),
        "inputs": inputs_text,
        "wids": None if workflow_ids is None else json.dumps(workflow_ids),
        "label": options.label,
        "owner": options.owner_id,
        "graph": entry.text,
        "on_failure": options.on_failure,
        "now": now,
        "due": due,
        "queue": options.queue,
        "priority": options.priority,
        "parent": options.parent_instance,
        "parent_step": options.parent_step_id,
        "forked_from": options.forked_from,
        "notify": notify,
        "version": code_version(),
        **steps,
    }
    # One statement is atomic on its own: outside the caller's transaction, and with nothing
    # to activate the ordinary way, it is sent in autocommit (one round trip, no BEGIN).
    alone = not unplanned and not transaction.get_connection().in_atomic_block
    with nullcontext() if alone else transaction.atomic():
        sql = statements.START_INSTANCES if workflow_ids else statements.START_NEW_INSTANCES
        created = {row[0] for row in _execute_start(sql, params, many=len(pks) > 1)}
        for index in unplanned:
            if pks[index] in created:
                graph = Graph.build(
                    pks[index], options.spec, values[index], options.on_failure,
                    options.queue, options.priority,
                )  # fmt: skip
                txn = Txn(graph, now)
                txn.not_before = options.run_at
                txn.activate(options.spec, None)
                txn.flush()
        if workflow_ids is not None:
            taken = [i for i, pk in enumerate(pks) if pk not in created]
            if taken:
                _check_same(options, [pks[i] for i in taken], [values[i] for i in taken],
                            [workflow_ids[i] for i in taken])  # fmt: skip
    return pks


def _create_one(
    options: StartOptions,
    entry: Compiled,
    plan: Plan,
    pk: uuid.UUID,
    value: Any,
    workflow_ids: list[str] | None,
    now: datetime,
    due: datetime,
) -> list[uuid.UUID]:
    """create() of one instance of a planned spec: its plan's own statement
    (``statements.start_one_sql``), prepared, in autocommit outside ``atomic``."""
    input_text = _input_text(value)
    params = {
        "id": pk,
        "input": input_text,
        "label": options.label,
        "owner": options.owner_id,
        "on_failure": options.on_failure,
        "now": now,
        "due": due,
        "queue": options.queue,
        "priority": options.priority,
        "notify": plan.ready_now and due <= now,
        "version": code_version(),
    }
    lineage = (
        workflow_ids is not None
        or options.parent_instance is not None
        or options.parent_step_id is not None
        or options.forked_from is not None
    )
    if lineage:
        params["wid"] = workflow_ids[0] if workflow_ids is not None else ""
        params["parent"] = options.parent_instance
        params["parent_step"] = options.parent_step_id
        params["forked_from"] = options.forked_from
    sql = plan.start_one_sql(entry.text, conflict=workflow_ids is not None, lineage=lineage)
    created = execute_prepared(sql, params)
    if workflow_ids is not None and not created:
        _check_same(options, [pk], [json.loads(input_text)], workflow_ids)
    return [pk]


def _execute_start(sql: str, params: dict[str, Any], *, many: bool) -> list[tuple]:
    """Send START_INSTANCES (or START_NEW_INSTANCES). One instance: prepared, so PostgreSQL
    settles on its generic plan and stops planning it per start (planning costs more than the
    inserts). Many: not prepared, so each is planned with its real row counts (a generic plan
    sized for a few rows would be a poor one for twenty thousand)."""
    if not many:
        return execute_prepared(sql, params)
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=False)
        return cursor.fetchall()


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
