"""The shape table's counts: one node at a time and many at once agree with fit_counts."""

from __future__ import annotations

import numpy as np
import pytest

from builders import A100, V100, cluster, frac, node, task
from suanli.core.model import TaskRequest
from suanli.core.shapes import ShapeTable
from suanli.core.view import ClusterView

SHAPES = [
    pytest.param(task(gpus=1), 1, id="one-gpu"),
    pytest.param(task(gpus=2, cpu=8_000), 4, id="two-gpus-4-tasks"),
    pytest.param(frac(300, 4_000), 1, id="fraction"),
    pytest.param(frac(500, 20_000), 6, id="fraction-memory-bound"),
    pytest.param(TaskRequest(gpus=0, cpu_milli=16_000, memory_mib=64_000), 3, id="cpu-only"),
    pytest.param(TaskRequest(gpus=1, gpu_models=frozenset({"A100"})), 2, id="a100-only"),
    pytest.param(TaskRequest(gpus=1, gpu_memory_mib=40_000), 1, id="gpu-memory-floor"),
]


def busy_view() -> ClusterView:
    view = ClusterView(
        cluster(node("n0", 8, V100), node("n1", 4, A100), node("n2", 0), node("n3", 8, V100))
    )
    for n, t in (
        (0, frac(400, 8_000)),
        (0, task(gpus=3)),
        (1, frac(700, 30_000)),
        (3, task(gpus=8)),
    ):
        view.allocate(view.placement_for(n, view.gpus_fitting(n, t)[: max(t.gpus, 1)], t))
    view.set_health(3, False)
    return view


@pytest.mark.parametrize("request_, tasks", SHAPES)
def test_recount_from_scratch_agrees_with_fit_counts(request_, tasks) -> None:
    view = busy_view()
    table = ShapeTable(view)
    other = table.id_of((frac(250, 1_000), 2, 2))  # a second column, fractional
    table.track(other, np.zeros(view.n_nodes, np.int64))
    sid = table.id_of((request_, tasks, tasks))
    table.track(sid, np.zeros(view.n_nodes, np.int64))  # wrong on purpose: zero everywhere
    for n in range(view.n_nodes):
        table.node_changed(n)
    table.flush()
    assert table.counts(sid).tolist() == view.fit_counts(request_, tasks).tolist()
    assert table.counts(other).tolist() == view.fit_counts(frac(250, 1_000), 2).tolist()
    assert table.total(sid) == int(view.fit_counts(request_, tasks).sum())


def test_many_changed_nodes_are_recounted_exactly() -> None:
    view = ClusterView(cluster(*(node(f"n{i}", 8, V100) for i in range(6))))
    table = ShapeTable(view)
    t = task(gpus=8)
    sid = table.id_of((t, 6, 6))
    table.track(sid, view.fit_counts(t, 6))
    gang = [view.placement_for(n, range(8), t) for n in range(6)]
    for p in gang:
        view.allocate(p)
    assert not table.fits(sid) and table.total(sid) == 0
    for p in gang:  # six nodes change before the next look: all recounted then
        view.release(p)
    assert table.fits(sid) and table.total(sid) == 6
    assert sid in table.began_to_fit
