"""Lease recovery: steps whose worker stopped renewing its lease go back to ready, or fail.

The sweeper calls :func:`recover_expired_leases` every tick (it is importable from
``jobs.durable``). A worker renews the leases of the steps it runs every third of
``ACURIO_LEASE_SECONDS`` (its heartbeat); a lease that expired means the worker died, hung past
the step's timeout, or lost its connection.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from jobs.durable.engine import Txn, load_graph
from jobs.durable.kinds import node_label
from jobs.durable.models import Step
from jobs.durable.state import STEP_FIELDS, StepRow

RECOVERY_BATCH = 500


def recover_expired_leases(now: datetime | None = None) -> int:
    """Return steps whose worker's lease expired to ready; fail those out of attempts.

    Called by the sweeper every tick. Rows locked by a live checkpoint are skipped (their
    worker is evidently alive). Returns the number of steps recovered or failed.
    """
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            rows = list(
                Step.objects.expired(now)
                .order_by("lease_expires_at")
                .select_for_update(skip_locked=True)
                .values_list(*STEP_FIELDS)[:RECOVERY_BATCH]
            )
            notify_graphs: list[Txn] = []
            for row in rows:
                step = StepRow.from_row(row)
                txn = Txn(load_graph(step.instance_id), now)
                node = txn.graph.nodes[step.node_id]
                if step.attempts >= step.max_attempts:
                    txn.fail_step(
                        step,
                        f"step {node_label(node)}: its worker stopped renewing the lease"
                        f" (attempt {step.attempts} of {step.max_attempts}); giving up",
                    )
                else:
                    txn.retry_step(
                        step,
                        f"lease expired on attempt {step.attempts} (worker lost); retrying",
                        0,
                    )
                    notify_graphs.append(txn)
            if notify_graphs:
                notify_graphs[0].flush()
        total += len(rows)
        if len(rows) < RECOVERY_BATCH:
            return total
