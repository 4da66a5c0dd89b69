"""The base of every node kind and the registry that maps a stored node's ``kind`` to one.

The engine (:mod:`jobs.durable.engine`) and the worker only ever call these hooks, through
:func:`get_kind`; the kinds see the engine's transaction only as
:class:`~jobs.durable.state.Transitions`:

``activate(txn, node, parent, chunk_index=, chunk=)``
    Create the node's step row (``txn.insert_step``) and, for a composite, start the children
    that run first (``txn.activate(child, step)``). A leaf is inserted ``ready`` (a timer kind
    passes a later ``run_at``; a signal wait none at all).
``execute(ctx, node)``  (leaves only)
    Do the work and return the JSON output. With ``transactional = True`` the worker calls it
    inside the checkpoint transaction (exactly once); a kind with outside effects (HTTP) sets
    it False: the worker then runs it outside any transaction and checkpoints afterwards
    (at-least-once).
``child_done(txn, node, step, child, output)``  (composites only)
    A child completed: activate the next one, or ``txn.complete(step, output)``.
``take_break(txn, node, step, value)``  (composites only)
    A step below this one raised ``Break(value)``: end here (True) or let it go further up.
``describe(node)``
    A short label for explain(), errors and the admin.
``child_instance(instance_id, step_id)``  (``starts_instances`` kinds only)
    The instance a step of this kind starts (a child workflow): whatever cancels or fails
    the step's instance, or cancels the step itself (a race, a ``Break``), cancels that
    instance and its descendants too.

To add a kind: subclass :class:`Kind` in a module of this package, set ``name``, decorate with
:func:`register`, import the module in the package's ``__init__``, and add the matching Node
class in :mod:`jobs.durable.graph`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from jobs.durable.context import Context
from jobs.durable.errors import DurableError
from jobs.durable.state import StepRow, Transitions

_REGISTRY: dict[str, Kind] = {}


def register(cls: type[Kind]) -> type[Kind]:
    """Class decorator: make a kind available to stored graphs under ``cls.name``."""
    _REGISTRY[cls.name] = cls()
    return cls


def get_kind(name: str) -> Kind:
    """The kind of a stored node; DurableError for a kind this worker does not know."""
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


def wait_kinds() -> list[str]:
    """Names of the kinds whose ready steps are waits (timers, signal waits)."""
    return sorted(name for name, kind in _REGISTRY.items() if kind.waits)


def node_label(node: dict[str, Any]) -> str:
    """How explain(), errors and the admin name a node."""
    return get_kind(node["kind"]).describe(node)


class Kind:
    """What the engine does with the nodes of one kind (see the module docstring)."""

    name: ClassVar[str] = ""
    leaf: ClassVar[bool] = False
    transactional: ClassVar[bool] = True
    # A leaf whose ready step waits for a time or a signal rather than for a worker.
    waits: ClassVar[bool] = False
    # A leaf whose step starts an instance of its own (``child_instance``).
    starts_instances: ClassVar[bool] = False

    def activate(
        self,
        txn: Transitions,
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

    @property
    def fixed_activation(self) -> bool:
        """Whether ``activate`` does nothing but insert step rows that depend on the node
        alone — not on the input, the time (a due time other than ``txn.now`` itself) or the
        database — and activate children. A workflow whose first activation runs only such
        kinds activates the same way for every start, and start() plans it once per spec
        (:mod:`jobs.durable.launch`). A leaf with this class's ``activate`` (ready at
        ``txn.now``) is; a composite says so with ``fixed_activation = True``. False is always
        safe."""
        return self.leaf and type(self).activate is Kind.activate

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        raise NotImplementedError

    def in_transaction(self, node: dict[str, Any]) -> bool:
        """Whether the worker runs this node's ``execute`` inside the checkpoint transaction
        (``transactional``, unless the node asks otherwise: an isolated task)."""
        return self.transactional

    def prepare(self, node: dict[str, Any]) -> None:
        """Called by the worker before ``execute``, outside any transaction: raise
        ImportError when this worker lacks the code the node needs (a rolling deploy), so
        the step is handed back to a newer worker without spending an attempt."""

    def child_done(
        self, txn: Transitions, node: dict[str, Any], step: StepRow, child: StepRow, output: Any
    ) -> None:
        raise NotImplementedError

    def take_break(self, txn: Transitions, node: dict[str, Any], step: StepRow, value: Any) -> bool:
        """A step below ``step`` raised ``Break(value)`` and checkpointed it: True if this
        node ends there (a loop), False to let the break go on to the parent."""
        return False

    def completes_with(self, node: dict[str, Any], child_node_id: int) -> bool:
        """True if this composite's step completes, with the child's output and nothing else
        done, as soon as that child completes (lets the engine finish a workflow whose root
        is this node in one statement: the child, this step and the instance)."""
        return False

    def child_instance(self, instance_id: uuid.UUID, step_id: int) -> uuid.UUID | None:
        """The primary key of the instance a step of this kind starts, if it may start one
        (``starts_instances``); the instance need not exist (yet)."""
        return None

    def follows(self, node: dict[str, Any], child_node_id: int) -> dict[str, Any] | None:
        """The child this composite activates, with nothing else done, when the given child
        completes (a sequence's next step), else None. Lets the engine checkpoint a step and
        activate its successor in one statement."""
        return None

    def wait_until(self, node: dict[str, Any], created_at: datetime) -> datetime | None:
        """For a waiting kind: when a step created at ``created_at`` ends its wait by itself
        (None: only a signal ends it)."""
        return None

    def check(self, node: dict[str, Any]) -> None:
        """Called by start() for each node: fail early on what the worker could not run."""

    def describe(self, node: dict[str, Any]) -> str:
        return node["name"] or node["kind"]
