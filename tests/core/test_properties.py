"""Property tests: the invariants of placement, the scheduling cycle and the simulator.

Random clusters (1-6 nodes, 0-8 GPUs, mixed models, small racks and NVLink domains, some
unhealthy nodes) and random jobs (whole, multi-GPU, fractional with GPU memory, CPU-only,
gangs with a minimum, model constraints) go through every queue order and placement, strict
and skip-ahead, with random interleavings of submit, cycle, release and remove. After every step the
view must equal an independent recomputation from the running placements.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as _hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from builders import (
    MODELS,
    PLACEMENTS,
    QUEUE_ORDERS,
    cluster,
    expected,
    job,
    node,
    order,
    placement,
    states_equal,
    summary,
)
from suanli.core.decisions import Admit, NoCapacity, Skip
from suanli.core.gang import place_job
from suanli.core.model import MILLI, ClusterSpec, GpuModel, Job, TaskRequest
from suanli.core.scheduler import Scheduler
from suanli.core.view import ClusterView, TaskPlacement
from suanli.sim.engine import ImpossibleJobError, PolicySet, check_feasible, simulate

FAST = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ------------------------------------------------------------------ strategies


@st.composite
def clusters(draw, models: tuple[GpuModel, ...] = MODELS) -> ClusterSpec:  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 6))
    n_racks = draw(st.integers(1, 2))
    nodes = []
    for i in range(n):
        nodes.append(
            node(
                f"n{i}",
                draw(st.integers(0, 8)),
                draw(st.sampled_from(models)),
                cpu=draw(st.sampled_from([8_000, 32_000, 64_000])),
                mem=draw(st.sampled_from([64_000, 256_000])),
                rack=f"r{draw(st.integers(0, n_racks - 1))}",
                domain=draw(st.sampled_from(["", "", "d0", "d1"])),
                healthy=draw(st.sampled_from([True, True, True, False])),
            )
        )
    return cluster(*nodes)


@st.composite
def task_requests(draw) -> TaskRequest:  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(["whole", "whole", "multi", "frac", "frac", "cpu"]))
    cpu = draw(st.sampled_from([0, 0, 1_000, 4_000, 16_000]))
    mem = draw(st.sampled_from([0, 0, 8_000, 64_000]))
    models = frozenset(draw(st.sampled_from([(), (), (), ("V100",), ("A100", "T4")])))
    if kind == "whole":
        return TaskRequest(1, MILLI, 0, cpu, mem, models)
    if kind == "multi":
        return TaskRequest(draw(st.integers(2, 8)), MILLI, 0, cpu, mem, models)
    if kind == "frac":
        milli = draw(st.sampled_from([100, 250, 300, 500, 750, 999]))
        gmem = draw(st.sampled_from([0, 0, 4_000, 16_000, 40_000]))
        return TaskRequest(1, milli, gmem, cpu, mem, models)
    return TaskRequest(0, MILLI, 0, max(cpu, 500), mem, models)


@st.composite
def job_lists(draw, max_jobs: int = 12) -> list[Job]:  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, max_jobs))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 2.5, 10.0]))
        tasks = draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
        gang_min = draw(st.integers(0, tasks)) if tasks > 1 else 0
        jobs.append(
            job(
                f"j{i}",
                t,
                draw(st.sampled_from([0.0, 5.0, 10.0, 30.0, 100.0])),
                draw(task_requests()),
                tasks=tasks,
                gang_min=gang_min,
                priority_class=draw(st.sampled_from(["normal", "high", "spot"])),
            )
        )
    return jobs


ops_lists = st.lists(
    st.tuples(
        st.sampled_from(["submit", "submit", "cycle", "release", "remove"]), st.integers(0, 1_000)
    ),
    min_size=1,
    max_size=40,
)

# ------------------------------------------------------------------ checks


def event(name: str) -> None:
    """Count ``name`` in Hypothesis' statistics (a no-op when run outside a Hypothesis test)."""
    try:
        _hypothesis_event(name)
    except InvalidArgument:
        pass


def check_view(
    view: ClusterView, spec: ClusterSpec, running: dict[str, tuple[TaskPlacement, ...]]
) -> None:
    got = summary(view)
    assert got == expected(spec, [tp for tps in running.values() for tp in tps])
    for key in ("gpu_free_milli", "gpu_free_mem"):
        assert all(x >= 0 for row in got[key] for x in row), key  # type: ignore[union-attr]
    for key in ("free_cpu", "free_mem", "node_full_free", "node_free_milli"):
        assert min(got[key]) >= 0, key  # type: ignore[arg-type]


def check_task_placement(view: ClusterView, spec: ClusterSpec, j: Job, tp: TaskPlacement) -> None:
    t = j.task
    nd = spec.nodes[tp.node]
    assert nd.healthy
    if t.gpu_models:
        assert nd.gpu_model is not None and nd.gpu_model.name in t.gpu_models
    assert len(set(tp.gpus)) == len(tp.gpus)
    assert all(0 <= g < nd.gpus for g in tp.gpus)
    assert (tp.cpu_milli, tp.memory_mib) == (t.cpu_milli, t.memory_mib)
    if t.gpus == 0:
        assert tp.gpus == ()
    elif t.fractional:
        assert len(tp.gpus) == 1
        assert (tp.gpu_milli, tp.gpu_memory_mib) == (t.gpu_milli, t.gpu_memory_mib)
    else:
        assert len(tp.gpus) == t.gpus
        assert tp.gpu_milli == MILLI and tp.gpu_memory_mib == nd.gpu_model.memory_mib  # type: ignore[union-attr]


def fits_now(view: ClusterView, j: Job, pol) -> bool:  # type: ignore[no-untyped-def]
    """What-if: would ``j`` be placed on the view as it is? Leaves the view exactly as it was."""
    before = view.state()
    mark = view.checkpoint()
    p, reason, _ = place_job(view, j, pol, np.random.default_rng(12345))
    if p is None:
        assert states_equal(before, view.state()), "a failed placement changed the view"
    view.rollback(mark)
    assert states_equal(before, view.state()), "rollback did not restore the view"
    return p is not None


def signature(d) -> tuple:  # type: ignore[no-untyped-def]
    if isinstance(d, Admit):
        return (
            "admit",
            d.job.id,
            tuple((tp.node, tp.gpus, tp.gpu_milli) for tp in d.placement.tasks),
        )
    return ("skip", d.job.id, d.reason)


def run_trace(
    spec: ClusterSpec,
    jobs: list[Job],
    ops: list[tuple[str, int]],
    queue: str,
    place: str,
    strict: bool,
    seed: int,
    check: bool = True,
) -> list[tuple]:
    """Drive a Scheduler through ``ops``, then submit the rest and alternate cycles and releases.

    Returns every decision's signature (for the same-seed comparison)."""
    view = ClusterView(spec)
    pol = placement(place)
    s = Scheduler(view, order(queue), pol, strict=strict)
    rng = np.random.default_rng(seed)
    running: dict[str, tuple[TaskPlacement, ...]] = {}
    placements = {}
    out: list[tuple] = []
    nxt = 0
    # After the random part: submit what is left, then alternate cycles and releases.
    tail = [("submit", 0)] * len(jobs) + [("cycle", 0), ("release", 0)] * (len(jobs) + 1)
    for kind, arg in list(ops) + tail + [("cycle", 0)]:
        if kind == "submit":
            if nxt == len(jobs):
                continue
            s.submit(jobs[nxt])
            nxt += 1
        elif kind == "remove":
            pending = sorted(j.id for j in s.pending_jobs())
            if pending:
                assert s.remove(pending[arg % len(pending)])
                event("remove")
        elif kind == "release":
            if not running:
                continue
            jid = sorted(running)[arg % len(running)]
            event("release")
            del running[jid]
            s.release(placements.pop(jid), jid)
        else:
            decisions = s.cycle(rng)
            out.extend(signature(d) for d in decisions)
            if check:
                check_cycle(s, spec, decisions, running, placements, pol)
        if check:
            check_view(view, spec, running)
    return out


def check_cycle(s, spec, decisions, running, placements, pol) -> None:  # type: ignore[no-untyped-def]
    view = s.view
    pending = s.pending_jobs()
    pending_ids = {j.id for j in pending}
    for d in decisions:
        j = d.job
        if isinstance(d, Admit):
            n = len(d.placement.tasks)
            assert j.min_tasks <= n <= j.tasks, (j, n)
            if j.gang_min == 0:
                assert n == j.tasks
            for tp in d.placement.tasks:
                check_task_placement(view, spec, j, tp)
            assert j.id not in running and j.id not in pending_ids
            running[j.id] = d.placement.tasks
            placements[j.id] = d.placement
            event("admit")
            if len(d.placement.nodes) > 1:
                event("admit over several nodes")
            if j.task.fractional:
                event("admit fractional")
            if n < j.tasks:  # a partial gang took all there was: no further task fits now
                assert int(view.fit_counts(j.task).sum()) == 0
                event("admit partial gang")
        else:
            assert isinstance(d, Skip) and isinstance(d.reason, NoCapacity)
            event("skip")
            r = d.reason
            assert j.id in pending_ids
            assert r.need_tasks == j.min_tasks
            assert r.fit_tasks < r.need_tasks and r.largest_block <= r.fit_tasks
    if s.strict:
        if pending:
            head = pending[0]
            # Nothing behind the head started, and the head itself does not fit.
            key = s.order.key
            ctx = s.ctx
            for d in decisions:
                if isinstance(d, Admit):
                    assert key(d.job, ctx) < key(head, ctx)
            assert not fits_now(view, head, pol), f"strict: head {head.id} fits but waits"
    else:
        # The skip-ahead guarantee (and what keeps the blocked-shape cache honest): at the end
        # of a cycle no pending job fits the free capacity.
        for j in pending:
            assert not fits_now(view, j, pol), f"skip-ahead: {j.id} fits but is left pending"
    # The shape table's counts of every tracked shape are exact (the reference: fit_counts).
    table = s.table
    table.flush()
    for sid in range(len(table)):
        if not table.is_tracked(sid):
            continue
        task, tasks, _ = table.keys[sid]
        expect = view.fit_counts(task, tasks)
        assert (table.counts(sid) == expect).all(), f"shape {sid}: stale per-node counts"
        assert table.total(sid) == expect.sum(), f"shape {sid}: stale total"


# ------------------------------------------------------------------ properties


@FAST
@given(
    spec=clusters(),
    jobs=job_lists(),
    ops=ops_lists,
    queue=st.sampled_from(QUEUE_ORDERS),
    place=st.sampled_from(PLACEMENTS),
    seed=st.integers(0, 2**16),
)
def test_skip_ahead_cycle_invariants(spec, jobs, ops, queue, place, seed) -> None:
    run_trace(spec, jobs, ops, queue, place, False, seed)


@FAST
@given(
    spec=clusters(),
    jobs=job_lists(),
    ops=ops_lists,
    queue=st.sampled_from(QUEUE_ORDERS),
    place=st.sampled_from(PLACEMENTS),
    seed=st.integers(0, 2**16),
)
def test_strict_cycle_invariants(spec, jobs, ops, queue, place, seed) -> None:
    run_trace(spec, jobs, ops, queue, place, True, seed)


@settings(FAST, max_examples=50)
@given(
    spec=clusters(),
    jobs=job_lists(),
    ops=ops_lists,
    queue=st.sampled_from(QUEUE_ORDERS),
    place=st.sampled_from(PLACEMENTS),
    strict=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_same_seed_same_decisions(spec, jobs, ops, queue, place, strict, seed) -> None:
    a = run_trace(spec, jobs, ops, queue, place, strict, seed, check=False)
    b = run_trace(spec, jobs, ops, queue, place, strict, seed, check=False)
    assert a == b


@FAST
@given(
    spec=clusters(),
    pre=st.lists(job_lists(max_jobs=6), min_size=1, max_size=1),
    probe=job_lists(max_jobs=3),
    place=st.sampled_from(PLACEMENTS),
    seed=st.integers(0, 2**16),
)
def test_place_job_is_all_or_nothing_and_what_if_is_exact(spec, pre, probe, place, seed) -> None:
    view = ClusterView(spec)
    pol = placement(place)
    rng = np.random.default_rng(seed)
    held: list[TaskPlacement] = []
    for j in pre[0]:
        before = view.state()
        p, reason, k = place_job(view, j, pol, rng)
        if p is None:
            assert states_equal(before, view.state())
            assert reason is not None and reason.fit_tasks == int(k.sum()) < j.min_tasks
        else:
            assert j.min_tasks <= len(p.tasks) <= j.tasks
            held.extend(p.tasks)
        assert summary(view) == expected(spec, held)
    # A what-if of several placements, nested, restores the view exactly.
    base = view.state()
    outer = view.checkpoint()
    for j in probe:
        inner = view.checkpoint()
        place_job(view, j, pol, rng)
        (view.commit if j.tasks % 2 else view.rollback)(inner)
    view.rollback(outer)
    assert states_equal(base, view.state())
    assert summary(view) == expected(spec, held)


def _feasible(spec: ClusterSpec, jobs: list[Job]) -> list[Job]:
    ok = []
    for j in jobs:
        try:
            check_feasible(spec, [j])
        except ImpossibleJobError:
            continue
        ok.append(j)
    return ok


@settings(FAST, max_examples=50)  # simulate() is the slowest step (it collects garbage per run)
@given(
    model=st.sampled_from(MODELS),
    data=st.data(),
    queue=st.sampled_from(QUEUE_ORDERS),
    place=st.sampled_from(PLACEMENTS),
    strict=st.booleans(),
    interval=st.sampled_from([0.0, 0.0, 7.0]),
    seed=st.integers(0, 2**16),
)
def test_simulated_times_are_consistent(model, data, queue, place, strict, interval, seed) -> None:
    spec = data.draw(clusters(models=(model,)))
    jobs = _feasible(spec, data.draw(job_lists()))
    ps = PolicySet(queue, place, strict)
    res = simulate(spec, jobs, ps, seed=seed, cycle_interval=interval)
    rec = res.records
    by_id = {j.id: j for j in jobs}
    assert res.finished == len(jobs) and res.unfinished == 0
    for i, jid in enumerate(rec.ids):
        j = by_id[jid]
        submit, start, finish = rec.submit[i], rec.start[i], rec.finish[i]
        assert submit == j.submit
        assert submit <= start <= finish
        placed = int(rec.tasks[i])
        assert j.min_tasks <= placed <= j.tasks
        speed = model.speed if j.task.gpus else 1.0
        assert np.isclose(
            finish - start, j.runtime * j.tasks / placed / speed, rtol=1e-9, atol=1e-9
        )
        if interval:
            assert start % interval == 0
    assert np.all(res.series.allocation <= 1.0 + 1e-12) and np.all(res.series.allocation >= 0)
    again = simulate(spec, jobs, ps, seed=seed, cycle_interval=interval)
    assert np.array_equal(again.records.start, rec.start, equal_nan=True)
    assert np.array_equal(again.records.finish, rec.finish, equal_nan=True)
    assert np.array_equal(again.records.tasks, rec.tasks)


@pytest.mark.parametrize("strict", [False, True], ids=["skip-ahead", "strict"])
@pytest.mark.parametrize("place", ["best-fit", "random"])
def test_many_shapes_beyond_the_initial_table(place: str, strict: bool) -> None:
    """80 distinct shapes (more than the shape table starts with), most of them blocked at
    once, then released a few at a time: the same invariants hold throughout."""
    spec = cluster(node("a", 4), node("b", 4, rack="r1"))
    jobs = [
        job(
            f"j{i:03d}",
            float(i),
            10.0,
            TaskRequest(1 + i % 4, MILLI, 0, 100 + i, 0),
            tasks=1 + i % 2,
        )
        for i in range(80)
    ]
    ops = [("submit", 0)] * 80 + [("cycle", 0)] + [("release", i) for i in range(3)]
    ops += [("cycle", 0), ("release", 1)] * 10
    out = run_trace(spec, jobs, ops, "fifo", place, strict, 0)
    assert sum(1 for o in out if o[0] == "admit") == 80
