"""Reclaim within a bounded time, and the admission rules that make it possible.

A queue that lent its quota gets it back within ``reclaim_within`` seconds of asking
(``PreemptionConfig``): borrowers are protected from reclaim only that long, a job that could
not be reclaimed (not preemptible, or at its thrash cap) may not borrow, and nobody in the
cohort starts borrowing while a lender waits within its quota.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import gpus_cluster, job, order, placement, rng, sched
from quota_builders import G, queue, tenancy
from suanli.core.decisions import Admit, JobPlacement, Preempt, Skip
from suanli.core.model import ClusterSpec, Job
from suanli.core.preemption import PreemptionConfig, capped, protected_until
from suanli.core.running import Running
from suanli.core.scheduler import Scheduler
from suanli.core.tenancy import GPU, OverQuota, TenancySpec
from suanli.core.view import ClusterView
from suanli.sim.engine import ImpossibleJobError, PolicySet, simulate

PROPS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def lender_borrower(total: int, a: int) -> TenancySpec:
    return tenancy(
        queue("A", "ab", nominal={GPU: a * G}),
        queue("B", "ab", nominal={GPU: (total - a) * G}),
    )


def qsched(spec: ClusterSpec, ten: TenancySpec, cfg: PreemptionConfig) -> Scheduler:
    return sched(
        ClusterView(spec),
        order("priority"),
        placement("first-fit"),
        tenancy=(ten),
        preemption=cfg,
    )


def step(s: Scheduler, now: float, *jobs: Job) -> list:  # type: ignore[type-arg]
    for j in jobs:
        s.submit(j)
    return s.cycle(rng(), now)


# ------------------------------------------------------------------ the property


@st.composite
def reclaim_cases(draw: st.DrawFn) -> tuple[ClusterSpec, TenancySpec, list[Job], PreemptionConfig]:
    gpus = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    total = sum(gpus)
    if total < 2:
        gpus, total = [2], 2
    a = draw(st.integers(1, total - 1))
    jobs: list[Job] = []
    # The borrower: long jobs of any class, early; those that cannot be reclaimed stay
    # within its nominal (one GPU each, and its nominal is at least one GPU).
    for i in range(draw(st.integers(1, 8))):
        jobs.append(
            job(
                f"b{i}",
                float(draw(st.integers(0, 2000))),
                float(draw(st.integers(1, 20_000))),
                priority_class=draw(st.sampled_from(("online", "high", "normal", "spot"))),
                queue="B",
                checkpoint_interval=draw(st.one_of(st.none(), st.just(300.0))),
            )
        )
    # The lender: at most its nominal in one-GPU jobs, so it never waits on itself.
    for i in range(draw(st.integers(1, a))):
        jobs.append(
            job(
                f"a{i}",
                float(draw(st.integers(0, 6000))),
                float(draw(st.integers(1, 3000))),
                priority_class=draw(st.sampled_from(("online", "high", "normal", "spot"))),
                queue="A",
            )
        )
    cfg = PreemptionConfig(
        min_runtime=draw(st.sampled_from((0.0, 600.0, 5000.0))),
        reclaim_within=draw(st.sampled_from((None, 0.0, 300.0))),
        max_preemptions=draw(st.integers(0, 3)),
        window=draw(st.sampled_from((500.0, 50_000.0))),
        restart_overhead=draw(st.sampled_from((0.0, 30.0))),
    )
    return gpus_cluster(*gpus), lender_borrower(total, a), jobs, cfg


@PROPS
@given(reclaim_cases())
def test_a_lender_gets_its_quota_back_within_the_reclaim_time(case) -> None:  # type: ignore[no-untyped-def]
    """Every job the lender submits within its quota starts within ``reclaim_within`` (or
    the minimum runtime, if shorter) however the borrower filled the cluster."""
    spec, ten, jobs, cfg = case
    res = simulate(spec, jobs, PolicySet("priority", "first-fit"), tenancy=ten, preemption=cfg)
    bound = (
        cfg.min_runtime if cfg.reclaim_within is None else min(cfg.min_runtime, cfg.reclaim_within)
    )
    rec = res.records
    for i, jid in enumerate(rec.ids):
        if jid.startswith("a"):
            assert rec.start[i] <= rec.submit[i] + bound + 1e-9, (jid, rec.submit[i], rec.start[i])
    # And the thrash cap still holds for every job.
    aj, _, a_end = rec.attempts
    for i in range(len(rec.ids)):
        cuts = sorted(a_end[aj == i].tolist())[:-1]
        for k, t in enumerate(cuts):
            assert sum(1 for u in cuts[: k + 1] if t - u < cfg.window) <= cfg.max_preemptions


# ------------------------------------------------------------------ the rules, one by one


def test_reclaim_ignores_the_minimum_runtime_past_reclaim_within() -> None:
    spec = gpus_cluster(1)
    ten = tenancy(queue("A", "ab", nominal={GPU: G}), queue("B", "ab", nominal={GPU: 0}))
    s = qsched(spec, ten, PreemptionConfig(min_runtime=3600.0, reclaim_within=120.0))
    assert [
        type(d) for d in step(s, 0.0, job("b", 0.0, 10_000.0, priority_class="spot", queue="B"))
    ] == [Admit]
    assert [type(d) for d in step(s, 60.0, job("a", 60.0, 10.0, queue="A"))] == [Skip]
    assert s.wake_at == 120.0  # the borrower's protection from reclaim ends
    out = step(s, 120.0)
    assert [(type(d).__name__, d.job.id) for d in out] == [("Preempt", "b"), ("Admit", "a")]
    assert isinstance(out[0], Preempt) and out[0].kind == "reclaim"


def test_priority_preemption_still_waits_for_the_full_minimum_runtime() -> None:
    spec = gpus_cluster(1)
    s = sched(
        ClusterView(spec),
        order("priority"),
        placement("first-fit"),
        preemption=PreemptionConfig(min_runtime=3600.0, reclaim_within=120.0),
    )
    step(s, 0.0, job("low", 0.0, 10_000.0, priority_class="spot"))
    assert [type(d) for d in step(s, 60.0, job("hi", 60.0, 10.0, priority_class="high"))] == [Skip]
    assert s.wake_at == 3600.0
    assert [type(d) for d in step(s, 3600.0)] == [Preempt, Admit]


@pytest.mark.parametrize("cls", ["online", "high"])
def test_a_job_that_cannot_be_reclaimed_does_not_borrow(cls: str) -> None:
    s = qsched(gpus_cluster(2), lender_borrower(2, 1), PreemptionConfig())
    out = step(
        s, 0.0, job("b0", queue="B", priority_class=cls), job("b1", queue="B", priority_class=cls)
    )
    assert [type(d) for d in out] == [Admit, Skip]
    why = out[1].reason
    assert isinstance(why, OverQuota) and why.queue == "B"
    assert f"class {cls} is not preemptible" in str(why)
    # A preemptible job of the same queue may borrow the idle GPU.
    assert [type(d) for d in step(s, 1.0, job("b2", queue="B", priority_class="normal"))] == [Admit]


def test_without_reclaim_anyone_may_borrow() -> None:
    s = qsched(gpus_cluster(2), lender_borrower(2, 1), PreemptionConfig(reclaim=False))
    out = step(
        s,
        0.0,
        job("b0", queue="B", priority_class="online"),
        job("b1", queue="B", priority_class="online"),
    )
    assert [type(d) for d in out] == [Admit, Admit]


def test_a_job_at_its_thrash_cap_does_not_borrow() -> None:
    cfg = PreemptionConfig(min_runtime=0.0, max_preemptions=1, window=10_000.0)
    s = qsched(
        gpus_cluster(1),
        tenancy(queue("A", "ab", nominal={GPU: G}), queue("B", "ab", nominal={GPU: 0})),
        cfg,
    )
    step(s, 0.0, job("b", 0.0, 10_000.0, priority_class="spot", queue="B"))
    out = step(s, 10.0, job("a", 10.0, 100.0, queue="A"))
    assert [(type(d).__name__, d.job.id) for d in out] == [("Preempt", "b"), ("Admit", "a")]
    s.submit(out[0].job)  # the victim is requeued (the applier's part)
    s.release(out[1].placement, "a", 110.0)
    # b was preempted once, its cap: it may not borrow the idle GPU back.
    out = step(s, 110.0)
    assert [type(d) for d in out] == [Skip]
    assert "at its cap" in str(out[0].reason)
    assert capped([10.0], 110.0, cfg)
    # The window passes: it may again.
    assert [type(d) for d in step(s, 10_010.0)] == [Admit]


def test_no_one_borrows_while_a_lender_waits_within_its_quota() -> None:
    """A waits for the protected borrower; a GPU frees meanwhile: B may not borrow it."""
    spec = gpus_cluster(1, 1)
    ten = tenancy(queue("A", "ab", nominal={GPU: 2 * G}), queue("B", "ab", nominal={GPU: 0}))
    s = qsched(spec, ten, PreemptionConfig(min_runtime=600.0))
    out = step(
        s,
        0.0,
        job("b0", 0.0, 10_000.0, priority_class="spot", queue="B"),
        job("b1", 0.0, 50.0, priority_class="spot", queue="B"),
    )
    assert [type(d) for d in out] == [Admit, Admit]
    out = step(s, 10.0, job("a0", 10.0, 5000.0, gpus=1, tasks=2, queue="A"))
    assert [type(d) for d in out] == [Skip]
    s.release(_placement_of(s, "b1"), "b1", 50.0)
    out = step(s, 50.0, job("b2", 50.0, 10_000.0, priority_class="spot", queue="B"))
    skipped = {d.job.id: d.reason for d in out if isinstance(d, Skip)}
    assert "b2" in skipped and "queue A waits for its quota" in str(skipped["b2"])
    # At b0's protection end A reclaims and starts.
    out = step(s, 600.0)
    assert ("Admit", "a0") in [(type(d).__name__, d.job.id) for d in out]


def _placement_of(s: Scheduler, job_id: str):  # type: ignore[no-untyped-def]
    return s.running.records[job_id].placement


def test_an_unreclaimable_job_above_its_nominal_is_refused_up_front() -> None:
    jobs = [job("big", gpus=2, queue="B", priority_class="online")]
    with pytest.raises(ImpossibleJobError, match="class online is not preemptible"):
        simulate(
            gpus_cluster(2),
            jobs,
            PolicySet("priority", "first-fit"),
            tenancy=lender_borrower(2, 1),
            preemption=PreemptionConfig(),
        )
    # Without reclaim it may borrow, so it is possible.
    res = simulate(
        gpus_cluster(2),
        jobs,
        PolicySet("priority", "first-fit"),
        tenancy=lender_borrower(2, 1),
        preemption=PreemptionConfig(reclaim=False),
    )
    assert res.finished == 1


def test_protection_ends_when_the_oldest_preemption_in_the_window_leaves_it() -> None:
    cfg = PreemptionConfig(min_runtime=0.0, max_preemptions=2, window=100.0)
    r = Running(job("x"), JobPlacement((), 0), 0.0, 0, True, [10.0, 50.0, 70.0])
    # Three preemptions; the cap (2 in 100 s) lifts when 50 leaves the window, at 150.
    assert protected_until(r, 80.0, cfg, False) == 150.0
    assert capped(r.preempted_at, 149.0, cfg) and not capped(r.preempted_at, 150.0, cfg)
