"""Fair-share state alone (``core.shares.Shares``): groups, holdings and decay, the keys it
gives a lane's head, and the reasons it restates."""

from __future__ import annotations

import math

import numpy as np

from builders import gpus_cluster, job
from quota_builders import G, queue, tenancy
from suanli.core.decisions import Admit, FairShareWait, JobPlacement, NoCapacity, Skip
from suanli.core.lanes import Lane, Lanes
from suanli.core.shapes import ShapeTable
from suanli.core.shares import Shares
from suanli.core.view import ClusterView, TaskPlacement


def placement(gpus: int) -> JobPlacement:
    return JobPlacement.of((TaskPlacement(0, tuple(range(gpus)), 1000, 0, 0, 0),))


CAP = np.array([8 * G, 64_000.0, 512_000.0])


def test_a_group_is_the_quota_queue_with_its_weight_or_the_queue_name() -> None:
    s = Shares("drf", math.inf, CAP, tenancy(queue("Q", org="lab"), queue("R")))
    assert s.group(job("a", tenant="lab/x", queue="whatever")) == s.ids["Q"]
    assert s.group(job("b", tenant="ops", queue="whatever")) == s.ids["R"]
    plain = Shares("drf", math.inf, CAP)
    assert plain.names[plain.group(job("c", queue="A"))] == "A"


def test_drf_share_follows_what_runs_and_the_what_if_of_an_eviction() -> None:
    s = Shares("drf", math.inf, CAP)
    a = job("a", queue="A")
    s.started(a, placement(2), 0.0)
    g = s.group(a)
    assert s.share(g) == 0.25
    s.suspend("a")
    assert s.share(g) == 0.0
    s.resume("a")
    assert s.share(g) == 0.25
    s.suspend("a")
    s.ended("a", 10.0)  # the eviction made real: taken off once
    assert s.share(g) == 0.0 and not s.holds("a")


def test_usage_decays_by_half_each_half_life() -> None:
    s = Shares("usage", 100.0, CAP)
    s.started(job("a", queue="A"), placement(8), 0.0)
    s.begin(100.0)
    first = s.share(0)
    s.ended("a", 100.0)
    s.begin(200.0)
    assert math.isclose(s.share(0), first / 2)


def test_keys_put_the_lower_share_first_within_a_priority() -> None:
    s = Shares("drf", math.inf, CAP)
    busy, idle = job("a", queue="A"), job("b", queue="B")
    s.started(busy, placement(4), 0.0)
    la = Lane(0, 0, s.group(busy))
    lb = Lane(0, 1, s.group(idle))
    ka = s.head_key(la, (0, 5.0, "a2"))
    kb = s.head_key(lb, (0, 9.0, "b2"))
    assert kb < ka  # B holds nothing: it goes first though it came later
    assert s.head_key(la, (-100, 5.0, "x")) < kb  # a higher priority still goes first


def test_after_a_lower_share_starts_a_job_the_others_are_told_so() -> None:
    s = Shares("drf", math.inf, CAP)
    a, b = job("a", queue="A"), job("b", queue="B")
    lanes = Lanes(ShapeTable(ClusterView(gpus_cluster(8))), keep_order=False)
    la, lb = lanes.lane_for(0, s.group(a), ()), lanes.lane_for(0, s.group(b), ())
    s.begin(0.0)
    s.decided(lb, Admit(b, placement(1)))
    s.started(b, placement(1), 0.0)
    why = NoCapacity(1, 0, 0)
    d = s.decided(la, Skip(a, why))
    assert d == Skip(a, FairShareWait(why, "A", 0.0, "B", 0.125))
    lb.heap.append(((0,), b))
    s.started(a, placement(4), 0.0)  # now A holds more than B, and B waits
    assert isinstance(s.explain(la, why, lanes), FairShareWait)
    assert s.explain(lb, why, lanes) == why
