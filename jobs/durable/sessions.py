"""A worker's database session: its name, its code version, and the bounds that keep a frozen
or cut-off worker from blocking the others.

A worker paused mid-step (SIGSTOP, a VM frozen, a GC pause, a network partition) keeps its
open transaction and its row locks; the attempt that lease recovery hands to another worker
would wait for those locks as long as the pause lasts. So every worker connection sets, once
per connection (:func:`configure_worker_session`, again after every reconnect):

* ``application_name`` — the worker's id (its lease owner), so lease recovery can tell its
  sessions from any other;
* ``acurio.code_version`` — :func:`code_version`; steps the worker inserts already claimed
  take it as their default; the claim records it on the others from a parameter
  (``Step.code_version``);
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

All of that is session state, which only holds on a connection of one's own. Behind a
transaction pooler (``DATABASE_POOLER=transaction``: each transaction may run on another
server connection, which other clients share):

* with ``DATABASE_DIRECT_URL`` the worker and sweeper commands point their own connection at
  the server itself before they connect (:func:`use_direct_connection`), and everything above
  holds; the pooler is left to the web's many short connections;
* without it the connection is ``jobs.durable.pooled``'s, and nothing is set on the session
  (a ``SET`` would stay on a shared server connection for the next client, and be missing
  from the worker's next transaction). ``acurio.code_version`` (every process) and the
  worker's ``lock_timeout`` and ``idle_in_transaction_session_timeout`` are set at the start
  of each transaction instead (:func:`transaction_defaults`, :func:`configure_worker_session`).
  ``application_name`` is not set, so ``TERMINATE_STALLED`` matches no session: the pid a
  claim recorded is a pooled server connection's, which other clients use next. A stalled
  worker's transaction is then not ended early: the recovered attempt's statements give up
  after ``lock_timeout`` (one lease) and are retried until the stalled transaction ends (its
  ``idle_in_transaction_session_timeout``, or the pooler's own timeouts). Statements the
  engine runs in autocommit get no setting at all, so the two of them that record a code
  version (the claim, and a ``start()`` outside ``atomic``) pass :func:`code_version` as a
  parameter instead of reading the setting. Server-side keepalives concern the pooler's
  sockets, not the worker's, and are left to it.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, connections

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


def transaction_pooled() -> bool:
    """Whether this thread's default connection goes through a transaction pooler (the
    ``jobs.durable.pooled`` backend), where nothing may be set on the session."""
    return bool(getattr(connection, "transaction_pooled", False))


def transaction_defaults() -> dict[str, str]:
    """What every transaction of a pooled connection starts with, in any process: its code
    version, which ``Instance.code_version``'s column default reads (a session setting, or
    the startup ``options`` a pooler drops, would leak between processes or be lost)."""
    version = code_version()
    return {"acurio.code_version": version} if version else {}


def configure_worker_session(worker_id: str, lease_seconds: float) -> None:
    """Set this thread's connection up as a worker's (see the module docstring): its
    session once per connection, or, through a transaction pooler, the start of each of its
    transactions (no name, no keepalives there)."""
    values = session_settings(worker_id, lease_seconds)
    if transaction_pooled():
        connection.transaction_settings.update(
            {
                "lock_timeout": values["lock_timeout"],
                "idle_in_transaction_session_timeout": values["idle_timeout"],
            }
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(statements.WORKER_SESSION, values)


def use_direct_connection() -> bool:
    """Point this process's default database at ``DATABASE_DIRECT_URL`` (its host, port, user
    and password; the database name stays ``DATABASE_URL``'s), so a worker or sweeper keeps a
    session of its own however ``DATABASE_URL`` is pooled. Call it before the process uses
    the database (the worker and sweeper commands do); every thread's connection follows.
    Returns whether there was a direct URL to use."""
    direct = getattr(settings, "DATABASE_DIRECT", None)
    if not direct:
        return False
    connection.close()
    # The dict every thread's connection is built from (settings.DATABASES["default"]).
    db = connections.settings["default"]
    options = db.setdefault("OPTIONS", {})
    options.pop("host", None)  # a Unix socket directory of DATABASE_URL's
    options.pop("port", None)
    db.update(
        HOST=str(direct.get("host", "")),
        PORT=str(direct.get("port", "")),
        USER=str(direct.get("user", "")),
        PASSWORD=str(direct.get("password", "")),
    )
    if db["ENGINE"] == "jobs.durable.pooled":
        db["ENGINE"] = "django.db.backends.postgresql"
    del connections["default"]  # this thread's connection object: rebuilt from db on next use
    announce_code_version()
    return True


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
    instances it starts record it (``Instance.code_version``'s column default). Not through a
    transaction pooler, which would refuse the connection or drop them (PgBouncer's
    ``ignore_startup_parameters``): there each transaction sets it (:func:`transaction_defaults`)."""
    if transaction_pooled():
        return
    version = code_version()
    if not version or any(c.isspace() or c == "\\" for c in version):
        return  # a value libpq's options cannot carry unescaped: leave it to the worker
    options = connection.settings_dict.setdefault("OPTIONS", {})
    existing = str(options.get("options", ""))
    if "acurio.code_version" not in existing:
        options["options"] = f"{existing} -c acurio.code_version={version}".strip()
