"""The core's import graph: no module of ``suanli.core`` imports anything else of the project,
and no two import each other, directly or round a circle, counting every import statement:
at the top, inside a function, or under ``TYPE_CHECKING``."""

from __future__ import annotations

from pathlib import Path

from import_graph import cycles, graph, imports_of


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
    assert {"suanli.core.scheduler", "suanli.sim.engine"} <= found
