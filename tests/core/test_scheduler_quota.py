"""The scheduler under quotas: nominal, borrowing and lending in cohorts, per-model GPU quotas,
quota-blocked lanes in skip-ahead and strict mode, and the simulator's admission checks.

Unit cases on small clusters; the properties on random clusters, queues and job streams are
in test_scheduler_quota_properties.py.
"""

from __future__ import annotations

import re

import pytest

from builders import (
    A100,
    cluster,
    cpu_only,
    frac,
    gpus_cluster,
    job,
    node,
    order,
    placement,
    rng,
    states_equal,
    task,
)
from quota_builders import (
    H100,
    G,
    Ledger,
    admitted,
    held,
    ids,
    qsched,
    queue,
    run_one,
    tenancy,
    whole_demand,
)
from suanli.core.admission.quota import QuotaAdmission
from suanli.core.builder import Setting, check_admissible
from suanli.core.decisions import Admit, HeadOfLine, NoCapacity, Skip
from suanli.core.model import Job, SpecError
from suanli.core.scheduler import Scheduler
from suanli.core.tenancy import (
    CPU,
    GPU,
    MEMORY,
    OverQuota,
    QueueSpec,
    gpu_of,
)
from suanli.core.view import ClusterView
from suanli.sim.engine import ImpossibleJobError, PolicySet, simulate

MODES = {"skip-ahead": False, "strict": True}


# ------------------------------------------------------------------ a queue alone: its nominal

# (id, the queue "q" (no cohort), jobs that start, the job that then waits, its reason)
NOMINAL = [
    (
        "gpu",
        queue("q", nominal={GPU: 2 * G}),
        [job("a", 0, queue="q"), job("b", 1, queue="q")],
        job("c", 2, queue="q"),
        OverQuota("q", GPU, G, 0, "nominal"),
    ),
    (
        "gang",
        queue("q", nominal={GPU: 3 * G}),
        [job("a", 0, gpus=2, queue="q")],
        job("b", 1, tasks=2, queue="q"),
        OverQuota("q", GPU, 2 * G, G, "nominal"),
    ),
    (
        "fractional",
        queue("q", nominal={GPU: G}),
        [job("a", 0, t=frac(600), queue="q")],
        job("b", 1, t=frac(600), queue="q"),
        OverQuota("q", GPU, 600, 400, "nominal"),
    ),
    (
        "cpu",
        queue("q", nominal={CPU: 4 * G}),
        [job("a", 0, t=cpu_only(3 * G), queue="q")],
        job("b", 1, t=cpu_only(3 * G), queue="q"),
        OverQuota("q", CPU, 3 * G, G, "nominal"),
    ),
    (
        "memory",
        queue("q", nominal={MEMORY: 10_240}),
        [job("a", 0, t=task(1, mem=6_144), queue="q")],
        job("b", 1, t=task(1, mem=6_144), queue="q"),
        OverQuota("q", MEMORY, 6_144, 4_096, "nominal"),
    ),
    (
        "borrowing-limit-without-a-cohort",  # nothing to borrow from: the nominal binds
        queue("q", nominal={GPU: 2 * G}, borrow={GPU: 4 * G}),
        [job("a", 0, gpus=2, queue="q")],
        job("b", 1, queue="q"),
        OverQuota("q", GPU, G, 0, "nominal"),
    ),
    (
        "zero-nominal",
        queue("q", nominal={GPU: 0}),
        [],
        job("a", 0, queue="q"),
        OverQuota("q", GPU, G, 0, "nominal"),
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "q, started, waits, reason", [r[1:] for r in NOMINAL], ids=[r[0] for r in NOMINAL]
)
def test_a_queue_without_a_cohort_holds_at_most_its_nominal(
    q: QueueSpec, started: list[Job], waits: Job, reason: OverQuota, mode: str
) -> None:
    spec = gpus_cluster(8, 8)  # capacity never binds
    s = qsched(spec, q, strict=MODES[mode])
    d = run_one(s, *started, waits)
    assert ids(d) == [("Admit", j.id) for j in started] + [("Skip", waits.id)]
    assert d[-1] == Skip(waits, reason)
    assert s.reason(waits.id) == reason
    # What runs, recomputed from the placements, plus what is still available is the nominal.
    assert held(spec, d).get(reason.resource, 0) + reason.available == q.nominal[reason.resource]
    # Nothing changed: skip-ahead passes the lane over silently; strict reports its head again.
    assert s.cycle(rng()) == ([Skip(waits, reason)] if MODES[mode] else [])
    assert s.reason(waits.id) == reason
    if started:
        s.release(d[0].placement, d[0].job.id)  # a release in its own queue lets it start
        assert ids(s.cycle(rng())) == [("Admit", waits.id)]
        assert s.reason(waits.id) is None and len(s) == 0


def test_resources_no_queue_names_are_not_governed() -> None:
    spec = gpus_cluster(8)
    s = qsched(spec, queue("q", nominal={GPU: G}))
    d = run_one(
        s,
        job("cpu", 0, t=cpu_only(60 * G, 400_000), queue="q"),
        job("gpu", 1, t=task(1, cpu=G, mem=1_000), queue="q"),
        job("more", 2, t=cpu_only(G), queue="q"),
    )
    assert ids(d) == [("Admit", "cpu"), ("Admit", "gpu"), ("Admit", "more")]


# (reason, its text)
TEXTS = [
    (
        OverQuota("q", GPU, 2 * G, 500, "nominal"),
        "over quota: queue q needs 2 GPUs of gpu, can take 0.5 more (nominal)",
    ),
    (
        OverQuota("q", CPU, 3 * G, G, "cohort"),
        "over quota: queue q needs 3 CPUs of cpu, can take 1 more (cohort)",
    ),
    (
        OverQuota("q", MEMORY, 6_144, 4_096, "borrowing limit", "queue"),
        "over quota: queue q needs 6 GiB of memory, can take 4 more (borrowing limit)",
    ),
    (
        OverQuota("q", gpu_of("H100"), 8 * G, 0, "nominal"),
        "over quota: queue q needs 8 GPUs of gpu:H100, can take 0 more (nominal)",
    ),
]


@pytest.mark.parametrize("reason, text", TEXTS, ids=[r.resource for r, _ in TEXTS])
def test_over_quota_text(reason: OverQuota, text: str) -> None:
    assert str(reason) == text


# ------------------------------------------------------------------ cohorts: borrowing and lending


def pair(a: dict | None = None, b: dict | None = None) -> tuple[QueueSpec, QueueSpec]:  # type: ignore[type-arg]
    """Queues a and b in cohort c, 4 GPUs of nominal each unless told otherwise."""
    base = {"nominal": {GPU: 4 * G}}
    return queue("a", "c", **{**base, **(a or {})}), queue("b", "c", **{**base, **(b or {})})


# (id, queues, then twice: (queue, one-GPU jobs it submits), how many start, why the next waits)
COHORT = [
    (
        "borrows-idle-quota",
        pair(),
        (("a", 10), 8, OverQuota("a", GPU, G, 0, "cohort")),
        (("b", 2), 0, OverQuota("b", GPU, G, 0, "cohort")),  # lent: no preemption takes it back
    ),
    (
        "borrowing-limit-binds",
        pair(a={"borrow": {GPU: 2 * G}}),
        (("a", 10), 6, OverQuota("a", GPU, G, 0, "borrowing limit", "queue")),
        (("b", 3), 2, OverQuota("b", GPU, G, 0, "cohort")),
    ),
    (
        "lending-limit-keeps-a-reserve",  # b lends 1 of its 4: a gets 5, b keeps 3 for itself
        pair(b={"lend": {GPU: G}}),
        (("a", 10), 5, OverQuota("a", GPU, G, 0, "cohort")),
        (("b", 4), 3, OverQuota("b", GPU, G, 0, "cohort")),
    ),
    (
        "an-idle-reserve-is-not-lent",  # a lends nothing: b cannot go above its own 4
        pair(a={"lend": {GPU: 0}}),
        (("b", 10), 4, OverQuota("b", GPU, G, 0, "cohort")),
        (("a", 5), 4, OverQuota("a", GPU, G, 0, "cohort")),
    ),
    (
        "no-nominal-runs-on-borrowed-quota",
        pair(a={"nominal": {GPU: 0}}),
        (("a", 10), 4, OverQuota("a", GPU, G, 0, "cohort")),
        (("b", 1), 0, OverQuota("b", GPU, G, 0, "cohort")),
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "queues, first, second", [r[1:] for r in COHORT], ids=[r[0] for r in COHORT]
)
def test_cohort_borrowing_and_lending(queues, first, second, mode: str) -> None:  # type: ignore[no-untyped-def]
    spec = gpus_cluster(8, 8)  # 16 GPUs: capacity never binds
    s = qsched(spec, *queues, strict=MODES[mode])
    ledger = Ledger(tenancy(*queues))
    t = 0.0
    running = {}
    waiting = []
    for (name, n), starts, reason in (first, second):
        jobs = [job(f"{name}{i}", t + i, queue=name) for i in range(n)]
        t += n
        d = run_one(s, *jobs)
        assert ids(d) == [("Admit", j.id) for j in jobs[:starts]] + [("Skip", jobs[starts].id)]
        assert d[-1].reason == reason and s.reason(jobs[starts].id) == reason
        running.update((x.job.id, x.placement) for x in d if isinstance(x, Admit))
        ledger.charge(name, held(spec, d))
        assert ledger.violations() == []
        assert not ledger.admits(name, whole_demand(jobs[starts]))  # the oracle agrees
        if name == first[0][0]:
            # Withdraw the first round's waiting jobs (in strict mode they would block the
            # second round's).
            for j in jobs[starts:]:
                assert s.remove(j.id)
        else:
            waiting = [j.id for j in jobs[starts:]]
    # Once everything running has finished, the second round's waiting jobs all start.
    for jid, p in running.items():
        s.release(p, jid)
    assert admitted(s.cycle(rng())) == waiting and len(s) == 0


# (id, queues a and b of one cohort, GPUs a runs, the gang it asks for next, why it waits)
AVAILABLE = [
    (
        "borrowing-limit",  # a may hold 6: 3 more
        pair(a={"borrow": {GPU: 2 * G}}),
        3,
        job("gang", 1, gpus=2, tasks=2, queue="a"),
        OverQuota("a", GPU, 4 * G, 3 * G, "borrowing limit", "queue"),
    ),
    (
        "cohort",  # the pool is a's 4 and b's 1: 2 left
        pair(b={"nominal": {GPU: 2 * G}, "lend": {GPU: G}}),
        3,
        job("gang", 1, tasks=4, queue="a"),
        OverQuota("a", GPU, 4 * G, 2 * G, "cohort"),
    ),
    (
        "both-bind-the-least-counts",  # 3 more by the borrowing limit, 2 left in the pool
        pair(a={"borrow": {GPU: 2 * G}}, b={"lend": {GPU: G}}),
        3,
        job("gang", 1, gpus=2, tasks=2, queue="a"),
        OverQuota("a", GPU, 4 * G, 2 * G, "borrowing limit", "queue"),
    ),
    (
        "reserve-left-plus-pool",  # a reserves 3 (1 left) and the pool is a's 1: 2 more
        pair(a={"lend": {GPU: G}}, b={"lend": {GPU: 0}}),
        2,
        job("gang", 1, tasks=4, queue="a"),
        OverQuota("a", GPU, 4 * G, 2 * G, "cohort"),
    ),
]


@pytest.mark.parametrize(
    "queues, runs, gang, reason", [r[1:] for r in AVAILABLE], ids=[r[0] for r in AVAILABLE]
)
def test_a_reason_says_how_much_more_the_queue_can_take(queues, runs, gang, reason) -> None:  # type: ignore[no-untyped-def]
    s = qsched(gpus_cluster(8, 8), *queues)
    d = run_one(s, job("run", 0, gpus=runs, queue="a"), gang)
    assert ids(d) == [("Admit", "run"), ("Skip", "gang")]
    assert d[1].reason == reason
    # The oracle agrees: exactly `available` more GPUs fit, one more does not.
    ledger = Ledger(tenancy(*queues))
    ledger.charge("a", held(gpus_cluster(8, 8), d))
    assert ledger.admits("a", {GPU: reason.available})
    assert not ledger.admits("a", {GPU: reason.available + G})


# ------------------------------------------------------------------ per-model GPU quotas

# A100 and H100 nodes alternate, A100 first: first-fit would take A100 without the quota.
MIXED = cluster(node("a0", 8, A100), node("h0", 8, H100), node("a1", 8, A100), node("h1", 8, H100))
H100_ONLY = queue("q", nominal={gpu_of("H100"): 16 * G, gpu_of("A100"): 0})

# (id, jobs of queue q that use up its 16 H100 GPUs)
SIXTEEN = [
    ("one-gpu-jobs", [job(f"j{i:02d}", i, queue="q") for i in range(16)]),
    ("four-gpu-jobs", [job(f"j{i}", i, gpus=4, queue="q") for i in range(4)]),
    ("gang-over-two-nodes", [job("j", 0, gpus=8, tasks=2, queue="q")]),
    (
        "mixed-sizes",
        [
            job("j0", 0, gpus=8, queue="q"),
            job("j1", 1, gpus=4, queue="q"),
            job("j2", 2, gpus=2, queue="q"),
            job("j3", 3, gpus=1, queue="q"),
            job("j4", 4, t=frac(500), tasks=2, queue="q"),
        ],
    ),
]


@pytest.mark.parametrize("place", ["first-fit", "best-fit", "worst-fit"])
@pytest.mark.parametrize("jobs", [r[1] for r in SIXTEEN], ids=[r[0] for r in SIXTEEN])
def test_per_model_quota_places_only_on_allowed_models(jobs: list[Job], place: str) -> None:
    s = qsched(MIXED, H100_ONLY, place=place)
    d = run_one(s, *jobs)
    assert admitted(d) == [j.id for j in jobs]
    assert {tp.node for a in d for tp in a.placement.tasks} <= {1, 3}  # the H100 nodes
    assert held(MIXED, d)[gpu_of("H100")] == 16 * G
    # H100 quota used up: the next job waits over quota, though the A100 nodes are all free.
    late = job("late", 99, queue="q")
    (skip,) = run_one(s, late)
    r = skip.reason
    assert isinstance(r, OverQuota) and s.reason("late") == r
    assert (r.queue, r.need, r.available, r.limit) == ("q", G, 0, "nominal")
    assert r.resource in (gpu_of("H100"), gpu_of("A100"))
    assert s.view.node_full_free.tolist()[0::2] == [8, 8]
    # It starts on H100 once an H100 job finishes.
    s.release(d[0].placement, d[0].job.id)
    (a,) = s.cycle(rng())
    assert isinstance(a, Admit) and a.job.id == "late" and a.placement.nodes[0] in (1, 3)


def test_a_model_whose_quota_cannot_take_the_whole_job_is_left_out() -> None:
    q = queue("q", nominal={gpu_of("H100"): 4 * G, gpu_of("A100"): 4 * G})
    s = qsched(MIXED, q)
    d = run_one(s, job("x", 0, gpus=3, queue="q"), job("y", 1, tasks=4, queue="q"))
    assert admitted(d) == ["x", "y"]
    # x took 3 GPUs of the first A100 node. y's 4 tasks could take the A100 GPU left and 3 on
    # H100, but its whole demand must fit one model's quota: only H100's can take it.
    assert d[0].placement.nodes == (0,)
    assert {tp.node for tp in d[1].placement.tasks} <= {1, 3}
    assert held(MIXED, d) == {
        CPU: 0,
        MEMORY: 0,
        GPU: 7 * G,
        gpu_of("A100"): 3 * G,
        gpu_of("H100"): 4 * G,
    }


def test_a_gang_over_two_allowed_models_is_charged_to_each() -> None:
    spec = cluster(node("a0", 4, A100), node("h0", 4, H100))
    q = queue("q", nominal={gpu_of("H100"): 8 * G, gpu_of("A100"): 8 * G})
    s = qsched(spec, q)
    (a,) = run_one(s, job("x", 0, gpus=4, tasks=2, queue="q"))
    assert isinstance(a, Admit) and a.placement.nodes in ((0, 1), (1, 0))
    quota = s.admissions[0]
    assert isinstance(quota, QuotaAdmission)
    book = quota.book
    usage = dict(zip(book.resources, book.usage[book.index["q"]].tolist(), strict=True))
    assert usage == {gpu_of("A100"): 4 * G, gpu_of("H100"): 4 * G}
    # Each model has 4 GPUs of quota left: another 8-GPU gang fits neither alone.
    (skip,) = run_one(s, job("y", 1, gpus=4, tasks=2, queue="q"))
    assert isinstance(skip.reason, OverQuota) and skip.reason.available == 4 * G
    s.release(a.placement, "x")
    assert admitted(s.cycle(rng())) == ["y"]


def test_the_any_model_gpu_quota_binds_beside_per_model_quotas() -> None:
    q = queue("q", nominal={GPU: 8 * G, gpu_of("H100"): 16 * G, gpu_of("A100"): 16 * G})
    s = qsched(MIXED, q)
    d = run_one(s, *[job(f"j{i}", i, gpus=2, queue="q") for i in range(5)])
    assert ids(d) == [("Admit", f"j{i}") for i in range(4)] + [("Skip", "j4")]
    assert d[-1].reason == OverQuota("q", GPU, 2 * G, 0, "nominal")


@pytest.mark.parametrize("mode", MODES)
def test_no_room_on_the_allowed_models_waits_for_a_release(mode: str) -> None:
    spec = cluster(node("h0", 8, H100), node("a0", 8, A100))
    other = queue("other", nominal={gpu_of("H100"): 8 * G, gpu_of("A100"): 8 * G})
    q = queue("q", nominal={gpu_of("H100"): 8 * G, gpu_of("A100"): 0})
    s = qsched(spec, other, q, strict=MODES[mode])
    (run,) = run_one(s, job("run", 0, gpus=8, queue="other"))
    assert run.placement.nodes == (0,)
    d = run_one(s, job("x", 1, gpus=4, queue="q"))
    assert ids(d) == [("Skip", "x")] and isinstance(d[0].reason, NoCapacity)
    assert s.reason("x") == d[0].reason
    assert s.view.node_full_free.tolist() == [0, 8]  # room on A100, but not for q
    assert s.cycle(rng()) == (d if MODES[mode] else [])
    s.release(run.placement, "run")
    (a,) = s.cycle(rng())
    assert isinstance(a, Admit) and a.placement.nodes == (0,)


@pytest.mark.parametrize("mode", MODES)
def test_an_allowed_node_back_to_health_wakes_a_job_waiting_for_room(mode: str) -> None:
    # The H100 node starts unhealthy; q may use H100 only. Nothing runs, so no release will
    # ever come: the node's return to health is the only event that can start the job.
    spec = cluster(node("a0", 8, A100), node("h0", 8, H100, healthy=False))
    s = qsched(
        spec, queue("q", nominal={gpu_of("H100"): 8 * G, gpu_of("A100"): 0}), strict=MODES[mode]
    )
    assert ids(run_one(s, job("x", 0, gpus=4, queue="q"))) == [("Skip", "x")]
    s.view.set_health(1, True)
    d = s.cycle(rng())
    assert ids(d) == [("Admit", "x")] and d[0].placement.nodes == (1,)


# ------------------------------------------------------------------ blocked lanes


def _three_lanes(strict: bool) -> tuple[Scheduler, list]:  # type: ignore[type-arg]
    """One shape (1 GPU), three lanes: a and p share cohort x (1 GPU each), b is in cohort y
    (2 GPUs). Capacity (16 GPUs) never binds."""
    qs = (
        queue("a", "x", nominal={GPU: G}),
        queue("p", "x", nominal={GPU: G}),
        queue("b", "y", nominal={GPU: 2 * G}),
    )
    s = qsched(gpus_cluster(8, 8), *qs, strict=strict)
    d = run_one(
        s,
        job("p1", 0, queue="p"),
        job("a1", 1, queue="a"),
        job("a2", 2, queue="a"),
        job("b1", 3, queue="b"),
        job("b2", 4, queue="b"),
        job("b3", 5, queue="b"),
    )
    return s, d


def test_a_lane_over_quota_is_skipped_silently_until_a_release_in_its_cohort() -> None:
    s, d = _three_lanes(strict=False)
    cycles = [d]
    # a's lane is over quota; b's lane of the same shape goes ahead of it.
    assert ids(d) == [
        ("Admit", "p1"),
        ("Admit", "a1"),
        ("Skip", "a2"),
        ("Admit", "b1"),
        ("Admit", "b2"),
        ("Skip", "b3"),
    ]
    assert d[2].reason == OverQuota("a", GPU, G, 0, "cohort")
    assert d[5].reason == OverQuota("b", GPU, G, 0, "cohort")
    placements = {x.job.id: x.placement for x in d if isinstance(x, Admit)}
    # Nothing changed (a later job joins a's blocked lane): no decision at all.
    s.submit(job("a3", 6, queue="a"))
    cycles.append(s.cycle(rng()))
    assert s.reason("a2") == OverQuota("a", GPU, G, 0, "cohort")
    # A release in cohort y retries b's lane only.
    s.release(placements["b1"], "b1")
    cycles.append(s.cycle(rng()))
    # A release in cohort x retries a's lane: its head starts, the next one is over quota.
    s.release(placements["p1"], "p1")
    cycles.append(s.cycle(rng()))
    assert [ids(c) for c in cycles[1:]] == [
        [],
        [("Admit", "b3")],
        [("Admit", "a2"), ("Skip", "a3")],
    ]
    assert [len(c) for c in cycles] == [6, 0, 1, 2]
    assert s.reason("a3") == OverQuota("a", GPU, G, 0, "cohort")


def test_strict_a_head_over_quota_blocks_the_line() -> None:
    s, d = _three_lanes(strict=True)
    reason = OverQuota("a", GPU, G, 0, "cohort")
    assert ids(d) == [("Admit", "p1"), ("Admit", "a1"), ("Skip", "a2")]
    assert d[-1].reason == reason and s.reason("a2") == reason
    for other in ("b1", "b2", "b3"):
        assert s.reason(other) == HeadOfLine("a2")
    assert ids(s.cycle(rng())) == [("Skip", "a2")]  # reported in every cycle
    s.release(d[0].placement, "p1")
    d = s.cycle(rng())
    assert ids(d) == [("Admit", "a2"), ("Admit", "b1"), ("Admit", "b2"), ("Skip", "b3")]
    assert s.reason("b3") == OverQuota("b", GPU, G, 0, "cohort")


@pytest.mark.parametrize("mode", MODES)
def test_a_partial_gang_is_charged_its_whole_demand(mode: str) -> None:
    # The quota check takes all of a job's tasks, not its gang minimum: with a quota equal to
    # the cluster, a partial gang that would start without quotas waits.
    spec = gpus_cluster(8)
    jobs = (job("r", 0, gpus=4, queue="q"), job("p", 1, tasks=8, gang_min=2, queue="q"))
    plain = Scheduler(ClusterView(spec), order("fifo"), placement("first-fit"), strict=MODES[mode])
    d = run_one(plain, *jobs)
    assert admitted(d) == ["r", "p"] and len(d[1].placement.tasks) == 4
    s = qsched(spec, queue("q", nominal={GPU: 8 * G}), strict=MODES[mode])
    d = run_one(s, *jobs)
    assert ids(d) == [("Admit", "r"), ("Skip", "p")]
    assert d[1].reason == OverQuota("q", GPU, 8 * G, 4 * G, "nominal")


# ------------------------------------------------------------------ release


def _one_running() -> tuple[Scheduler, Admit]:
    s = qsched(gpus_cluster(4), queue("q", nominal={GPU: 2 * G}))
    (a,) = run_one(s, job("x", 0, gpus=2, queue="q"))
    assert isinstance(a, Admit)
    return s, a


def test_release_needs_the_job_id_with_quotas() -> None:
    s, a = _one_running()
    with pytest.raises(ValueError, match="release needs the job id"):
        s.release(a.placement)


def test_a_refused_release_changes_nothing() -> None:
    # The refusal must come before the view gives the resources back: else the queue stays
    # charged for capacity that is free, and the release with the id then fails.
    s, a = _one_running()
    before = s.view.state()
    with pytest.raises(ValueError):
        s.release(a.placement)
    assert states_equal(before, s.view.state())
    s.release(a.placement, "x")
    assert run_one(s, job("y", 1, gpus=2, queue="q"))[0].job.id == "y"


# ------------------------------------------------------------------ routing and impossible jobs

ORG = tenancy(
    queue("vision", org="ai-lab/vision"),
    queue("nlp", org="/ai-lab/nlp/"),
    queue("lab", org="ai-lab"),
    queue("all"),
)

# (id, tenant, queue the job names, queue it is charged to)
ROUTES = [
    ("named-queue-wins", "ai-lab/vision/x", "nlp", "nlp"),
    ("deepest-org", "ai-lab/vision/x", "default", "vision"),
    ("the-org-itself", "ai-lab/vision", "default", "vision"),
    ("slashes-are-trimmed", "ai-lab/nlp", "default", "nlp"),
    ("parent-org", "ai-lab/speech", "default", "lab"),
    ("a-prefix-is-not-a-subtree", "ai-lab/visionary", "default", "lab"),
    ("catch-all", "elsewhere", "nope", "all"),
]


@pytest.mark.parametrize(
    "tenant, named, expect", [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_queue_of(tenant: str, named: str, expect: str) -> None:
    assert ORG.queue_of(job("j", tenant=tenant, queue=named)) == expect


# (id, queues, the job, the message after "job big can never be admitted: ")
IMPOSSIBLE = [
    (
        "nominal",
        (queue("q", nominal={GPU: 4 * G}),),
        job("big", 1, gpus=8, queue="q"),
        "queue q can never hold 8 GPUs of gpu (its most: 4)",
    ),
    (
        "gang",
        (queue("q", nominal={GPU: 4 * G}),),
        job("big", 1, gpus=2, tasks=3, gang_min=1, queue="q"),
        "queue q can never hold 6 GPUs of gpu (its most: 4)",
    ),
    (
        "borrowing-limit",
        (
            queue("a", "c", nominal={GPU: 4 * G}, borrow={GPU: 2 * G}),
            queue("b", "c", nominal={GPU: 8 * G}),
        ),
        job("big", 1, gpus=7, queue="a"),
        "queue a can never hold 7 GPUs of gpu (its most: 6)",
    ),
    (
        "lending-limit",
        (
            queue("a", "c", nominal={GPU: 2 * G}),
            queue("b", "c", nominal={GPU: 8 * G}, lend={GPU: 3 * G}),
        ),
        job("big", 1, gpus=6, queue="a"),
        "queue a can never hold 6 GPUs of gpu (its most: 5)",
    ),
    (
        "cpu",
        (queue("q", nominal={CPU: 2 * G}),),
        job("big", 1, t=cpu_only(3 * G), queue="q"),
        "queue q can never hold 3 CPUs of cpu (its most: 2)",
    ),
    (
        "memory",
        (queue("q", nominal={MEMORY: 4_096}),),
        job("big", 1, t=task(1, mem=8_192), queue="q"),
        "queue q can never hold 8 GiB of memory (its most: 4)",
    ),
    (
        "per-model",
        (H100_ONLY,),
        job("big", 1, t=task(2, models={"A100"}), queue="q"),
        "queue q can never hold 2 GPUs of gpu:A100 (its most: 0)",
    ),
]


@pytest.mark.parametrize(
    "queues, big, why", [r[1:] for r in IMPOSSIBLE], ids=[r[0] for r in IMPOSSIBLE]
)
def test_simulate_refuses_a_job_its_queue_can_never_admit(queues, big: Job, why: str) -> None:  # type: ignore[no-untyped-def]
    ok = job("ok", 0, t=task(1, cpu=G, mem=1_024), queue=big.queue)
    ten = tenancy(*queues)
    with pytest.raises(
        ImpossibleJobError, match=re.escape(f"job big can never be admitted: {why}")
    ):
        simulate(MIXED, [ok, big], PolicySet(), tenancy=ten)
    check_admissible(MIXED, [ok], Setting(ten))  # the admissible job alone passes


def test_simulate_refuses_a_job_no_queue_serves() -> None:
    ten = tenancy(queue("vision", org="ai-lab/vision", nominal={GPU: 8 * G}))
    lost = job("lost", 0, tenant="ai-lab/speech", queue="speech")
    msg = "job lost: no queue 'speech' and no queue serves tenant 'ai-lab/speech'"
    with pytest.raises(SpecError, match=re.escape(msg)):
        simulate(MIXED, [job("v", 0, tenant="ai-lab/vision/x"), lost], PolicySet(), tenancy=ten)
    s = qsched(MIXED, *ten.queues)
    with pytest.raises(SpecError, match=re.escape(msg)):
        s.submit(lost)
    assert len(s) == 0


def test_simulate_refuses_a_job_its_allowed_models_cannot_hold() -> None:
    # q may hold 16 H100 GPUs, but the cluster has one 8-GPU H100 node: a gang of two 8-GPU
    # tasks fits the cluster (with the A100 node) and fits the quota, but can never be placed
    # where the quota allows. It must be refused up front, not left pending forever.
    spec = cluster(node("h0", 8, H100), node("a0", 8, A100))
    ten = tenancy(queue("q", nominal={gpu_of("H100"): 16 * G, gpu_of("A100"): 0}))
    big = job("big", 0, 10, gpus=8, tasks=2, queue="q")
    with pytest.raises(ImpossibleJobError, match="job big"):
        res = simulate(spec, [big], PolicySet(), tenancy=ten)
        assert res.unfinished == 0, res.records.reason
