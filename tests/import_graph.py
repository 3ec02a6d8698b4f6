"""The import graph of a package of the project, from its source: every import statement,
at the top, inside a function, or under ``TYPE_CHECKING`` (``tests/core/test_imports.py``,
``tests/control/test_imports.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import suanli

SRC = Path(suanli.__file__).resolve().parent
CORE = SRC / "core"


def modules(package: Path = CORE) -> dict[str, Path]:
    """Module name -> file, for every module of ``package`` (a folder under ``suanli``)."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts).removesuffix(".__init__")] = p
    return out


def imports_of(name: str, path: Path) -> set[str]:
    """Every module ``path`` names in an import statement (``from X import y`` counts as
    ``X.y`` when that is a module, else ``X``)."""
    known = modules(SRC)
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
                found.add(full if full in known else mod)
    return found


def graph(package: Path = CORE) -> dict[str, set[str]]:
    return {name: imports_of(name, path) for name, path in modules(package).items()}


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
