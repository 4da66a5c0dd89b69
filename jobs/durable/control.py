"""Control flow of durable workflows: ``a | b`` (race), ``when`` (branch), ``loop`` with ``Break``.

Each operator is a :class:`~jobs.durable.graph.Node` (what ``start()`` stores) and a registered
:class:`~jobs.durable.kinds.Kind` (what the engine does with it), kept side by side here.

* **Race** — every branch is activated at once; the first child to complete wins: its output
  is the race's, and every unfinished step under the race (the losers' ready, waiting and
  running steps) is marked ``cancelled`` in the same transaction. A cancelled ready step is
  never claimed; a running one's checkpoint is fenced off and rolls back.
* **When** — the condition is evaluated when the ``when`` node is reached, in the transaction
  that reaches it: the truthiness of a named result (a missing result is false: a name set
  only on a branch not taken), or ``fn(ctx)`` named by dotted path. Only a dotted path is
  stored, so graphs stay JSON and survive deploys.
* **Loop** — runs its body, then checks ``while_`` (same forms as ``when``; the body runs at
  least once, so the body can produce the result the condition reads). ``raise Break(value)``
  in a task ends the loop with ``value``. Two bounds protect the database: ``max_iterations``
  (the instance fails with a clear error beyond it) and ``history`` (only the step rows of the
  last ``history`` iterations are kept; older ones are deleted as the loop goes on, so a long
  polling loop does not grow its table without end).

A loop iteration's steps are keyed with the iteration number (``<loop key>/<body id>[i]``),
so the unique ``(instance, key)`` constraint still rules out double activation.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.utils.module_loading import import_string

from jobs.durable.context import Context, to_json
from jobs.durable.errors import Break, DefinitionError, PermanentError
from jobs.durable.graph import Node, _check_node
from jobs.durable.kinds import Kind, register

if TYPE_CHECKING:
    from jobs.durable.engine import StepRow, Txn

__all__ = ["Break", "Loop", "Race", "When", "loop", "when"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
DEFAULT_MAX_ITERATIONS = 1000
DEFAULT_HISTORY = 20
SYNC_ITERATIONS = 50  # iterations one transaction may start (see LoopKind.child_done)


# --- conditions -------------------------------------------------------------------------------
def condition(cond: Any, what: str) -> dict[str, str]:
    """A condition as stored JSON: ``{"name": result}`` or ``{"path": "pkg.mod.fn"}``."""
    if callable(cond) and not isinstance(cond, str):
        path = f"{getattr(cond, '__module__', '')}.{getattr(cond, '__qualname__', '')}"
        if "<" in path or not _PATH_RE.match(path):
            raise DefinitionError(
                f"{what}: condition {cond!r} cannot be stored; use a module-level function"
                " (not a lambda or a nested function) or its dotted path"
            )
        return {"path": path}
    if isinstance(cond, str):
        if _NAME_RE.match(cond):
            return {"name": cond}
        if _PATH_RE.match(cond):
            return {"path": cond}
    raise DefinitionError(
        f"{what}: condition {cond!r} must be a result name ('approved'), a dotted path"
        " ('pkg.module.fn') or a module-level function"
    )


def check_condition(cond: dict[str, str] | None, what: str) -> None:
    if cond and "path" in cond:
        try:
            fn = import_string(cond["path"])
        except ImportError as exc:
            raise DefinitionError(
                f"{what}: condition {cond['path']!r} cannot be imported: {exc}"
            ) from exc
        if not callable(fn):
            raise DefinitionError(f"{what}: condition {cond['path']!r} is not callable")


def describe_condition(cond: dict[str, str] | None) -> str:
    if not cond:
        return "until Break"
    return cond.get("name") or cond["path"].rsplit(".", 1)[-1] + "()"


def evaluate(txn: Txn, cond: dict[str, str]) -> bool:
    """The condition's truth, read in the transaction that reaches the node.

    Raises PermanentError when a condition function fails: the graph cannot go on.
    """
    if "name" in cond:
        found, value = txn.named(cond["name"])
        return bool(value) if found else False
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


def _still_running(step_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT status FROM durable_step WHERE id = %s", [step_id])
        row = cursor.fetchone()
    return row is not None and row[0] == "running"


def cancel_under(txn: Txn, step: StepRow) -> int:
    """Cancel every unfinished step below ``step`` (a race's losers, a broken loop's body).

    The LIKE prefix walks this instance's part of the (instance, key) unique index.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE durable_step SET status = 'cancelled', finished_at = %s,"
            " lease_owner = '', lease_expires_at = NULL"
            " WHERE instance_id = %s AND key LIKE %s AND status IN ('ready', 'running')",
            [txn.now, step.instance_id, step.key + "/%"],
        )
        return cursor.rowcount


def _fail(txn: Txn, step: StepRow, message: str) -> None:
    txn.fail_step(step, message, fenced=False)


# --- race -------------------------------------------------------------------------------------
class Race(Node):
    """``a | b``: run the branches in parallel; the first to finish wins, the others are
    cancelled. The result is the winner's."""

    kind = "race"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a race needs at least two branches")
        self.children = [_check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


@register
class RaceKind(Kind):
    name = "race"

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
        for child in node["children"]:
            txn.activate(child, step)
            # A branch can finish while being activated (a when with nothing to do): it won,
            # and the remaining branches must not start at all.
            if not _still_running(step.id):
                break
        return step

    def child_done(self, txn, node, step, child, output):
        cancel_under(txn, step)
        txn.complete(step, output)

    def describe(self, node):
        return node["name"] or "race (first wins)"


# --- when -------------------------------------------------------------------------------------
class When(Node):
    """``when(cond, then, otherwise)``: run ``then`` if ``cond`` holds, else ``otherwise``."""

    kind = "when"

    def __init__(self, cond: Any, then: Node, otherwise: Node | None = None) -> None:
        self.cond = condition(cond, "when")
        self.children = [_check_node(then)]
        if otherwise is not None:
            self.children.append(_check_node(otherwise))

    def spec(self) -> dict[str, Any]:
        spec = {
            **self._base(),
            "cond": dict(self.cond),
            "children": [c.spec() for c in self.children],
        }
        if "name" in self.cond:
            spec["refs"] = [self.cond["name"]]
        return spec


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
            _fail(txn, step, f"when(): {exc}")
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


def when(cond: Any, then: Node, otherwise: Node | None = None) -> When:
    """Branch on ``cond``: a result name (its truthiness), a dotted path or a module-level
    function ``fn(ctx) -> bool``. Without ``otherwise`` a false condition yields None."""
    return When(cond, then, otherwise)


# --- loop -------------------------------------------------------------------------------------
class Loop(Node):
    """``loop(body, while_=...)``: run ``body`` again while ``while_`` holds, or until Break."""

    kind = "loop"

    def __init__(
        self,
        body: Node,
        *,
        while_: Any = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        history: int = DEFAULT_HISTORY,
    ) -> None:
        self.children = [_check_node(body)]
        self.cond = None if while_ is None else condition(while_, "loop")
        for label, value in (("max_iterations", max_iterations), ("history", history)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DefinitionError(f"loop({label}={value!r}) must be a positive integer")
        self.max_iterations = max_iterations
        self.history = history

    def spec(self) -> dict[str, Any]:
        spec = {
            **self._base(),
            "while": None if self.cond is None else dict(self.cond),
            "max_iterations": self.max_iterations,
            "history": self.history,
            "children": [c.spec() for c in self.children],
        }
        if self.cond and "name" in self.cond:
            spec["refs"] = [self.cond["name"]]
        return spec


@register
class LoopKind(Kind):
    name = "loop"

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
                _fail(txn, step, f"loop: {exc}")
                return
        if not again:
            txn.complete(step, output)
            return
        following = iteration + 1
        if following >= node["max_iterations"]:
            _fail(
                txn,
                step,
                f"loop {self.describe(node)} reached its bound of {node['max_iterations']}"
                " iterations without ending (raise Break or raise max_iterations)",
            )
            return
        # A body that completes while being activated ran no step at all (a when with
        # nothing to do): repeating it would recurse in this one transaction.
        started_here = txn.__dict__.setdefault("_loop_iterations", {})
        started_here[step.id] = started_here.get(step.id, 0) + 1
        if started_here[step.id] > SYNC_ITERATIONS:
            _fail(
                txn,
                step,
                f"loop {self.describe(node)}: its body ran no step in {SYNC_ITERATIONS}"
                " iterations in a row",
            )
            return
        body = node["children"][0]
        stale = following - node["history"]
        if stale >= 0:
            # Keep the last ``history`` iterations: the whole subtree of an older one goes
            # in one statement (its rows' foreign keys are checked at commit).
            key = txn.child_key(body, step, stale)
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM durable_step WHERE instance_id = %s AND (key = %s OR key LIKE %s)",
                    [step.instance_id, key, key + "/%"],
                )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE durable_step SET remaining = %s WHERE id = %s", [following + 1, step.id]
            )
        txn.activate(body, step, chunk_index=following)

    def describe(self, node):
        cond = node["while"]
        label = f"loop while {describe_condition(cond)}" if cond else "loop until Break"
        return f"{node['name']} ({label})" if node["name"] else label


def loop(
    body: Node,
    *,
    while_: Any = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    history: int = DEFAULT_HISTORY,
) -> Loop:
    """Run ``body``; repeat while ``while_`` (result name, dotted path or function) holds.

    Without ``while_`` the loop runs until a task raises ``Break(value)``. ``max_iterations``
    bounds the iterations (the instance fails beyond it); ``history`` is how many iterations'
    step rows are kept.
    """
    return Loop(body, while_=while_, max_iterations=max_iterations, history=history)


# --- Break --------------------------------------------------------------------------------------
def break_loop(txn: Txn, step: StepRow, brk: Break) -> None:
    """A claimed task raised Break: checkpoint it and end its nearest enclosing loop.

    Called by ``Txn.checkpoint`` in the task's transaction; raises Fenced (roll back) when
    the claim was lost, PermanentError when no loop encloses the task.
    """
    from jobs.durable.engine import Fenced

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
            " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
            " WHERE id = %s AND status = 'running' AND attempts = %s",
            [to_json(brk.value), txn.now, step.id, step.attempts],
        )
        if cursor.rowcount != 1:
            raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
    ancestor_id = step.parent_id
    while ancestor_id is not None:
        ancestor = txn.load_step(ancestor_id)
        if ancestor.kind == "loop":
            if ancestor.status != "running":
                return  # cancelled meanwhile
            cancel_under(txn, ancestor)
            txn.complete(ancestor, brk.value)
            return
        ancestor_id = ancestor.parent_id
    raise PermanentError("Break was raised by a step that is not inside a loop()")
