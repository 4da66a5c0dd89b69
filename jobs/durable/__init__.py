"""Acurio's durable-workflow engine on PostgreSQL (DESIGN.md, "The durable engine").

Compose a workflow, start it, and workers run it step by step, checkpointing each step in the
same transaction as its database writes::

    from jobs.durable import fan_out, sql, start, task

    flow = (
        task("app.steps.parse").as_("parsed")
        >> fan_out(task("app.steps.verify"), over="parsed", chunk=50).as_("verdicts")
        >> task("app.steps.finalize")
    )
    instance_id = start(flow, label="analysis", owner=user, input={"job": 7},
                        on_failure="app.steps.job_failed")

Where things live (read in this order to change the engine):

* ``graph``   — the composition operators and the JSON graph they compile to (stored at start).
* ``kinds``   — the registry of node kinds: activation, execution, joining. New kinds go here.
* ``engine``  — state transitions inside one transaction (activate, checkpoint, fail, cancel).
* ``worker``  — claiming (SKIP LOCKED), running, leases and heartbeat, LISTEN/NOTIFY, signals.
* ``api``     — start/status/result/cancel/explain/instances/current_step/recover_expired_leases.
* ``models``  — ``Instance`` and ``Step`` (the checkpoints) with their indexes.
* ``control`` — ``a | b`` (race), ``when``, ``loop`` and ``Break`` (part 2).
* ``timers``  — ``sleep``, ``wait_for_schedule``, ``wait_for_signal``, ``signal()``, ``waits()``.
* ``http``    — ``http(url, ...)`` steps and the ``ACURIO_HTTP_ALLOW`` host check.
* ``permissions`` — the three permissions and who may see or control an instance.
* ``testing`` — a no-op workflow for tests and benchmarks.

Hooks for application code:

* ``current_step(instance_id)`` — ``{"step", "kind", "state", "done", "total"}`` in two small
  queries: what a progress bar shows (fan-out chunks done of total while one runs).
* ``start(..., on_failure="pkg.mod.fn")`` — ``fn(instance_id, error)`` runs in the very
  transaction that marks the instance failed (a permanent error, attempts used up, a lease
  recovered once too often) or cancelled (``error == "cancelled"``), so the app's own rows
  (e.g. an ``AnalysisJob``) fail atomically with it. It runs in a savepoint: if it raises, the
  instance still fails and its error notes the hook's failure.
* A task's ORM writes on the default connection commit with its checkpoint: a step that only
  touches this database runs exactly once. Sleeping or calling the network inside a task
  holds that transaction open; keep such work short or use an ``http`` step.

Names are loaded lazily (PEP 562) so that importing this package at app-loading time does not
import the models before Django's app registry is ready.
"""

from __future__ import annotations

from typing import Any

from jobs.durable.control import loop, when
from jobs.durable.errors import (
    Break,
    DefinitionError,
    DurableError,
    InstanceNotFound,
    PermanentError,
    RetryLater,
)
from jobs.durable.graph import fan_out, sql, task
from jobs.durable.http import http
from jobs.durable.timers import SignalError, signal, sleep, wait_for_schedule, wait_for_signal

_LAZY = {
    "start": "jobs.durable.api",
    "status": "jobs.durable.api",
    "result": "jobs.durable.api",
    "error": "jobs.durable.api",
    "cancel": "jobs.durable.api",
    "explain": "jobs.durable.api",
    "instances": "jobs.durable.api",
    "current_step": "jobs.durable.api",
    "recover_expired_leases": "jobs.durable.api",
    "Worker": "jobs.durable.worker",
    "Context": "jobs.durable.context",
    "waits": "jobs.durable.timers",
    "NotPermitted": "jobs.durable.permissions",
}

__all__ = [
    "Break",
    "Context",
    "DefinitionError",
    "DurableError",
    "InstanceNotFound",
    "NotPermitted",
    "PermanentError",
    "RetryLater",
    "SignalError",
    "Worker",
    "cancel",
    "current_step",
    "error",
    "explain",
    "fan_out",
    "http",
    "instances",
    "loop",
    "recover_expired_leases",
    "result",
    "signal",
    "sleep",
    "sql",
    "start",
    "status",
    "task",
    "wait_for_schedule",
    "wait_for_signal",
    "waits",
    "when",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobs.durable' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
