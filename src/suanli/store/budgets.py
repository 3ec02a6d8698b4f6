"""Budgets in the store: versioned, append-only, and their spend read from the ledger.

The ``budgets`` table (``schema.budgets``, migration ``0002``) holds one row per budget
*version*. Contracts:

- **Append-only.** ``set_budget`` appends a new version of the budget's label
  (``BudgetSpec.label``: its name, else its org, else ``*``) even when nothing changed;
  ``remove_budget`` appends a tombstone. No row is ever updated or deleted (the database
  refuses it), so ``budget_history`` shows every version ever set, with who set it and when.
- **Times come from the caller.** ``now`` (a timezone-aware ``datetime``) is when a version
  takes effect; it is stored as UTC epoch milliseconds. Nothing here reads a clock.
- **The set in effect at ``at``** is, per label, the version with the greatest
  ``(effective time, append order)`` not after ``at``, unless that version is a tombstone.
  Labels keep the position of their first setting (re-setting one keeps it in place; setting
  it again after a removal puts it last), so a file imported and exported keeps its order.
- **One currency.** The budgets of a set share one currency (``BudgetsSpec.currency``):
  setting a budget in another currency than the other current budgets is refused. The
  ``epoch_s`` of the set read back is 0 (times here are POSIX) and its ``default_runtime_s``
  the default: the store keeps budgets, not scheduler settings.
- **Spend comes from the ledger** (``budget_spend``): the net amount (charges plus
  reversals) of the entries whose org is the budget's org or below it and whose charge
  *starts* in the budget's period at or before ``at``. A charge counts whole in the period it
  starts in, as the admission rule of ``suanli.core.budget`` counts a job's cost. Sums are
  integer micro-units in SQL, so the result is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sqlalchemy as sa

from suanli.core.budget import DEFAULT_RUNTIME_S, BudgetSpec, BudgetsSpec
from suanli.core.model import SpecError
from suanli.core.periods import Period, period_at
from suanli.store.db import Target, reading, writing
from suanli.store.rows import micro
from suanli.store.schema import budgets, ledger_entries

__all__ = [
    "BudgetSpend",
    "BudgetStoreError",
    "BudgetVersion",
    "budget_history",
    "budget_spend",
    "current_budgets",
    "remove_budget",
    "set_budget",
]

SET = "set"
REMOVE = "remove"

FRACTION_QUANTUM = Decimal("0.000001")
"""``BudgetSpend.fraction`` is rounded half-even to a millionth (0.0001%)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class BudgetStoreError(SpecError):
    """A budget call that cannot be carried out as asked (nothing was written): an unknown
    label, a currency that differs from the other budgets', or a ledger in another currency."""


@dataclass(frozen=True, slots=True)
class BudgetVersion:
    """One stored version of budget ``label``: its ``spec`` and ``currency`` (both ``None``
    for a removal), when it took effect (UTC) and who set it (if said)."""

    label: str
    version: int
    spec: BudgetSpec | None
    currency: str | None
    effective_at: datetime
    set_by: str | None

    @property
    def removed(self) -> bool:
        return self.spec is None


@dataclass(frozen=True, slots=True)
class BudgetSpend:
    """What budget ``budget`` has spent in its ``period`` at an instant, from the ledger.

    ``period`` is ``None`` for a fixed budget outside its span (then nothing is spent and
    ``forecast`` is ``None``). ``spent`` is the exact net of ``entries`` ledger entries;
    ``fraction`` is ``spent / limit`` (rounded to ``FRACTION_QUANTUM``); ``crossed`` are the
    thresholds with ``spent >= threshold × limit`` (compared exactly); ``forecast`` is
    ``spent × period length / elapsed`` to the millisecond, rounded half-even to a
    micro-unit (``spent`` itself at the period's first millisecond or when nothing is
    spent)."""

    budget: BudgetSpec
    currency: str
    period: Period | None
    spent: Decimal
    entries: int
    fraction: Decimal
    crossed: tuple[float, ...]
    forecast: Decimal | None

    @property
    def exhausted(self) -> bool:
        """Whether the spend has reached the limit."""
        return self.spent >= self.budget.limit


# --- rows --------------------------------------------------------------------------------


def _ms(at: datetime) -> int:
    """``at`` as UTC epoch milliseconds (exact; sub-millisecond parts are dropped)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"times must be timezone-aware, got {at!r}")
    return (at - _EPOCH) // _MS


def _datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=int(ms))


def _thresholds_text(thresholds: Sequence[float]) -> str:
    # repr is the shortest text that reads back as the same float.
    return ",".join(repr(float(th)) for th in thresholds)


def _spec_of(row: Any) -> BudgetSpec:
    return BudgetSpec(
        org=row.org,
        period=row.period,
        limit=Decimal(row.limit_amount),
        thresholds=tuple(float(x) for x in row.thresholds.split(",")) if row.thresholds else (),
        action=row.action,
        demote_to=row.demote_to,
        start=None if row.period_start is None else int(row.period_start),
        end=None if row.period_end is None else int(row.period_end),
        name=row.name or "",
    )


def _version_of(row: Any) -> BudgetVersion:
    removed = row.kind == REMOVE
    return BudgetVersion(
        label=row.label,
        version=int(row.version),
        spec=None if removed else _spec_of(row),
        currency=None if removed else row.currency,
        effective_at=_datetime(row.effective_ms),
        set_by=row.set_by,
    )


def _in_effect(conn: sa.Connection, at_ms: int | None) -> dict[str, Any]:
    """The rows in effect at ``at_ms`` (``None``: after every version), per label, in the
    order labels were first set (see the module docstring)."""
    q = sa.select(budgets).order_by(budgets.c.effective_ms, budgets.c.id)
    if at_ms is not None:
        q = q.where(budgets.c.effective_ms <= at_ms)
    current: dict[str, Any] = {}
    for row in conn.execute(q):
        if row.kind == REMOVE:
            current.pop(row.label, None)
        else:
            current[row.label] = row  # an existing key keeps its position
    return current


def _append(conn: sa.Connection, label: str, values: dict[str, Any]) -> BudgetVersion:
    last = conn.execute(
        sa.select(sa.func.max(budgets.c.version)).where(budgets.c.label == label)
    ).scalar()
    row = {"label": label, "version": int(last or 0) + 1, **values}
    try:
        conn.execute(sa.insert(budgets), [row])
    except sa.exc.IntegrityError as exc:
        # Another writer appended the same version between the read and the insert.
        raise BudgetStoreError(
            f"budget {label!r} was changed at the same time by another writer: try again"
        ) from exc
    full = {c.name: None for c in budgets.columns} | row
    return _version_of(_Row(full))


class _Row:
    """Attribute access to a dict, to read back a row just inserted like a fetched one."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


# --- writing -----------------------------------------------------------------------------


def set_budget(
    target: Target,
    spec: BudgetSpec,
    currency: str,
    now: datetime,
    set_by: str | None = None,
) -> BudgetVersion:
    """Append a new version of budget ``spec.label``, in ``currency``, in effect from
    ``now``. ``BudgetStoreError`` (nothing written) if another current budget (the latest
    versions) is in a different currency."""
    BudgetsSpec((spec,), currency)  # validates the currency code
    effective = _ms(now)
    with writing(target) as conn:
        others = {
            label: row.currency
            for label, row in _in_effect(conn, None).items()
            if label != spec.label and row.currency != currency
        }
        if others:
            label, theirs = sorted(others.items())[0]
            raise BudgetStoreError(
                f"budget {spec.label!r} is in {currency} but budget {label!r} is in {theirs}: "
                "the budgets of a set share one currency"
            )
        return _append(
            conn,
            spec.label,
            {
                "kind": SET,
                "name": spec.name or None,
                "org": spec.org,
                "period": spec.period,
                "limit_amount": f"{spec.limit:f}",
                "currency": currency,
                "thresholds": _thresholds_text(spec.thresholds),
                "action": spec.action,
                "demote_to": spec.demote_to,
                "period_start": spec.start,
                "period_end": spec.end,
                "effective_ms": effective,
                "set_by": set_by,
            },
        )


def remove_budget(
    target: Target, label: str, now: datetime, set_by: str | None = None
) -> BudgetVersion:
    """Append a tombstone for budget ``label``, in effect from ``now``.
    ``BudgetStoreError`` (nothing written) if no current budget has that label."""
    effective = _ms(now)
    with writing(target) as conn:
        current = _in_effect(conn, None)
        if label not in current:
            known = ", ".join(current) or "none"
            raise BudgetStoreError(f"no budget {label!r} to remove (budgets: {known})")
        return _append(conn, label, {"kind": REMOVE, "effective_ms": effective, "set_by": set_by})


# --- reading -----------------------------------------------------------------------------


def current_budgets(target: Target, at: datetime | None = None) -> BudgetsSpec | None:
    """The budgets in effect at ``at`` (``None``: the latest versions, whatever their time),
    or ``None`` when there are none. ``BudgetStoreError`` if they mix currencies."""
    at_ms = None if at is None else _ms(at)
    with reading(target) as conn:
        rows = list(_in_effect(conn, at_ms).values())
    if not rows:
        return None
    currencies = sorted({r.currency for r in rows})
    if len(currencies) > 1:
        raise BudgetStoreError(
            f"the stored budgets mix currencies ({', '.join(currencies)}): set them again in one"
        )
    return BudgetsSpec(
        tuple(_spec_of(r) for r in rows), currencies[0], 0, default_runtime_s=DEFAULT_RUNTIME_S
    )


def budget_history(target: Target, label: str) -> list[BudgetVersion]:
    """Every version of budget ``label``, oldest first (empty if it was never set)."""
    q = sa.select(budgets).where(budgets.c.label == label).order_by(budgets.c.version)
    with reading(target) as conn:
        return [_version_of(row) for row in conn.execute(q)]


# --- spend -------------------------------------------------------------------------------


def _round_half_even(numerator: int, denominator: int) -> int:
    return round(Fraction(numerator, denominator))


def _org_condition(org: str) -> sa.ColumnElement[bool] | None:
    """Entries of ``org`` or below it; ``None`` for everyone. ``substr`` rather than
    ``LIKE``: an org may contain ``%`` or ``_``, and the prefix is compared as it is."""
    if not org:
        return None
    col = ledger_entries.c.org
    prefix = org + "/"
    return sa.or_(col == org, sa.func.substr(col, 1, len(prefix)) == prefix)


def _spend(conn: sa.Connection, spec: BudgetSpec, currency: str, at_ms: int) -> BudgetSpend:
    period = period_at(spec, 0, at_ms / 1000)
    if period is None:
        return BudgetSpend(spec, currency, None, Decimal(0), 0, Decimal(0), (), None)
    lo_ms, hi_ms = period.start_utc * 1000, period.end_utc * 1000
    # Charges started in [period start, at]: spend to date.
    where = [ledger_entries.c.start_ms >= lo_ms, ledger_entries.c.start_ms < min(hi_ms, at_ms + 1)]
    org = _org_condition(spec.org)
    if org is not None:
        where.append(org)
    q = (
        sa.select(
            ledger_entries.c.currency,
            sa.func.sum(ledger_entries.c.amount_micro),
            sa.func.count(),
        )
        .where(*where)
        .group_by(ledger_entries.c.currency)
    )
    sums = {cur: (int(amount), int(n)) for cur, amount, n in conn.execute(q)}
    foreign = sorted(c for c in sums if c != currency)
    if foreign:
        held = ", ".join(f"{micro(sums[c][0]):f} {c} ({sums[c][1]} entries)" for c in foreign)
        raise BudgetStoreError(
            f"budget {spec.label!r} is in {currency} but the ledger holds {held} of org "
            f"{spec.org or '*'} in {period}: budgets and charges must share a currency"
        )
    spent_micro, entries = sums.get(currency, (0, 0))
    spent = micro(spent_micro)
    limit = spec.limit
    crossed = tuple(th for th in spec.thresholds if spent >= Decimal(repr(th)) * limit)
    elapsed_ms = at_ms - lo_ms
    if elapsed_ms <= 0 or spent_micro <= 0:
        forecast = spent
    else:
        length_ms = hi_ms - lo_ms
        forecast = micro(_round_half_even(spent_micro * length_ms, elapsed_ms))
    return BudgetSpend(
        spec,
        currency,
        period,
        spent,
        entries,
        (spent / limit).quantize(FRACTION_QUANTUM),
        crossed,
        forecast,
    )


def budget_spend(target: Target, spec: BudgetsSpec, at_ms: int) -> list[BudgetSpend]:
    """Each budget of ``spec`` (in order) in its period at ``at_ms`` (UTC epoch ms), with its
    spend to date from the ledger (see the module docstring). One read transaction, so all
    budgets see the same ledger. ``BudgetStoreError`` if the ledger holds entries in another
    currency under a budget's org in its period."""
    with reading(target) as conn:
        return [_spend(conn, b, spec.currency, int(at_ms)) for b in spec.budgets]
