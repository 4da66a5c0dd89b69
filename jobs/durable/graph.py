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

Every node of the language lives here: the operators (``>>``, ``&``, ``|``, ``as_``), the
steps (``task``, ``sql``, ``http``), ``fan_out``, control flow (``when``, ``loop``) and the
waits (``sleep``, ``wait_for_schedule``, ``wait_for_signal``). This module is pure Python: it
imports nothing of Django, so workflows can be defined at import time anywhere.

Adding a node kind takes two pieces: a Node subclass here whose ``spec()`` emits the new
``kind`` (plus an operator or a constructor function), and a runtime class registered in the
:mod:`jobs.durable.kinds` package under the same name.
"""

from __future__ import annotations

import copy
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from croniter import croniter

from jobs.durable import sqlcheck
from jobs.durable.errors import DefinitionError

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# A named result bound into a SQL statement or an HTTP URL: %(name)s.
PARAM_RE = re.compile(r"%\((\w+)\)s")
# Names a SQL step, a URL placeholder or body_from may use besides named results.
BUILTIN_NAMES = ("input", "chunk", "chunk_index", "instance_id")
# Step options every leaf accepts; validated here so a typo fails where the workflow is written.
STEP_OPTIONS = ("max_attempts", "timeout", "backoff", "backoff_cap")


class Node:
    """A node of a workflow; combine with ``>>`` (sequence), ``&`` (join) and ``|`` (race)."""

    kind: str = ""
    name: str = ""

    def as_(self, name: str) -> Node:
        """Name this node's result, so later steps read it as ``ctx[name]`` / ``%(name)s``."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise DefinitionError(f"result name {name!r} must be a Python identifier")
        if name in ("input",):
            raise DefinitionError(f"result name {name!r} is reserved")
        clone = copy.copy(self)
        clone.name = name
        return clone

    def __rshift__(self, other: Node) -> Node:
        return Seq(*_flatten(Seq, self), *_flatten(Seq, check_node(other)))

    def __and__(self, other: Node) -> Node:
        return All(*_flatten(All, self), *_flatten(All, check_node(other)))

    def __or__(self, other: Node) -> Node:
        return Race(*_flatten(Race, self), *_flatten(Race, check_node(other)))

    def spec(self) -> dict[str, Any]:
        """This node as JSON (without ids: ``compile_graph`` numbers the whole tree)."""
        raise NotImplementedError

    def _base(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}

    def __repr__(self) -> str:
        suffix = f".as_({self.name!r})" if self.name else ""
        return f"<{type(self).__name__}{suffix}>"


def check_node(value: object) -> Node:
    """``value`` if it is a workflow node, else a DefinitionError."""
    if not isinstance(value, Node):
        raise DefinitionError(f"cannot compose a workflow node with {value!r}")
    return value


def _flatten(cls: type[Node], node: Node) -> list[Node]:
    # (a >> b) >> c is one sequence of three; a named group keeps its own node so its name
    # still marks the whole group's result.
    if type(node) is cls and not node.name:
        return list(node.children)  # type: ignore[attr-defined]
    return [node]


def step_options(options: dict[str, Any]) -> dict[str, Any]:
    """The retry and timeout options of a leaf, checked; unset (None) ones left out."""
    unknown = sorted(set(options) - set(STEP_OPTIONS))
    if unknown:
        raise DefinitionError(
            f"unknown step option(s) {', '.join(unknown)}; allowed: {', '.join(STEP_OPTIONS)}"
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
        if not isinstance(path, str) or not PATH_RE.match(path):
            raise DefinitionError(f"task path {path!r} must be a dotted path like 'pkg.module.fn'")
        self.path = path
        isolate = options.pop("isolate", False)
        memory_mb = options.pop("memory_mb", None)
        self.opts = step_options(options)
        if not isinstance(isolate, bool):
            raise DefinitionError("isolate must be True or False")
        if memory_mb is not None and not isolate:
            raise DefinitionError("memory_mb applies to isolated tasks: add isolate=True")
        if memory_mb is not None and (
            not isinstance(memory_mb, int) or isinstance(memory_mb, bool) or memory_mb < 1
        ):
            raise DefinitionError("memory_mb must be a positive whole number of megabytes")
        if isolate:
            # Run in a child process (jobs.durable.isolation); unset budgets are the settings'.
            self.opts["isolate"] = True
            if memory_mb is not None:
                self.opts["memory_mb"] = memory_mb

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
        self.opts = step_options(options)

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "query": self.query, "opts": dict(self.opts)}


class Seq(Node):
    """``a >> b``: run the children one after another; the result is the last child's."""

    kind = "seq"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a sequence needs at least two steps")
        self.children = [check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


class All(Node):
    """``a & b``: run the children in parallel, wait for all; the result lists theirs in order."""

    kind = "all"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a join needs at least two branches")
        self.children = [check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


class FanOut(Node):
    """One child per chunk of a named list result, claimable by any worker, joined in order."""

    kind = "fan_out"

    def __init__(self, step: Node, *, over: str, chunk: int = 1) -> None:
        step = check_node(step)
        if step.kind not in ("task", "sql", "call"):
            # Children of a fan-out are single checkpointed steps; a whole sub-workflow runs
            # per chunk as a child instance of its own (call()), whose named results are its
            # own, with the chunk as its input.
            step = Call(step)
        if not isinstance(over, str) or not NAME_RE.match(over):
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


class Call(Node):
    """A child workflow: a step that starts ``workflow`` as an instance of its own and whose
    result is that instance's result (see :mod:`jobs.durable.kinds.children`)."""

    kind = "call"

    def __init__(self, workflow: Node, *, input_from: str | None = None, **options: Any) -> None:
        self.workflow = as_workflow(workflow)
        if input_from is not None and (
            not isinstance(input_from, str) or not NAME_RE.match(input_from)
        ):
            raise DefinitionError(f"call(input_from={input_from!r}) must name a result")
        self.input_from = input_from
        self.opts = step_options(options)

    def spec(self) -> dict[str, Any]:
        spec = {
            **self._base(),
            "graph": compile_graph(self.workflow),
            "input_from": self.input_from,
            "opts": dict(self.opts),
        }
        if self.input_from and self.input_from not in BUILTIN_NAMES:
            spec["refs"] = [self.input_from]
        return spec


def call(workflow: Node, *, input_from: str | None = None, **options: Any) -> Call:
    """Run ``workflow`` as a child instance and bind its result (``.as_()`` names it).

    The child's input is the result named ``input_from`` (``"input"``: this instance's
    input); without it, a fan-out chunk's items in a ``fan_out``, else this instance's input.
    A failed or cancelled child fails this step. ``fan_out(workflow, over=...)`` wraps a
    whole sub-workflow in ``call()`` for you: one child instance per chunk."""
    return Call(workflow, input_from=input_from, **options)


def task(path: str | Callable[..., Any], **options: Any) -> Task:
    """A Python step: a dotted path, or the function itself (module-level; one decorated
    with ``@step`` brings its options, which ``options`` here override). Options:
    ``max_attempts``, ``timeout``, ``backoff``, ``backoff_cap``; ``isolate=True`` runs it in
    a child process with ``memory_mb`` and ``timeout`` as budgets (default
    ACURIO_STEP_MEMORY_MB, ACURIO_STEP_TIMEOUT_SECONDS; jobs.durable.isolation)."""
    if callable(path) and not isinstance(path, str):
        fn = path
        options = {**getattr(fn, "__durable_step__", {}), **options}
        path = function_path(fn, "task()")
    return Task(path, **options)


# --- decorators: functions by reference --------------------------------------------------------
# Functions registered with @step / @workflow, by dotted path (what the stored graph names).
STEPS: dict[str, Callable[..., Any]] = {}
WORKFLOWS: dict[str, Callable[[], Node]] = {}


def function_path(fn: Callable[..., Any], what: str) -> str:
    """The dotted path a stored graph names a module-level function by."""
    path = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}"
    if "<" in path or not PATH_RE.match(path):
        raise DefinitionError(
            f"{what}: {fn!r} cannot be named in a stored workflow; use a module-level function"
            " (not a lambda, a nested function or a method) or its dotted path"
        )
    return path


def step(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Register ``fn(ctx)`` as a step, so ``task(fn)`` takes the function itself::

        @step(max_attempts=3, timeout=30)
        def verify(ctx): ...

        flow = task(parse).as_("parsed") >> fan_out(task(verify), over="parsed")

    The function is returned unchanged (callable as before); its options are checked now."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise DefinitionError(f"@step decorates a function, not {fn!r}")
        Task(function_path(fn, "@step"), **options)  # checks the options where they are written
        fn.__durable_step__ = dict(options)  # type: ignore[attr-defined]
        STEPS[function_path(fn, "@step")] = fn
        return fn

    return register if fn is None else register(fn)


def workflow(fn: Callable[[], Node]) -> Callable[[], Node]:
    """Register a function of no arguments that builds a workflow; ``start()``,
    ``start_many()``, ``schedule()`` and ``manage.py durable start`` take the function."""
    if not callable(fn):
        raise DefinitionError(f"@workflow decorates a function, not {fn!r}")
    fn.__durable_workflow__ = True  # type: ignore[attr-defined]
    WORKFLOWS[function_path(fn, "@workflow")] = fn
    return fn


def as_workflow(value: Any) -> Node:
    """A workflow node from a node or a ``@workflow`` function (called to build it)."""
    if isinstance(value, Node):
        return value
    if callable(value) and getattr(value, "__durable_workflow__", False):
        return check_node(value())
    raise DefinitionError(
        f"{value!r} is not a workflow: compose one from steps, or decorate a function that"
        " builds one with @workflow"
    )


def sql(query: str, **options: Any) -> Sql:
    """A SQL step: rows as a list of dicts, or the row count for a statement without rows."""
    return Sql(query, **options)


def fan_out(step: Node, *, over: str, chunk: int = 1) -> FanOut:
    """Run ``step`` once per chunk of ``chunk`` items of the list result named ``over``."""
    return FanOut(step, over=over, chunk=chunk)


# --- control flow: race, when, loop ---------------------------------------------------------
DEFAULT_MAX_ITERATIONS = 1000
DEFAULT_HISTORY = 20


def condition(cond: Any, what: str) -> dict[str, str]:
    """A condition as stored JSON: ``{"name": result}`` or ``{"path": "pkg.mod.fn"}``.

    Only a dotted path is stored for a function, so graphs stay JSON and survive deploys.
    """
    if callable(cond) and not isinstance(cond, str):
        path = f"{getattr(cond, '__module__', '')}.{getattr(cond, '__qualname__', '')}"
        if "<" in path or not PATH_RE.match(path):
            raise DefinitionError(
                f"{what}: condition {cond!r} cannot be stored; use a module-level function"
                " (not a lambda or a nested function) or its dotted path"
            )
        return {"path": path}
    if isinstance(cond, str):
        if NAME_RE.match(cond):
            return {"name": cond}
        if PATH_RE.match(cond):
            return {"path": cond}
    raise DefinitionError(
        f"{what}: condition {cond!r} must be a result name ('approved'), a dotted path"
        " ('pkg.module.fn') or a module-level function"
    )


class Race(Node):
    """``a | b``: run the branches in parallel; the first to finish wins, the others are
    cancelled. The result is the winner's."""

    kind = "race"

    def __init__(self, *children: Node) -> None:
        if len(children) < 2:
            raise DefinitionError("a race needs at least two branches")
        self.children = [check_node(c) for c in children]

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "children": [c.spec() for c in self.children]}


class When(Node):
    """``when(cond, then, otherwise)``: run ``then`` if ``cond`` holds, else ``otherwise``."""

    kind = "when"

    def __init__(self, cond: Any, then: Node, otherwise: Node | None = None) -> None:
        self.cond = condition(cond, "when")
        self.children = [check_node(then)]
        if otherwise is not None:
            self.children.append(check_node(otherwise))

    def spec(self) -> dict[str, Any]:
        spec = {
            **self._base(),
            "cond": dict(self.cond),
            "children": [c.spec() for c in self.children],
        }
        if "name" in self.cond:
            spec["refs"] = [self.cond["name"]]
        return spec


def when(cond: Any, then: Node, otherwise: Node | None = None) -> When:
    """Branch on ``cond``: a result name (its truthiness), a dotted path or a module-level
    function ``fn(ctx) -> bool``. Without ``otherwise`` a false condition yields None."""
    return When(cond, then, otherwise)


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
        self.children = [check_node(body)]
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


# --- http -------------------------------------------------------------------------------------
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_HTTP_TIMEOUT = 30.0


class Http(Node):
    """An HTTP call (see :mod:`jobs.durable.kinds.http` for how it runs)."""

    kind = "http"

    def __init__(
        self,
        url: str,
        *,
        method: str = "GET",
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_HTTP_TIMEOUT,
        body_from: str | None = None,
        **options: Any,
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise DefinitionError(f"http({url!r}) needs an absolute http:// or https:// URL")
        if "%(" in parts.netloc:
            # The host stays in the definition, where ACURIO_HTTP_ALLOW can be reasoned about.
            raise DefinitionError(
                f"http({url!r}): %(name)s placeholders may appear in the path and query only"
            )
        if body_from is not None:
            if body is not None:
                raise DefinitionError("http(): give body= or body_from=, not both")
            if not isinstance(body_from, str) or not NAME_RE.match(body_from):
                raise DefinitionError(f"http(body_from={body_from!r}) must name a result")
        method = method.upper() if isinstance(method, str) else method
        if method not in HTTP_METHODS:
            raise DefinitionError(
                f"http(method={method!r}) must be one of {', '.join(HTTP_METHODS)}"
            )
        if headers is not None and not (
            isinstance(headers, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise DefinitionError("http(headers=...) must be a dict of strings")
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise DefinitionError(f"http(timeout={timeout!r}) must be a positive number of seconds")
        if body is not None and not isinstance(body, str | dict | list):
            raise DefinitionError("http(body=...) must be a string, or a dict/list sent as JSON")
        self.url = url
        self.method = method
        self.body = body
        self.body_from = body_from
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.opts = step_options(options)

    def spec(self) -> dict[str, Any]:
        return {
            **self._base(),
            "url": self.url,
            "method": self.method,
            "body": self.body,
            "headers": dict(self.headers),
            "timeout": self.timeout,
            "body_from": self.body_from,
            "opts": dict(self.opts),
            "refs": sorted(
                {n for n in [*PARAM_RE.findall(self.url), self.body_from] if n} - set(BUILTIN_NAMES)
            ),
        }


def http(
    url: str,
    *,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = DEFAULT_HTTP_TIMEOUT,
    body_from: str | None = None,
    **options: Any,
) -> Http:
    """An HTTP call; ``body`` as a dict/list is sent as JSON, a string as is; ``body_from``
    sends a named result (or ``"input"``) as JSON instead. ``%(name)s`` in the URL's path or
    query is replaced by that result, URL-quoted. Step options (``max_attempts``,
    ``backoff``, ``backoff_cap``) set the retry policy."""
    return Http(
        url,
        method=method,
        body=body,
        headers=headers,
        timeout=timeout,
        body_from=body_from,
        **options,
    )


# --- timers and waits -------------------------------------------------------------------------
def _seconds(value: Any, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise DefinitionError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return float(value)


class Sleep(Node):
    kind = "sleep"

    def __init__(self, seconds: float) -> None:
        self.seconds = _seconds(seconds, "sleep()")

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "seconds": self.seconds, "opts": {}}


def sleep(seconds: float) -> Sleep:
    """Wait ``seconds`` (durably: a deploy or a crash does not restart the wait)."""
    return Sleep(seconds)


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


def wait_for_schedule(cron: str) -> WaitForSchedule:
    """Wait until the next time the 5-field cron expression matches (UTC)."""
    return WaitForSchedule(cron)


class WaitForSignal(Node):
    kind = "wait_for_signal"

    def __init__(self, signal: str, *, timeout: float | None = None) -> None:
        if not isinstance(signal, str) or not NAME_RE.match(signal):
            raise DefinitionError(f"wait_for_signal({signal!r}): the name must be an identifier")
        self.signal = signal
        self.timeout = None if timeout is None else _seconds(timeout, "wait_for_signal(timeout=)")

    def spec(self) -> dict[str, Any]:
        return {**self._base(), "signal": self.signal, "timeout": self.timeout, "opts": {}}


def wait_for_signal(name: str, *, timeout: float | None = None) -> WaitForSignal:
    """Wait for ``signal(instance_id, name, data)``; the result is ``{"signal", "timed_out",
    "data"}``. With ``timeout`` (seconds) the wait ends with ``timed_out: true``."""
    return WaitForSignal(name, timeout=timeout)


def iter_spec(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a spec tree, in pre-order."""
    yield spec
    for child in spec.get("children", ()):
        yield from iter_spec(child)


# Compiled specs by the JSON text of the uncompiled one (``Node.spec()``), least recently used
# last. Nodes are mutable objects (``opts``, ``children``), so the key is what the tree says now,
# not the object: a node changed after a start compiles afresh.
_compiled: OrderedDict[str, str] = OrderedDict()
_COMPILED_CACHE_SIZE = 256


def compile_graph(workflow: Node) -> dict[str, Any]:
    """Number the workflow's nodes and check it as a whole; the result is what start() stores.

    A new dict on every call (callers may keep or change it); the checks and the numbering
    run once per distinct tree (:func:`compile_graph_text`)."""
    return json.loads(compile_graph_text(workflow))


def compile_graph_text(workflow: Node) -> str:
    """The compiled spec as JSON text (as start() stores it), cached per distinct tree.

    Compiling runs the SQL steps' parser and walks the whole tree; start() of the same
    workflow object again (a web view, a loop, ``start_many``) then costs one ``spec()`` and
    one ``json.dumps`` of it. Only successful compiles are kept: a DefinitionError is raised
    again on every call."""
    raw = check_node(workflow).spec()
    try:
        key = json.dumps(raw, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(_compile(raw))  # not JSON: fails here, as storing it would
    text = _compiled.get(key)
    if text is not None:
        with suppress(KeyError):  # another thread may have just evicted it
            _compiled.move_to_end(key)
        return text
    text = json.dumps(_compile(json.loads(key)))
    _compiled[key] = text
    if len(_compiled) > _COMPILED_CACHE_SIZE:
        with suppress(KeyError):
            _compiled.popitem(last=False)
    return text


def _compile(spec: dict[str, Any]) -> dict[str, Any]:
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
    # sql statements parse and may run; conditions on their results can be one value.
    sqlcheck.check_sql_conditions(list(iter_spec(spec)))
    return spec
