"""Budget periods on the calendar: a month, an ISO week or a day (UTC), or a fixed span.

``period_at(spec, epoch_s, t)`` is the period of a budget holding the caller's time ``t``
(``epoch_s`` is the UTC POSIX second ``t = 0`` stands for). Edges are whole seconds, so a
caller that comes back exactly at a period's end is in the next period.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol


class PeriodRule(Protocol):
    """What ``period_at`` reads of a budget (``suanli.core.budget.BudgetSpec``): its period
    kind (``daily``, ``weekly``, ``monthly``, ``fixed``) and, for ``fixed``, its span."""

    @property
    def period(self) -> str: ...

    @property
    def start(self) -> int | None: ...

    @property
    def end(self) -> int | None: ...


_DAY_S = 86_400
_MONDAY_DAY = 4  # 1970-01-05, the first Monday after the POSIX epoch, as a day number
_EPOCH_DATE = date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Period:
    """One period of a budget: ``[start_utc, end_utc)`` in POSIX seconds, the same span on
    the caller's clock (``start``, ``end``), its ``kind`` and ``label`` (``2026-11``,
    ``2026-W46``, ``2026-11-14``, ``2026-11-01..2027-01-01``)."""

    kind: str
    label: str
    start_utc: int
    end_utc: int
    start: float
    end: float

    @property
    def length_s(self) -> int:
        return self.end_utc - self.start_utc

    def __str__(self) -> str:
        return f"{self.kind} {self.label}"


def _day_date(day: int) -> date:
    return _EPOCH_DATE + timedelta(days=day)


def _date_day(d: date) -> int:
    return (d - _EPOCH_DATE).days


def _instant_text(s: int) -> str:
    dt = datetime.fromtimestamp(s, UTC)
    return dt.date().isoformat() if s % _DAY_S == 0 else dt.isoformat().replace("+00:00", "Z")


def period_at(spec: PeriodRule, epoch_s: int, t: float) -> Period | None:
    """The period of ``spec`` holding caller time ``t`` (UTC POSIX second ``epoch_s + t``);
    ``None`` for a fixed budget outside its span. Calendar periods are UTC: months from the
    1st 00:00, ISO weeks from Monday 00:00, days from 00:00."""
    at = epoch_s + t
    if spec.period == "fixed":
        assert spec.start is not None and spec.end is not None
        if not spec.start <= at < spec.end:
            return None
        lo, hi = spec.start, spec.end
        label = f"{_instant_text(lo)}..{_instant_text(hi)}"
    else:
        day = math.floor(at) // _DAY_S
        if spec.period == "daily":
            lo_day, hi_day = day, day + 1
            label = _day_date(day).isoformat()
        elif spec.period == "weekly":
            lo_day = day - (day - _MONDAY_DAY) % 7
            hi_day = lo_day + 7
            year, week, _ = _day_date(lo_day).isocalendar()
            label = f"{year}-W{week:02d}"
        else:
            d = _day_date(day)
            first = d.replace(day=1)
            after = date(d.year + 1, 1, 1) if d.month == 12 else date(d.year, d.month + 1, 1)
            lo_day, hi_day = _date_day(first), _date_day(after)
            label = f"{d.year}-{d.month:02d}"
        lo, hi = lo_day * _DAY_S, hi_day * _DAY_S
    # epoch_s and the edges are whole seconds, so `epoch_s + end` is exactly `end_utc` again:
    # a caller that comes back at `end` is in the next period, never stuck in this one.
    return Period(spec.period, label, lo, hi, float(lo - epoch_s), float(hi - epoch_s))
