"""Control flow at run time: ``race`` (``a | b``), ``when`` and ``loop`` (with ``Break``).

* **Race** — every branch is activated at once; the first child to complete wins: its output
  is the race's, and every unfinished step under the race (the losers' ready, waiting and
  running steps) is marked ``cancelled`` in the same transaction. A cancelled ready step is
  never claimed; a running one's checkpoint is fenced off and rolls back.
* **When** — the condition is evaluated when the ``when`` node is reached, in the transaction
  that reaches it: the truthiness of a named result (a missing result is false: a name set
  only on a branch not taken), or ``fn(ctx)`` named by dotted path. A name given by ``sql``
  steps is tested on its *value*: a one-row one-column result is that value's truth
  (``false``, ``0``, ``NULL``, ``''`` are false), a statement without rows its row count;
  any other shape is a DefinitionError at ``start()`` when the statement shows it (several
  columns, ``*``) and a permanent step failure otherwise (no rows, several rows).
* **Loop** — runs its body, then checks ``while_`` (same forms as ``when``; the body runs at
  least once, so the body can produce the result the condition reads). ``raise Break(value)``
  in a task ends the loop with ``value`` (:meth:`LoopKind.take_break`). Two bounds protect the
  database: ``max_iterations`` (the instance fails with a clear error beyond it) and
  ``history`` (only the step rows of the last ``history`` iterations are kept; older ones are
  deleted as the loop goes on, so a long polling loop does not grow its table without end).

A loop iteration's steps are keyed with the iteration number (``<loop key>/<body id>[i]``),
so the unique ``(instance, key)`` constraint still rules out double activation.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from jobs.durable.context import Context
from jobs.durable.errors import DefinitionError, PermanentError
from jobs.durable.kinds.base import Kind, register
from jobs.durable.state import StepRow, Transitions

SYNC_ITERATIONS = 50  # iterations one transaction may start (see LoopKind.child_done)


# --- conditions -------------------------------------------------------------------------------
def check_condition(cond: dict[str, str] | None, what: str) -> None:
    """At start(): a condition function must be importable and callable."""
    if cond and "path" in cond:
        try:
            fn = import_string(cond["path"])
        except ImportError as exc:
            raise DefinitionError(
                f"{what}: condition {cond['path']!r} cannot be imported: {exc}"
            ) from exc
        if not callable(fn):
            raise DefinitionError(f"{what}: condition {cond['path']!r} is not callable")


def _sql_nodes(nodes: Any, name: str) -> list[dict[str, Any]]:
    """The sql nodes that give results the name ``name`` (a condition's name)."""
    return [n for n in nodes if n["kind"] == "sql" and n.get("name") == name]


def sql_truth(name: str, value: Any) -> bool:
    """The truth of an sql step's result: its one value, or its row count."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value != 0  # a statement without rows: how many it touched
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        row = value[0]
        if len(row) == 1:
            return bool(next(iter(row.values())))
        shape = f"one row of {len(row)} columns"
    elif isinstance(value, list):
        shape = f"{len(value)} rows"
    else:
        shape = type(value).__name__
    raise PermanentError(
        f"condition {name!r}: an sql result tested by a condition must be one row of one"
        f" column (or a statement's row count); it is {shape}"
    )


def describe_condition(cond: dict[str, str] | None) -> str:
    if not cond:
        return "until Break"
    return cond.get("name") or cond["path"].rsplit(".", 1)[-1] + "()"


def evaluate(txn: Transitions, cond: dict[str, str]) -> bool:
    """The condition's truth, read in the transaction that reaches the node.

    Raises PermanentError when a condition function fails: the graph cannot go on.
    """
    if "name" in cond:
        found, value = txn.named(cond["name"])
        if not found:
            return False
        if _sql_nodes(txn.graph.nodes.values(), cond["name"]):
            return sql_truth(cond["name"], value)
        return bool(value)
    ctx = Context(instance_id=txn.graph.instance_id, input=txn.graph.input)
    try:
        # A savepoint: a condition that trips over a database error must not poison the
        # checkpoint transaction it runs in.
        with transaction.atomic():
            return bool(import_string(cond["path"])(ctx))
    except Exception as exc:
        raise PermanentError(
            f"condition {cond['path']} raised {type(exc).__name__}: {exc}"
        ) from exc


# --- race -------------------------------------------------------------------------------------
@register
class RaceKind(Kind):
    name = "race"
    fixed_activation = True  # its row, then its children's activations

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
        for child in node["children"]:
            txn.activate(child, step)
            # A branch can finish while being activated (a when with nothing to do): it won,
            # and the remaining branches must not start at all.
            if not txn.is_running(step):
                break
        return step

    def child_done(self, txn, node, step, child, output):
        txn.cancel_below(step)
        txn.complete(step, output)

    def describe(self, node):
        return node["name"] or "race (first wins)"


# --- when -------------------------------------------------------------------------------------
@register
class WhenKind(Kind):
    name = "when"

    def check(self, node):
        check_condition(node["cond"], "when")

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
        try:
            holds = evaluate(txn, node["cond"])
        except PermanentError as exc:
            txn.fail_step(step, f"when(): {exc}", fenced=False)
            return step
        children = node["children"]
        if holds:
            txn.activate(children[0], step)
        elif len(children) > 1:
            txn.activate(children[1], step)
        else:
            txn.complete(step, None)  # no otherwise branch: nothing to run
        return step

    def child_done(self, txn, node, step, child, output):
        txn.complete(step, output)

    def describe(self, node):
        label = f"when {describe_condition(node['cond'])}"
        return f"{node['name']} ({label})" if node["name"] else label


# --- loop -------------------------------------------------------------------------------------
@register
class LoopKind(Kind):
    name = "loop"
    fixed_activation = True  # its row, then its children's activations

    def check(self, node):
        check_condition(node["while"], "loop")

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        # ``remaining`` counts the iterations started (a loop has one child at a time).
        step = txn.insert_step(node, parent, status="running", remaining=1, chunk_index=chunk_index)
        txn.activate(node["children"][0], step, chunk_index=0)
        return step

    def child_done(self, txn, node, step, child, output):
        iteration = child.chunk_index or 0
        if node["while"] is None:
            again = True
        else:
            try:
                again = evaluate(txn, node["while"])
            except PermanentError as exc:
                txn.fail_step(step, f"loop: {exc}", fenced=False)
                return
        if not again:
            txn.complete(step, output)
            return
        following = iteration + 1
        if following >= node["max_iterations"]:
            txn.fail_step(
                step,
                f"loop {self.describe(node)} reached its bound of {node['max_iterations']}"
                " iterations without ending (raise Break or raise max_iterations)",
                fenced=False,
            )
            return
        # A body that completes while being activated ran no step at all (a when with
        # nothing to do): repeating it would recurse in this one transaction.
        started_here = txn.memo.setdefault("loop_iterations", {})
        started_here[step.id] = started_here.get(step.id, 0) + 1
        if started_here[step.id] > SYNC_ITERATIONS:
            txn.fail_step(
                step,
                f"loop {self.describe(node)}: its body ran no step in {SYNC_ITERATIONS}"
                " iterations in a row",
                fenced=False,
            )
            return
        body = node["children"][0]
        stale = following - node["history"]
        if stale >= 0:
            # Keep the last ``history`` iterations: the whole subtree of an older one goes.
            txn.delete_below(step, txn.child_key(body, step, stale))
        txn.set_remaining(step, following + 1)
        txn.activate(body, step, chunk_index=following)

    def take_break(self, txn: Transitions, node: dict[str, Any], step: StepRow, value: Any) -> bool:
        if step.status == "running":  # else cancelled meanwhile: nothing more to do
            txn.cancel_below(step)
            txn.complete(step, value)
        return True

    def describe(self, node):
        cond = node["while"]
        label = f"loop while {describe_condition(cond)}" if cond else "loop until Break"
        return f"{node['name']} ({label})" if node["name"] else label
