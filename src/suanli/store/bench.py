"""How fast the ledger appends charges: ``python -m suanli.store.bench [--rows N] [--url URL]``.

Posts ``N`` synthetic charges (default 300,000) into a fresh store with ``post_charges``,
then replays them all (every key exists: all no-ops), and times both. The baseline, in the
same run, is the plain ``sqlite3`` module inserting the same rows (already converted to
tuples) into the same schema with ``executemany`` and ``ON CONFLICT DO NOTHING``: the cost
of the database itself, without conversion or SQLAlchemy. The ratio is the number to
compare across machines (see docs/ledger.md). ``--url`` times a PostgreSQL store as well
(its schema must be empty or migrated; the rows are appended under fresh keys).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from suanli.metering.charges import Charge
from suanli.store.db import open_store
from suanli.store.ledger import post_charges
from suanli.store.rows import CHARGE, entry_row
from suanli.store.schema import ledger_entries

NOW = datetime(2025, 3, 1, tzinfo=UTC)


def synthetic_charges(n: int, prefix: str = "") -> list[Charge]:
    """``n`` distinct, realistic charges: 1,000 jobs over 20 orgs, 3 GPU models."""
    models = ("H100", "A100", "L40S")
    out = []
    for i in range(n):
        job = i // 300
        start = 1_740_787_200_000 + (i % 300) * 60_000
        out.append(
            Charge(
                key=f"{prefix}job-{job}#1@{start}|gpu|{models[job % 3]}|{start}",
                record_key=f"{prefix}job-{job}#1@{start}",
                job_id=f"{prefix}job-{job}",
                attempt=1,
                org=f"dept-{job % 4}/proj-{job % 10}/user-{job % 20}",
                queue=f"q{job % 5}",
                priority_class=("high", "normal", "spot")[job % 3],
                cluster="bj-1",
                resource="gpu",
                gpu_model=models[job % 3],
                band="peak",
                start_ms=start,
                end_ms=start + 60_000,
                raw=1000 * 60_000,
                quantity=Decimal("0.016666667"),
                rate=Decimal("2.49"),
                amount=Decimal("0.041500"),
                currency="USD",
                book_version="2025-03",
            )
        )
    return out


def _time_store(target: str, charges: list[Charge]) -> tuple[float, float]:
    store = open_store(target)
    try:
        t0 = time.perf_counter()
        new = post_charges(store, charges, NOW, "bench")
        t1 = time.perf_counter()
        again = post_charges(store, charges, NOW, "bench")
        t2 = time.perf_counter()
    finally:
        store.close()
    assert (new, again) == (len(charges), 0), (new, again)
    return t1 - t0, t2 - t1


def _time_raw_sqlite(path: Path, charges: list[Charge]) -> float:
    open_store(path).close()  # the same schema, indexes and triggers
    cols = [c.name for c in ledger_entries.columns if c.name != "id"]
    rows = []
    for c in charges:
        r = entry_row(
            c,
            key=c.key,
            kind=CHARGE,
            charge_key=c.key,
            reverses=None,
            reason=None,
            recorded_at=NOW,
            batch="bench",
        )
        r["recorded_at"] = NOW.isoformat(sep=" ")
        rows.append(tuple(r[k] for k in cols))
    sql = (
        f"INSERT INTO ledger_entries ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        "ON CONFLICT (key) DO NOTHING"
    )
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
        return time.perf_counter() - t0
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--url", help="also time this PostgreSQL store")
    args = parser.parse_args()
    charges = synthetic_charges(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        post, replay = _time_store(str(Path(tmp) / "ledger.db"), charges)
        raw = _time_raw_sqlite(Path(tmp) / "raw.db", charges)
    n = args.rows
    print(f"sqlite      post_charges {n:,} new:     {post:6.2f} s  ({n / post:,.0f}/s)")
    print(f"sqlite      post_charges {n:,} replay:  {replay:6.2f} s  ({n / replay:,.0f}/s)")
    print(f"sqlite3     executemany  {n:,} (base):  {raw:6.2f} s  ({n / raw:,.0f}/s)")
    print(f"ratio       post_charges / baseline:   {post / raw:6.2f}")
    if args.url:
        fresh = synthetic_charges(n, prefix=f"{uuid.uuid4().hex[:8]}-")
        post, replay = _time_store(args.url, fresh)
        print(f"postgresql  post_charges {n:,} new:     {post:6.2f} s  ({n / post:,.0f}/s)")
        print(f"postgresql  post_charges {n:,} replay:  {replay:6.2f} s  ({n / replay:,.0f}/s)")


if __name__ == "__main__":
    main()
