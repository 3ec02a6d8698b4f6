"""Data sets held here (migration 0010), on SQLite and PostgreSQL: a copy recorded present or
arriving, a present copy never made arriving again, the table's own checks, two writers at
once, and the migration up and down."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from alembic import command

from pg import location_fixture, postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.store import Store
from suanli.store import datasets as ds
from suanli.store import db as store_db
from suanli.store.schema import dataset_copies

NOW = 1_764_000_000_000

store = store_fixture()
db_location = location_fixture()


def put(store: Store, name: str, state: str = "present", **kw: object) -> ds.CopyRecord:
    args: dict[str, object] = {"size_gb": 10.0, "arrives_ms": None, "source": None,
                               "by": "front", "now_ms": NOW, **kw}  # fmt: skip
    return ds.put_copy(store, name=name, state=state, **args)  # type: ignore[arg-type]


def test_migration_0010_goes_up_over_a_store_at_0009_and_down_again(db_location: str) -> None:
    engine = store_db.create_store_engine(db_location)
    try:
        cfg = store_db.alembic_config(engine)
        command.upgrade(cfg, "0009")
        assert "dataset_copies" not in sa.inspect(engine).get_table_names()
        assert store_db.upgrade(engine) == store_db.head_revision() == "0010"
        assert "dataset_copies" in sa.inspect(engine).get_table_names()
        command.downgrade(cfg, "0009")
        assert "dataset_copies" not in sa.inspect(engine).get_table_names()
        assert store_db.upgrade(engine) == "0010"
    finally:
        engine.dispose()


def test_a_copy_is_recorded_replaced_and_forgotten(store: Store) -> None:
    assert ds.list_copies(store) == []
    on_way = put(store, "scans", "arriving", arrives_ms=NOW + 60_000, source="eu-west")
    assert (on_way.state, on_way.arrives_ms, on_way.source) == ("arriving", NOW + 60_000, "eu-west")
    here = put(store, "scans", size_gb=12.5, now_ms=NOW + 70_000)
    assert (here.state, here.arrives_ms, here.size_gb) == ("present", None, 12.5)
    put(store, "weights", size_gb=2000.0)
    assert [(c.name, c.state) for c in ds.list_copies(store)] == [
        ("scans", "present"), ("weights", "present")]  # fmt: skip
    assert ds.delete_copy(store, "scans") and not ds.delete_copy(store, "scans")
    assert [c.name for c in ds.list_copies(store)] == ["weights"]


def test_a_present_copy_is_never_made_arriving_again(store: Store) -> None:
    put(store, "scans", size_gb=500.0, now_ms=NOW)
    kept = put(store, "scans", "arriving", arrives_ms=NOW + 1, source="x", now_ms=NOW + 5)
    assert (kept.state, kept.arrives_ms, kept.updated_ms, kept.source) == ("present", None, NOW, None)
    assert ds.list_copies(store) == [kept]


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"state": "lost"}, "state must be one of"),
        ({"size_gb": -1.0}, "size_gb must be >= 0"),
        ({"size_gb": float("nan")}, "size_gb must be >= 0"),
        ({"state": "arriving"}, "needs the time it is expected"),
    ],
)
def test_a_copy_the_table_would_not_take_is_refused_and_nothing_written(
    store: Store, kw: dict[str, object], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        put(store, "scans", **kw)  # type: ignore[arg-type]
    assert ds.list_copies(store) == []


def test_the_table_itself_refuses_what_the_code_refuses(store: Store) -> None:
    """The CHECK constraints hold even for a writer that goes around ``put_copy``."""
    bad = [{"size_gb": -1.0, "state": "present"}, {"size_gb": 1.0, "state": "lost"},
           {"size_gb": 1.0, "state": "arriving"}]  # fmt: skip
    for row in bad:
        with pytest.raises(sa.exc.IntegrityError), store.begin() as conn:
            conn.execute(sa.insert(dataset_copies).values(
                name="x", arrives_ms=None, updated_ms=NOW, updated_by="t", **row))  # fmt: skip
    assert ds.list_copies(store) == []


def test_two_writers_at_once_both_land_and_one_row_remains(store: Store) -> None:
    """Eight threads record the same new data set together: none fails, one row is left,
    and it is present (the present writers win over the arriving ones)."""
    go = threading.Barrier(8)
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            go.wait(timeout=10)
            if k % 2:
                put(store, "scans", "arriving", arrives_ms=NOW + k)
            else:
                put(store, "scans")
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [row] = ds.list_copies(store)
    assert row.name == "scans" and row.state == "present"
