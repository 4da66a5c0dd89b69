"""The engine's database helpers on Django's connection: prepared statements and jsonb values.

Django binds parameters client-side and connects with psycopg's prepared statements off
(``prepare_threshold=None``), so PostgreSQL parses and plans every statement afresh; for the
one-row statements the worker and the run saver send thousands of times, planning costs more
than executing. ``acurio.settings`` sets a threshold no statement reaches on its own, so only
explicit requests (``prepare=True``, here) are prepared; ``DATABASE_PREPARED_STATEMENTS=0``
turns that off for a pooler that cannot keep them, and the statement is then simply sent
unprepared.

psycopg names and tracks the statements itself: after a ``ROLLBACK`` (which makes it send
``DEALLOCATE ALL``) it prepares them again on next use. A hand-made ``PREPARE`` would not
survive that.

This module imports nothing from its host project, so the host may use it too (the run saver
does).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from psycopg.pq import ExecStatus

TUPLES_OK = ExecStatus.TUPLES_OK


def execute_prepared(sql: str, params: Any) -> list[tuple]:
    """Run ``sql`` (``%s`` or ``%(name)s`` placeholders) as a prepared statement.

    A psycopg server-binding cursor on Django's connection joins whatever transaction is open;
    errors are wrapped into Django's exceptions as with any Django cursor. Returns the rows (an
    empty list for a statement without any).
    """
    db = connections[DEFAULT_DB_ALIAS]  # this thread's connection, looked up once
    db.ensure_connection()
    with db.wrap_database_errors:
        cursor = _cursor(db)
        cursor.execute(sql, params, prepare=True)
        # The result's status, not ``cursor.description`` (which builds a Column per field).
        result = cursor.pgresult
        return cursor.fetchall() if result is not None and result.status == TUPLES_OK else []


def _cursor(db: Any) -> psycopg.Cursor:
    """The psycopg cursor execute_prepared() sends through, one per open connection.

    A cursor of its own per call cost some 20 µs of client CPU (its adapters are copied from
    the connection's, and it is closed again), a sixth of a one-row statement's round trip. A Django connection
    belongs to one thread, and so does its cursor; a new connection (after a close or a
    reconnect) gets a new one. The cursor keeps the last result until the next statement."""
    raw = db.connection
    cursor = db.__dict__.get("_durable_cursor")
    if cursor is None or cursor.connection is not raw or cursor.closed:
        cursor = psycopg.Cursor(raw)
        db.__dict__["_durable_cursor"] = cursor
    return cursor


def decode_json(raw: Any) -> Any:
    """A jsonb value read through a raw cursor: text or already decoded, depending on the
    adapter setup of the cursor that read it."""
    return json.loads(raw) if isinstance(raw, str) else raw


_listening = threading.local()


def listening_connection() -> psycopg.Connection:
    """The raw connection this thread LISTENs on for ``NOTIFY durable_ready``.

    Django's own connection, unless ``settings.DATABASE_DIRECT`` (from ``DATABASE_DIRECT_URL``)
    names a direct route to the server: LISTEN is session state, which a transaction-pooling
    proxy hands to another client after each statement, so then each thread keeps a
    connection of its own to that address (the database name is the default connection's), in
    autocommit, opened again once it is closed or broken. Call it inside
    ``connection.wrap_database_errors`` to get Django's exceptions for a failed connect.
    """
    direct = getattr(settings, "DATABASE_DIRECT", None)
    if not direct:
        return connection.connection
    conn = getattr(_listening, "conn", None)
    if conn is None or conn.closed or conn.broken:
        options = connection.settings_dict.get("OPTIONS") or {}
        conn = psycopg.connect(
            dbname=connection.settings_dict["NAME"],
            connect_timeout=options.get("connect_timeout", 5),
            autocommit=True,
            **direct,
        )
        _listening.conn = conn
    return conn
