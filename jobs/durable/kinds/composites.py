"""The composites of data flow: ``seq`` (``a >> b``), ``all`` (``a & b``) and ``fan_out``."""

from __future__ import annotations

from typing import Any

from jobs.durable.kinds.base import Kind, register


@register
class SeqKind(Kind):
    name = "seq"
    fixed_activation = True  # its row, then its children's activations

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
        txn.activate(node["children"][0], step)
        return step

    def completes_with(self, node, child_node_id):
        return node["children"][-1]["id"] == child_node_id

    def follows(self, node, child_node_id):
        ids = [c["id"] for c in node["children"]]
        position = ids.index(child_node_id)
        return node["children"][position + 1] if position + 1 < len(ids) else None

    def child_done(self, txn, node, step, child, output):
        ids = [c["id"] for c in node["children"]]
        position = ids.index(child.node_id)
        if position + 1 == len(ids):
            txn.complete(step, output)
        else:
            txn.activate(node["children"][position + 1], step)

    def describe(self, node):
        return node["name"] or "sequence"


@register
class AllKind(Kind):
    name = "all"
    fixed_activation = True  # its row, then its children's activations

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        children = node["children"]
        step = txn.insert_step(
            node, parent, status="running", remaining=len(children), chunk_index=chunk_index
        )
        for child in children:
            txn.activate(child, step)
        return step

    def child_done(self, txn, node, step, child, output):
        if txn.decrement(step) == 0:
            txn.complete(step, txn.children_outputs(step))

    def describe(self, node):
        return node["name"] or "all of"


@register
class FanOutKind(Kind):
    name = "fan_out"

    def activate(self, txn, node, parent, *, chunk_index=None, chunk=None):
        found, items = txn.named(node["over"])
        body = node["children"][0]
        if not found or not isinstance(items, list):
            got = "nothing" if not found else type(items).__name__
            step = txn.insert_step(node, parent, status="running", chunk_index=chunk_index)
            txn.fail_step(
                step,
                f"fan_out over {node['over']!r} needs a list result, got {got}",
                fenced=False,
            )
            return step
        size = node["chunk"]
        chunks = [
            (i, items[start : start + size]) for i, start in enumerate(range(0, len(items), size))
        ]
        step = txn.insert_step(
            node, parent, status="running", remaining=len(chunks), chunk_index=chunk_index
        )
        if not chunks:
            txn.complete(step, [])
        else:
            txn.insert_ready_children(body, step, chunks)
        return step

    def child_done(self, txn, node, step, child, output):
        if txn.decrement(step) != 0:
            return
        joined: list[Any] = []
        for part in txn.children_outputs(step):
            if isinstance(part, list):
                joined.extend(part)
            else:
                joined.append(part)
        txn.complete(step, joined)

    def describe(self, node):
        label = f"fan_out over {node['over']} by {node['chunk']}"
        return f"{node['name']} ({label})" if node["name"] else label
