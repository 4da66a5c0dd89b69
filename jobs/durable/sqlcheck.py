"""Checks of ``sql`` steps' statements with PostgreSQL's own parser (pglast), without a
database: what a statement may be (one plain SELECT/INSERT/UPDATE/DELETE/MERGE, no function
that runs SQL text or switches the role), and whether a condition reading its result can get
one value. Pure Python: :mod:`jobs.durable.graph` checks a workflow with it when compiling,
:mod:`jobs.durable.kinds.leaves` again before running a statement.
"""

from __future__ import annotations

import re
from typing import Any

from pglast import ast, parse_sql
from pglast.parser import ParseError
from pglast.visitors import Visitor

from jobs.durable.errors import DefinitionError

# Statement kinds an sql step may be (CTEs, even data-modifying ones, sit inside these).
_ALLOWED_STATEMENTS = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)
# Functions that run SQL text or switch the role: through them a statement could leave its
# role (SET ROLE is checked against the session user, not the current one).
_DENIED_FUNCTIONS = frozenset(
    {
        "set_config",
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "pg_read_file",
        "pg_read_binary_file",
        "lo_import",
        "lo_export",
    }
)
_DENIED_PREFIXES = ("dblink",)


class _Functions(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.into = False

    def visit_FuncCall(self, parent: Any, node: ast.FuncCall) -> None:
        self.names.append(node.funcname[-1].sval.lower())

    def visit_SelectStmt(self, parent: Any, node: ast.SelectStmt) -> None:
        if node.intoClause is not None:
            self.into = True


# psycopg's placeholders (%(name)s, %s) and its escaped percent sign (%%).
_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|%%")


def _parameter(match: re.Match[str]) -> str:
    return "%" if match.group() == "%%" else "$1"  # PostgreSQL's own placeholder


def check_statement(query: str) -> ast.Node:
    """The one statement of an sql step, parsed; DefinitionError for anything else (see the
    module docstring)."""
    try:
        statements = parse_sql(_PLACEHOLDER.sub(_parameter, query))
    except ParseError as exc:
        raise DefinitionError(f"sql step: the statement does not parse: {exc}") from exc
    if len(statements) != 1:
        raise DefinitionError(
            f"sql step: one statement expected, got {len(statements)} (no ';'-separated lists)"
        )
    stmt = statements[0].stmt
    if not isinstance(stmt, (*_ALLOWED_STATEMENTS, getattr(ast, "MergeStmt", ast.DeleteStmt))):
        raise DefinitionError(
            f"sql step: only SELECT, INSERT, UPDATE, DELETE and MERGE may run, not"
            f" {type(stmt).__name__.removesuffix('Stmt').upper()}"
        )
    functions = _Functions()
    functions(stmt)
    if functions.into:
        raise DefinitionError("sql step: SELECT ... INTO creates a table; it may not run")
    for name in functions.names:
        if name in _DENIED_FUNCTIONS or name.startswith(_DENIED_PREFIXES):
            raise DefinitionError(f"sql step: the function {name}() may not be called")
    return stmt


def _sql_nodes(nodes: Any, name: str) -> list[dict[str, Any]]:
    """The sql nodes that give results the name ``name`` (a condition's name)."""
    return [n for n in nodes if n["kind"] == "sql" and n.get("name") == name]


def _result_columns(stmt: ast.Node) -> int | None:
    """How many columns a statement's rows have, when its text says (None: cannot tell,
    0: no rows at all, a row count)."""
    if isinstance(stmt, ast.SelectStmt):
        targets = stmt.targetList
    else:
        targets = getattr(stmt, "returningList", None)
        if not targets:
            return 0
    if not targets:
        return None  # UNION and friends: their arms decide
    for target in targets:
        val = getattr(target, "val", None)
        if isinstance(val, ast.ColumnRef) and any(isinstance(f, ast.A_Star) for f in val.fields):
            return -1  # '*': not one known column
    return len(targets)


def check_sql_conditions(nodes: list[dict[str, Any]]) -> None:
    """When a workflow is compiled (its ``nodes``): a when/loop condition on an sql result
    must be able to be one value (see :mod:`jobs.durable.kinds.control`); every sql
    statement must pass :func:`check_statement`."""
    for node in nodes:
        if node["kind"] == "sql":
            check_statement(node["query"])
    for node in nodes:
        cond = node.get("cond") if node["kind"] == "when" else node.get("while")
        if node["kind"] not in ("when", "loop") or not cond or "name" not in cond:
            continue
        for sql_node in _sql_nodes(nodes, cond["name"]):
            columns = _result_columns(check_statement(sql_node["query"]))
            if columns is not None and columns not in (0, 1):
                shape = "'*'" if columns < 0 else f"{columns} columns"
                raise DefinitionError(
                    f"{node['kind']}: condition {cond['name']!r} reads an sql result with"
                    f" {shape}; a condition tests one value: select one column of one row"
                    " (e.g. SELECT count(*) > 0 AS ok ...) or use a statement without rows"
                    " (its row count)"
                )
