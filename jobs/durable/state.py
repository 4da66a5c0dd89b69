"""The state the engine's modules share: a step row, an instance's graph, and what a node
kind may ask of the transaction it runs in.

* :class:`StepRow` — the columns of a step the engine keeps in memory (``STEP_FIELDS``, the
  order every statement reading a step returns them in).
* :class:`Graph` — an instance's stored graph, indexed by node id (immutable after start).
* :class:`Transitions` — the engine's transaction as the node kinds see it
  (:mod:`jobs.durable.kinds` calls these; :class:`jobs.durable.engine.Txn` implements them),
  so that the kinds need no import of the engine.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobs.durable.db import decode_json
from jobs.durable.graph import iter_spec

# StepRow's fields, in its order: the column list of every statement that reads a step
# (jobs.durable.statements) and of the ORM reads that build one (recover_expired_leases).
STEP_FIELDS = (
    "id",
    "instance_id",
    "parent_id",
    "key",
    "node_id",
    "kind",
    "name",
    "status",
    "attempts",
    "max_attempts",
    "chunk_index",
    "chunk",
)


@dataclass
class StepRow:
    """One step as the engine handles it in memory (see ``STEP_FIELDS``)."""

    id: int
    instance_id: uuid.UUID
    parent_id: int | None
    key: str
    node_id: int
    kind: str
    name: str
    status: str
    attempts: int
    max_attempts: int
    chunk_index: int | None
    chunk: Any

    @classmethod
    def from_row(cls, row: tuple) -> StepRow:
        """A step from the first ``len(STEP_FIELDS)`` values of a row, in that order."""
        values = list(row[: len(STEP_FIELDS)])
        values[-1] = decode_json(values[-1])
        return cls(*values)


@dataclass(frozen=True)
class Graph:
    """An instance's stored graph with the lookups the engine needs."""

    instance_id: uuid.UUID
    spec: dict[str, Any]
    input: Any
    on_failure: str
    nodes: dict[int, dict[str, Any]]
    # node id -> the composite node it is a child of (the root has none)
    parents: dict[int, dict[str, Any]]
    # The instance's queue and priority, copied onto every step it inserts.
    queue: str = "default"
    priority: int = 0

    @classmethod
    def build(
        cls,
        instance_id: uuid.UUID,
        spec: dict[str, Any],
        input: Any,
        on_failure: str,
        queue: str = "default",
        priority: int = 0,
    ) -> Graph:
        nodes = {node["id"]: node for node in iter_spec(spec)}
        parents = {
            child["id"]: node for node in nodes.values() for child in node.get("children", ())
        }
        return cls(instance_id, spec, input, on_failure, nodes, parents, queue, priority)


class Transitions(Protocol):
    """What a node kind may do in the transaction that activates its node or finishes a child.

    ``now`` is the transaction's time; setting ``notify`` makes it wake idle workers at
    commit; ``memo`` is scratch space for a kind within this one transaction.
    """

    graph: Graph
    now: datetime
    notify: bool
    memo: dict[str, Any]

    def activate(
        self,
        node: dict[str, Any],
        parent: StepRow | None,
        *,
        chunk_index: int | None = None,
        chunk: Any = None,
    ) -> StepRow | None:
        """Start a node: its kind creates its step row (and a composite its children)."""
        ...

    def insert_step(
        self,
        node: dict[str, Any],
        parent: StepRow | None,
        *,
        status: str,
        run_at: datetime | None = None,
        remaining: int = 0,
        chunk_index: int | None = None,
        chunk: Any = None,
    ) -> StepRow:
        """Insert one step row (``ready`` ones are claimable from ``run_at``)."""
        ...

    def insert_ready_children(
        self, node: dict[str, Any], parent: StepRow, chunks: list[tuple[int, Any]]
    ) -> None:
        """Insert one ready leaf step per ``(chunk_index, chunk)`` (a fan-out's children)."""
        ...

    def child_key(
        self, node: dict[str, Any], parent: StepRow | None, chunk_index: int | None
    ) -> str:
        """The ``(instance, key)`` of a node's step under ``parent``."""
        ...

    def named(self, name: str) -> tuple[bool, Any]:
        """``(found, value)`` of the latest completed step named ``name``."""
        ...

    def children_outputs(self, parent: StepRow) -> list[Any]:
        """Outputs of a step's children, in chunk order, then node order."""
        ...

    def decrement(self, parent: StepRow) -> int | None:
        """Count one child of ``parent`` done: the children left, None if it stopped."""
        ...

    def set_remaining(self, step: StepRow, remaining: int) -> None:
        """Set a composite step's counter (a loop counts its iterations in it)."""
        ...

    def is_running(self, step: StepRow) -> bool:
        """Whether the step is still running (a composite may finish while activating)."""
        ...

    def complete(self, step: StepRow, output: Any) -> None:
        """Complete a composite step and tell its parent."""
        ...

    def fail_step(self, step: StepRow, error: str, *, fenced: bool = True) -> bool:
        """Fail a step and its instance with ``error``."""
        ...

    def cancel_below(self, step: StepRow) -> int:
        """Cancel every unfinished step under ``step`` (a race's losers, a loop's body), and
        the child workflows those steps started."""
        ...

    def delete_below(self, step: StepRow, key: str) -> None:
        """Delete the step ``key`` under ``step`` with its whole subtree (old loop rounds)."""
        ...
