"""Instances after the fact: resume, fork, purge and cancel by filter.

* :func:`resume` — a failed or cancelled instance runs again from where it stopped: every
  failed or cancelled step not below a completed one (a race's losers, a broken loop's body
  stay as they are) goes back to ready (leaves, with a fresh retry budget) or running
  (composites, whose counters still count the children left); completed checkpoints stay.
  A reopened ``call`` step keeps its child (the same deterministic id,
  ``child:<instance>:<step>``): a failed or cancelled child is resumed with it, in the same
  transaction, so the child's completed steps are not run again either.
* :func:`fork` — a new instance of the same graph and input that reuses the original's
  checkpoints up to a step: the new instance is activated as usual, and each ready leaf whose
  key the original completed before that step was activated is checkpointed at once with the
  original's output, so the graph advances through the kinds' own logic (counters, joins,
  named results) until it reaches that step, which runs anew.
* :func:`purge` — delete whole finished trees: root instances (their steps, signals and
  child instances go with them: ``ON DELETE CASCADE`` in the database), never a child alone,
  in batches of short transactions.
* :func:`cancel_where` — cancel every unfinished instance matching a filter, in batches: one
  statement per batch for the instances, one for their steps, the hooks in the same
  transaction.
* :func:`~jobs.durable.engine.cancel_descendants` (defined in the engine, whose failures
  run it too) — the cascade of every cancel (``cancel(id)``, the CLI, the admin,
  :func:`cancel_where`): the unfinished child workflows of the cancelled instances, their
  children and so on, in the cancel's own transaction.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from jobs.durable import launch, statements
from jobs.durable.db import decode_json
from jobs.durable.engine import Txn, _max_attempts, cancel_descendants, load_graph
from jobs.durable.errors import DefinitionError, DurableError, InstanceNotFound
from jobs.durable.kinds import get_kind
from jobs.durable.kinds.children import child_workflow_id
from jobs.durable.models import (
    INSTANCE_FINISHED,
    Instance,
    InstanceStatus,
    Step,
    instance_pk_for,
    parse_instance_id,
)
from jobs.durable.state import STEP_FIELDS, StepRow

logger = logging.getLogger("jobs.durable.lifecycle")

PURGE_BATCH = 500
CANCEL_BATCH = 500


class NotResumable(DurableError):
    """resume() of an instance that did not fail and was not cancelled."""


# --- resume -----------------------------------------------------------------------------------
def resume(instance_id: uuid.UUID | str) -> bool:
    """Run a failed or cancelled instance again from its failed (and cancelled) steps.

    Completed checkpoints are kept and not run again. A reopened ``call`` step (a child
    workflow, or a fan_out chunk's) reattaches to the child it started: that child, if it
    failed or was cancelled (a cancel cascades to children), is resumed too, and so on down,
    so its completed steps are not run again; a completed child's result is bound as is.
    Joins the caller's transaction. Returns True once the instance is running again;
    NotResumable for an instance that completed or is still unfinished, InstanceNotFound for
    none.
    """
    pk = parse_instance_id(instance_id)
    with transaction.atomic():
        _resume(pk, timezone.now())
    return True


def _resume(pk: uuid.UUID, now: datetime) -> None:
    """resume() in the caller's transaction: the instance, then its reopened calls' children."""
    with connection.cursor() as cursor:
        cursor.execute(statements.LOCK_INSTANCE_FOR_SIGNAL, [pk])
        row = cursor.fetchone()
    if row is None:
        raise InstanceNotFound(f"no workflow instance {pk}")
    if row[0] not in (InstanceStatus.FAILED, InstanceStatus.CANCELLED):
        raise NotResumable(
            f"workflow instance {pk} is {row[0]}: only a failed or cancelled one resumes"
        )
    graph = load_graph(pk)
    steps = list(Step.objects.of_instance(pk).values_list("id", "parent_id", "status", "node_id"))
    by_id = {s[0]: s for s in steps}

    def reopens(step_id: int) -> bool:
        # A failed/cancelled step reopens unless an ancestor completed (that part of the
        # graph is decided: a race's loser, a loop body after its Break).
        parent_id = by_id[step_id][1]
        while parent_id is not None:
            if by_id[parent_id][2] == "completed":
                return False
            parent_id = by_id[parent_id][1]
        return True

    leaves, composites, calls = [], [], []
    for step_id, _parent, state, node_id in steps:
        if state not in ("failed", "cancelled") or not reopens(step_id):
            continue
        node = graph.nodes[node_id]
        if get_kind(node["kind"]).leaf:
            leaves.append((step_id, _max_attempts(node)))
            if node["kind"] == "call":
                calls.append(step_id)
        else:
            composites.append(step_id)
    if not leaves and not composites:
        raise NotResumable(f"workflow instance {pk} has no failed or cancelled step to rerun")
    with connection.cursor() as cursor:
        for step_id, budget in leaves:
            cursor.execute(statements.REOPEN_LEAF, [budget, now, step_id])
        if composites:
            cursor.execute(statements.REOPEN_COMPOSITES, [composites])
        cursor.execute(statements.REOPEN_INSTANCE, [pk])
        cursor.execute(statements.NOTIFY)
    _resume_children(pk, calls, now)


def _resume_children(pk: uuid.UUID, call_steps: list[int], now: datetime) -> None:
    """Resume the failed or cancelled children of these reopened call steps (each call step
    has at most one child, found by its derived id). A child with nothing to rerun is left
    as it is: its step then fails again with the child's status, which is the truth. One
    read by primary keys for them all."""
    if not call_steps:
        return
    children = Instance.objects.filter(
        pk__in=[instance_pk_for(child_workflow_id(pk, step_id)) for step_id in call_steps],
        status__in=(InstanceStatus.FAILED, InstanceStatus.CANCELLED),
    ).values_list("pk", flat=True)
    for child in children:
        try:
            with transaction.atomic():
                _resume(child, now)
        except NotResumable:
            continue


# --- fork -------------------------------------------------------------------------------------
def fork(instance_id: uuid.UUID | str, *, from_step: str, label: str | None = None) -> uuid.UUID:
    """Start a new instance of the same graph and input that reuses the original's completed
    checkpoints up to the step ``from_step`` (a result name given with ``.as_()``, or a
    task's function name), which runs anew, and everything after it. Joins the caller's
    transaction; returns the new instance's id."""
    pk = parse_instance_id(instance_id)
    original = Instance.objects.find(pk)
    spec = decode_json(original.graph)
    graph = load_graph(pk)
    node_ids = [
        n["id"]
        for n in graph.nodes.values()
        if n.get("name") == from_step
        or (n["kind"] == "task" and n.get("path", "").rsplit(".", 1)[-1] == from_step)
    ]
    if not node_ids:
        raise DefinitionError(f"workflow instance {pk} has no step named {from_step!r}")
    first = Step.objects.of_instance(pk).filter(node_id__in=node_ids).order_by("id").first()
    if first is None:
        raise DefinitionError(
            f"step {from_step!r} of workflow instance {pk} never started: nothing to fork from"
        )
    reusable = {
        key: output
        for key, output in Step.objects.of_instance(pk)
        .filter(status="completed", id__lt=first.id, finished_at__lte=first.created_at)
        .exclude(node_id__in=node_ids)
        .values_list("key", "output")
    }
    options = launch.StartOptions(
        spec=spec,
        label=original.label if label is None else label,
        owner_id=original.owner_id,
        on_failure=original.on_failure,
        queue=original.queue,
        priority=original.priority,
        run_at=None,
        forked_from=pk,
    )
    with transaction.atomic():
        new_pk = launch.create(options, [original.input])[0]
        replay(new_pk, reusable)
    return new_pk


def replay(instance_id: uuid.UUID, outputs: dict[str, Any]) -> int:
    """Checkpoint the instance's ready leaves whose keys are in ``outputs`` with those
    outputs, again and again as the graph advances; returns how many."""
    done = 0
    now = timezone.now()
    while True:
        rows = list(
            Step.objects.of_instance(instance_id)
            .filter(status="ready", key__in=list(outputs))
            .order_by("id")
            .values_list(*STEP_FIELDS)
        )
        if not rows:
            return done
        for row in rows:
            step = StepRow.from_row(row)
            with connection.cursor() as cursor:
                cursor.execute(statements.CLAIM_FOR_REPLAY, [now, step.id])
                step.attempts = cursor.fetchone()[0]
            step.status = "running"
            txn = Txn(load_graph(instance_id), now)
            txn.checkpoint(step, outputs[step.key])
            txn.flush()
            done += 1


# --- purge ------------------------------------------------------------------------------------
def purge(
    *,
    older_than: timedelta,
    status: str | list[str] | None = None,
    batch: int = PURGE_BATCH,
    now: datetime | None = None,
    max_batches: int | None = None,
) -> int:
    """Delete whole trees of instances whose root finished more than ``older_than`` ago
    (only roots of ``status``, a finished status or a list of them, if given), ``batch``
    roots per short transaction; returns how many roots went.

    A root is an instance no workflow called; its child workflows (and theirs) go with it,
    with every step and signal (``ON DELETE CASCADE``), whatever their own status or age. A
    child is never purged on its own: its parent may still be waiting for its result, or be
    resumed and find it again. A root whose tree still holds an unfinished instance (a child
    resumed on its own) is kept. ``max_batches`` bounds the batches of this call (the
    retention sweep: the rest goes next time)."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ValueError("older_than must be a timedelta >= 0")
    statuses = list(INSTANCE_FINISHED) if status is None else (
        [status] if isinstance(status, str) else list(status)
    )  # fmt: skip
    unknown = sorted(set(statuses) - set(INSTANCE_FINISHED))
    if unknown:
        raise ValueError(
            f"purge() takes finished statuses only ({', '.join(INSTANCE_FINISHED)}),"
            f" not {', '.join(unknown)}"
        )
    if batch < 1:
        raise ValueError("batch must be at least 1")
    cutoff = (now or timezone.now()) - older_than
    total = 0
    batches = 0
    kept: list[uuid.UUID] = []
    while max_batches is None or batches < max_batches:
        batches += 1
        # Each batch is its own transaction, so no lock outlives one batch.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statements.purge_sql(batch), [cutoff, statuses, kept])
            roots = [row[0] for row in cursor.fetchall()]
            # Until a batch finds nothing: a short batch may only have skipped locked rows.
            if not roots:
                return total
            live = _trees_with_unfinished(roots)
            if live:
                logger.info("purge keeps %d tree(s) with an unfinished instance", len(live))
                kept += live
            doomed = [pk for pk in roots if pk not in live]
            if doomed:
                cursor.execute(statements.PURGE, [doomed])
                total += cursor.rowcount
    return total


def _trees_with_unfinished(roots: list[uuid.UUID]) -> set[uuid.UUID]:
    """The roots whose trees hold an unfinished descendant: a walk down ``parent_instance``
    level by level (``CHILDREN_OF_SHARED``, one index probe per parent: a batch of roots
    without children costs one statement), share-locking the descendants until the batch
    ends, so none is resumed between this look and the delete."""
    root_of = {pk: pk for pk in roots}
    live: set[uuid.UUID] = set()
    level = list(roots)
    while level:
        below = []
        for first in range(0, len(level), PURGE_BATCH):
            with connection.cursor() as cursor:
                cursor.execute(statements.CHILDREN_OF_SHARED, [level[first : first + PURGE_BATCH]])
                for pk, state, parent in cursor.fetchall():
                    if pk in root_of:
                        continue
                    root_of[pk] = root_of[parent]
                    if state not in INSTANCE_FINISHED:
                        live.add(root_of[pk])
                    below.append(pk)
        level = below
    return live


# --- cancel by filter -------------------------------------------------------------------------
def cancel_where(
    *,
    label: str | None = None,
    owner: Any = None,
    queue: str | None = None,
    status: str | None = None,
    created_before: datetime | None = None,
    user: Any = None,
    batch: int = CANCEL_BATCH,
    queryset: Any = None,
) -> int:
    """Cancel every unfinished instance matching all the filters given; returns how many.

    At least one filter is required (or ``queryset``, instances already chosen: the admin's
    selection, possibly every row its filters match). ``user`` restricts to what that user
    may control (staff everything, others their own). Batches of short transactions: one
    statement cancels a batch's instances, one their unfinished steps; on_failure hooks run
    in the same transaction, as with ``cancel()``, and so does the cascade to their child
    workflows (:func:`cancel_descendants`; the count is of the instances matched, not of
    their descendants)."""
    if queryset is None and all(v is None for v in (label, owner, queue, status, created_before)):
        raise ValueError("cancel by filter needs at least one filter")
    if status is not None and status not in ("pending", "running"):
        raise ValueError("only pending or running instances can be cancelled")
    qs = (Instance.objects if queryset is None else queryset).unfinished()
    if label is not None:
        qs = qs.filter(label=label)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if queue is not None:
        qs = qs.filter(queue=queue)
    if status is not None:
        qs = qs.filter(status=status)
    if created_before is not None:
        qs = qs.filter(created_at__lt=created_before)
    if user is not None:
        qs = qs.visible_to(user)
    total = 0
    while True:
        now = timezone.now()
        with transaction.atomic():
            ids = list(
                qs.order_by("created_at")
                .select_for_update(skip_locked=True, of=("self",))
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                return total
            with connection.cursor() as cursor:
                cursor.execute(statements.CANCEL_INSTANCES, [now, ids])
                cancelled = cursor.fetchall()
                cursor.execute(statements.CANCEL_STEPS_OF, [now, [row[0] for row in cancelled]])
            for pk, hook, _ in cancelled:
                if hook:
                    Txn(load_graph(pk), now).call_on_failure("cancelled")
            cancel_descendants([row[0] for row in cancelled], now)
        total += len(cancelled)
