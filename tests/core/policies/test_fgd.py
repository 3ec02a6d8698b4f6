"""The FGD family of placements on small hand-built views.

The FGD paper's baselines (``fgd-dotprod``, ``fgd-bestfit``, ``fgd-packing``,
``fgd-clustering``): their integer scores and the node they pick, ties to the lowest node index.
``fgd``: the least growth of fragmentation on the paper's integer scale, its per-(shape, node)
cache and its learned target. ``frag-balance``: the stranded-GPU term. The view's
``task_listeners`` that ``fgd-clustering`` follows.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import (
    MODELS,
    T4,
    V100,
    cluster,
    cpu_only,
    frac,
    gpus_cluster,
    job,
    node,
    placement,
    rng,
    take,
    task,
)
from suanli.core.frag import TargetWorkload
from suanli.core.gang import place_job
from suanli.core.model import MILLI, TaskRequest
from suanli.core.policies.fgd import RELEARN_CAP, Fgd, FragmentationGrowth
from suanli.core.policies.frag_balance import FragBalance, model_pressure, stranded
from suanli.core.view import ClusterView, OvercommitError, TaskPlacement

FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

NONE: frozenset[str] = frozenset()
BIG_CPU = 128_000  # the paper's largest node: 128 CPUs, 8 GPUs


def big(name: str, gpus: int = 8, **kw: object):  # type: ignore[no-untyped-def]
    return node(name, gpus, cpu=BIG_CPU, **kw)  # type: ignore[arg-type]


def points(policy, view: ClusterView, t: TaskRequest) -> list[float]:  # type: ignore[no-untyped-def]
    """The integer points of every node that can take ``t`` (higher wins)."""
    nodes = view.feasible(t).nonzero()[0]
    # FGD adds the capacity left, far below one point, to break ties: round it away.
    return (-np.round(policy.score(view, t, 1, nodes, rng()))).tolist()


def chosen(policy, view: ClusterView, t: TaskRequest) -> tuple[int, tuple[int, ...]]:  # type: ignore[no-untyped-def]
    p, reason, _ = place_job(view, job("j", t=t), policy, rng())
    assert reason is None and p is not None
    (tp,) = p.tasks
    return tp.node, tp.gpus


def build(spec, setup):  # type: ignore[no-untyped-def]
    view = ClusterView(spec)
    for n, gpus, t in setup:
        take(view, n, gpus, t)
    return view


# ------------------------------------------------------------------ paper baselines

FOUR_BIG = cluster(big("n0"), big("n1"), big("n2"), big("n3"))
# n0 idle; n1 4 GPUs taken; n2 96 of 128 CPUs taken; n3 104 CPUs taken.
DOT_SETUP = [
    (1, [0, 1, 2, 3], task(4)),
    (2, [], cpu_only(96_000)),
    (3, [], cpu_only(104_000)),
]
# n0 idle; n1 6 GPUs and 64 CPUs taken; n2 4 GPUs taken.
FIT_SETUP = [(1, list(range(6)), task(6, cpu=64_000)), (2, [0, 1, 2, 3], task(4))]
# n0 idle; n1 one whole GPU taken; n2 GPU 0 500 free; n3 GPU 0 700 free and GPU 1 450 free.
PACK_SETUP = [
    (1, [0], task(1)),
    (2, [0], frac(500)),
    (3, [0], frac(300)),
    (3, [1], frac(550)),
]

# (id, policy, spec, setup, task, points of the feasible nodes, chosen node, chosen GPUs)
# fmt: off
BASELINES = [
    # DotProd: 100 * (1 - dot / 2), dot = 16/128 * free CPUs/128 + 1/8 * free GPUs/8.
    # n0: .125 + .125 -> 87.5; n1: .125 + .0625 -> 90.625; n2: .03125 + .125 -> 92.1875;
    # n3: .0234 + .125 -> 92.58: truncated to 92 like n2, so the lower index wins.
    ("dotprod", "fgd-dotprod", FOUR_BIG, DOT_SETUP, task(1, cpu=16_000), [87, 90, 92, 92], 2, (0,)),
    # No GPU asked: CPU alone, .125, .125, .03125, .0234 -> 93.75, 93.75, 98.4, 98.8.
    ("dotprod-cpu-only", "fgd-dotprod", FOUR_BIG, DOT_SETUP, cpu_only(16_000), [93, 93, 98, 98], 2, ()),
    # BestFit: raw = trunc(100 * (1 - left)), left = .5 * CPU left/128 + .5 * GPUs left/8:
    # n0 .4375 + .4375 -> 12; n1 .1875 + .0625 -> 75; n2 .4375 + .1875 -> 37 (37.5);
    # min-max normalised: (raw - 12) * 100 // 63 -> 0, 100, 39.
    ("bestfit", "fgd-bestfit", cluster(big("n0"), big("n1"), big("n2")), FIT_SETUP,
     task(1, cpu=16_000), [0, 100, 39], 1, (6,)),
    ("bestfit-all-equal", "fgd-bestfit", cluster(big("n0"), big("n1")), [], task(1), [0, 0], 0, (0,)),
    # GpuPacking, frac(300): idle node max(33 - 8, 8) = 25; used node whose fitting GPUs are
    # all whole 49; shared GPUs 100 - (tightest * 100 // 1000) // 10: 500 -> 95, 450 -> 96.
    ("packing-shared-gpu", "fgd-packing", gpus_cluster(8, 8, 8, 8), PACK_SETUP, frac(300),
     [25, 49, 95, 96], 3, (1,)),
    # frac(480) no longer fits the 450: n3's tightest is 700 -> 93.
    ("packing-tightest-that-fits", "fgd-packing", gpus_cluster(8, 8, 8, 8), PACK_SETUP, frac(480),
     [25, 49, 95, 93], 2, (0,)),
    # Whole GPUs on a used node: max(50 - GPUs, 33); every used node ties, the lowest wins.
    ("packing-used-node", "fgd-packing", gpus_cluster(8, 8, 8, 8), PACK_SETUP, task(1),
     [25, 49, 49, 49], 1, (1,)),
    ("packing-used-node-2-gpus", "fgd-packing", gpus_cluster(8, 8, 8, 8), PACK_SETUP, task(2),
     [25, 48, 48, 48], 1, (1, 2)),
    # An idle node: max(33 - free GPUs, free GPUs): a small idle node first.
    ("packing-small-idle-node", "fgd-packing", gpus_cluster(8, 2), [], task(1), [25, 31], 1, (0,)),
    ("packing-cpu-only", "fgd-packing", gpus_cluster(8, 8), [(1, [0], frac(500))], cpu_only(),
     [0, 0], 0, ()),
    # 450 and 400 free are in the same tenth: 96 both; the lower index wins.
    ("packing-same-tenth", "fgd-packing", gpus_cluster(2, 2), [(0, [0], frac(550)), (1, [0], frac(600))],
     frac(300), [96, 96], 0, (0,)),
]
# fmt: on


@pytest.mark.parametrize(
    "policy, spec, setup, t, want_points, want_node, want_gpus",
    [c[1:] for c in BASELINES],
    ids=[c[0] for c in BASELINES],
)
def test_paper_baseline(policy, spec, setup, t, want_points, want_node, want_gpus) -> None:  # type: ignore[no-untyped-def]
    view = build(spec, setup)
    pol = placement(policy)
    assert points(pol, view, t) == want_points
    assert chosen(pol, view, t) == (want_node, want_gpus)


def test_bestfit_normalises_past_the_largest_spec() -> None:
    # Nodes larger than the paper's largest spec leave more than 100% free: raw scores below 0.
    # task(1) with no CPU; left = .5 * CPU left/128 + .5 * GPUs left/8 after placing:
    # n0: CPU 6.4 of 128 free -> left .025, raw 97; n1: 3.84 free -> .015, raw 98;
    # n2 (16 GPUs, 256 CPUs, idle): 1 + .9375 -> raw -93; n3: nothing left -> raw 100.
    # (raw + 93) * 100 // 193: 98, 98 (97 and 98 merge), 0, 100.
    spec = cluster(big("n0"), big("n1"), node("n2", 16, cpu=2 * BIG_CPU), big("n3"))
    view = build(
        spec,
        [
            (0, list(range(7)), task(7, cpu=BIG_CPU - 6_400)),
            (1, list(range(7)), task(7, cpu=BIG_CPU - 3_840)),
            (3, list(range(7)), task(7, cpu=BIG_CPU)),
        ],
    )
    pol = placement("fgd-bestfit")
    assert points(pol, view, task(1)) == [98, 98, 0, 100]
    assert chosen(pol, view, task(1)) == (3, (7,))


def test_clustering_affinity_tiers() -> None:
    view = ClusterView(gpus_cluster(8, 8, 8))
    pol = placement("fgd-clustering")
    # Nothing runs anywhere: 25 (idle tier) + 25 * used / 8000 = 25 each; the lowest index wins.
    assert points(pol, view, task(1)) == [25, 25, 25]
    take(view, 1, [0], task(1))
    take(view, 2, [0], frac(500))
    # task(1): n1 runs only 1-GPU tasks: 75 + 25 * 1000 // 8000 = 78; n2 runs another kind:
    # 0 + 25 * 500 // 8000 = 1.
    assert points(pol, view, task(1)) == [25, 78, 1]
    assert points(pol, view, frac(300)) == [25, 3, 76]
    assert points(pol, view, task(2)) == [25, 3, 1]
    assert points(pol, view, cpu_only()) == [0, 0, 0]
    # n1 now runs two kinds: 50 + 25 * 1200 // 8000 = 53.
    shared = take(view, 1, [1], frac(200))
    assert points(pol, view, task(1)) == [25, 53, 1]
    assert chosen(pol, view, task(1)) == (1, (2,))
    # The allocation just made (a 1-GPU task) is counted; releasing the share leaves n1 with
    # one kind again.
    view.release(shared)
    assert points(pol, view, task(1)) == [25, 75 + 25 * 2000 // 8000, 1]


def test_clustering_counts_earlier_allocations_as_one_unknown_kind() -> None:
    view = ClusterView(gpus_cluster(8, 8))
    before = take(view, 1, [0], task(1))  # made before the placement first sees the view
    pol = placement("fgd-clustering")
    # n1's task has an unknown kind: another kind than anything asked, 0 + 25 * 1000 // 8000.
    assert points(pol, view, task(1)) == [25, 3]
    after = take(view, 1, [1], task(1))
    # A known 1-GPU task beside the unknown kind: 50 + 25 * 2000 // 8000 = 56.
    assert points(pol, view, task(1)) == [25, 56]
    view.release(after)
    view.release(before)
    # n1 is empty again: idle tier.
    assert points(pol, view, task(1)) == [25, 25]


def test_clustering_release_of_an_earlier_allocation_keeps_later_counts() -> None:
    view = ClusterView(gpus_cluster(8, 8))
    before = take(view, 1, [0], task(1))  # unknown kind to the placement
    pol = placement("fgd-clustering")
    points(pol, view, task(1))  # binds
    take(view, 1, [1], task(1))  # a 1-GPU task the placement saw
    view.release(before)
    # n1 still runs a 1-GPU task that the placement counted: it must stay in a same-kind tier
    # (75 + 3 if the unknown kind is forgotten, 50 + 3 if it is kept), not fall to 0 + 3.
    assert points(pol, view, task(1))[1] in (53, 78)


def test_clustering_follows_one_view() -> None:
    pol = placement("fgd-clustering")
    points(pol, ClusterView(gpus_cluster(8)), task(1))
    with pytest.raises(ValueError, match="follows one cluster view"):
        points(pol, ClusterView(gpus_cluster(8)), task(1))


# ------------------------------------------------------------------ fgd

HALF = (0, 500, 1, NONE)
WHOLE = (0, 1000, 1, NONE)


def fgd(counts: dict) -> Fgd:  # type: ignore[type-arg]
    return Fgd(TargetWorkload.from_counts(counts, coverage=1.0))


def test_fgd_least_growth_node_and_gpu() -> None:
    # n0: GPU 0 has 600 free. Target: 500-shape (3/4), whole GPU (1/4); F(n0) = 1/4 * 600.
    # frac(100) on n0 GPU 0 (600 -> 500): growth -25 (50 points); on a whole GPU of either node:
    # +225 (44 points).
    view = build(gpus_cluster(4, 4), [(0, [0], frac(400))])
    pol = fgd({HALF: 3, WHOLE: 1})
    assert points(pol, view, frac(100)) == [50, 44]
    assert chosen(pol, view, frac(100)) == (0, (0,))


# (id, setup, task, points, node): target {500-shape: 1}, two 4-GPU nodes.
# fmt: off
FGD_TIES = [
    # Idle nodes tie on points and on the capacity left: the lower index wins.
    ("idle-nodes-tie", [], frac(30), [50, 50], 0),
    # n1 GPU 0 has 30 free: filling it shrinks the fragment by 30 (sigmoid(.03) -> 50 points),
    # the same points as n0's growth 0: the node left with less capacity (n1) wins.
    ("points-tie-tightest", [(1, [0], frac(970))], frac(30), [50, 50], 1),
    # ... but 100 less fragment is 52 points.
    ("larger-reduction-wins", [(1, [0], frac(900))], frac(100), [50, 52], 1),
]
# fmt: on


@pytest.mark.parametrize(
    "setup, t, want_points, want_node", [c[1:] for c in FGD_TIES], ids=[c[0] for c in FGD_TIES]
)
def test_fgd_ties_go_to_the_tightest_node_then_the_lowest_index(setup, t, want_points, want_node) -> None:  # type: ignore[no-untyped-def]
    view = build(gpus_cluster(4, 4), setup)
    pol = fgd({HALF: 1})
    assert points(pol, view, t) == want_points
    assert chosen(pol, view, t)[0] == want_node


# ------------------------------------------------------------------ fgd: the cache

menu = [frac(100), frac(300), frac(500), frac(700, cpu=4_000), task(1), task(2), task(0, cpu=8_000)]


@st.composite
def cache_cases(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 4))
    spec = cluster(
        *(
            node(
                f"n{i}",
                draw(st.sampled_from([1, 2, 4, 8])),
                draw(st.sampled_from(MODELS)),
                cpu=draw(st.sampled_from([8_000, 32_000])),
            )
            for i in range(n)
        )
    )
    counts = draw(
        st.dictionaries(
            st.sampled_from(
                [HALF, WHOLE, (4_000, 300, 1, NONE), (0, 1000, 2, NONE), (0, 200, 1, NONE)]
            ),
            st.integers(1, 5),
            min_size=1,
        )
    )
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["place", "place", "release", "what-if"]),
                st.integers(0, len(menu) - 1),
                st.integers(0, 100),
            ),
            max_size=25,
        )
    )
    kind = draw(st.sampled_from([Fgd, FragBalance]))
    return spec, TargetWorkload.from_counts(counts), ops, kind


def check_fresh(pol: FragmentationGrowth, view: ClusterView) -> None:
    fresh = type(pol)(pol.target)
    for t in menu:
        got, want = pol.growth(view, t), fresh.growth(view, t)
        assert np.array_equal(got.delta, want.delta), t
        assert np.array_equal(got.gpu, want.gpu), t


@FAST
@given(cache_cases())
def test_cached_growth_equals_fresh_growth(case) -> None:  # type: ignore[no-untyped-def]
    spec, target, ops, kind = case
    view = ClusterView(spec)
    pol = kind(target)
    r = rng(1)
    running: list[TaskPlacement] = []
    check_fresh(pol, view)
    for op, i, k in ops:
        if op == "place":
            p, _, _ = place_job(view, job("j", t=menu[i]), pol, r)
            if p is not None:
                running.extend(p.tasks)
        elif op == "release" and running:
            view.release(running.pop(k % len(running)))
        elif op == "what-if":
            mark = view.checkpoint()
            place_job(view, job("w", t=menu[i], tasks=2), pol, r)
            pol.growth(view, menu[k % len(menu)])  # cache entries made inside the what-if
            view.rollback(mark)
        check_fresh(pol, view)


def test_set_target_drops_cached_growth() -> None:
    view = build(gpus_cluster(4), [(0, [0], frac(400))])
    pol = fgd({HALF: 1})
    first = pol.growth(view, frac(100)).delta.copy()
    other = TargetWorkload.from_counts({WHOLE: 1})
    pol.set_target(other)
    assert np.array_equal(
        pol.growth(view, frac(100)).delta, Fgd(other).growth(view, frac(100)).delta
    )
    assert not np.array_equal(pol.growth(view, frac(100)).delta, first)


def test_learned_target_rebuilds_when_the_count_doubles() -> None:
    pol = Fgd()
    shapes = [frac(500), task(1), task(1), frac(200), task(2), task(2), task(2), task(2)]
    rebuilt_at = []
    last = pol.target
    for i, t in enumerate(shapes, start=1):
        pol.observe(job(f"j{i}", t=t))
        if pol.target is not last:
            rebuilt_at.append(i)
            last = pol.target
            want = TargetWorkload.from_tasks(shapes[:i])
            assert pol.target is not None
            assert pol.target.gpu_milli.tolist() == want.gpu_milli.tolist()
            assert pol.target.gpus.tolist() == want.gpus.tolist()
            assert pol.target.weight.tolist() == pytest.approx(want.weight.tolist())
    assert rebuilt_at == [1, 2, 4, 8]


def test_learned_target_rebuild_interval_is_capped() -> None:
    pol = Fgd()
    j = job("j", t=task(1))
    rebuilt_at = []
    last = pol.target
    for i in range(1, 3 * RELEARN_CAP + 1):
        pol.observe(j)
        if pol.target is not last:
            rebuilt_at.append(i)
            last = pol.target
    doubling = [2**k for k in range(13)]  # 1 .. 4096
    assert rebuilt_at == [*doubling, 2 * RELEARN_CAP, 3 * RELEARN_CAP]


def test_learned_target_invalidates_cached_growth() -> None:
    view = build(gpus_cluster(4, 4), [(0, [0], frac(400))])
    pol = Fgd()
    pol.observe(job("a", t=task(1)))  # target: whole GPUs only
    whole_only = pol.growth(view, frac(100)).delta.copy()
    pol.observe(job("b", t=frac(500)))  # rebuilt: half whole GPUs, half 500-shares
    assert pol.target is not None and len(pol.target) == 2
    now = pol.growth(view, frac(100)).delta
    assert np.array_equal(now, Fgd(pol.target).growth(view, frac(100)).delta)
    assert not np.array_equal(now, whole_only)


def test_set_target_stops_learning() -> None:
    target = TargetWorkload.from_counts({HALF: 1})
    pol = Fgd()
    pol.set_target(target)
    for i in range(10):
        pol.observe(job(f"j{i}", t=task(1)))
    assert pol.target is target


def test_without_target_or_observations_the_task_is_the_target() -> None:
    view = build(gpus_cluster(4, 4), [(1, [0], frac(500))])
    pol = Fgd()
    got = pol.growth(view, frac(500)).delta.copy()
    assert pol.target is not None
    assert np.array_equal(
        got, Fgd(TargetWorkload.from_tasks([frac(500)])).growth(view, frac(500)).delta
    )


def test_growth_after_use_on_another_view() -> None:
    # A placement may move to another view (its cache starts again); the view it left must
    # keep working: its changes are no business of the placement any more.
    first = ClusterView(gpus_cluster(8, 8, 8, 8))
    second = ClusterView(gpus_cluster(8))
    pol = fgd({HALF: 1, WHOLE: 1})
    pol.growth(first, task(1))
    pol.growth(second, task(1))
    take(first, 3, [0], task(1))
    assert int(first.node_full_free[3]) == 7


# ------------------------------------------------------------------ frag-balance

# (id, free GPU, free CPU, free memory, CPU per milli-GPU, memory per milli-GPU, stranded)
# fmt: off
STRANDED = [
    ("cpu-binds", [8000.0], [16_000.0], [1e9], 4.0, 0.0, [4000.0]),
    ("memory-binds", [8000.0], [1e9], [20_000.0], 0.0, 10.0, [6000.0]),
    ("tighter-of-both", [8000.0], [16_000.0], [20_000.0], 4.0, 10.0, [6000.0]),
    ("enough-of-both", [2000.0], [16_000.0], [20_000.0], 4.0, 10.0, [0.0]),
    ("no-ratios", [8000.0], [0.0], [0.0], 0.0, 0.0, [0.0]),
    ("overdrawn-cpu-strands-all", [3000.0], [-4_000.0], [1e9], 4.0, 0.0, [3000.0]),
    ("per-node", [8000.0, 1000.0, 0.0], [8_000.0, 8_000.0, 0.0], [1e9] * 3, 2.0, 0.0,
     [4000.0, 0.0, 0.0]),
]
# fmt: on


@pytest.mark.parametrize(
    "gpu, cpu, mem, cpu_per, mem_per, want",
    [c[1:] for c in STRANDED],
    ids=[c[0] for c in STRANDED],
)
def test_stranded(gpu, cpu, mem, cpu_per, mem_per, want) -> None:  # type: ignore[no-untyped-def]
    got = stranded(np.array(gpu), np.array(cpu), np.array(mem), cpu_per, mem_per)
    assert got.tolist() == pytest.approx(want)


def strand_case() -> tuple[ClusterView, TargetWorkload, TaskRequest]:
    """n0: GPU 0 has 500 free, 29 of 64 CPUs free; n1 idle. Target: whole GPUs with 4 CPUs each
    (4 CPU milli per milli-GPU). The task: a 500-share with 16 CPUs."""
    view = build(gpus_cluster(8, 8), [(0, [0], frac(500, cpu=35_000))])
    return view, TargetWorkload.from_tasks([task(1, cpu=4_000)]), frac(500, cpu=16_000)


def test_frag_balance_avoids_stranding_gpus() -> None:
    view, target, t = strand_case()
    # FGD: on n0, filling the half-used GPU removes its 500 fragment (growth -500: 62 points);
    # on n1 the task makes one (+500: 37 points). FGD takes n0.
    assert points(Fgd(target), view, t) == [62, 37]
    assert chosen(Fgd(target), view, t) == (0, (0,))
    # But n0 would be left with 7000 milli-GPU and 13 CPUs free, CPU for 3250 milli-GPU at the
    # target's 4 CPU milli per milli-GPU: its stranded GPU grows from 250 to 3750. n1 keeps CPU
    # for all of its GPUs.
    view, _, _ = strand_case()
    cpu_per, mem_per = target.gpu_ratios()
    assert (cpu_per, mem_per) == (4.0, 0.0)
    gpu = view.node_free_milli.astype(float)
    cpu = view.free_cpu.astype(float)
    mem = view.free_mem.astype(float)
    before = stranded(gpu, cpu, mem, cpu_per, mem_per)
    after = stranded(gpu - 500, cpu - 16_000, mem, cpu_per, mem_per)
    assert before.tolist() == [250.0, 0.0]
    assert (after - before).tolist() == [3500.0, 0.0]
    # frag-balance: n0: -500 (fragment) - 500 (the hole's expected waste) + 3500 (stranded):
    # int(100 / (1 + e^(2500/500))) = 0 points; n1: +500 + 500: int(100 / (1 + e^2)) = 11.
    bal = FragBalance(target)
    assert points_balance(bal, view, t) == [0, 11]
    assert chosen(bal, view, t) == (1, (0,))


def points_balance(pol: FragBalance, view: ClusterView, t: TaskRequest) -> list[int]:
    """frag-balance's points per node (its score is -points * 1e9 + capacity left)."""
    nodes = view.feasible(t).nonzero()[0]
    s = pol.score(view, t, 1, nodes, rng())
    return [int(round(-x / 1e9)) for x in s]


def test_frag_balance_tightest_node_among_equal_points() -> None:
    # Whole GPUs on idle or partly used nodes: growth 0 everywhere (50 points), no CPU ratio.
    view = build(gpus_cluster(8, 8, 8), [(1, [0, 1, 2, 3], task(4)), (2, [0, 1], task(2))])
    target = TargetWorkload.from_tasks([task(1)])
    assert points(Fgd(target), view, task(1)) == [50, 50, 50]
    assert chosen(Fgd(target), view, task(1)) == (1, (4,))  # FGD breaks ties the same way
    view = build(gpus_cluster(8, 8, 8), [(1, [0, 1, 2, 3], task(4)), (2, [0, 1], task(2))])
    bal = FragBalance(target)
    assert points_balance(bal, view, task(1)) == [50, 50, 50]
    assert chosen(bal, view, task(1)) == (1, (4,))


def test_model_pressure_is_the_share_of_a_models_gpus_constrained_shapes_want() -> None:
    # 8 V100 + 8 T4 GPUs. Half the demand (by GPU) may use only T4: if the workload filled
    # the cluster, it would want 0.5 × 16 / 8 = all of the T4s (capped at 1); a shape that
    # accepts V100 or T4 creates no pressure; 1/4 of the demand on {V100, T4} none either.
    free = TaskRequest(gpus=1, gpu_milli=MILLI)
    t4 = TaskRequest(gpus=1, gpu_milli=MILLI, gpu_models=frozenset({"T4"}))
    both = TaskRequest(gpus=1, gpu_milli=MILLI, gpu_models=frozenset({"T4", "V100"}))
    names, gpus = ("V100", "T4"), np.array([8, 8])
    target = TargetWorkload.from_tasks([free, t4])
    assert model_pressure(target, names, gpus).tolist() == [0.0, 0.0, 1.0]
    target = TargetWorkload.from_tasks([free, free, free, t4, both, both, both, both])
    # T4-only: 1/8 of the demand, over 8 of 16 GPUs: 0.25.
    assert model_pressure(target, names, gpus) == pytest.approx([0.0, 0.0, 0.25])
    assert not model_pressure(TargetWorkload.from_tasks([free, both]), names, gpus).any()


def test_frag_balance_charges_what_a_task_takes_from_contended_models() -> None:
    # Two idle nodes, 8 V100 and 8 T4; half the expected demand may use only T4 (pressure 1
    # on T4). FGD's own measure already leans to V100 (there the T4 shape's fragment shrinks
    # by 0.5 × 1000: 62 points against 50). frag-balance adds the 1000 milli-GPU a free task
    # would take from the contended T4s: int(100 / (1 + e^(1000/500))) = 11 points, against
    # 73 on the V100 node (-500 / 500). A T4 task fits only the T4 node and still goes there.
    view = build(cluster(node("v", 8, V100), node("t", 8, T4)), [])
    free = TaskRequest(gpus=1, gpu_milli=MILLI)
    t4 = TaskRequest(gpus=1, gpu_milli=MILLI, gpu_models=frozenset({"T4"}))
    target = TargetWorkload.from_tasks([free, t4])
    assert points(Fgd(target), view, free) == [62, 50]
    bal = FragBalance(target)
    assert points_balance(bal, view, free) == [73, 11]
    assert chosen(bal, view, free)[0] == 0
    assert chosen(bal, view, t4)[0] == 1
    # Without constrained shapes the term is zero: both nodes score the same.
    assert points_balance(FragBalance(TargetWorkload.from_tasks([free])), view, free) == [50, 50]


# ------------------------------------------------------------------ view.task_listeners


def test_task_listeners_see_allocations_and_releases() -> None:
    view = ClusterView(gpus_cluster(4, 4))
    events: list[tuple[str, object, int]] = []
    view.listeners.append(lambda n: events.append(("node", n, 0)))
    view.task_listeners.append(lambda p, sign: events.append(("task", p, sign)))
    a = take(view, 0, [0], frac(300))
    assert events == [("node", 0, 0), ("task", a, 1)]
    events.clear()
    view.release(a)
    assert events == [("node", 0, 0), ("task", a, -1)]
    events.clear()
    mark = view.checkpoint()
    b = take(view, 1, [0, 1], task(2))
    c = take(view, 0, [], cpu_only())
    view.rollback(mark)
    assert [e for e in events if e[0] == "task"] == [
        ("task", b, 1),
        ("task", c, 1),
        ("task", c, -1),
        ("task", b, -1),
    ]


def test_task_listeners_not_called_for_a_refused_allocation() -> None:
    view = ClusterView(gpus_cluster(2))
    seen: list[int] = []
    view.task_listeners.append(lambda p, sign: seen.append(sign))
    take(view, 0, [0], task(1))
    with pytest.raises(OvercommitError):
        view.allocate(view.placement_for(0, [0], task(1)))
    assert seen == [1]
    assert int(view.allocated_milli) == MILLI
