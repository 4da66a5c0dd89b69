"""State transitions of the durable engine, each inside the caller's transaction.

Everything that changes an instance or its steps happens here, in SQL on Django's default
connection, so that it joins whatever transaction is open: ``start()`` joins the caller's,
a step's checkpoint joins the transaction its task wrote in (exactly once).

* :func:`load_graph` — an instance's stored graph (:class:`~jobs.durable.state.Graph`),
  cached, since it never changes after start().
* :class:`Txn` — the transitions of one transaction: create a node's step (``activate``),
  complete a step and tell its parent (``complete`` → the parent kind's ``child_done``), fail
  a step or an instance (cancelling every unfinished step and calling the ``on_failure`` hook),
  and one ``NOTIFY`` at the end when it made a step ready. It is what the node kinds see as
  :class:`~jobs.durable.state.Transitions`.
* :func:`cancel_descendants`, :func:`cancel_trees` — the cascade to child workflows: an
  instance that fails or is cancelled, or a cancelled step that started a child (a race's
  loser, a loop body after its ``Break``), leaves no child workflow of its running.
* What each node kind does on activation, when a child finishes and on ``Break`` lives in
  :mod:`jobs.durable.kinds`; this module knows no kind by name.

The statements are named in :mod:`jobs.durable.statements`; the hot ones (a worker sends them
for every step) are prepared. Times come from the Python clock (``timezone.now``) so tests
control them with time-machine.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable import statements
from jobs.durable.context import to_json
from jobs.durable.db import decode_json, execute_prepared
from jobs.durable.errors import Break, DurableError, Fenced, PermanentError
from jobs.durable.kinds import get_kind
from jobs.durable.state import Graph, StepRow

logger = logging.getLogger("jobs.durable")

UNFINISHED_INSTANCE = ("pending", "running")
# Instances per statement of a cancel cascade (cancel_trees).
CASCADE_BATCH = 500
# A cascade that loses a deadlock (see cancel_trees) is rolled back to its savepoint and run
# again, at most this many times.
CASCADE_ATTEMPTS = 5
# Kinds a worker may chain into (run right after the step whose checkpoint created them).
CHAINABLE = frozenset({"task", "sql"})
DEFAULT_BACKOFF = 1.0  # seconds before the first retry; doubles per attempt
DEFAULT_BACKOFF_CAP = 300.0  # no retry waits longer than this

_graphs: OrderedDict[uuid.UUID, Graph] = OrderedDict()
_GRAPH_CACHE_SIZE = 512


def load_graph(instance_id: uuid.UUID) -> Graph:
    """The stored graph of an instance; cached, since it never changes after start()."""
    graph = _graphs.get(instance_id)
    if graph is not None:
        _graphs.move_to_end(instance_id)
        return graph
    with connection.cursor() as cursor:
        cursor.execute(statements.LOAD_GRAPH, [instance_id])
        row = cursor.fetchone()
    if row is None:
        raise DurableError(f"workflow instance {instance_id} does not exist")
    return cache_graph(instance_id, *row)


def cache_graph(
    instance_id: uuid.UUID,
    spec: Any,
    input: Any,
    on_failure: str,
    queue: str = "default",
    priority: int = 0,
) -> Graph:
    """Put an instance's stored graph (as read from its row) into the cache; returns it."""
    graph = _graphs.get(instance_id)
    if graph is not None:
        _graphs.move_to_end(instance_id)
        return graph
    graph = Graph.build(
        instance_id, decode_json(spec), decode_json(input), on_failure, queue, priority
    )
    _graphs[instance_id] = graph
    if len(_graphs) > _GRAPH_CACHE_SIZE:
        _graphs.popitem(last=False)
    return graph


def clear_graph_cache() -> None:
    """Forget every cached graph (benchmarks that truncate the tables between runs)."""
    _graphs.clear()


def _max_attempts(node: dict[str, Any]) -> int:
    return int(node.get("opts", {}).get("max_attempts", settings.ACURIO_MAX_ATTEMPTS))


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
        # A delayed start (start(run_at=...)): no step of this transaction is due earlier.
        self.not_before: datetime | None = None
        # Scratch space for the node kinds, for this transaction only.
        self.memo: dict[str, Any] = {}

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
        if run_at is not None and self.not_before is not None and run_at < self.not_before:
            run_at = self.not_before
        status, attempts, lease_owner, lease_expires_at, due = self._claim_on_insert(
            node, status, run_at
        )
        step_id = execute_prepared(
            statements.INSERT_STEP,
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
                self.graph.queue,
                self.graph.priority,
            ],
        )[0][0]
        if due or (status == "ready" and run_at is not None):
            # Due later (a timer, a delayed start): idle workers still wake, to sleep until
            # exactly then rather than until their next poll.
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
                max(self.now, self.not_before or self.now),
                index,
                json.dumps(chunk),
                self.now,
                self.graph.queue,
                self.graph.priority,
            )
            for index, chunk in chunks
        ]
        with connection.cursor() as cursor:
            cursor.executemany(statements.INSERT_READY_CHILD, rows)
        if rows:
            self.notify = True

    @staticmethod
    def child_key(node: dict[str, Any], parent: StepRow | None, chunk_index: int | None) -> str:
        """The ``(instance, key)`` of a node's step: the parent's key, then the node id, then
        ``[i]`` for fan-out chunk or loop iteration ``i``."""
        key = str(node["id"]) if parent is None else f"{parent.key}/{node['id']}"
        return key if chunk_index is None else f"{key}[{chunk_index}]"

    # --- reading ------------------------------------------------------------------------------
    def named(self, name: str) -> tuple[bool, Any]:
        """``(found, value)`` of the latest completed step named ``name``."""
        with connection.cursor() as cursor:
            cursor.execute(statements.NAMED_OUTPUT, [self.graph.instance_id, name])
            row = cursor.fetchone()
        return (False, None) if row is None else (True, decode_json(row[0]))

    def children_outputs(self, parent: StepRow) -> list[Any]:
        """Outputs of a step's children: fan-out chunks in order, join branches in node order."""
        with connection.cursor() as cursor:
            cursor.execute(statements.CHILDREN_OUTPUTS, [parent.id])
            return [decode_json(row[0]) for row in cursor.fetchall()]

    def load_step(self, step_id: int) -> StepRow:
        with connection.cursor() as cursor:
            cursor.execute(statements.LOAD_STEP, [step_id])
            return StepRow.from_row(cursor.fetchone())

    def is_running(self, step: StepRow) -> bool:
        """Whether the step is still running (read again: it may have finished since)."""
        with connection.cursor() as cursor:
            cursor.execute(statements.STEP_STATUS, [step.id])
            row = cursor.fetchone()
        return row is not None and row[0] == "running"

    def decrement(self, parent: StepRow) -> int | None:
        """One child of a join finished: the children still running, or None if it stopped.

        The UPDATE locks the parent row, so siblings finishing at once count down one by one
        and exactly one of them sees zero.
        """
        with connection.cursor() as cursor:
            cursor.execute(statements.DECREMENT, [parent.id])
            row = cursor.fetchone()
        return None if row is None else row[0]

    def set_remaining(self, step: StepRow, remaining: int) -> None:
        """Set a composite step's counter (a loop counts the iterations it started)."""
        with connection.cursor() as cursor:
            cursor.execute(statements.SET_REMAINING, [remaining, step.id])

    # --- finishing ------------------------------------------------------------------------
    def checkpoint(self, step: StepRow, output: Any) -> None:
        """Complete a claimed leaf step, fenced by its claim token, then advance the graph.

        Raises :class:`Fenced` when the step is no longer running under this claim (its lease
        was recovered and maybe claimed again, or its instance was cancelled or failed): the
        caller must roll back, so the task's writes vanish with it.
        """
        if isinstance(output, Break):
            self.break_out(step, output.value)
            return
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
                if not execute_prepared(statements.CHECKPOINT_LAST, params):
                    raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
                return
            follower = parent_kind.follows(parent_node, step.node_id)
            if follower is not None and follower["kind"] in CHAINABLE:
                self._checkpoint_and_activate(step, output, parent_node, follower)
                return
        # One round trip: the fenced UPDATE, and the parent row the graph advances through.
        rows = execute_prepared(
            statements.CHECKPOINT, [to_json(output), self.now, step.id, step.attempts]
        )
        if not rows:
            raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
        parent = None if rows[0][0] is None else StepRow.from_row(rows[0])
        self.advance(step, output, parent=parent)

    def plan_checkpoint(self, step: StepRow, output: Any) -> dict[str, Any] | None:
        """The checkpoint of ``step`` as a row of a group's batched checkpoint
        (``CHECKPOINT_GROUP``, :func:`checkpoint_group`), if it has one of that statement's two
        shapes: the last step of a top-level sequence, or a step whose sequence runs a task/sql
        step next. None: checkpoint it on its own (:meth:`checkpoint`)."""
        if isinstance(output, Break) or step.parent_id is None or step.chunk_index is not None:
            return None
        parent_node = self.graph.parents.get(step.node_id)
        if parent_node is None:
            return None
        parent_kind = get_kind(parent_node["kind"])
        row: dict[str, Any] = {
            "txn": self,
            "step": step,
            "output": output,
            "id": step.id,
            "attempts": step.attempts,
            "json": to_json(output),
            "last": False,
            "node": None,
            "parent_node": None,
            "status": None,
        }
        if parent_node is self.graph.spec and parent_kind.completes_with(parent_node, step.node_id):
            row["last"] = True
            return row
        follower = parent_kind.follows(parent_node, step.node_id)
        if follower is None or follower["kind"] not in CHAINABLE:
            return None
        status, _attempts, _owner, _expires, due = self._claim_on_insert(
            follower, "ready", self.now
        )
        row.update(node=follower, parent_node=parent_node["id"], status=status, due=due)
        return row

    def _checkpoint_and_activate(
        self, step: StepRow, output: Any, parent_node: dict[str, Any], node: dict[str, Any]
    ) -> None:
        """Checkpoint ``step`` and activate ``node``, the task/sql step its parent sequence
        runs next, in one statement (``CHECKPOINT_AND_INSERT_NEXT``); what ``complete`` →
        ``child_done`` → ``activate`` would do, in one round trip."""
        status, attempts, owner, expires, due = self._claim_on_insert(node, "ready", self.now)
        rows = execute_prepared(
            statements.CHECKPOINT_AND_INSERT_NEXT,
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
        self.inserted_next(step, node, next_id, next_key, status, due)

    def inserted_next(
        self,
        step: StepRow,
        node: dict[str, Any],
        next_id: int,
        next_key: str,
        status: str,
        due: bool,
    ) -> None:
        """A checkpoint statement inserted ``node``, the task/sql step that follows ``step``
        in its sequence, as ``status`` (:meth:`_claim_on_insert`): a step claimed on insert
        (``running``, attempt 1) is the one this transaction chained; one ``due`` for any
        worker makes it send a NOTIFY."""
        chained = status == "running"
        row = StepRow(
            next_id,
            step.instance_id,
            step.parent_id,
            next_key,
            node["id"],
            node["kind"],
            node.get("name", ""),
            status,
            1 if chained else 0,
            _max_attempts(node),
            None,
            None,
        )
        if chained:
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
                statements.COMPLETE_ROOT,
                [result, self.now, step.id, result, self.now, step.instance_id],
            )
            return
        if not execute_prepared(statements.COMPLETE_STEP, [result, self.now, step.id]):
            return  # cancelled meanwhile: nothing more to advance
        self.advance(step, output)

    def advance(self, step: StepRow, output: Any, *, parent: StepRow | None = None) -> None:
        """A step completed: tell its parent's kind, or finish the instance at the root.

        ``parent``: the parent's row when the caller already read it.
        """
        if step.parent_id is None:
            with connection.cursor() as cursor:
                cursor.execute(
                    statements.COMPLETE_INSTANCE, [to_json(output), self.now, step.instance_id]
                )
            return
        if parent is None:
            parent = self.load_step(step.parent_id)
        if parent.status != "running":
            return
        node = self.graph.nodes[parent.node_id]
        get_kind(node["kind"]).child_done(self, node, parent, step, output)

    def fail_step(self, step: StepRow, error: str, *, fenced: bool = True) -> bool:
        """Mark a step failed and fail its instance with ``error``. False if fenced off."""
        with connection.cursor() as cursor:
            if fenced:
                cursor.execute(
                    statements.FAIL_STEP_FENCED, [error, self.now, step.id, step.attempts]
                )
            else:
                cursor.execute(statements.FAIL_STEP, [error, self.now, step.id])
            if cursor.rowcount != 1:
                return False
        self.finish_instance("failed", error)
        return True

    def retry_step(self, step: StepRow, error: str, delay: float) -> bool:
        """Put a claimed step back to ready after ``delay`` seconds. False if fenced off."""
        run_at = self.now + timedelta(seconds=delay)
        with connection.cursor() as cursor:
            cursor.execute(statements.RETRY_STEP, [error, run_at, step.id, step.attempts])
            if cursor.rowcount != 1:
                return False
        # Even a later retry wakes idle workers: they sleep until its time (a backoff below
        # the poll interval is honoured to the millisecond).
        self.notify = True
        return True

    def reschedule(self, step: StepRow, run_at: datetime | None, note: str) -> bool:
        """Put a claimed step back to ready at ``run_at`` without using up an attempt.

        For waits woken before they are due (RetryLater with counts=False); ``run_at`` None
        leaves it to a signal. ``max_attempts`` grows with ``attempts``, which must keep
        rising because it is the claim token. False if fenced off.
        """
        with connection.cursor() as cursor:
            cursor.execute(statements.RESCHEDULE_STEP, [run_at, note, step.id, step.attempts])
            if cursor.rowcount != 1:
                return False
        if run_at is not None:
            self.notify = True  # due now, or idle workers learn its time (see retry_step)
        return True

    def cancel_below(self, step: StepRow) -> int:
        """Cancel every unfinished step below ``step`` (a race's losers, a broken loop's
        body); their workers' checkpoints are fenced off. A cancelled step that started an
        instance of its own (a ``call`` step's child workflow) has it cancelled too, with its
        descendants (:func:`cancel_trees`). Returns how many steps."""
        with connection.cursor() as cursor:
            cursor.execute(statements.CANCEL_BELOW, [self.now, step.instance_id, step.key + "/%"])
            cancelled = cursor.fetchall()
        started = [
            pk
            for step_id, kind in cancelled
            if (pk := _child_instance(kind, step.instance_id, step_id)) is not None
        ]
        if started:
            cancel_trees(started, self.now)
        return len(cancelled)

    def delete_below(self, step: StepRow, key: str) -> None:
        """Delete the step ``key`` (below ``step``) with its whole subtree, in one statement
        (the rows' foreign keys are checked at commit)."""
        with connection.cursor() as cursor:
            cursor.execute(statements.DELETE_SUBTREE, [step.instance_id, key, key + "/%"])

    def break_out(self, step: StepRow, value: Any) -> None:
        """A claimed task raised ``Break(value)``: checkpoint it with ``value`` and let the
        nearest ancestor whose kind takes the break (a loop) end there.

        Raises Fenced (roll back) when the claim was lost, PermanentError when no ancestor
        takes it.
        """
        with connection.cursor() as cursor:
            cursor.execute(
                statements.CHECKPOINT_BREAK, [to_json(value), self.now, step.id, step.attempts]
            )
            if cursor.rowcount != 1:
                raise Fenced(f"step {step.id} attempt {step.attempts} lost its claim")
        ancestor_id = step.parent_id
        while ancestor_id is not None:
            ancestor = self.load_step(ancestor_id)
            node = self.graph.nodes[ancestor.node_id]
            if get_kind(node["kind"]).take_break(self, node, ancestor, value):
                return
            ancestor_id = ancestor.parent_id
        raise PermanentError("Break was raised by a step that is not inside a loop()")

    def finish_instance(self, status: str, error: str) -> bool:
        """Fail or cancel the instance: every unfinished step is cancelled, the hook is called,
        and the unfinished child workflows below it are cancelled (:func:`cancel_descendants`:
        a failed parent leaves no orphan running, as a cancelled one does not).

        The instance UPDATE comes first and is conditional, so of two transactions failing the
        same instance only one goes on (and calls the hook).
        """
        with connection.cursor() as cursor:
            cursor.execute(
                statements.FINISH_INSTANCE, [status, error, self.now, self.graph.instance_id]
            )
            if cursor.rowcount != 1:
                return False
            # A running step's worker is fenced off by this: its checkpoint finds no
            # 'running' row and rolls back; ready steps are never claimed.
            cursor.execute(statements.CANCEL_INSTANCE_STEPS, [self.now, self.graph.instance_id])
        if self.graph.on_failure:
            self.call_on_failure(error)
        if starts_instances(self.graph):
            cancel_descendants([self.graph.instance_id], self.now)
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
                    statements.APPEND_INSTANCE_ERROR,
                    [f" (on_failure hook failed: {exc})", self.graph.instance_id],
                )

    def flush(self) -> None:
        """Wake idle workers, once per transaction; delivered at commit, dropped on rollback."""
        if self.notify:
            with connection.cursor() as cursor:
                cursor.execute(statements.NOTIFY)
            self.notify = False


def checkpoint_group(rows: list[dict[str, Any]], now: datetime, owner: str, lease: float) -> bool:
    """Checkpoint the planned rows (:meth:`Txn.plan_checkpoint`) of a group in one statement
    (``CHECKPOINT_GROUP``) and set each row's Txn as its own checkpoint would (the step it
    chained, its NOTIFY). Returns False when any of them did not go as planned: a step whose
    claim was lost, or whose next step was not inserted (its parent stopped meanwhile); the
    caller must then roll the whole transaction back and checkpoint the group step by step,
    where each such case is handled with the step's own savepoint."""
    nodes = [row["node"] or {} for row in rows]
    result = execute_prepared(
        statements.CHECKPOINT_GROUP,
        {
            "ids": [row["id"] for row in rows],
            "attempts": [row["attempts"] for row in rows],
            "outputs": [row["json"] for row in rows],
            "last": [row["last"] for row in rows],
            "suffix": [f"/{node['id']}" if node else None for node in nodes],
            "node": [node.get("id") for node in nodes],
            "kind": [node.get("kind") for node in nodes],
            "name": [node.get("name", "") if node else None for node in nodes],
            "max_attempts": [_max_attempts(node) if node else None for node in nodes],
            "parent_node": [row["parent_node"] for row in rows],
            "status": [row["status"] for row in rows],
            "now": now,
            "owner": owner,
            "expires": now + timedelta(seconds=lease),
        },
    )
    done = {step_id: (next_id, next_key) for step_id, next_id, next_key, _ in result}
    for row in rows:
        if row["id"] not in done:
            return False  # fenced
        next_id, next_key = done[row["id"]]
        if row["last"]:
            continue
        if next_id is None:
            return False  # the parent stopped: the general path decides
        row["txn"].inserted_next(
            row["step"], row["node"], next_id, next_key, row["status"], row.get("due", False)
        )
    return True


# --- the cascade to child workflows -----------------------------------------------------------
def starts_instances(graph: Graph) -> bool:
    """Whether any node of the graph may start an instance of its own (a ``call``); a kind
    this process does not know (a graph stored by a newer release) may."""
    for node in graph.nodes.values():
        try:
            if get_kind(node["kind"]).starts_instances:
                return True
        except DurableError:
            return True
    return False


def _child_instance(kind: str, instance_id: uuid.UUID, step_id: int) -> uuid.UUID | None:
    """The instance a step of this kind started, if any (none for a kind unknown here)."""
    try:
        return get_kind(kind).child_instance(instance_id, step_id)
    except DurableError:
        return None


def cancel_descendants(instance_ids: list[uuid.UUID], now: datetime | None = None) -> int:
    """Cancel every unfinished descendant of these instances — their child workflows
    (``call``, a fan_out of a sub-workflow), the children's children, and so on — in the
    caller's transaction; returns how many.

    Every cancel or failure of an instance runs it once the instance itself is finished
    (:meth:`Txn.finish_instance`: ``cancel(id)``, a step failing for good, a lease recovered
    once too often; :func:`jobs.durable.lifecycle.cancel_where`, so the CLI and the admin
    too): the call steps that wait for the children are cancelled already, so no child's
    result reaches a finished parent. See :func:`cancel_trees` for how."""
    return _cascade(list(instance_ids), now or timezone.now(), include_roots=False)


def cancel_trees(instance_ids: list[uuid.UUID], now: datetime | None = None) -> int:
    """Cancel these instances, if unfinished (ids of none are ignored), and every unfinished
    descendant of theirs, in the caller's transaction; returns how many. The cascade of a
    cancelled step that started a child (:meth:`Txn.cancel_below`).

    Each round walks the trees below its roots level by level (``CHILDREN_OF``: one index
    probe per parent, so the walk costs the size of the trees, finished subtrees included:
    a child that failed on its own may have unfinished children still) and cancels what is
    unfinished, in statements of at most ``CASCADE_BATCH`` instances: it locks their
    unfinished steps deepest first, then cancels them and the instances (and any step a
    checkpoint added meanwhile). That is the order of a worker checkpointing a child's step
    (the leaf, its ancestors, then the instance row), so a child finishing at this moment is
    waited for, not deadlocked with: if its checkpoint commits first, the child stays
    completed (exactly once: its result goes nowhere, the waiting call step is cancelled),
    otherwise it finds its step cancelled, is fenced off and rolls back. A child started
    meanwhile (a call step's insert that this cancel waited for, ``LOCK_CALLING_STEP``) is
    found by the next round, which walks the subtrees of what the previous one found; the
    rounds end when one finds nothing.

    Other orders remain (a worker failing a child locks its step, the instance, then the
    other steps; a race's winner cancels its siblings; a cancel or resume of the child itself
    locks the instance first): if PostgreSQL picks this cascade as a deadlock's victim, it is
    rolled back to its savepoint and run again.
    """
    return _cascade(list(instance_ids), now or timezone.now(), include_roots=True)


def _cascade(roots: list[uuid.UUID], now: datetime, *, include_roots: bool) -> int:
    attempt = 1
    while True:
        try:
            with transaction.atomic():
                return _cancel_trees(roots, now, include_roots)
        except OperationalError as exc:
            deadlock = isinstance(exc.__cause__, psycopg.errors.DeadlockDetected)
            if not deadlock or attempt >= CASCADE_ATTEMPTS:
                raise
            logger.info("cancel cascade below %s: deadlock (attempt %s); again", roots, attempt)
            attempt += 1


def _cancel_trees(roots: list[uuid.UUID], now: datetime, include_roots: bool) -> int:
    """The cascade inside its savepoint: round after round until none is found."""
    total = 0
    live: list[uuid.UUID] = []
    if include_roots:
        with connection.cursor() as cursor:
            cursor.execute(statements.INSTANCE_STATES, [roots])
            live = [pk for pk, state in cursor.fetchall() if state in UNFINISHED_INSTANCE]
    seen = set(roots)
    while roots:
        level = roots
        while level:  # one level of the trees per pass, CASCADE_BATCH parents per statement
            below = []
            for first in range(0, len(level), CASCADE_BATCH):
                with connection.cursor() as cursor:
                    cursor.execute(statements.CHILDREN_OF, [level[first : first + CASCADE_BATCH]])
                    for pk, state, _parent in cursor.fetchall():
                        if pk not in seen:
                            seen.add(pk)
                            below.append(pk)
                            if state in UNFINISHED_INSTANCE:
                                live.append(pk)
            level = below
        for first in range(0, len(live), CASCADE_BATCH):
            ids = live[first : first + CASCADE_BATCH]
            with connection.cursor() as cursor:
                cursor.execute(statements.LOCK_STEPS_DEEPEST_FIRST, [ids])
                cursor.execute(statements.CANCEL_STEPS_OF, [now, ids])
                cursor.execute(statements.CANCEL_INSTANCES, [now, ids])
                cancelled = cursor.fetchall()
                cursor.execute(statements.CANCEL_STEPS_OF, [now, ids])
            for pk, hook, _ in cancelled:
                if hook:
                    Txn(load_graph(pk), now).call_on_failure("cancelled")
            total += len(cancelled)
        roots, live = live, []
        seen = set(roots)
    return total
