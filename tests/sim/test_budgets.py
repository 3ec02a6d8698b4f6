"""Budgets in the simulator: a department's hard budget runs out, its later jobs are refused
or demoted with the budget's reason, and the other departments are unaffected."""

from __future__ import annotations

from decimal import Decimal

import pytest

from builders import gpus_cluster, job
from suanli.config.budgets import budgets_from_dict
from suanli.core.budget import BudgetBook
from suanli.metering.costmodel import PriceBookCostModel
from suanli.metering.prices import price_book_from_dict
from suanli.sim.engine import PolicySet, simulate

EPOCH_S = 1_767_571_200  # 2026-01-05T00:00:00Z, a Monday

BOOK = price_book_from_dict(
    {
        "currency": "USD",
        "versions": [
            {
                "name": "flat",
                "effective": "2026-01-01T00:00:00Z",
                "rates": [{"resource": "gpu", "price": "1.00"}],  # per GPU-hour, any model
            }
        ],
    },
    "prices.yaml",
)


def run(action: str, limit: str = "3.5"):  # type: ignore[no-untyped-def]
    """8 GPUs; department a submits a one-GPU, one-hour job every 10 minutes, b likewise."""
    spec = budgets_from_dict(
        {
            "currency": "USD",
            "budgets": [{"org": "a", "period": "monthly", "limit": limit, "action": action}],
        },
        "budgets.yaml",
        epoch_s=EPOCH_S,
    )
    cluster = gpus_cluster(8)
    book = BudgetBook(spec, PriceBookCostModel(BOOK, cluster.name, EPOCH_S * 1000, ["V100"]))
    jobs = [
        job(f"{dept}{k}", k * 600.0, 3600.0, tenant=f"{dept}/team", estimate=3600.0)
        for k in range(8)
        for dept in ("a", "b")
    ]
    return simulate(cluster, jobs, PolicySet("fifo", "first-fit"), budgets=book), book


def test_refuse_stops_the_departments_later_jobs_and_spares_the_others() -> None:
    res, book = run("refuse")
    rec = res.records
    notes = {rec.ids[i]: text for i, text in rec.budget.items()}
    started = {jid for jid, s in zip(rec.ids, rec.start.tolist(), strict=True) if s == s}
    # Each a-job commits $1 (1 GPU for its one-hour estimate): a0..a3 fit under $3.50.
    assert {f"a{k}" for k in range(4)} <= started
    refused = sorted(j for j, t in notes.items() if t.startswith("refused"))
    assert refused == [f"a{k}" for k in range(4, 8)]
    assert "budget a (monthly 2026-01) exhausted" in notes["a4"]
    assert "new jobs are refused" in notes["a4"]
    # b has no budget: all its jobs ran, untouched.
    assert {f"b{k}" for k in range(8)} <= started
    assert not any(j.startswith("b") for j in notes)
    assert res.summary()["refused"] == 4
    # Spent never passes the limit by more than one job's admitted cost ($1).
    (status,) = book.status(8 * 3600.0)
    assert status.spent <= Decimal("3.5") + 1


def test_demote_runs_the_departments_later_jobs_as_spot() -> None:
    res, _ = run("demote")
    rec = res.records
    notes = {rec.ids[i]: text for i, text in rec.budget.items()}
    demoted = sorted(j for j, t in notes.items() if t.startswith("demoted"))
    assert demoted == [f"a{k}" for k in range(4, 8)]
    assert "demoted from normal to spot" in notes["a4"]
    classes = dict(zip(rec.ids, res.job_class, strict=True))
    assert all(classes[j] == "spot" for j in demoted)
    assert all(classes[f"b{k}"] == "normal" for k in range(8))
    assert res.finished == 16  # demoted jobs still run


def test_budget_alerts_are_reported() -> None:
    res, _ = run("none", limit="4")
    assert any("reached 50%" in a for a in res.budget_alerts)
    assert res.summary()["refused"] == 0


@pytest.mark.parametrize("action", ["refuse", "demote", "off-peak"])
def test_budgets_never_change_a_run_without_jobs_of_that_department(action: str) -> None:
    res, _ = run(action, limit="1000")
    assert not res.records.budget and res.finished == 16


def test_strict_order_wakes_at_the_end_of_an_off_peak_hold() -> None:
    """A budget holds the head of a strict queue until off-peak: the replay must wake then
    and go on (it ran cycles at that instant forever: strict mode never cleared the wake)."""
    import signal

    book = price_book_from_dict(
        {
            "currency": "USD",
            "bands": {"peak": "Mon-Fri 08:00-20:00", "off-peak": "default"},
            "versions": [
                {
                    "name": "flat",
                    "effective": "2026-01-01T00:00:00Z",
                    "rates": [{"resource": "gpu", "price": "1.00"}],
                }
            ],
        },
        "prices.yaml",
    )
    spec = budgets_from_dict(
        {
            "currency": "USD",
            "budgets": [{"org": "a", "period": "monthly", "limit": "2", "action": "off-peak"}],
        },
        "budgets.yaml",
        epoch_s=EPOCH_S,
    )
    cluster = gpus_cluster(2)
    budgets = BudgetBook(spec, PriceBookCostModel(book, cluster.name, EPOCH_S * 1000, ["V100"]))
    hour = 3600.0
    jobs = [job(f"a{k}", 9 * hour + k, hour, tenant="a/team", estimate=hour) for k in range(4)]
    jobs.append(job("b0", 9 * hour + 10, hour, gpus=2, tenant="b/team"))  # behind them, and
    # still waiting when the hold ends

    def hang(*_: object) -> None:
        raise TimeoutError("the replay did not end")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(30)
    try:
        res = simulate(
            cluster, jobs, PolicySet("fifo", "first-fit", strict=True), budgets=budgets
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert res.finished == 5
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    # a0 and a1 commit the $2; a2 and a3 wait for off-peak at 20:00 (UTC, the book's zone),
    # and b0 waits behind them in strict order until they end.
    assert start["a0"] == 9 * hour and start["a1"] == 9 * hour + 1
    assert start["a2"] == start["a3"] == 20 * hour
    assert start["b0"] == 21 * hour
