"""The analysis package has no import cycle, and every citation style lives in ``styles``.

Imports are read with ``ast`` from every module of ``jobs/analysis`` (module level, inside
functions and under ``TYPE_CHECKING`` alike), so a cycle cannot hide behind a late import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobs.analysis
from jobs.analysis import styles

PACKAGE = Path(jobs.analysis.__file__).resolve().parent
ROOT = "jobs.analysis"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([ROOT, *parts])


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports. ``from pkg import mod`` imports ``mod``;
    ``from pkg import name`` imports the package's ``__init__``."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join([*anchor, *(node.module.split(".") if node.module else [])])
            else:
                target = node.module or ""
            targets = [
                f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                for a in node.names
            ]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        out.update(t for t in targets if t == ROOT or t.startswith(ROOT + "."))
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {t for t in _imports(path, name, set(modules)) if t in modules and t != name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_in_the_analysis_package():
    graph = _graph()
    assert f"{ROOT}.styles" in graph and f"{ROOT}.styles.apa" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_cycle_finder_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_style_module_registers_a_style():
    modules = {p.stem for p in Path(styles.__file__).parent.glob("*.py")} - {
        "__init__",
        "base",
        "names",
    }
    assert modules == set(styles.STYLES)
    assert set(styles.NUMERIC) <= set(styles.STYLES)
    for name, style in styles.REGISTRY.items():
        assert style.name == name and callable(style.parse_entry)
