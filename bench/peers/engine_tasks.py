"""The Acurio engine peer: the no-op step and the enqueuer of 3-step workflows.

``python -m bench.peers.engine_tasks N`` (with ``DJANGO_SETTINGS_MODULE=acurio.settings``
and ``DATABASE_URL`` at the bench database) starts ``N`` instances of
``task(noop) >> task(noop) >> task(noop)`` in one transaction; ``start()`` joins it, so
the workers, started afterwards, see the whole queue at once.
"""

from __future__ import annotations

import os
import sys
from typing import Any

NOOP = "bench.peers.engine_tasks.noop"


def noop(ctx: Any) -> None:
    """Do nothing: the benchmark measures the engine, not the work."""
    return None


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    django.setup()
    from django.db import transaction

    from jobs.durable import start, task

    count = int(sys.argv[1])
    workflow = task(NOOP) >> task(NOOP) >> task(NOOP)
    with transaction.atomic():
        for i in range(count):
            start(workflow, label="bench", input={"n": i})


if __name__ == "__main__":
    main()
