"""Budgets: spending limits per organisation node and period, enforced at admission.

A **budget** caps what a subtree of the organisation (``org``, a path prefix such as
``vision`` or ``vision/detection``; ``""`` is everyone) may spend in a **period**: a calendar
month, an ISO week or a day (all in UTC), or a fixed span. It has soft **thresholds**
(fractions of the limit) that raise alerts, and a hard **action** taken once it is exhausted:
``demote`` new jobs to a cheaper class, start jobs only ``off-peak``, ``refuse`` new jobs, or
``none`` (alerts only). A job is governed by every budget whose org contains its tenant, so a
department's and a project's budget both apply; the strictest verdict wins.

Money is ``Decimal`` in the spec's currency. Times are seconds on the caller's clock ``t``
(simulated or wall); ``BudgetsSpec.epoch_s`` is the UTC POSIX second that ``t = 0`` stands
for, so that calendar periods can be computed (live: 0, as ``t`` is POSIX time already).

Contracts (``BudgetBook``):

- **Committed and spent.** When a job starts (``commit``), its *admitted cost*, what it costs
  if it runs to its maximum runtime, is committed to the current period of every budget that
  governs it. When it ends (``settle``: finished, failed or preempted), the commitment is
  replaced by its actual cost, never more than the admitted cost (the live backend stops a
  job at its maximum runtime). *Used* is ``spent + committed``; a budget is *exhausted* when
  used >= limit.
- **A job's cost counts in the period it started in**, even if it runs past the period's end.
  This is an approximation for admission; exact per-period billing is the ledger's work.
- **Admission rule.** ``admissible`` lets a job start only if every hard budget governing it
  has used < limit, except for *relief* starts that the action allows on purpose: a job of
  class ``demote_to`` under a ``demote`` budget, or any job during an off-peak band under an
  ``off-peak`` budget. Hence the **overspend bound**: the costs of non-relief starts of a
  budget's period exceed its limit by less than the admitted cost of the last job admitted
  (each saw used < limit, and actual costs never exceed admitted ones). A ``refuse`` budget
  has no relief, so its spend never exceeds limit + one job's admitted cost.
- **Alerts**: each threshold of a budget fires once per period, the first time used reaches
  it (checked on ``commit`` and ``settle``). Counting committed cost makes alerts early
  warnings: a long job that ends early may have raised one its actual cost would not.
- **Forecast**: spend to date (settled costs plus the part of running jobs' costs incurred
  so far) extrapolated linearly: ``to_date × period length / elapsed``.

``BudgetBook`` is state changed only by ``commit`` and ``settle``; the queries
(``on_submit``, ``admissible``, ``status``, ``forecast``) change nothing but caches, so the
simulator and the live scheduler, calling the same methods at the same points, decide alike.
Prices come from a ``CostModel`` (the metering layer provides one from a price book).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Protocol

from suanli.core.model import Job, KeyPathError, SpecError
from suanli.core.periods import Period, period_at

__all__ = [
    "ACTIONS",
    "ALLOW",
    "DEFAULT_RUNTIME_S",
    "DEFAULT_THRESHOLDS",
    "PERIODS",
    "Allow",
    "BudgetAlert",
    "BudgetBlock",
    "BudgetBook",
    "BudgetError",
    "BudgetExhausted",
    "BudgetSpec",
    "BudgetStatus",
    "BudgetsSpec",
    "CostModel",
    "Demote",
    "Period",
    "Refuse",
    "Verdict",
    "period_at",
]

PERIODS = ("monthly", "weekly", "daily", "fixed")
"""Period kinds: calendar month, ISO week (Monday 00:00 UTC), UTC day, or a fixed span."""

ACTIONS = ("none", "demote", "off-peak", "refuse")
"""What an exhausted budget does to new work; ``none`` only raises alerts."""

DEFAULT_THRESHOLDS = (0.5, 0.8, 1.0)
DEFAULT_RUNTIME_S = 24 * 3600.0
"""The maximum runtime of a job that gives no estimate (the live backend's default limit)."""

MONEY_QUANTUM = Decimal("0.000001")
"""Forecasts are rounded half-even to a millionth of the currency unit, as charges are."""


class BudgetError(KeyPathError):
    """A budget spec that cannot exist. ``path`` is the key path of the offending value
    (``limit``, ``budgets[2].action``) so that the config layer can prefix its file name."""


# --------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------


def _org(text: str) -> str:
    org = text.strip("/")
    if org and not all(part.strip() for part in org.split("/")):
        raise BudgetError("org", f"{text!r} has an empty part (write e.g. vision/detection)")
    return org


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """One budget: ``org`` may spend ``limit`` per ``period``.

    ``start``/``end`` (POSIX seconds, UTC; whole seconds so that period edges are exact on
    the caller's clock) bound a ``fixed`` period and are only for it; outside ``[start,
    end)`` a fixed budget governs nothing. ``thresholds`` are fractions of the limit (> 0,
    kept sorted); ``demote_to`` is the class a ``demote`` budget moves new jobs to. ``name``
    tells two budgets of one org apart (default: the org, or ``*`` for everyone)."""

    org: str
    period: str
    limit: Decimal
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    action: str = "none"
    demote_to: str = "spot"
    start: int | None = None
    end: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "org", _org(self.org))
        if self.period not in PERIODS:
            raise BudgetError(
                "period", f"unknown period {self.period!r} (periods: {', '.join(PERIODS)})"
            )
        if self.action not in ACTIONS:
            raise BudgetError(
                "action", f"unknown action {self.action!r} (actions: {', '.join(ACTIONS)})"
            )
        if not isinstance(self.limit, Decimal) or not self.limit.is_finite():
            raise BudgetError("limit", f"must be a finite decimal amount, got {self.limit!r}")
        if self.limit <= 0:
            raise BudgetError("limit", f"must be > 0, got {self.limit}")
        for k, th in enumerate(self.thresholds):
            if not (math.isfinite(th) and th > 0):
                raise BudgetError(f"thresholds[{k}]", f"must be a fraction > 0, got {th!r}")
        if len(set(self.thresholds)) != len(self.thresholds):
            raise BudgetError("thresholds", f"lists a threshold twice: {list(self.thresholds)}")
        object.__setattr__(self, "thresholds", tuple(sorted(self.thresholds)))
        if not self.demote_to:
            raise BudgetError("demote_to", "must name a priority class, e.g. spot")
        if self.period == "fixed":
            if self.start is None or self.end is None:
                raise BudgetError(
                    "start" if self.start is None else "end",
                    "a fixed period needs a start and an end",
                )
            if self.end <= self.start:
                raise BudgetError("end", f"must be after start ({self.start}), got {self.end}")
        elif self.start is not None or self.end is not None:
            key = "start" if self.start is not None else "end"
            raise BudgetError(
                key, f"only a fixed period has a {key} ({self.period} periods follow the calendar)"
            )

    @property
    def label(self) -> str:
        """How messages and ``forecast`` name the budget: its name, else its org."""
        return self.name or self.org or "*"

    @property
    def hard(self) -> bool:
        """Whether the budget acts at admission (any action but ``none``)."""
        return self.action != "none"

    def governs(self, tenant: str) -> bool:
        """Whether a job of ``tenant`` (an org path) falls under this budget's org."""
        org = self.org
        return not org or tenant == org or tenant.startswith(org + "/")


@dataclass(frozen=True, slots=True)
class BudgetsSpec:
    """All budgets, the ``currency`` of their limits, ``epoch_s`` (the UTC POSIX second the
    caller's ``t = 0`` stands for) and ``default_runtime_s``, the maximum runtime assumed for
    a job without an estimate. Labels (``BudgetSpec.label``) must be unique."""

    budgets: tuple[BudgetSpec, ...]
    currency: str
    epoch_s: int = 0
    default_runtime_s: float = DEFAULT_RUNTIME_S

    def __post_init__(self) -> None:
        if not self.currency or any(c.isspace() for c in self.currency):
            raise BudgetError("currency", f"must be a code such as USD, got {self.currency!r}")
        if self.epoch_s != int(self.epoch_s):
            # Whole seconds keep period edges exact on the caller's clock (see period_at).
            raise BudgetError("epoch_s", f"must be a whole number of seconds, got {self.epoch_s}")
        object.__setattr__(self, "epoch_s", int(self.epoch_s))
        if not (math.isfinite(self.default_runtime_s) and self.default_runtime_s > 0):
            raise BudgetError(
                "default_runtime", f"must be a duration > 0, got {self.default_runtime_s!r} s"
            )
        seen: dict[str, int] = {}
        for k, b in enumerate(self.budgets):
            if b.label in seen:
                raise BudgetError(
                    f"budgets[{k}]",
                    f"budget {b.label!r} is also budgets[{seen[b.label]}]; give one of them "
                    "a distinct name",
                )
            seen[b.label] = k


# --------------------------------------------------------------------------------------------
# Periods
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Prices, as the core sees them
# --------------------------------------------------------------------------------------------


class CostModel(Protocol):
    """What running a job costs, in ``currency``. Times are the caller's clock (seconds).

    ``gpu_model`` is the GPU model of the job's placement, or ``None`` when unknown; then
    the dearest model the job may use is assumed (an upper bound).

    Contracts: rates are >= 0, so ``cost(job, m, t0, t1)`` is 0 for ``t1 <= t0`` and never
    decreases as ``t1`` grows; ``next_off_peak(t)`` is ``t`` when ``off_peak(t)``, else the
    first later time ``u`` with ``off_peak(u)`` (``math.inf`` if there is none)."""

    @property
    def currency(self) -> str: ...

    def rate(self, job: Job, gpu_model: str | None, t: float) -> Decimal:
        """Money per second for the whole job (all its tasks) at time ``t``."""
        ...

    def cost(self, job: Job, gpu_model: str | None, t0: float, t1: float) -> Decimal:
        """Money for running the whole job from ``t0`` to ``t1``: the integral of ``rate``
        (across time-of-day bands and price changes)."""
        ...

    def off_peak(self, t: float) -> bool:
        """Whether ``t`` falls in an off-peak band."""
        ...

    def next_off_peak(self, t: float) -> float:
        """When the next off-peak band starts (``t`` itself if off-peak now)."""
        ...


# --------------------------------------------------------------------------------------------
# Verdicts, reasons, alerts, status
# --------------------------------------------------------------------------------------------


def _money(x: Decimal) -> str:
    return f"{x:,.2f}"


def _at(epoch_s: int, t: float) -> str:
    if not math.isfinite(t):
        return "never"
    dt = datetime.fromtimestamp(epoch_s + t, UTC)
    seconds = f"{t:.3f}".rstrip("0").rstrip(".")
    return f"{dt:%Y-%m-%d %H:%M} UTC (t={seconds} s)"


@dataclass(frozen=True, slots=True)
class BudgetExhausted:
    """Budget ``budget`` (of ``org``) has used ``spent + committed`` >= ``limit`` in period
    ``period`` (kind) ``period_label``, and its ``action`` applies to the job."""

    budget: str
    org: str
    period: str
    period_label: str
    spent: Decimal
    committed: Decimal
    limit: Decimal
    currency: str
    action: str
    demote_to: str = "spot"

    def __str__(self) -> str:
        who = (
            self.budget if self.budget in (self.org, "*") else f"{self.budget} of {self.org or '*'}"
        )
        used = f"spent {_money(self.spent)}"
        if self.committed:
            used += f" + committed {_money(self.committed)}"
        what = {
            "refuse": "new jobs are refused",
            "demote": f"new jobs run as {self.demote_to}",
            "off-peak": "jobs start only off-peak",
        }.get(self.action, "alerts only")
        return (
            f"budget {who} ({self.period} {self.period_label}) exhausted: {used} of "
            f"{_money(self.limit)} {self.currency}; {what}"
        )


@dataclass(frozen=True, slots=True)
class Allow:
    """The job may be queued as submitted."""

    def __str__(self) -> str:
        return "allowed"


ALLOW = Allow()


@dataclass(frozen=True, slots=True)
class Demote:
    """Queue the job, but in priority class ``to_class`` (an exhausted ``demote`` budget)."""

    to_class: str
    reason: BudgetExhausted

    def __str__(self) -> str:
        return f"demoted to {self.to_class}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Refuse:
    """Reject the job (an exhausted ``refuse`` budget)."""

    reason: BudgetExhausted

    def __str__(self) -> str:
        return f"refused: {self.reason}"


Verdict = Allow | Demote | Refuse


@dataclass(frozen=True, slots=True)
class BudgetBlock:
    """The job may not start now because of ``reason``; nothing this budget does can change
    before ``until`` (caller clock) except a running job of it settling below the limit.
    ``epoch_s`` only serves to print ``until`` as a UTC time."""

    reason: BudgetExhausted
    until: float
    epoch_s: int = 0

    def __str__(self) -> str:
        when = _at(self.epoch_s, self.until)
        if self.reason.action == "off-peak":
            return f"{self.reason}; waits until {when}"
        if self.reason.action == "demote":
            return f"{self.reason}; only {self.reason.demote_to} jobs start until {when}"
        return f"{self.reason}; waits for the next period at {when}"


@dataclass(frozen=True, slots=True)
class BudgetAlert:
    """At time ``t``, budget ``budget`` used ``spent + committed`` >= ``threshold`` × ``limit``
    for the first time in its period ``period_label``."""

    t: float
    budget: str
    org: str
    period: str
    period_label: str
    threshold: float
    spent: Decimal
    committed: Decimal
    limit: Decimal
    currency: str

    def __str__(self) -> str:
        used = f"spent {_money(self.spent)}"
        if self.committed:
            used += f" + committed {_money(self.committed)}"
        return (
            f"budget {self.budget} ({self.period} {self.period_label}) reached "
            f"{self.threshold:.0%} of {_money(self.limit)} {self.currency}: {used}"
        )


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """One budget in its period at a time: ``spent`` (settled), ``committed`` (admitted cost
    of running jobs), ``accrued`` (the part of ``committed`` already incurred), ``fraction``
    (``(spent + committed) / limit``) and ``forecast`` (see ``BudgetBook.forecast``)."""

    budget: str
    org: str
    period: str
    period_label: str
    start: float
    end: float
    limit: Decimal
    spent: Decimal
    committed: Decimal
    accrued: Decimal
    fraction: float
    forecast: Decimal
    action: str
    currency: str

    @property
    def exhausted(self) -> bool:
        return self.spent + self.committed >= self.limit


# --------------------------------------------------------------------------------------------
# The book
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Account:
    """What one budget used in one period; ``fired``: how many thresholds have fired."""

    budget: int
    period: Period
    spent: Decimal = Decimal(0)
    committed: Decimal = Decimal(0)
    fired: int = 0

    @property
    def used(self) -> Decimal:
        return self.spent + self.committed


@dataclass(slots=True)
class _Running:
    job: Job
    gpu_model: str | None
    start: float
    admitted: Decimal
    accounts: tuple[_Account, ...]


@dataclass(slots=True)
class _Budget:
    spec: BudgetSpec
    marks: tuple[Decimal, ...]  # threshold × limit, ascending
    current: Period | None = None  # the last period looked up (a cache)
    accounts: dict[int, _Account] = field(default_factory=dict)  # by period start_utc


class BudgetBook:
    """Budgets and what each has used, period by period (see the module docstring).

    Calls, in the order a scheduler makes them:

    1. ``on_submit(job, t)`` when a job arrives: queue it (``Allow``), queue it in a cheaper
       class (``Demote``) or reject it (``Refuse``).
    2. ``admissible(job, t)`` just before starting it: ``None``, or a ``BudgetBlock`` whose
       ``until`` says when to look again (also look again when a job of the same budget
       settles: its unused commitment is released).
    3. ``commit(job, gpu_model, t)`` when it starts; ``settle(job.id, t)`` when it ends,
       whatever the reason. ``settle`` right after ``commit`` (at the same ``t``) undoes a
       start that did not happen.
    """

    def __init__(self, spec: BudgetsSpec, costs: CostModel) -> None:
        if costs.currency != spec.currency:
            raise SpecError(
                f"budgets are in {spec.currency} but the cost model prices in {costs.currency}"
            )
        self.spec = spec
        self.costs = costs
        self.epoch_s = spec.epoch_s
        self._budgets = [
            _Budget(b, tuple(Decimal(repr(th)) * b.limit for th in b.thresholds))
            for b in spec.budgets
        ]
        self._by_label = {b.label: i for i, b in enumerate(spec.budgets)}
        self._by_tenant: dict[str, tuple[int, ...]] = {}
        self._hard_by_tenant: dict[str, tuple[int, ...]] = {}
        self._running: dict[str, _Running] = {}
        self.alerts: list[BudgetAlert] = []
        """Every alert so far, in order (append-only; ``take_alerts`` drains a copy)."""
        self._taken = 0

    # ---------------------------------------------------------------- lookups
    def governing(self, job: Job) -> tuple[BudgetSpec, ...]:
        """The budgets that govern ``job`` (whose org contains its tenant), in spec order."""
        return tuple(self._budgets[i].spec for i in self._governing(job.tenant))

    def _governing(self, tenant: str) -> tuple[int, ...]:
        hit = self._by_tenant.get(tenant)
        if hit is None:
            hit = tuple(i for i, b in enumerate(self._budgets) if b.spec.governs(tenant))
            self._by_tenant[tenant] = hit
            self._hard_by_tenant[tenant] = tuple(i for i in hit if self._budgets[i].spec.hard)
        return hit

    def _hard(self, tenant: str) -> tuple[int, ...]:
        hit = self._hard_by_tenant.get(tenant)
        if hit is None:
            self._governing(tenant)
            hit = self._hard_by_tenant[tenant]
        return hit

    def _period(self, i: int, t: float) -> Period | None:
        b = self._budgets[i]
        p = b.current
        if p is not None and p.start_utc <= self.epoch_s + t < p.end_utc:
            return p
        p = period_at(b.spec, self.epoch_s, t)
        if p is not None:
            b.current = p
        return p

    def _account(self, i: int, t: float, create: bool) -> _Account | None:
        p = self._period(i, t)
        if p is None:
            return None
        accounts = self._budgets[i].accounts
        a = accounts.get(p.start_utc)
        if a is None and create:
            a = accounts[p.start_utc] = _Account(i, p)
        return a

    def _exhausted(self, i: int, a: _Account) -> BudgetExhausted:
        s = self._budgets[i].spec
        return BudgetExhausted(
            s.label,
            s.org,
            a.period.kind,
            a.period.label,
            a.spent,
            a.committed,
            s.limit,
            self.spec.currency,
            s.action,
            s.demote_to,
        )

    def max_runtime(self, job: Job) -> float:
        """The runtime a job is admitted for: its estimate, else the spec's default."""
        return job.estimate if job.estimate is not None else self.spec.default_runtime_s

    # ---------------------------------------------------------------- 1. submission
    def on_submit(self, job: Job, t: float) -> Verdict:
        """What to do with a newly submitted job: ``Refuse`` if an exhausted ``refuse``
        budget governs it (the first in spec order), else ``Demote`` if an exhausted
        ``demote`` budget does and the job is not already of its ``demote_to`` class (the
        first such budget), else ``Allow``. ``off-peak`` budgets act at admission only."""
        demote: Demote | None = None
        for i in self._hard(job.tenant):
            s = self._budgets[i].spec
            if s.action not in ("refuse", "demote"):
                continue
            a = self._account(i, t, create=False)
            if a is None or a.used < s.limit:
                continue
            if s.action == "refuse":
                return Refuse(self._exhausted(i, a))
            if demote is None and job.priority_class != s.demote_to:
                demote = Demote(s.demote_to, self._exhausted(i, a))
        return demote if demote is not None else ALLOW

    # ---------------------------------------------------------------- 2. admission
    def admissible(self, job: Job, t: float) -> BudgetBlock | None:
        """``None`` if the budgets let ``job`` start at ``t``; else the block that lasts
        longest (a job cannot start before every block's ``until``).

        An exhausted budget blocks a job it governs: ``refuse`` until the period ends;
        ``demote`` likewise, unless the job is of class ``demote_to``; ``off-peak`` until the
        next off-peak band starts (or the period ends, if sooner), unless ``t`` is off-peak.
        ``none`` budgets never block."""
        block: BudgetBlock | None = None
        for i in self._hard(job.tenant):
            s = self._budgets[i].spec
            a = self._account(i, t, create=False)
            if a is None or a.used < s.limit:
                continue
            if s.action == "demote" and job.priority_class == s.demote_to:
                continue
            until = a.period.end
            if s.action == "off-peak":
                if self.costs.off_peak(t):
                    continue
                nxt = self.costs.next_off_peak(t)
                if not nxt > t:
                    raise ValueError(
                        f"cost model: next_off_peak({t}) = {nxt} but off_peak({t}) is false"
                    )
                until = min(until, nxt)
            if block is None or until > block.until:
                block = BudgetBlock(self._exhausted(i, a), until, self.epoch_s)
        return block

    # ---------------------------------------------------------------- 3. start and end
    def commit(
        self, job: Job, gpu_model: str | None, t: float, admitted_s: float | None = None
    ) -> Decimal:
        """``job`` starts at ``t`` on GPUs of ``gpu_model`` (``None``: unknown). Its admitted
        cost, ``cost(t, t + admitted_s)`` with ``admitted_s`` defaulting to ``max_runtime``,
        is committed to the current period of every budget governing it; returns that cost.
        Committing a job that is already running changes nothing."""
        r = self._running.get(job.id)
        if r is not None:
            return r.admitted
        run_s = self.max_runtime(job) if admitted_s is None else admitted_s
        admitted = self.costs.cost(job, gpu_model, t, t + max(0.0, run_s))
        accounts: list[_Account] = []
        for i in self._governing(job.tenant):
            a = self._account(i, t, create=True)
            if a is None:
                continue
            a.committed += admitted
            accounts.append(a)
            self._alert(a, t)
        self._running[job.id] = _Running(job, gpu_model, t, admitted, tuple(accounts))
        return admitted

    def settle(self, job_id: str, t: float) -> Decimal | None:
        """The job ended at ``t`` (finished, failed or preempted): its commitment becomes its
        actual cost, ``min(admitted, cost(start, t))``, in the periods it was committed to.
        Returns that cost; ``None`` (and no change) for a job that is not running."""
        r = self._running.pop(job_id, None)
        if r is None:
            return None
        actual = min(r.admitted, self.costs.cost(r.job, r.gpu_model, r.start, max(t, r.start)))
        for a in r.accounts:
            a.committed -= r.admitted
            a.spent += actual
            self._alert(a, t)
        return actual

    def running(self) -> list[str]:
        """Ids of the jobs committed and not yet settled, in start order."""
        return list(self._running)

    def _alert(self, a: _Account, t: float) -> None:
        b = self._budgets[a.budget]
        used = a.used
        while a.fired < len(b.marks) and used >= b.marks[a.fired]:
            s = b.spec
            self.alerts.append(
                BudgetAlert(
                    t,
                    s.label,
                    s.org,
                    a.period.kind,
                    a.period.label,
                    s.thresholds[a.fired],
                    a.spent,
                    a.committed,
                    s.limit,
                    self.spec.currency,
                )
            )
            a.fired += 1

    def take_alerts(self) -> list[BudgetAlert]:
        """The alerts raised since the last call (``alerts`` keeps them all)."""
        new = self.alerts[self._taken :]
        self._taken = len(self.alerts)
        return new

    # ---------------------------------------------------------------- read-outs
    def _accrued(self, t: float) -> dict[int, Decimal]:
        """Per account (by ``id``), what its running jobs have cost up to ``t``."""
        out: dict[int, Decimal] = {}
        for r in self._running.values():
            so_far = min(r.admitted, self.costs.cost(r.job, r.gpu_model, r.start, max(t, r.start)))
            for a in r.accounts:
                out[id(a)] = out.get(id(a), Decimal(0)) + so_far
        return out

    def _forecast(self, a: _Account | None, p: Period, t: float, accrued: Decimal) -> Decimal:
        to_date = (a.spent if a is not None else Decimal(0)) + accrued
        elapsed = self.epoch_s + t - p.start_utc
        if elapsed <= 0 or not to_date:
            return to_date
        scale = Decimal(p.length_s) / Decimal(repr(float(elapsed)))
        return (to_date * scale).quantize(MONEY_QUANTUM)

    def forecast(self, budget: str, t: float) -> Decimal | None:
        """Spend of budget ``budget`` (its label: name, else org) at the end of its period at
        ``t`` if spending goes on at its average rate since the period began: ``to_date ×
        length / elapsed``, where ``to_date`` is settled costs plus what running jobs have
        cost so far. ``None`` for a fixed budget outside its span; ``KeyError`` for an unknown
        budget. Early in a period the extrapolation swings widely (it is linear)."""
        i = self._by_label[budget]
        p = self._period(i, t)
        if p is None:
            return None
        a = self._budgets[i].accounts.get(p.start_utc)
        accrued = self._accrued(t).get(id(a), Decimal(0)) if a is not None else Decimal(0)
        return self._forecast(a, p, t, accrued)

    def status(self, t: float) -> list[BudgetStatus]:
        """Every budget with a period at ``t``, in spec order."""
        accrued = self._accrued(t)
        out: list[BudgetStatus] = []
        for i, b in enumerate(self._budgets):
            p = self._period(i, t)
            if p is None:
                continue
            s = b.spec
            a = b.accounts.get(p.start_utc)
            spent = a.spent if a is not None else Decimal(0)
            committed = a.committed if a is not None else Decimal(0)
            acc = accrued.get(id(a), Decimal(0)) if a is not None else Decimal(0)
            out.append(
                BudgetStatus(
                    s.label,
                    s.org,
                    p.kind,
                    p.label,
                    p.start,
                    p.end,
                    s.limit,
                    spent,
                    committed,
                    acc,
                    float((spent + committed) / s.limit),
                    self._forecast(a, p, t, acc),
                    s.action,
                    self.spec.currency,
                )
            )
        return out
