"""Builders for the budget tests: a stand-in cost model, specs, jobs, spending."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from builders import job
from suanli.core.budget import (
    BudgetBook,
    BudgetSpec,
    BudgetsSpec,
)
from suanli.core.model import Job

PRICES = Path(__file__).resolve().parent.parent / "examples" / "prices.yaml"
HOUR = 3600.0
DAY = 86_400.0


def posix(text: str) -> int:
    """UTC POSIX seconds of an ISO 8601 instant with an offset."""
    return int(datetime.fromisoformat(text).timestamp())


NOV_1 = posix("2026-11-01T00:00:00Z")


# --------------------------------------------------------------------------------------------
# A cost model that stands in for a price book
# --------------------------------------------------------------------------------------------


@dataclass
class FlatCosts:
    """Stands in for a price book in these tests: a job costs a fixed amount per second (its
    entry in ``per_s``, else ``default``), whatever its GPU model or the time; hours of the
    caller's clock alternate peak (even hours) and off-peak (odd hours)."""

    per_s: dict[str, Decimal] = field(default_factory=dict)
    default: Decimal = Decimal(1)
    currency: str = "USD"

    def rate(self, job: Job, gpu_model: str | None, t: float) -> Decimal:
        return self.per_s.get(job.id, self.default)

    def cost(self, job: Job, gpu_model: str | None, t0: float, t1: float) -> Decimal:
        return self.rate(job, gpu_model, t0) * Decimal(repr(max(0.0, t1 - t0)))

    def off_peak(self, t: float) -> bool:
        return int(t // HOUR) % 2 == 1

    def next_off_peak(self, t: float) -> float:
        return t if self.off_peak(t) else (t // HOUR + 1) * HOUR


def spec(*budgets: BudgetSpec, epoch_s: int = NOV_1, runtime: float = DAY) -> BudgetsSpec:
    return BudgetsSpec(budgets, "USD", epoch_s, runtime)


def budget(
    org: str,
    limit: str = "1000",
    action: str = "refuse",
    *,
    period: str = "monthly",
    thresholds: tuple[float, ...] = (0.5, 0.8, 1.0),
    start: int | None = None,
    end: int | None = None,
    name: str = "",
) -> BudgetSpec:
    return BudgetSpec(
        org, period, Decimal(limit), thresholds, action, start=start, end=end, name=name
    )


def a_job(id: str, tenant: str, *, estimate: float | None = 1000.0, cls: str = "normal") -> Job:
    return job(id, tenant=tenant, estimate=estimate, priority_class=cls)


def spend(book: BudgetBook, tenant: str, amount: float, t: float = 0.0, id: str = "") -> None:
    """Run a job of ``tenant`` costing ``amount`` (at 1 per second) from ``t`` to the end."""
    j = a_job(id or f"spend-{tenant}-{t}-{amount}", tenant, estimate=amount)
    book.commit(j, None, t)
    book.settle(j.id, t + amount)
