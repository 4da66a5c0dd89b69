"""A no-op workflow for tests and benchmarks: ``noop_workflow()`` is three no-op task steps.

Benchmark use::

    from jobs.durable.testing import start_noop
    start_noop(10_000)                      # in one transaction
    # then run N `python manage.py worker --once` processes and time them
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from jobs.durable.api import start
from jobs.durable.graph import Node, task


def noop(ctx: Any) -> None:
    """A step that does nothing (its checkpoint is the whole cost)."""
    return None


def noop_workflow(steps: int = 3) -> Node:
    """``noop >> noop >> noop`` (``steps`` long)."""
    flow: Node = task("jobs.durable.testing.noop")
    for _ in range(steps - 1):
        flow = flow >> task("jobs.durable.testing.noop")
    return flow


def start_noop(count: int, *, steps: int = 3, label: str = "noop") -> list[uuid.UUID]:
    """Start ``count`` no-op workflows in one transaction; returns their ids."""
    flow = noop_workflow(steps)
    with transaction.atomic():
        return [start(flow, label=label) for _ in range(count)]
