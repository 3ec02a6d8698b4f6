"""The control plane builds its scheduler through the core's builder, as the simulator does,
and imports nothing of the simulator."""

from __future__ import annotations

from import_graph import SRC, graph


def test_control_imports_nothing_of_the_simulator() -> None:
    edges = graph(SRC / "control")
    assert {
        n: sorted(d) for n, d in edges.items() if any(m.startswith("suanli.sim") for m in d)
    } == {}
    assert any("suanli.core.builder" in d for d in edges.values())
