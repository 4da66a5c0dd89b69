"""The node kinds: what the engine does with each kind of node of a stored graph.

Importing this package loads every kind once, so :func:`get_kind` knows them all:

* :mod:`~jobs.durable.kinds.base` — :class:`Kind` (the hooks) and the registry;
* :mod:`~jobs.durable.kinds.leaves` — ``task`` and ``sql``;
* :mod:`~jobs.durable.kinds.composites` — ``seq``, ``all`` and ``fan_out``;
* :mod:`~jobs.durable.kinds.control` — ``race``, ``when`` and ``loop``;
* :mod:`~jobs.durable.kinds.timers` — ``sleep``, ``wait_for_schedule``, ``wait_for_signal``;
* :mod:`~jobs.durable.kinds.http` — ``http``;
* :mod:`~jobs.durable.kinds.children` — ``call`` (child workflows).

The modules of this package import :mod:`~jobs.durable.kinds.base`, never this package, so
loading them here makes no import cycle.
"""

from __future__ import annotations

from jobs.durable.kinds import children, composites, control, http, leaves, timers
from jobs.durable.kinds.base import (
    Kind,
    composite_kinds,
    get_kind,
    node_label,
    register,
    wait_kinds,
)

__all__ = [
    "Kind",
    "children",
    "composite_kinds",
    "composites",
    "control",
    "get_kind",
    "http",
    "leaves",
    "node_label",
    "register",
    "timers",
    "wait_kinds",
]
