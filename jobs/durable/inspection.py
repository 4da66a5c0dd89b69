"""Reading what an instance is doing: ``explain`` (the graph with each node's state),
``current_step`` (a progress bar's two numbers) and ``waits`` (its open timers and signal
waits). All are importable from ``jobs.durable``; none changes anything.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection

from jobs.durable import statements
from jobs.durable.engine import load_graph
from jobs.durable.kinds import composite_kinds, get_kind, node_label, wait_kinds
from jobs.durable.models import Instance, Step, StepStatus, parse_instance_id
from jobs.durable.state import Graph


def current_step(instance_id: uuid.UUID | str) -> dict[str, Any] | None:
    """What an instance is doing now, cheaply, for a progress bar.

    ``{"step": name, "kind", "state", "done", "total"}``: the running (else ready) leaf step,
    else the last finished one; ``done``/``total`` count the chunks of the fan-out it belongs
    to, or the graph's steps outside fan-outs. None for an unknown instance.
    """
    pk = parse_instance_id(instance_id)
    graph = _graph_or_none(pk)
    if graph is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(statements.CURRENT_LEAF, [pk, composite_kinds()])
        row = cursor.fetchone()
        if row is None:
            return None
        _, node_id, kind, state, parent_id = row
        node = graph.nodes[node_id]
        parent_node = next((n for n in graph.nodes.values() if node in n.get("children", ())), None)
        if parent_node is not None and parent_node["kind"] == "fan_out":
            cursor.execute(statements.CHUNKS_DONE, [parent_id])
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
            cursor.execute(statements.NODES_DONE, [pk, leaves])
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
    "state", "attempts", "crashes", "code_version", "attempt_log", "started_at",
    "finished_at", "seconds", "error", "children", "chunks"}`` (``state`` is ``"not started"``
    for nodes not yet reached; ``chunks`` counts a fan-out's children by state). ``attempts``
    counts the runs that ended (a lost lease is a crash, counted apart); ``attempt_log`` holds
    every failed attempt and lost lease with its error and traceback (bounded, latest last).
    ``text`` draws the same tree for a terminal.
    """
    instance = Instance.objects.find(instance_id)
    steps: dict[int, list[Step]] = {}
    for step in instance.steps.order_by("id").only(
        "id",
        "node_id",
        "status",
        "attempts",
        "crashes",
        "code_version",
        "attempt_log",
        "started_at",
        "finished_at",
        "error",
        "parent_id",
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
            "crashes": 0,
            "code_version": "",
            "attempt_log": [],
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
            info["attempts"] = sum(row.attempts - row.crashes for row in rows)
            info["crashes"] = sum(row.crashes for row in rows)
            info["attempt_log"] = [entry for row in rows for entry in row.attempt_log or []]
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
                attempts=row.attempts - row.crashes,
                crashes=row.crashes,
                code_version=row.code_version,
                attempt_log=list(row.attempt_log or []),
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
        if node["crashes"]:
            parts.append(f"crashes {node['crashes']}")
        if node["code_version"]:
            parts.append(f"version {node['code_version']}")
        if node["seconds"] is not None:
            parts.append(f"{node['seconds']:.3f}s")
        if node["error"]:
            parts.append(f"error: {node['error']}")
        lines.append(prefix + branch + " · ".join(parts))
        child_prefix = prefix + ("" if root else ("   " if last else "│  "))
        for entry in node["attempt_log"]:
            # Every failed attempt and lost lease, with its traceback, under its step.
            lines.append(
                f"{child_prefix}   ! {entry.get('kind', 'error')} on attempt"
                f" {entry.get('attempt')} at {entry.get('at', '')}: {entry.get('error', '')}"
            )
            for tb_line in (entry.get("traceback") or "").rstrip().splitlines():
                lines.append(f"{child_prefix}     {tb_line}")
        children = node["children"]
        for i, child in enumerate(children):
            walk(child, child_prefix, i == len(children) - 1, False)

    walk(data["graph"], "", True, True)
    return "\n".join(lines)


def waits(instance_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """The open waits of an instance: ``[{"step", "kind", "label", "until", "signal",
    "signalled"}]`` — ``until`` is when the wait ends by itself (None: only a signal ends it),
    ``signal`` the awaited signal's name (None for timers), ``signalled`` whether a signal has
    arrived and the step only waits for a worker."""
    pk = parse_instance_id(instance_id)
    with connection.cursor() as cursor:
        cursor.execute(statements.OPEN_WAITS, [pk, wait_kinds()])
        rows = cursor.fetchall()
    if not rows:
        return []
    graph = load_graph(pk)
    result: list[dict[str, Any]] = []
    for _id, key, node_id, kind, created_at, signalled in rows:
        node = graph.nodes[node_id]
        until = get_kind(kind).wait_until(node, created_at)
        result.append(
            {
                "step": key,
                "kind": kind,
                "label": node_label(node),
                "until": until,
                "signal": node.get("signal"),
                "signalled": bool(signalled),
            }
        )
    return result
