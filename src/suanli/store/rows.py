"""Ledger rows to and from ``Charge`` values, and the idempotent insert.

Money is stored as ``amount × 10**MICRO`` and priced quantities as ``quantity × 10**NANO``,
both integers: exact on SQLite (which has no exact decimal type) and PostgreSQL alike. A
value finer than that is refused, never rounded. The rate, never summed, is kept as its
decimal string and reads back exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from itertools import islice
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from suanli.metering.charges import Charge
from suanli.store.schema import ledger_entries

CHARGE = "charge"
REVERSAL = "reversal"
SETTLEMENT = "settlement"

MICRO = 6
"""Money is stored as ``amount × 10**MICRO`` (``charges.MONEY_QUANTUM``)."""
NANO = 9
"""Priced quantities are stored as ``quantity × 10**NANO`` (``charges.QUANTITY_QUANTUM``)."""

CHUNK_ROWS = 10_000
"""Rows per ``INSERT`` call; SQLAlchemy pages each call into multi-row statements within
the bound-parameter limits of SQLite and PostgreSQL."""

_INT64 = 2**63
_POWERS = {MICRO: 10**MICRO, NANO: 10**NANO}

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One ledger row: the charge (for a reversal: negated quantity, raw and amount; the
    rate is kept), and the bookkeeping around it."""

    charge: Charge
    kind: str
    """``charge``, ``reversal`` or ``settlement`` (a credit to the region that provided a
    cross-region use: the charge's figures negated, under the provider's account)."""
    charge_key: str
    """The charge key the entry nets into (see ``schema.ledger_entries``)."""
    reverses: str | None
    reason: str | None
    recorded_at: datetime
    """UTC."""
    batch: str


def chunks(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def insert_ignoring_existing(
    conn: Connection, table: sa.Table, conflict: Sequence[str] = ("key",)
) -> Any:
    """``INSERT ... ON CONFLICT (conflict) DO NOTHING`` on ``table`` in the connection's
    dialect. Only a conflict on that unique key is ignored; any other constraint violation
    still raises."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    raise ValueError(f"unsupported database dialect {conn.dialect.name!r}")


def scaled(value: Decimal, places: int, what: str, key: str) -> int:
    """``value × 10**places`` as a 64-bit int; ``ValueError`` if ``value`` is finer than
    ``10**-places``, not finite, or out of range (the message names charge ``key``)."""
    try:
        num, den = value.as_integer_ratio()  # exact, in lowest terms
    except (ValueError, OverflowError, ArithmeticError) as exc:
        raise ValueError(f"charge {key!r}: {what} {value} is not a finite number") from exc
    whole, rest = divmod(num * _POWERS[places], den)
    if rest:
        raise ValueError(f"charge {key!r}: {what} {value} is finer than 10**-{places}")
    if not -_INT64 <= whole < _INT64:
        raise ValueError(f"charge {key!r}: {what} {value} is out of range")
    return whole


def micro(n: int) -> Decimal:
    """Micro-units back to a ``Decimal`` amount."""
    return Decimal(int(n)).scaleb(-MICRO)


def nano(n: int) -> Decimal:
    """Nano-units back to a ``Decimal`` quantity."""
    return Decimal(int(n)).scaleb(-NANO)


def utc(now: datetime) -> datetime:
    """``now`` in UTC; a naive datetime is refused (its zone would be a guess)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    return now.astimezone(UTC)


ENTRY_COLUMNS = tuple(c.name for c in ledger_entries.columns if c.name != "id")
"""The columns of a ledger row as written, in the order of ``entry_values``."""


def entry_values(
    c: Charge,
    *,
    key: str,
    kind: str,
    charge_key: str,
    reverses: str | None,
    reason: str | None,
    recorded_at: datetime,
    batch: str,
    sign: int = 1,
    flags: tuple[Any, Any] = (False, True),
) -> tuple[Any, ...]:
    """The ``ledger_entries`` row of charge ``c``, in ``ENTRY_COLUMNS`` order (``sign=-1``:
    quantities and amount negated, for a reversal). ``recorded_at`` must be UTC. ``waste``
    is written as ``flags[0]`` (false) or ``flags[1]`` (true): the driver's form of the
    two values, where the caller binds them once (``bind_value``)."""
    # One unpacking instead of twenty attribute reads: a bill writes ~450,000 rows.
    (
        c_key,
        record_key,
        job_id,
        attempt,
        org,
        queue,
        priority_class,
        cluster,
        resource,
        gpu_model,
        band,
        start_ms,
        end_ms,
        raw,
        quantity,
        rate,
        amount,
        currency,
        book_version,
        waste,
    ) = c
    return (
        key,
        kind,
        charge_key,
        reverses,
        reason,
        recorded_at,
        batch,
        record_key,
        job_id,
        attempt,
        org,
        queue,
        priority_class,
        cluster,
        resource,
        gpu_model,
        band,
        start_ms,
        end_ms,
        sign * raw,
        sign * scaled(quantity, NANO, "quantity", c_key),
        str(rate),
        sign * scaled(amount, MICRO, "amount", c_key),
        currency,
        book_version,
        flags[1] if waste else flags[0],
    )


def entry_row(c: Charge, **kw: Any) -> dict[str, Any]:
    """``entry_values`` as a dict keyed by column name."""
    return dict(zip(ENTRY_COLUMNS, entry_values(c, **kw), strict=True))


def reversal_key(key: str) -> str:
    """The key of the reversal of entry ``key`` (deterministic: one reversal per entry)."""
    return f"{key}!reversal"


def reversal_values(row: Any, *, recorded_at: datetime, reason: str, batch: str) -> tuple[Any, ...]:
    """The row that reverses ledger row ``row`` (``ENTRY_COLUMNS`` order): same attributes
    and charge key, negated quantity, raw quantity and amount."""
    return entry_values(
        charge_of(row),
        key=reversal_key(row.key),
        kind=REVERSAL,
        charge_key=row.charge_key,
        reverses=row.key,
        reason=reason,
        recorded_at=recorded_at,
        batch=batch,
        sign=-1,
    )


def charge_of(row: Any, key: str | None = None) -> Charge:
    """The ``Charge`` of a ledger row (keyed by the entry key unless ``key`` is given)."""
    return Charge(
        key=row.key if key is None else key,
        record_key=row.record_key,
        job_id=row.job_id,
        attempt=row.attempt,
        org=row.org,
        queue=row.queue,
        priority_class=row.priority_class,
        cluster=row.cluster,
        resource=row.resource,
        gpu_model=row.gpu_model,
        band=row.band,
        start_ms=row.start_ms,
        end_ms=row.end_ms,
        raw=int(row.raw),
        quantity=nano(row.quantity_nano),
        rate=Decimal(row.rate),
        amount=micro(row.amount_micro),
        currency=row.currency,
        book_version=row.book_version,
        waste=bool(row.waste),
    )


def entry_of(row: Any) -> LedgerEntry:
    """The ``LedgerEntry`` of a ledger row."""
    recorded_at = row.recorded_at
    # SQLite keeps no zone (the ledger writes UTC); PostgreSQL answers in the session's zone.
    recorded_at = (
        recorded_at.replace(tzinfo=UTC)
        if recorded_at.tzinfo is None
        else recorded_at.astimezone(UTC)
    )
    return LedgerEntry(
        charge=charge_of(row),
        kind=row.kind,
        charge_key=row.charge_key,
        reverses=row.reverses,
        reason=row.reason,
        recorded_at=recorded_at,
        batch=row.batch,
    )


def insert_many(
    conn: Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: Iterable[tuple[Any, ...]],
    conflict: Sequence[str] = ("key",),
    *,
    bound: Iterable[str] = (),
) -> int:
    """Insert ``rows`` (values in ``columns`` order) into ``table`` in chunks of
    ``CHUNK_ROWS``, skipping rows whose ``conflict`` key exists; returns how many were
    inserted. The values of the ``bound`` columns are given in the driver's form already
    (``bind_value``), the others as Python values.

    The statement is SQLAlchemy's dialect insert with ``ON CONFLICT (...) DO NOTHING``,
    compiled once and run with the driver's ``executemany`` through the connection (so in
    its transaction). Its row count is the number inserted: ``sqlite3`` and psycopg both sum
    it over the rows. Going through ``executemany`` directly skips SQLAlchemy's per-row
    parameter processing, which costs more than the database's own insert work
    (docs/ledger.md); the columns' bind processors are applied here instead.
    """
    stmt = insert_ignoring_existing(conn, table, conflict)
    compiled = stmt.compile(dialect=conn.dialect, column_keys=list(columns))
    sql = str(compiled)
    processors = []
    skip = set(bound)
    for i, name in enumerate(columns):
        column_type = table.c[name].type
        proc = _processor(conn, table, name)
        if proc is not None and name not in skip:
            # A call's rows share one recorded_at, and a flag has two values: convert each
            # distinct value once, not once per row.
            few = isinstance(column_type, sa.DateTime | sa.Boolean)
            processors.append((i, _memo(proc) if few else proc))
    positions = compiled.positiontup
    order = None if positions is None else [columns.index(n) for n in positions]
    in_order = order == list(range(len(columns)))

    def shaped(values: tuple[Any, ...]) -> Any:
        if processors:
            row = list(values)
            for i, proc in processors:
                row[i] = proc(row[i])
            values = tuple(row)
        if order is None:  # named parameters (psycopg)
            return dict(zip(columns, values, strict=True))
        if in_order:  # positional in the columns' order (sqlite3): the tuple as it is
            return values
        return tuple([values[i] for i in order])  # positional, reordered

    new = 0
    for chunk in chunks(rows, CHUNK_ROWS):
        new += conn.exec_driver_sql(sql, [shaped(v) for v in chunk]).rowcount
    return new


def insert_entries(
    conn: Connection, rows: Iterable[tuple[Any, ...]], *, bound: Iterable[str] = ()
) -> int:
    """Insert ledger rows (``ENTRY_COLUMNS`` order), skipping keys that exist; how many were
    inserted (``bound`` as for ``insert_many``)."""
    return insert_many(conn, ledger_entries, ENTRY_COLUMNS, rows, bound=bound)


def _processor(conn: Connection, table: sa.Table, column: str) -> Callable[[Any], Any] | None:
    column_type = table.c[column].type
    proc: Callable[[Any], Any] | None = column_type.dialect_impl(conn.dialect).bind_processor(
        conn.dialect
    )
    return proc


def bind_value(conn: Connection, table: sa.Table, column: str, value: Any) -> Any:
    """``value`` of ``table.column`` in the form the connection's driver takes (its type's
    bind processor applied, if it has one): for values shared by many rows of an insert,
    converted once (see ``insert_many``'s ``bound``)."""
    proc = _processor(conn, table, column)
    return value if proc is None else proc(value)


def _memo(proc: Callable[[Any], Any]) -> Callable[[Any], Any]:
    seen: dict[Any, Any] = {}

    def convert(value: Any) -> Any:
        if value not in seen:
            seen[value] = proc(value)
        return seen[value]

    return convert
