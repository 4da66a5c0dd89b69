"""The engine's periodic upkeep, for the host's sweeper to call every tick: :func:`maintain`
starts the due slots of periodic workflows and applies the retention setting.

Retention: ``settings.ACURIO_DURABLE_RETENTION_DAYS`` (unset or 0: keep everything) — finished
instances older than that are purged in batches (:func:`jobs.durable.lifecycle.purge`), at most
``ACURIO_DURABLE_RETENTION_BATCHES`` batches per call so a tick never runs long; what is left
goes at the next tick. Whole trees only: a root instance with its child workflows, never a
child whose parent is kept.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from jobs.durable.lifecycle import PURGE_BATCH, purge
from jobs.durable.schedules import run_due_schedules

logger = logging.getLogger("jobs.durable")


def maintain(now: datetime | None = None) -> dict[str, int]:
    """One round of upkeep: ``{"scheduled": started, "purged": deleted}``."""
    now = now or timezone.now()
    started = run_due_schedules(now)
    purged = apply_retention(now)
    if started or purged:
        logger.info("engine upkeep: %d scheduled instance(s) started, %d purged", started, purged)
    return {"scheduled": started, "purged": purged}


def apply_retention(now: datetime | None = None) -> int:
    """Purge finished instances older than the retention setting; returns how many."""
    days = getattr(settings, "ACURIO_DURABLE_RETENTION_DAYS", None)
    if not days:
        return 0
    batches = int(getattr(settings, "ACURIO_DURABLE_RETENTION_BATCHES", 20))
    return purge(
        older_than=timedelta(days=float(days)),
        batch=PURGE_BATCH,
        now=now,
        max_batches=batches,
    )
