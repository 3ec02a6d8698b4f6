"""The scheduling cycle: queue orders, strict vs skip-ahead, blocked shapes, reasons, remove."""

from __future__ import annotations

import pytest

from builders import (
    QUEUE_ORDERS,
    cluster,
    expected,
    frac,
    gpus_cluster,
    job,
    node,
    order,
    placement,
    rng,
    states_equal,
    summary,
    task,
)
from suanli.core.decisions import Admit, HeadOfLine, NoCapacity, Skip
from suanli.core.model import PriorityClass
from suanli.core.scheduler import Scheduler
from suanli.core.seams import OrderContext
from suanli.core.view import ClusterView

MODES = {"skip-ahead": False, "strict": True}


def sched(spec, queue="fifo", place="first-fit", strict=False, ctx=None) -> Scheduler:  # type: ignore[no-untyped-def]
    return Scheduler(ClusterView(spec), order(queue), placement(place), strict=strict, ctx=ctx)


def ids(decisions) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(type(d).__name__, d.job.id) for d in decisions]


def admitted(decisions) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.job.id for d in decisions if isinstance(d, Admit)]


def run_one(s: Scheduler, *jobs) -> list:  # type: ignore[no-untyped-def]
    """Submit ``jobs`` and run one cycle; return its decisions."""
    for j in jobs:
        s.submit(j)
    return s.cycle(rng())


# ------------------------------------------------------------------ queue orders

ORDER_JOBS = [
    job("j1", submit=0, runtime=50, gpus=4, priority_class="normal"),
    job("j2", submit=1, runtime=10, gpus=2, priority_class="spot"),
    job("j3", submit=2, runtime=30, gpus=1, priority_class="high"),
    job("j4", submit=3, runtime=10, gpus=1, priority_class="normal"),
    job("j5", submit=1, runtime=20, t=frac(500), priority_class="online"),
]
EXPECTED_ORDER = {
    "fifo": ["j1", "j2", "j5", "j3", "j4"],  # submit, then id (j2 and j5 both at 1)
    "priority": ["j5", "j3", "j1", "j4", "j2"],  # online, high, normal (by submit), spot
    "sjf": ["j2", "j4", "j5", "j3", "j1"],  # runtime, then submit (j2 and j4 both 10 s)
    "smallest-first": ["j5", "j3", "j4", "j2", "j1"],  # GPU demand, then submit
    # One queue: fair sharing between queues leaves priority, then FIFO.
    "drf": ["j5", "j3", "j1", "j4", "j2"],
    "fair-share": ["j5", "j3", "j1", "j4", "j2"],
    # True GPU-time: j5 0.5 × 20 and j4 1 × 10 tie at 10 (j5 came first), j2 20, j3 30, j1 200.
    "sjf-gpu": ["j5", "j4", "j2", "j3", "j1"],
    "srtf": ["j5", "j4", "j2", "j3", "j1"],  # nothing has run yet: remaining = all of it
    # The users' estimates (none: 24 h each), so predicted GPU-time goes by GPUs, then the
    # aging term by submit: j3 (2) before j4 (3).
    "qssf": ["j5", "j3", "j4", "j2", "j1"],
    "las": ["j1", "j2", "j5", "j3", "j4"],  # nothing attained: all in the first queue, FIFO
}


def test_every_queue_order_is_covered() -> None:
    assert sorted(EXPECTED_ORDER) == sorted(QUEUE_ORDERS)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("queue", sorted(EXPECTED_ORDER))
def test_queue_order(queue: str, mode: str) -> None:
    s = sched(gpus_cluster(8, 8), queue, strict=MODES[mode])
    for j in reversed(ORDER_JOBS):
        s.submit(j)
    assert [j.id for j in s.pending_jobs()] == EXPECTED_ORDER[queue]
    d = s.cycle(rng())
    assert ids(d) == [("Admit", i) for i in EXPECTED_ORDER[queue]]
    assert len(s) == 0


@pytest.mark.parametrize("queue", QUEUE_ORDERS)
def test_ties_go_to_the_job_id(queue: str) -> None:
    s = sched(gpus_cluster(8), queue)
    d = run_one(s, job("b"), job("c"), job("a"))
    assert admitted(d) == ["a", "b", "c"]


def test_priority_uses_the_context_classes() -> None:
    ctx = OrderContext({"gold": PriorityClass("gold", 5), "lead": PriorityClass("lead", -5)})
    s = sched(gpus_cluster(8), "priority", ctx=ctx)
    d = run_one(
        s,
        job("a", 0, priority_class="lead"),
        job("b", 1, priority_class="unknown"),  # unknown class: priority 0
        job("c", 2, priority_class="gold"),
    )
    assert admitted(d) == ["c", "b", "a"]


def test_one_at_a_time_in_queue_order_as_capacity_frees() -> None:
    s = sched(gpus_cluster(1), "sjf")
    for j in (job("long", 0, 300), job("short", 1, 10), job("mid", 2, 100)):
        s.submit(j)
    seen = []
    while len(s):
        (a,) = [d for d in s.cycle(rng()) if isinstance(d, Admit)]
        seen.append(a.job.id)
        s.release(a.placement)
    assert seen == ["short", "mid", "long"]


# ------------------------------------------------------------------ strict vs skip-ahead


def _blocked_head(strict: bool) -> tuple[Scheduler, list]:
    """A 4-GPU node with 2 GPUs running; head wants 4, a small job behind it wants 1."""
    s = sched(gpus_cluster(4), strict=strict)
    (run,) = run_one(s, job("run", 0, gpus=2))
    assert isinstance(run, Admit)
    d = run_one(s, job("big", 1, gpus=4), job("small", 2, gpus=1))
    return s, [run, *d]


def test_strict_head_of_line_blocks_the_small_job() -> None:
    s, (run, *d) = _blocked_head(strict=True)
    assert d == [Skip(job("big", 1, gpus=4), NoCapacity(1, 0, 0))]
    assert [j.id for j in s.pending_jobs()] == ["big", "small"]
    assert s.reason("small") == HeadOfLine("big")
    assert s.reason("big") == NoCapacity(1, 0, 0)
    assert str(s.reason("small")) == "behind blocked head-of-line job big"
    # Nothing changes without a release...
    assert s.cycle(rng()) == [Skip(job("big", 1, gpus=4), NoCapacity(1, 0, 0))]
    # ... and once the running job ends, the head goes first and blocks the small job again.
    s.release(run.placement)
    assert ids(s.cycle(rng())) == [("Admit", "big"), ("Skip", "small")]
    assert s.reason("small") == NoCapacity(1, 0, 0)


def test_skip_ahead_starts_the_small_job() -> None:
    s, (run, *d) = _blocked_head(strict=False)
    assert ids(d) == [("Skip", "big"), ("Admit", "small")]
    assert d[0].reason == NoCapacity(need_tasks=1, fit_tasks=0, largest_block=0)
    assert [j.id for j in s.pending_jobs()] == ["big"]
    assert s.reason("big") == NoCapacity(1, 0, 0)
    assert s.reason("small") is None  # no longer pending


@pytest.mark.parametrize("mode", MODES)
def test_blocked_shape_is_retried_after_a_release(mode: str) -> None:
    s = sched(gpus_cluster(4), strict=MODES[mode])
    (run,) = run_one(s, job("run", 0, gpus=3))
    assert ids(run_one(s, job("b", 1, gpus=2))) == [("Skip", "b")]
    # Without a release the shape stays blocked, for later jobs of the same shape too.
    s.submit(job("c", 2, gpus=2))
    assert admitted(s.cycle(rng())) == []
    assert s.reason("b") == NoCapacity(1, 0, 0)
    assert s.reason("c") in (NoCapacity(1, 0, 0), HeadOfLine("b"))
    s.release(run.placement)
    assert admitted(s.cycle(rng())) == ["b", "c"]
    assert len(s) == 0


@pytest.mark.parametrize("mode", MODES)
def test_release_that_does_not_help_keeps_the_job_waiting(mode: str) -> None:
    s = sched(gpus_cluster(4, 4), strict=MODES[mode])
    d = run_one(s, job("r1", 0, gpus=3), job("r2", 0.5, gpus=3), job("r3", 0.7, gpus=1))
    assert admitted(d) == ["r1", "r2", "r3"]
    run_one(s, job("big", 1, gpus=4))
    s.release(d[2].placement)  # one GPU back: 1 + 1 free, still no node with 4
    assert admitted(s.cycle(rng())) == []
    assert s.reason("big") == NoCapacity(1, 0, 0)
    s.release(d[0].placement)
    assert admitted(s.cycle(rng())) == ["big"]


@pytest.mark.parametrize("mode", MODES)
def test_admissions_are_assumed_on_the_view(mode: str) -> None:
    spec = gpus_cluster(4, 2)
    s = sched(spec, "fifo", "best-fit", strict=MODES[mode])
    d = run_one(s, job("a", gpus=2), job("b", t=frac(300), tasks=3), job("c", gpus=2, tasks=2))
    tasks = [tp for x in d if isinstance(x, Admit) for tp in x.placement.tasks]
    assert summary(s.view) == expected(spec, tasks)


# ------------------------------------------------------------------ Skip reasons

# (id, job) on two 4-GPU nodes with 3 and 4 GPUs free -> the NoCapacity numbers
REASONS = [
    ("gang-of-3x3", job("x", gpus=3, tasks=3), NoCapacity(3, 2, 1)),
    ("gang-of-8", job("x", tasks=8), NoCapacity(8, 7, 4)),
    ("gang-min-8-of-10", job("x", tasks=10, gang_min=8), NoCapacity(8, 7, 4)),
    ("too-big-for-any-node", job("x", gpus=5), NoCapacity(1, 0, 0)),
    ("gpu-memory", job("x", t=frac(100, 40_000)), NoCapacity(1, 0, 0)),
    ("model", job("x", t=task(1, models={"A100"})), NoCapacity(1, 0, 0)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("j, reason", [r[1:] for r in REASONS], ids=[r[0] for r in REASONS])
def test_skip_reason_numbers(j, reason, mode: str) -> None:
    s = sched(gpus_cluster(4, 4), strict=MODES[mode])
    run_one(s, job("run", gpus=1))
    before = s.view.state()
    d = run_one(s, j)
    assert d == [Skip(j, reason)]
    assert s.reason(j.id) == reason
    assert "no capacity" in str(reason)
    assert states_equal(before, s.view.state())


def test_partial_gang_is_an_admit_not_a_skip() -> None:
    s = sched(gpus_cluster(4, 4))
    run_one(s, job("run", gpus=1))
    (d,) = run_one(s, job("x", tasks=10, gang_min=5))
    assert isinstance(d, Admit) and len(d.placement.tasks) == 7


# ------------------------------------------------------------------ queue API


@pytest.mark.parametrize("mode", MODES)
def test_remove_a_pending_job(mode: str) -> None:
    s = sched(gpus_cluster(2), strict=MODES[mode])
    s.submit(job("a"))
    s.submit(job("b", 1))
    assert len(s) == 2
    assert s.remove("a") is True
    assert s.remove("a") is False
    assert s.remove("nope") is False
    assert len(s) == 1 and [j.id for j in s.pending_jobs()] == ["b"]
    assert s.reason("a") is None
    assert admitted(s.cycle(rng())) == ["b"]
    assert s.remove("b") is False  # started, no longer pending


@pytest.mark.parametrize("mode", MODES)
def test_remove_a_blocked_job_lets_the_next_one_start(mode: str) -> None:
    s = sched(gpus_cluster(4), strict=MODES[mode])
    run_one(s, job("run", gpus=2))
    assert admitted(run_one(s, job("big", 1, gpus=4), job("small", 2))) == (
        [] if MODES[mode] else ["small"]
    )
    s.submit(job("small2", 3))
    assert s.remove("big")
    assert admitted(s.cycle(rng())) == (["small", "small2"] if MODES[mode] else ["small2"])


@pytest.mark.parametrize("mode", MODES)
def test_resubmit_after_remove(mode: str) -> None:
    s = sched(gpus_cluster(1), strict=MODES[mode])
    s.submit(job("a", gpus=1))
    s.remove("a")
    s.submit(job("a", gpus=1))
    assert admitted(s.cycle(rng())) == ["a"]
    assert len(s) == 0 and s.cycle(rng()) == []


# (id, the withdrawn version, the resubmitted version of job "A")
RESUBMIT = [
    ("later-and-bigger", job("A", 0, gpus=1), job("A", 5, gpus=2)),
    ("same-key-other-runtime", job("A", 0, 10), job("A", 0, 20)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("old, new", [r[1:] for r in RESUBMIT], ids=[r[0] for r in RESUBMIT])
def test_resubmit_after_remove_runs_the_new_version(old, new, mode: str) -> None:
    # Was a bug in strict mode: remove() left the withdrawn job in the strict heap, so a
    # resubmitted job of the same id ran as its old version (or, with an equal key, raised
    # TypeError).
    s = sched(gpus_cluster(2), strict=MODES[mode])
    s.submit(old)
    s.remove("A")
    s.submit(new)
    (d,) = s.cycle(rng())
    assert isinstance(d, Admit) and d.job == new
    assert sum(len(tp.gpus) for tp in d.placement.tasks) == new.task.gpus


def test_remove_keeps_queue_order_in_skip_ahead() -> None:
    # Was a bug: removing a shape's head left the shape in the active heap under the removed
    # job's key, so C (A's shape) was tried at A's place, ahead of B.
    s = sched(gpus_cluster(1))
    s.submit(job("A", 0))
    s.submit(job("B", 1, t=task(1, cpu=1)))  # another shape
    s.submit(job("C", 2))  # A's shape
    s.remove("A")
    assert ids(s.cycle(rng())) == [("Admit", "B"), ("Skip", "C")]


def test_remove_keeps_queue_order_in_strict() -> None:
    s = sched(gpus_cluster(1), strict=True)
    s.submit(job("A", 0))
    s.submit(job("B", 1, t=task(1, cpu=1)))
    s.submit(job("C", 2))
    s.remove("A")
    assert ids(s.cycle(rng())) == [("Admit", "B"), ("Skip", "C")]


@pytest.mark.parametrize("mode", MODES)
def test_duplicate_pending_id_is_refused(mode: str) -> None:
    s = sched(gpus_cluster(1), strict=MODES[mode])
    s.submit(job("a"))
    with pytest.raises(ValueError, match="already pending"):
        s.submit(job("a", 5))


@pytest.mark.parametrize("mode", MODES)
def test_reason_is_none_for_unknown_and_started_jobs(mode: str) -> None:
    s = sched(gpus_cluster(1), strict=MODES[mode])
    assert s.reason("ghost") is None
    s.submit(job("a"))
    assert s.reason("a") is None  # not yet tried
    s.cycle(rng())
    assert s.reason("a") is None  # running


def test_reason_of_a_later_job_of_a_blocked_shape() -> None:
    s = sched(gpus_cluster(2))
    run_one(s, job("run", gpus=1))
    run_one(s, job("b", 1, gpus=2))
    s.submit(job("c", 2, gpus=2))  # same shape, never tried: fails with b
    assert s.reason("c") == NoCapacity(1, 0, 0)


def test_strict_reason_before_any_cycle_is_none() -> None:
    # Was a bug (minor): HeadOfLine was reported behind a head that had not been tried yet.
    s = sched(gpus_cluster(1), strict=True)
    s.submit(job("a", 0))
    s.submit(job("b", 1))
    assert s.reason("b") is None


def test_empty_cycle() -> None:
    for strict in (False, True):
        s = sched(gpus_cluster(1), strict=strict)
        assert s.cycle(rng()) == [] and len(s) == 0 and s.pending_jobs() == []


@pytest.mark.parametrize("mode", MODES)
def test_a_node_back_to_health_wakes_a_blocked_job(mode: str) -> None:
    # n1 (8 GPUs) starts unhealthy: an 8-GPU job cannot fit on n0 (4 GPUs) and waits.
    spec = cluster(node("n0", 4), node("n1", 8, healthy=False))
    s = sched(spec, strict=MODES[mode])
    assert ids(run_one(s, job("big", 0, gpus=8))) == [("Skip", "big")]
    assert admitted(s.cycle(rng())) == []
    s.view.set_health(1, True)  # the view tells the scheduler's shape table
    (d,) = s.cycle(rng())
    assert isinstance(d, Admit) and d.placement.nodes == (1,)
    # And back to unhealthy: the next such job waits again.
    s.view.set_health(1, False)
    assert ids(run_one(s, job("big2", 1, gpus=8))) == [("Skip", "big2")]


@pytest.mark.parametrize("queue", QUEUE_ORDERS)
def test_a_job_submitted_after_its_lane_was_emptied_by_a_removal_starts(queue: str) -> None:
    # Found by test_skip_ahead_cycle_invariants: under a fair-sharing order the lane kept the
    # removed head's fair key, and an empty cycle dropped its heap entry, so a later job of
    # the same shape was never tried.
    s = sched(gpus_cluster(1), queue=queue)
    s.submit(job("a"))
    assert s.remove("a")
    assert s.cycle(rng()) == []
    s.submit(job("b"))
    assert admitted(s.cycle(rng())) == ["b"]
