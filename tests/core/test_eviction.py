"""preemption/checkpoint-aware alone, against a hand-built handle: which victims it takes
for a job that cannot start, what each eviction is said to lose and keep, and what it
leaves alone."""

from __future__ import annotations

from decimal import Decimal

from builders import gpus_cluster, job, rng
from fake_handle import FakeHandle
from quota_builders import G, queue, tenancy
from suanli.core.admission.quota import QuotaAdmission
from suanli.core.budget import BudgetBlock, BudgetExhausted
from suanli.core.decisions import Admit, Decision, NoCapacity, Preempt
from suanli.core.eviction import CheckpointAware
from suanli.core.preemption import PreemptionConfig
from suanli.core.tenancy import GPU

D = Decimal(10)


def preemptor(h: FakeHandle, cfg: PreemptionConfig, quota: QuotaAdmission | None = None):  # type: ignore[no-untyped-def]
    p = CheckpointAware(cfg, quota)
    p.bind(h)
    return p


def test_the_victim_is_the_lower_priority_job_that_loses_the_least_work() -> None:
    h = FakeHandle(gpus_cluster(2))
    h.run(job("old", runtime=10_000.0, priority_class="spot"), 0, (0,), at=0.0)
    h.run(
        job("saved", runtime=10_000.0, priority_class="spot", checkpoint_interval=500.0),
        0,
        (1,),
        at=0.0,
    )
    h.now = 1200.0
    hi = job("hi", 1200.0, priority_class="high")
    lane = h.pend(hi)
    out: list[Decision] = []
    p = preemptor(h, PreemptionConfig(min_runtime=60.0))
    d = p.preempt(hi, lane, rng(), NoCapacity(1, 0, 0), out)
    assert isinstance(d, Admit) and d.placement.tasks[0].gpus == (1,)
    # "saved" checkpointed at 1000 s: evicting it loses 200 GPU-s and keeps 1000 s.
    assert out == [Preempt(out[0].job, out[0].placement, "hi", "priority", 200.0, 1000.0)]
    assert out[0].job.id == "saved" and h.evictions == ["saved"]
    assert h.running.preempted_at == {"saved": [1200.0]} and "old" in h.running


def test_nothing_of_an_equal_priority_or_still_protected_is_taken() -> None:
    h = FakeHandle(gpus_cluster(1))
    h.run(job("peer", runtime=10_000.0), 0, (0,), at=0.0)
    h.now = 100.0
    other = job("other", 100.0)
    p = preemptor(h, PreemptionConfig(min_runtime=60.0))
    assert p.preempt(other, h.pend(other), rng(), NoCapacity(1, 0, 0), []) is None
    h2 = FakeHandle(gpus_cluster(1))
    h2.run(job("young", runtime=10_000.0, priority_class="spot"), 0, (0,), at=90.0)
    h2.now = 100.0
    hi = job("hi", 100.0, priority_class="high")
    lane = h2.pend(hi)
    p2 = preemptor(h2, PreemptionConfig(min_runtime=60.0))
    assert p2.preempt(hi, lane, rng(), NoCapacity(1, 0, 0), []) is None
    assert h2.retries == [(150.0, lane.index)]  # worth another look when it is 60 s old


def test_a_budget_hold_is_not_a_reason_to_evict_but_a_waiting_lender_is_owed() -> None:
    ten = tenancy(queue("A", "c", nominal={GPU: G}), queue("B", "c", nominal={GPU: G}))
    q = QuotaAdmission(ten, PreemptionConfig())
    h = FakeHandle(gpus_cluster(2), ledgers=(q,))
    q.bind(h, 0)
    h.run(job("b1", runtime=10_000.0, queue="B"), 0, (0,))
    h.run(job("b2", runtime=10_000.0, queue="B"), 0, (1,))
    h.now = 1000.0
    a = job("a", 1000.0, queue="A")
    lane = h.pend(a, keys=(q.lane_key(a),))
    p = preemptor(h, PreemptionConfig(min_runtime=0.0), q)
    spent = BudgetExhausted("a", "a", "daily", "2026-01-05", D, D, D, "USD", "off-peak")
    assert p.preempt(a, lane, rng(), BudgetBlock(spent, 2000.0), []) is None
    assert h.evictions == []
    assert q.owed_to(a, 0)
    # For room, A reclaims what B borrowed: one of B's jobs goes.
    out: list[Decision] = []
    d = p.preempt(a, lane, rng(), NoCapacity(1, 0, 0), out)
    assert isinstance(d, Admit) and [x.kind for x in out] == ["reclaim"]  # type: ignore[union-attr]
