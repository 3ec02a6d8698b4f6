"""Online services in the store, on SQLite and PostgreSQL: migration 0006, a tenant's names,
demand in arrival order and pruned once folded, replicas as jobs, and deleting a service while replicas run."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from pg import location_fixture, postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.store import Store
from suanli.store import db as store_db
from suanli.store import jobs as js
from suanli.store import services as ss

NOW = 1_764_000_000_000

store = store_fixture()
db_location = location_fixture()


def test_migration_0006_goes_up_over_a_store_at_0005_and_down_again(db_location: str) -> None:
    engine = store_db.create_store_engine(db_location)
    try:
        cfg = store_db.alembic_config(engine)
        command.upgrade(cfg, "0005")
        names = set(sa.inspect(engine).get_table_names())
        assert not {"services", "service_demand"} & names
        assert store_db.upgrade(engine) == store_db.head_revision()
        inspector = sa.inspect(engine)
        assert {"services", "service_demand"} <= set(inspector.get_table_names())
        assert "service_id" in {c["name"] for c in inspector.get_columns("jobs")}
        assert "ix_jobs_service_id" in {ix["name"] for ix in inspector.get_indexes("jobs")}
        command.downgrade(cfg, "0005")
        inspector = sa.inspect(engine)
        assert not {"services", "service_demand"} & set(inspector.get_table_names())
        assert "service_id" not in {c["name"] for c in inspector.get_columns("jobs")}
        assert store_db.upgrade(engine) == store_db.head_revision()
    finally:
        engine.dispose()


def make(store: Store, tenant: str = "vision", name: str = "web") -> ss.ServiceRecord:
    spec = {"request": {"name": name}, "replica": {"command": ["true"], "queue": tenant}}
    return ss.create_service(store, tenant=tenant, name=name, user="ana", spec=spec, now_ms=NOW)


def replica(store: Store, svc: ss.ServiceRecord) -> js.JobRecord:
    new = js.NewJob(svc.spec["replica"], svc.tenant, "ana", svc.name, svc.tenant, "online", svc.id)
    (job,) = ss.submit_replicas(store, svc.id, [new], NOW)
    return job


def test_names_are_a_tenants_own(store: Store) -> None:
    web = make(store)
    other = make(store, tenant="nlp")  # the same name in another tenant
    with pytest.raises(ss.ServiceStoreError, match="already has a service 'web'"):
        make(store)
    assert ss.get_service(store, "web", tenant="vision") == web
    assert ss.get_service(store, "web", tenant="nlp") == other
    assert ss.get_service(store, "web", tenant="lab") is None
    assert ss.get_service(store, "web", tenant=None) is None  # two tenants have one: ambiguous
    assert [s.id for s in ss.list_services(store, tenant="vision")] == [web.id]
    assert [s.id for s in ss.list_services(store)] == [web.id, other.id]


def test_demand_is_read_in_arrival_order_and_the_latest_per_service(store: Store) -> None:
    web, api = make(store), make(store, name="api")
    start = ss.last_demand_id(store)
    a = ss.add_demand(store, web.id, 5.0, NOW)
    b = ss.add_demand(store, api.id, 7.0, NOW + 1)
    c = ss.add_demand(store, web.id, 9.5, NOW + 2)
    assert [r.id for r in ss.demand_after(store, start)] == [a.id, b.id, c.id]
    assert [r.rate for r in ss.demand_after(store, a.id)] == [7.0, 9.5]
    latest = ss.latest_demand(store, [web.id, api.id])
    assert {k: v.rate for k, v in latest.items()} == {web.id: 9.5, api.id: 7.0}
    with pytest.raises(ss.ServiceStoreError):
        ss.add_demand(store, web.id, -1.0, NOW)
    with pytest.raises(sa.exc.IntegrityError):  # the database refuses one too
        with store.begin() as conn:
            conn.execute(
                sa.insert(ss.service_demand).values(service_id=web.id, at_ms=NOW, rate=-1.0)
            )


def test_pruning_keeps_what_is_unfolded_and_each_services_latest(store: Store) -> None:
    web, api = make(store), make(store, name="api")
    a = ss.add_demand(store, web.id, 1.0, NOW)
    ss.add_demand(store, web.id, 2.0, NOW)
    b = ss.add_demand(store, api.id, 3.0, NOW)
    ss.add_demand(store, web.id, 4.0, NOW)
    c = ss.add_demand(store, web.id, 5.0, NOW)
    assert ss.prune_demand(store, b.id) == 2  # web's 1 and 2: folded and superseded
    assert [r.rate for r in ss.demand_after(store, 0)] == [3.0, 4.0, 5.0]
    assert ss.prune_demand(store, c.id) == 1  # web's 4; api's only report stays
    assert [r.rate for r in ss.demand_after(store, 0)] == [3.0, 5.0]
    assert ss.prune_demand(store, c.id) == 0
    assert ss.prune_demand(store, a.id - 1) == 0  # nothing folded yet: nothing deleted


def test_deleting_a_service_cancels_and_detaches_its_replicas(store: Store) -> None:
    web = make(store)
    r1, r2 = replica(store, web), replica(store, web)
    assert [j.id for j in ss.replicas(store, [web.id])] == [r1.id, r2.id]
    ss.set_desired(store, {web.id: 2}, NOW)
    assert ss.get_service(store, "web", tenant="vision").desired == 2  # type: ignore[union-attr]
    asked = ss.delete_service(store, web.id, NOW + 5, "ana")
    assert asked == [r1.id, r2.id]
    for j in (r1, r2):
        rec = js.get_job(store, j.id)
        assert rec is not None and rec.cancel_requested and rec.service_id is None
    assert ss.get_service(store, "web", tenant="vision") is None
    # A replica is never added to a service that is gone.
    new = js.NewJob({"command": ["true"]}, "vision", "ana", "web", "vision", "online", web.id)
    assert ss.submit_replicas(store, web.id, [new], NOW) == []
    again = make(store)
    assert ss.replicas(store, [again.id]) == []
