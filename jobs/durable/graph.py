"""Composition of durable workflows: the Python operators and the stored graph they compile to.

A workflow is a tree of :class:`Node` objects built with operators::

    task("app.steps.extract") >> task("app.steps.parse").as_("parsed")
        >> fan_out(task("app.steps.verify"), over="parsed", chunk=50).as_("verdicts")
        >> task("app.steps.finalize")

``compile_graph`` turns the tree into plain JSON (the *spec*), which ``start()`` stores on the
instance: workers only ever read the stored spec, so a deploy that changes the Python definition
never changes an instance in flight (upgrade safety).

Spec shape, one dict per node (numbered ``id`` in pre-order, unique within the graph)::

    {"id": 0, "kind": "seq", "name": "", "children": [...]}        # a >> b
    {"id": 1, "kind": "all", "name": "", "children": [...]}        # a & b
    {"id": 2, "kind": "fan_out", "over": "parsed", "chunk": 50, "children": [body]}
    {"id": 3, "kind": "task", "name": "x", "path": "pkg.mod.fn", "opts": {...}}
    {"id": 4, "kind": "sql", "name": "", "query": "UPDATE ...", "opts": {...}}

Adding a node kind (issue 5: race, when, loop, http, sleep, waits) takes two pieces: a Node
subclass here whose ``spec()`` emits the new ``kind`` (plus an operator or a constructor
function), and a runtime class registered in :mod:`jobs.durable.kinds` under the same name.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from jobs.durable.errors import DefinitionError

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# Step options every leaf accepts; validated here so a typo fails where the workflow is written.
_STEP_OPTIONS = ("max_attempts", "timeout", "backoff", "backoff_cap")


class Node:
    """A node of a workflow; combine with ``>>`` (sequence), ``&`` (join) and ``|`` (race)."""

    kind: str = ""
    name: str = ""

    def as_(self, name: str) -> Node:
        """Name this node's result, so later steps read it as ``ctx[name]`` / ``%(name)s``."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise DefinitionError(f"result name {name!r} must be a Python identifier")
        if name in ("input",):
            raise DefinitionError(f"result name {name!r} is reserved")
        clone = copy.copy(self)
        clone.name = name
        return clone

    def __rshift__(self, other: Node) -> Node:
        return Seq(*_flatten(Seq, self), *_flatten(Seq, _check_node(other)))

    def __and__(self, other: Node) -> Node:
        return All(*_flatten(All, self), *_flatten(All, _check_node(other)))

    def __or__(self, other: Node) -> Node:
        # The race node lives with the other control-flow kinds (jobs.durable.control).
        from jobs.durable.control import Race

        return Race(*_flatten(Race, self), *_flatten(Race, _check_node(other)))

    def spec(self) -> dict[str, Any]:
        """This node as JSON (without ids: ``compile_graph`` numbers the whole tree)."""
        raise NotImplementedError

    def _base(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}

    def __repr__(self) -> str:
        suffix = f".as_({self.name!r})" if self.name else ""
        return f"<{type(self).__name__}{suffix}>"


def _check_node(value: object) -> Node:
    if not isinstance(value, Node):
        raise DefinitionError(f"cannot compose a workflow node with {value!r}")
    return value


def _flatten(cls: type[Node], node: Node) -> list[Node]:
    # (a >> b) >> c is one sequence of three; a named group keeps its own node so its name
    # still marks the whole group's result.
    if type(node) is cls and not node.name:
        return list(node.children)  # type: ignore[attr-defined]
    return [node]


def _step_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_STEP_OPTIONS))
    if unknown:
        raise DefinitionError(
            f"unknown step option(s) {', '.join(unknown)}; allowed: {', '.join(_STEP_OPTIONS)}"
        )
    opts = {k: v for k, v in options.items() if v is not None}
    if "max_attempts" in opts and (
        not isinstance(opts["max_attempts"], int) or opts["max_attempts"] < 1
    ):
        raise DefinitionError("max_attempts must be a positive integer")
    for key in ("timeout", "backoff", "backoff_cap"):
        if key in opts and (not isinstance(opts[key], int | float) or opts[key] <= 0):
            raise DefinitionError(f"{key} must be a positive number of seconds")
    return opts


class Task(Node):
    """A Python step: ``fn(ctx)`` named by dotted path; its ORM writes commit with its checkpoint."""

    kind = "task"

    def __init__(self, path: str, **options: Any) -> None:
        if not isinstance(path, str) or not _PATH_RE.match(path):
            raise DefinitionError(f"task path {path!r} must be a dotted path like 'pkg.module.fn'")
        self.path = path
        self.opts = _step_options(options)

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "path": self.path, "opts": dict(self.opts)}

    def __repr__(self) -> str:
        return f"task({self.path!r}){'.as_(' + repr(self.name) + ')' if self.name else ''}"


class Sql(Node):
    """A SQL step; named results are bound as ``%(name)s`` parameters."""

    kind = "sql"

    def __init__(self, query: str, **options: Any) -> None:
        if not isinstance(query, str) or not query.strip():
            raise DefinitionError("sql() needs a non-empty SQL statement")
        self.query = query
        self.opts = _step_options(options)

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "query": self.query, "opts": dict(self.opts)}


class Seq(Node):
    """``a >> b``: run the children one after another; the result is the last child's."""

    kind = "seq"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a sequence needs at least two steps")
        self.children = [_check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


class All(Node):
    """``a & b``: run the children in parallel, wait for all; the result lists theirs in order."""

    kind = "all"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a join needs at least two branches")
        self.children = [_check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


class FanOut(Node):
    """One child per chunk of a named list result, claimable by any worker, joined in order."""

    kind = "fan_out"

    def __init__(self, step: Node, *, over: str, chunk: int = 1) -> None:
        step = _check_node(step)
        if step.kind not in ("task", "sql"):
            # Children of a fan-out are single checkpointed steps: a composite body would need
            # per-chunk scoping of its named results, which the engine does not offer.
            raise DefinitionError("fan_out() runs a single task or sql step per chunk")
        if not isinstance(over, str) or not _NAME_RE.match(over):
            raise DefinitionError(f"fan_out(over={over!r}) must name an earlier result")
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise DefinitionError(f"fan_out(chunk={chunk!r}) must be a positive integer")
        self.children = [step]
        self.over = over
        self.chunk = chunk

    def spec(self) -> dict[str, Any]:
        return {
            **self._base(),
            "over": self.over,
            "chunk": self.chunk,
            "children": [c.spec() for c in self.children],
        }


def task(path: str, **options: Any) -> Task:
    """A Python step. Options: ``max_attempts``, ``timeout``, ``backoff``, ``backoff_cap``."""
    return Task(path, **options)


def sql(query: str, **options: Any) -> Sql:
    """A SQL step: rows as a list of dicts, or the row count for a statement without rows."""
    return Sql(query, **options)


def fan_out(step: Node, *, over: str, chunk: int = 1) -> FanOut:
    """Run ``step`` once per chunk of ``chunk`` items of the list result named ``over``."""
    return FanOut(step, over=over, chunk=chunk)


def iter_spec(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a spec tree, in pre-order."""
    yield spec
    for child in spec.get("children", ()):
        yield from iter_spec(child)


def compile_graph(workflow: Node) -> dict[str, Any]:
    """Number the workflow's nodes and check it as a whole; the result is what start() stores."""
    workflow = _check_node(workflow)
    spec = workflow.spec()
    names: set[str] = set()
    for number, node in enumerate(iter_spec(spec)):
        node["id"] = number
        if node.get("name"):
            if node["name"] in names:
                raise DefinitionError(f"result name {node['name']!r} is used twice")
            names.add(node["name"])
    for node in iter_spec(spec):
        if node["kind"] == "fan_out" and node["over"] not in names:
            raise DefinitionError(
                f"fan_out(over={node['over']!r}): no step of this workflow is named "
                f"{node['over']!r} (name one with .as_({node['over']!r}))"
            )
        # Other kinds list the results they read under "refs" (when's and loop's conditions).
        for ref in node.get("refs", ()):
            if ref not in names:
                raise DefinitionError(
                    f"{node['kind']}(): no step of this workflow is named {ref!r}"
                    f" (name one with .as_({ref!r}))"
                )
    return spec
