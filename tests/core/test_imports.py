"""The core's import graph: no module of ``suanli.core`` imports anything else of the project,
and no two import each other, directly or round a circle, counting every import statement:
at the top, inside a function, or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import suanli.core

CORE = Path(suanli.core.__file__).resolve().parent


def core_modules() -> dict[str, Path]:
    out = {}
    for p in sorted(CORE.rglob("*.py")):
        parts = p.relative_to(CORE.parent).with_suffix("").parts
        name = ".".join(("suanli", *parts))
        out[name.removesuffix(".__init__")] = p
    return out


def imports_of(name: str, path: Path) -> set[str]:
    """Every module ``path`` names in an import statement (``from X import y`` counts as
    ``X.y`` when that is a module, else ``X``)."""
    modules = core_modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                found.add(full if full in modules else mod)
    return found


def graph() -> dict[str, set[str]]:
    return {name: imports_of(name, path) for name, path in core_modules().items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_core_imports_nothing_else_of_the_project() -> None:
    outside = {
        name: sorted(m for m in deps if m.startswith("suanli") and not m.startswith("suanli.core"))
        for name, deps in graph().items()
    }
    assert {n: d for n, d in outside.items() if d} == {}


def test_core_has_no_import_circle() -> None:
    assert cycles(graph()) == []


def test_no_plugin_imports_the_scheduler() -> None:
    edges = graph()
    users = sorted(n for n, deps in edges.items() if "suanli.core.scheduler" in deps)
    assert users == ["suanli.core.builder"]


def test_the_cycle_detector_finds_a_circle(tmp_path: Path) -> None:
    """The check itself: a circle through three modules, and a TYPE_CHECKING import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from suanli.core.scheduler import Scheduler\n"
        "def f():\n"
        "    from ..sim import engine\n"
    )
    found = imports_of("suanli.core.probe", probe)
    assert {"suanli.core.scheduler", "suanli.sim"} <= found
