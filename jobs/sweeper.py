"""The sweeper daemon behind ``python manage.py sweeper`` (DESIGN.md, "The sweeper").

Each tick, in the main thread:

1. **heartbeat** — this process's ``SweeperHeartbeat`` row (``host:pid``) is touched, and rows
   of processes silent for ``SweeperHeartbeat.EXPIRY_TICKS`` of their ticks (a SIGKILL leaves
   its row behind) or stopped more than a day ago are deleted;
2. **lease recovery** — the durable engine's ``recover_expired_leases()``: steps whose worker
   vanished go back to ready (or fail after their last attempt);
3. **run backstop** — started in its own thread unless one is still in flight, so a slow batch
   (a remote judge) never delays lease recovery and backstops never stack. The thread records
   ghost runs batch after batch (``jobs.runs.record_jobs``: record, judge, diagnostics),
   then runs the **judge backstop** (``jobs.runs.judge_backlog``): runs recorded but not
   judged for their current job;
4. **trim** — ``doc_html`` of terminal jobs past ``ACURIO_DOC_HTML_TTL_HOURS`` is cleared, but
   only where the job's run row exists, so no report body is ever lost to it.

Shutdown follows healthchecks' ``sendalerts``: SIGTERM or SIGINT sets a flag (no new tick, no new
batch), the in-flight backstop finishes its batch (recorded runs are judged before it stops),
the heartbeat row gets ``stopped_at``, and the process exits 0. A second signal exits at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta
from types import FrameType

from django.conf import settings
from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    connections,
)
from django.utils import timezone

from jobs import durable, metrics
from jobs.models import RunEvent, SweeperHeartbeat
from jobs.runs import judge_backlog, record_jobs
from jobs.sql import TRIM_DOC_HTML

logger = logging.getLogger(__name__)

# Rows cleared per trim statement: bounds one statement's TOAST deletes and WAL.
TRIM_BATCH = 500


class Sweeper:
    """One sweeper process. ``run()`` is the daemon; each step is a method tests drive directly."""

    def __init__(
        self,
        *,
        name: str | None = None,
        tick_seconds: float | None = None,
        grace_seconds: float | None = None,
        batch: int | None = None,
        ttl_hours: float | None = None,
    ) -> None:
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.tick_seconds = (
            settings.ACURIO_SWEEP_TICK_SECONDS if tick_seconds is None else tick_seconds
        )
        self.grace_seconds = (
            settings.ACURIO_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds
        )
        self.batch = settings.ACURIO_SWEEP_BATCH if batch is None else batch
        self.ttl_hours = settings.ACURIO_DOC_HTML_TTL_HOURS if ttl_hours is None else ttl_hours
        self.started_at = timezone.now()
        self.shutdown = threading.Event()
        self._backstop: threading.Thread | None = None
        # When the database became unreachable (None while it is reachable).
        self._down_since: float | None = None

    # --- the daemon ---------------------------------------------------------------------

    def run(self, *, once: bool = False) -> int:
        """Tick until a signal (or once); drain the backstop; return the exit code (0)."""
        previous = self.install_signal_handlers()
        logger.info(
            "sweeper %s started: tick %ss, grace %ss, batch %s, doc_html ttl %sh",
            self.name,
            self.tick_seconds,
            self.grace_seconds,
            self.batch,
            self.ttl_hours,
        )
        while not self.shutdown.is_set():
            started = time.monotonic()
            self.tick()
            if once:
                break
            # Interruptible: a signal sets the event and ends the wait at once.
            self.shutdown.wait(max(0.0, self.tick_seconds - (time.monotonic() - started)))
        self.wait_for_backstop()
        # The work is drained; a database gone at exit must not turn that into a failure.
        self._try_heartbeat(stopped_at=timezone.now(), backstop_in_flight=False)
        logger.info("sweeper %s stopped", self.name)
        for signum, handler in previous.items():  # run() in-process (a test) leaves no trace
            signal.signal(signum, handler)
        connections.close_all()
        return 0

    def install_signal_handlers(self) -> dict[int, object]:
        """Handle SIGTERM and SIGINT; return the handlers they replace."""
        if threading.current_thread() is not threading.main_thread():
            return {}  # only the main thread may set handlers: a caller's thread drives us
        return {
            signum: signal.signal(signum, self.on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }

    def on_signal(self, signum: int, frame: FrameType | None = None) -> None:
        name = signal.Signals(signum).name
        if self.shutdown.is_set():
            # Whatever is in flight rolls back with the dropped connection: nothing half-done.
            logger.warning("%s received again: exiting now", name)
            os._exit(1)
        logger.info("%s received: no new ticks; finishing the backstop in flight", name)
        self.shutdown.set()

    @metrics.timed_tick
    def tick(self) -> None:
        """One tick: heartbeat (and expiry), lease recovery, start the backstop, trim. Never
        blocks on the backstop.

        While the database is unreachable, each tick logs one warning line (no traceback, no
        line per step) and skips its steps; the first tick that reaches it again logs one line
        saying so.
        """
        close_old_connections()
        try:
            connection.ensure_connection()
        except (OperationalError, InterfaceError) as exc:
            self._database_down(exc)
            return
        if self._down_since is not None:
            logger.warning(
                "database reachable again after %.1fs", time.monotonic() - self._down_since
            )
            self._down_since = None
        for step in (
            self.beat,
            self.expire_heartbeats,
            self.recover_leases,
            self.engine_upkeep,
            self.start_backstop,
            self.trim,
        ):
            try:
                step()
            except (OperationalError, InterfaceError) as exc:
                if connection.is_usable():
                    logger.exception("sweeper step %s failed", step.__name__)
                    continue
                # Lost mid-tick: the remaining steps would only fail the same way.
                self._database_down(exc)
                return
            except Exception:
                # One failing step (a bug) must not stop the others or the daemon; the next
                # tick tries again.
                logger.exception("sweeper step %s failed", step.__name__)

    def _database_down(self, exc: Exception) -> None:
        """One warning line for this tick, with the database's own reason in short."""
        with contextlib.suppress(Exception):
            connection.close()
        if self._down_since is None:
            self._down_since = time.monotonic()
        logger.warning(
            "database unreachable for %.1fs; tick skipped (%s)",
            time.monotonic() - self._down_since,
            _short(exc),
        )

    def beat(self) -> None:
        """The tick's heartbeat: operators (and /healthz) see this process alive."""
        self.heartbeat(last_tick_at=timezone.now(), tick_seconds=self.tick_seconds)

    def expire_heartbeats(self) -> int:
        """Delete the heartbeat rows of processes long silent or long stopped; return how many."""
        # Never its own row: a tick delayed past the expiry (a stalled host) must not make a
        # living sweeper delete itself.
        expired = SweeperHeartbeat.objects.expired(timezone.now()).exclude(name=self.name)
        deleted, _ = expired.delete()
        if deleted:
            logger.info("deleted %d expired sweeper heartbeat row(s)", deleted)
        return deleted

    def heartbeat(self, **fields) -> None:
        SweeperHeartbeat.objects.update_or_create(
            name=self.name,
            defaults=fields,
            create_defaults={"started_at": self.started_at, **fields},
        )

    # --- the steps ----------------------------------------------------------------------

    def recover_leases(self) -> int:
        """The engine's lease recovery: expired step leases go back to ready (or fail)."""
        recovered = durable.recover_expired_leases()
        metrics.leases_recovered(recovered)
        if recovered:
            logger.info("recovered %d expired step leases", recovered)
        return recovered

    def engine_upkeep(self) -> dict[str, int]:
        """The engine's upkeep: due periodic workflows started, retention applied."""
        return durable.maintain()

    @property
    def backstop_in_flight(self) -> bool:
        return self._backstop is not None and self._backstop.is_alive()

    def start_backstop(self) -> bool:
        """Start the run backstop in its own thread; False when one is still in flight."""
        if self.backstop_in_flight:
            logger.info("backstop still in flight: not starting another")
            return False
        # Before the thread starts: a quick backstop's own "done" must not be overwritten.
        self._try_heartbeat(backstop_in_flight=True)
        self._backstop = threading.Thread(
            target=self._backstop_thread, name=f"backstop-{self.name}", daemon=False
        )
        self._backstop.start()
        return True

    def wait_for_backstop(self, timeout: float | None = None) -> bool:
        """Wait for the backstop in flight, if any; True when none is left running."""
        if self._backstop is not None:
            self._backstop.join(timeout)
        return not self.backstop_in_flight

    def _backstop_thread(self) -> None:
        try:
            self.backstop()
        except Exception:
            # A database gone mid-backstop: the ticks report the outage line by line, and the
            # ghosts left are picked up by the first backstop after it.
            _log_failure("run backstop failed")
        finally:
            self._try_heartbeat(last_backstop_at=timezone.now(), backstop_in_flight=False)
            # This thread's own connection: closing it keeps PostgreSQL's slots free.
            connection.close()

    def _try_heartbeat(self, **fields) -> None:
        # The heartbeat is for operators: failing to write it must not stop the sweep itself.
        try:
            self.heartbeat(**fields)
        except Exception:
            _log_failure("could not update the heartbeat")

    def backstop(self) -> int:
        """Record ghost runs batch by batch until none is left, then the judge backstop.

        Stops between batches on shutdown: a batch in progress always finishes, judged and
        reported, so no run it recorded is left unjudged by the drain.
        """
        recorded = 0
        while True:
            results = record_jobs(
                limit=self.batch, grace=self.grace_seconds, sweeper_name=self.name
            )
            recorded += sum(1 for r in results if r.action == "write")
            if len(results) < self.batch or self.shutdown.is_set():
                break
        if not self.shutdown.is_set():
            self.judge_backstop()
        return recorded

    def judge_backstop(self, limit: int | None = None) -> int:
        """Judge runs recorded but not judged for their current job; return how many."""
        # Past the grace only: a run just saved is being judged by whoever saved it.
        return judge_backlog(
            grace=timedelta(seconds=self.grace_seconds),
            limit=limit or self.batch,
            sweeper_name=self.name,
            should_stop=self.shutdown.is_set,
        )

    def trim(self) -> int:
        """Clear job ``doc_html`` past its time to live where the run row exists."""
        cutoff = timezone.now() - timedelta(hours=self.ttl_hours)
        with connection.cursor() as cursor:
            cursor.execute(TRIM_DOC_HTML, {"cutoff": cutoff, "limit": TRIM_BATCH})
            trimmed = cursor.rowcount
        if trimmed:
            RunEvent.objects.create(
                kind=RunEvent.Kind.TRIMMED,
                sweeper=self.name,
                details={"count": trimmed, "ttl_hours": self.ttl_hours},
            )
            logger.info("trimmed doc_html of %d jobs (ttl %sh)", trimmed, self.ttl_hours)
        return trimmed


def _short(exc: BaseException) -> str:
    """The database's own reason, on one line and short."""
    return " ".join(str(exc).split())[:200]


def _log_failure(what: str) -> None:
    """Log the exception being handled: one warning line when it is the database gone away
    (an outage is not a bug: no traceback per attempt), else with its traceback."""
    exc = sys.exc_info()[1]
    if isinstance(exc, OperationalError | InterfaceError) and not connection.is_usable():
        logger.warning("%s: lost the database (%s)", what, _short(exc))
    else:
        logger.exception(what)
