"""admission/budget alone, against a hand-built handle: verdicts at submission, the hold
before a start and the retry it asks for, and what an end lets go."""

from __future__ import annotations

from decimal import Decimal

from budget_builders import FlatCosts, a_job, budget, spec
from builders import gpus_cluster
from fake_handle import FakeHandle
from suanli.core.admission.budget import BudgetAdmission
from suanli.core.budget import BudgetBlock, BudgetBook
from suanli.core.decisions import Demoted, Reject, Skip
from suanli.core.tenancy import OverQuota


def bound(*budgets):  # type: ignore[no-untyped-def]
    book = BudgetBook(spec(*budgets), FlatCosts(default=Decimal(1)))
    b = BudgetAdmission(book)
    h = FakeHandle(gpus_cluster(4), ledgers=(b,))
    b.bind(h, 0)
    return b, h


def test_an_exhausted_refuse_budget_rejects_and_a_demote_budget_demotes() -> None:
    b, h = bound(budget("v", "1500", "refuse"), budget("n", "1500", "demote"))
    assert b.arrive(a_job("v1", "v"), 0.0) is None
    h.run(a_job("v1", "v"), 0, (0,))  # commits 1000 (1/s for its 1000 s estimate)
    h.run(a_job("v2", "v"), 0, (1,))  # 2000 > 1500: spent
    assert isinstance(b.arrive(a_job("v3", "v"), 1.0), Reject)
    h.run(a_job("n1", "n"), 0, (2,))
    h.run(a_job("n2", "n"), 0, (3,))
    d = b.arrive(a_job("n3", "n"), 1.0)
    assert isinstance(d, Demoted) and d.job.priority_class == "spot" and d.was == "normal"


def test_jobs_of_other_budgets_never_share_a_lane() -> None:
    b, _ = bound(budget("v", "10"), budget("n", "10"))
    assert b.lane_key(a_job("x", "v/a")) == b.lane_key(a_job("y", "v/b"))
    assert b.lane_key(a_job("x", "v/a")) != b.lane_key(a_job("z", "n"))


def test_a_hold_parks_the_lane_until_its_time_or_any_end() -> None:
    b, h = bound(budget("v", "1500", "off-peak"))
    h.run(a_job("v1", "v"), 0, (0,))
    h.run(a_job("v2", "v"), 0, (1,))
    h.now = 100.0
    waiting = a_job("v3", "v")
    lane = h.pend(waiting, keys=(b.lane_key(waiting),))
    got = b.check(waiting, lane)
    assert isinstance(got, Skip) and isinstance(got.reason, BudgetBlock)
    assert h.retries == [(got.reason.until, lane.index)]
    # Another lane blocked for another reason is not the budget's to let go.
    other = a_job("v4", "v", estimate=5.0)
    other_lane = h.pend(other, keys=(("other",),))
    other_lane.blocked = OverQuota("q", "gpu", 1, 0, "cohort")
    b.ended("v1", 200.0)
    assert h.unblocked == [(lane.index, True)]
    assert other_lane.blocked is not None


def test_it_counts_nothing_twice_and_makes_room_for_no_preemption() -> None:
    b, h = bound(budget("v", "10"))
    r = h.run(a_job("v1", "v"), 0, (0,))
    assert not b.holds("v1")  # the book itself never commits a job twice
    b.suspend("v1")
    b.resume("v1")
    assert b.book.running() == ["v1"]
    assert b.refusal(r.job, h.view, h.ctx) is None
