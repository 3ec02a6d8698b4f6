"""The metering ledger on SQLite and PostgreSQL: migrations, append-only, idempotent, exact.

Every store test runs once per backend (``[sqlite]``, ``[postgresql]``); the PostgreSQL runs
use a throwaway server (see ``pg.py``) and a fresh schema per test.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from itertools import count
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pg
import suanli.store
from pg import fresh_schema, postgres_server  # noqa: F401  (postgres_server: a fixture)
from suanli.metering.charges import Charge
from suanli.metering.usage import Attempt, usage_records
from suanli.store import (
    AlreadyReversedError,
    LedgerError,
    Store,
    StoreError,
    UnknownEntryError,
    entries,
    gpu_time_by_model,
    journal,
    open_store,
    post_charges,
    post_settlements,
    read_usage,
    reconcile,
    record_usage,
    reverse,
    settlement_key,
    totals,
    upgrade,
)
from suanli.store import db as store_db
from suanli.store import ledger as ledger_module
from suanli.store.schema import metadata

BACKENDS = ("sqlite", "postgresql")
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DAY0_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z
MS_PER_DAY = 86_400_000
ORGS = ("ai-lab/vision/alice", "ai-lab/vision/bob", "ai-lab/nlp/carol", "infra/ops/dave")
MODELS = ("H100", "A100", "L40S")


# --- builders ----------------------------------------------------------------------------


def charge(i: int, **changes: object) -> Charge:
    """Charge number ``i``: a GPU charge of ``ORGS[i % 4]`` on ``MODELS[i % 3]``, starting
    ``i`` hours after DAY0 (so charges spread over a few UTC days), 1.25 in USD."""
    c = Charge(
        key=f"job-{i}#1@0|gpu|{MODELS[i % 3]}|{i}",
        record_key=f"job-{i}#1@0",
        job_id=f"job-{i}",
        attempt=1,
        org=ORGS[i % 4],
        queue=("train", "serve")[i % 2],
        priority_class=("high", "low")[i % 2],
        cluster=("bj-1", "sh-2")[i % 2],
        resource="gpu",
        gpu_model=MODELS[i % 3],
        band="peak",
        start_ms=DAY0_MS + i * 3_600_000,
        end_ms=DAY0_MS + i * 3_600_000 + 1_800_000,
        raw=500 * 1_800_000,
        quantity=Decimal("0.250000000"),
        rate=Decimal("5.0"),
        amount=Decimal("1.250000"),
        currency="USD",
        book_version="2025-03",
    )
    return c._replace(**changes)


def net_sum(charges: list[Charge]) -> Decimal:
    return sum((c.amount for c in charges), Decimal(0))


def grand_total(store: Store) -> Decimal:
    rows = totals(store, by=())
    assert len(rows) <= 1
    return rows[0].amount if rows else Decimal(0)


# --- stores on both backends -------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A location for an empty store on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
    else:
        with fresh_schema(request.getfixturevalue("postgres_server")) as url:
            yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


StoreFactory = Callable[[], AbstractContextManager[Store]]


@pytest.fixture(params=BACKENDS)
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory of fresh stores (for property tests: one store per example)."""
    numbers = count()

    @contextmanager
    def make() -> Iterator[Store]:
        if request.param == "sqlite":
            s = open_store(tmp_path / f"ledger-{next(numbers)}.db")
            try:
                yield s
            finally:
                s.close()
        else:
            with fresh_schema(request.getfixturevalue("postgres_server")) as url:
                s = open_store(url)
                try:
                    yield s
                finally:
                    s.close()

    return make


# --- the PostgreSQL test server ---------------------------------------------------------


def test_without_server_binaries_postgresql_tests_skip_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(pg.ENV_URL, raising=False)
    monkeypatch.setattr(pg, "server_binaries", lambda: None)
    with pytest.raises(pytest.skip.Exception) as skipped:
        with pg.server_for_tests():
            pass
    assert str(skipped.value) == (
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install the postgresql package"
    )


def test_a_given_postgresql_url_is_used_instead_of_a_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(pg.ENV_URL, "postgresql+psycopg://u@db.example:5432/ledger")
    monkeypatch.setattr(pg, "postgres", None)  # starting a server would fail
    with pg.server_for_tests() as url:
        assert url == "postgresql+psycopg://u@db.example:5432/ledger"


# --- migrations and connection settings --------------------------------------------------


def test_migrations_create_the_schema(store_url: str) -> None:
    assert upgrade(store_url) == store_db.head_revision()
    store = open_store(store_url)  # a second open finds it at head and changes nothing
    try:
        names = set(sa.inspect(store.engine).get_table_names())
        assert {"usage_records", "usage_gpus", "ledger_entries"} <= names
        assert store_db.current_revision(store.engine) == store_db.head_revision() == "0010"
        with store.engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "version_table": store_db.VERSION_TABLE}
            )
            # The hand-written migration and schema.py describe the same tables.
            assert compare_metadata(ctx, metadata) == []
    finally:
        store.close()


def test_migrations_downgrade_to_nothing_and_upgrade_again(store_url: str) -> None:
    engine = store_db.create_store_engine(store_url)
    try:
        upgrade(engine)
        command.downgrade(store_db.alembic_config(engine), "base")
        assert store_db.current_revision(engine) is None
        assert not {"usage_records", "usage_gpus", "ledger_entries"} & set(
            sa.inspect(engine).get_table_names()
        )
        assert upgrade(engine) == store_db.head_revision()
    finally:
        engine.dispose()
    store = open_store(store_url)
    try:
        assert post_charges(store, [charge(0)], NOW, "b") == 1
    finally:
        store.close()


def test_a_schema_newer_than_the_code_is_refused(store_url: str) -> None:
    upgrade(store_url)
    engine = store_db.create_store_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {store_db.VERSION_TABLE} SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StoreError, match=r"revision '9999', newer than this suanli knows"):
        open_store(store_url)
    with pytest.raises(StoreError, match="newer"):
        upgrade(store_url)


def test_without_migrate_an_unmigrated_database_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"revision None, this suanli needs '0010'"):
        open_store(tmp_path / "empty.db", migrate=False)


def test_sqlite_file_is_in_wal_mode_with_full_sync_and_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    store = open_store(path)
    try:
        post_charges(store, [charge(0)], NOW, "b")
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert Path(f"{path}-wal").exists()
    finally:
        store.close()
    # WAL is a property of the file: a plain sqlite3 connection sees it too.
    import sqlite3

    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- exact totals --------------------------------------------------------------------------


AWKWARD = [
    Decimal("0.000001"),
    Decimal("0.1"),
    Decimal("0.2"),
    Decimal("123456789.987654"),
    Decimal("-0.3"),  # a credit
    Decimal("1e-6"),
    Decimal("9999999.999999"),
    Decimal("0"),
]


def test_ledger_total_is_the_exact_sum_of_posted_amounts(store: Store) -> None:
    posted = [charge(i, amount=a) for i, a in enumerate(AWKWARD)]
    assert post_charges(store, posted, NOW, "b1") == len(posted)
    assert grand_total(store) == net_sum(posted) == Decimal("133456789.987655")
    assert totals(store, by=())[0].raw == sum(c.raw for c in posted)
    assert totals(store, by=())[0].quantity == Decimal("0.25") * len(posted)


@pytest.mark.parametrize(
    ("by", "key"),
    [
        (("department",), lambda c: (c.org.split("/")[0],)),
        (("project",), lambda c: ("/".join(c.org.split("/")[:2]),)),
        (("user",), lambda c: (c.org,)),
        (("org",), lambda c: (c.org,)),
        (("gpu_model",), lambda c: (c.gpu_model,)),
        (
            ("day",),
            lambda c: ((date(1970, 1, 1) + timedelta(days=c.start_ms // MS_PER_DAY)).isoformat(),),
        ),
        (("queue", "priority_class"), lambda c: (c.queue, c.priority_class)),
        (("cluster", "resource"), lambda c: (c.cluster, c.resource)),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, tuple) else "by",
)
def test_totals_by_dimension_are_exact_sums(
    store: Store, by: tuple[str, ...], key: Callable[[Charge], tuple[str, ...]]
) -> None:
    posted = [charge(i, amount=Decimal(i) / 1000 + Decimal("0.000001")) for i in range(60)]
    post_charges(store, posted, NOW, "b1")
    want: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    for c in posted:
        want[key(c)] += c.amount
    got = {t.group: t.amount for t in totals(store, by=by)}
    assert got == want
    assert [t.group for t in totals(store, by=by)] == sorted(want)


def test_totals_by_day_spread_over_utc_days_and_a_time_range(store: Store) -> None:
    posted = [charge(i) for i in range(60)]  # one per hour: 2025-03-01 .. 2025-03-03
    post_charges(store, posted, NOW, "b1")
    days = {t.group[0]: t.entries for t in totals(store, by=("day",))}
    assert days == {"2025-03-01": 24, "2025-03-02": 24, "2025-03-03": 12}
    second_day = totals(
        store, by=(), since_ms=DAY0_MS + MS_PER_DAY, until_ms=DAY0_MS + 2 * MS_PER_DAY
    )
    assert second_day[0].amount == Decimal("1.25") * 24


def test_totals_keep_currencies_apart(store: Store) -> None:
    post_charges(store, [charge(0), charge(1, currency="EUR", amount=Decimal("2"))], NOW, "b")
    assert [(t.currency, t.amount) for t in totals(store, by=())] == [
        ("EUR", Decimal(2)),
        ("USD", Decimal("1.25")),
    ]


def test_an_unknown_dimension_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="unknown total dimension"):
        totals(store, by=("colour",))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"amount": Decimal("0.0000001")}, r"amount 1E-7 is finer than 10\*\*-6"),
        ({"quantity": Decimal("1e-10")}, r"quantity 1E-10 is finer than 10\*\*-9"),
        ({"amount": Decimal("NaN")}, "not a finite number"),
        ({"amount": Decimal("1e13")}, "out of range"),
    ],
    ids=["amount-too-fine", "quantity-too-fine", "nan", "too-large"],
)
def test_a_charge_the_ledger_cannot_hold_exactly_is_refused_and_nothing_is_written(
    store: Store, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        post_charges(store, [charge(0), charge(1, **changes)], NOW, "b")
    assert list(entries(store)) == []


def test_now_must_be_timezone_aware(store: Store) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        post_charges(store, [charge(0)], datetime(2025, 3, 1, 12), "b")


# --- idempotency -------------------------------------------------------------------------

money = st.decimals(
    min_value=Decimal("-1000000"),
    max_value=Decimal("1000000"),
    places=6,
    allow_nan=False,
    allow_infinity=False,
)
quantities = st.decimals(
    min_value=Decimal(0), max_value=Decimal(10_000), places=9, allow_nan=False, allow_infinity=False
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    values=st.lists(st.tuples(money, quantities), min_size=1, max_size=12),
    plays=st.lists(st.lists(st.integers(0, 11), max_size=20), min_size=1, max_size=6),
)
def test_replaying_any_subset_in_any_order_any_number_of_times_changes_no_total(
    new_store: StoreFactory,
    values: list[tuple[Decimal, Decimal]],
    plays: list[list[int]],
) -> None:
    pool = [charge(i, amount=a, quantity=q) for i, (a, q) in enumerate(values)]
    with new_store() as store:
        seen: set[int] = set()
        for play in plays:
            batch = [pool[i % len(pool)] for i in play]  # repeats and any order
            fresh = {i % len(pool) for i in play} - seen
            assert post_charges(store, batch, NOW, "replay") == len(fresh)
            seen |= fresh
            # The total depends only on which keys were ever posted.
            assert grand_total(store) == net_sum([pool[i] for i in seen])
        assert post_charges(store, pool, NOW, "all") == len(pool) - len(seen)
        before = totals(store, by=("project", "gpu_model", "day"))
        assert sum((t.amount for t in before), Decimal(0)) == net_sum(pool)
        for play in reversed(plays):
            assert post_charges(store, [pool[i % len(pool)] for i in play], NOW, "again") == 0
        assert totals(store, by=("project", "gpu_model", "day")) == before
        assert sorted(entries(store), key=lambda c: c.key) == sorted(pool, key=lambda c: c.key)


def test_posting_the_same_key_twice_in_one_call_inserts_it_once(store: Store) -> None:
    assert post_charges(store, [charge(0), charge(0), charge(1)], NOW, "b") == 2
    assert grand_total(store) == Decimal("2.5")


def test_a_replayed_key_keeps_the_first_posting(store: Store) -> None:
    post_charges(store, [charge(0)], NOW, "first")
    assert post_charges(store, [charge(0, amount=Decimal(99))], NOW + timedelta(1), "later") == 0
    (entry,) = journal(store)
    assert (entry.charge.amount, entry.batch, entry.recorded_at) == (Decimal("1.25"), "first", NOW)


# --- reading back --------------------------------------------------------------------------


def test_entries_read_back_equal_to_what_was_posted(store: Store) -> None:
    posted = [
        charge(0),
        charge(1, waste=True, rate=Decimal("0.123456789012345"), resource="gpu"),
        charge(2, resource="cpu", gpu_model="", quantity=Decimal("12.000000001")),
        charge(3, amount=Decimal("-7.000001")),
    ]
    post_charges(store, posted, NOW, "b1")
    assert list(entries(store)) == posted  # in append order
    assert list(entries(store, since_ms=posted[1].start_ms, until_ms=posted[3].start_ms)) == [
        posted[1],
        posted[2],
    ]
    assert list(entries(store, batch="nope")) == []


def test_recorded_at_reads_back_in_utc(store: Store) -> None:
    beijing = timezone(timedelta(hours=8))
    post_charges(store, [charge(0)], datetime(2025, 3, 1, 20, 0, tzinfo=beijing), "b")
    (entry,) = journal(store)
    assert entry.recorded_at == NOW
    assert entry.recorded_at.utcoffset() == timedelta(0)


def test_usage_records_are_idempotent_round_trip_and_sum_per_gpu_model(store: Store) -> None:
    attempts = [
        Attempt("j1", 1, 0, 7_200_000, "ai-lab/vision/alice", "train", "high", "bj-1",
                gpu=(("H100", 2000), ("A100", 500)), cpu_milli=8000, memory_mib=65536,
                network_mb=100, gpu_util=0.5),
        Attempt("j2", 1, 1_000, 3_601_000, "infra/ops/dave", "serve", "low", "sh-2",
                gpu=(("H100", 1000),)),
        Attempt("j3", 2, 0, 60_000, "infra/ops/dave", "serve", "low", "sh-2"),
    ]  # fmt: skip
    records = list(usage_records(attempts, interval_ms=3_600_000))
    assert record_usage(store, records) == len(records) == 5
    assert record_usage(store, reversed(records)) == 0
    assert record_usage(store, [*records[:2], *records[:2]]) == 0
    assert list(read_usage(store)) == records
    assert gpu_time_by_model(store) == {
        "A100": 500 * 7_200_000,
        "H100": 2000 * 7_200_000 + 1000 * 3_600_000,
    }
    assert gpu_time_by_model(store, since_ms=3_600_000) == {
        "A100": 500 * 3_600_000,
        "H100": 2000 * 3_600_000 + 1000 * 1_000,
    }


def test_a_replayed_usage_key_keeps_the_first_record_and_its_gpus(store: Store) -> None:
    (first,) = usage_records([Attempt("j", 1, 0, 1_000, "o", "q", "p", "c", gpu=(("H100", 500),))])
    later = replace(first, end_ms=2_000, gpu=(("H100", 500), ("A100", 250)))
    assert record_usage(store, [first]) == 1
    assert record_usage(store, [later, first]) == 0
    assert list(read_usage(store)) == [first]
    assert gpu_time_by_model(store) == {"H100": 500 * 1_000}


def test_a_caller_owned_transaction_is_joined_not_committed(store: Store) -> None:
    with store.engine.connect() as conn:
        with conn.begin() as tx:
            assert post_charges(conn, [charge(0), charge(1)], NOW, "b") == 2
            assert grand_total_on(conn) == Decimal("2.5")  # visible inside
            tx.rollback()
    assert list(entries(store)) == []


def grand_total_on(conn: sa.Connection) -> Decimal:
    return totals(conn, by=())[0].amount


# --- reversals and append-only -------------------------------------------------------------


def test_a_reversal_nets_an_entry_to_zero_and_a_second_reversal_is_refused(store: Store) -> None:
    post_charges(store, [charge(0), charge(1)], NOW, "b")
    rev = reverse(store, charge(0).key, NOW + timedelta(hours=1), "duplicate job")
    assert (rev.kind, rev.reverses, rev.charge_key, rev.reason) == (
        "reversal",
        charge(0).key,
        charge(0).key,
        "duplicate job",
    )
    assert rev.charge == charge(0)._replace(
        key=suanli.store.reversal_key(charge(0).key),
        amount=-charge(0).amount,
        quantity=-charge(0).quantity,
        raw=-charge(0).raw,
    )
    assert grand_total(store) == charge(1).amount
    by_user = {t.group: t.amount for t in totals(store, by=("user",))}
    assert by_user[(charge(0).org,)] == 0
    with pytest.raises(AlreadyReversedError, match=r"already reversed \(by '.*!reversal'\)"):
        reverse(store, charge(0).key, NOW, "again")
    with pytest.raises(LedgerError, match="is a reversal and cannot be reversed"):
        reverse(store, rev.charge.key, NOW, "undo")
    with pytest.raises(UnknownEntryError, match="no ledger entry has key 'nope'"):
        reverse(store, "nope", NOW, "?")
    assert grand_total(store) == charge(1).amount
    assert len(list(journal(store))) == 3


def test_the_rows_of_a_posted_entry_are_unchanged_after_its_reversal(store: Store) -> None:
    post_charges(store, [charge(0)], NOW, "b")
    table = suanli.store.schema.ledger_entries

    def rows() -> list[tuple[object, ...]]:
        with store.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.select(table).order_by(table.c.id))]

    before = rows()
    reverse(store, charge(0).key, NOW, "wrong price")
    after = rows()
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1


def test_the_ledger_api_has_no_update_or_delete() -> None:
    names = {n for m in (suanli.store, ledger_module) for n in dir(m) if not n.startswith("_")}
    assert not {n for n in names if re.search(r"update|delete|remove|edit|amend|purge", n, re.I)}


@pytest.mark.parametrize("table", ["ledger_entries", "usage_records", "usage_gpus"])
@pytest.mark.parametrize(
    "statement",
    ["UPDATE {t} SET {c} = {c}", "DELETE FROM {t}"],
    ids=["update", "delete"],
)
def test_the_database_refuses_update_and_delete(store: Store, table: str, statement: str) -> None:
    post_charges(store, [charge(0)], NOW, "b")
    (record,) = usage_records([Attempt("j", 1, 0, 10, "o", "q", "p", "c", gpu=(("H100", 1),))])
    record_usage(store, [record])
    column = "position" if table == "usage_gpus" else "key"
    with pytest.raises(sa.exc.DBAPIError, match=f"{table} is append-only"):
        with store.begin() as conn:
            conn.exec_driver_sql(statement.format(t=table, c=column))
    assert len(list(journal(store))) == 1 and len(list(read_usage(store))) == 1


def test_postgresql_refuses_truncate(request: pytest.FixtureRequest) -> None:
    with fresh_schema(request.getfixturevalue("postgres_server")) as url:
        store = open_store(url)
        try:
            post_charges(store, [charge(0)], NOW, "b")
            with pytest.raises(sa.exc.DBAPIError, match="ledger_entries is append-only"):
                with store.begin() as conn:
                    conn.exec_driver_sql("TRUNCATE ledger_entries CASCADE")
            assert len(list(journal(store))) == 1
        finally:
            store.close()


# --- reconcile -----------------------------------------------------------------------------


def reconcile_case(store: Store) -> list[Charge]:
    """A ledger with one charge of each kind of finding; returns the expectations.

    A matches; B's amount differs; C is not expected; D was reversed (so it is missing);
    E was never posted; F differs only in its org (same amount).
    """
    a, b, c, d, e, f = (charge(i) for i in range(6))
    post_charges(store, [a, b, c, d, f], NOW, "rating")
    reverse(store, d.key, NOW, "double-counted")
    return [
        a,
        b._replace(amount=Decimal("1.750000"), quantity=Decimal("0.35")),
        d,
        e,
        f._replace(org="ai-lab/nlp/carol"),
    ]


def test_reconcile_reports_missing_unexpected_and_differing_keys_with_exact_totals(
    store: Store,
) -> None:
    expected = reconcile_case(store)
    before = list(journal(store))
    report = reconcile(store, expected)
    assert list(journal(store)) == before  # no writes
    assert report.matched == 1
    assert [c.key for c in report.missing] == [charge(3).key, charge(4).key]
    assert [c.key for c in report.unexpected] == [charge(2).key]
    assert report.unexpected_net == {charge(2).key: Decimal("1.25")}
    assert [(d.key, d.expected, d.recorded, d.fields) for d in report.differing] == [
        (charge(1).key, Decimal("1.75"), Decimal("1.25"), ("quantity", "amount")),
        (charge(5).key, Decimal("1.25"), Decimal("1.25"), ("org",)),
    ]
    assert report.differing[0].delta == Decimal("-0.5")
    usd = report.totals["USD"]
    assert usd.expected == Decimal("1.25") * 4 + Decimal("1.75")
    assert usd.ledger == Decimal("1.25") * 4  # A, B, C, F; D net zero
    assert usd.missing == Decimal("2.5")
    assert usd.unexpected == Decimal("1.25")
    assert usd.differing == Decimal("-0.5")
    assert usd.ledger - usd.expected == usd.unexpected - usd.missing + usd.differing
    assert not report.clean


def test_reconcile_fix_appends_only_and_a_second_reconcile_is_clean(store: Store) -> None:
    expected = reconcile_case(store)
    before = list(journal(store))
    fixed = reconcile(store, expected, fix=True, now=NOW + timedelta(days=1), batch="fix-1")
    assert (fixed.reversed, fixed.posted) == (3, 4)  # reverse B, C, F; post B, D, E, F
    after = list(journal(store))
    assert after[: len(before)] == before  # appended, nothing rewritten
    assert {e.charge.key for e in after[len(before) :] if e.kind == "charge"} == {
        f"{charge(1).key}!2",  # B and D keys were taken: a revision key
        f"{charge(3).key}!2",
        charge(4).key,  # E was never in the ledger: its own key
        f"{charge(5).key}!2",
    }
    assert all(e.batch == "fix-1" for e in after[len(before) :])
    again = reconcile(store, expected)
    assert again.clean and again.matched == len(expected)
    assert again.totals["USD"].ledger == net_sum(expected)
    assert grand_total(store) == net_sum(expected)
    # Fixing a clean ledger writes nothing.
    noop = reconcile(store, expected, fix=True, now=NOW + timedelta(days=2))
    assert (noop.reversed, noop.posted) == (0, 0)
    assert len(list(journal(store))) == len(after)


def test_a_charge_corrected_twice_gets_the_next_revision_key(store: Store) -> None:
    post_charges(store, [charge(0)], NOW, "rating")
    for n, amount in ((2, "2"), (3, "3")):
        expected = [charge(0, amount=Decimal(amount))]
        reconcile(store, expected, fix=True, now=NOW, batch=f"fix-{n}")
        assert reconcile(store, expected).clean
        assert [e.charge.key for e in journal(store, kind="charge")][-1] == f"{charge(0).key}!{n}"
    assert grand_total(store) == Decimal(3)


def test_reconcile_fix_needs_now_and_conflicting_expectations_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="needs now"):
        reconcile(store, [charge(0)], fix=True)
    with pytest.raises(ValueError, match="repeat key"):
        reconcile(store, [charge(0), charge(0, amount=Decimal(2))])
    assert reconcile(store, [charge(0), charge(0)]).missing == (charge(0),)


# --- settlements (migration 0009) ---------------------------------------------------------


def test_a_settlement_credits_the_provider_and_nets_the_charge_to_zero(store: Store) -> None:
    c = charge(0)
    assert post_charges(store, [c], NOW, "b") == 1
    assert post_settlements(store, [(c, "region/eu-west")], NOW, "s") == 1
    assert post_settlements(store, [(c, "region/eu-west")], NOW, "s") == 0  # idempotent
    (e,) = list(journal(store, kind="settlement"))
    assert e.kind == "settlement" and e.charge_key == c.key and e.reverses is None
    assert e.charge.key == settlement_key(c.key) and e.charge.org == "region/eu-west"
    assert e.charge.amount == -c.amount and e.charge.raw == -c.raw
    assert "credit to region/eu-west" in (e.reason or "")
    by_kind = {t.group: t.amount for t in totals(store, by=("kind",))}
    assert by_kind == {("charge",): c.amount, ("settlement",): -c.amount}
    assert [t.amount for t in totals(store, by=(), kinds=("charge",))] == [c.amount]
    assert sum(t.amount for t in totals(store, by=())) == 0
    with pytest.raises(LedgerError, match="reversal|cannot be reversed"):
        reverse(store, settlement_key(c.key), NOW, "no")


def test_a_settled_charge_reconciles_clean_and_a_fix_writes_nothing(store: Store) -> None:
    """A settlement nets into its charge's key, but it is the provider's account: reconcile
    compares the user's charges alone, so a settled charge is matched, not missing, and a
    fix does not post it again."""
    c = charge(0)
    post_charges(store, [c], NOW, "b")
    post_settlements(store, [(c, "region/eu-west")], NOW, "s")
    report = reconcile(store, [c])
    assert report.clean and report.matched == 1 and report.missing == ()
    fixed = reconcile(store, [c], fix=True, now=NOW + timedelta(days=1))
    assert fixed.clean and len(list(journal(store))) == 2


def test_migration_0009_keeps_every_entry_and_refuses_to_go_down_over_settlements(
    store_url: str,
) -> None:
    engine = store_db.create_store_engine(store_url)
    try:
        cfg = store_db.alembic_config(engine)
        command.upgrade(cfg, "0008")
        with engine.begin() as conn:
            post_charges(conn, [charge(0), charge(1)], NOW, "b")
            reverse(conn, charge(0).key, NOW, "wrong")
        def rows() -> list[tuple[str, str, Decimal]]:
            with engine.connect() as conn:
                return [(e.kind, e.charge.key, e.charge.amount) for e in journal(conn)]

        before = rows()
        command.upgrade(cfg, "0009")
        assert store_db.current_revision(engine) == "0009"
        assert rows() == before
        with engine.begin() as conn:
            # Still append-only, still one reversal per entry, and settlements are taken.
            with pytest.raises(sa.exc.DBAPIError):
                conn.execute(sa.text("UPDATE ledger_entries SET amount_micro = 0"))
        with engine.begin() as conn, pytest.raises(AlreadyReversedError):
            reverse(conn, charge(0).key, NOW, "again")
        with engine.begin() as conn:
            assert post_settlements(conn, [(charge(1), "region/x")], NOW, "s") == 1
        with pytest.raises(RuntimeError, match="settlement entries"):
            command.downgrade(cfg, "0008")
        assert store_db.current_revision(engine) == "0009"
    finally:
        engine.dispose()
