"""Backfill: EASY (fast, held to the straightforward algorithm decision for decision) and
conservative (a reservation for every job up to a depth).

``ReferenceEasy`` (``tests/easy_reference.py``) keeps the first EASY implementation: a
reservation sorts the running jobs
by estimated end and releases them one by one on the view, re-reading ``fit_counts`` over
all nodes after each; a candidate is placed in a what-if and the ending jobs' tasks on its
nodes are released again to recount. The scheduler's EASY must decide exactly as it does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import cpu_only, frac, gpus_cluster, job, order, placement, rng, sched, take, task
from easy_reference import ReferenceEasy  # noqa: F401  (registers backfill/easy-reference)
from strategies import backfill_workloads
from suanli.core import backfill as bf
from suanli.core.backfill import Easy, Reservation, fits, task_params
from suanli.core.conservative import Conservative
from suanli.core.decisions import Admit, BehindReservation, Decision, NoCapacity, Skip
from suanli.core.model import ClusterSpec, GpuModel, Job, NodeSpec, SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import UnknownPolicyError, names
from suanli.core.scheduler import Scheduler
from suanli.core.view import ClusterView
from suanli.sim.engine import PolicySet, simulate
from suanli.workload.quotas import proportional_tenancy
from suanli.workload.synthetic import WorkloadConfig, generate

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ------------------------------------------------------------------ the reference EASY


def recorded(base: type[Scheduler]) -> type[Scheduler]:
    """``base`` that keeps every decision as plain data: (time, kind, job, reason, where),
    and the first reservation its backfill made for each job."""

    class Recorded(base):  # type: ignore[valid-type,misc]
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.log: list[tuple[object, ...]] = []
            self.first_reservation: dict[str, float] = {}
            Recorded.last = self
            bf = self.backfill
            if isinstance(bf, Easy):
                made = bf.reserve

                def reserve(job: Job) -> Reservation | None:
                    r = made(job)
                    if r is not None:
                        self.first_reservation.setdefault(r.job.id, r.until)
                    return r

                bf.reserve = reserve  # type: ignore[method-assign]

        def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
            out = super().cycle(rng, now)
            for d in out:
                where = getattr(d, "placement", None)
                self.log.append(
                    (now, type(d).__name__, d.job.id, getattr(d, "reason", None), where)
                )
            for jid, until in getattr(self.backfill, "reservations", ()):
                self.first_reservation.setdefault(jid, until)
            return out

    return Recorded


def decisions_of(
    spec: ClusterSpec,
    jobs: list[Job],
    policy: PolicySet,
    reference: bool = False,
    base: type[Scheduler] = Scheduler,
    **kw: Any,
) -> list[tuple[object, ...]]:
    """Every decision of a replay; ``reference``: with the reference EASY."""
    cls = recorded(base)
    if reference:
        policy = replace(policy, backfill="easy-reference")
    simulate(spec, jobs, policy, scheduler=cls, **kw)
    return cls.last.log  # type: ignore[attr-defined,no-any-return]


def h100_cluster(nodes: int) -> ClusterSpec:
    h100 = GpuModel("H100", 80 * 1024, 1.0)
    return ClusterSpec(
        f"{nodes}xH100",
        tuple(
            NodeSpec(f"n{i}", 8, h100, 96_000, 1024 * 1024, rack=f"rack-{i // 4}")
            for i in range(nodes)
        ),
    )


def saturated(nodes: int, jobs: int, seed: int, gangs: float = 0.0) -> tuple[ClusterSpec, list]:
    spec = h100_cluster(nodes)
    cfg = WorkloadConfig(
        jobs=jobs, seed=seed, target_load=1.4, runtime_cap=4 * 3600.0, gang_share=gangs
    )
    return spec, generate(cfg, spec)


# ------------------------------------------------------------------ fast EASY == reference

SEEDED = [
    pytest.param("fifo/easy+best-fit", 8, 600, 1, 0.0, id="fifo-easy-best-fit-seed1"),
    pytest.param("fifo/easy-oracle+best-fit", 8, 600, 2, 0.0, id="fifo-easy-oracle-best-fit-seed2"),
    pytest.param("priority/easy+first-fit", 6, 500, 3, 0.05, id="priority-easy-first-fit-gangs"),
    pytest.param("sjf/easy+random", 6, 500, 4, 0.05, id="sjf-easy-random-gangs"),
    pytest.param("fair-share/easy+fgd", 6, 400, 5, 0.0, id="fair-share-easy-fgd"),
    pytest.param("drf/easy-oracle+packing", 6, 400, 6, 0.05, id="drf-easy-oracle-packing"),
]


@pytest.mark.parametrize(("policy", "nodes", "n_jobs", "seed", "gangs"), SEEDED)
def test_fast_easy_decides_exactly_as_the_reference(
    policy: str, nodes: int, n_jobs: int, seed: int, gangs: float
) -> None:
    spec, jobs = saturated(nodes, n_jobs, seed, gangs)
    ps = PolicySet.parse(policy)
    fast = decisions_of(spec, jobs, ps)
    ref = decisions_of(spec, jobs, ps, reference=True)
    assert any(isinstance(d[3], BehindReservation) for d in ref), "backfill never held a job"
    assert len(fast) == len(ref)
    for i, (a, b) in enumerate(zip(fast, ref, strict=True)):
        assert a == b, f"decision {i} differs"


@st.composite
def mixed_workloads(draw: st.DrawFn) -> tuple[ClusterSpec, list[Job]]:
    """Small clusters (some CPU-only nodes) and jobs of every kind: whole GPUs, fractional
    shares with GPU memory, CPU only, gangs with a minimum; estimates over and under the
    runtime, or none."""
    gpus = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(any))
    spec = gpus_cluster(*gpus, cpu=16_000, mem=64_000)
    jobs = []
    for i in range(draw(st.integers(1, 18))):
        kind = draw(st.sampled_from(("whole", "frac", "cpu")))
        cpu = draw(st.sampled_from((0, 2000, 6000)))
        if kind == "whole":
            t = task(draw(st.integers(1, max(gpus))), cpu=cpu, mem=draw(st.sampled_from((0, 8000))))
        elif kind == "frac":
            t = frac(draw(st.sampled_from((250, 500, 700))), draw(st.sampled_from((0, 8192))))
        else:
            t = cpu_only(draw(st.integers(1000, 9000)), draw(st.sampled_from((0, 16_000))))
        tasks = draw(st.integers(1, 3))
        runtime = float(draw(st.integers(1, 900)))
        est = draw(st.sampled_from((None, 0.5, 1.0, 3.0)))
        jobs.append(
            job(
                f"j{i:02d}",
                float(draw(st.integers(0, 300))),
                runtime,
                t,
                tasks=tasks,
                gang_min=draw(st.integers(0, tasks)),
                estimate=None if est is None else runtime * est,
            )
        )
    empty = ClusterView(spec)
    return spec, [j for j in jobs if fits(empty, j)]  # each must fit the empty cluster


@FAST
@given(
    mixed_workloads(),
    st.sampled_from(("estimate", "oracle")),
    st.sampled_from(("first-fit", "best-fit", "random")),
)
def test_fast_easy_decides_exactly_as_the_reference_on_random_workloads(
    w: tuple[ClusterSpec, list[Job]], runtime: str, place: str
) -> None:
    spec, jobs = w
    ps = PolicySet("fifo", place, backfill="easy", runtime=runtime)
    assert decisions_of(spec, jobs, ps) == decisions_of(spec, jobs, ps, reference=True)


def test_fast_easy_decides_exactly_as_the_reference_with_preemption() -> None:
    spec, jobs = saturated(6, 400, 7)
    ps = PolicySet.parse("priority/easy+best-fit")
    cfg = PreemptionConfig(min_runtime=300.0)
    fast = decisions_of(spec, jobs, ps, preemption=cfg)
    ref = decisions_of(spec, jobs, ps, reference=True, preemption=cfg)
    assert any(d[1] == "Preempt" for d in ref)
    assert fast == ref


# ------------------------------------------------------------------ reservations hold


whole_gpu_workloads = backfill_workloads  # whole GPUs, gangs; from the EASY tests


def rigid(w: tuple[ClusterSpec, list[Job]]) -> tuple[ClusterSpec, list[Job]]:
    """Every job starts with all its tasks (so a true runtime is its exact duration)."""
    spec, jobs = w
    empty = ClusterView(spec)
    return spec, [j for j in (replace(j, gang_min=0) for j in jobs) if fits(empty, j)]


@FAST
@given(
    st.one_of(
        whole_gpu_workloads().map(lambda w: (w, "first-fit")),
        whole_gpu_workloads().map(lambda w: (w, "best-fit")),
        mixed_workloads().map(lambda w: (rigid(w), "best-fit")),
    ),
    st.sampled_from(("easy", "conservative")),
)
def test_with_true_runtimes_no_job_starts_after_its_first_reservation(
    wp: tuple[tuple[ClusterSpec, list[Job]], str], mode: str
) -> None:
    """EASY keeps the head's reservation, conservative every job's: backfill never delays
    a reserved job when the runtimes are known (and the placement takes GPUs inside a node
    as the plan does: whole GPUs lowest first, a share on the fullest GPU it fits)."""
    (spec, jobs), place = wp
    cls = recorded(Scheduler)
    ps = PolicySet("fifo", place, backfill=mode, runtime="oracle")
    res = simulate(spec, jobs, ps, scheduler=cls)
    assert res.finished == len(jobs)
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    made = cls.last.first_reservation  # type: ignore[attr-defined]
    for jid, until in made.items():
        assert start[jid] <= until + 1e-9, (jid, until, start[jid])


def _second_job_race(mode: str) -> tuple[dict[str, float], list[tuple[object, ...]]]:
    """Two 4-GPU nodes. A holds n0 until 10, B half of n1 until 20. J1 (n0, 50 s) is
    reserved at 10; J2 (a whole node, 10 s) could run on n1 from 20; J3 (2 GPUs, 100 s)
    fits n1 now, and ends long after 20."""
    jobs = [
        job("A", 0.0, 10.0, gpus=4),
        job("B", 0.0, 20.0, gpus=2),
        job("J1", 1.0, 50.0, gpus=4),
        job("J2", 2.0, 10.0, gpus=4),
        job("J3", 3.0, 100.0, gpus=2),
    ]
    cls = recorded(Scheduler)
    res = simulate(
        gpus_cluster(4, 4), jobs, PolicySet.parse(f"fifo/{mode}+first-fit"), scheduler=cls
    )
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    return start, cls.last.log  # type: ignore[attr-defined]


def test_conservative_protects_the_second_job_where_easy_does_not() -> None:
    easy, _ = _second_job_race("easy-oracle")
    assert (easy["J1"], easy["J3"], easy["J2"]) == (10.0, 3.0, 60.0)  # J3 delayed J2 by 40 s
    cons, log = _second_job_race("conservative-oracle")
    assert (cons["J1"], cons["J2"], cons["J3"]) == (10.0, 20.0, 30.0)
    held = [d for d in log if d[2] == "J3" and d[1] == "Skip"]
    assert held[0][3] == BehindReservation("J2", 20.0)


def test_depth_limit_is_honoured() -> None:
    """Same race through the scheduler: with depth 1 only J1 is reserved for, so J3 may
    take n1 from J2; with depth 2 it may not."""

    def run(depth: int) -> tuple[list[tuple[str, str]], list[tuple[str, float]]]:
        s = sched(
            ClusterView(gpus_cluster(4, 4)),
            order("fifo"),
            placement("first-fit"),
            backfill="conservative-oracle",
            depth=depth,
        )
        s.submit(job("A", 0.0, 10.0, gpus=4))
        s.submit(job("B", 0.0, 20.0, gpus=2))
        s.cycle(rng(), 0.0)
        for j in (job("J1", 1.0, 50.0, gpus=4), job("J2", 2.0, 10.0, gpus=4)):
            s.submit(j)
        s.submit(job("J3", 3.0, 100.0, gpus=2))
        out = s.cycle(rng(), 3.0)
        assert isinstance(s.backfill, Conservative)
        return [(type(d).__name__, d.job.id) for d in out], s.backfill.reservations

    shallow, shallow_res = run(1)
    assert shallow_res == [("J1", 10.0)]
    assert ("Admit", "J3") in shallow
    deep, deep_res = run(2)
    assert deep_res == [("J1", 10.0), ("J2", 20.0)]
    assert ("Admit", "J3") not in deep and ("Skip", "J3") in deep


@FAST
@given(whole_gpu_workloads(), st.integers(1, 4))
def test_reservations_never_exceed_the_depth(w: tuple[ClusterSpec, list[Job]], depth: int) -> None:
    spec, jobs = w
    seen: list[int] = []

    class Watch(Scheduler):
        def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
            out = super().cycle(rng, now)
            seen.append(len(self.backfill.reservations))  # type: ignore[union-attr]
            return out

    res = simulate(
        spec,
        jobs,
        PolicySet("fifo", "best-fit", backfill="conservative"),
        scheduler=Watch,
        backfill_depth=depth,
    )
    assert res.finished == len(jobs)
    assert max(seen) <= depth


@FAST
@given(mixed_workloads(), st.sampled_from(("first-fit", "best-fit", "random")))
def test_reusing_the_plan_decides_as_planning_every_cycle(
    w: tuple[ClusterSpec, list[Job]], place: str
) -> None:
    """With true runtimes nothing the plan rests on changes unless an event says so: keeping
    it between changes decides exactly as making it afresh at every cycle."""
    spec, jobs = w

    class Afresh(Scheduler):
        def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
            self.backfill._planned_at = -1  # type: ignore[union-attr]
            return super().cycle(rng, now)

    ps = PolicySet("fifo", place, backfill="conservative", runtime="oracle")
    kept = decisions_of(spec, jobs, ps)
    again = decisions_of(spec, jobs, ps, base=Afresh)
    # Afresh retells unchanged reasons only when they change, like the kept plan.
    assert [d for d in kept if d[1] != "Skip"] == [d for d in again if d[1] != "Skip"]


@FAST
@given(mixed_workloads(), st.sampled_from(("conservative", "conservative-oracle", "easy")))
def test_every_job_finishes_and_nothing_is_overcommitted(
    w: tuple[ClusterSpec, list[Job]], mode: str
) -> None:
    """The view refuses any over-allocation, so a run to the end is the check; and a
    skipped job always says why."""
    spec, jobs = w
    ps = PolicySet.parse(f"fifo/{mode}+best-fit")
    log = decisions_of(spec, jobs, ps)
    started = {d[2] for d in log if d[1] == "Admit"}
    assert started == {j.id for j in jobs}
    assert all(d[3] is not None for d in log if d[1] == "Skip")


def test_conservative_runs_with_quotas_and_preemption() -> None:
    spec, jobs = saturated(12, 400, 8)
    ten = proportional_tenancy(jobs, spec, "shared")
    res = simulate(
        spec,
        jobs,
        PolicySet.parse("priority/conservative+best-fit"),
        tenancy=ten,
        preemption=PreemptionConfig(min_runtime=300.0),
    )
    assert res.finished == len(jobs)


# ------------------------------------------------------------------ counting


@FAST
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from((250, 500, 1000))),
        max_size=12,
    ),
    st.sampled_from(
        (task(1), task(2, cpu=8000), frac(300, 4096), frac(600), cpu_only(5000, 100_000))
    ),
)
def test_compiled_counts_equal_the_views_fit_counts(
    taken: list[tuple[int, int, int]], t: Any
) -> None:
    view = ClusterView(gpus_cluster(4, 2, 0, 4, cpu=32_000, mem=256_000))
    for node, gpu, milli in taken:
        if gpu < view.spec.nodes[node].gpus:
            p = frac(milli, 2048, cpu=4000, mem=16_000) if milli < 1000 else task(1, cpu=4000)
            try:
                take(view, node, [gpu], p)
            except ValueError:
                pass  # that GPU is too full: leave it
    want = view.fit_counts(t, 5)
    tp = task_params(t, 5)
    ok = view.task_mask(t)
    got = [
        bf.node_count(
            view.gpu_free_milli[x], view.gpu_free_mem[x], view.free_cpu[x], view.free_mem[x], tp
        )
        if ok[x]
        else 0
        for x in range(view.n_nodes)
    ]
    assert got == want.tolist()


# ------------------------------------------------------------------ modes


def test_policy_set_parses_the_conservative_modes() -> None:
    c = PolicySet.parse("fifo/conservative+best-fit")
    assert (c.backfill, c.runtime, c.label) == (
        "conservative",
        "estimate",
        "fifo/conservative+best-fit",
    )
    o = PolicySet.parse(" priority / conservative-oracle + first-fit ")
    assert (o.queue, o.backfill, o.runtime, o.label) == (
        "priority",
        "conservative",
        "oracle",
        "priority/conservative-oracle+first-fit",
    )
    assert PolicySet.parse(o.label) == o
    assert PolicySet.parse("priority/conservative@oracle+first-fit") == o


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("fifo/conservativ+best-fit", "'conservativ'"),
        ("fifo/EASY+best-fit", "'EASY'"),
        ("fifo/easy-oracles+best-fit", "'easy-oracles'"),
        ("fifo/easy@guess+best-fit", "runtime policy 'guess'"),
    ],
)
def test_an_unknown_backfill_or_runtime_names_the_registered_ones(text: str, unknown: str) -> None:
    with pytest.raises(UnknownPolicyError) as e:
        PolicySet.parse(text).check()
    msg = str(e.value)
    assert unknown in msg
    seam = "runtime" if "@" in text else "backfill"
    for name in names(seam):
        assert name in msg


def test_a_mode_that_names_no_backfill_is_refused() -> None:
    with pytest.raises(SpecError, match="mode must be skip, strict or a backfill"):
        PolicySet.parse("fifo/none+best-fit")


def test_conservative_refuses_a_depth_below_one() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1"):
        sched(
            ClusterView(gpus_cluster(1)),
            order("fifo"),
            placement("first-fit"),
            backfill="conservative",
            depth=0,
        )


def test_a_conservative_skip_says_which_reservation_it_would_delay() -> None:
    s = sched(
        ClusterView(gpus_cluster(4)),
        order("fifo"),
        placement("first-fit"),
        backfill="conservative",
    )
    s.submit(job("a", 0.0, gpus=2, estimate=1000.0))
    s.cycle(rng(), 0.0)
    for j in (
        job("big", 1.0, gpus=4, estimate=100.0),
        job("short", 2.0, estimate=500.0),
        job("long", 3.0, estimate=5000.0),
    ):
        s.submit(j)
    got = {d.job.id: d for d in s.cycle(rng(), 3.0)}
    assert isinstance(got["big"], Skip) and isinstance(got["big"].reason, NoCapacity)
    assert isinstance(got["short"], Admit)
    assert got["long"].reason == BehindReservation("big", 1000.0)


def test_conservative_with_preemption_on_a_small_saturated_cluster() -> None:
    """``suanli simulate -c 4x8xH100 -n 600 --load 1.3 --preempt -p fifo/conservative+best-fit``:
    a job that evicts others takes capacity that reservations counted on, and the plan's
    holds then exceed what is free; starting a job beyond the window must not take more off
    the view than is free (it raised ``OvercommitError``)."""
    from suanli.config.cluster import load_cluster

    spec = load_cluster("4x8xH100")
    jobs = generate(WorkloadConfig(jobs=600, seed=0, target_load=1.3), spec)
    res = simulate(
        spec, jobs, PolicySet.parse("fifo/conservative+best-fit"), preemption=PreemptionConfig()
    )
    assert res.finished == len(jobs)
    assert res.records.preemptions is not None and int(res.records.preemptions.sum()) > 0
