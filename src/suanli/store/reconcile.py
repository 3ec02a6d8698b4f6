"""Reconcile the ledger with the charges it should hold.

The caller recomputes the expected charges (rating the usage records of the attempts again);
``reconcile`` compares them, key by charge key, with the ledger's net: for each charge key,
the sum of its entries (charges plus reversals; a settlement, the provider's credit netting
into the same key, is another account's and is left out) and the attributes of its live
entry (a charge entry not reversed). Each expected key is then one of:

- **matched**: exactly one live entry, equal to the expected charge, and a net equal to it;
- **missing**: no live entry and a zero net (never posted, or posted and reversed);
- **differing**: in the ledger but not equal (amount, quantity, raw or any attribute);

and each key in the ledger but not expected, with a live entry or a non-zero net, is
**unexpected**. Without ``fix`` nothing is written. With ``fix=True`` the ledger is brought
into agreement by appending only: each live entry of an unexpected or differing key is
reversed, and each missing or differing expected charge is posted, under its own key if the
ledger has never held that key, else under ``revision_key(key, n)``. A second ``reconcile``
of the same expectations is then clean, and a second ``fix`` writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from suanli.metering.charges import Charge
from suanli.store.db import Target, reading, writing
from suanli.store.rows import (
    CHARGE,
    CHUNK_ROWS,
    MICRO,
    SETTLEMENT,
    charge_of,
    entry_values,
    insert_entries,
    micro,
    nano,
    reversal_values,
    scaled,
    utc,
)
from suanli.store.schema import ledger_entries

_ATTRIBUTES = tuple(f for f in Charge._fields if f != "key")


def revision_key(key: str, n: int) -> str:
    """The entry key of the ``n``-th posting (``n >= 2``) of charge ``key`` by a fix."""
    return f"{key}!{n}"


@dataclass(frozen=True, slots=True)
class Difference:
    """A charge key in both the ledger and the expectations, but not equal."""

    key: str
    expected: Decimal
    """The expected amount."""
    recorded: Decimal
    """The ledger's net amount for the key."""
    fields: tuple[str, ...]
    """The ``Charge`` fields that differ (``entries`` if the key has several live entries)."""

    @property
    def delta(self) -> Decimal:
        """``recorded - expected``."""
        return self.recorded - self.expected


@dataclass(frozen=True, slots=True)
class CurrencyTotals:
    """Exact sums in one currency. Always ``ledger - expected == unexpected - missing +
    differing``."""

    expected: Decimal = Decimal(0)
    ledger: Decimal = Decimal(0)
    """The ledger's net, over all charge keys."""
    missing: Decimal = Decimal(0)
    """Expected amount of the missing keys."""
    unexpected: Decimal = Decimal(0)
    """Net amount of the unexpected keys."""
    differing: Decimal = Decimal(0)
    """Net minus expected amount over the differing keys."""


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    """What ``reconcile`` found (before any fix), sorted by key, and what a fix wrote."""

    matched: int
    missing: tuple[Charge, ...]
    unexpected: tuple[Charge, ...]
    """The live entries of the unexpected keys (keyed by entry key)."""
    unexpected_net: Mapping[str, Decimal]
    """The net amount of each unexpected charge key."""
    differing: tuple[Difference, ...]
    totals: Mapping[str, CurrencyTotals]
    """Per currency."""
    reversed: int = 0
    """Reversals appended by the fix."""
    posted: int = 0
    """Charges appended by the fix."""
    notes: tuple[str, ...] = field(default=())
    """Keys a fix could not correct by appending, and why."""

    @property
    def clean(self) -> bool:
        """True when the ledger agrees with the expectations."""
        return not (self.missing or self.unexpected_net or self.differing)


@dataclass
class _Ledgered:
    """What the ledger holds for one charge key."""

    currency_net: dict[str, list[int]] = field(default_factory=dict)
    """Per currency: net amount (micro), quantity (nano) and raw quantity."""
    live: list[Any] = field(default_factory=list)

    def net(self) -> tuple[Decimal, Decimal, int]:
        amount = sum(v[0] for v in self.currency_net.values())
        quantity = sum(v[1] for v in self.currency_net.values())
        raw = sum(v[2] for v in self.currency_net.values())
        return micro(amount), nano(quantity), raw

    def is_zero(self) -> bool:
        return not self.live and all(v == [0, 0, 0] for v in self.currency_net.values())


def _load(conn: sa.Connection) -> tuple[dict[str, _Ledgered], set[str]]:
    """What the ledger holds per charge key, and every entry key in it."""
    held: dict[str, _Ledgered] = defaultdict(_Ledgered)
    taken: set[str] = set()
    e = ledger_entries
    net = sa.select(
        e.c.charge_key,
        e.c.currency,
        sa.func.sum(e.c.amount_micro),
        sa.func.sum(e.c.quantity_nano),
        sa.func.sum(e.c.raw),
    ).where(e.c.kind != SETTLEMENT).group_by(e.c.charge_key, e.c.currency)
    for key, currency, amount, quantity, raw in conn.execute(net):
        held[key].currency_net[currency] = [int(amount), int(quantity), int(raw)]
    for (key,) in conn.execute(sa.select(e.c.key)):
        taken.add(key)
    reversal = e.alias("reversal")
    live = sa.select(e).where(
        e.c.kind == CHARGE,
        ~sa.exists().where(reversal.c.reverses == e.c.key),
    )
    for row in conn.execute(live.execution_options(yield_per=CHUNK_ROWS)):
        held[row.charge_key].live.append(row)
    return dict(held), taken


def reconcile(
    target: Target,
    expected: Iterable[Charge],
    *,
    fix: bool = False,
    now: datetime | None = None,
    batch: str = "reconcile",
    reason: str = "reconcile",
) -> ReconcileReport:
    """Compare the ledger with ``expected`` (unique keys; a key repeated must repeat the same
    charge) and report; with ``fix``, append what makes them agree (``now`` is then
    required: the time the fix is recorded)."""
    want: dict[str, Charge] = {}
    for c in expected:
        if want.setdefault(c.key, c) != c:
            raise ValueError(f"expected charges repeat key {c.key!r} with different values")
    if fix:
        if now is None:
            raise ValueError("reconcile(fix=True) needs now, the time the fix is recorded")
        recorded_at = utc(now)
    with writing(target) if fix else reading(target) as conn:
        held, taken = _load(conn)
        totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for h in held.values():
            for currency, (amount, _, _) in h.currency_net.items():
                totals[currency]["ledger"] += amount
        missing: list[Charge] = []
        differing: list[Difference] = []
        matched = 0
        for key in sorted(want):
            c = want[key]
            amount = scaled(c.amount, MICRO, "amount", c.key)
            totals[c.currency]["expected"] += amount
            found = held.get(key)
            if found is None or found.is_zero():
                missing.append(c)
                totals[c.currency]["missing"] += amount
                continue
            diff = _differing_fields(c, found)
            if not diff:
                matched += 1
                continue
            net_amount, _, _ = found.net()
            differing.append(Difference(key, c.amount, net_amount, diff))
            for currency, (a, _, _) in found.currency_net.items():
                totals[currency]["differing"] += a
            totals[c.currency]["differing"] -= amount
        unexpected: list[Charge] = []
        unexpected_net: dict[str, Decimal] = {}
        for key in sorted(held.keys() - want.keys()):
            h = held[key]
            if h.is_zero():
                continue
            unexpected.extend(charge_of(r) for r in h.live)
            unexpected_net[key] = h.net()[0]
            for currency, (a, _, _) in h.currency_net.items():
                totals[currency]["unexpected"] += a

        reversed_n = posted = 0
        notes: list[str] = []
        if fix:
            rows: list[tuple[Any, ...]] = []
            for key in [*(d.key for d in differing), *unexpected_net]:
                h = held[key]
                rows.extend(
                    reversal_values(r, recorded_at=recorded_at, reason=reason, batch=batch)
                    for r in h.live
                )
                if not h.live:
                    notes.append(f"{key}: a non-zero net without a live entry; not fixed")
            reversed_n = insert_entries(conn, rows)
            rows = []
            for c in [*missing, *(want[d.key] for d in differing)]:
                # Its own key if the ledger never held it, else the first free revision.
                entry_key, n = c.key, 2
                while entry_key in taken:
                    entry_key, n = revision_key(c.key, n), n + 1
                taken.add(entry_key)
                rows.append(
                    entry_values(
                        c,
                        key=entry_key,
                        kind=CHARGE,
                        charge_key=c.key,
                        reverses=None,
                        reason=reason,
                        recorded_at=recorded_at,
                        batch=batch,
                    )
                )
            posted = insert_entries(conn, rows)

    return ReconcileReport(
        matched=matched,
        missing=tuple(missing),
        unexpected=tuple(unexpected),
        unexpected_net=unexpected_net,
        differing=tuple(differing),
        totals={
            currency: CurrencyTotals(**{name: micro(v) for name, v in sums.items()})
            for currency, sums in sorted(totals.items())
        },
        reversed=reversed_n,
        posted=posted,
        notes=tuple(notes),
    )


def _differing_fields(c: Charge, h: _Ledgered) -> tuple[str, ...]:
    if len(h.live) != 1:
        return ("entries",)
    live = charge_of(h.live[0], key=c.key)
    diff = [name for name in _ATTRIBUTES if getattr(live, name) != getattr(c, name)]
    net_amount, net_quantity, net_raw = h.net()
    for name, net in (("amount", net_amount), ("quantity", net_quantity), ("raw", net_raw)):
        if net != getattr(c, name) and name not in diff:
            diff.append(name)
    return tuple(diff)
