"""The control and inspection verbs: start, status, result, cancel, explain, instances, and
the sweeper's recover_expired_leases. All are importable from ``jobs.durable``.

Each verb runs in the caller's transaction when there is one (``start()`` in particular: a
rolled-back start leaves nothing behind), else in its own.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.durable.engine import Graph, StepRow, Txn, load_graph, node_label
from jobs.durable.errors import DefinitionError, InstanceNotFound
from jobs.durable.graph import Node, compile_graph, iter_spec
from jobs.durable.kinds import composite_kinds, get_kind
from jobs.durable.models import Instance, InstanceQuerySet, InstanceStatus, Step, StepStatus

RECOVERY_BATCH = 500
# StepRow's fields, in its order (recover_expired_leases reads them with the ORM).
_STEP_FIELDS = (
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


def _instance_id(instance_id: uuid.UUID | str) -> uuid.UUID:
    if isinstance(instance_id, uuid.UUID):
        return instance_id
    try:
        return uuid.UUID(str(instance_id))
    except ValueError:
        raise InstanceNotFound(f"{instance_id!r} is not a workflow instance id (a UUID)") from None


def _get(instance_id: uuid.UUID | str) -> Instance:
    pk = _instance_id(instance_id)
    try:
        return Instance.objects.get(pk=pk)
    except Instance.DoesNotExist:
        raise InstanceNotFound(f"no workflow instance {pk}") from None


def start(
    workflow: Node,
    *,
    label: str = "",
    owner: Any = None,
    input: Any = None,
    on_failure: str = "",
    user: Any = None,
) -> uuid.UUID:
    """Store the workflow's graph as a new instance and make its first step(s) ready.

    Joins the caller's transaction. ``owner`` is a user (or None); ``input`` is any JSON data,
    read by steps as ``ctx.input``; ``on_failure`` is the dotted path of
    ``fn(instance_id, error)``, called in the transaction that fails or cancels the instance.
    Raises DefinitionError for a malformed workflow, an unimportable task or hook, or input
    that JSON cannot hold. ``user`` is the person starting it (the owner unless ``owner`` is
    given): NotPermitted unless they hold the permissions it needs (jobs.durable.permissions).
    """
    spec = compile_graph(workflow)
    for node in iter_spec(spec):
        get_kind(node["kind"]).check(node)
    if user is not None:
        from jobs.durable.permissions import check_start

        check_start(user, spec)
        if owner is None:
            owner = user
    if not isinstance(label, str) or len(label) > 200:
        raise DefinitionError("label must be a string of at most 200 characters")
    if on_failure:
        try:
            hook = import_string(on_failure)
        except ImportError as exc:
            raise DefinitionError(f"on_failure {on_failure!r} cannot be imported: {exc}") from exc
        if not callable(hook):
            raise DefinitionError(f"on_failure {on_failure!r} is not callable")
    try:
        input = json.loads(json.dumps(input))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"workflow input must be JSON-serialisable: {exc}") from exc

    now = timezone.now()
    with transaction.atomic():
        instance = Instance.objects.create(
            label=label,
            owner=owner,
            graph=spec,
            input=input,
            on_failure=on_failure,
            created_at=now,
        )
        txn = Txn(Graph.build(instance.id, spec, input, on_failure), now)
        txn.activate(spec, None)
        txn.flush()
    return instance.id


def status(instance_id: uuid.UUID | str) -> str:
    """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``."""
    pk = _instance_id(instance_id)
    value = Instance.objects.filter(pk=pk).values_list("status", flat=True).first()
    if value is None:
        raise InstanceNotFound(f"no workflow instance {pk}")
    return value


def result(instance_id: uuid.UUID | str) -> Any:
    """The last step's output (JSON data) of a completed instance; None until it completes."""
    pk = _instance_id(instance_id)
    row = Instance.objects.filter(pk=pk).values_list("status", "result").first()
    if row is None:
        raise InstanceNotFound(f"no workflow instance {pk}")
    return row[1] if row[0] == InstanceStatus.COMPLETED else None


def error(instance_id: uuid.UUID | str) -> str:
    """The error of a failed instance ('' otherwise)."""
    return _get(instance_id).error


def cancel(instance_id: uuid.UUID | str) -> bool:
    """Cancel an unfinished instance: its unfinished steps never run (or never checkpoint).

    Returns False when the instance had already finished. The on_failure hook is called with
    the error ``"cancelled"``.
    """
    pk = _instance_id(instance_id)
    with transaction.atomic():
        if not Instance.objects.filter(pk=pk).exists():
            raise InstanceNotFound(f"no workflow instance {pk}")
        return Txn(load_graph(pk)).finish_instance(InstanceStatus.CANCELLED, "cancelled")


def instances(
    owner: Any = None,
    status: str | None = None,
    label: str | None = None,
    *,
    user: Any = None,
) -> InstanceQuerySet:
    """Instances newest first, filtered; a lazy QuerySet (slice or paginate it).

    ``user``: restrict to what that user may see (staff everything, others their own).
    """
    qs = Instance.objects.defer("graph", "input", "result").order_by("-created_at")
    if status is not None:
        if status not in InstanceStatus.values:
            raise ValueError(
                f"unknown status {status!r}; expected one of {', '.join(InstanceStatus.values)}"
            )
        qs = qs.filter(status=status)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if label is not None:
        qs = qs.filter(label=label)
    if user is not None:
        qs = qs.visible_to(user)
    return qs


def recover_expired_leases(now: datetime | None = None) -> int:
    """Return steps whose worker's lease expired to ready; fail those out of attempts.

    Called by the sweeper every tick. Rows locked by a live checkpoint are skipped (their
    worker is evidently alive). Returns the number of steps recovered or failed.
    """
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            rows = list(
                Step.objects.expired(now)
                .order_by("lease_expires_at")
                .select_for_update(skip_locked=True)
                .values_list(*_STEP_FIELDS)[:RECOVERY_BATCH]
            )
            notify_graphs: list[Txn] = []
            for row in rows:
                step = StepRow.from_row(row)
                txn = Txn(load_graph(step.instance_id), now)
                node = txn.graph.nodes[step.node_id]
                if step.attempts >= step.max_attempts:
                    txn.fail_step(
                        step,
                        f"step {node_label(node)}: its worker stopped renewing the lease"
                        f" (attempt {step.attempts} of {step.max_attempts}); giving up",
                    )
                else:
                    txn.retry_step(
                        step,
                        f"lease expired on attempt {step.attempts} (worker lost); retrying",
                        0,
                    )
                    notify_graphs.append(txn)
            if notify_graphs:
                notify_graphs[0].flush()
        total += len(rows)
        if len(rows) < RECOVERY_BATCH:
            return total


def current_step(instance_id: uuid.UUID | str) -> dict[str, Any] | None:
    """What an instance is doing now, cheaply, for a progress bar.

    ``{"step": name, "kind", "state", "done", "total"}``: the running (else ready) leaf step,
    else the last finished one; ``done``/``total`` count the chunks of the fan-out it belongs
    to, or the graph's steps outside fan-outs. None for an unknown instance.
    """
    pk = _instance_id(instance_id)
    graph = _graph_or_none(pk)
    if graph is None:
        return None
    with connection.cursor() as cursor:
        # Scans this instance's steps through the (instance, key) unique index.
        cursor.execute(
            "SELECT id, node_id, kind, status, parent_id FROM durable_step"
            " WHERE instance_id = %s AND kind <> ALL(%s)"
            " ORDER BY CASE status WHEN 'running' THEN 0 WHEN 'ready' THEN 1 ELSE 2 END,"
            " (CASE WHEN status IN ('running', 'ready') THEN id ELSE -id END) LIMIT 1",
            [pk, composite_kinds()],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        _, node_id, kind, state, parent_id = row
        node = graph.nodes[node_id]
        parent_node = next((n for n in graph.nodes.values() if node in n.get("children", ())), None)
        if parent_node is not None and parent_node["kind"] == "fan_out":
            cursor.execute(
                "SELECT count(*) FILTER (WHERE status = 'completed'), count(*)"
                " FROM durable_step WHERE parent_id = %s",
                [parent_id],
            )
            done, total = cursor.fetchone()
            name = parent_node["name"] or node_label(node)
        else:
            in_fan_out = {
                c["id"]
                for n in graph.nodes.values()
                if n["kind"] == "fan_out"
                for c in n["children"]
            }
            leaves = [
                n["id"]
                for n in graph.nodes.values()
                if get_kind(n["kind"]).leaf and n["id"] not in in_fan_out
            ]
            cursor.execute(
                "SELECT count(DISTINCT node_id) FROM durable_step WHERE instance_id = %s"
                " AND status = 'completed' AND node_id = ANY(%s)",
                [pk, leaves],
            )
            done, total = cursor.fetchone()[0], len(leaves)
            name = node["name"] or node_label(node)
    return {"step": name, "kind": kind, "state": state, "done": done, "total": total}


def _graph_or_none(pk: uuid.UUID) -> Graph | None:
    try:
        return load_graph(pk)
    except Exception:
        return None


def explain(instance_id: uuid.UUID | str) -> dict[str, Any]:
    """The instance with its graph, each node's state, attempts and timings.

    Returns ``{"id", "label", "status", "error", "created_at", "started_at", "finished_at",
    "graph": node, "text": str}`` where each node is ``{"id", "kind", "label", "name",
    "state", "attempts", "started_at", "finished_at", "seconds", "error", "children",
    "chunks"}`` (``state`` is ``"not started"`` for nodes not yet reached; ``chunks`` counts a
    fan-out's children by state). ``text`` draws the same tree for a terminal.
    """
    instance = _get(instance_id)
    steps: dict[int, list[Step]] = {}
    for step in instance.steps.order_by("id").only(
        "id", "node_id", "status", "attempts", "started_at", "finished_at", "error", "parent_id"
    ):
        steps.setdefault(step.node_id, []).append(step)

    def describe(node: dict[str, Any], chunked: bool = False) -> dict[str, Any]:
        rows = steps.get(node["id"], [])
        info: dict[str, Any] = {
            "id": node["id"],
            "kind": node["kind"],
            "label": node_label(node),
            "name": node.get("name", ""),
            "state": "not started",
            "attempts": 0,
            "started_at": None,
            "finished_at": None,
            "seconds": None,
            "error": "",
            "children": [],
            "chunks": None,
        }
        if chunked:
            counts: dict[str, int] = {}
            for row in rows:
                counts[row.status] = counts.get(row.status, 0) + 1
            info["chunks"] = counts
            info["attempts"] = sum(row.attempts for row in rows)
            info["error"] = next((row.error for row in rows if row.error), "")
            if rows:
                info["state"] = _summary_state(counts)
                info["started_at"] = min((r.started_at for r in rows if r.started_at), default=None)
                if all(r.finished_at for r in rows):
                    info["finished_at"] = max(r.finished_at for r in rows)
        elif rows:
            row = rows[-1]
            info.update(
                state=row.status,
                attempts=row.attempts,
                started_at=row.started_at,
                finished_at=row.finished_at,
                error=row.error,
            )
        if info["started_at"] and info["finished_at"]:
            info["seconds"] = round((info["finished_at"] - info["started_at"]).total_seconds(), 3)
        info["children"] = [
            describe(child, chunked=node["kind"] == "fan_out") for child in node.get("children", ())
        ]
        return info

    graph = describe(instance.graph)
    data = {
        "id": str(instance.id),
        "label": instance.label,
        "status": instance.status,
        "error": instance.error,
        "created_at": instance.created_at,
        "started_at": instance.started_at,
        "finished_at": instance.finished_at,
        "graph": graph,
    }
    data["text"] = _explain_text(data)
    return data


def _summary_state(counts: dict[str, int]) -> str:
    for state in (
        StepStatus.FAILED,
        StepStatus.RUNNING,
        StepStatus.READY,
        StepStatus.CANCELLED,
    ):
        if counts.get(state):
            return state
    return StepStatus.COMPLETED


def _explain_text(data: dict[str, Any]) -> str:
    head = f"instance {data['id']}"
    if data["label"]:
        head += f" [{data['label']}]"
    lines = [f"{head}: {data['status']}"]
    if data["error"]:
        lines.append(f"error: {data['error']}")

    def walk(node: dict[str, Any], prefix: str, last: bool, root: bool) -> None:
        branch = "" if root else ("└─ " if last else "├─ ")
        parts = [f"{node['label']}: {node['state']}"]
        if node["chunks"]:
            parts.append(", ".join(f"{n} {s}" for s, n in sorted(node["chunks"].items())))
        if node["attempts"] > 1 or (node["attempts"] and get_kind(node["kind"]).leaf):
            parts.append(f"attempts {node['attempts']}")
        if node["seconds"] is not None:
            parts.append(f"{node['seconds']:.3f}s")
        if node["error"]:
            parts.append(f"error: {node['error']}")
        lines.append(prefix + branch + " · ".join(parts))
        child_prefix = prefix + ("" if root else ("   " if last else "│  "))
        children = node["children"]
        for i, child in enumerate(children):
            walk(child, child_prefix, i == len(children) - 1, False)

    walk(data["graph"], "", True, True)
    return "\n".join(lines)
