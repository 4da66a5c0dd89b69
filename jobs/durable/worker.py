"""The worker: claims ready steps, runs them, checkpoints them; a heartbeat renews its leases.

Shape (django-tasks-db's worker, healthchecks' ``sendalerts``): a plain :class:`Worker` class
that tests drive step by step (``claim`` → ``execute``, or ``run_one``/``drain``), and a thin
``manage.py worker`` command over :meth:`Worker.run`.

One step, on Django's default connection (kept open for the worker's whole life):

1. **Claim** — one statement: ``UPDATE ... FROM (SELECT ... WHERE status = 'ready' AND
   run_at <= now ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED)``, setting ``running``,
   ``attempts + 1`` (the claim token), the lease owner and expiry. It commits on its own
   (autocommit), or at the end of the previous step's checkpoint transaction (see
   *Chaining*); either way no lock outlives that short transaction. The same statement marks
   a pending instance running (never waiting for its row lock) and returns the instance's
   graph.
2. **Run + checkpoint** — one transaction: the kind's ``execute`` (a task's ORM writes, a SQL
   statement), then the checkpoint UPDATE fenced by ``attempts = token AND status = 'running'``,
   then the graph advances (next step inserted ready, ``NOTIFY`` sent). If the fence finds
   nothing, the claim was lost (lease recovered and reclaimed, instance cancelled): the whole
   transaction rolls back, the task's writes with it. So each database step commits once.
   *Chaining*: when the checkpoint activates a next task/sql step that is due now (the next
   step of a sequence), it inserts it already claimed by this worker (attempt 1, leased), and
   the worker runs it straight away: no claim statement, no wake-up, for each step after the
   first. It is an ordinary leased claim, so a crash leaves it to lease recovery; a draining
   worker puts it back to ready. The checkpoint and that insert are one statement
   (``Txn._checkpoint_and_activate``). When the checkpoint chained nothing (the workflow
   finished, or its next step is not a task), the same transaction claims the next ready step
   of any instance with the claim statement above, so the claim commits with the checkpoint:
   one commit per step. ``Worker(chain=False)`` turns both off (step-by-step tests).
3. **Failure** — the transaction rolls back; a second short transaction records the error and
   either schedules the retry (exponential backoff with jitter) or fails the step and the
   instance (PermanentError, or attempts used up), also fenced.

While steps run, a heartbeat thread (its own connection) pushes their lease forward every
third of ``ACURIO_LEASE_SECONDS``; a step past its ``timeout`` is no longer renewed, so a hung
task is handed to another worker after one lease. When idle, the worker waits for
``NOTIFY durable_ready`` on its connection, with ``poll_interval`` as the polling fallback
(which also picks up retries whose backoff ended).

After a lost connection (PostgreSQL restarted) the worker closes it, waits a little, reconnects,
listens again, and puts its interrupted step back to ready (fenced, so a step whose commit did
land is left alone).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone
from psycopg import errors as psycopg_errors
from psycopg import pq

from jobs.durable import observe, statements
from jobs.durable.context import Context
from jobs.durable.db import execute_prepared, listening_connection
from jobs.durable.engine import (
    UNFINISHED_INSTANCE,
    Txn,
    backoff_delay,
    cache_graph,
    checkpoint_group,
    load_graph,
)
from jobs.durable.errors import DurableError, Fenced, PermanentError, RetryLater
from jobs.durable.kinds import get_kind, node_label
from jobs.durable.queues import check_queue_name, claim_limited, limited_queue_names, sync_queues
from jobs.durable.schedules import run_due_schedules
from jobs.durable.sessions import code_version, configure_worker_session, use_keepalives
from jobs.durable.state import STEP_FIELDS, StepRow
from jobs.durable.statements import claim_sql

logger = logging.getLogger("jobs.durable.worker")

# Seconds before a step this worker's code cannot run (a newer release's kind or task) is
# offered to workers again.
HANDBACK_DELAY = 2.0
# Bytes of a failed attempt's traceback kept in the step's attempt log.
TRACEBACK_LIMIT = 4000
# Entries of a step's attempt log kept (the latest).
ATTEMPT_LOG_SIZE = 20
# Seconds between reads of which queues are limited.
LIMITED_REFRESH = 2.0
# Seconds between an idle worker's looks for due periodic workflows.
SCHEDULE_CHECK = 5.0
# A claim row: the step's fields, then its instance's status, graph, input, hook, whether the
# claim started it, queue and priority, then the step's crashes (statements._CLAIM_REST).
_ROW_INSTANCE_STATUS = len(STEP_FIELDS)
_ROW_PRIORITY = len(STEP_FIELDS) + 6
_ROW_CRASHES = len(STEP_FIELDS) + 7
_ROW_ATTEMPTS = STEP_FIELDS.index("attempts")


class ConnectionLost(Exception):
    """The database connection broke while a step ran; the step goes back after reconnecting."""

    def __init__(self, step: StepRow) -> None:
        super().__init__(f"connection lost while running step {step.id}")
        self.step = step


class Heartbeat(threading.Thread):
    """Renews the leases of the steps its worker is running, on its own connection."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(name="durable-heartbeat", daemon=True)
        self.worker = worker
        self.stopped = threading.Event()

    def run(self) -> None:
        interval = max(0.2, self.worker.lease_seconds / 3)
        try:
            while not self.stopped.wait(interval):
                try:
                    self.beat()
                except DatabaseError:
                    # One line per beat, no traceback: an outage is not a bug.
                    logger.warning("heartbeat: database unavailable; retrying")
                    with contextlib.suppress(Exception):
                        connection.close()
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def beat(self) -> int:
        now = self.worker.clock()
        ids = self.worker.renewable(now)
        if not ids:
            return 0
        with connection.cursor() as cursor:
            # SKIP LOCKED: a row locked right now is being checkpointed by its own worker.
            cursor.execute(
                statements.RENEW_LEASES,
                [now + timedelta(seconds=self.worker.lease_seconds), ids, self.worker.worker_id],
            )
            return cursor.rowcount


class _Regroup(Exception):
    """A group's batched checkpoint did not go as planned: roll back, run it step by step."""


class _StepSavepoint:
    """The savepoint of each step of a group (Worker.execute_group), one round trip a step.

    Django's ``transaction.atomic()`` would take two (``SAVEPOINT`` before the step, ``RELEASE``
    after it) through psycopg's Python query machinery; here the previous step's release and
    the next step's savepoint are one message sent straight through libpq (a fifth of the
    client CPU), and the last savepoint is released by the group's commit. A task's own
    ``atomic()`` blocks nest inside as usual. After a rollback to the savepoint, Django's flag
    that the transaction needs a rollback is cleared, as its own savepoint rollback does.
    """

    NAME = "durable_group_step"
    FIRST = f"SAVEPOINT {NAME}".encode()
    NEXT = f"RELEASE SAVEPOINT {NAME}; SAVEPOINT {NAME}".encode()
    ROLLBACK = f"ROLLBACK TO SAVEPOINT {NAME}".encode()

    def __init__(self) -> None:
        self.open = False

    @staticmethod
    def _send(sql: bytes) -> None:
        with connection.wrap_database_errors:
            raw = connection.connection
            result = raw.pgconn.exec_(sql)
            if result.status != pq.ExecStatus.COMMAND_OK:
                raise psycopg_errors.error_from_result(result, encoding=raw.info.encoding)

    def enter(self) -> None:
        if self.open:
            self._send(self.NEXT)
            return
        # The group's first statement: through psycopg, which begins the transaction first.
        with connection.wrap_database_errors:
            connection.connection.execute(self.FIRST)
        self.open = True

    def roll_back(self) -> None:
        self._send(self.ROLLBACK)
        connection.needs_rollback = False


class Worker:
    """Runs ready workflow steps until told to stop (see the module docstring)."""

    def __init__(
        self,
        *,
        concurrency: int = 1,
        once: bool = False,
        poll_interval: float = 1.0,
        lease_seconds: float | None = None,
        worker_id: str | None = None,
        clock: Callable[[], datetime] = timezone.now,
        chain: bool = True,
        group: int | None = None,
        queues: list[str] | None = None,
        versions: list[str] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self.concurrency = concurrency
        self.once = once
        self.poll_interval = poll_interval
        self.lease_seconds = float(lease_seconds or settings.ACURIO_LEASE_SECONDS)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.clock = clock
        self.chain = chain
        # Group commit: claim up to ``group`` ready steps at once and commit their
        # checkpoints in one transaction (execute_group); 1 turns it off.
        self.group = int(
            group if group is not None else getattr(settings, "ACURIO_WORKER_GROUP", 1)
        )
        if self.group < 1:
            raise ValueError("group must be at least 1")
        # The queues this worker serves (None: all); the limited ones are claimed under their
        # QueueState lock (jobs.durable.queues), read again every LIMITED_REFRESH seconds.
        self.queues = [check_queue_name(q) for q in queues] if queues else None
        self._limited: list[str] = []
        self._limited_read_at = float("-inf")
        self._queue_turn = 0
        self._schedules_checked = float("-inf")
        # Code versions whose instances this worker runs (None: all): a deploy can keep new
        # workers off old instances (or the reverse) until they drain, as DBOS's
        # application versions do. Others' steps are handed back.
        self.versions = frozenset(versions) if versions else None
        self._instance_versions: dict[uuid.UUID, str] = {}
        self._local = threading.local()
        self.shutdown = False
        self.steps_run = 0  # steps completed
        self.steps_executed = 0  # attempts run, whatever their outcome
        self._lock = threading.Lock()
        # step id -> time after which the heartbeat stops renewing it (its timeout), or None
        self._active: dict[int, datetime | None] = {}
        self._listening_on: dict[int, int] = {}  # thread id -> id() of the connection listening
        self._busy_threads = 0

    # --- claiming and running ------------------------------------------------------------
    def claim(self, limit: int = 1, now: datetime | None = None) -> list[StepRow]:
        """Claim up to ``limit`` ready steps, the most urgent first across every queue this
        worker serves (one short autocommit statement, see ``statements.claim_sql``).

        Priorities hold across limited and plain queues: the plain claim takes only steps
        more urgent than the most urgent step a served limited queue could start now, and
        names those queues; the rest is then claimed from them, within their limits
        (``queues.claim_limited``, one short transaction per queue tried). When they yield
        nothing after all (another worker is claiming from them, or their limits were reached
        meanwhile), the plain claim runs again without that bound, so a worker never idles
        while steps are ready. When the claim took a step lost to a crash before among others,
        only that step is returned, the others handed back (:meth:`_isolate_suspect`).
        """
        now = now or self.clock()
        params = self._claim_params(now)
        rows, urgent = self._claim_plain(limit, params)
        if urgent and len(rows) < limit:
            rows += self._claim_from_limited(urgent, limit - len(rows), params)
            if not rows:
                rows = self._claim_plain(limit, params, bounded=False)[0]
        return self._claimed(self._isolate_suspect(rows)[0], now)

    def _claim_plain(
        self, limit: int, params: dict[str, Any], *, bounded: bool = True
    ) -> tuple[list[tuple], list[tuple[str, int]]]:
        """The plain claim: ``(rows, urgent)``, where ``urgent`` lists the served limited
        queues with a step that could start now, as ``(name, priority)``, most urgent first;
        the rows are only of steps more urgent than those. ``bounded=False``: any step of the
        plain queues, and no look at the limited ones."""
        served = "served" if self.queues else "unlimited"
        if not bounded or not self._served_limited():
            return execute_prepared(claim_sql(limit, served), params), []
        rows = execute_prepared(claim_sql(limit, served, urgent=True), params)
        names, priorities = rows[0][-2:]
        return [row[:-2] for row in rows if row[0] is not None], list(
            zip(names, priorities, strict=True)
        )

    def _claim_from_limited(
        self, urgent: list[tuple[str, int]], limit: int, params: dict[str, Any]
    ) -> list[tuple]:
        """Claim from the first of the ``urgent`` limited queues that yields steps (the most
        urgent first; queues of the same priority take turns, so one busy queue does not
        starve the next)."""
        served = self._served_limited()
        turn = self._queue_turn

        def order(item: tuple[str, int]) -> tuple[int, int]:
            name, priority = item
            place = served.index(name) if name in served else 0
            return (-priority, (place - turn) % max(1, len(served)))

        for name, _priority in sorted(urgent, key=order):
            rows = claim_limited(name, limit, params)
            if rows:
                self._queue_turn += 1
                return rows
        return []

    def _claim_params(self, now: datetime) -> dict[str, Any]:
        return {
            "now": now,
            "owner": self.worker_id,
            "expires": now + timedelta(seconds=self.lease_seconds),
            "limited": self._limited_queues(),
            "queues": self.queues or [],
            "version": code_version(),
        }

    def _limited_queues(self) -> list[str]:
        """The limited queues (from the database, read again every LIMITED_REFRESH s)."""
        if time.monotonic() - self._limited_read_at > LIMITED_REFRESH:
            self._limited = limited_queue_names()
            self._limited_read_at = time.monotonic()
        return self._limited

    def _served_limited(self) -> list[str]:
        limited = self._limited_queues()
        return [q for q in limited if self.queues is None or q in self.queues]

    def _isolate_suspect(
        self, rows: list[tuple], chained: list[StepRow] | None = None
    ) -> tuple[list[tuple], list[StepRow]]:
        """A step lost to a crash before (``crashes`` > 0) runs alone: when the claim ``rows``
        (with the steps ``chained`` to run beside them) are more than one step and some
        crashed before, keep the most urgent of those and hand every other step back at once
        (``statements.HAND_BACK_STEPS``: fenced by this claim, its attempt given back, a
        NOTIFY sent), in the transaction the claim ran in when there is one (a group's). So a
        step that kills its worker every time costs the steps grouped with it one crash, its
        first, and then crashes alone until ACURIO_MAX_CRASHES fails it. Rows of finished
        instances stay (:meth:`_claimed` cancels them). Returns the rows and chained steps
        left to run; without a crashed step, the arguments, and no statement is sent."""
        chained = chained or []
        runnable = [row for row in rows if row[_ROW_INSTANCE_STATUS] in UNFINISHED_INSTANCE]
        suspects = [row for row in runnable if row[_ROW_CRASHES]]
        if not suspects or len(runnable) + len(chained) < 2:
            return rows, chained
        keep = min(suspects, key=lambda row: (-(row[_ROW_PRIORITY] or 0), row[0]))
        back = [row for row in runnable if row is not keep]
        ids = [row[0] for row in back] + [step.id for step in chained]
        tokens = [row[_ROW_ATTEMPTS] for row in back] + [step.attempts for step in chained]
        with connection.cursor() as cursor:
            cursor.execute(statements.HAND_BACK_STEPS, [ids, tokens, self.worker_id])
        logger.info(
            "step %s lost its worker %s time(s) before: it runs alone; %s step(s) handed back",
            keep[0],
            keep[_ROW_CRASHES],
            len(ids),
        )
        finished = [row for row in rows if row[_ROW_INSTANCE_STATUS] not in UNFINISHED_INSTANCE]
        return [keep, *finished], []

    def _claimed(self, rows: list[tuple], now: datetime) -> list[StepRow]:
        """The steps of committed claim rows that may run (run with no transaction open)."""
        steps = []
        for row in rows:
            step = StepRow.from_row(row)
            step.status = "running"
            n = len(STEP_FIELDS)
            instance_status, graph, input_, on_failure, started, queue, priority = row[n : n + 7]
            if instance_status in UNFINISHED_INSTANCE:
                cache_graph(step.instance_id, graph, input_, on_failure, queue, priority)
            if instance_status == "pending":
                if not started:  # its row was locked: mark it now, no lock of ours held
                    self._mark_instance_running(step, now)
            elif instance_status != "running":
                # A step made ready while its instance was being cancelled: never run it.
                with connection.cursor() as cursor:
                    cursor.execute(statements.CANCEL_CLAIMED_STEP, [now, step.id])
                continue
            steps.append(step)
        return steps

    def _mark_instance_running(self, step: StepRow, now: datetime) -> None:
        execute_prepared(statements.MARK_INSTANCE_RUNNING, [now, step.instance_id])

    @observe.timed_step  # metrics: kind, outcome and duration of each attempt
    def execute(self, step: StepRow, *, chain: bool = False) -> str:
        """Run one claimed step and checkpoint it. Returns what happened:

        ``completed``, ``retry`` (error recorded, retry scheduled), ``failed`` (step and
        instance failed), or ``fenced`` (the claim was lost; nothing of this attempt remains).

        With ``chain``, the checkpoint may claim the instance's next task/sql step for this
        worker at once (see ``Txn.chained``); it is left in ``self._local.chained`` for
        :meth:`run_one`, which runs it next.
        """
        self.steps_executed += 1
        try:
            graph = load_graph(step.instance_id)
        except DurableError:
            return "fenced"  # the instance was deleted (its steps with it) after the claim
        node = graph.nodes[step.node_id]
        try:
            version = self._incompatible_version(step)
            if version is not None:
                raise DurableError(
                    f"its instance was started by code version {version!r}, and this worker"
                    f" runs only {', '.join(sorted(self.versions or ()))}"
                )
            kind = get_kind(node["kind"])
            kind.prepare(node)
        except (DurableError, ImportError) as exc:
            # A graph from a newer release, claimed by an older worker in a rolling deploy (a
            # kind it lacks, a task it cannot import): leave the step to a newer worker,
            # without using up one of its attempts, and keep it from every worker for
            # HANDBACK_DELAY, so old workers do not spin on it.
            note = f"worker {self.worker_id} (code version {code_version()}) cannot run it: {exc}"
            logger.warning("step %s: %s; handing it back", step.id, note)
            with transaction.atomic():
                txn = Txn(graph, self.clock())
                txn.reschedule(step, txn.now + timedelta(seconds=HANDBACK_DELAY), note)
                txn.flush()
            return "handed back"
        timeout = node.get("opts", {}).get("timeout")
        started = time.monotonic()
        with self._lock:
            self._active[step.id] = self.clock() + timedelta(seconds=timeout) if timeout else None
        ctx = Context(
            instance_id=step.instance_id,
            input=graph.input,
            chunk=step.chunk,
            chunk_index=step.chunk_index,
            step_id=step.id,
            attempt=step.attempts,
        )
        try:
            try:
                if kind.in_transaction(node):
                    with transaction.atomic():
                        if timeout:
                            self._statement_timeout(timeout)
                        output = kind.execute(ctx, node)
                        self._check_timeout(timeout, started)
                        txn = self._txn(graph, chain)
                        txn.checkpoint(step, output)
                        txn.flush()
                        claimed = self._claim_next(txn, chain)
                else:
                    output = kind.execute(ctx, node)
                    self._check_timeout(timeout, started)
                    with transaction.atomic():
                        txn = self._txn(graph, chain)
                        txn.checkpoint(step, output)
                        txn.flush()
                        claimed = self._claim_next(txn, chain)
            except Fenced:
                logger.info(
                    "step %s (attempt %s) lost its claim; rolled back", step.id, step.attempts
                )
                return "fenced"
            except Exception as exc:
                if isinstance(exc, DatabaseError) and not self._connection_usable():
                    raise ConnectionLost(step) from exc
                return self._record_failure(step, node, exc)
            self.steps_run += 1
            if claimed is not None:
                ready = self._claimed(*claimed)
                self._local.chained = ready[0] if ready else None
            else:
                self._local.chained = txn.chained
            return "completed"
        finally:
            with self._lock:
                self._active.pop(step.id, None)

    def execute_group(
        self,
        steps: list[StepRow],
        *,
        chain: bool = False,
        claim_up_to: int = 0,
        batched: bool = True,
    ) -> dict[str, int]:
        """Group commit: run claimed steps of (usually) different instances in one
        transaction, each in a savepoint of its own, and commit their checkpoints together:
        one commit for the lot instead of one per step.

        Each step still commits exactly once: its writes and its checkpoint are in its
        savepoint, and the savepoint's changes commit with the transaction or not at all (a
        crash before the commit leaves every step of the group to lease recovery, to be run
        again from its last checkpoint; each then has a crash counted, and a step with one
        runs alone when next claimed, so a step that kills its worker every time does not
        take its group-mates down again: :meth:`_isolate_suspect`). A step that raises, or
        whose claim was lost (fenced), rolls back to its own savepoint only; its failure is
        recorded after the commit, as :meth:`execute` does. Steps that need more than a
        savepoint (a timeout bounding the transaction's statements, a kind run outside a
        transaction, a hand-back to another code version) are run one by one with
        :meth:`execute` afterwards. Returns counts.

        With ``chain``, each checkpoint may insert its sequence's next task/sql step already
        claimed by this worker (as :meth:`execute` does), and the same transaction then
        claims ready steps up to ``claim_up_to`` in all (the plain claim of
        :meth:`_claim_next`). Both are left in ``self._local.carried`` for :meth:`run_one`,
        which runs them as the next group: the steps of a sequence after its first need no
        claim, and a busy worker commits once per group, its claims included.

        ``batched``: the checkpoints of the two common shapes (a sequence's next task/sql step,
        a top-level sequence's last step) are written together after the last step, in one
        statement (``engine.checkpoint_group``), the others at once in their step's savepoint.
        Should that statement find a step fenced, or a sequence stopped meanwhile (rare: a
        cancel racing the group), the whole transaction rolls back and the group runs again
        with every checkpoint in its own step's savepoint, which rolls back alone: nothing of
        the first run is committed, so every step still commits exactly once (its task runs
        twice, as after a crash).
        """
        self._local.carried = []
        grouped, alone = [], []
        for step in steps:
            try:
                graph = load_graph(step.instance_id)
            except DurableError:
                continue  # the instance was deleted (its steps with it) after the claim
            node = graph.nodes[step.node_id]
            try:
                kind = get_kind(node["kind"])
                kind.prepare(node)
                simple = (
                    kind.in_transaction(node)
                    and not node.get("opts", {}).get("timeout")
                    and self._incompatible_version(step) is None
                )
            except (DurableError, ImportError):
                simple = False  # execute() hands it back
            (grouped if simple else alone).append((step, graph, node, kind))
        # Row locks in one order across workers: two groups that both finish children of the
        # same joins count their parents down in the same order, so they never deadlock.
        grouped.sort(
            key=lambda item: (str(item[0].instance_id), item[0].parent_id or 0, item[0].id)
        )
        counts = {"completed": 0, "fenced": 0, "failed": 0}
        failures: list[tuple[StepRow, dict[str, Any], Exception]] = []
        chained: list[StepRow] = []
        claimed: tuple[list[tuple], datetime] | None = None
        with self._lock:
            for step, *_ in grouped:
                self._active[step.id] = None
        planned: list[dict[str, Any]] = []
        try:
            with transaction.atomic():
                savepoint = _StepSavepoint()
                notify = False
                for step, graph, node, kind in grouped:
                    self.steps_executed += 1
                    ctx = Context(
                        instance_id=step.instance_id,
                        input=graph.input,
                        chunk=step.chunk,
                        chunk_index=step.chunk_index,
                        step_id=step.id,
                        attempt=step.attempts,
                    )
                    savepoint.enter()
                    try:
                        output = kind.execute(ctx, node)
                        # A task that marked the transaction for rollback (set_rollback) fails,
                        # as it would in a transaction of its own.
                        connection.validate_no_broken_transaction()
                        txn = self._txn(graph, chain)
                        plan = txn.plan_checkpoint(step, output) if batched else None
                        if plan is None:
                            txn.checkpoint(step, output)
                    except Fenced:
                        savepoint.roll_back()
                        counts["fenced"] += 1
                        logger.info("step %s lost its claim; rolled back", step.id)
                        continue
                    except Exception as exc:
                        if isinstance(exc, DatabaseError) and not self._connection_usable():
                            raise ConnectionLost(step) from exc
                        savepoint.roll_back()
                        failures.append((step, node, exc))
                        continue
                    counts["completed"] += 1
                    if plan is not None:
                        planned.append(plan)
                        continue
                    notify = notify or txn.notify
                    if txn.chained is not None:
                        chained.append(txn.chained)
                if planned and not checkpoint_group(
                    planned, self.clock(), self.worker_id, self.lease_seconds
                ):
                    raise _Regroup
                for plan in planned:
                    notify = notify or plan["txn"].notify
                    if plan["txn"].chained is not None:
                        chained.append(plan["txn"].chained)
                claimed = self._claim_next(None, chain, claim_up_to - len(chained))
                if claimed is not None:
                    # A step that crashed before runs alone; the others go back, handed back
                    # in this transaction: they are never seen claimed, and a crash before
                    # its commit leaves them ready, as it leaves the claim undone.
                    rows, chained = self._isolate_suspect(claimed[0], chained)
                    claimed = (rows, claimed[1])
                if notify:
                    with connection.cursor() as cursor:
                        cursor.execute(statements.NOTIFY)
        except _Regroup:
            logger.info("a group's batched checkpoint did not go as planned; running it again")
            self.steps_executed -= len(grouped)
            return self.execute_group(steps, chain=chain, claim_up_to=claim_up_to, batched=False)
        finally:
            with self._lock:
                for step, *_ in grouped:
                    self._active.pop(step.id, None)
        self.steps_run += counts["completed"]
        carried = chained + (self._claimed(*claimed) if claimed is not None else [])
        for step, node, exc in failures:
            counts["failed"] += 1
            self._record_failure(step, node, exc)
        for step, *_ in alone:
            if self.shutdown:
                self.release(step)
            else:
                self.execute(step)
        self._local.carried = carried
        return counts

    def _claim_next(
        self, txn: Txn | None, chain: bool, limit: int = 1
    ) -> tuple[list[tuple], datetime] | None:
        """With chaining, when this checkpoint chained no step of its own instance, claim the
        next ready step in the same transaction: the claim commits with the checkpoint, one
        commit per step instead of two. Returns the claim's rows and time, to be handled
        (``_claimed``) once the transaction has committed; None when nothing was asked.

        Only the plain claim runs here, bounded by the limited queues' most urgent steps (see
        :meth:`claim`): a limited queue's claim is a transaction of its own, so when one has a
        more urgent step this claims nothing and the worker's next :meth:`claim` takes it."""
        if not chain or limit < 1 or (txn is not None and txn.chained is not None):
            return None
        if self.shutdown:
            return None
        now = self.clock()
        return self._claim_plain(limit, self._claim_params(now))[0], now

    def _txn(self, graph: Any, chain: bool) -> Txn:
        # A limited queue's steps are never chained: each start goes through its claim.
        if chain and graph.queue not in self._limited:
            return Txn(
                graph, self.clock(), chain_owner=self.worker_id, lease_seconds=self.lease_seconds
            )
        return Txn(graph, self.clock())

    def _statement_timeout(self, timeout: float) -> None:
        """Bound the step's statements by its timeout, and its transaction's idle time by the
        timeout plus a lease (jobs.durable.sessions)."""
        with connection.cursor() as cursor:
            cursor.execute(
                statements.SET_STEP_TIMEOUTS,
                [f"{int(timeout * 1000)}ms", f"{int((timeout + self.lease_seconds) * 1000)}ms"],
            )

    @staticmethod
    def _check_timeout(timeout: float | None, started: float) -> None:
        if timeout and time.monotonic() - started > timeout:
            raise TimeoutError(f"step took longer than its timeout of {timeout:g}s")

    def _record_failure(self, step: StepRow, node: dict[str, Any], exc: Exception) -> str:
        graph = load_graph(step.instance_id)
        permanent = isinstance(exc, PermanentError)
        message = str(exc) if permanent else f"{type(exc).__name__}: {exc}"
        later = exc if isinstance(exc, RetryLater) else None
        with transaction.atomic():
            txn = Txn(graph, self.clock())
            if later is not None and not later.counts:
                # A wait woken early: back to waiting, no attempt used (see kinds/timers.py).
                run_at = None if later.delay is None else txn.now + timedelta(seconds=later.delay)
                outcome = "waiting" if txn.reschedule(step, run_at, str(later)) else "fenced"
            elif permanent or step.attempts >= step.max_attempts:
                if not permanent:
                    message = f"step {node_label(node)} failed after {step.attempts} attempt(s): {message}"
                outcome = "failed" if txn.fail_step(step, message) else "fenced"
            else:
                delay = backoff_delay(step.attempts, node.get("opts", {}))
                if later is not None and later.delay is not None:
                    delay = later.delay  # the server's Retry-After, not our backoff
                outcome = "retry" if txn.retry_step(step, message, delay) else "fenced"
            if outcome in ("failed", "retry"):
                self._log_attempt(step, message, exc, txn.now)
            txn.flush()
        log = logger.warning if outcome == "failed" else logger.info
        log("step %s %s (attempt %s): %s", step.id, outcome, step.attempts, message)
        return outcome

    def _incompatible_version(self, step: StepRow) -> str | None:
        """The code version of the step's instance if this worker may not run it."""
        if self.versions is None:
            return None
        version = self._instance_versions.get(step.instance_id)
        if version is None:
            with connection.cursor() as cursor:
                cursor.execute(statements.INSTANCE_VERSION, [step.instance_id])
                row = cursor.fetchone()
            version = "" if row is None else row[0]
            if len(self._instance_versions) > 4096:
                self._instance_versions.clear()
            self._instance_versions[step.instance_id] = version
        return None if version in self.versions else version

    def _log_attempt(self, step: StepRow, message: str, exc: Exception, now: datetime) -> None:
        """Add this failed attempt, with its traceback (bounded), to the step's attempt log."""
        text = "".join(traceback.format_exception(exc))
        if len(text) > TRACEBACK_LIMIT:
            text = "...\n" + text[-TRACEBACK_LIMIT:]  # the end: where it was raised
        entry = {
            "attempt": step.attempts,
            "kind": "error",
            "error": message[:TRACEBACK_LIMIT],
            "traceback": text,
            "at": now.isoformat(),
            "worker": self.worker_id,
            "version": code_version(),
        }
        with connection.cursor() as cursor:
            cursor.execute(
                statements.APPEND_ATTEMPT_LOG, [json.dumps([entry]), ATTEMPT_LOG_SIZE, step.id]
            )

    def release(self, step: StepRow) -> None:
        """Put back a step this worker claimed but could not finish (fenced: a step whose
        checkpoint did commit is left alone)."""
        with connection.cursor() as cursor:
            cursor.execute(statements.RELEASE_STEP, [self.clock(), step.id, step.attempts])
            if cursor.rowcount:
                cursor.execute(statements.NOTIFY)

    def run_one(self, max_steps: int | None = None) -> bool:
        """Claim and run one step (a group of steps with group commit), then what its
        checkpoint chained or claimed; True if there was one. ``max_steps`` bounds the steps
        run (no chaining or claiming past it)."""
        self._ensure_session()
        self._local.claimed_at = self.clock()
        if self.group > 1 and (max_steps is None or max_steps > 1):
            return self._run_groups(max_steps)
        steps = self.claim(1)
        for step in steps:
            self._local.chained = None
            left = max_steps
            self.execute(step, chain=self.chain and (left is None or left > 1))
            # Run what the checkpoint chained (the next step of a sequence) or claimed (the
            # next ready step), unless draining.
            while (chained := self._local.chained) is not None:
                self._local.chained = None
                if self.shutdown:
                    self.release(chained)
                    break
                left = None if left is None else left - 1
                self.execute(chained, chain=left is None or left > 1)
        return bool(steps)

    def _run_groups(self, max_steps: int | None) -> bool:
        """Group commit: claim a group, run it (:meth:`execute_group`), then run what its
        transaction chained and claimed as the next group, until that is empty; True if a
        step was claimed. With ``max_steps``, no group chains or claims past the bound."""
        left = max_steps
        steps = self.claim(self.group if left is None else min(self.group, left))
        if not steps:
            return False
        while steps:
            if left is not None:
                left -= len(steps)
            room = self.group if left is None else min(self.group, left)
            # Each step chains one next step at most: chain only when they all fit.
            chain = self.chain and room >= len(steps)
            self.execute_group(steps, chain=chain, claim_up_to=room if chain else 0)
            steps = self._local.carried
            self._local.carried = []
            if self.shutdown:
                for step in steps:
                    self.release(step)
                break
        return True

    def drain(self, max_steps: int | None = None) -> int:
        """Run steps in this thread until none is ready (tests, ``--once``). Returns the count."""
        before = self.steps_executed
        while not self.shutdown:
            left = None if max_steps is None else max_steps - (self.steps_executed - before)
            if (left is not None and left <= 0) or not self.run_one(left):
                break
        return self.steps_executed - before

    def renewable(self, now: datetime) -> list[int]:
        """Ids of running steps whose lease the heartbeat should renew (not past timeout)."""
        with self._lock:
            return [i for i, deadline in self._active.items() if deadline is None or now < deadline]

    # --- the daemon loop ---------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.shutdown:
            logger.warning("%s again: exiting at once", name)
            os._exit(1)
        logger.info("%s: finishing the current step, then exiting", name)
        self.shutdown = True

    def run(self) -> int:
        """Run until a signal (or, with ``once``, until nothing is ready); returns steps run."""
        use_keepalives(self.lease_seconds)
        sync_queues(self.clock())
        heartbeat = Heartbeat(self)
        heartbeat.start()
        logger.info(
            "worker %s started (code version %s, concurrency %s, lease %ss%s)",
            self.worker_id,
            code_version(),
            self.concurrency,
            self.lease_seconds,
            f", versions {', '.join(sorted(self.versions))}" if self.versions else "",
        )
        try:
            if self.concurrency == 1:
                self._loop()
            else:
                threads = [
                    threading.Thread(target=self._thread_loop, name=f"durable-worker-{i}")
                    for i in range(self.concurrency)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    # join with a timeout keeps the main thread responsive to signals
                    while thread.is_alive():
                        thread.join(0.5)
        finally:
            heartbeat.stopped.set()
            heartbeat.join(timeout=5)
        logger.info("worker %s stopped after %s steps", self.worker_id, self.steps_run)
        return self.steps_run

    def _thread_loop(self) -> None:
        try:
            self._loop()
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def _loop(self) -> None:
        pending_release: StepRow | None = None
        failures = 0
        while not self.shutdown:
            try:
                self._listen()
                if pending_release is not None:
                    self.release(pending_release)
                    pending_release = None
                with self._lock:
                    self._busy_threads += 1
                try:
                    # Due periodic workflows first (every SCHEDULE_CHECK s): the claim that
                    # follows takes their first steps at once.
                    self._schedules_due()
                    ran = self.run_one()
                finally:
                    with self._lock:
                        self._busy_threads -= 1
                failures = 0
                if ran:
                    continue
                if self.once:
                    with self._lock:
                        others_busy = self._busy_threads > 0
                    if not others_busy:
                        return
                self._wait()
            except ConnectionLost as lost:
                pending_release = lost.step
                failures += 1
                self._reconnect_pause(failures)
            except (OperationalError, InterfaceError):
                failures += 1
                self._reconnect_pause(failures)
            except Exception:
                # A bug must not kill the worker: log it, breathe, carry on. An interrupted
                # step keeps its lease and is recovered like a crashed worker's.
                logger.exception("worker loop error; continuing")
                failures += 1
                self._sleep(min(5.0, 0.2 * 2 ** min(failures, 5)))

    def _reconnect_pause(self, failures: int) -> None:
        delay = min(5.0, 0.2 * 2 ** min(failures, 5))
        logger.warning("database unavailable; reconnecting in %.1fs", delay)
        with contextlib.suppress(Exception):
            connection.close()
        self._listening_on.pop(threading.get_ident(), None)
        self._sleep(delay)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.shutdown and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def _ensure_session(self) -> None:
        """Set this thread's connection up as a worker's, once per connection
        (jobs.durable.sessions: name, code version, lock and idle bounds, keepalives)."""
        connection.ensure_connection()
        raw = connection.connection
        if getattr(self._local, "session_of", None) is not raw:
            configure_worker_session(self.worker_id, self.lease_seconds)
            self._local.session_of = raw

    def _listen(self) -> None:
        """LISTEN on this thread's connection, again after every reconnect."""
        connection.ensure_connection()
        with connection.wrap_database_errors:  # DATABASE_DIRECT_URL's when set (db.py says why)
            raw = listening_connection()
            if self._listening_on.get(threading.get_ident()) != id(raw):
                raw.execute(statements.LISTEN)
        self._listening_on[threading.get_ident()] = id(raw)

    def _schedules_due(self) -> bool:
        """The worker loop starts the due slots of periodic workflows (jobs.durable.schedules),
        at most every SCHEDULE_CHECK seconds; True if it started any (steps are now ready)."""
        if time.monotonic() - self._schedules_checked < SCHEDULE_CHECK:
            return False
        self._schedules_checked = time.monotonic()
        return run_due_schedules(self.clock()) > 0

    def _wait(self) -> None:
        """Sleep until a NOTIFY, the polling interval, or a signal, whichever comes first."""
        raw = listening_connection()
        deadline = time.monotonic() + self._until_next_due()
        while not self.shutdown:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            # Short slices keep a drain request (SIGTERM) answered within a fraction of a second.
            # A burst of notifications costs a few cheap empty claims at most: the claim
            # that follows the first one usually takes the whole burst's work.
            for _ in raw.notifies(timeout=min(left, 0.25), stop_after=1):
                return

    def _until_next_due(self) -> float:
        """Seconds to sleep: until the next ready step's due time (a timer, a backoff), at
        most ``poll_interval``. A step made ready meanwhile NOTIFYs, whatever its due time,
        and the wait starts again from the claim that follows."""
        since = getattr(self._local, "claimed_at", None) or self.clock()
        with connection.cursor() as cursor:
            cursor.execute(statements.NEXT_DUE, [since])
            due = cursor.fetchone()[0]
        if due is None:
            return self.poll_interval
        return min(self.poll_interval, max(0.0, (due - self.clock()).total_seconds()))

    def _connection_usable(self) -> bool:
        try:
            return connection.connection is not None and connection.is_usable()
        except Exception:
            return False
