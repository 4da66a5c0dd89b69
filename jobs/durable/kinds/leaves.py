"""The two plain leaves: ``task`` (a Python function by dotted path) and ``sql`` (a statement).

Both run inside the checkpoint transaction, so their database writes commit with it.

An ``sql`` step is untrusted text from whoever started the workflow, so:

* **One plain statement.** It is parsed with PostgreSQL's own parser (pglast) at ``start()``
  and again before it runs: exactly one ``SELECT``, ``INSERT``, ``UPDATE``, ``DELETE`` or
  ``MERGE`` (CTEs included), no ``SELECT ... INTO``, and none of the functions that run SQL
  text or change the session's role (``set_config``, ``query_to_xml``..., ``dblink``...).
* **Under a role.** With ``ACURIO_SQL_STEP_ROLE`` set, the statement runs after ``SET LOCAL
  ROLE <role>``, so PostgreSQL's grants and row-level security decide what it may read and
  write (``acurio.owner_id`` holds the instance owner's id, for policies by owner);
  ``RESET ROLE`` follows before the checkpoint. ``SET ROLE`` is checked against the
  *session* user, which is why the parser rules above (and a check that the role is still
  in place afterwards) keep the statement from switching back. Without the role, only
  superusers may start workflows with ``sql`` steps (:mod:`jobs.durable.permissions`).
* **Typed results.** Rows come back as JSON with their types kept (:func:`json_value`):
  json/jsonb as objects and lists, integers and exact numerics as numbers, timestamps as
  ISO 8601 text. A statement without a result set returns its row count.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string
from psycopg.types.json import Jsonb, JsonbLoader, JsonLoader

from jobs.durable import statements
from jobs.durable.context import Context
from jobs.durable.errors import Break, DefinitionError, PermanentError
from jobs.durable.graph import BUILTIN_NAMES, PARAM_RE
from jobs.durable.isolation import run_isolated
from jobs.durable.kinds.base import Kind, register
from jobs.durable.sqlcheck import check_statement


@register
class TaskKind(Kind):
    name = "task"
    leaf = True

    def check(self, node: dict[str, Any]) -> None:
        try:
            fn = import_string(node["path"])
        except ImportError as exc:
            raise DefinitionError(f"task {node['path']!r} cannot be imported: {exc}") from exc
        if not callable(fn):
            raise DefinitionError(f"task {node['path']!r} is not callable")

    def prepare(self, node: dict[str, Any]) -> None:
        import_string(node["path"])  # ImportError: this worker's code predates the task

    def in_transaction(self, node: dict[str, Any]) -> bool:
        # An isolated task computes in a child process outside any transaction; the worker
        # checkpoints its result afterwards (jobs.durable.isolation).
        return not node.get("opts", {}).get("isolate")

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        fn = import_string(node["path"])
        try:
            opts = node.get("opts", {})
            if not opts.get("isolate"):
                return fn(ctx)
            return run_isolated(
                fn,
                ctx,
                memory_mb=opts.get("memory_mb") or settings.ACURIO_STEP_MEMORY_MB,
                timeout=opts.get("timeout") or settings.ACURIO_STEP_TIMEOUT_SECONDS,
                should_stop=ctx.stopped,
                what=f"step {self.describe(node)}",
            )
        except Break as brk:
            # The checkpoint ends the enclosing loop (Txn.checkpoint → Kind.take_break).
            return brk

    def describe(self, node: dict[str, Any]) -> str:
        path = node["path"].rsplit(".", 1)[-1]
        return f"{node['name']} ({path})" if node["name"] else path


def sql_param(value: Any) -> Any:
    """A named result as a SQL parameter: lists of scalars become PostgreSQL arrays
    (``= ANY(%(ids)s)``); objects and lists holding objects go as jsonb."""
    if isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
    ):
        return Jsonb(value)
    return value


def json_value(value: Any) -> Any:
    """A value read from PostgreSQL as JSON data, its type kept where JSON has one.

    json/jsonb (already decoded) and arrays keep their structure; integers stay integers;
    a numeric is an int when whole, a float when a float holds it exactly, else its exact
    text ("0.1000000000000000000001"); timestamps, dates and times are ISO 8601 text; an
    interval is its seconds; a UUID its text; bytea is base64 text; NaN and infinities are
    text ("NaN", "Infinity"), which JSON cannot hold as numbers.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value).replace("inf", "Infinity")
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        if value == value.to_integral_value():
            return int(value)
        as_float = float(value)
        return as_float if Decimal(repr(as_float)) == value else str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


@register
class SqlKind(Kind):
    name = "sql"
    leaf = True

    def check(self, node: dict[str, Any]) -> None:
        check_statement(node["query"])

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        try:
            check_statement(node["query"])  # a graph stored before these rules existed
        except DefinitionError as exc:
            raise PermanentError(str(exc)) from exc
        params: dict[str, Any] = {}
        for name in dict.fromkeys(PARAM_RE.findall(node["query"])):
            value = getattr(ctx, name) if name in BUILTIN_NAMES else ctx[name]
            params[name] = sql_param(value)
        role = getattr(settings, "ACURIO_SQL_STEP_ROLE", "")
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            # Django reads json as text (its JSONField decodes it); a step wants the data.
            cursor.adapters.register_loader("jsonb", JsonbLoader)
            cursor.adapters.register_loader("json", JsonLoader)
            if role:
                # The owner for row-level security, and the role; both end with the
                # transaction, and the statement may not change them (check_statement).
                cursor.execute(statements.SQL_STEP_SESSION, [ctx.instance_id, role])
            try:
                cursor.execute(node["query"], params or None)
            except psycopg.errors.InsufficientPrivilege as exc:
                # No retry grants a privilege: fail at once, with PostgreSQL's words.
                raise PermanentError(f"sql step refused: {exc}".strip()) from exc
            if cursor.description is None:
                output: Any = cursor.rowcount
            else:
                columns = [col.name for col in cursor.description]
                output = [
                    {c: json_value(v) for c, v in zip(columns, row, strict=True)}
                    for row in cursor.fetchall()
                ]
            if role:
                cursor.execute("SELECT current_user")
                current = cursor.fetchone()[0]
                if current != role:
                    raise PermanentError(
                        f"sql step left its role {role!r} (now {current!r}); refused"
                    )
                cursor.execute("RESET ROLE")
        return output

    def describe(self, node: dict[str, Any]) -> str:
        query = " ".join(node["query"].split())
        short = query if len(query) <= 40 else query[:37] + "..."
        return f"{node['name']} (sql: {short})" if node["name"] else f"sql: {short}"
