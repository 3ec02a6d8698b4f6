"""Preemption (victims, anti-thrash rules, reclaim), EASY backfill and fair sharing.

Unit cases drive ``Scheduler`` directly on tiny clusters with explicit cycle times; the
properties run ``simulate`` on random small clusters and workloads and check the records and
the decisions the scheduler made (recorded by a ``Scheduler`` subclass).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import gpus_cluster, job, order, placement, rng, sched, task
from quota_builders import G, queue, tenancy
from strategies import backfill_workloads
from suanli.core import backfill as backfill_mod
from suanli.core.decisions import Admit, BehindReservation, NoCapacity, Preempt
from suanli.core.model import DEFAULT_PRIORITY_CLASSES, ClusterSpec, Job
from suanli.core.policies.fair_share import FairShare
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import UnknownPolicyError
from suanli.core.scheduler import Scheduler
from suanli.core.tenancy import GPU, TenancySpec
from suanli.core.view import ClusterView
from suanli.sim.engine import PolicySet, simulate

CLASSES = ("online", "high", "normal", "spot")
PRIO = {name: pc.value for name, pc in DEFAULT_PRIORITY_CLASSES.items()}
NEVER = frozenset(n for n, pc in DEFAULT_PRIORITY_CLASSES.items() if not pc.preemptible)

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def psched(
    spec: ClusterSpec,
    cfg: PreemptionConfig | None = None,
    queue_order: str = "priority",
    **kw: object,
) -> Scheduler:
    return sched(
        ClusterView(spec),
        order(queue_order),
        placement("first-fit"),
        preemption=cfg if cfg is not None else PreemptionConfig(min_runtime=0.0),
        **kw,  # type: ignore[arg-type]
    )


def step(s: Scheduler, now: float, *jobs: Job) -> list:  # type: ignore[type-arg]
    for j in jobs:
        s.submit(j)
    return s.cycle(rng(), now)


def kinds(decisions) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(type(d).__name__, d.job.id) for d in decisions]


def placements(decisions) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {d.job.id: d.placement for d in decisions if isinstance(d, Admit)}


# ------------------------------------------------------------------ preemption: unit cases


def test_high_priority_evicts_lower_and_charges_work_since_checkpoint() -> None:
    s = psched(gpus_cluster(2))
    started = placements(
        step(
            s,
            0.0,
            job("v", priority_class="spot", checkpoint_interval=300.0),
            job("w", priority_class="normal"),
        )
    )
    assert set(started) == {"v", "w"}
    out = step(s, 1000.0, job("h", priority_class="high"))
    assert kinds(out) == [("Preempt", "v"), ("Admit", "h")]
    p = out[0]
    assert p.by == "h" and p.kind == "priority"
    assert p.placement == started["v"]
    assert p.lost_gpu_s == pytest.approx(100.0)  # 1000 s run, checkpoint at 900 s


def test_lost_work_without_checkpoints_is_the_whole_attempt() -> None:
    s = psched(gpus_cluster(2))
    step(s, 100.0, job("v", gpus=2, priority_class="spot"))
    out = step(s, 400.0, job("h", priority_class="normal"))
    assert kinds(out) == [("Preempt", "v"), ("Admit", "h")]
    assert out[0].lost_gpu_s == pytest.approx(2 * 300.0)


@pytest.mark.parametrize("victim", sorted(NEVER))
def test_non_preemptible_class_is_never_a_victim(victim: str) -> None:
    s = psched(gpus_cluster(1))
    step(s, 0.0, job("v", priority_class=victim))
    out = step(s, 5000.0, job("h", priority_class="online"))
    assert kinds(out) == [("Skip", "h")]
    assert isinstance(out[0].reason, NoCapacity)


def test_same_priority_does_not_preempt_without_quotas() -> None:
    s = psched(gpus_cluster(1))
    step(s, 0.0, job("v", priority_class="normal"))
    assert kinds(step(s, 5000.0, job("h", priority_class="normal"))) == [("Skip", "h")]


def test_min_runtime_protects_a_young_job() -> None:
    cfg = PreemptionConfig(min_runtime=600.0)
    young = psched(gpus_cluster(1), cfg)
    step(young, 0.0, job("v", priority_class="spot"))
    assert kinds(step(young, 599.0, job("h", priority_class="normal"))) == [("Skip", "h")]
    old = psched(gpus_cluster(1), cfg)
    step(old, 0.0, job("v", priority_class="spot"))
    assert kinds(step(old, 600.0, job("h", priority_class="normal"))) == [
        ("Preempt", "v"),
        ("Admit", "h"),
    ]


def test_a_job_blocked_by_protection_is_retried_once_protection_ends() -> None:
    """The victim's minimum runtime runs out at t=600: the simulator runs a cycle then (the
    scheduler's ``wake_at``), and the waiting high job evicts the spot job at once, not at
    the next event (t=1000) nor when the victim finishes (t=10 000)."""
    jobs = [
        job("v", 0.0, 10_000.0, priority_class="spot"),
        job("h", 100.0, 50.0, priority_class="high"),
        job("x", 1000.0, 50.0, priority_class="spot"),
    ]
    res = simulate(
        gpus_cluster(1),
        jobs,
        PolicySet("priority", "first-fit"),
        preemption=PreemptionConfig(min_runtime=600.0),
    )
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    assert start["h"] == 600.0, start


def test_max_preemptions_in_window_protects_a_job() -> None:
    cfg = PreemptionConfig(min_runtime=0.0, max_preemptions=1, window=10_000.0)
    s = psched(gpus_cluster(1), cfg)
    v = job("v", priority_class="spot")
    step(s, 0.0, v)
    out = step(s, 100.0, job("h1", priority_class="high"))
    assert kinds(out) == [("Preempt", "v"), ("Admit", "h1")]
    s.submit(v)  # requeued, as the simulator does
    s.release(out[1].placement, "h1")
    assert kinds(s.cycle(rng(), 200.0)) == [("Admit", "v")]
    # Preempted once in the last 10 000 s: protected from a higher class.
    assert kinds(step(s, 300.0, job("h2", priority_class="high"))) == [("Skip", "h2")]
    # Just inside the window, then just past it (a job of a new shape, tried at once).
    assert kinds(step(s, 10_099.0, job("h3", t=task(1, cpu=1), priority_class="online"))) == [
        ("Skip", "h3")
    ]
    # Past the window v may be evicted again; the jobs its protection held back are retried,
    # and the first of them in queue order (h3: online, before h4) takes the GPU.
    out = step(s, 10_100.0, job("h4", t=task(1, cpu=2), priority_class="online"))
    assert kinds(out)[:2] == [("Preempt", "v"), ("Admit", "h3")]
    assert ("Admit", "h4") not in kinds(out)


def test_a_gang_is_evicted_whole() -> None:
    spec = gpus_cluster(1, 1)
    s = psched(spec)
    g = placements(step(s, 0.0, job("g", tasks=2, priority_class="spot")))["g"]
    assert len(g.tasks) == 2 and len(g.nodes) == 2
    out = step(s, 50.0, job("h", priority_class="normal"))
    assert kinds(out) == [("Preempt", "g"), ("Admit", "h")]
    assert out[0].placement == g
    assert out[0].lost_gpu_s == pytest.approx(2 * 50.0)
    # Both of the gang's GPUs were released; h holds one of them.
    assert int(s.view.node_free_milli.sum()) == 1000
    assert int(s.view.allocated_milli) == 1000


def test_victims_are_the_cheapest_and_unneeded_ones_are_reprieved() -> None:
    s = psched(gpus_cluster(4))
    step(
        s,
        0.0,
        job("a", priority_class="spot", checkpoint_interval=900.0),  # loses 1 × 100
        job("c", gpus=2, priority_class="spot", checkpoint_interval=400.0),  # loses 2 × 200
        job("d", priority_class="high"),
    )
    out = step(s, 1000.0, job("h", gpus=2, priority_class="online"))
    # a is cheapest and taken first, c then makes room; a turns out not to be needed.
    assert kinds(out) == [("Preempt", "c"), ("Admit", "h")]
    assert out[0].lost_gpu_s == pytest.approx(400.0)


def test_cheapest_victim_by_lost_work_wins() -> None:
    s = psched(gpus_cluster(2))
    step(
        s,
        0.0,
        job("fresh", priority_class="spot"),  # no checkpoint: loses 1000
        job("saved", priority_class="normal", checkpoint_interval=250.0),  # loses 0
    )
    out = step(s, 1000.0, job("h", priority_class="high"))
    assert kinds(out) == [("Preempt", "saved"), ("Admit", "h")]
    assert out[0].lost_gpu_s == pytest.approx(0.0)


def test_reclaim_takes_back_lent_quota_but_never_a_guarantee_or_another_cohort() -> None:
    s = sched(
        ClusterView(gpus_cluster(6)),
        order("priority"),
        placement("first-fit"),
        tenancy=(
            tenancy(
                queue("A", "c", nominal={GPU: 2 * G}),
                queue("B", "c", nominal={GPU: 2 * G}),
                queue("C", nominal={GPU: 2 * G}),
            )
        ),
        preemption=PreemptionConfig(min_runtime=0.0),
    )
    bs = [job(f"b{i}", queue="B", priority_class="normal") for i in range(4)]
    cs = [job(f"c{i}", queue="C", priority_class="spot") for i in range(2)]
    assert len(placements(step(s, 0.0, *bs, *cs))) == 6  # B borrows A's 2 GPUs
    out = step(s, 100.0, job("a0", queue="A", priority_class="normal"))
    assert [type(d).__name__ for d in out] == ["Preempt", "Admit"]
    assert out[0].kind == "reclaim" and out[0].job.queue == "B" and out[0].by == "a0"
    out = step(s, 200.0, job("a1", queue="A", priority_class="normal"))
    assert [type(d).__name__ for d in out] == ["Preempt", "Admit"]
    assert out[0].kind == "reclaim" and out[0].job.queue == "B"
    # A is at its nominal; B is within its own: neither B (a guarantee) nor C (another
    # cohort, even of a lower class) is touched.
    out = step(s, 300.0, job("a2", queue="A", priority_class="normal"))
    assert kinds(out) == [("Skip", "a2")]


def test_reclaim_via_constructor_flags() -> None:
    spec = gpus_cluster(2)
    s = sched(
        ClusterView(spec),
        order("fifo"),
        placement("first-fit"),
        tenancy=(tenancy(queue("A", "c", nominal={GPU: G}), queue("B", "c", nominal={GPU: G}))),
        preemption=PreemptionConfig(min_runtime=0.0),
    )
    step(s, 0.0, job("b0", queue="B"), job("b1", queue="B"))
    out = step(s, 10.0, job("a0", queue="A"))
    assert [(type(d).__name__, getattr(d, "kind", "")) for d in out] == [
        ("Preempt", "reclaim"),
        ("Admit", ""),
    ]
    s2 = sched(
        ClusterView(spec),
        order("fifo"),
        placement("first-fit"),
        tenancy=(tenancy(queue("A", "c", nominal={GPU: G}), queue("B", "c", nominal={GPU: G}))),
        preemption=PreemptionConfig(min_runtime=0.0, reclaim=False),
    )
    step(s2, 0.0, job("b0", queue="B"), job("b1", queue="B"))
    assert kinds(step(s2, 10.0, job("a0", queue="A"))) == [("Skip", "a0")]


# ------------------------------------------------------------------ preemption: properties


@st.composite
def workloads(draw: st.DrawFn, max_jobs: int = 12) -> tuple[ClusterSpec, list[Job]]:
    gpus = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    spec = gpus_cluster(*gpus)
    n = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(n):
        tasks = draw(st.integers(1, len(gpus)))
        jobs.append(
            job(
                f"j{i:02d}",
                submit=float(draw(st.integers(0, 3000))),
                runtime=float(draw(st.integers(1, 3000))),
                gpus=draw(st.integers(1, min(gpus))),
                tasks=tasks,
                priority_class=draw(st.sampled_from(CLASSES)),
                queue=draw(st.sampled_from(("A", "B", "C"))),
                checkpoint_interval=draw(st.one_of(st.none(), st.sampled_from((50.0, 300.0)))),
            )
        )
    return spec, jobs


configs = st.builds(
    PreemptionConfig,
    min_runtime=st.sampled_from((0.0, 100.0, 600.0)),
    max_preemptions=st.integers(0, 3),
    window=st.sampled_from((500.0, 5000.0)),
    restart_overhead=st.sampled_from((0.0, 30.0)),
    reclaim=st.booleans(),
)


def three_queues(total: int) -> TenancySpec:
    a = (total + 1) // 2
    return tenancy(
        queue("A", "ab", nominal={GPU: a * G}),
        queue("B", "ab", nominal={GPU: (total - a) * G}),
        queue("C", nominal={GPU: total * G}),
    )


PRIORITY = PolicySet("priority", "first-fit")


class Recorder(Scheduler):
    """Records every Preempt with the GPU usage per queue just before the preemptor's turn."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.held: dict[str, tuple[str, int]] = {}  # running job -> (queue, milli)
        self.never_admits: list[tuple[str, int]] = []  # non-preemptible: (queue, usage after)
        self.preempts: list[tuple[Preempt, Job, dict[str, int]]] = []
        self.by_job: dict[str, Job] = {}

    def submit(self, job: Job, now=None, *, requeued=False):  # type: ignore[no-untyped-def]
        self.by_job[job.id] = job
        return super().submit(job, now, requeued=requeued)

    def release(self, placement, job_id=None, now=None) -> None:  # type: ignore[no-untyped-def]
        self.held.pop(job_id, None)  # type: ignore[arg-type]
        super().release(placement, job_id, now)

    def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list:  # type: ignore[type-arg]
        out = super().cycle(rng, now)
        snap: dict[str, int] | None = None
        for d in out:
            if isinstance(d, Preempt):
                if snap is None:
                    snap = self._usage()
                self.preempts.append((d, self.by_job[d.by], snap))
                del self.held[d.job.id]
            elif isinstance(d, Admit):
                snap = None
                self.held[d.job.id] = (d.job.queue, d.placement.gpu_milli)
                if d.job.priority_class in NEVER:
                    self.never_admits.append((d.job.queue, self._usage()[d.job.queue]))
        return out

    def _usage(self) -> dict[str, int]:
        u: dict[str, int] = defaultdict(int)
        for q, m in self.held.values():
            u[q] += m
        return u


def run_recorded(spec, jobs, cfg, ten, policy=PRIORITY):  # type: ignore[no-untyped-def]
    made: list[Recorder] = []

    class R(Recorder):
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    res = simulate(spec, jobs, policy, tenancy=ten, preemption=cfg, scheduler=R)
    return res, made[0]


@FAST
@given(workloads(), configs, st.booleans())
def test_simulated_preemption_keeps_its_rules(w, cfg, with_quotas) -> None:  # type: ignore[no-untyped-def]
    spec, jobs = w
    jobs = sorted(jobs, key=lambda j: (j.submit, j.id))  # the records' order
    total = sum(n.gpus for n in spec.nodes)
    ten = three_queues(total) if with_quotas else None
    nominal = {q.name: q.nominal.get(GPU, 0) for q in ten.queues} if ten else {}
    cohort = {q.name: q.cohort or q.name for q in ten.queues} if ten else {}
    if ten is not None and cfg.reclaim:
        # A job that cannot be reclaimed may not borrow: one larger than its queue's nominal
        # could never start (check_quotas refuses it), so it moves to queue C (all GPUs).
        jobs = [
            dataclasses.replace(j, queue="C")
            if (j.priority_class in NEVER or cfg.max_preemptions == 0)
            and j.tasks * j.task.gpus * G > nominal[j.queue]
            else j
            for j in jobs
        ]
    res, rec_s = run_recorded(spec, jobs, cfg, ten)
    rec = res.records
    assert res.finished == len(jobs)
    assert not np.isnan(rec.finish).any()
    # Anti-thrash: at most max_preemptions preemptions within any window.
    aj, a_start, a_end = rec.attempts
    for i in range(len(jobs)):
        ends = sorted(a_end[aj == i].tolist())
        assert len(ends) == rec.preemptions[i] + 1
        cuts = ends[:-1]  # every attempt but the last was preempted
        for k, t in enumerate(cuts):
            recent = [u for u in cuts[: k + 1] if t - u < cfg.window]
            assert len(recent) <= cfg.max_preemptions, (jobs[i].id, cuts)
    # Each eviction had a right: a lower class, or a reclaim from a borrowing queue.
    for p, by, usage in rec_s.preempts:
        assert p.job.priority_class not in NEVER
        if p.kind == "priority":
            assert PRIO[p.job.priority_class] < PRIO[by.priority_class]
        else:
            assert p.kind == "reclaim" and ten is not None and cfg.reclaim
            assert usage[p.job.queue] > nominal[p.job.queue]
            assert p.job.queue != by.queue
        if ten is not None:
            assert cohort[p.job.queue] == cohort[by.queue]
            if p.job.queue != by.queue:
                assert usage[p.job.queue] > nominal[p.job.queue]
    # With reclaim on, a job that could not be reclaimed never started borrowing.
    if ten is not None and cfg.reclaim:
        for queue_name, used in rec_s.never_admits:
            assert used <= nominal[queue_name]
    # Nothing of a non-preemptible class was ever preempted.
    for i, j in enumerate(jobs):
        if j.priority_class in NEVER:
            assert rec.preemptions[i] == 0
    assert int(rec.preemptions.sum()) == len(rec_s.preempts) == res.preemptions
    assert res.lost_gpu_hours == pytest.approx(float(rec.lost_gpu_s.sum()) / 3600)


@FAST
@given(workloads(), configs.filter(lambda c: c.restart_overhead == 0))
def test_lost_work_charged_matches_the_preempt_decisions(w, cfg) -> None:  # type: ignore[no-untyped-def]
    spec, jobs = w
    res, rec_s = run_recorded(spec, jobs, cfg, None)
    decided = sum(p.lost_gpu_s for p, _, _ in rec_s.preempts)
    assert float(res.records.lost_gpu_s.sum()) == pytest.approx(decided, abs=1e-6)


def test_lost_work_after_a_restart_is_reported_as_the_simulator_charges_it() -> None:
    """With a restart overhead, the work lost in a resumed attempt: the scheduler's Preempt
    and the simulator's records must agree on it."""
    spec = gpus_cluster(1)
    cfg = PreemptionConfig(min_runtime=0.0, restart_overhead=100.0)
    jobs = [
        job("v", 0.0, 10_000.0, priority_class="spot", checkpoint_interval=300.0),
        job("h1", 1000.0, 50.0, priority_class="high"),
        job("h2", 1400.0, 50.0, priority_class="high"),
    ]
    res, rec_s = run_recorded(spec, jobs, cfg, None)
    assert [p.job.id for p, _, _ in rec_s.preempts] == ["v", "v"]
    # First attempt: 1000 s, checkpoint at 900 s: 100 GPU-s lost. Second attempt: resumes at
    # 1050, restarts for 100 s, works 250 s: no checkpoint yet, all 350 s are lost (the
    # simulator's charge); the scheduler computes 350 mod 300 = 50 s, ignoring the restart.
    charged = float(res.records.lost_gpu_s[0])
    assert charged == pytest.approx(100.0 + 350.0)
    decided = sum(p.lost_gpu_s for p, _, _ in rec_s.preempts)
    assert charged == pytest.approx(decided)


# ------------------------------------------------------------------ backfill


def test_policy_set_parses_backfill_modes() -> None:
    easy = PolicySet.parse("fifo/easy+best-fit")
    assert (easy.backfill, easy.strict, easy.label) == ("easy", False, "fifo/easy+best-fit")
    oracle = PolicySet.parse(" drf / easy-oracle + first-fit ")
    assert (oracle.queue, oracle.placement, oracle.backfill, oracle.runtime) == (
        "drf",
        "first-fit",
        "easy",
        "oracle",
    )
    assert oracle.label == "drf/easy-oracle+first-fit"
    assert PolicySet.parse(oracle.label) == oracle
    assert PolicySet.parse("fifo/skip+best-fit").backfill == "none"
    strict = PolicySet.parse("fifo/strict+best-fit")
    assert strict.strict and strict.backfill == "none"
    with pytest.raises(UnknownPolicyError, match="unknown backfill policy 'easy-ish'"):
        PolicySet.parse("fifo/easy-ish+best-fit").check()
    with pytest.raises(UnknownPolicyError, match="unknown backfill policy 'x'"):
        sched(ClusterView(gpus_cluster(1)), order("fifo"), placement("first-fit"), backfill="x")


def test_short_job_backfills_and_long_job_waits_behind_reservation() -> None:
    s = sched(ClusterView(gpus_cluster(4)), order("fifo"), placement("first-fit"), backfill="easy")
    out = step(
        s,
        0.0,
        job("a", 0.0, gpus=2, estimate=1000.0),
        job("big", 1.0, gpus=4, estimate=100.0),
        job("short", 2.0, estimate=500.0),
        job("long", 3.0, estimate=5000.0),
    )
    assert kinds(out) == [("Admit", "a"), ("Skip", "big"), ("Admit", "short"), ("Skip", "long")]
    assert isinstance(out[1].reason, NoCapacity)
    assert out[3].reason == BehindReservation("big", 1000.0)
    assert "behind a reservation for job big until t=1000" in str(out[3].reason)
    # Plain skip-ahead would have started the long job too.
    plain = Scheduler(ClusterView(gpus_cluster(4)), order("fifo"), placement("first-fit"))
    out = step(
        plain,
        0.0,
        job("a", 0.0, gpus=2),
        job("big", 1.0, gpus=4),
        job("short", 2.0),
        job("long", 3.0),
    )
    assert kinds(out)[-1] == ("Admit", "long")


def test_reservation_goes_to_the_blocked_head_not_a_later_job() -> None:
    """H (the whole node) is the blocked head and was already told so. When B ends at t=5,
    the cycle's first job X starts and the cycle's head reservation is dropped; then L, a
    100 s job behind H, is started although it holds a GPU past H's reservation at t=10 (A
    and X have ended by then). H should start at 10, not wait for L."""
    jobs = [
        job("A", 0.0, 10.0, gpus=2),
        job("B", 0.0, 5.0, gpus=2),
        job("X", 0.0, 1.0),
        job("H", 1.0, 1.0, gpus=4),
        job("L", 2.0, 100.0),
    ]
    res = simulate(
        gpus_cluster(4), jobs, PolicySet("fifo", "first-fit", backfill="easy", runtime="oracle")
    )
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    assert start["X"] == 5.0
    assert start["H"] == 10.0, start


@FAST
@given(backfill_workloads())
def test_oracle_reservations_hold(w) -> None:  # type: ignore[no-untyped-def]
    spec, jobs = w
    made: list[tuple[str, float]] = []
    real = backfill_mod.reserve

    def spy(*a, **kw):  # type: ignore[no-untyped-def]
        r = real(*a, **kw)
        if r is not None:
            made.append((r.job.id, r.until))
        return r

    with mock.patch.object(backfill_mod, "reserve", spy):
        res = simulate(
            spec, jobs, PolicySet("fifo", "first-fit", backfill="easy", runtime="oracle")
        )
    assert res.finished == len(jobs)
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    for jid, until in made:
        assert start[jid] <= until + 1e-9, (jid, until, start[jid])


# ------------------------------------------------------------------ fair share


def _queue_race(queue_order: str) -> list[str]:
    s = Scheduler(ClusterView(gpus_cluster(4)), order(queue_order), placement("first-fit"))
    a_jobs = [job(f"a{i}", float(i), queue="A") for i in range(6)]
    started = placements(step(s, 5.0, *a_jobs))
    assert set(started) == {"a0", "a1", "a2", "a3"}
    assert placements(step(s, 10.0, job("b0", 10.0, queue="B"))) == {}
    s.release(started["a0"], "a0")
    return list(placements(s.cycle(rng(), 100.0)))


def test_drf_starts_the_small_queue_first_fifo_does_not() -> None:
    assert _queue_race("drf") == ["b0"]
    assert _queue_race("fifo") == ["a4"]


def _fair_share_race(gap: float) -> list[str]:
    """A held the 1-GPU cluster for 1000 s; ``gap`` s later B held it for 10 s; then A and B
    (A first by submit time) each want it."""
    s = Scheduler(ClusterView(gpus_cluster(1)), FairShare(half_life=100.0), placement("first-fit"))
    a1 = placements(step(s, 0.0, job("a1", 0.0, queue="A")))["a1"]
    s.cycle(rng(), 1000.0)
    s.release(a1, "a1")
    t = 1000.0 + gap
    b0 = placements(step(s, t, job("b0", t, queue="B")))["b0"]
    s.cycle(rng(), t + 10)
    s.release(b0, "b0")
    return list(
        placements(step(s, t + 20, job("a2", t + 11, queue="A"), job("b1", t + 12, queue="B")))
    )


def test_fair_share_penalises_recent_usage_and_forgets_old_usage() -> None:
    assert _fair_share_race(0.0) == ["b1"]  # A's 1000 s are recent: B goes first
    assert _fair_share_race(100.0 * 60) == ["a2"]  # 60 half-lives later A is not penalised


def test_fair_share_counts_usage_that_ends_at_a_cycle() -> None:
    """A job that ran between two cycles and ended at the instant of the second still counts:
    A held the only GPU for 1000 s, B nothing, so B's job goes first."""
    spec = gpus_cluster(1)
    jobs = [
        job("a1", 0.0, 1000.0, queue="A"),
        job("a2", 1000.0, 100.0, queue="A"),
        job("b1", 1000.0, 100.0, queue="B"),
    ]
    res = simulate(spec, jobs, PolicySet("fair-share", "first-fit"))
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    assert start["b1"] == 1000.0 and start["a2"] == 1100.0
    assert math.isfinite(start["a1"])
