"""admission/quota alone, against a hand-built handle: lane keys, the check and the lanes it
parks, what an end wakes, the what-if of an eviction, and the up-front refusal."""

from __future__ import annotations

import numpy as np
import pytest

from builders import A100, V100, cluster, gpus_cluster, job, node
from fake_handle import FakeHandle
from quota_builders import G, queue, tenancy
from suanli.core.admission.quota import QuotaAdmission
from suanli.core.decisions import NoCapacity, Skip
from suanli.core.model import SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.core.tenancy import GPU, OverQuota, gpu_of


def bound(spec, ten, preemption=None):  # type: ignore[no-untyped-def]
    q = QuotaAdmission(ten, preemption)
    h = FakeHandle(spec, ledgers=(q,))
    q.bind(h, 0)
    return q, h


TWO = tenancy(queue("A", "c", nominal={GPU: 2 * G}), queue("B", "c", nominal={GPU: 2 * G}))


def test_lane_key_is_the_queue_and_whether_the_job_may_borrow() -> None:
    q, _ = bound(gpus_cluster(4), TWO, PreemptionConfig())
    assert q.lane_key(job("a", queue="A")) == (0, False)  # normal is preemptible: may borrow
    assert q.lane_key(job("b", queue="B", priority_class="high")) == (1, True)
    q2, _ = bound(gpus_cluster(4), TWO)  # without reclaim anyone may borrow
    assert q2.lane_key(job("b", queue="B", priority_class="high")) == (1, False)
    q3, _ = bound(gpus_cluster(4), tenancy(queue("L", org="lab")))
    assert q3.lane_key(job("l", queue="x", tenant="lab/v"))[0] == 0
    with pytest.raises(SpecError, match="no queue 'x' and no queue serves tenant 'ops'"):
        q3.lane_key(job("z", queue="x", tenant="ops"))


def test_over_quota_parks_the_lane_and_an_end_in_its_cohort_wakes_it() -> None:
    q, h = bound(gpus_cluster(8), TWO)
    h.run(job("a1", queue="A", gpus=2), 0, (0, 1))
    h.run(job("b1", queue="B", gpus=2), 0, (2, 3))
    wants = job("a2", queue="A", gpus=1)
    lane = h.pend(wants, keys=(q.lane_key(wants),))
    got = q.check(wants, lane)
    assert isinstance(got, Skip) and isinstance(got.reason, OverQuota)
    assert got.reason == OverQuota("A", GPU, G, 0, "cohort")
    assert lane.blocked == got.reason and lane.skipped == "a2"
    # An end in the cohort (B's job) gives the pool room back: the lane is let go.
    q.ended("b1", 10.0)
    assert h.unblocked == [(lane.index, False)]
    assert q.check(wants, lane) is None


def test_per_model_quota_gives_the_nodes_the_job_may_use() -> None:
    spec = cluster(node("v", 4, V100), node("a", 4, A100))
    ten = tenancy(queue("A", nominal={GPU: 4 * G, gpu_of("A100"): 0}))
    q, h = bound(spec, ten)
    j = job("x", queue="A", gpus=2)
    lane = h.pend(j, keys=(q.lane_key(j),))
    mask = q.check(j, lane)
    assert isinstance(mask, np.ndarray) and mask.tolist() == [True, False]
    why = NoCapacity(1, 0, 0)
    assert q.no_room(j, lane, why) == Skip(j, why)
    q_health = h.view.health_changes
    h.view.set_health(1, False)
    assert h.view.health_changes != q_health
    q.begin()  # a change of health may make room on the allowed models: look again
    assert h.unblocked == [(lane.index, False)]


def test_an_eviction_what_if_refunds_and_its_undo_charges_again() -> None:
    q, h = bound(gpus_cluster(4), TWO)
    h.run(job("a1", queue="A", gpus=2), 0, (0, 1))
    used = q.book.usage.copy()
    q.suspend("a1")
    assert not q.book.usage.any()
    q.resume("a1")
    assert np.array_equal(q.book.usage, used)
    q.suspend("a1")
    q.ended("a1", 5.0)  # the eviction made real: refunded once, not twice
    assert not q.book.usage.any() and not q.holds("a1")


def test_a_job_left_waiting_within_its_nominal_keeps_the_cohort_from_borrowing() -> None:
    q, h = bound(gpus_cluster(4), TWO, PreemptionConfig())
    h.run(job("b1", queue="B", gpus=2), 0, (0, 1))
    h.run(job("b2", queue="B", gpus=2), 0, (2, 3))  # B borrows A's idle quota
    a = job("a", queue="A", gpus=1)
    lane_a = h.pend(a, keys=(q.lane_key(a),))
    q.note_owed(a, lane_a)  # told by the preemptor that it could not make room
    b = job("b3", queue="B", gpus=1)
    h.pend(b, keys=(q.lane_key(b),))
    over, _ = q.allowed(b, 1)
    assert over is not None and "queue A waits for its quota" in str(over)


def test_refusal_is_the_queue_ceiling() -> None:
    q, h = bound(gpus_cluster(8), TWO, PreemptionConfig())
    assert q.refusal(job("ok", queue="A", gpus=4), h.view, h.ctx) is None  # may borrow B's
    why = q.refusal(job("big", queue="A", gpus=5), h.view, h.ctx)
    assert why == "queue A can never hold 5 GPUs of gpu (its most: 4)"
    high = q.refusal(job("h", queue="A", gpus=3, priority_class="high"), h.view, h.ctx)
    assert high is not None and "class high is not preemptible: it may not borrow" in high
