"""PgBouncer's view of the test database, for the tests that run through it
(``DATABASE_POOLER=transaction``): its admin console on the same host and port."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection


def server_connections() -> list[dict[str, Any]]:
    """PgBouncer's server connections to the test database (``SHOW SERVERS``), as dicts."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 6432,
        user=db["USER"] or "postgres",
        dbname="pgbouncer",
        autocommit=True,
    ) as admin:
        cursor = admin.execute("SHOW SERVERS")
        columns = [column.name for column in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    return [row for row in rows if row["database"] == db["NAME"]]
