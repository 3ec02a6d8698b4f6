"""The metering ledger: usage records and charges, append-only, idempotent, exact.

Contracts:

- **Append-only.** There is no update or delete here, and the database refuses both (see
  ``schema``). A correction is a reversal entry (the reversed entry's quantity, raw quantity
  and amount negated) plus, if needed, a new charge under a new key.
- **Idempotent.** Every row has a unique key; inserting a key that exists is a no-op
  (``INSERT ... ON CONFLICT DO NOTHING``). Replaying any subset of records or charges, in any
  order, any number of times, changes no total.
- **Exact.** Money is stored as integer micro-units and priced quantities as integer
  nano-units; totals are integer sums turned back into ``Decimal``. A charge whose amount is
  finer than ``MONEY_QUANTUM`` (or quantity finer than ``QUANTITY_QUANTUM``) is refused, not
  rounded.
- **No clock.** The time an entry is recorded (``now``) is passed in by the caller.

Every function takes a *target*: a ``Store`` (the call is one transaction of its own), or a
``Connection`` or ORM ``Session`` inside a transaction the caller owns (and commits).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from suanli.metering.charges import Charge
from suanli.metering.usage import UsageRecord
from suanli.store.db import Target, reading, writing
from suanli.store.rows import (
    CHARGE,
    CHUNK_ROWS,
    ENTRY_COLUMNS,
    REVERSAL,
    SETTLEMENT,
    LedgerEntry,
    bind_value,
    chunks,
    entry_of,
    entry_values,
    insert_entries,
    insert_many,
    micro,
    nano,
    reversal_values,
    utc,
)
from suanli.store.schema import ledger_entries, usage_gpus, usage_records

MS_PER_DAY = 86_400_000


class LedgerError(Exception):
    """A ledger call that cannot be carried out as asked (nothing was written)."""


class UnknownEntryError(LedgerError):
    """The key names no ledger entry."""


class AlreadyReversedError(LedgerError):
    """The entry has been reversed already (an entry is reversed at most once)."""


@dataclass(frozen=True, slots=True)
class Total:
    """The net of the entries of one group in one currency (reversals included, negative)."""

    group: tuple[str, ...]
    """One value per dimension of ``by``, in order."""
    currency: str
    amount: Decimal
    quantity: Decimal
    """Sum of the entries' priced quantities (each rounded to ``QUANTITY_QUANTUM``); only
    meaningful within one resource. ``raw`` is the exact figure."""
    raw: int
    entries: int


# --- usage -------------------------------------------------------------------------------


USAGE_COLUMNS = tuple(c.name for c in usage_records.columns if c.name != "id")
GPU_COLUMNS = tuple(c.name for c in usage_gpus.columns)


def record_usage(target: Target, records: Iterable[UsageRecord]) -> int:
    """Store usage records; a record whose key is stored already is skipped (the first
    stored wins). Returns how many were new. A record's GPUs go to ``usage_gpus`` with it,
    in the same transaction."""
    new = 0
    with writing(target) as conn:
        for chunk in chunks(records, CHUNK_ROWS):
            # Only records not stored yet (the first of a key repeated within the chunk)
            # are written, GPUs included, so a replayed key never mixes two records' GPUs.
            keys = list({r.key for r in chunk})
            stored = set(
                conn.execute(
                    sa.select(usage_records.c.key).where(usage_records.c.key.in_(keys))
                ).scalars()
            )
            fresh: dict[str, UsageRecord] = {}
            for r in chunk:
                if r.key not in stored:
                    fresh.setdefault(r.key, r)
            # ON CONFLICT still guards the inserts: a concurrent writer may store the same
            # record between the check and here (its GPUs are the same positions).
            new += insert_many(
                conn,
                usage_records,
                USAGE_COLUMNS,
                (
                    (
                        r.key,
                        r.job_id,
                        r.attempt,
                        r.start_ms,
                        r.end_ms,
                        r.org,
                        r.queue,
                        r.priority_class,
                        r.cluster,
                        r.cpu_milli,
                        r.memory_mib,
                        r.storage_mb,
                        r.network_mb,
                        r.gpu_util,
                    )
                    for r in fresh.values()
                ),
            )
            insert_many(
                conn,
                usage_gpus,
                GPU_COLUMNS,
                (
                    (r.key, i, model, milli)
                    for r in fresh.values()
                    for i, (model, milli) in enumerate(r.gpu)
                ),
                conflict=("record_key", "position"),
            )
    return new


def read_usage(
    target: Target, *, since_ms: int | None = None, until_ms: int | None = None
) -> Iterator[UsageRecord]:
    """The stored usage records starting in ``[since_ms, until_ms)``, in insertion order."""
    with reading(target) as conn:
        where = _time_range(usage_records.c.start_ms, since_ms, until_ms)
        gpus: dict[str, list[tuple[str, int]]] = defaultdict(list)
        gq = (
            sa.select(usage_gpus.c.record_key, usage_gpus.c.gpu_model, usage_gpus.c.milli)
            .join(usage_records, usage_records.c.key == usage_gpus.c.record_key)
            .where(*where)
            .order_by(usage_gpus.c.record_key, usage_gpus.c.position)
        )
        for key, model, milli in conn.execute(gq):
            gpus[key].append((model, int(milli)))
        q = sa.select(usage_records).where(*where).order_by(usage_records.c.id)
        for r in conn.execute(q):
            yield UsageRecord(
                key=r.key,
                job_id=r.job_id,
                attempt=r.attempt,
                start_ms=r.start_ms,
                end_ms=r.end_ms,
                org=r.org,
                queue=r.queue,
                priority_class=r.priority_class,
                cluster=r.cluster,
                gpu=tuple(gpus.get(r.key, ())),
                cpu_milli=r.cpu_milli,
                memory_mib=r.memory_mib,
                storage_mb=r.storage_mb,
                network_mb=r.network_mb,
                gpu_util=r.gpu_util,
            )


def gpu_time_by_model(
    target: Target, *, since_ms: int | None = None, until_ms: int | None = None
) -> dict[str, int]:
    """Milli-GPU × ms held per GPU model by the records starting in ``[since_ms, until_ms)``
    (exact; divide by ``usage.GPU_HOUR`` for GPU-hours)."""
    held = sa.func.sum(usage_gpus.c.milli * (usage_records.c.end_ms - usage_records.c.start_ms))
    q = (
        sa.select(usage_gpus.c.gpu_model, held)
        .join(usage_records, usage_records.c.key == usage_gpus.c.record_key)
        .where(*_time_range(usage_records.c.start_ms, since_ms, until_ms))
        .group_by(usage_gpus.c.gpu_model)
        .order_by(usage_gpus.c.gpu_model)
    )
    with reading(target) as conn:
        return {model: int(total) for model, total in conn.execute(q)}


# --- charges -----------------------------------------------------------------------------


def _shared(conn: Any, recorded_at: datetime) -> tuple[Any, tuple[Any, Any]]:
    """The values every row of a posting shares, converted to the driver's form once: the
    time recorded, and the two ``waste`` flags."""
    at = bind_value(conn, ledger_entries, "recorded_at", recorded_at)
    flags = (
        bind_value(conn, ledger_entries, "waste", False),
        bind_value(conn, ledger_entries, "waste", True),
    )
    return at, flags


def post_charges(target: Target, charges: Iterable[Charge], now: datetime, batch: str) -> int:
    """Append ``charges`` as ledger entries recorded at ``now`` in ``batch``; a charge whose
    key is in the ledger already is skipped. Returns how many were new.

    Refuses (``ValueError``, nothing written when ``target`` is a ``Store``) an amount finer
    than ``MONEY_QUANTUM`` or a quantity finer than ``QUANTITY_QUANTUM``.
    """
    recorded_at = utc(now)
    with writing(target) as conn:
        at, flags = _shared(conn, recorded_at)
        rows = (
            entry_values(
                c,
                key=c.key,
                kind=CHARGE,
                charge_key=c.key,
                reverses=None,
                reason=None,
                recorded_at=at,
                batch=batch,
                flags=flags,
            )
            for c in charges
        )
        return insert_entries(conn, rows, bound=("recorded_at", "waste"))


def provider(region: str) -> str:
    """The ledger account of a region that provides capacity to others (a settlement's
    ``org``): ``region/<name>``, in the simulated federation's bill and a live member's."""
    return f"region/{region}"


def settlement_key(key: str) -> str:
    """The key of the settlement of charge ``key`` (one a charge)."""
    return f"{key}!settlement"


def post_settlements(
    target: Target,
    settled: Iterable[tuple[Charge, str]],
    now: datetime,
    batch: str,
) -> int:
    """Credit, for each (charge, provider) of ``settled``, the provider's account with the
    charge: a ``settlement`` entry with the charge's attributes under ``org`` = ``provider``,
    its quantity, raw quantity and amount negated (so the two net to zero: what the user
    pays, the provider is paid), netting into the charge's key. A settlement whose key is in
    the ledger already is skipped. Returns how many were new."""
    recorded_at = utc(now)
    with writing(target) as conn:
        at, flags = _shared(conn, recorded_at)
        rows = (
            entry_values(
                c._replace(org=provider),
                key=settlement_key(c.key),
                kind=SETTLEMENT,
                charge_key=c.key,
                reverses=None,
                reason=f"credit to {provider} for the use by {c.org}",
                recorded_at=at,
                batch=batch,
                sign=-1,
                flags=flags,
            )
            for c, provider in settled
        )
        return insert_entries(conn, rows, bound=("recorded_at", "waste"))


def reverse(
    target: Target, key: str, now: datetime, reason: str, *, batch: str = "reversal"
) -> LedgerEntry:
    """Append the reversal of entry ``key`` and return it: same attributes, negated quantity,
    raw quantity and amount, so that the two net to zero.

    Raises ``UnknownEntryError`` if no entry has ``key``, ``AlreadyReversedError`` if it has
    been reversed, and ``LedgerError`` if it is itself a reversal (post a new charge instead).
    """
    recorded_at = utc(now)
    with writing(target) as conn:
        row = conn.execute(sa.select(ledger_entries).where(ledger_entries.c.key == key)).first()
        if row is None:
            raise UnknownEntryError(f"no ledger entry has key {key!r}")
        if row.kind != CHARGE:
            raise LedgerError(
                f"ledger entry {key!r} is a reversal and cannot be reversed: post a new charge"
            )
        by = conn.execute(
            sa.select(ledger_entries.c.key).where(ledger_entries.c.reverses == key)
        ).scalar()
        if by is not None:
            raise AlreadyReversedError(f"ledger entry {key!r} is already reversed (by {by!r})")
        entry = dict(
            zip(
                ENTRY_COLUMNS,
                reversal_values(row, recorded_at=recorded_at, reason=reason, batch=batch),
                strict=True,
            )
        )
        try:
            conn.execute(sa.insert(ledger_entries), [entry])
        except sa.exc.IntegrityError as exc:
            # Another writer reversed it between the check and the insert.
            raise AlreadyReversedError(f"ledger entry {key!r} is already reversed") from exc
        return entry_of(SimpleNamespace(**entry))


# --- reading back ------------------------------------------------------------------------


def _time_range(
    column: sa.ColumnElement[int], since_ms: int | None, until_ms: int | None
) -> list[sa.ColumnElement[bool]]:
    where = []
    if since_ms is not None:
        where.append(column >= since_ms)
    if until_ms is not None:
        where.append(column < until_ms)
    return where


def _entry_filters(
    since_ms: int | None, until_ms: int | None, kind: str | None, batch: str | None
) -> list[sa.ColumnElement[bool]]:
    where = _time_range(ledger_entries.c.start_ms, since_ms, until_ms)
    if kind is not None:
        if kind not in (CHARGE, REVERSAL, SETTLEMENT):
            raise ValueError(
                f"kind must be {CHARGE!r}, {REVERSAL!r} or {SETTLEMENT!r}, got {kind!r}"
            )
        where.append(ledger_entries.c.kind == kind)
    if batch is not None:
        where.append(ledger_entries.c.batch == batch)
    return where


def journal(
    target: Target,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    kind: str | None = None,
    batch: str | None = None,
) -> Iterator[LedgerEntry]:
    """The ledger's entries whose charge starts in ``[since_ms, until_ms)``, in append order,
    optionally only one ``kind`` or one ``batch``. Rows are streamed, not loaded at once."""
    q = (
        sa.select(ledger_entries)
        .where(*_entry_filters(since_ms, until_ms, kind, batch))
        .order_by(ledger_entries.c.id)
    )
    with reading(target) as conn:
        for row in conn.execute(q.execution_options(yield_per=CHUNK_ROWS)):
            yield entry_of(row)


def entries(
    target: Target,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    kind: str | None = None,
    batch: str | None = None,
) -> Iterator[Charge]:
    """``journal``'s entries as ``Charge`` objects (keyed by entry key; a reversal's quantity,
    raw quantity and amount are negative). A posted charge reads back equal to itself."""
    for e in journal(target, since_ms=since_ms, until_ms=until_ms, kind=kind, batch=batch):
        yield e.charge


# --- totals ------------------------------------------------------------------------------

_COLUMNS = {
    name: ledger_entries.c[name]
    for name in (
        "queue",
        "priority_class",
        "cluster",
        "resource",
        "gpu_model",
        "band",
        "book_version",
        "batch",
        "job_id",
        "kind",
    )
}
_ORG_DEPTH = {"department": 1, "project": 2, "user": None, "org": None}

DIMENSIONS = (*_ORG_DEPTH, *_COLUMNS, "day")
"""What ``totals`` groups by: ``department`` (first component of the org path), ``project``
(first two), ``user`` or ``org`` (the whole path), a charge column, or ``day`` (UTC date
of the charge's start, ``YYYY-MM-DD``)."""


def _org_prefix(org: str, depth: int | None) -> str:
    if depth is None:
        return org
    return "/".join(org.split("/")[:depth])


def totals(
    target: Target,
    by: Sequence[str] = ("org",),
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    kinds: Sequence[str] | None = None,
) -> list[Total]:
    """Net totals (charges plus reversals, and settlements) of the entries whose charge
    starts in ``[since_ms, until_ms)``, grouped by ``by`` (see ``DIMENSIONS``) and currency,
    sorted by group then currency; ``kinds``: only entries of these kinds. ``by=()`` gives
    one total per currency. Amounts are exact.
    """
    unknown = [d for d in by if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown total dimension(s) {unknown}: choose from {DIMENSIONS}")
    day = (ledger_entries.c.start_ms // MS_PER_DAY).label("day")
    # SQL groups by the stored columns; org prefixes and dates are derived here, from the
    # (few) distinct groups, which keeps the SQL the same on every backend.
    cols: dict[str, sa.ColumnElement[Any]] = {}
    for d in by:
        if d in _ORG_DEPTH:
            cols["org"] = ledger_entries.c.org
        elif d == "day":
            cols["day"] = day
        else:
            cols[d] = _COLUMNS[d]
    keys = [*cols.values(), ledger_entries.c.currency]
    q = (
        sa.select(
            *keys,
            sa.func.sum(ledger_entries.c.amount_micro),
            sa.func.sum(ledger_entries.c.quantity_nano),
            sa.func.sum(ledger_entries.c.raw),
            sa.func.count(),
        )
        .where(*_time_range(ledger_entries.c.start_ms, since_ms, until_ms))
        .where(*([ledger_entries.c.kind.in_(list(kinds))] if kinds is not None else []))
        .group_by(*keys)
    )
    acc: dict[tuple[tuple[str, ...], str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    with reading(target) as conn:
        for row in conn.execute(q):
            values = dict(zip(cols, row[: len(cols)], strict=True))
            currency = row[len(cols)]
            group = tuple(dimension_value(d, values) for d in by)
            sums = acc[(group, currency)]
            for i, v in enumerate(row[len(cols) + 1 :]):
                sums[i] += int(v)
    return [
        Total(
            group=group,
            currency=currency,
            amount=micro(amount),
            quantity=nano(quantity),
            raw=raw,
            entries=count,
        )
        for (group, currency), (amount, quantity, raw, count) in sorted(acc.items())
    ]


def dimension_value(dimension: str, values: Mapping[str, Any]) -> str:
    """The group value of ``dimension`` (of ``DIMENSIONS``) from a row's ``values``: the
    ``org`` path (cut to its depth for ``department`` and ``project``), ``day`` (days since
    the epoch, as a UTC date) or the column of that name."""
    if dimension in _ORG_DEPTH:
        return _org_prefix(values["org"], _ORG_DEPTH[dimension])
    if dimension == "day":
        return (date(1970, 1, 1) + timedelta(days=int(values["day"]))).isoformat()
    return str(values[dimension])
