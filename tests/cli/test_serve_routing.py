"""A federation's routing decision kept with a job and shown by ``suanli show``, through the
real server on SQLite and PostgreSQL: a federation front (an admin token) attaches it; a
plain user's token may not, nor forge one, and nothing is queued when refused."""

from __future__ import annotations

from pathlib import Path

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, run_cli, start, submit, tenant_token
from suanli.core.registry import create
from suanli.core.routing import Candidate, Route, RouteRequest

db_location = location_fixture()


def decision() -> Route:
    cands = [
        Candidate("us-east", 0, start_s=0.0, run_s=3600.0, price_hour=12.0, list_price_hour=12.0),
        Candidate("eu-west", 1, start_s=7200.0, run_s=3600.0, price_hour=10.0, list_price_hour=10.0),
        Candidate("ap-northeast", 2, excluded="data residency: data set x may stay only in eu"),
    ]  # fmt: skip
    return create("router", "suanli").route(RouteRequest("j", 8), cands)


def test_a_routing_decision_is_kept_shown_and_refused_to_plain_users(
    tmp_path: Path, db_location: str
) -> None:
    srv = start(tmp_path / "state", db_location, gpus=1)
    try:
        user = tenant_token(srv, "vision")
        route = decision()
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "routing": route.as_dict()}
        with srv.client(user) as c, srv.client() as admin:
            r = c.post("/v1/jobs", json=spec)
            assert r.status_code == 403, r.text
            assert "federation front" in r.json()["error"]
            forged = dict(spec, routing={**route.as_dict(), "why": "trust me\u0000"})
            assert admin.post("/v1/jobs", json={**forged, "tenant": "vision"}).status_code == 422
            bad = dict(spec, routing={**route.as_dict(), "scores": [{"member": "x", "total": "nan"}]})
            assert admin.post("/v1/jobs", json={**bad, "tenant": "vision"}).status_code == 422
            rows = [{"member": f"m{i}", "total": 1.0} for i in range(65)]  # over the 64 kept
            big = dict(spec, routing={**route.as_dict(), "scores": rows})
            assert admin.post("/v1/jobs", json={**big, "tenant": "vision"}).status_code == 422
            assert c.get("/v1/jobs").json()["jobs"] == []  # nothing of it was queued
            job = submit(admin, tenant="vision", **spec)
            kept = c.get(f"/v1/jobs/{job}").json()["job"]["spec"]["routing"]
            # As sent; the fields a front may add (its predicted wait, what the job asked of
            # the federation, where it was re-routed from) kept empty.
            assert {k: v for k, v in kept.items() if v is not None} == route.as_dict()
            assert (kept["wait_s"], kept["asks"], kept["rerouted_from"]) == (None, None, None)
            assert Route.from_dict(kept).member == route.member
        with srv.client(tenant_token(srv, "audio")) as other:  # another tenant: no such job
            assert other.get(f"/v1/jobs/{job}").status_code == 404
        shown = run_cli(srv, user, "show", job)
        assert "routing" in shown and f"routed to {route.member} by suanli" in shown
        assert "ap-northeast: excluded: data residency" in shown
    finally:
        srv.stop()
