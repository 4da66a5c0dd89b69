"""The django-tasks-db peer's no-op task (enqueued by ``bench.peers.dtdb_enqueue``)."""

from __future__ import annotations

from django.tasks import task


@task
def noop() -> None:
    """Do nothing: the benchmark measures the queue, not the work."""
