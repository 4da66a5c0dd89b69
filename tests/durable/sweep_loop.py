"""A minimal sweeper for the PostgreSQL-restart test: recover_expired_leases() every 0.3 s,
riding out a database that goes away, until SIGTERM."""

from __future__ import annotations

import os
import signal
import time

import django

stop = False


def _stop(signum, frame):
    global stop
    stop = True


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    django.setup()
    from django.db import DatabaseError, connection

    from jobs.durable import recover_expired_leases

    signal.signal(signal.SIGTERM, _stop)
    while not stop:
        try:
            recover_expired_leases()
        except DatabaseError:
            connection.close()
        time.sleep(0.3)


if __name__ == "__main__":
    main()
