"""Lease recovery: steps whose worker stopped renewing its lease go back to ready, or fail.

The sweeper calls :func:`recover_expired_leases` every tick (it is importable from
``jobs.durable``). A worker renews the leases of the steps it runs every third of
``ACURIO_LEASE_SECONDS`` (its heartbeat); a lease that expired means the worker died, hung past
the step's timeout, or lost its connection.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobs.durable import statements
from jobs.durable.engine import Txn, load_graph
from jobs.durable.kinds import node_label
from jobs.durable.models import Step
from jobs.durable.state import STEP_FIELDS, StepRow

logger = logging.getLogger("jobs.durable.recovery")

RECOVERY_BATCH = 500
# Entries of a step's attempt log kept (as the worker keeps them).
ATTEMPT_LOG_SIZE = 20


def end_stalled_sessions(now: datetime) -> int:
    """End the database sessions of workers whose leases expired while they were inside a
    transaction (frozen, cut off): their row locks go with them, so the recovered attempt does
    not wait for the pause to end (jobs.durable.sessions). Returns how many were ended."""
    stalled = (
        Step.objects.expired(now)
        .exclude(lease_backend__isnull=True)
        .values_list("lease_backend", "lease_owner")
        .distinct()[:RECOVERY_BATCH]
    )
    ended = 0
    with connection.cursor() as cursor:
        for pid, owner in stalled:
            cursor.execute(statements.TERMINATE_STALLED, [pid, owner])
            if cursor.fetchone():
                ended += 1
                logger.warning("ended the session (pid %s) of stalled worker %s", pid, owner)
    return ended


def recover_expired_leases(now: datetime | None = None) -> int:
    """Return steps whose worker's lease expired to ready; fail those out of crashes.

    Called by the sweeper every tick. First the stalled workers' sessions are ended (their
    locks released), then each expired step is recovered. A lost lease is a *crash*, counted
    in ``crashes`` apart from ``attempts`` (a worker dying is not the step's fault) and
    bounded by ``ACURIO_MAX_CRASHES``; a step with a ``timeout`` whose lease ran out hung past
    it, which counts as an attempt. Rows still locked are skipped (their worker is evidently
    alive). Returns the number of steps recovered or failed.
    """
    now = now or timezone.now()
    end_stalled_sessions(now)
    max_crashes = int(getattr(settings, "ACURIO_MAX_CRASHES", 20))
    total = 0
    while True:
        with transaction.atomic():
            rows = list(
                Step.objects.expired(now)
                .order_by("lease_expires_at")
                .select_for_update(skip_locked=True)
                .values_list(*STEP_FIELDS, "crashes", "lease_owner")[:RECOVERY_BATCH]
            )
            notify_graphs: list[Txn] = []
            for row in rows:
                step = StepRow.from_row(row)
                crashes, owner = row[len(STEP_FIELDS) :]
                txn = Txn(load_graph(step.instance_id), now)
                node = txn.graph.nodes[step.node_id]
                timeout = node.get("opts", {}).get("timeout")
                if timeout:
                    message = (
                        f"step {node_label(node)} ran past its timeout of {timeout:g}s"
                        f" (attempt {step.attempts}); its lease was not renewed"
                    )
                    if step.attempts >= step.max_attempts:
                        txn.fail_step(step, message)
                    else:
                        txn.retry_step(step, message, 0)
                        notify_graphs.append(txn)
                    continue
                entry = {
                    "attempt": step.attempts,
                    "kind": "crash",
                    "error": f"lease lost: worker {owner} stopped renewing it",
                    "traceback": "",
                    "at": now.isoformat(),
                    "worker": owner,
                }
                if crashes + 1 > max_crashes:
                    txn.fail_step(
                        step,
                        f"step {node_label(node)}: its worker was lost {crashes + 1} times"
                        f" (the bound is ACURIO_MAX_CRASHES = {max_crashes}); giving up",
                    )
                    continue
                with connection.cursor() as cursor:
                    cursor.execute(
                        statements.RECOVER_CRASHED,
                        [
                            now,
                            f"lease expired on claim {step.attempts} (worker {owner} lost);"
                            f" crash {crashes + 1} of at most {max_crashes}, no attempt spent",
                            json.dumps([entry]),
                            ATTEMPT_LOG_SIZE,
                            step.id,
                            step.attempts,
                        ],
                    )
                txn.notify = True
                notify_graphs.append(txn)
            if notify_graphs:
                notify_graphs[0].flush()
        total += len(rows)
        if len(rows) < RECOVERY_BATCH:
            return total
