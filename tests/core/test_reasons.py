"""Why a job is pending: the typed reasons carry their numbers, in words a user can act on."""

from __future__ import annotations

from builders import gpus_cluster, job, order, placement, rng
from suanli.core.decisions import Admit, FairShareWait, NoCapacity, Skip
from suanli.core.model import Job
from suanli.core.scheduler import Scheduler
from suanli.core.view import ClusterView


def step(s: Scheduler, now: float, *jobs: Job) -> list:  # type: ignore[type-arg]
    for j in jobs:
        s.submit(j)
    return s.cycle(rng(), now)


def test_no_capacity_names_the_shape_and_the_largest_free_block() -> None:
    s = Scheduler(ClusterView(gpus_cluster(8, 8)), order("fifo"), placement("first-fit"))
    out = step(s, 0.0, job("a", gpus=6), job("b", gpus=5), job("big", gpus=4, tasks=2))
    assert [type(d) for d in out] == [Admit, Admit, Skip]
    why = out[2].reason
    assert isinstance(why, NoCapacity) and why.largest_free_gpus == 3
    assert str(why) == (
        "no capacity: needs 2 task(s) of 4 GPUs, cluster fits 0, largest node fits 0; "
        "largest free block: 3 GPU(s) on one node"
    )
    assert s.reason("big") == why


def test_a_queue_that_holds_more_is_told_the_lower_share_goes_first() -> None:
    """DRF: queue A holds 3 of 4 GPUs, B 1. One GPU frees: B's job takes it (lower share),
    and A's job, which would have fit, hears why."""
    s = Scheduler(ClusterView(gpus_cluster(4)), order("drf"), placement("first-fit"))
    out = step(
        s,
        0.0,
        *(job(f"a{i}", 0.0, 100.0, queue="A") for i in range(3)),
        job("b0", 0.0, 10.0, queue="B"),
    )
    held = {d.job.id: d.placement for d in out if isinstance(d, Admit)}
    assert len(held) == 4
    s.release(held["b0"], "b0", 10.0)
    out = step(s, 10.0, job("a3", 5.0, 100.0, queue="A"), job("b1", 6.0, 100.0, queue="B"))
    assert [(type(d).__name__, d.job.id) for d in out] == [("Admit", "b1"), ("Skip", "a3")]
    why = out[1].reason
    assert isinstance(why, FairShareWait)
    assert (why.queue, why.ahead) == ("A", "B") and why.share > why.ahead_share
    assert "lower fair share than queue B" in str(why)
    # Asked later, with no other queue waiting: plain no capacity.
    assert isinstance(s.reason("a3"), NoCapacity)
    # Once B has a job waiting too, B (share 0.25 < 0.75) is the queue that goes first.
    step(s, 11.0, job("b2", 11.0, 100.0, queue="B"))
    why = s.reason("a3")
    assert isinstance(why, FairShareWait) and why.ahead == "B"
    assert isinstance(s.reason("b2"), NoCapacity)  # nobody with a lower share waits
