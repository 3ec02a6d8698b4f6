"""Charges: rated usage, the unit the ledger stores and reports add up.

A ``Charge`` is one resource of one usage record over one price segment (a stretch of the
record inside one time-of-day band and one effective price-book version): its quantity in
the priced unit (GPU-hours, core-hours, GiB-hours, GB-hours, GB), the rate and the amount.
Money is ``Decimal``, rounded half-even to ``MONEY_QUANTUM`` once per charge, so that any
sum of charges is exact and the same in every order.
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

MONEY_QUANTUM = Decimal("0.000001")
"""Amounts are kept to a millionth of the currency unit (stored as integer micro-units)."""

QUANTITY_QUANTUM = Decimal("0.000000001")
"""Quantities in priced units are reported to a billionth."""


class Charge(NamedTuple):
    """One resource of one usage record over one price segment ``[start_ms, end_ms)``.

    ``key`` is unique per (record key, resource, GPU model, segment start): rating the same
    record again yields the same keys. ``gpu_model`` is ``""`` for resources other than
    ``gpu``; ``waste`` marks the idle part of allocated GPU time when utilisation is known
    (priced at its own rate, if the book has one).

    Immutable. A named tuple rather than a frozen dataclass: a Philly bill makes ~450,000
    charges, and a tuple is built several times faster than a frozen dataclass's
    ``__init__`` sets its fields (docs/billing.md, "Speed").
    """

    key: str
    record_key: str
    job_id: str
    attempt: int
    org: str
    queue: str
    priority_class: str
    cluster: str
    resource: str
    gpu_model: str
    band: str
    start_ms: int
    end_ms: int
    raw: int
    """The exact quantity in the record's integer units: milli-GPU × ms, milli-core × ms,
    MiB × ms (memory), MB × ms (storage), or MB (network)."""
    quantity: Decimal
    """``raw`` in the priced unit (GPU-hours, core-hours, GiB-hours, GB-hours, GB), rounded to
    ``QUANTITY_QUANTUM`` for reports; amounts are computed from ``raw``, not from this."""
    rate: Decimal
    amount: Decimal
    currency: str
    book_version: str
    waste: bool = False


def charge_key(record_key: str, resource: str, gpu_model: str, start_ms: int, waste: bool) -> str:
    """The unique key of a charge (see ``Charge``)."""
    tag = "~idle" if waste else ""
    return f"{record_key}|{resource}{tag}|{gpu_model}|{start_ms}"
