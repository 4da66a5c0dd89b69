"""State transitions of the durable engine, each inside the caller's transaction.

Everything that changes an instance or its steps happens here, in SQL on Django's default
connection, so that it joins whatever transaction is open: ``start()`` joins the caller's,
a step's checkpoint joins the transaction its task wrote in (exactly once).

The pieces:

* :class:`Graph` — an instance's stored graph, indexed by node id (immutable, so cached).
* :class:`StepRow` — the columns of a step the engine needs in memory.
* :class:`Txn` — the transitions of one transaction: create a node's step (``activate``),
  complete a step and tell its parent (``complete`` → the parent kind's ``child_done``), fail
  a step or an instance (cancelling every unfinished step and calling the ``on_failure`` hook),
  and one ``NOTIFY durable_ready`` at the end when it made a step ready.
* What each node kind does on activation and when a child finishes lives in
  :mod:`jobs.durable.kinds`; this module knows no kind by name.

Hot statements are hand-written SQL (a worker runs them for every step); the rare ones use the
ORM. Times come from the Python clock (``timezone.now``) so tests control them with time-machine.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable.context import to_json
from jobs.durable.errors import Break, DurableError
from jobs.durable.graph import iter_spec
from jobs.durable.db import execute_prepared

logger = logging.getLogger("jobs.durable")

NOTIFY_CHANNEL = "durable_ready"
STEP_COLUMNS = (
    "id, instance_id, parent_id, key, node_id, kind, name, status, attempts, max_attempts,"
    " chunk_index, chunk"
)
UNFINISHED_INSTANCE = ("pending", "running")
# Kinds a worker may chain into (run right after the step whose checkpoint created them).
CHAINABLE = frozenset({"task", "sql"})
DEFAULT_BACKOFF = 1.0  # seconds before the first retry; doubles per attempt
DEFAULT_BACKOFF_CAP = 300.0  # no retry waits longer than this


# A leaf step's checkpoint that also completes its parent, the root step, and the instance
# (Txn.checkpoint): the parent and the instance only if the fenced leaf UPDATE found its row.
_FINISH_SQL = (
    "WITH done AS (UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %s AND status = 'running' AND attempts = %s RETURNING parent_id),"
    " root AS (UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s WHERE id = (SELECT parent_id FROM done) AND status = 'running'"
    " RETURNING id),"
    " finished AS (UPDATE durable_instance SET status = 'completed', result = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status IN ('pending', 'running')"
    " AND EXISTS (SELECT 1 FROM root) RETURNING id)"
    " SELECT 1 FROM done"
)


# A leaf step's checkpoint that also activates the next step of its parent sequence (the
# parent kind's ``follows``), inserted ready or already claimed by this worker (chaining): one
# round trip per step of a sequence. The insert happens only if the fenced UPDATE found the
# step and the parent step is still running as the expected node; the caller tells apart
# "fenced" (no ``done`` row) and "nothing inserted" (then it takes the general path).
_CHECKPOINT_NEXT_SQL = (
    "WITH done AS (UPDATE durable_step SET status = 'completed', output = %(output)s::jsonb,"
    " finished_at = %(now)s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s"
    " RETURNING parent_id),"
    " nxt AS (INSERT INTO durable_step (instance_id, parent_id, key, node_id, kind, name,"
    " status, attempts, max_attempts, run_at, lease_owner, lease_expires_at, remaining,"
    " chunk_index, chunk, error, created_at, started_at)"
    " SELECT p.instance_id, p.id, p.key || %(suffix)s, %(node_id)s, %(kind)s, %(name)s,"
    " %(status)s, %(new_attempts)s, %(max_attempts)s, %(run_at)s, %(owner)s, %(expires)s, 0,"
    " NULL, NULL, '', %(now)s, %(started)s"
    " FROM durable_step AS p WHERE p.id = (SELECT parent_id FROM done)"
    " AND p.status = 'running' AND p.node_id = %(parent_node)s"
    " RETURNING id, key)"
    " SELECT EXISTS (SELECT 1 FROM done), (SELECT id FROM nxt), (SELECT key FROM nxt)"
)


class Fenced(DurableError):
    """The step's claim is no longer ours (lease recovered, instance cancelled): roll back."""


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

    @classmethod
    def build(
        cls, instance_id: uuid.UUID, spec: dict[str, Any], input: Any, on_failure: str
    ) -> Graph:
        nodes = {node["id"]: node for node in iter_spec(spec)}
        parents = {
            child["id"]: node for node in nodes.values() for child in node.get("children", ())
        }
        return cls(instance_id, spec, input, on_failure, nodes, parents)


_graphs: OrderedDict[uuid.UUID, Graph] = OrderedDict()
_GRAPH_CACHE_SIZE = 512


def load_graph(instance_id: uuid.UUID) -> Graph:
    """The stored graph of an instance; cached, since it never changes after start()."""
    graph = _graphs.get(instance_id)
    if graph is not None:
        _graphs.move_to_end(instance_id)
        return graph
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT graph, input, on_failure FROM durable_instance WHERE id = %s", [instance_id]
        )
        row = cursor.fetchone()
    if row is None:
        raise DurableError(f"workflow instance {instance_id} does not exist")
    return cache_graph(instance_id, *row)


def cache_graph(instance_id: uuid.UUID, spec: Any, input: Any, on_failure: str) -> Graph:
    """Put an instance's stored graph (as read from its row) into the cache; returns it."""
    graph = _graphs.get(instance_id)
    if graph is not None:
        _graphs.move_to_end(instance_id)
        return graph
    graph = Graph.build(instance_id, _decode(spec), _decode(input), on_failure)
    _graphs[instance_id] = graph
    if len(_graphs) > _GRAPH_CACHE_SIZE:
        _graphs.popitem(last=False)
    return graph


def _decode(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


@dataclass
class StepRow:
    """One step as the engine handles it in memory (see ``STEP_COLUMNS``)."""

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
        values = list(row[:12])
        values[11] = _decode(values[11])
        return cls(*values)


def _max_attempts(node: dict[str, Any]) -> int:
    return int(node.get("opts", {}).get("max_attempts", settings.ACURIO_MAX_ATTEMPTS))


def node_label(node: dict[str, Any]) -> str:
    """How explain(), errors and the admin name a node."""
    from jobs.durable.kinds import get_kind

    return get_kind(node["kind"]).describe(node)


def backoff_delay(attempt: int, opts: dict[str, Any]) -> float:
    """Seconds before retry number ``attempt`` (1-based): exponential, capped, with jitter.

    Jitter takes a random point in the upper half of the window, so steps that failed together
    (a database blip) do not all come back in the same instant, yet none retries much earlier
    than its policy says.
    """
    base = float(opts.get("backoff", getattr(settings, "ACURIO_BACKOFF_SECONDS", DEFAULT_BACKOFF)))
    cap = float(
        opts.get(
            "backoff_cap", getattr(settings, "ACURIO_BACKOFF_CAP_SECONDS", DEFAULT_BACKOFF_CAP)
        )
    )
    window = min(cap, base * 2 ** max(0, attempt - 1))
    return window * random.uniform(0.5, 1.0)


class Txn:
    """The engine's transitions inside one database transaction (see the module docstring)."""

    def __init__(
        self,
        graph: Graph,
        now: datetime | None = None,
        *,
        chain_owner: str = "",
        lease_seconds: float = 0,
    ) -> None:
        self.graph = graph
        self.now = now or timezone.now()
        self.notify = False
        # Chaining: a worker checkpointing a step may take the next ready task/sql step of
        # the same instance at once (inserted already claimed under its lease), saving a
        # claim and a wake-up per step of a sequence. At most one per transaction.
        self.chain_owner = chain_owner
        self.lease_seconds = lease_seconds
        self.chained: StepRow | None = None

    # --- creating steps -------------------------------------------------------------------
    def activate(
        self,
        node: dict[str, Any],
        parent: StepRow | None,
        *,
        chunk_index: int | None = None,
        chunk: Any = None,
    ) -> StepRow | None:
        """Start a node: its kind creates its step row (and, for composites, its children)."""
        from jobs.durable.kinds import get_kind

        return get_kind(node["kind"]).activate(
            self, node, parent, chunk_index=chunk_index, chunk=chunk
        )

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
        """Insert one step row; a ready step makes this transaction send a NOTIFY."""
        key = self.child_key(node, parent, chunk_index)
        max_attempts = _max_attempts(node)
        status, attempts, lease_owner, lease_expires_at, due = self._claim_on_insert(
            node, status, run_at
        )
        step_id = execute_prepared(
            "INSERT INTO durable_step (instance_id, parent_id, key, node_id, kind, name,"
            " status, attempts, max_attempts, run_at, lease_owner, lease_expires_at, remaining,"
            " chunk_index, chunk, error, created_at, started_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, '', %s, %s)"
            " RETURNING id",
            [
                self.graph.instance_id,
                parent.id if parent else None,
                key,
                node["id"],
                node["kind"],
                node.get("name", ""),
                status,
                attempts,
                max_attempts,
                run_at,
                lease_owner,
                lease_expires_at,
                remaining,
                chunk_index,
                None if chunk is None else json.dumps(chunk),
                self.now,
                self.now if status == "running" else None,
            ],
        )[0][0]
        if due:
            self.notify = True
        row = StepRow(
            step_id,
            self.graph.instance_id,
            parent.id if parent else None,
            key,
            node["id"],
            node["kind"],
            node.get("name", ""),
            status,
            attempts,
            max_attempts,
            chunk_index,
            chunk,
        )
        if lease_owner:
            self.chained = row
        return row

    def _claim_on_insert(
        self, node: dict[str, Any], status: str, run_at: datetime | None
    ) -> tuple[str, int, str, datetime | None, bool]:
        """How a new step row starts: ``(status, attempts, lease owner, lease expiry, due)``.

        A task/sql step that is due now is inserted already claimed by the chaining worker
        (attempt 1, leased), at most one per transaction; ``due`` says a ready step was made
        claimable now (the transaction then sends a NOTIFY).
        """
        due = status == "ready" and run_at is not None and run_at <= self.now
        if due and self.chain_owner and self.chained is None and node["kind"] in CHAINABLE:
            expires = self.now + timedelta(seconds=self.lease_seconds)
            return "running", 1, self.chain_owner, expires, False
        return status, 0, "", None, due

    def insert_ready_children(
        self, node: dict[str, Any], parent: StepRow, chunks: list[tuple[int, Any]]
    ) -> None:
        """Insert many ready leaf steps of one node at once (a fan-out's children)."""
        max_attempts = _max_attempts(node)
        rows = [
            (
                self.graph.instance_id,
                parent.id,
                self.child_key(node, parent, index),
                node["id"],
                node["kind"],
                node.get("name", ""),
                max_attempts,
                self.now,
                index,
                json.dumps(chunk),
                self.now,
            )
            for index, chunk in chunks
        ]
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO durable_step (instance_id, parent_id, key, node_id, kind, name,"
                " status, attempts, max_attempts, run_at, lease_owner, remaining, chunk_index,"
                " chunk, error, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, 'ready', 0, %s, %s, '', 0, %s, %s::jsonb, '', %s)",
                rows,
            )
        if rows:
            self.notify = True

    @staticmethod
    def child_key(node: dict[str, Any], parent: StepRow | None, chunk_index: int | None) -> str:
        key = str(node["id"]) if parent is None else f"{parent.key}/{node['id']}"
        return key if chunk_index is None else f"{key}[{chunk_index}]"

    # --- reading ------------------------------------------------------------------------------
    def named(self, name: str) -> tuple[bool, Any]:
        """``(found, value)`` of the latest completed step named ``name``."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT output FROM durable_step WHERE instance_id = %s AND name = %s"
                " AND status = 'completed' ORDER BY finished_at DESC, id DESC LIMIT 1",
                [self.graph.instance_id, name],
            )
            row = cursor.fetchone()
        return (False, None) if row is None else (True, _decode(row[0]))

    def children_outputs(self, parent: StepRow) -> list[Any]:
        """Outputs of a step's children: fan-out chunks in order, join branches in node order."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT output FROM durable_step WHERE parent_id = %s"
                " ORDER BY chunk_index NULLS FIRST, node_id",
                [parent.id],
            )
            return [_decode(row[0]) for row in cursor.fetchall()]

    def load_step(self, step_id: int) -> StepRow:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {STEP_COLUMNS} FROM durable_step WHERE id = %s", [step_id])
            return StepRow.from_row(cursor.fetchone())

    def decrement(self, parent: StepRow) -> int | None:
        """One child of a join finished: the children still running, or None if it stopped.

        The UPDATE locks the parent row, so siblings finishing at once count down one by one
        and exactly one of them sees zero.
        """
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE durable_step SET remaining = remaining - 1"
                " WHERE id = %s AND status = 'running' RETURNING remaining",
                [parent.id],
            )
            row = cursor.fetchone()
        return None if row is None else row[0]

    # --- finishing ------------------------------------------------------------------------
    def checkpoint(self, step: StepRow, output: Any) -> None:
        """Complete a claimed leaf step, fenced by its claim token, then advance the graph.

        Raises :class:`Fenced` when the step is no longer running under this claim (its lease
        was recovered and maybe claimed again, or its instance was cancelled or failed): the
        caller must roll back, so the task's writes vanish with it.
        """
        if isinstance(output, Break):
            from jobs.durable.control import break_loop

            break_loop(self, step, output)
            return
        from jobs.durable.kinds import get_kind

        parent_node = self.graph.parents.get(step.node_id)
        if step.parent_id is not None and step.chunk_index is None and parent_node is not None:
            parent_kind = get_kind(parent_node["kind"])
            if parent_node is self.graph.spec and parent_kind.completes_with(
                parent_node, step.node_id
            ):
                # The last step of a workflow whose root completes with it (a top-level
                # sequence): the step (fenced), the root step and the instance in one
                # statement, in the order complete() and advance() would take them.
                result, now = to_json(output), self.now
                params = [result, now, step.id, step.attempts, result, now, result, now]
                params.append(step.instance_id)
                if not execute_prepared(_FINISH_SQL, params):
                    raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
                return
            follower = parent_kind.follows(parent_node, step.node_id)
            if follower is not None and follower["kind"] in CHAINABLE:
                self._checkpoint_and_activate(step, output, parent_node, follower)
                return
        # One round trip: the fenced UPDATE, and the parent row the graph advances through.
        rows = execute_prepared(
            "WITH done AS (UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
            " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
            " WHERE id = %s AND status = 'running' AND attempts = %s RETURNING parent_id)"
            f" SELECT {', '.join('p.' + c.strip() for c in STEP_COLUMNS.split(','))}"
            " FROM done LEFT JOIN durable_step AS p ON p.id = done.parent_id",
            [to_json(output), self.now, step.id, step.attempts],
        )
        if not rows:
            raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
        parent = None if rows[0][0] is None else StepRow.from_row(rows[0])
        self.advance(step, output, parent=parent)

    def _checkpoint_and_activate(
        self, step: StepRow, output: Any, parent_node: dict[str, Any], node: dict[str, Any]
    ) -> None:
        """Checkpoint ``step`` and activate ``node``, the task/sql step its parent sequence
        runs next, in one statement (``_CHECKPOINT_NEXT_SQL``); what ``complete`` →
        ``child_done`` → ``activate`` would do, in one round trip."""
        status, attempts, owner, expires, due = self._claim_on_insert(node, "ready", self.now)
        rows = execute_prepared(
            _CHECKPOINT_NEXT_SQL,
            {
                "output": to_json(output),
                "now": self.now,
                "id": step.id,
                "attempts": step.attempts,
                "suffix": f"/{node['id']}",
                "node_id": node["id"],
                "kind": node["kind"],
                "name": node.get("name", ""),
                "status": status,
                "new_attempts": attempts,
                "max_attempts": _max_attempts(node),
                "run_at": self.now,
                "owner": owner,
                "expires": expires,
                "started": self.now if status == "running" else None,
                "parent_node": parent_node["id"],
            },
        )
        found, next_id, next_key = rows[0]
        if not found:
            raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
        if next_id is None:
            # The parent stopped meanwhile (cancelled, failed), or is not the node the graph
            # says: the general path decides what, if anything, comes next.
            self.advance(step, output)
            return
        row = StepRow(
            next_id,
            step.instance_id,
            step.parent_id,
            next_key,
            node["id"],
            node["kind"],
            node.get("name", ""),
            status,
            attempts,
            _max_attempts(node),
            None,
            None,
        )
        if owner:
            self.chained = row
        if due:
            self.notify = True

    def complete(self, step: StepRow, output: Any) -> None:
        """Complete a composite step (no claim to fence) and advance the graph.

        The root step (a workflow's top-level sequence) and its instance complete in one
        statement: the step row first, then the instance row, the order ``advance`` takes.
        """
        result = to_json(output)
        if step.parent_id is None:
            execute_prepared(
                "WITH done AS (UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
                " finished_at = %s WHERE id = %s AND status = 'running' RETURNING id)"
                " UPDATE durable_instance SET status = 'completed', result = %s::jsonb,"
                " finished_at = %s WHERE id = %s AND status IN ('pending', 'running')"
                " AND EXISTS (SELECT 1 FROM done)",
                [result, self.now, step.id, result, self.now, step.instance_id],
            )
            return
        if not execute_prepared(
            "UPDATE durable_step SET status = 'completed', output = %s::jsonb,"
            " finished_at = %s WHERE id = %s AND status = 'running' RETURNING id",
            [result, self.now, step.id],
        ):
            return  # cancelled meanwhile: nothing more to advance
        self.advance(step, output)

    def advance(self, step: StepRow, output: Any, *, parent: StepRow | None = None) -> None:
        """A step completed: tell its parent's kind, or finish the instance at the root.

        ``parent``: the parent's row when the caller already read it.
        """
        if step.parent_id is None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE durable_instance SET status = 'completed', result = %s::jsonb,"
                    " finished_at = %s WHERE id = %s AND status IN ('pending', 'running')",
                    [to_json(output), self.now, step.instance_id],
                )
            return
        from jobs.durable.kinds import get_kind

        if parent is None:
            parent = self.load_step(step.parent_id)
        if parent.status != "running":
            return
        node = self.graph.nodes[parent.node_id]
        get_kind(node["kind"]).child_done(self, node, parent, step, output)

    def fail_step(self, step: StepRow, error: str, *, fenced: bool = True) -> bool:
        """Mark a step failed and fail its instance with ``error``. False if fenced off."""
        with connection.cursor() as cursor:
            sql = (
                "UPDATE durable_step SET status = 'failed', error = %s, finished_at = %s,"
                " lease_owner = '', lease_expires_at = NULL WHERE id = %s AND status = %s"
            )
            params: list[Any] = [error, self.now, step.id, "running"]
            if fenced:
                sql += " AND attempts = %s"
                params.append(step.attempts)
            cursor.execute(sql, params)
            if cursor.rowcount != 1:
                return False
        self.finish_instance("failed", error)
        return True

    def retry_step(self, step: StepRow, error: str, delay: float) -> bool:
        """Put a claimed step back to ready after ``delay`` seconds. False if fenced off."""
        run_at = self.now + timedelta(seconds=delay)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE durable_step SET status = 'ready', error = %s, run_at = %s,"
                " lease_owner = '', lease_expires_at = NULL"
                " WHERE id = %s AND status = 'running' AND attempts = %s",
                [error, run_at, step.id, step.attempts],
            )
            if cursor.rowcount != 1:
                return False
        if delay <= 0:
            self.notify = True
        return True

    def reschedule(self, step: StepRow, run_at: datetime | None, note: str) -> bool:
        """Put a claimed step back to ready at ``run_at`` without using up an attempt.

        For waits woken before they are due (RetryLater with counts=False); ``run_at`` None
        leaves it to a signal. ``max_attempts`` grows with ``attempts``, which must keep
        rising because it is the claim token. False if fenced off.
        """
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE durable_step SET status = 'ready', run_at = %s, error = %s,"
                " max_attempts = max_attempts + 1, lease_owner = '', lease_expires_at = NULL"
                " WHERE id = %s AND status = 'running' AND attempts = %s",
                [run_at, note, step.id, step.attempts],
            )
            if cursor.rowcount != 1:
                return False
        if run_at is not None and run_at <= self.now:
            self.notify = True
        return True

    def finish_instance(self, status: str, error: str) -> bool:
        """Fail or cancel the instance: every unfinished step is cancelled, the hook is called.

        The instance UPDATE comes first and is conditional, so of two transactions failing the
        same instance only one goes on (and calls the hook).
        """
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE durable_instance SET status = %s, error = %s, finished_at = %s"
                " WHERE id = %s AND status IN ('pending', 'running')",
                [status, error, self.now, self.graph.instance_id],
            )
            if cursor.rowcount != 1:
                return False
            # A running step's worker is fenced off by this: its checkpoint finds no
            # 'running' row and rolls back; ready steps are never claimed.
            cursor.execute(
                "UPDATE durable_step SET status = 'cancelled', finished_at = %s,"
                " lease_owner = '', lease_expires_at = NULL"
                " WHERE instance_id = %s AND status IN ('ready', 'running')",
                [self.now, self.graph.instance_id],
            )
        if self.graph.on_failure:
            self.call_on_failure(error)
        return True

    def call_on_failure(self, error: str) -> None:
        """Run the instance's on_failure hook in this transaction, in a savepoint.

        A broken hook must not keep the instance from failing (the step would otherwise be
        retried forever), so its exception is logged and noted in the instance's error.
        """
        try:
            with transaction.atomic():
                import_string(self.graph.on_failure)(self.graph.instance_id, error)
        except Exception as exc:
            logger.exception("on_failure hook %s failed", self.graph.on_failure)
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE durable_instance SET error = error || %s WHERE id = %s",
                    [f" (on_failure hook failed: {exc})", self.graph.instance_id],
                )

    def flush(self) -> None:
        """Wake idle workers, once per transaction; delivered at commit, dropped on rollback."""
        if self.notify:
            with connection.cursor() as cursor:
                cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")
            self.notify = False
