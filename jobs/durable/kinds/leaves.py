"""The two plain leaves: ``task`` (a Python function by dotted path) and ``sql`` (a statement).

Both run inside the checkpoint transaction, so their database writes commit with it.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils.module_loading import import_string
from psycopg.types.json import Jsonb

from jobs.durable.context import Context
from jobs.durable.errors import Break, DefinitionError
from jobs.durable.graph import BUILTIN_NAMES, PARAM_RE
from jobs.durable.kinds.base import Kind, register


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

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        try:
            return import_string(node["path"])(ctx)
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


@register
class SqlKind(Kind):
    name = "sql"
    leaf = True

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        params: dict[str, Any] = {}
        for name in dict.fromkeys(PARAM_RE.findall(node["query"])):
            value = getattr(ctx, name) if name in BUILTIN_NAMES else ctx[name]
            params[name] = sql_param(value)
        with connection.cursor() as cursor:
            cursor.execute(node["query"], params or None)
            if cursor.description is None:
                return cursor.rowcount
            columns = [col.name for col in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def describe(self, node: dict[str, Any]) -> str:
        query = " ".join(node["query"].split())
        short = query if len(query) <= 40 else query[:37] + "..."
        return f"{node['name']} (sql: {short})" if node["name"] else f"sql: {short}"
