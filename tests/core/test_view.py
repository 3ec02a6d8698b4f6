"""ClusterView: fit counts, allocate/release bookkeeping, refusals, and the what-if."""

from __future__ import annotations

import numpy as np
import pytest

from builders import (
    A100,
    V100,
    cluster,
    cpu_only,
    expected,
    frac,
    gpus_cluster,
    node,
    states_equal,
    summary,
    take,
    task,
)
from suanli.core.model import MILLI, TaskRequest
from suanli.core.view import ClusterView, OvercommitError, TaskPlacement

# V100 in the builders has 32 768 MiB; nodes have 64 000 mCPU and 512 000 MiB by default.

# (id, spec, pre-allocations [(node, gpus, task)], task, limit, expected per-node counts)
# fmt: off
FIT = [
    ("whole-1", gpus_cluster(8, 4, 0), [], task(1), None, [8, 4, 0]),
    ("whole-3", gpus_cluster(8, 4, 0), [], task(3), None, [2, 1, 0]),
    ("whole-8-too-big-for-4", gpus_cluster(8, 4), [], task(8), None, [1, 0]),
    ("whole-after-fraction-used", gpus_cluster(2), [(0, [0], frac(100))], task(1), None, [1]),
    ("fraction-300", gpus_cluster(2), [], frac(300), None, [6]),
    ("fraction-on-partly-used-gpu", gpus_cluster(2), [(0, [0], frac(500))], frac(500), None, [3]),
    # GPU memory binds: 32768 // 10000 = 3 per GPU, while the share would allow 4.
    ("fraction-memory-binds", gpus_cluster(2), [], frac(250, 10_000), None, [6]),
    ("fraction-memory-after-use", gpus_cluster(1), [(0, [0], frac(100, 30_000))], frac(100, 2_000), None, [1]),
    ("fraction-memory-too-big", gpus_cluster(2), [], frac(100, 40_000), None, [0]),
    ("cpu-only-any-node", gpus_cluster(8, 0), [], cpu_only(16_000), None, [4, 4]),
    ("cpu-only-memory", gpus_cluster(0), [], cpu_only(0, 100_000), None, [5]),
    ("cpu-binds-whole", gpus_cluster(8), [], task(1, cpu=20_000), None, [3]),
    ("memory-binds-fraction", gpus_cluster(4), [], frac(100, mem=200_000), None, [2]),
    ("cpu-used-up", gpus_cluster(8), [(0, [], cpu_only(60_000))], task(1, cpu=5_000), None, [0]),
    (
        "model-constraint",
        cluster(node("v", 8, V100), node("a", 4, A100), node("c", 0, None)),
        [],
        task(1, models={"A100"}),
        None,
        [0, 4, 0],
    ),
    ("unknown-model", gpus_cluster(8), [], task(1, models={"B200"}), None, [0]),
    (
        "unhealthy-node",
        cluster(node("ok", 4), node("sick", 4, healthy=False)),
        [],
        task(1),
        None,
        [4, 0],
    ),
    ("unhealthy-cpu-node", cluster(node("sick", 0, healthy=False)), [], cpu_only(1), None, [0]),
    ("limit-whole", gpus_cluster(8, 4, 1), [], task(1), 2, [2, 2, 1]),
    ("limit-fraction", gpus_cluster(2), [], frac(100), 5, [5]),
    ("limit-cpu-only", gpus_cluster(0, 0), [], cpu_only(1), 3, [3, 3]),
]
# fmt: on


@pytest.mark.parametrize(
    "spec, pre, t, limit, expected", [f[1:] for f in FIT], ids=[f[0] for f in FIT]
)
def test_fit_counts(spec, pre, t, limit, expected) -> None:
    view = ClusterView(spec)
    for n, gpus, pt in pre:
        take(view, n, gpus, pt)
    k = view.fit_counts(t) if limit is None else view.fit_counts(t, limit)
    assert k.tolist() == expected
    assert view.feasible(t).tolist() == [x > 0 for x in view.fit_counts(t).tolist()]


def test_fit_counts_does_not_change_the_view() -> None:
    view = ClusterView(gpus_cluster(4, 2))
    take(view, 0, [1], frac(300, 1000))
    before = view.state()
    for t in (task(1), task(2), frac(200), frac(100, 5000), cpu_only(10)):
        view.fit_counts(t)
        view.fit_counts(t, 1)
    assert states_equal(before, view.state())


def test_gpus_fitting_whole_needs_fully_free_gpus() -> None:
    view = ClusterView(gpus_cluster(4))
    take(view, 0, [1], frac(1))
    take(view, 0, [3], frac(600))
    assert view.gpus_fitting(0, task(1)).tolist() == [0, 2]
    assert view.gpus_fitting(0, frac(400)).tolist() == [0, 1, 2, 3]
    assert view.gpus_fitting(0, frac(401)).tolist() == [0, 1, 2]


def test_gpus_fitting_fraction_checks_gpu_memory() -> None:
    view = ClusterView(gpus_cluster(2))
    take(view, 0, [0], frac(100, 30_000))
    assert view.gpus_fitting(0, frac(100, 3_000)).tolist() == [1]
    assert view.gpus_fitting(0, frac(100, 2_768)).tolist() == [0, 1]


def test_padding_gpus_never_fit() -> None:
    view = ClusterView(gpus_cluster(4, 1))
    assert view.gpus_fitting(1, task(1)).tolist() == [0]
    assert view.gpus_fitting(1, frac(1)).tolist() == [0]


def test_placement_for_whole_holds_all_gpu_memory_fraction_its_own() -> None:
    view = ClusterView(cluster(node("a", 2, A100)))
    whole = view.placement_for(0, [0, 1], task(2, cpu=3, mem=4))
    assert whole == TaskPlacement(0, (0, 1), MILLI, A100.memory_mib, 3, 4)
    part = view.placement_for(0, [1], frac(250, 1234, cpu=5, mem=6))
    assert part == TaskPlacement(0, (1,), 250, 1234, 5, 6)
    cpu = view.placement_for(0, [], cpu_only(7, 8))
    assert cpu == TaskPlacement(0, (), MILLI, 0, 7, 8)


def test_allocate_and_release_bookkeeping() -> None:
    spec = gpus_cluster(4, 2)
    view = ClusterView(spec)
    assert view.node_full_free.tolist() == [4, 2]
    assert view.node_free_milli.tolist() == [4000, 2000]
    assert view.allocated_milli == 0

    a = take(view, 0, [0, 1], task(2, cpu=1000, mem=2000))
    b = take(view, 0, [2], frac(300, 4000, cpu=500))
    c = take(view, 0, [2], frac(200, 1000))
    d = take(view, 1, [], cpu_only(3000, 3000))
    assert view.node_full_free.tolist() == [1, 2]
    assert view.node_free_milli.tolist() == [4000 - 2000 - 500, 2000]
    assert view.allocated_milli == 2500
    assert summary(view)["gpu_free_milli"] == [[0, 0, 500, 1000], [1000, 1000]]
    assert summary(view)["gpu_free_mem"][0] == [0, 0, 32_768 - 5000, 32_768]
    assert view.free_cpu.tolist() == [64_000 - 1500, 64_000 - 3000]
    assert view.free_mem.tolist() == [512_000 - 2000, 512_000 - 3000]
    assert view.active().tolist() == [True, True]
    assert summary(view) == expected(spec, [a, b, c, d])

    view.release(b)
    assert view.node_full_free.tolist() == [1, 2]  # GPU 2 still holds c
    assert view.node_free_milli.tolist() == [1800, 2000]
    assert view.allocated_milli == 2200
    view.release(c)
    assert view.node_full_free.tolist() == [2, 2]
    view.release(a)
    view.release(d)
    assert states_equal(view.state(), ClusterView(spec).state())
    assert view.active().tolist() == [False, False]


def _refused(view: ClusterView, p: TaskPlacement) -> None:
    before = view.state()
    with pytest.raises(OvercommitError):
        view.allocate(p)
    assert states_equal(before, view.state()), "a refused allocate changed the view"


# (id, setup [(node, gpus, task)], the placement that must be refused)
# fmt: off
REFUSED = [
    ("gpu-share", [(0, [0], frac(600))], TaskPlacement(0, (0,), 500, 0, 0, 0)),
    ("whole-on-shared-gpu", [(0, [1], frac(1))], TaskPlacement(0, (0, 1), MILLI, 32_768, 0, 0)),
    ("gpu-memory", [(0, [0], frac(100, 30_000))], TaskPlacement(0, (0,), 100, 3_000, 0, 0)),
    ("second-gpu-of-two-overcommitted", [(0, [1], frac(900))], TaskPlacement(0, (0, 1), 200, 0, 0, 0)),
    ("node-cpu", [(0, [], cpu_only(60_000))], TaskPlacement(0, (), MILLI, 0, 5_000, 0)),
    ("node-memory", [(0, [], cpu_only(0, 500_000))], TaskPlacement(0, (0,), MILLI, 32_768, 0, 20_000)),
    ("gpu-listed-twice", [], TaskPlacement(0, (0, 0), 300, 0, 0, 0)),
    ("padding-gpu", [], TaskPlacement(1, (1,), 300, 0, 0, 0)),
    ("negative-gpu", [], TaskPlacement(0, (-1,), 300, 0, 0, 0)),
    ("node-out-of-range", [], TaskPlacement(2, (), MILLI, 0, 1, 0)),
]
# fmt: on


@pytest.mark.parametrize("setup, p", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_allocate_refuses_overcommit_and_changes_nothing(setup, p) -> None:
    view = ClusterView(gpus_cluster(2, 1))
    for n, gpus, t in setup:
        take(view, n, gpus, t)
    _refused(view, p)


def test_allocate_up_to_exactly_full_is_fine() -> None:
    view = ClusterView(gpus_cluster(1))
    take(view, 0, [0], frac(400, 16_000))
    take(view, 0, [0], frac(600, 16_768, cpu=64_000, mem=512_000))
    assert view.gpu_free_milli[0, 0] == 0 and view.gpu_free_mem[0, 0] == 0
    assert view.free_cpu[0] == 0 and view.free_mem[0] == 0
    _refused(view, TaskPlacement(0, (0,), 1, 0, 0, 0))
    _refused(view, TaskPlacement(0, (), MILLI, 0, 1, 0))


@pytest.mark.parametrize(
    "t, gpus",
    [(task(2, cpu=10, mem=10), [0, 1]), (frac(300, 100), [1]), (cpu_only(10, 10), [])],
    ids=["whole", "fraction", "cpu-only"],
)
def test_double_release_is_refused(t, gpus) -> None:
    view = ClusterView(gpus_cluster(2))
    p = take(view, 0, gpus, t)
    view.release(p)
    fresh = view.state()
    with pytest.raises(OvercommitError):
        view.release(p)
    assert states_equal(fresh, view.state())


def test_zero_share_claim_keeps_full_free_count_consistent() -> None:
    # Was a bug: the 0-milli claim was accepted and node_full_free dropped to 0 while the
    # GPU stayed 1000 milli free. Either refusing it or keeping the count right is fine.
    view = ClusterView(gpus_cluster(2))
    before = view.state()
    try:
        view.allocate(TaskPlacement(0, (0,), 0, 0, 1000, 0))
    except OvercommitError:
        assert states_equal(before, view.state())
        return
    assert view.node_full_free.tolist() == (view.gpu_free_milli == MILLI).sum(axis=1).tolist()


def test_release_of_something_never_taken_is_refused() -> None:
    view = ClusterView(gpus_cluster(2))
    with pytest.raises(OvercommitError):
        view.release(TaskPlacement(0, (0,), 100, 0, 0, 0))
    with pytest.raises(OvercommitError):
        view.release(TaskPlacement(0, (), MILLI, 0, 1, 0))


# ------------------------------------------------------------------ what-if


def test_rollback_restores_state_exactly() -> None:
    view = ClusterView(gpus_cluster(4, 2, 0))
    take(view, 0, [3], frac(250, 100))
    before = view.state()
    mark = view.checkpoint()
    take(view, 0, [0, 1], task(2, cpu=100))
    take(view, 0, [3], frac(500, 1000))
    take(view, 1, [0], frac(1))
    take(view, 2, [], cpu_only(1000, 1000))
    assert not states_equal(before, view.state())
    view.rollback(mark)
    assert states_equal(before, view.state())


def test_rollback_after_a_refused_allocate() -> None:
    view = ClusterView(gpus_cluster(1))
    before = view.state()
    mark = view.checkpoint()
    take(view, 0, [0], frac(600))
    _refused(view, TaskPlacement(0, (0,), 600, 0, 0, 0))
    view.rollback(mark)
    assert states_equal(before, view.state())


def test_commit_keeps() -> None:
    view = ClusterView(gpus_cluster(2))
    mark = view.checkpoint()
    p = take(view, 0, [0], task(1))
    view.commit(mark)
    assert summary(view) == expected(view.spec, [p])
    # After the what-if ended, new allocations are not tracked: a later what-if starts clean.
    q = take(view, 0, [1], frac(100))
    mark = view.checkpoint()
    view.rollback(mark)
    assert summary(view) == expected(view.spec, [p, q])


def test_nested_inner_rollback_keeps_outer() -> None:
    view = ClusterView(gpus_cluster(4))
    base = view.state()
    outer = view.checkpoint()
    a = take(view, 0, [0], task(1))
    mid = view.state()
    inner = view.checkpoint()
    take(view, 0, [1, 2], task(2))
    view.rollback(inner)
    assert states_equal(mid, view.state())
    assert summary(view) == expected(view.spec, [a])
    view.rollback(outer)
    assert states_equal(base, view.state())


def test_nested_inner_commit_is_undone_by_outer_rollback() -> None:
    view = ClusterView(gpus_cluster(4))
    base = view.state()
    outer = view.checkpoint()
    take(view, 0, [0], frac(500))
    inner = view.checkpoint()
    take(view, 0, [0], frac(500))
    take(view, 0, [3], task(1))
    view.commit(inner)
    view.rollback(outer)
    assert states_equal(base, view.state())


def test_nested_inner_commit_then_outer_commit_keeps_all() -> None:
    view = ClusterView(gpus_cluster(4))
    outer = view.checkpoint()
    a = take(view, 0, [0], frac(500))
    inner = view.checkpoint()
    b = take(view, 0, [1], task(1))
    view.commit(inner)
    view.commit(outer)
    assert summary(view) == expected(view.spec, [a, b])
    mark = view.checkpoint()
    view.rollback(mark)
    assert summary(view) == expected(view.spec, [a, b])


def test_state_is_a_copy() -> None:
    view = ClusterView(gpus_cluster(2))
    s = view.state()
    s[0][0, 0] = -5
    assert view.gpu_free_milli[0, 0] == MILLI


def test_view_layout() -> None:
    spec = cluster(
        node("a", 2, V100, rack="r1", domain="d1"),
        node("b", 4, A100, rack="r1", domain="d1"),
        node("c", 0, None, rack="r2"),
    )
    view = ClusterView(spec)
    assert (view.n_nodes, view.total_gpus) == (3, 6)
    assert view.gpu_exists.shape[1] >= 4  # padded to at least the largest node
    assert view.gpu_exists[:, :4].tolist() == [
        [True, True, False, False],
        [True, True, True, True],
        [False, False, False, False],
    ]
    assert not view.gpu_exists[:, 4:].any()
    assert view.gpu_cap_mem[0, :4].tolist() == [32_768, 32_768, 0, 0]
    assert summary(view)["gpu_free_mem"] == [[32_768] * 2, [81_920] * 4, []]
    assert view.node_speed.tolist() == [1.0, 2.0, 1.0]
    assert view.node_rack.tolist() == [0, 0, 1]
    assert view.node_domain[0] == view.node_domain[1] != view.node_domain[2]
    a100_only = TaskRequest(gpu_models=frozenset({"A100"}))
    assert np.array_equal(view.task_mask(a100_only), [False, True, False])


@pytest.mark.parametrize(
    "min_mem, expect",
    [
        pytest.param(0, [2, 2], id="no-minimum"),
        pytest.param(32_768, [2, 2], id="exactly-v100-memory"),
        pytest.param(40_000, [0, 2], id="more-than-v100"),
        pytest.param(100_000, [0, 0], id="more-than-any-gpu"),
    ],
)
def test_whole_gpu_memory_is_a_minimum(min_mem: int, expect: list[int]) -> None:
    # n0 has V100s (32 GiB), n1 A100s (80 GiB); a whole-GPU task's memory is a floor.
    view = ClusterView(cluster(node("n0", 4, V100), node("n1", 4, A100)))
    t = TaskRequest(gpus=2, gpu_memory_mib=min_mem)
    assert view.fit_counts(t).tolist() == expect
    assert view.feasible(t).tolist() == [e > 0 for e in expect]
