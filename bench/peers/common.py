"""Connection settings shared by the benchmark's peer processes.

Every peer talks to the machine's PostgreSQL at 127.0.0.1:5432 (trust auth, user
``postgres``) and to a database of its own, named by an environment variable that the
orchestrator sets, so no peer ever touches another engineer's database.
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path

import psycopg
from psycopg import sql

HOST = os.environ.get("BENCH_PGHOST", "127.0.0.1")
PORT = int(os.environ.get("BENCH_PGPORT", "5432"))
USER = os.environ.get("BENCH_PGUSER", "postgres")


def dsn(dbname: str) -> str:
    """A libpq connection string for ``dbname`` on the benchmark server."""
    return f"host={HOST} port={PORT} user={USER} dbname={dbname}"


def url(dbname: str) -> str:
    """A ``postgres://`` URL (for ``DATABASE_URL``) for ``dbname`` on the benchmark server."""
    return f"postgres://{USER}@{HOST}:{PORT}/{dbname}"


def admin_conn(dbname: str = "postgres") -> psycopg.Connection:
    """An autocommit connection for set-up and counters. No automatic prepared statements:
    they break behind a transaction pooler (PgBouncer)."""
    return psycopg.connect(dsn(dbname), autocommit=True, prepare_threshold=None)


def recreate_database(dbname: str, prefix: str, *, sync_off: bool = False) -> None:
    """Drop and create ``dbname``, which must start with ``prefix`` (never anybody else's);
    ``sync_off``: ``synchronous_commit = off`` for every connection to it (not durable)."""
    if not dbname.startswith(prefix):
        raise ValueError(f"refusing to drop {dbname!r}")
    name = sql.Identifier(dbname)
    with admin_conn() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
        if sync_off:
            conn.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(name))


def proc_cpu_ticks(pid: int) -> int | None:
    """User + system CPU of a process on this machine, in clock ticks (None: it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


ROOT = Path(__file__).resolve().parent.parent.parent
# The packages whose versions a benchmark's report names.
PACKAGES = ("Django", "psycopg", "django-tasks-db", "procrastinate")


def package_versions() -> list[str]:
    """``"name version"`` of each of PACKAGES (or that it is not installed)."""
    versions = []
    for dist in PACKAGES:
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return versions


def git(*args: str) -> str:
    """What ``git ARGS`` prints in the repository, stripped (empty on failure)."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
