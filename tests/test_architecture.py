"""The floor plan, checked: the durable engine stands alone, and no modules import each other
in a circle.

Every module of the project (``acurio/``, ``jobs/``; migrations left out) is read with ``ast``
— no import is executed — and every import statement counts, wherever it is written: at the
top, inside a function (an import put there to dodge a cycle is still a cycle), or under
``if TYPE_CHECKING:``. Relative imports are resolved against the importing module.

* ``jobs/durable/`` imports nothing from the project outside itself (``jobs.*`` apart from
  ``jobs.durable.*``, or ``acurio``), so it could be lifted into a package of its own.
* The modules form no import cycle: the graph of "module A imports module B" has no strongly
  connected component of more than one module (nor a module importing itself).

``import a.b.c`` counts as an import of ``a.b.c`` only (not of the packages ``a`` and ``a.b``
that Python runs first), and ``from a.b import c`` as one of the module ``a.b.c`` when there
is one, else of ``a.b``: a package ``__init__`` that loads its submodules is not in a circle
with them unless one of them imports the package itself.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("acurio", "jobs")
ENGINE = "jobs.durable"


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported project module
    line: int

    def where(self) -> str:
        return f"{module_path(self.source)}:{self.line}"


def module_path(name: str) -> str:
    base = ROOT / Path(*name.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return str(path.relative_to(ROOT))


def project_modules() -> dict[str, Path]:
    """Module name -> file, for every module of the project (migrations left out)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def longest_module(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is a project module, else its longest prefix that is one."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def resolve(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]
) -> list[str]:
    """The project modules one import statement of ``module`` imports (see the docstring)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            # One package level up per dot beyond the first; a package's __init__ is its own
            # base package.
            base = module.split(".") if is_package else module.split(".")[:-1]
            keep = len(base) - (node.level - 1)
            assert keep > 0, f"{module}: relative import beyond the top-level package"
            prefix = ".".join(base[:keep] + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [
            f"{prefix}.{alias.name}"
            if alias.name != "*" and f"{prefix}.{alias.name}" in modules
            else prefix
            for alias in node.names
        ]
    targets = []
    for name in names:
        if name.split(".")[0] not in PACKAGES:
            continue
        target = longest_module(name, modules)
        if target is not None and target not in targets:
            targets.append(target)
    return targets


def project_imports(modules: dict[str, Path]) -> list[Import]:
    """Every import of a project module by a project module, wherever it is written."""
    found: list[Import] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.extend(
                    Import(module, target, node.lineno)
                    for target in resolve(node, module, is_package, modules)
                )
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit): the components, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def one_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def describe_cycle(cycle: list[str], imports: list[Import]) -> str:
    steps = []
    for source, target in itertools.pairwise(cycle):
        where = next(i.where() for i in imports if i.source == source and i.target == target)
        steps.append(f"  {source} imports {target}  ({where})")
    return "\n".join(steps)


def test_the_engine_imports_nothing_from_its_host():
    modules = project_modules()
    assert ENGINE in modules, "the engine package was found"
    outside = [
        i
        for i in project_imports(modules)
        if (i.source == ENGINE or i.source.startswith(ENGINE + "."))
        and not (i.target == ENGINE or i.target.startswith(ENGINE + "."))
    ]
    assert not outside, "jobs/durable/ imports from outside itself:\n" + "\n".join(
        f"  {i.where()}: {i.target}" for i in outside
    )


def test_no_import_cycle_between_modules():
    modules = project_modules()
    imports = project_imports(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for i in imports:
        graph[i.source].add(i.target)
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    cycles += [[name] for name in modules if name in graph[name]]
    report = []
    for component in cycles:
        cycle = one_cycle(component, graph)
        report.append(
            f"{len(component)} module(s) in one circle: {', '.join(component)}\n"
            f" for example:\n{describe_cycle(cycle, imports)}"
        )
    assert not cycles, "import cycles:\n" + "\n".join(report)


# --- the checker checks itself on small made-up graphs -----------------------------------------
def test_the_cycle_finder_finds_circles_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"f"}}
    components = {tuple(c) for c in strongly_connected(graph)}
    assert ("a", "b", "c") in components and ("d",) in components and ("e",) in components
    assert one_cycle(["a", "b", "c"], graph) == ["a", "b", "c", "a"]
    assert one_cycle(["f"], graph) == ["f", "f"]


def test_imports_are_resolved_like_python_does():
    modules = {
        name: Path("x")
        for name in (
            "jobs",
            "jobs.models",
            "jobs.durable",
            "jobs.durable.api",
            "jobs.durable.engine",
            "jobs.durable.graph",
            "jobs.durable.kinds",
            "jobs.durable.kinds.base",
            "jobs.durable.statements",
        )
    }

    def targets(source: str, module: str = "jobs.durable.api", package: bool = False):
        (node,) = ast.parse(source).body
        return resolve(node, module, package, modules)

    assert targets("import jobs.durable.engine") == ["jobs.durable.engine"]
    assert targets("import jobs.durable.nothing") == ["jobs.durable"]
    assert targets("import os, django.db") == []
    # a submodule by name, or the package for a name defined in its __init__
    assert targets("from jobs.durable import statements, start") == [
        "jobs.durable.statements",
        "jobs.durable",
    ]
    assert targets("from . import graph") == ["jobs.durable.graph"]
    assert targets("from .kinds.base import Kind") == ["jobs.durable.kinds.base"]
    assert targets("from .. import models") == ["jobs.models"]
    # in a package's __init__, "." is the package itself
    assert targets("from . import base", "jobs.durable.kinds", package=True) == [
        "jobs.durable.kinds.base"
    ]
    assert targets("from .base import Kind", "jobs.durable.kinds", package=True) == [
        "jobs.durable.kinds.base"
    ]
    # function-level imports are found as well
    tree = ast.parse("def later():\n    from jobs.models import AnalysisJob\n")
    found = [
        resolve(node, "jobs.durable.api", False, modules)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    ]
    assert found == [["jobs.models"]]
