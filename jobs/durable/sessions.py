"""A worker's database session: its name, its code version, and the bounds that keep a frozen
or cut-off worker from blocking the others.

A worker paused mid-step (SIGSTOP, a VM frozen, a GC pause, a network partition) keeps its
open transaction and its row locks; the attempt that lease recovery hands to another worker
would wait for those locks as long as the pause lasts. So every worker connection sets, once
per connection (:func:`configure_worker_session`, again after every reconnect):

* ``application_name`` — the worker's id (its lease owner), so lease recovery can tell its
  sessions from any other;
* ``acurio.code_version`` — :func:`code_version`; steps the worker inserts already claimed
  take it as their default, the claim sets it on the others (``Step.code_version``);
* ``lock_timeout`` = the lease — a statement waits for a lock at most one lease, then fails
  (and is retried) instead of hanging behind a stalled holder;
* ``idle_in_transaction_session_timeout`` = ``ACURIO_STEP_TIMEOUT_SECONDS`` + the lease — the
  backstop for a transaction left open; a step with its own ``timeout`` bounds its
  transaction by that instead (``SET_STEP_TIMEOUTS``). It cannot be the lease itself: a
  transactional task may legitimately compute longer than one lease while its heartbeat
  renews it;
* server-side TCP keepalives (a third of the lease, three probes) and client-side ones
  (:func:`keepalive_options`), so a vanished machine's session is noticed.

The bound "a recovered step waits at most about one lease for a stalled holder" comes from
lease recovery itself: it ends the stalled worker's backend (``TERMINATE_STALLED``: the pid
that claimed the step, still under that worker's name, still inside a transaction), which
releases every lock at once. The worker, if it ever wakes, finds its connection gone and
its checkpoint fenced off; nothing it did commits.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from jobs.durable import statements


@functools.cache
def code_version() -> str:
    """This deploy's code version: ``ACURIO_CODE_VERSION``, else the git commit of the
    project's checkout, else the ``acurio`` package's version, else ``"unknown"``."""
    configured = getattr(settings, "ACURIO_CODE_VERSION", "")
    if configured:
        return str(configured)[:64]
    base = Path(getattr(settings, "BASE_DIR", "."))
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=base,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        if out:
            return out
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("acurio")
    except (ImportError, PackageNotFoundError):
        return "unknown"


def _ms(seconds: float) -> str:
    return f"{max(1, int(seconds * 1000))}ms"


def session_settings(worker_id: str, lease_seconds: float) -> dict[str, Any]:
    """The parameters of ``statements.WORKER_SESSION`` for this worker."""
    idle = float(getattr(settings, "ACURIO_STEP_TIMEOUT_SECONDS", 600)) + lease_seconds
    return {
        "name": worker_id[:63],
        "version": code_version(),
        "lock_timeout": _ms(lease_seconds),
        "idle_timeout": _ms(idle),
        "keepalive": str(max(1, int(lease_seconds / 3))),
    }


def configure_worker_session(worker_id: str, lease_seconds: float) -> None:
    """Set this thread's connection up as a worker's (see the module docstring)."""
    with connection.cursor() as cursor:
        cursor.execute(statements.WORKER_SESSION, session_settings(worker_id, lease_seconds))


def keepalive_options(lease_seconds: float) -> dict[str, int]:
    """libpq's client-side TCP keepalives for a worker's connections: a dead server or network
    path is noticed within about a lease instead of the kernel's two hours."""
    probe = max(1, int(lease_seconds / 3))
    return {"keepalives": 1, "keepalives_idle": probe, "keepalives_interval": probe,
            "keepalives_count": 3}  # fmt: skip


def use_keepalives(lease_seconds: float) -> None:
    """Add the client keepalives to the default database's options (before a worker
    connects; every connection of this process gets them)."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    for key, value in keepalive_options(lease_seconds).items():
        options.setdefault(key, value)


def announce_code_version() -> None:
    """Put ``-c acurio.code_version=<version>`` into the default database's libpq ``options``
    (before any connection is made), so every session of this process carries it and the
    instances it starts record it (``Instance.code_version``'s column default). A pooler that
    drops startup options (PgBouncer's ``ignore_startup_parameters``) leaves it empty."""
    version = code_version()
    if not version or any(c.isspace() or c == "\\" for c in version):
        return  # a value libpq's options cannot carry unescaped: leave it to the worker
    options = connection.settings_dict.setdefault("OPTIONS", {})
    existing = str(options.get("options", ""))
    if "acurio.code_version" not in existing:
        options["options"] = f"{existing} -c acurio.code_version={version}".strip()
