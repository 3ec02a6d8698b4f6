"""Data sets held here: the copies of data sets this member holds or is being sent, as a
federation front reads them (``docs/network.md``, "A live member", item 6).

Table of migration ``0010``. Contracts:

- **One row per data set.** ``put_copy`` writes a data set's copy here, ``present`` or
  ``arriving`` (expected at ``arrives_ms``, from ``source``); writing it again replaces it,
  except that a copy already ``present`` is never made ``arriving`` again: a front that
  sends a job here after the bytes have landed must not make the member look emptier than it
  is. It is one statement (an upsert), so two writers at once never collide.
- **Removing** a copy (``delete_copy``, the data evicted) deletes its row; a later front
  prices the job's data as moved here again.
- The store does not move bytes: it records what the member's operators, or the tool that
  moves the data, say is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from suanli.store.db import Target, reading, writing
from suanli.store.schema import dataset_copies

COPY_STATES = ("present", "arriving")
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"
"""A data set's name (a path segment of the API, a key of a federation file)."""
MAX_GB = 1e9
"""An exabyte: no data set is larger, and a larger figure is a mistake."""


@dataclass(frozen=True, slots=True)
class CopyRecord:
    """A data set's copy here, as stored."""

    name: str
    size_gb: float
    state: str
    """``present`` (here, readable) or ``arriving`` (on its way, expected at ``arrives_ms``)."""
    arrives_ms: int | None
    source: str | None
    """Where an arriving copy comes from (a member's name), if said."""
    updated_ms: int
    updated_by: str


def _copy(row: Any) -> CopyRecord:
    return CopyRecord(row.name, float(row.size_gb), row.state, row.arrives_ms, row.source,
                      row.updated_ms, row.updated_by)  # fmt: skip


def put_copy(
    target: Target,
    *,
    name: str,
    size_gb: float,
    state: str,
    arrives_ms: int | None,
    source: str | None,
    by: str,
    now_ms: int,
) -> CopyRecord:
    """Record the copy of ``name`` here and return what is stored (module docstring: a
    ``present`` copy stays present); ``ValueError`` for a state, size or arrival the table
    would not take."""
    if state not in COPY_STATES:
        raise ValueError(f"state must be one of {', '.join(COPY_STATES)}, got {state!r}")
    if not size_gb >= 0:
        raise ValueError(f"size_gb must be >= 0, got {size_gb!r}")
    if state == "arriving" and arrives_ms is None:
        raise ValueError("an arriving copy needs the time it is expected (arrives_ms)")
    values = {"size_gb": float(size_gb), "state": state,
              "arrives_ms": arrives_ms if state == "arriving" else None,
              "source": source, "updated_ms": now_ms, "updated_by": by}  # fmt: skip
    with writing(target) as conn:
        insert: Any = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        # One statement, so two writers at once never both insert: the second updates, and
        # an arriving copy never overwrites a present one.
        stmt = insert(dataset_copies).values(name=name, **values)
        conn.execute(stmt.on_conflict_do_update(
            index_elements=[dataset_copies.c.name], set_=values,
            where=sa.not_(sa.and_(dataset_copies.c.state == "present",
                                  stmt.excluded.state == "arriving")),
        ))  # fmt: skip
        row = conn.execute(sa.select(dataset_copies).where(dataset_copies.c.name == name)).one()
    return _copy(row)


def list_copies(target: Target) -> list[CopyRecord]:
    """Every copy here, by name."""
    with reading(target) as conn:
        rows = conn.execute(sa.select(dataset_copies).order_by(dataset_copies.c.name)).all()
    return [_copy(r) for r in rows]


def delete_copy(target: Target, name: str) -> bool:
    """Forget the copy of ``name`` here (the data evicted); False if there was none."""
    with writing(target) as conn:
        gone = conn.execute(sa.delete(dataset_copies).where(dataset_copies.c.name == name))
    return bool(gone.rowcount)
