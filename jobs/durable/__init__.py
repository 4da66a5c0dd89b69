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

* ``graph``   — every node of the language (``>>``, ``&``, ``|``, ``as_``, ``task``, ``sql``,
  ``http``, ``fan_out``, ``when``, ``loop``, ``sleep``, the waits) and the JSON graph they
  compile to (stored at start). Pure Python.
* ``kinds/``  — what each node kind does when activated, run, told a child finished, or
  broken out of; ``kinds/__init__`` loads every kind once.
* ``state``   — the shared state types: ``StepRow``, ``Graph``, and ``Transitions`` (the
  engine's transaction as the kinds see it).
* ``engine``  — state transitions inside one transaction (activate, checkpoint, fail, cancel).
* ``statements`` — every hand-written SQL statement, named, with the index it uses.
* ``worker``  — claiming (SKIP LOCKED), running, leases and heartbeat, LISTEN/NOTIFY, signals.
* ``api``     — start/status/result/error/cancel/signal/instances.
* ``inspection`` — explain/current_step/waits.
* ``recovery`` — recover_expired_leases (the sweeper's part).
* ``models``  — ``Instance``, ``Step`` (the checkpoints) and ``Signal`` with their indexes.
* ``permissions`` — the three permissions and who may see or control an instance.
* ``db``      — prepared statements on Django's connection; ``context`` — the ``ctx`` of a step.
* ``cli``, ``admin``, ``management/`` — the terminal verbs, the admin pages, the commands.
* ``testing`` — a no-op workflow for tests and benchmarks.

The package imports nothing from its host project (``jobs`` outside ``jobs.durable``), so it
could be lifted into a package of its own; ``tests/test_architecture.py`` keeps it so.

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

import importlib
from typing import Any

from jobs.durable.errors import (
    Break,
    DefinitionError,
    DurableError,
    InstanceNotFound,
    PermanentError,
    RetryLater,
    SignalError,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowIdConflict,
    WorkflowNotFinished,
)
from jobs.durable.graph import (
    call,
    fan_out,
    http,
    loop,
    sleep,
    sql,
    step,
    task,
    wait_for_schedule,
    wait_for_signal,
    when,
    workflow,
)

# Names whose modules need the app registry (models): loaded on first use.
_LAZY = {
    "start": "jobs.durable.api",
    "status": "jobs.durable.api",
    "result": "jobs.durable.api",
    "error": "jobs.durable.api",
    "cancel": "jobs.durable.api",
    "signal": "jobs.durable.api",
    "instances": "jobs.durable.api",
    "get_handle": "jobs.durable.api",
    "start_many": "jobs.durable.api",
    "resume": "jobs.durable.lifecycle",
    "schedule": "jobs.durable.schedules",
    "unschedule": "jobs.durable.schedules",
    "run_due_schedules": "jobs.durable.schedules",
    "maintain": "jobs.durable.maintenance",
    "fork": "jobs.durable.lifecycle",
    "purge": "jobs.durable.lifecycle",
    "cancel_where": "jobs.durable.lifecycle",
    "NotResumable": "jobs.durable.lifecycle",
    "Queue": "jobs.durable.queues",
    "WorkflowHandle": "jobs.durable.api",
    "explain": "jobs.durable.inspection",
    "current_step": "jobs.durable.inspection",
    "waits": "jobs.durable.inspection",
    "recover_expired_leases": "jobs.durable.recovery",
    "Worker": "jobs.durable.worker",
    "Context": "jobs.durable.context",
    "NotPermitted": "jobs.durable.permissions",
}

__all__ = [
    "Break",
    "Context",
    "DefinitionError",
    "DurableError",
    "InstanceNotFound",
    "NotPermitted",
    "NotResumable",
    "PermanentError",
    "Queue",
    "RetryLater",
    "SignalError",
    "Worker",
    "WorkflowCancelled",
    "WorkflowFailed",
    "WorkflowHandle",
    "WorkflowIdConflict",
    "WorkflowNotFinished",
    "call",
    "cancel",
    "cancel_where",
    "current_step",
    "error",
    "explain",
    "fan_out",
    "fork",
    "get_handle",
    "http",
    "instances",
    "loop",
    "maintain",
    "purge",
    "recover_expired_leases",
    "result",
    "resume",
    "run_due_schedules",
    "schedule",
    "signal",
    "sleep",
    "sql",
    "start",
    "start_many",
    "status",
    "step",
    "task",
    "unschedule",
    "wait_for_schedule",
    "wait_for_signal",
    "waits",
    "when",
    "workflow",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobs.durable' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
