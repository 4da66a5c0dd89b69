"""Enqueue no-op tasks for the django-tasks-db peer.

``python -m bench.peers.dtdb_enqueue N`` (with ``DJANGO_SETTINGS_MODULE=bench.peers.dtdb_settings``)
enqueues ``N`` no-op tasks through the Tasks framework's public ``enqueue()``, in one
transaction so that no worker sees a half-filled queue. The task lives in its own module
(``bench.peers.dtdb_tasks``) so that its stored path is importable by the worker.
"""

from __future__ import annotations

import sys

import django


def main() -> None:
    django.setup()
    from django.db import transaction

    from bench.peers.dtdb_tasks import noop

    count = int(sys.argv[1])
    with transaction.atomic():
        for _ in range(count):
            noop.enqueue()


if __name__ == "__main__":
    main()
