"""The registry of node kinds: what each kind does when activated, run, or told a child finished.

Every node of a stored graph has a ``kind``; :func:`get_kind` maps it to one :class:`Kind`
instance. The engine (:mod:`jobs.durable.engine`) and the worker only ever call these hooks:

``activate(txn, node, parent, chunk_index=, chunk=)``
    Create the node's step row (``txn.insert_step``) and, for a composite, start the children
    that run first (``txn.activate(child, step)``). A leaf is inserted ``ready`` (a timer kind
    would pass a later ``run_at``; a wait kind a status that no worker claims).
``execute(ctx, node)``  (leaves only)
    Do the work and return the JSON output. With ``transactional = True`` the worker calls it
    inside the checkpoint transaction (exactly once); a kind with outside effects (HTTP) sets
    it False: the worker then runs it outside any transaction and checkpoints afterwards
    (at-least-once).
``child_done(txn, node, step, child, output)``  (composites only)
    A child completed: activate the next one, or ``txn.complete(step, output)``. A race would
    complete on its first child and cancel the others' steps here; a loop would activate its
    body again (the step key then needs an iteration suffix).
``describe(node)``
    A short label for explain(), errors and the admin.

To add a kind: subclass :class:`Kind`, set ``name``, decorate with :func:`register`, and add
the matching Node class in :mod:`jobs.durable.graph`. Kinds of the same feature may instead
live, Node and Kind together, in their own module imported at the bottom of this one:
:mod:`jobs.durable.control` (race, when, loop), :mod:`jobs.durable.timers` (sleep, schedule
and signal waits), :mod:`jobs.durable.http`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import connection
from django.utils.module_loading import import_string
from psycopg.types.json import Jsonb

from jobs.durable.errors import Break, DefinitionError, DurableError

if TYPE_CHECKING:
    from jobs.durable.context import Context
    from jobs.durable.engine import StepRow, Txn

_REGISTRY: dict[str, Kind] = {}
_PARAM_RE = re.compile(r"%\((\w+)\)s")


def register(cls: type[Kind]) -> type[Kind]:
    """Class decorator: make a kind available to stored graphs under ``cls.name``."""
    _REGISTRY[cls.name] = cls()
    return cls


def get_kind(name: str) -> Kind:
    try:
        return _REGISTRY[name]
    except KeyError:
        # A graph stored by a newer release, read by an older worker during a rolling deploy.
        raise DurableError(
            f"unknown node kind {name!r} (is this worker older than the graph?)"
        ) from None


def composite_kinds() -> list[str]:
    """Names of the kinds that are not leaves (their steps are never claimed)."""
    return sorted(name for name, kind in _REGISTRY.items() if not kind.leaf)


class Kind:
    name: ClassVar[str] = ""
    leaf: ClassVar[bool] = False
    transactional: ClassVar[bool] = True

    def activate(
        self,
        txn: Txn,
        node: dict[str, Any],
        parent: StepRow | None,
        *,
        chunk_index: int | None = None,
        chunk: Any = None,
    ) -> StepRow | None:
        if self.leaf:
            return txn.insert_step(
                node, parent, status="ready", run_at=txn.now, chunk_index=chunk_index, chunk=chunk
            )
        raise NotImplementedError

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        raise NotImplementedError

    def child_done(
        self, txn: Txn, node: dict[str, Any], step: StepRow, child: StepRow, output: Any
    ) -> None:
        raise NotImplementedError

    def completes_with(self, node: dict[str, Any], child_node_id: int) -> bool:
        """True if this composite's step completes, with the child's output and nothing else
        done, as soon as that child completes (lets the engine finish a workflow whose root
        is this node in one statement: the child, this step and the instance)."""
        return False

    def follows(self, node: dict[str, Any], child_node_id: int) -> dict[str, Any] | None:
        """The child this composite activates, with nothing else done, when the given child
        completes (a sequence's next step), else None. Lets the engine checkpoint a step and
        activate its successor in one statement."""
        return None

    def check(self, node: dict[str, Any]) -> None:
        """Called by start() for each node: fail early on what the worker could not run."""

    def describe(self, node: dict[str, Any]) -> str:
        return node["name"] or node["kind"]


# --- leaves -----------------------------------------------------------------------------------
@register
class TaskKind(Kind):
    name = "task"
    leaf = True

    def check(self, node: dict[str, Any]) -> None:
        try:
            fn = import_string(node["path"])
        except ImportError as exc:
            raise DefinitionError(f"task {node['path']!r} cannot be imported: {exc}") from exc
        if not callable(fn):
            raise DefinitionError(f"task {node['path']!r} is not callable")

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        try:
            return import_string(node["path"])(ctx)
        except Break as brk:
            # Handed to Txn.checkpoint, which ends the enclosing loop (jobs.durable.control).
            return brk

    def describe(self, node: dict[str, Any]) -> str:
        path = node["path"].rsplit(".", 1)[-1]
        return f"{node['name']} ({path})" if node["name"] else path


# Names a SQL step may bind besides named results.
_SQL_BUILTINS = ("input", "chunk", "chunk_index", "instance_id")


def _sql_param(value: Any) -> Any:
    # Lists of scalars become PostgreSQL arrays (= ANY(%(ids)s)); objects and lists holding
    # objects go as jsonb.
    if isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
    ):
        return Jsonb(value)
    return value


@register
class SqlKind(Kind):
    name = "sql"
    leaf = True

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        params: dict[str, Any] = {}
        for name in dict.fromkeys(_PARAM_RE.findall(node["query"])):
            value = getattr(ctx, name) if name in _SQL_BUILTINS else ctx[name]
            params[name] = _sql_param(value)
        with connection.cursor() as cursor:
            cursor.execute(node["query"], params or None)
            if cursor.description is None:
                return cursor.rowcount
            columns = [col.name for col in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def describe(self, node: dict[str, Any]) -> str:
        query = " ".join(node["query"].split())
        short = query if len(query) <= 40 else query[:37] + "..."
        return f"{node['name']} (sql: {short})" if node["name"] else f"sql: {short}"


# --- composites -------------------------------------------------------------------------------
@register
class SeqKind(Kind):
    name = "seq"

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
        txn.activate(node["children"][0], step)
        return step

    def completes_with(self, node, child_node_id):
        return node["children"][-1]["id"] == child_node_id

    def follows(self, node, child_node_id):
        ids = [c["id"] for c in node["children"]]
        position = ids.index(child_node_id)
        return node["children"][position + 1] if position + 1 < len(ids) else None

    def child_done(self, txn, node, step, child, output):
        ids = [c["id"] for c in node["children"]]
        position = ids.index(child.node_id)
        if position + 1 == len(ids):
            txn.complete(step, output)
        else:
            txn.activate(node["children"][position + 1], step)

    def describe(self, node):
        return node["name"] or "sequence"


@register
class AllKind(Kind):
    name = "all"

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        children = node["children"]
        step = txn.insert_step(
            node, parent, status="running", remaining=len(children), chunk_index=chunk_index
        )
        for child in children:
            txn.activate(child, step)
        return step

    def child_done(self, txn, node, step, child, output):
        if txn.decrement(step) == 0:
            txn.complete(step, txn.children_outputs(step))

    def describe(self, node):
        return node["name"] or "all of"


@register
class FanOutKind(Kind):
    name = "fan_out"

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        found, items = txn.named(node["over"])
        body = node["children"][0]
        if not found or not isinstance(items, list):
            got = "nothing" if not found else type(items).__name__
            step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
            txn.fail_step(
                step,
                f"fan_out over {node['over']!r} needs a list result, got {got}",
                fenced=False,
            )
            return step
        size = node["chunk"]
        chunks = [
            (i, items[start : start + size]) for i, start in enumerate(range(0, len(items), size))
        ]
        step = txn.insert_step(
            node, parent, status="running", remaining=len(chunks), chunk_index=chunk_index
        )
        if not chunks:
            txn.complete(step, [])
        else:
            txn.insert_ready_children(body, step, chunks)
        return step

    def child_done(self, txn, node, step, child, output):
        if txn.decrement(step) != 0:
            return
        joined: list[Any] = []
        for part in txn.children_outputs(step):
            if isinstance(part, list):
                joined.extend(part)
            else:
                joined.append(part)
        txn.complete(step, joined)

    def describe(self, node):
        label = f"fan_out over {node['over']} by {node['chunk']}"
        return f"{node['name']} ({label})" if node["name"] else label


# --- part 2: control flow, timers and waits, HTTP (each module registers its kinds) -------------
import jobs.durable.control  # noqa: E402
import jobs.durable.http  # noqa: E402
import jobs.durable.timers  # noqa: E402, F401
