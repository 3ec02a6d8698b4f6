"""Fragmentation with respect to a target workload (``suanli.core.frag``).

Hand-computed values for ``TargetWorkload``, ``fragmentation`` and ``hole_values``, and a
property that the compiled per-task kernel ``frag_deltas`` agrees with the NumPy reference:
its growth is ``fragmentation(after) - fragmentation(before)`` for the GPU it chooses, that GPU
is the best of the fitting ones (ties to the lowest index), and its quantised mode returns
minus the paper's integer score ``int(sigmoid(-growth / 1000) * 100)``.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import MODELS, cluster, frac, node, take, task
from suanli.core.frag import (
    TargetWorkload,
    frag_deltas,
    fragmentation,
    hole_values,
    shape_key,
)
from suanli.core.model import MILLI
from suanli.core.view import ClusterView

FAST = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

NONE: frozenset[str] = frozenset()

# ------------------------------------------------------------------ TargetWorkload


def shapes(t: TargetWorkload) -> list[tuple[int, int, int, frozenset[str]]]:
    return [
        (int(c), int(m), int(g), models)
        for c, m, g, models in zip(t.cpu_milli, t.gpu_milli, t.gpus, t.models, strict=True)
    ]


def test_shape_key_leaves_memory_out() -> None:
    assert shape_key(task(2, cpu=8_000, mem=64_000)) == (8_000, MILLI, 2, NONE)
    assert shape_key(frac(300, 4_000, cpu=1_000)) == (1_000, 300, 1, NONE)
    # CPU-only tasks have no GPU share at all, whatever their gpu_milli default says.
    assert shape_key(task(0, cpu=2_000, models={"V100"})) == (2_000, 0, 0, frozenset({"V100"}))


def test_coverage_cut_and_renormalised_weights() -> None:
    a, b, c, d = (0, 1000, 1, NONE), (0, 500, 1, NONE), (4000, 0, 0, NONE), (0, 1000, 8, NONE)
    # 60 + 30 = 90 < 95, 60 + 30 + 6 = 96 >= 95: the fourth shape (4 of 100) is left out.
    t = TargetWorkload.from_counts({d: 4, b: 30, c: 6, a: 60})
    assert shapes(t) == [a, b, c]
    assert t.weight.tolist() == pytest.approx([60 / 96, 30 / 96, 6 / 96])
    assert len(t) == 3
    assert float(t.weight.sum()) == pytest.approx(1.0)


def test_coverage_one_keeps_every_shape_and_zero_counts_are_dropped() -> None:
    a, b, c = (0, 1000, 1, NONE), (0, 500, 1, NONE), (0, 200, 1, NONE)
    t = TargetWorkload.from_counts({a: 1, b: 2, c: 0}, coverage=1.0)
    assert shapes(t) == [b, a]
    assert t.weight.tolist() == pytest.approx([2 / 3, 1 / 3])


# Equal counts: the larger shape first (CPU, then milli-GPU, then GPUs, then models).
# fmt: off
TIES = [
    ("cpu-first", (1000, 500, 1, NONE), (2000, 100, 1, NONE)),
    ("milli-next", (1000, 500, 1, NONE), (1000, 600, 1, NONE)),
    ("gpus-next", (1000, 1000, 1, NONE), (1000, 1000, 2, NONE)),
    ("models-last", (0, 1000, 1, frozenset({"A100"})), (0, 1000, 1, frozenset({"V100"}))),
    ("any-model-after-named", (0, 1000, 1, NONE), (0, 1000, 1, frozenset({"A100"}))),
]
# fmt: on


@pytest.mark.parametrize("small, large", [c[1:] for c in TIES], ids=[c[0] for c in TIES])
def test_ties_go_to_the_larger_shape(small, large) -> None:  # type: ignore[no-untyped-def]
    for counts in ({small: 5, large: 5}, {large: 5, small: 5}):
        assert shapes(TargetWorkload.from_counts(counts)) == [large, small]
        assert shapes(TargetWorkload.from_counts(counts, coverage=0.5)) == [large]


shape_keys = st.tuples(
    st.sampled_from([0, 1000, 4000]),
    st.sampled_from([0, 300, 500, 1000]),
    st.integers(1, 4),
    st.sampled_from([NONE, frozenset({"V100"}), frozenset({"A100", "T4"})]),
).map(lambda k: (k[0], k[1], 0, k[3]) if k[1] == 0 else k)


@FAST
@given(
    counts=st.dictionaries(shape_keys, st.integers(1, 50), min_size=1, max_size=8),
    coverage=st.sampled_from([0.5, 0.8, 0.95, 1.0]),
    perm_seed=st.integers(0, 1000),
)
def test_from_counts_properties(counts, coverage, perm_seed) -> None:  # type: ignore[no-untyped-def]
    t = TargetWorkload.from_counts(counts, coverage)
    chosen = shapes(t)
    got = [counts[k] for k in chosen]
    total = sum(counts.values())
    # The most popular shapes, as few as cover the share asked for.
    assert got == sorted(got, reverse=True)
    assert all(counts[k] <= got[-1] for k in counts if k not in chosen)
    assert sum(got[:-1]) < coverage * total <= sum(got)
    assert t.weight.tolist() == pytest.approx([c / sum(got) for c in got])
    # Deterministic: the insertion order of the counts does not matter.
    items = list(counts.items())
    np.random.default_rng(perm_seed).shuffle(items)  # type: ignore[arg-type]
    again = TargetWorkload.from_counts(dict(items), coverage)
    assert shapes(again) == chosen
    assert again.weight.tolist() == t.weight.tolist()


@pytest.mark.parametrize(
    "counts, coverage, message",
    [
        pytest.param({}, 0.95, "at least one task", id="empty"),
        pytest.param({(0, 1000, 1, NONE): 0}, 0.95, "at least one task", id="only-zero-counts"),
        pytest.param({(0, 1000, 1, NONE): 1}, 0.0, "coverage must be in", id="coverage-zero"),
        pytest.param({(0, 1000, 1, NONE): 1}, 1.5, "coverage must be in", id="coverage-above-one"),
    ],
)
def test_from_counts_rejects(counts, coverage, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        TargetWorkload.from_counts(counts, coverage)


def test_from_tasks_counts_shapes_and_means_memory() -> None:
    tasks = [
        task(1, cpu=4_000, mem=1_000),
        task(1, cpu=4_000, mem=2_000),
        task(1, cpu=4_000, mem=4_000),
        frac(500, 8_000, cpu=2_000, mem=300),  # GPU memory is not part of the shape
        frac(500, 0, cpu=2_000, mem=100),
        task(0, cpu=1_000, mem=50),
    ]
    t = TargetWorkload.from_tasks(tasks, coverage=1.0)
    assert shapes(t) == [(4_000, 1000, 1, NONE), (2_000, 500, 1, NONE), (1_000, 0, 0, NONE)]
    assert t.weight.tolist() == pytest.approx([3 / 6, 2 / 6, 1 / 6])
    assert t.memory_mib.tolist() == [2_333, 200, 50]  # 7000 / 3 truncated
    assert t.fit_memory_mib.tolist() == [0, 0, 0]
    with_mem = TargetWorkload.from_tasks(tasks, coverage=1.0, fit_memory=True)
    assert with_mem.fit_memory_mib.tolist() == [2_333, 200, 50]


def test_gpu_ratios_weighted_over_gpu_shapes() -> None:
    counts = Counter({(4_000, 500, 1, NONE): 2, (8_000, 1000, 2, NONE): 1, (2_000, 0, 0, NONE): 1})
    memory = {(4_000, 500, 1, NONE): 2 * 10_000, (8_000, 1000, 2, NONE): 40_000}
    t = TargetWorkload.from_counts(counts, coverage=1.0, memory=memory)
    # weights 1/2, 1/4, 1/4; milli-GPU per task 500, 2000, 0 (the CPU-only shape is left out):
    # sum w * gpu = 250 + 500 = 750; CPU (2000 + 2000) / 750; memory (5000 + 10000) / 750.
    cpu, mem = t.gpu_ratios()
    assert cpu == pytest.approx(4_000 / 750)
    assert mem == pytest.approx(15_000 / 750)
    cpu_only = TargetWorkload.from_counts({(2_000, 0, 0, NONE): 3})
    assert cpu_only.gpu_ratios() == (0.0, 0.0)


def test_access_columns_and_cache() -> None:
    t = TargetWorkload.from_counts(
        {
            (0, 1000, 1, NONE): 3,
            (0, 1000, 1, frozenset({"A100"})): 2,
            (0, 500, 1, frozenset({"V100", "T4"})): 1,
        },
        coverage=1.0,
    )
    acc = t.access(("V100", "A100", "T4"))
    assert acc.tolist() == [
        [False, True, True, True],
        [False, False, True, False],
        [False, True, False, True],
    ]
    assert t.access(("V100", "A100", "T4")) is acc
    assert t.access(("T4",)).tolist() == [[False, True], [False, False], [False, True]]


# ------------------------------------------------------------------ fragmentation (NumPy)


def target_of(counts: dict, fit_memory: bool = False, memory: dict | None = None):  # type: ignore[no-untyped-def,type-arg]
    return TargetWorkload.from_counts(counts, 1.0, memory=memory, fit_memory=fit_memory)


def frag_one(free, target, cpu=64_000, mem=512_000, model="V100", models=("V100", "A100")):  # type: ignore[no-untyped-def]
    slots = np.zeros((1, 8), dtype=np.int64)
    slots[0, : len(free)] = free
    col = np.array([0 if model is None else 1 + models.index(model)])
    access = target.access(models)
    return float(fragmentation(slots, np.array([cpu]), np.array([mem]), col, target, access)[0])


HALF = (0, 500, 1, NONE)
WHOLE = (0, 1000, 1, NONE)
TWO = (0, 1000, 2, NONE)
HALF_CPU = (4_000, 500, 1, NONE)
CPU_ONLY = (1_000, 0, 0, NONE)
WHOLE_A100 = (0, 1000, 1, frozenset({"A100"}))

# (id, free milli per GPU, free CPU, target counts, expected fragmentation)
# fmt: off
FRAG_CASES = [
    # 500-shape (w 3/4): fits GPU 0, only GPU 1's 200 is too small -> 200;
    # whole-GPU shape (w 1/4): fits no GPU -> all 800.  3/4 * 200 + 1/4 * 800 = 350.
    ("two-shapes", [600, 200], 64_000, {HALF: 3, WHOLE: 1}, 350.0),
    ("whole-fits-rest-is-small", [1000, 300], 64_000, {WHOLE: 1}, 300.0),
    ("two-gpus-needed", [1000, 300], 64_000, {TWO: 1}, 1300.0),
    ("two-gpus-fit", [1000, 1000, 400], 64_000, {TWO: 1}, 400.0),
    ("cpu-short-all-fragment", [1000, 1000], 2_000, {HALF_CPU: 1}, 2000.0),
    ("cpu-enough", [1000, 300], 4_000, {HALF_CPU: 1}, 300.0),
    ("cpu-only-shape-all-fragment", [1000, 300], 64_000, {CPU_ONLY: 1}, 1300.0),
    ("wrong-model-all-fragment", [1000, 300], 64_000, {WHOLE_A100: 1}, 1300.0),
    ("mixed", [1000, 300], 64_000, {WHOLE_A100: 1, WHOLE: 1}, 0.5 * 1300 + 0.5 * 300),
    ("nothing-free", [0, 0], 64_000, {HALF: 1, WHOLE: 1}, 0.0),
    ("idle-node-no-fragment", [1000] * 8, 64_000, {HALF: 1, WHOLE: 1, TWO: 1}, 0.0),
]
# fmt: on


@pytest.mark.parametrize(
    "free, cpu, counts, want", [c[1:] for c in FRAG_CASES], ids=[c[0] for c in FRAG_CASES]
)
def test_fragmentation_by_hand(free, cpu, counts, want) -> None:  # type: ignore[no-untyped-def]
    assert frag_one(free, target_of(counts), cpu=cpu) == pytest.approx(want)


def test_fragmentation_without_gpus_is_zero() -> None:
    assert frag_one([], target_of({HALF: 1, CPU_ONLY: 1}), model=None) == 0.0


def test_fragmentation_memory_only_with_fit_memory() -> None:
    counts = {HALF: 1}
    memory = {HALF: 100_000}
    loose = target_of(counts, memory=memory)
    strict = target_of(counts, memory=memory, fit_memory=True)
    assert frag_one([600, 200], loose, mem=50_000) == 200.0
    assert frag_one([600, 200], strict, mem=50_000) == 800.0
    assert frag_one([600, 200], strict, mem=100_000) == 200.0


def test_fragmentation_is_per_node() -> None:
    target = target_of({HALF: 3, WHOLE: 1})
    free = np.array([[600, 200, 0, 0], [1000, 1000, 0, 0], [0, 0, 0, 0], [450, 0, 0, 0]])
    cpu = np.array([64_000, 64_000, 64_000, 64_000])
    got = fragmentation(
        free, cpu, cpu, np.array([1, 2, 0, 1]), target, target.access(("V100", "A100"))
    )
    assert got.tolist() == pytest.approx([350.0, 0.0, 0.0, 450.0])


# ------------------------------------------------------------------ hole values


def test_hole_values_nothing_fits_is_wasted_whole() -> None:
    v = hole_values(target_of({WHOLE: 1}))
    assert v[0] == 0.0
    assert v[1:MILLI].tolist() == list(range(1, MILLI))
    assert v[MILLI] == 0.0


def test_hole_values_one_shape_fills_repeatedly() -> None:
    v = hole_values(target_of({HALF: 1}))
    assert [v[h] for h in (0, 499, 500, 700, 999, 1000)] == [0, 499, 0, 200, 499, 0]


def test_hole_values_recursion_by_popularity() -> None:
    # 300 and 1000 equally popular: V(h) = h below 300; V(400) = V(100) = 100;
    # V(700) = V(400) = 100; V(1000) = (V(700) + V(0)) / 2 = 50.
    v = hole_values(target_of({(0, 300, 1, NONE): 1, WHOLE: 1}))
    assert [v[h] for h in (0, 299, 300, 400, 700, 1000)] == pytest.approx([0, 299, 0, 100, 100, 50])


def test_hole_values_weigh_by_gpus_per_task() -> None:
    # 700-shares and 2-GPU tasks equally popular; the 2-GPU shape counts twice (weight x GPUs):
    # V(1000) = (1 * V(300) + 2 * V(0)) / 3 = 300 / 3 = 100. Nothing fits below 700; V(700) = 0.
    v = hole_values(target_of({(0, 700, 1, NONE): 1, TWO: 1}))
    assert v[MILLI] == pytest.approx(100.0)
    assert v[699] == 699 and v[700] == 0.0


@settings(FAST, max_examples=40)  # each example is a 1000-step Python loop
@given(counts=st.dictionaries(shape_keys, st.integers(1, 20), min_size=1, max_size=6))
def test_hole_values_bounded_by_the_hole(counts) -> None:  # type: ignore[no-untyped-def]
    v = hole_values(TargetWorkload.from_counts(counts))
    h = np.arange(MILLI + 1)
    assert v[0] == 0.0
    assert np.all(v >= 0) and np.all(v <= h + 1e-9)


# ------------------------------------------------------------------ the kernel vs NumPy


def paper_points(growth: float) -> int:
    """The paper scheduler's integer score of a fragmentation growth."""
    return int((1.0 / (1.0 + math.exp(-(-growth / 1000.0)))) * 100.0)


@st.composite
def kernel_cases(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 4))
    nodes = [
        node(
            f"n{i}",
            draw(st.sampled_from([0, 1, 2, 4, 8])),
            draw(st.sampled_from(MODELS)),
            cpu=draw(st.sampled_from([8_000, 32_000])),
            mem=draw(st.sampled_from([16_000, 64_000])),
        )
        for i in range(n)
    ]
    view = ClusterView(cluster(*nodes))
    # A random partly used state.
    for _ in range(draw(st.integers(0, 12))):
        j = draw(st.integers(0, n - 1))
        t = draw(
            st.one_of(
                st.builds(
                    frac,
                    st.sampled_from([100, 250, 300, 500, 750]),
                    cpu=st.sampled_from([0, 1_000, 4_000]),
                    mem=st.sampled_from([0, 4_000]),
                ),
                st.builds(task, st.integers(1, 3), cpu=st.sampled_from([0, 2_000, 8_000])),
            )
        )
        fit = view.gpus_fitting(j, t).tolist()
        if len(fit) < t.gpus or view.free_cpu[j] < t.cpu_milli or view.free_mem[j] < t.memory_mib:
            continue
        start = draw(st.integers(0, len(fit) - t.gpus))
        take(view, j, fit[start : start + t.gpus], t)
    # A random target workload.
    counts = draw(
        st.dictionaries(
            st.tuples(
                st.sampled_from([0, 2_000, 8_000, 40_000]),
                st.sampled_from([0, 200, 500, 800, 1000]),
                st.sampled_from([1, 1, 2, 4]),
                st.sampled_from([NONE, NONE, frozenset({"V100"}), frozenset({"A100", "T4"})]),
            ).map(lambda k: (k[0], k[1], 0, k[3]) if k[1] == 0 else k),
            st.integers(1, 10),
            min_size=1,
            max_size=4,
        )
    )
    memory = {k: c * draw(st.sampled_from([0, 8_000, 40_000])) for k, c in counts.items()}
    target = TargetWorkload.from_counts(
        counts,
        draw(st.sampled_from([0.95, 1.0])),
        memory=memory,
        fit_memory=draw(st.booleans()),
    )
    the_task = draw(
        st.one_of(
            st.builds(
                frac,
                st.sampled_from([100, 200, 300, 500, 800, 999]),
                cpu=st.sampled_from([0, 1_000, 6_000]),
                mem=st.sampled_from([0, 8_000]),
            ),
            st.builds(task, st.sampled_from([1, 2, 4]), cpu=st.sampled_from([0, 4_000])),
            st.builds(task, st.just(0), cpu=st.sampled_from([1_000, 8_000])),
        )
    )
    order = draw(st.permutations(range(n)))
    chosen = order[: draw(st.integers(1, n))]
    hole_weight = draw(st.sampled_from([0.0, 0.0, 1.0]))
    return view, target, the_task, np.array(chosen, dtype=np.int64), hole_weight


def run_kernel(view, target, t, nodes, hole_weight, quantised):  # type: ignore[no-untyped-def]
    delta = np.empty(len(nodes))
    gpu = np.empty(len(nodes), dtype=np.int64)
    frag_deltas(
        nodes,
        view.gpu_free_milli,
        view.gpu_free_mem,
        view.free_cpu,
        view.free_mem,
        view.node_model + 1,
        t.cpu_milli,
        t.memory_mib,
        t.gpu_milli if t.gpus else 0,
        t.gpu_memory_mib,
        t.gpus,
        target.cpu_milli,
        target.fit_memory_mib,
        target.gpu_milli,
        target.gpus,
        target.access(tuple(m.name for m in view.models)),
        target.weight,
        hole_values(target),
        hole_weight,
        quantised,
        delta,
        gpu,
    )
    return delta, gpu


def reference_growths(view, target, t, n, hole_weight):  # type: ignore[no-untyped-def]
    """{GPU (or -1): growth} for every way the kernel may place ``t`` on node ``n``."""
    access = target.access(tuple(m.name for m in view.models))
    col = (view.node_model + 1)[n : n + 1]
    free = view.gpu_free_milli[n : n + 1]
    cpu = view.free_cpu[n : n + 1]
    mem = view.free_mem[n : n + 1]
    before = fragmentation(free, cpu, mem, col, target, access)[0]
    holes = hole_values(target)

    def after(gpus: list[int], milli: int) -> float:
        f = free.copy()
        f[0, gpus] -= milli
        return float(
            fragmentation(f, cpu - t.cpu_milli, mem - t.memory_mib, col, target, access)[0]
        )

    if t.fractional:
        out = {}
        for g, x in enumerate(free[0].tolist()):
            if x >= t.gpu_milli:
                d = after([g], t.gpu_milli) - before
                out[g] = d + hole_weight * (holes[x - t.gpu_milli] - holes[x])
        return out
    if t.gpus == 0:
        return {-1: after([], 0) - before}
    whole = (free[0] == MILLI).nonzero()[0].tolist()
    if len(whole) < t.gpus:
        return {}
    return {whole[0]: after(whole[: t.gpus], MILLI) - before}


@FAST
@given(kernel_cases())
def test_kernel_matches_numpy(case) -> None:  # type: ignore[no-untyped-def]
    view, target, t, nodes, hole_weight = case
    exact, exact_gpu = run_kernel(view, target, t, nodes, hole_weight, False)
    paper, paper_gpu = run_kernel(view, target, t, nodes, hole_weight, True)
    for i, n in enumerate(nodes.tolist()):
        ref = reference_growths(view, target, t, n, hole_weight)
        if not ref:  # no way to place it on this node's GPUs (GPU: see the test below)
            assert exact[i] == np.inf and paper[i] == np.inf
            continue
        best = min(ref.values())
        want_gpu = next(g for g, d in ref.items() if d <= best + 1e-9)  # lowest index first
        assert exact[i] == pytest.approx(best, abs=1e-6)
        assert exact_gpu[i] == want_gpu
        points = {g: paper_points(d) for g, d in ref.items()}
        top = max(points.values())
        assert paper[i] == -top
        assert paper_gpu[i] == next(g for g, p in points.items() if p == top)


def test_kernel_by_hand() -> None:
    # One 4-GPU node with free shares 600, 200, 1000, 1000; target: the 500-shape (w 3/4) and
    # the whole-GPU shape (w 1/4). Before: 3/4 * 200 + 1/4 * (600 + 200) = 350.
    view = ClusterView(cluster(node("n0", 4)))
    take(view, 0, [0], frac(400))
    take(view, 0, [1], frac(800))
    target = target_of({HALF: 3, WHOLE: 1})
    nodes = np.array([0], dtype=np.int64)
    # frac(100) on GPU 0 (600 -> 500): 3/4 * 200 + 1/4 * 700 = 325, growth -25 (50 points);
    # on GPU 1 (200 -> 100): 3/4 * 100 + 1/4 * 700 = 250, growth -100 (52 points, the best);
    # on GPU 2 (1000 -> 900): 3/4 * 200 + 1/4 * 1700 = 575, growth +225 (44 points);
    # GPU 3 has the same free share as GPU 2 and is not tried.
    assert [paper_points(d) for d in (-25.0, -100.0, 225.0)] == [50, 52, 44]
    delta, gpu = run_kernel(view, target, frac(100), nodes, 0.0, False)
    assert (delta[0], gpu[0]) == (pytest.approx(-100.0), 1)
    delta, gpu = run_kernel(view, target, frac(100), nodes, 0.0, True)
    assert (delta[0], gpu[0]) == (-52.0, 1)
    # A whole GPU takes GPU 2, the lowest fully free one: 3/4 * 200 + 1/4 * 800, growth 0.
    delta, gpu = run_kernel(view, target, task(1), nodes, 0.0, False)
    assert (delta[0], gpu[0]) == (0.0, 2)
    # Three whole GPUs do not fit.
    delta, gpu = run_kernel(view, target, task(3), nodes, 0.0, True)
    assert delta[0] == np.inf


@pytest.mark.parametrize("quantised", [False, True], ids=["exact", "quantised"])
def test_kernel_node_without_room_for_whole_gpus_gets_no_gpu(quantised: bool) -> None:
    # The kernel's contract: "A node that cannot take the task gets +inf and GPU -1".
    # Node 0 has two fully free GPUs (0 and 1) and cannot take three; node 1 has none.
    view = ClusterView(cluster(node("n0", 4), node("n1", 2)))
    take(view, 0, [2], frac(500))
    take(view, 0, [3], task(1))
    take(view, 1, [0, 1], task(2))
    target = target_of({HALF: 1, WHOLE: 1})
    delta, gpu = run_kernel(view, target, task(3), np.array([0, 1]), 0.0, quantised)
    assert delta.tolist() == [np.inf, np.inf]
    assert gpu.tolist() == [-1, -1]
