"""The scheduler under quotas, properties: on random clusters, queues and job streams, checked
against ``quota_builders.Ledger`` (the quota rules restated without ``QuotaBook``) and against
usage recomputed from placements and simulated records. Unit cases: test_scheduler_quota.py.
"""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from builders import (
    MODELS,
    cluster,
    job,
    node,
    order,
    placement,
    sched,
)
from quota_builders import (
    G,
    Ledger,
    placed_demand,
    queue,
    record_demand,
    tenancy,
    whole_demand,
)
from suanli.core.builder import Setting, check_admissible
from suanli.core.decisions import Admit, HeadOfLine
from suanli.core.model import ClusterSpec, Job, SpecError, TaskRequest
from suanli.core.tenancy import (
    CPU,
    GPU,
    MEMORY,
    OverQuota,
    TenancySpec,
    gpu_of,
)
from suanli.core.view import ClusterView, TaskPlacement
from suanli.sim import engine
from suanli.sim.engine import ImpossibleJobError, PolicySet, check_feasible, simulate

MODES = {"skip-ahead": False, "strict": True}


# ------------------------------------------------------------------ properties

FAST = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
SPEED_MODEL = {m.speed: m.name for m in MODELS}  # distinct speeds: a placement's speed names it
assert len(SPEED_MODEL) == len(MODELS)

GPU_AMOUNTS = [0, G, 2 * G, 4 * G, 4 * G, 8 * G]
AMOUNTS = {
    GPU: GPU_AMOUNTS,
    CPU: [0, 8 * G, 32 * G, 64 * G],
    MEMORY: [0, 32_000, 128_000, 256_000],
}


@st.composite
def small_clusters(draw, healthy: bool = True) -> ClusterSpec:  # type: ignore[no-untyped-def]
    nodes = [
        node(
            f"n{i}",
            draw(st.sampled_from([0, 4, 8, 8])),
            draw(st.sampled_from(MODELS)),
            cpu=draw(st.sampled_from([16 * G, 64 * G])),
            mem=draw(st.sampled_from([64_000, 256_000])),
            healthy=healthy or draw(st.sampled_from([True, True, False])),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    return cluster(*nodes)


@st.composite
def tenancies(draw, spec: ClusterSpec) -> TenancySpec:  # type: ignore[no-untyped-def]
    """1-3 queues in up to two cohorts (or none); every queue names every governed resource
    (a resource one queue names is governed for all, with a nominal of 0 where unnamed)."""
    governed = [r for r in (GPU, CPU, MEMORY) if draw(st.sampled_from([True, False]))] or [GPU]
    models = [m.name for m in spec.gpu_models]
    if models and draw(st.sampled_from([True, False])):
        governed += [gpu_of(m) for m in models]
    queues = []
    for i in range(draw(st.integers(1, 3))):
        amounts = {r: AMOUNTS.get(r, GPU_AMOUNTS) for r in governed}
        nominal = {r: draw(st.sampled_from(a)) for r, a in amounts.items()}
        borrow = {r: draw(st.sampled_from(a)) for r, a in amounts.items() if draw(st.booleans())}
        lend = {r: draw(st.sampled_from(a)) for r, a in amounts.items() if draw(st.booleans())}
        cohort = draw(st.sampled_from([None, "c0", "c0", "c1"]))
        queues.append(queue(f"q{i}", cohort, nominal=nominal, borrow=borrow, lend=lend))
    return tenancy(*queues)


@st.composite
def quota_jobs(draw, spec: ClusterSpec, ten: TenancySpec, partial: bool = True) -> list[Job]:  # type: ignore[no-untyped-def]
    """2-16 jobs of random queues and shapes. A job of several tasks asks for one GPU model,
    so that the model every job ran on can be told from its simulated speed."""
    names = [q.name for q in ten.queues]
    models = [m.name for m in spec.gpu_models] or ["V100"]
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(2, 16))):
        t += draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, 2.5, 10.0]))
        kind = draw(st.sampled_from(["whole", "whole", "whole", "multi", "frac", "cpu"]))
        tasks = draw(st.sampled_from([1, 1, 1, 2, 3]))
        cpu = draw(st.sampled_from([0, 0, G, 4 * G]))
        mem = draw(st.sampled_from([0, 0, 8_000, 32_000]))
        pinned = frozenset([draw(st.sampled_from(models))]) if tasks > 1 else frozenset()
        if kind == "cpu":
            t_req = TaskRequest(0, 1000, 0, max(cpu, 500), mem)
        elif kind == "frac":
            t_req = TaskRequest(1, draw(st.sampled_from([250, 500, 750])), 0, cpu, mem, pinned)
        else:
            gpus = 1 if kind == "whole" else draw(st.sampled_from([2, 2, 4, 8]))
            t_req = TaskRequest(gpus, 1000, 0, cpu, mem, pinned)
        jobs.append(
            job(
                f"j{i:02d}",
                t,
                draw(st.sampled_from([1.0, 5.0, 10.0, 30.0])),
                t_req,
                tasks=tasks,
                gang_min=draw(st.integers(0, tasks)) if partial and tasks > 1 else 0,
                queue=draw(st.sampled_from(names)),
                priority_class=draw(st.sampled_from(["normal", "high", "spot"])),
            )
        )
    return jobs


def admissible(spec: ClusterSpec, ten: TenancySpec, jobs: list[Job]) -> list[Job]:
    """The jobs that could run alone on the empty cluster under their queues' quotas.

    Checks ``check_admissible`` against the oracle on the way: a job passes it exactly when its
    queue could take its whole demand with nothing else running (on some model it may use).
    """
    ledger = Ledger(ten)
    models = [m.name for m in spec.gpu_models]
    out = []
    for j in jobs:
        try:
            check_feasible(spec, [j])
        except ImpossibleJobError:
            continue
        q = ten.queue_of(j)
        allowed = ledger.allowed_models(q, j, models)
        oracle = ledger.admits(q, whole_demand(j)) and allowed != []
        if oracle and allowed is not None:
            # Where its quota allows it, it must fit too (check_admissible looks at that as well:
            # see test_simulate_refuses_a_job_its_allowed_models_cannot_hold).
            nodes = tuple(n for n in spec.nodes if n.gpu_model and n.gpu_model.name in allowed)
            try:
                check_feasible(ClusterSpec("allowed", nodes), [j])
            except (ImpossibleJobError, SpecError):
                oracle = False
        try:
            check_admissible(spec, [j], Setting(ten))
        except ImpossibleJobError:
            assert not oracle, f"check_admissible refuses {j}, which {q} can admit"
            continue
        assert oracle, f"check_admissible passes {j}, which {q} can never admit"
        out.append(j)
    return out


@st.composite
def setups(draw, partial: bool = True) -> tuple[ClusterSpec, TenancySpec, list[Job]]:  # type: ignore[no-untyped-def]
    spec = draw(small_clusters())
    ten = draw(tenancies(spec))
    jobs = draw(quota_jobs(spec, ten, partial))
    kept = admissible(spec, ten, jobs)
    assume(len(kept) >= 2)
    event(f"jobs kept: {'some' if len(kept) < len(jobs) else 'all'}")
    if any(r.startswith("gpu:") for q in ten.queues for r in q.nominal):
        event("per-model quotas")
    return spec, ten, kept


# simulate() collects garbage before every run (it pays off on million-job replays); on these
# tiny runs inside Hypothesis that is most of the time and changes no result, so the
# properties run without it.
_NO_GC = SimpleNamespace(collect=lambda *a: 0, freeze=lambda: None, unfreeze=lambda: None)


def sim(*args, **kw):  # type: ignore[no-untyped-def]
    """``simulate`` without its garbage collection."""
    with mock.patch.object(engine, "gc", _NO_GC) if hasattr(engine, "gc") else nullcontext():
        return simulate(*args, **kw)


POLICIES = [
    PolicySet(q, p, strict) for q in ("fifo", "priority") for p in ("best-fit", "first-fit")
    for strict in (False, True)
]  # fmt: skip


def usage_violations(spec: ClusterSpec, ten: TenancySpec, jobs: list[Job], res) -> list[str]:  # type: ignore[no-untyped-def]
    """Limits broken at any start time, with usage recomputed from the simulated records."""
    rec = res.records
    by_id = {j.id: j for j in jobs}
    ledger = Ledger(ten)
    per_model = any(r.startswith("gpu:") for r in ledger.resources)
    held_by = []
    for i, jid in enumerate(rec.ids):
        j = by_id[jid]
        placed, milli = int(rec.tasks[i]), int(rec.gpu_milli[i])
        model = None
        if per_model and milli:
            speed = j.runtime * j.tasks / placed / (rec.finish[i] - rec.start[i])
            model = SPEED_MODEL[min(SPEED_MODEL, key=lambda s: abs(s - speed))]
            assert not j.task.gpu_models or model in j.task.gpu_models
        held_by.append((ten.queue_of(j), record_demand(j, placed, milli, model)))
    out = []
    for t in np.unique(rec.start):
        ledger = Ledger(ten)
        for i, (q, d) in enumerate(held_by):
            if rec.start[i] <= t < rec.finish[i]:
                ledger.charge(q, d)
        out += [f"t={t}: {v}" for v in ledger.violations()]
    return out


@settings(FAST, max_examples=80)
@given(
    setup=setups(),
    policy=st.sampled_from(POLICIES),
    interval=st.sampled_from([0.0, 0.0, 7.0]),
    seed=st.integers(0, 2**16),
)
def test_simulated_usage_stays_within_quotas_and_every_job_finishes(  # type: ignore[no-untyped-def]
    setup, policy, interval, seed
) -> None:
    spec, ten, jobs = setup
    res = sim(spec, jobs, policy, seed=seed, tenancy=ten, cycle_interval=interval)
    assert res.unfinished == 0 and res.finished == len(jobs), res.records.reason
    assert usage_violations(spec, ten, jobs, res) == []


@settings(FAST, max_examples=30)
@given(
    setup=setups(),
    policy=st.sampled_from(
        [*POLICIES, PolicySet("fifo", "random"), PolicySet("priority", "random", True)]
    ),
    seed=st.integers(0, 2**16),
)
def test_same_seed_same_start_times(setup, policy, seed) -> None:  # type: ignore[no-untyped-def]
    spec, ten, jobs = setup
    a = sim(spec, jobs, policy, seed=seed, tenancy=ten).records
    b = sim(spec, jobs, policy, seed=seed, tenancy=ten).records
    assert np.array_equal(a.start, b.start, equal_nan=True)
    assert np.array_equal(a.tasks, b.tasks)


@st.composite
def unbound(draw) -> tuple[ClusterSpec, TenancySpec, list[Job]]:  # type: ignore[no-untyped-def]
    """One queue whose nominal is the whole cluster, and jobs that start with all their tasks
    (a partial gang is charged its whole demand: see test_a_partial_gang_is_charged_...)."""
    spec = draw(small_clusters(healthy=False))
    nodes = spec.nodes
    whole = {
        GPU: sum(n.gpus for n in nodes) * G,
        CPU: sum(n.cpu_milli for n in nodes),
        MEMORY: sum(n.memory_mib for n in nodes),
    }
    ten = tenancy(queue("everyone", nominal=whole))
    jobs = []
    for j in draw(quota_jobs(spec, ten, partial=False)):
        try:
            check_feasible(spec, [j])
        except ImpossibleJobError:
            continue
        jobs.append(j)
    return spec, ten, jobs


@settings(FAST, max_examples=50)
@given(setup=unbound(), policy=st.sampled_from(POLICIES), seed=st.integers(0, 2**16))
def test_quotas_that_never_bind_change_nothing(setup, policy, seed) -> None:  # type: ignore[no-untyped-def]
    spec, ten, jobs = setup
    plain = sim(spec, jobs, policy, seed=seed).records
    quota = sim(spec, jobs, policy, seed=seed, tenancy=ten).records
    assert np.array_equal(plain.start, quota.start, equal_nan=True)
    assert np.array_equal(plain.finish, quota.finish, equal_nan=True)
    assert np.array_equal(plain.tasks, quota.tasks)


ops_lists = st.lists(
    st.tuples(
        st.sampled_from(["submit", "submit", "cycle", "release", "remove"]), st.integers(0, 999)
    ),
    max_size=30,
)


@settings(FAST, max_examples=100)
@given(
    setup=setups(),
    ops=ops_lists,
    queue_order=st.sampled_from(["fifo", "priority"]),
    place=st.sampled_from(["best-fit", "first-fit", "worst-fit", "random"]),
    strict=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_cycles_admit_within_quota_and_leave_nothing_admissible_waiting(  # type: ignore[no-untyped-def]
    setup, ops, queue_order, place, strict, seed
) -> None:
    """Random submits, cycles, releases and removals, then a drain. Each admission fits its
    queue's quota and lands on models the quota allows; each OverQuota is true when given;
    after each cycle no pending job (skip-ahead), or not the head (strict), could start now."""
    spec, ten, jobs = setup
    s = sched(
        ClusterView(spec),
        order(queue_order),
        placement(place),
        strict=strict,
        tenancy=(ten),
    )
    ledger = Ledger(ten)
    models = [m.name for m in spec.gpu_models]
    queue_of = {j.id: ten.queue_of(j) for j in jobs}
    running: dict[str, tuple[TaskPlacement, ...]] = {}
    placements = {}
    gen = np.random.default_rng(seed)
    nxt = 0
    tail = [("submit", 0)] * len(jobs) + [("cycle", 0), ("release", 0)] * (2 * len(jobs) + 2)
    for kind, arg in [*ops, *tail]:
        if kind == "submit" and nxt < len(jobs):
            s.submit(jobs[nxt])
            nxt += 1
        elif kind == "remove" and len(s):
            pending = sorted(j.id for j in s.pending_jobs())
            assert s.remove(pending[arg % len(pending)])
        elif kind == "release" and running:
            jid = sorted(running)[arg % len(running)]
            ledger.refund(queue_of[jid], placed_demand(spec, running.pop(jid)))
            s.release(placements.pop(jid), jid)
        elif kind == "cycle":
            for d in s.cycle(gen):
                q = queue_of[d.job.id]
                allowed = ledger.allowed_models(q, d.job, models)
                fits_quota = ledger.admits(q, whole_demand(d.job)) and allowed != []
                if isinstance(d, Admit):
                    assert fits_quota, f"{d.job.id} admitted over the quota of {q}"
                    tasks = d.placement.tasks
                    if allowed is not None:
                        on_models = {spec.nodes[tp.node].gpu_model.name for tp in tasks}  # type: ignore[union-attr]
                        assert on_models <= set(allowed), (d.job.id, on_models, allowed)
                    ledger.charge(q, placed_demand(spec, tasks))
                    if any(ledger.used(q, r) > ledger.nominal(q, r) for r in ledger.resources):
                        event("admit borrowing")
                    running[d.job.id] = tasks
                    placements[d.job.id] = d.placement
                elif isinstance(d.reason, OverQuota):
                    event(f"over quota ({d.reason.limit})")
                    assert d.reason.queue == q and not fits_quota, (d, ledger.usage)
                    name = d.reason.resource
                    model = name[len("gpu:") :] if name.startswith("gpu:") else None
                    assert d.reason.need == whole_demand(d.job, model)[name]
                else:
                    event("no capacity" if allowed is None else "no room on allowed models")
                    assert fits_quota, f"{d.job.id}: {d.reason}, but it is over quota"
            assert ledger.violations() == []
            pending = s.pending_jobs()
            for j in pending[:1] if strict else pending:
                assert not could_start(s.view, ledger, queue_of[j.id], j, models), j.id
            for j in pending:
                why = s.reason(j.id)
                if isinstance(why, OverQuota):  # still true, however long ago it was found
                    q = queue_of[j.id]
                    assert why.queue == q
                    allowed = ledger.allowed_models(q, j, models)
                    assert not ledger.admits(q, whole_demand(j)) or allowed == [], (j.id, why)
                elif isinstance(why, HeadOfLine):
                    assert strict and why.head == pending[0].id != j.id
    assert len(s) == 0, [(j.id, s.reason(j.id)) for j in s.pending_jobs()]


def could_start(view: ClusterView, ledger: Ledger, q: str, j: Job, models: list[str]) -> bool:
    """Would ``j`` be admitted now: its queue takes its whole demand, and enough of its tasks
    fit on the nodes of the models the quota allows it?"""
    allowed = ledger.allowed_models(q, j, models)
    if not ledger.admits(q, whole_demand(j)) or allowed == []:
        return False
    k = view.fit_counts(j.task, j.tasks)
    if allowed is not None:
        k = k * view.model_ok(frozenset(allowed))
    return int(k.sum()) >= j.min_tasks
