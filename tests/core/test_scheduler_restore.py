"""``Scheduler.restore``: a scheduler rebuilt from what a store knows decides as the one that
never stopped.

Scheduler A runs a random workload for a while; scheduler B is then built fresh over a fresh
view: every job A has running is restored (A's placement, start time and preemption history),
every job A has pending is submitted again (``requeued``: the budgets' submit-time verdict was
already given). B's first cycle, at the moment of the rebuild, re-tells why the pending jobs
wait and starts nothing (A had already started everything it could). From then on both get
the same future (arrivals, ends, generators) and must make identical decisions: the same
admissions with the same placements and the same evictions, in the same order. Skips are
compared where both tell a job something in the same cycle (the reasons must agree): a
scheduler tells a waiting job's reason again only when its lane is looked at anew, which
depends on what it looked at before the rebuild, so one may repeat a reason the other does
not.

What a rebuild cannot carry over, so not compared here: A's memory of which lanes it already
looked at. With preemption, A looks at a skipped job again only when its shape fits or a
protection ends, while B looks at every pending job in its first cycle and may start one by
evictions that A would not try yet (seeds 3 of ``preemption`` and ``easy-preemption`` do);
EASY keeps a reservation while nothing ends, so A's may be older. The property test
therefore covers the configurations without preemption, with a fixed search.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_builders import FlatCosts, budget, spec
from builders import A100, T4, V100, cluster, frac, job, node, order, placement, sched, task
from quota_builders import G, queue, tenancy
from suanli.core.admission.budget import BudgetAdmission
from suanli.core.admission.quota import QuotaAdmission
from suanli.core.budget import BudgetBook
from suanli.core.decisions import (
    Admit,
    BehindReservation,
    Decision,
    Demoted,
    JobPlacement,
    Preempt,
    Reject,
    Skip,
)
from suanli.core.model import ClusterSpec, Job
from suanli.core.preemption import PreemptionConfig
from suanli.core.scheduler import Scheduler
from suanli.core.tenancy import GPU, TenancySpec
from suanli.core.view import ClusterView, OvercommitError

STEP = 10.0
CLASSES = ("online", "high", "normal", "spot")
QUEUES = ("A", "B", "C")
TENANTS = ("vision", "nlp")


def spec_cluster() -> ClusterSpec:
    return cluster(
        node("v0", 8, V100, domain="d0"),
        node("v1", 8, V100, domain="d0"),
        node("a0", 4, A100, cpu=32_000, mem=256_000),
        node("t0", 8, T4),
        node("c0", 0, None, cpu=16_000),
    )


def tenants() -> TenancySpec:
    return tenancy(
        queue("A", "ab", nominal={GPU: 10 * G}, borrow={GPU: 8 * G}),
        queue("B", "ab", nominal={GPU: 8 * G}),
        queue("C", nominal={GPU: 10 * G}),
    )


def budgets() -> BudgetBook:
    return BudgetBook(
        spec(budget("vision", "4000", "refuse"), budget("nlp", "3000", "demote", name="nlp")),
        FlatCosts(default=Decimal("0.5")),
    )


@dataclass(frozen=True)
class Config:
    """How to build a scheduler (``book``: the budget book to use, if the config has one)."""

    queue_order: str = "fifo"
    place: str = "best-fit"
    strict: bool = False
    quotas: bool = False
    preemption: PreemptionConfig | None = None
    backfill: str | None = None
    budgets: bool = False

    def make(self, book: BudgetBook | None = None) -> Scheduler:
        return sched(
            ClusterView(spec_cluster()),
            order(self.queue_order),
            placement(self.place),
            strict=self.strict,
            tenancy=tenants() if self.quotas else None,
            preemption=self.preemption,
            backfill=self.backfill,
            budgets=(book or budgets()) if self.budgets else None,
        )


PRE = PreemptionConfig(min_runtime=40.0, restart_overhead=5.0, max_preemptions=2, window=500.0)
CONFIGS = {
    "fifo-best-fit": Config(),
    "strict": Config(strict=True, place="first-fit"),
    "quotas": Config(quotas=True),
    "preemption": Config(queue_order="priority", preemption=PRE),
    "quotas-reclaim": Config(queue_order="priority", quotas=True, preemption=PRE),
    "drf": Config(queue_order="drf"),
    "drf-quotas": Config(queue_order="drf", quotas=True),
    "budgets": Config(budgets=True),
    "easy": Config(backfill="easy"),
    "conservative": Config(backfill="conservative"),
    "easy-preemption": Config(queue_order="priority", preemption=PRE, backfill="easy"),
}


def workload(seed: int, n: int, horizon: float) -> dict[float, list[Job]]:
    """``n`` random jobs, by submit time (multiples of ``STEP`` up to ``horizon``)."""
    g = np.random.default_rng(seed)
    out: dict[float, list[Job]] = {}
    for i in range(n):
        t = float(g.integers(0, int(horizon / STEP))) * STEP
        runtime = float(g.integers(1, 30)) * STEP
        kind = int(g.integers(0, 6))
        if kind == 0:
            req = frac(int(g.choice([250, 500])), cpu=1000)
        elif kind == 1:
            req = task(0, cpu=2000, mem=4000)
        elif kind == 2:
            req = task(1, models=("A100",))
        else:
            req = task(int(g.choice([1, 1, 2, 4])), cpu=1000)
        tasks = int(g.choice([1, 1, 1, 2, 3]))
        j = job(
            f"j{i}",
            t,
            runtime,
            req,
            tasks=tasks,
            gang_min=int(g.integers(1, tasks + 1)) if tasks > 1 and g.random() < 0.3 else 0,
            priority_class=str(g.choice(CLASSES)),
            queue=str(g.choice(QUEUES)),
            tenant=str(g.choice(TENANTS)),
            estimate=runtime * float(g.choice([0.5, 1.0, 2.0])) if g.random() < 0.8 else None,
            checkpoint_interval=30.0 if g.random() < 0.3 else None,
        )
        out.setdefault(t, []).append(j)
    return out


@dataclass
class World:
    """A scheduler and what its caller knows: running jobs, pending jobs, preemptions."""

    s: Scheduler
    running: dict[str, tuple[Job, JobPlacement, float]] = field(default_factory=dict)
    pending: dict[str, tuple[Job, float]] = field(default_factory=dict)  # in (re)submit order
    preempted: dict[str, list[float]] = field(default_factory=dict)

    def step(self, t: float, arrivals: list[Job], seed: int) -> list[Decision]:
        ends = sorted((start + j.runtime, jid) for jid, (j, _, start) in self.running.items())
        for end, jid in ends:
            if end > t:
                break
            _, p, _ = self.running.pop(jid)
            self.s.release(p, jid, t)
        for j in arrivals:
            told = self.s.submit(j, t)
            if type(told) is Reject:
                continue
            if type(told) is Demoted:
                j = told.job
            self.pending[j.id] = (j, t)
        decisions = self.s.cycle(np.random.default_rng(seed), t) if len(self.s) else []
        for d in decisions:
            if type(d) is Admit:
                del self.pending[d.job.id]
                self.running[d.job.id] = (d.job, d.placement, t)
            elif type(d) is Preempt:
                del self.running[d.job.id]
                self.preempted.setdefault(d.job.id, []).append(t)
                self.s.submit(d.job, t, requeued=True)
                self.pending[d.job.id] = (d.job, t)
        return decisions

    def rebuilt(self, make: Callable[[BudgetBook | None], Scheduler]) -> World:
        """A fresh scheduler over a fresh view, from what this world's caller knows."""
        book = None
        if budget_of(self.s) is not None:
            book = settled_only(budget_of(self.s).book)  # type: ignore[union-attr]
        s = make(book)
        for jid, (j, p, start) in self.running.items():
            s.restore(j, p, start, preempted_at=self.preempted.get(jid, ()))
        for jid, (j, t) in self.pending.items():
            s.submit(j, t, requeued=True, preempted_at=self.preempted.get(jid, ()))
        return World(s, dict(self.running), dict(self.pending), copy.deepcopy(self.preempted))


def quota_of(s: Scheduler) -> QuotaAdmission | None:
    return next((a for a in s.admissions if isinstance(a, QuotaAdmission)), None)


def budget_of(s: Scheduler) -> BudgetAdmission | None:
    return next((a for a in s.admissions if isinstance(a, BudgetAdmission)), None)


def snapshot(s: Scheduler) -> tuple[object, ...]:
    """Everything a restore changes: the view, quota usage and charges, the running set,
    fair-share holdings, the budget book's running jobs, backfill's running jobs."""
    q, b = quota_of(s), budget_of(s)
    return (
        s.view.state(),
        q.book.usage.copy() if q is not None else None,
        dict(s.running.records),
        dict(q.charged) if q is not None else None,
        s.keys.held.copy() if s.keys is not None else None,  # type: ignore[attr-defined]
        b.book.running() if b is not None else None,
        len(s.backfill.by_end) if s.backfill is not None else None,  # type: ignore[attr-defined]
    )


def settled_only(book: BudgetBook) -> BudgetBook:
    """A copy of ``book`` with the spend of ended jobs only (a ledger's view of it)."""
    b = copy.deepcopy(book)
    for jid in b.running():
        r = b._running.pop(jid)
        for a in r.accounts:
            a.committed -= r.admitted
    return b


def acts(decisions: list[Decision]) -> list[Decision]:
    """The decisions that change something: admissions and evictions, in order."""
    return [d for d in decisions if type(d) is not Skip]


def skips(decisions: list[Decision]) -> dict[str, object]:
    """Each Skip's reason; for a reservation, whose (its time is worked out when it is made,
    and a scheduler keeps it while nothing ends: A's may be older than B's)."""
    return {
        d.job.id: (d.reason.job if isinstance(d.reason, BehindReservation) else d.reason)
        for d in decisions
        if type(d) is Skip
    }


def run_and_compare(
    cfg: Config, seed: int, n_jobs: int = 60, split: int = 20, steps: int = 60
) -> tuple[int, int]:
    """Run A ``split`` steps, rebuild B, then both to ``steps``; returns (admits, preempts)
    compared after the rebuild."""
    arrivals = workload(seed, n_jobs, steps * STEP * 0.7)
    a = World(cfg.make())
    for k in range(split):
        a.step(k * STEP, arrivals.get(k * STEP, []), seed * 1000 + k)
    b = a.rebuilt(cfg.make)
    assert b.s.view.state().__len__() == a.s.view.state().__len__()
    for x, y in zip(a.s.view.state(), b.s.view.state(), strict=True):
        assert np.array_equal(x, y)
    qa, qb = quota_of(a.s), quota_of(b.s)
    if qa is not None:
        assert qb is not None
        assert np.array_equal(qa.book.usage, qb.book.usage)
    admits = preempts = 0
    for k in range(split, steps):
        t = k * STEP
        da = a.step(t, arrivals.get(t, []), seed * 1000 + k)
        db = b.step(t, arrivals.get(t, []), seed * 1000 + k)
        assert acts(da) == acts(db), f"step {k} (t={t}): admissions or evictions differ"
        sa, sb = skips(da), skips(db)
        assert {j: sa[j] for j in sa.keys() & sb.keys()} == {
            j: sb[j] for j in sa.keys() & sb.keys()
        }, f"step {k} (t={t}): reasons differ"
        admits += sum(type(d) is Admit for d in da)
        preempts += sum(type(d) is Preempt for d in da)
    for x, y in zip(a.s.view.state(), b.s.view.state(), strict=True):
        assert np.array_equal(x, y)
    assert a.running.keys() == b.running.keys()
    assert [j.id for j in a.s.pending_jobs()] == [j.id for j in b.s.pending_jobs()]
    return admits, preempts


# ------------------------------------------------------------------ equivalence


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_rebuilt_scheduler_decides_as_the_one_that_never_stopped(name: str, seed: int) -> None:
    admits, _ = run_and_compare(CONFIGS[name], seed)
    assert admits > 0  # the comparison covered admissions


def test_preemption_configs_do_preempt_after_the_rebuild() -> None:
    """The preemption configurations exercise evictions after the rebuild (else the
    comparison above would say little about the running set's restoration)."""
    for name in ("preemption", "quotas-reclaim", "easy-preemption"):
        total = sum(run_and_compare(CONFIGS[name], seed)[1] for seed in (1, 2, 5))
        assert total > 0, name


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    name=st.sampled_from(sorted(n for n, c in CONFIGS.items() if c.preemption is None)),
    seed=st.integers(0, 10_000),
    split=st.integers(1, 40),
)
def test_rebuild_at_any_moment(name: str, seed: int, split: int) -> None:
    run_and_compare(CONFIGS[name], seed, n_jobs=40, split=split, steps=split + 25)


# ------------------------------------------------------------------ release and refusal


def test_release_of_a_restored_job_gives_back_everything() -> None:
    cfg = Config(queue_order="drf", quotas=True, preemption=PRE, backfill="easy", budgets=True)
    a = World(cfg.make())
    j = job("r", 0.0, 100.0, task(2, cpu=1000), queue="A", tenant="vision", estimate=100.0)
    a.step(0.0, [j], 0)
    assert "r" in a.running
    b = a.rebuilt(cfg.make)
    fresh = cfg.make()
    bb = budget_of(b.s)
    assert bb is not None and bb.book.running() == ["r"]
    _, p, _ = b.running["r"]
    b.s.release(p, "r", 50.0)
    for x, y in zip(b.s.view.state(), fresh.view.state(), strict=True):
        assert np.array_equal(x, y)
    q = quota_of(b.s)
    assert q is not None and b.s.keys is not None
    assert not q.book.usage.any()
    assert not b.s.running.records and not q.charged and not b.s.keys.of_job  # type: ignore[attr-defined]
    assert bb.book.running() == []


def test_restore_of_a_pending_job_is_refused() -> None:
    s = Config(quotas=True).make()
    j = job("p", queue="A")
    s.submit(j, 0.0)
    view = ClusterView(spec_cluster())
    p = JobPlacement.of((view.placement_for(0, np.array([0]), j.task),))
    with pytest.raises(ValueError, match="pending"):
        s.restore(j, p, 0.0)


def test_restore_of_a_running_job_is_refused() -> None:
    s = Config(quotas=True).make()
    j = job("r", queue="A")
    (d,) = s.cycle(np.random.default_rng(0)) if s.submit(j, 0.0) is None else []
    assert type(d) is Admit
    state = s.view.state()
    with pytest.raises(ValueError, match="already running"):
        s.restore(j, d.placement, 0.0)
    for x, y in zip(state, s.view.state(), strict=True):
        assert np.array_equal(x, y)


def test_a_conflicting_placement_is_refused_and_changes_nothing() -> None:
    cfg = Config(queue_order="drf", quotas=True, preemption=PRE, backfill="easy", budgets=True)
    s = cfg.make()
    t = task(4)
    first = job("x", 0.0, 100.0, t, queue="A", tenant="vision")
    view = s.view
    # Node v0: GPUs 0-3 for x; y wants GPUs 2-5 of v0 on its second task (the first fits).
    px = JobPlacement.of((view.placement_for(0, np.array([0, 1, 2, 3]), t),))
    s.restore(first, px, 0.0)
    before = snapshot(s)
    second = job("y", 0.0, 100.0, t, tasks=2, queue="A", tenant="vision")
    py = JobPlacement.of(
        (
            view.placement_for(1, np.array([0, 1, 2, 3]), t),
            view.placement_for(0, np.array([2, 3, 4, 5]), t),
        )
    )
    with pytest.raises(OvercommitError):
        s.restore(second, py, 0.0)
    after = snapshot(s)
    for x, y in zip(before[0], after[0], strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(before[1], after[1])  # type: ignore[arg-type]
    assert before[2:4] == after[2:4]
    assert np.array_equal(before[4], after[4])
    assert before[5:] == after[5:]
    # And the job is still unknown: restoring it where it fits works.
    ok = JobPlacement.of(
        (
            view.placement_for(1, np.array([0, 1, 2, 3]), t),
            view.placement_for(0, np.array([4, 5, 6, 7]), t),
        )
    )
    s.restore(second, ok, 0.0)
    assert set(s.running.records) == {"x", "y"}


def test_a_placement_with_too_few_tasks_is_refused() -> None:
    s = Config().make()
    j = job("g", tasks=3, gang_min=2)
    p = JobPlacement.of((s.view.placement_for(0, np.array([0]), j.task),))
    with pytest.raises(ValueError, match="tasks placed"):
        s.restore(j, p, 0.0)
    assert not s.view.active().any()


def test_a_plan_counting_on_an_overdue_job_is_made_again_as_time_passes() -> None:
    """Found by the property test below: with conservative backfill a running job past its
    expected end is counted on to end at once, and a job held behind the reservation that
    made for stayed held while that moment slid with the clock; the rebuilt scheduler,
    planning afresh, started it. Now any later cycle plans again."""
    run_and_compare(CONFIGS["conservative"], 422, n_jobs=40, split=23, steps=48)
