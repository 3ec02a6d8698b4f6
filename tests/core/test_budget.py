"""Budgets: nested budgets give the strictest verdict, exhausted budgets block until their
period ends (or until off-peak), thresholds fire once per period, periods follow the UTC
calendar, forecasts extrapolate, a hard budget is overspent by at most one job; and the
price-book cost model prices jobs as the price book says (bands, classes, versions, DST)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from budget_builders import (
    DAY,
    HOUR,
    NOV_1,
    FlatCosts,
    a_job,
    budget,
    posix,
    spec,
    spend,
)
from suanli.core.budget import (
    ALLOW,
    Allow,
    BudgetAlert,
    BudgetBlock,
    BudgetBook,
    BudgetError,
    BudgetExhausted,
    BudgetSpec,
    BudgetsSpec,
    Demote,
    Refuse,
    period_at,
)
from suanli.core.model import Job, SpecError

# --------------------------------------------------------------------------------------------
# Periods
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "at", "label", "start", "end"),
    [
        (
            "monthly",
            "2026-11-14T12:00:00Z",
            "2026-11",
            "2026-11-01T00:00:00Z",
            "2026-12-01T00:00:00Z",
        ),
        (
            "monthly",
            "2026-12-31T23:59:59Z",
            "2026-12",
            "2026-12-01T00:00:00Z",
            "2027-01-01T00:00:00Z",
        ),
        (
            "monthly",
            "2028-02-29T08:00:00Z",
            "2028-02",
            "2028-02-01T00:00:00Z",
            "2028-03-01T00:00:00Z",
        ),
        (
            "monthly",
            "2026-12-01T00:00:00Z",
            "2026-12",
            "2026-12-01T00:00:00Z",
            "2027-01-01T00:00:00Z",
        ),
        (
            "weekly",
            "2026-11-14T12:00:00Z",
            "2026-W46",
            "2026-11-09T00:00:00Z",
            "2026-11-16T00:00:00Z",
        ),
        (
            "weekly",
            "2027-01-01T00:00:00Z",
            "2026-W53",
            "2026-12-28T00:00:00Z",
            "2027-01-04T00:00:00Z",
        ),
        (
            "weekly",
            "2026-11-16T00:00:00Z",
            "2026-W47",
            "2026-11-16T00:00:00Z",
            "2026-11-23T00:00:00Z",
        ),
        (
            "daily",
            "2026-11-14T23:59:59Z",
            "2026-11-14",
            "2026-11-14T00:00:00Z",
            "2026-11-15T00:00:00Z",
        ),
    ],
    ids=[
        "month-mid",
        "month-december-last-second",
        "month-leap-february",
        "month-first-instant",
        "iso-week",
        "iso-week-53-across-new-year",
        "week-starts-monday",
        "day",
    ],
)
def test_calendar_periods_are_utc(kind: str, at: str, label: str, start: str, end: str) -> None:
    epoch = posix("2026-01-01T00:00:00Z")
    t = posix(at) - epoch
    p = period_at(budget("x", period=kind), epoch, t)
    assert p is not None
    assert (p.label, p.start_utc, p.end_utc) == (label, posix(start), posix(end))
    assert (p.start, p.end) == (posix(start) - epoch, posix(end) - epoch)
    assert p.start <= t < p.end


def test_fixed_period_governs_only_inside_its_span() -> None:
    b = budget(
        "x", period="fixed", start=posix("2026-10-01T00:00:00Z"), end=posix("2027-04-01T00:00:00Z")
    )
    inside = period_at(b, 0, posix("2026-12-24T00:00:00Z"))
    assert inside is not None and inside.label == "2026-10-01..2027-04-01"
    assert period_at(b, 0, posix("2026-09-30T23:59:59Z")) is None
    assert period_at(b, 0, posix("2027-04-01T00:00:00Z")) is None


def test_period_end_on_the_callers_clock_is_in_the_next_period() -> None:
    """Coming back at a block's ``until`` must find the next period, never the same one."""
    b = budget("x", period="daily")
    p = period_at(b, NOV_1 + 7, 123.25)
    assert p is not None
    nxt = period_at(b, NOV_1 + 7, p.end)
    assert nxt is not None and nxt.start == p.end


# --------------------------------------------------------------------------------------------
# Verdicts at submission: nested budgets, strictest wins
# --------------------------------------------------------------------------------------------

NESTED = (
    budget("vision", "1000", "demote"),
    budget("vision/detection", "100", "refuse"),
    budget("", "100000", "none", name="lab"),
)


@pytest.mark.parametrize(
    ("exhaust", "tenant", "cls", "expected"),
    [
        ((), "vision/detection/alice", "normal", "allow"),
        (("vision",), "vision/detection/alice", "normal", "demote"),
        (("vision",), "vision/seg/bob", "normal", "demote"),
        (("vision",), "vision/seg/bob", "spot", "allow"),
        (("vision",), "nlp/chat", "normal", "allow"),
        (("vision/detection",), "vision/detection/alice", "normal", "refuse"),
        (("vision/detection",), "vision/detection", "normal", "refuse"),
        (("vision/detection",), "vision/detectionist", "normal", "allow"),
        (("vision/detection",), "vision/seg/bob", "normal", "allow"),
        (("vision", "vision/detection"), "vision/detection/alice", "spot", "refuse"),
        (("vision", "vision/detection"), "vision/detection/alice", "normal", "refuse"),
    ],
    ids=[
        "nothing-exhausted",
        "department-demotes-project-member",
        "department-demotes-other-project",
        "already-spot-stays",
        "other-department-untouched",
        "project-refuses",
        "project-node-itself",
        "prefix-is-per-path-part",
        "sibling-project-untouched",
        "refuse-beats-demote-for-spot",
        "refuse-beats-demote",
    ],
)
def test_nested_budgets_strictest_verdict_wins(
    exhaust: tuple[str, ...], tenant: str, cls: str, expected: str
) -> None:
    book = BudgetBook(spec(*NESTED), FlatCosts())
    for org in exhaust:
        limit = {"vision": 1000, "vision/detection": 100}[org]
        spend(book, org + "/x", limit)
    v = book.on_submit(a_job("j", tenant, cls=cls), 5000.0)
    kind = "allow" if isinstance(v, Allow) else "demote" if isinstance(v, Demote) else "refuse"
    assert kind == expected
    if isinstance(v, Demote):
        assert v.to_class == "spot" and v.reason.budget == "vision"
    if isinstance(v, Refuse):
        assert v.reason.budget == "vision/detection"


def test_job_is_governed_by_every_containing_budget() -> None:
    book = BudgetBook(spec(*NESTED), FlatCosts())
    labels = [b.label for b in book.governing(a_job("j", "vision/detection/alice"))]
    assert labels == ["vision", "vision/detection", "lab"]
    assert [b.label for b in book.governing(a_job("k", "nlp"))] == ["lab"]


def test_refusal_reason_names_org_period_amounts_currency_and_action() -> None:
    book = BudgetBook(spec(budget("vision", "10000", "refuse")), FlatCosts())
    spend(book, "vision/a", 10250)
    v = book.on_submit(a_job("j", "vision/a"), 20_000.0)
    assert isinstance(v, Refuse)
    assert v.reason == BudgetExhausted(
        "vision", "vision", "monthly", "2026-11", Decimal(10250), Decimal(0),
        Decimal(10000), "USD", "refuse", "spot",
    )  # fmt: skip
    assert str(v.reason) == (
        "budget vision (monthly 2026-11) exhausted: spent 10,250.00 of 10,000.00 USD; "
        "new jobs are refused"
    )


def test_reason_shows_committed_cost_of_running_jobs() -> None:
    book = BudgetBook(spec(budget("nlp", "500", "demote", name="nlp-cap")), FlatCosts())
    spend(book, "nlp", 100)
    book.commit(a_job("long", "nlp", estimate=450), None, 200.0)
    v = book.on_submit(a_job("j", "nlp"), 300.0)
    assert isinstance(v, Demote)
    assert str(v) == (
        "demoted to spot: budget nlp-cap of nlp (monthly 2026-11) exhausted: spent 100.00 + "
        "committed 450.00 of 500.00 USD; new jobs run as spot"
    )


# --------------------------------------------------------------------------------------------
# Admission: who may start, and until when a job waits
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "cls", "t", "until"),
    [
        ("refuse", "normal", 2 * HOUR + 10, "period-end"),
        ("refuse", "spot", 3 * HOUR + 10, "period-end"),
        ("demote", "normal", 2 * HOUR + 10, "period-end"),
        ("demote", "spot", 2 * HOUR + 10, None),
        ("off-peak", "normal", 2 * HOUR + 10, 3 * HOUR),
        ("off-peak", "normal", 3 * HOUR + 10, None),
        ("none", "normal", 2 * HOUR + 10, None),
    ],
    ids=[
        "refuse-blocks-until-period-end",
        "refuse-blocks-spot-too",
        "demote-blocks-full-price-class",
        "demote-lets-demoted-class-start",
        "off-peak-waits-for-next-off-peak",
        "off-peak-starts-off-peak",
        "none-never-blocks",
    ],
)
def test_exhausted_budget_blocks_by_action(
    action: str, cls: str, t: float, until: float | str | None
) -> None:
    book = BudgetBook(spec(budget("vision", "1000", action)), FlatCosts())
    spend(book, "vision", 1000)
    block = book.admissible(a_job("j", "vision/a", cls=cls), t)
    if until is None:
        assert block is None
        return
    assert block is not None
    expected = posix("2026-12-01T00:00:00Z") - NOV_1 if until == "period-end" else until
    assert block.until == expected
    assert block.reason.action == action


def test_budget_below_limit_lets_jobs_start_even_if_they_would_overshoot() -> None:
    book = BudgetBook(spec(budget("vision", "1000")), FlatCosts())
    spend(book, "vision", 999)
    assert book.admissible(a_job("big", "vision", estimate=10_000), 2000.0) is None
    book.commit(a_job("big", "vision", estimate=10_000), None, 2000.0)
    assert book.admissible(a_job("next", "vision"), 2001.0) is not None


def test_off_peak_block_ends_with_the_period_if_sooner() -> None:
    costs = FlatCosts()
    epoch = posix("2026-11-30T23:00:00Z")  # even hour: peak; the month ends in an hour
    book = BudgetBook(spec(budget("v", "10", "off-peak"), epoch_s=epoch), costs)
    spend(book, "v", 10)
    block = book.admissible(a_job("j", "v"), 1200.0)
    assert block is not None and block.until == HOUR  # = next off-peak; the period ends too
    costs_late = FlatCosts()
    epoch2 = posix("2026-11-30T23:30:00Z")  # the month ends 30 min before the next off-peak
    book2 = BudgetBook(spec(budget("v", "10", "off-peak"), epoch_s=epoch2), costs_late)
    spend(book2, "v", 10)
    block2 = book2.admissible(a_job("j", "v"), 20.0)
    assert block2 is not None and block2.until == 1800.0
    assert book2.admissible(a_job("j", "v"), block2.until) is None


def test_block_with_the_latest_until_wins() -> None:
    book = BudgetBook(
        spec(budget("vision", "100", "off-peak"), budget("vision/det", "50", "refuse")), FlatCosts()
    )
    spend(book, "vision/det/a", 100)
    block = book.admissible(a_job("j", "vision/det/a"), 10.0)
    assert block is not None and block.reason.budget == "vision/det"
    assert block.until == posix("2026-12-01T00:00:00Z") - NOV_1
    only_off_peak = book.admissible(a_job("k", "vision/seg"), 10.0)
    assert only_off_peak is not None and only_off_peak.until == HOUR


@pytest.mark.parametrize(
    ("action", "t", "tail"),
    [
        (
            "refuse",
            5000.0,
            "new jobs are refused; waits for the next period at 2026-12-01 00:00 UTC (t=2592000 s)",
        ),
        (
            "demote",
            5000.0,
            "new jobs run as spot; only spot jobs start until 2026-12-01 00:00 UTC (t=2592000 s)",
        ),
        (
            "off-peak",
            0.5,
            "jobs start only off-peak; waits until 2026-11-01 03:00 UTC (t=10800 s)",
        ),
    ],
    ids=["refuse", "demote", "off-peak"],
)
def test_block_reason_says_when_to_look_again(action: str, t: float, tail: str) -> None:
    book = BudgetBook(spec(budget("vision", "1000", action)), FlatCosts())
    spend(book, "vision", 1200)
    block = book.admissible(a_job("j", "vision"), 2 * HOUR + t)
    assert isinstance(block, BudgetBlock)
    head = "budget vision (monthly 2026-11) exhausted: spent 1,200.00 of 1,000.00 USD; "
    assert str(block) == head + tail


def test_settling_early_releases_commitment_so_blocked_jobs_may_start() -> None:
    book = BudgetBook(spec(budget("v", "1000")), FlatCosts())
    book.commit(a_job("a", "v", estimate=1000), None, 0.0)
    assert book.admissible(a_job("b", "v"), 10.0) is not None
    assert book.settle("a", 300.0) == Decimal(300)
    assert book.admissible(a_job("b", "v"), 300.0) is None


def test_unbudgeted_tenant_is_never_blocked() -> None:
    book = BudgetBook(spec(budget("vision", "1")), FlatCosts())
    spend(book, "vision", 5)
    assert book.on_submit(a_job("j", "nlp"), 10.0) == ALLOW
    assert book.admissible(a_job("j", "nlp"), 10.0) is None


# --------------------------------------------------------------------------------------------
# Commit and settle
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimate", "end", "admitted", "actual"),
    [
        (1000.0, 400.0, 2000, 800),
        (1000.0, 5000.0, 2000, 2000),
        (None, 100.0, 2 * 86_400, 200),
        (1000.0, 0.0, 2000, 0),
    ],
    ids=["ends-early", "overruns-capped-at-admitted", "no-estimate-default-runtime", "undo"],
)
def test_commit_admits_max_runtime_and_settle_charges_actual(
    estimate: float | None, end: float, admitted: int, actual: int
) -> None:
    costs = FlatCosts({"j": Decimal(2)})
    book = BudgetBook(spec(budget("v", "1000000")), costs)
    j = a_job("j", "v", estimate=estimate)
    assert book.commit(j, "H100", 0.0) == admitted
    [st_] = book.status(0.0)
    assert (st_.spent, st_.committed) == (0, admitted)
    assert book.settle("j", end) == actual
    [st_] = book.status(end)
    assert (st_.spent, st_.committed) == (actual, 0)


def test_commit_is_idempotent_and_settle_of_unknown_job_does_nothing() -> None:
    book = BudgetBook(spec(budget("v", "1000000")), FlatCosts())
    j = a_job("j", "v", estimate=100)
    assert book.commit(j, None, 0.0) == 100
    assert book.commit(j, None, 50.0) == 100
    assert book.running() == ["j"]
    assert book.settle("nope", 10.0) is None
    assert book.settle("j", 10.0) == 10
    assert book.settle("j", 20.0) is None
    [s] = book.status(20.0)
    assert (s.spent, s.committed) == (10, 0)


def test_preempted_job_restarts_with_a_new_commitment() -> None:
    book = BudgetBook(spec(budget("v", "1000000")), FlatCosts())
    j = a_job("j", "v", estimate=100)
    book.commit(j, None, 0.0)
    book.settle("j", 30.0)
    book.commit(j, None, 40.0)
    book.settle("j", 140.0)
    [s] = book.status(200.0)
    assert s.spent == 130


def test_cost_counts_in_the_period_the_job_started_in() -> None:
    epoch = posix("2026-11-30T22:00:00Z")
    book = BudgetBook(spec(budget("v", "1000000"), epoch_s=epoch), FlatCosts())
    book.commit(a_job("j", "v", estimate=4 * HOUR), None, 0.0)
    book.settle("j", 4 * HOUR)  # ran 2 h in November, 2 h in December
    [dec] = book.status(4 * HOUR)
    assert (dec.period_label, dec.spent) == ("2026-12", 0)
    [nov] = book.status(0.0)
    assert (nov.period_label, nov.spent) == ("2026-11", 4 * 3600)


def test_currency_must_match_the_cost_model() -> None:
    with pytest.raises(SpecError, match="budgets are in USD but the cost model prices in EUR"):
        BudgetBook(spec(budget("v")), FlatCosts(currency="EUR"))


# --------------------------------------------------------------------------------------------
# Alerts
# --------------------------------------------------------------------------------------------


def test_thresholds_fire_once_each_per_period() -> None:
    epoch = posix("2026-11-30T00:00:00Z")
    b = budget("v", "1000", "none", period="daily", thresholds=(0.8, 0.5, 1.0))
    book = BudgetBook(spec(b, epoch_s=epoch), FlatCosts())
    spend(book, "v", 400, t=0.0)
    assert book.alerts == []
    book.commit(a_job("a", "v", estimate=150), None, 1000.0)  # used 550: 50% fires on commit
    book.settle("a", 1010.0)  # used 410 again: nothing fires, nothing is taken back
    spend(book, "v", 100, t=2000.0)  # 510: 50% already fired
    spend(book, "v", 600, t=3000.0)  # 1110: 80% and 100% fire together, in order
    spend(book, "v", 600, t=5000.0)  # nothing more this period
    spend(book, "v", 900, t=DAY)  # the next day: 50% and 80% again
    got = [(a.t, a.period_label, a.threshold) for a in book.alerts]
    assert got == [
        (1000.0, "2026-11-30", 0.5),
        (3000.0, "2026-11-30", 0.8),
        (3000.0, "2026-11-30", 1.0),
        (DAY, "2026-12-01", 0.5),
        (DAY, "2026-12-01", 0.8),
    ]
    first = book.alerts[0]
    assert first == BudgetAlert(
        1000.0, "v", "v", "daily", "2026-11-30", 0.5, Decimal(400), Decimal(150),
        Decimal(1000), "USD",
    )  # fmt: skip
    assert str(first) == (
        "budget v (daily 2026-11-30) reached 50% of 1,000.00 USD: spent 400.00 + committed 150.00"
    )
    assert book.take_alerts() == book.alerts
    spend(book, "v", 200, t=DAY + 5000)
    assert [a.threshold for a in book.take_alerts()] == [1.0]


# --------------------------------------------------------------------------------------------
# Periods roll over
# --------------------------------------------------------------------------------------------


def test_monthly_budget_rolls_over_on_real_calendar_months() -> None:
    epoch = posix("2027-01-31T00:00:00Z")
    book = BudgetBook(spec(budget("v", "1000", "refuse"), epoch_s=epoch), FlatCosts())
    spend(book, "v", 1000, t=0.0)
    block = book.admissible(a_job("j", "v"), 2000.0)
    assert block is not None
    feb_1 = posix("2027-02-01T00:00:00Z") - epoch
    assert block.until == feb_1 == DAY
    assert book.on_submit(a_job("j", "v"), feb_1) == ALLOW
    assert book.admissible(a_job("j", "v"), feb_1) is None
    [s] = book.status(feb_1)
    assert (s.period_label, s.spent, s.committed) == ("2027-02", 0, 0)
    # February 2027 has 28 days: March starts 29 days after the epoch.
    spend(book, "v", 1000, t=feb_1 + 10)
    block = book.admissible(a_job("j", "v"), feb_1 + 2000)
    assert block is not None and block.until == 29 * DAY
    assert "2027-02" in str(block)


# --------------------------------------------------------------------------------------------
# Forecast and status
# --------------------------------------------------------------------------------------------


def test_forecast_extrapolates_spend_to_date_over_the_period() -> None:
    book = BudgetBook(spec(budget("v", "100000", "none", name="v-month")), FlatCosts())
    spend(book, "v", 1000, t=0.0)  # November: 30 days
    ten_days = 10 * DAY
    assert book.forecast("v-month", ten_days) == Decimal(3000)
    # A running job adds what it has cost so far, not what it might cost.
    book.commit(a_job("r", "v", estimate=5 * DAY), None, ten_days - 500)
    assert book.forecast("v-month", ten_days) == Decimal(1500 * 3)
    [s] = book.status(ten_days)
    assert (s.spent, s.committed, s.accrued) == (1000, 5 * DAY, 500)
    assert s.fraction == pytest.approx((1000 + 5 * DAY) / 100000)
    assert s.forecast == Decimal(4500)
    assert (s.start, s.end) == (0.0, 30 * DAY)


def test_forecast_at_period_start_and_outside_a_fixed_span() -> None:
    fixed = budget("g", "100", period="fixed", start=NOV_1 + 100, end=NOV_1 + 200, name="grant")
    book = BudgetBook(spec(budget("v", "100", name="month"), fixed), FlatCosts())
    assert book.forecast("month", 0.0) == 0
    assert book.forecast("grant", 50.0) is None
    assert [s.budget for s in book.status(50.0)] == ["month"]
    assert [s.budget for s in book.status(150.0)] == ["month", "grant"]
    with pytest.raises(KeyError):
        book.forecast("nobody", 0.0)


# --------------------------------------------------------------------------------------------
# Spec validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"period": "month"}, "period: unknown period 'month'"),
        ({"action": "deny"}, "action: unknown action 'deny'"),
        ({"limit": Decimal(0)}, "limit: must be > 0, got 0"),
        ({"limit": Decimal("NaN")}, "limit: must be a finite decimal amount"),
        ({"thresholds": (0.5, -0.1)}, r"thresholds\[1\]: must be a fraction > 0"),
        ({"thresholds": (0.5, 0.5)}, "thresholds: lists a threshold twice"),
        ({"org": "a//b"}, "org: 'a//b' has an empty part"),
        ({"period": "fixed", "start": 10}, "end: a fixed period needs a start and an end"),
        ({"period": "fixed", "start": 10, "end": 10}, "end: must be after start"),
        ({"start": 10}, "start: only a fixed period has a start"),
        ({"demote_to": ""}, "demote_to: must name a priority class"),
    ],
    ids=[
        "period",
        "action",
        "zero-limit",
        "nan-limit",
        "negative-threshold",
        "duplicate-threshold",
        "empty-org-part",
        "fixed-without-end",
        "fixed-empty-span",
        "start-on-calendar-period",
        "empty-demote-class",
    ],
)
def test_budget_spec_rejects(kw: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"org": "v", "period": "monthly", "limit": Decimal(10)} | kw
    with pytest.raises(BudgetError, match=message):
        BudgetSpec(**args)  # type: ignore[arg-type]


def test_budgets_spec_needs_whole_epoch_seconds() -> None:
    with pytest.raises(BudgetError, match="epoch_s: must be a whole number of seconds"):
        BudgetsSpec((), "USD", 0.5)  # type: ignore[arg-type]


def test_budgets_spec_rejects_two_budgets_with_one_label() -> None:
    with pytest.raises(BudgetError, match=r"budgets\[1\]: budget 'v' is also budgets\[0\]"):
        spec(budget("v"), budget("/v/", period="weekly"))
    spec(budget("v"), budget("v", period="weekly", name="v-week"))  # named apart: fine


# --------------------------------------------------------------------------------------------
# Property: a hard budget is overspent by at most one job
# --------------------------------------------------------------------------------------------

TENANTS = ("a/x", "a/y", "a", "b/z", "c")


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[BudgetsSpec, list[tuple[Job, float, float]], FlatCosts]:
    """Nested budgets on a small org tree, and jobs: (job, submit time, true duration)."""
    actions = st.sampled_from(("refuse", "demote", "off-peak", "none"))
    periods = st.sampled_from(("daily", "weekly"))
    limits = st.integers(1, 200_000).map(lambda x: Decimal(x) / 10)
    budgets = [
        BudgetSpec("a", draw(periods), draw(limits), (0.5, 1.0), draw(actions)),
        BudgetSpec("a/x", draw(periods), draw(limits), (0.8,), draw(actions)),
        BudgetSpec("", "daily", draw(limits), (), draw(actions), name="all"),
    ]
    if draw(st.booleans()):
        end = NOV_1 + 3 * 86_400
        budgets.append(
            BudgetSpec("b", "fixed", draw(limits), (1.0,), "refuse", start=NOV_1, end=end)
        )
    jobs: list[tuple[Job, float, float]] = []
    costs = FlatCosts()
    for k in range(draw(st.integers(1, 40))):
        estimate = draw(st.one_of(st.none(), st.integers(1, 50_000)))
        j = a_job(
            f"j{k}",
            draw(st.sampled_from(TENANTS)),
            estimate=None if estimate is None else float(estimate),
            cls=draw(st.sampled_from(("normal", "spot"))),
        )
        costs.per_s[j.id] = Decimal(draw(st.integers(0, 500))) / 100
        # Hourly arrivals over four days: several jobs often arrive together and queue.
        submit, duration = draw(st.integers(0, 96)) * 3600, draw(st.integers(0, 100_000))
        jobs.append((j, float(submit), float(duration)))
    jobs.sort(key=lambda x: (x[1], x[0].id))
    return spec(*budgets, runtime=20_000.0), jobs, costs


Key = tuple[str, str]  # (budget label, period label)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_hard_budget_is_never_overspent_by_more_than_one_job(
    scenario: tuple[BudgetsSpec, list[tuple[Job, float, float]], FlatCosts],
) -> None:
    """An event loop that starts a pending job only when ``admissible`` lets it, commits it
    and settles it at its true end (at most its admitted runtime: the backend stops it then).

    At every start, each hard budget governing the job is below its limit, or the start is a
    relief its action allows (a demote_to-class job under demote, an off-peak start under
    off-peak). So per budget and period the costs of the other starts stay below the limit
    plus the largest admitted cost; refuse budgets have no relief, so that bounds their spend.
    The book's own spent equals the sum of the settled costs."""
    budgets, jobs, costs = scenario
    book = BudgetBook(budgets, costs)
    limits = {b.label: b.limit for b in budgets.budgets}
    arrivals = list(jobs)
    truth = {j.id: d for j, _, d in jobs}
    pending: list[Job] = []
    running: dict[str, float] = {}  # id -> end
    keys_of: dict[str, list[tuple[Key, bool]]] = {}  # id -> (key, relief start?)
    full_price: dict[Key, Decimal] = {}
    every: dict[Key, Decimal] = {}
    biggest: dict[Key, Decimal] = {}
    events = sorted({t for _, t, _ in jobs})

    def finish(jid: str, end: float) -> None:
        cost = book.settle(jid, end)
        assert cost is not None
        for key, relief in keys_of.pop(jid):
            every[key] = every.get(key, Decimal(0)) + cost
            if not relief:
                full_price[key] = full_price.get(key, Decimal(0)) + cost
        del running[jid]

    t = 0.0
    while events and events[0] <= 40 * 86_400:
        t = events.pop(0)
        for jid, end in sorted(running.items(), key=lambda x: (x[1], x[0])):
            if end <= t:
                finish(jid, end)
        while arrivals and arrivals[0][1] <= t:
            j = arrivals.pop(0)[0]
            v = book.on_submit(j, t)
            if isinstance(v, Refuse):
                continue
            pending.append(replace(j, priority_class=v.to_class) if isinstance(v, Demote) else j)
        waiting: list[Job] = []
        for j in pending:
            block = book.admissible(j, t)
            if block is not None:
                assert block.until > t
                event(f"blocked by a {block.reason.action} budget")
                events.append(block.until)
                waiting.append(j)
                continue
            status = {s.budget: s for s in book.status(t)}
            keys: list[tuple[Key, bool]] = []
            for b in book.governing(j):
                s = status.get(b.label)
                if s is None:
                    continue  # a fixed budget outside its span
                relief = b.hard and s.spent + s.committed >= b.limit
                if relief:
                    event(f"relief start under {b.action}")
                    assert (b.action == "demote" and j.priority_class == b.demote_to) or (
                        b.action == "off-peak" and costs.off_peak(t)
                    ), f"{j.id} started at {t} over the limit of {b.label}"
                keys.append(((b.label, s.period_label), relief))
            admitted = book.commit(j, None, t)
            for key, _ in keys:
                biggest[key] = max(biggest.get(key, Decimal(0)), admitted)
            keys_of[j.id] = keys
            running[j.id] = t + min(truth[j.id], book.max_runtime(j))
            events.append(running[j.id])
        pending = waiting
        events = sorted({e for e in events if e > t} | {e for e in running.values() if e > t})
    for jid, end in sorted(running.items(), key=lambda x: (x[1], x[0])):
        finish(jid, end)
    hard = {b.label for b in budgets.budgets if b.hard}
    for key, total in full_price.items():
        if key[0] in hard:
            assert total < limits[key[0]] + biggest[key], (key, total, biggest[key])
    for b in budgets.budgets:
        if b.action == "refuse":
            for key, total in every.items():
                if key[0] == b.label:
                    assert total < b.limit + biggest[key]
    for s in book.status(t):
        assert s.committed == 0
        assert s.spent == every.get((s.budget, s.period_label), Decimal(0))


def test_the_property_scenario_does_block_jobs() -> None:
    """The overspend rule is what keeps the bound: here the second job has to wait."""
    book = BudgetBook(spec(budget("a", "100", "refuse", period="daily")), FlatCosts())
    first = a_job("first", "a/x", estimate=500)
    assert book.admissible(first, 0.0) is None
    assert book.commit(first, None, 0.0) == 500
    assert book.admissible(a_job("second", "a/x"), 1.0) is not None
    book.settle("first", 500.0)
    [s] = book.status(500.0)
    assert s.spent == 500 <= s.limit + 500
