"""Connection settings shared by the benchmark's peer processes.

Every peer talks to the machine's PostgreSQL at 127.0.0.1:5432 (trust auth, user
``postgres``) and to a database of its own, named by an environment variable that the
orchestrator sets, so no peer ever touches another engineer's database.
"""

from __future__ import annotations

import os

HOST = os.environ.get("BENCH_PGHOST", "127.0.0.1")
PORT = int(os.environ.get("BENCH_PGPORT", "5432"))
USER = os.environ.get("BENCH_PGUSER", "postgres")


def dsn(dbname: str) -> str:
    """A libpq connection string for ``dbname`` on the benchmark server."""
    return f"host={HOST} port={PORT} user={USER} dbname={dbname}"


def url(dbname: str) -> str:
    """A ``postgres://`` URL (for ``DATABASE_URL``) for ``dbname`` on the benchmark server."""
    return f"postgres://{USER}@{HOST}:{PORT}/{dbname}"
