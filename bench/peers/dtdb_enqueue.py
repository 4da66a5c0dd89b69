"""Enqueue no-op tasks for the django-tasks-db peer.

``python -m bench.peers.dtdb_enqueue N`` (with ``DJANGO_SETTINGS_MODULE=bench.peers.dtdb_settings``)
enqueues ``N`` no-op tasks through the Tasks framework's public ``enqueue()``, in one
transaction so that no worker sees a half-filled queue. The task lives in its own module
(``bench.peers.dtdb_tasks``) so that its stored path is importable by the worker.

:func:`one_by_one` is the start-rate peer of ``bench/start_peers.py``: ``enqueue()`` one
task at a time, each its own transaction (Django's autocommit), as a web request would.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import django


def one_by_one(count: int) -> dict[str, Any]:
    """``enqueue()`` ``count`` no-op tasks one by one, each committed on its own.

    Needs ``django.setup()`` with ``bench.peers.dtdb_settings``. The connection is opened
    before the clock starts, as the engine's ``case_start`` has opened its own by then.
    """
    from django.db import connection

    from bench.peers.dtdb_tasks import noop

    connection.ensure_connection()
    if not connection.get_autocommit():
        raise RuntimeError("one_by_one must run in autocommit (outside any atomic block)")
    began = time.perf_counter()
    for _ in range(count):
        noop.enqueue()
    elapsed = time.perf_counter() - began
    return {"count": count, "seconds": elapsed, "per_s": count / elapsed}


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
