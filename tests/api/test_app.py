"""The control plane's HTTP API over a real store (SQLite and PostgreSQL), in process.

Covers authentication, jobs (submit, list in pages, get, cancel, logs), tenant isolation (a
job of another tenant is answered exactly as a job that does not exist), roles, tokens, the
body limit, the error shape, metrics and health; and a schemathesis run over the OpenAPI
document asserting that no input makes the API answer 5xx.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import schemathesis

from fuzzing import describe, fuzz, operations, request_of
from pg import postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.control.metrics import ControlMetrics
from suanli.metering.charges import Charge
from suanli.store import Store, post_charges
from suanli.store import jobs as js
from suanli.store.tokens import create_token

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette: "use httpx2"
    from fastapi.testclient import TestClient

from suanli.api.app import create_app  # noqa: E402

NOW = 1_764_000_000_000
JOB = {"command": ["python", "train.py"], "gpus": 1}


store = store_fixture()


@dataclass
class Api:
    """An app over a store, a client for it, and tokens of each kind."""

    store: Store
    client: TestClient
    metrics: ControlMetrics
    logs: Path
    wakes: list[int] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, who: str, role: str = "user", tenant: str | None = "vision") -> str:
        secret, _ = create_token(
            self.store, name=who, role=role, tenant=tenant, user=who, now_ms=NOW
        )
        self.tokens[who] = secret
        return secret

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def get(self, path: str, who: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.as_(who), **kw)

    def post(self, path: str, who: str, headers: dict[str, str] | None = None, **kw: Any) -> Any:
        return self.client.post(path, headers={**self.as_(who), **(headers or {})}, **kw)

    def submit(self, who: str, **spec: Any) -> dict[str, Any]:
        r = self.post("/v1/jobs", who, json={**JOB, **spec})
        assert r.status_code == 201, r.text
        return dict(r.json())


def log_path(root: Path) -> Callable[[str, int, int, str], Path | None]:
    def log_file(job_id: str, attempt: int, task: int, stream: str) -> Path | None:
        return None if task > 7 else root / f"{job_id}.{attempt}.{task}.{stream}"

    return log_file


def make_api(
    store: Store, tmp_path: Path, queues: list[dict[str, Any]] | None = None, **kw: Any
) -> Api:
    metrics = ControlMetrics()
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    wakes: list[int] = []
    app = create_app(
        store,
        metrics=metrics,
        log_file=log_path(logs),
        wake=lambda: wakes.append(1),
        queues=lambda: list(queues or []),
        clock_ms=lambda: NOW,
        **kw,
    )
    api = Api(store, TestClient(app), metrics, logs, wakes)
    api.token("root", "admin", None)
    api.token("ana")
    api.token("bob")
    api.token("vlead", "tenant-admin")
    api.token("nina", "user", "nlp")
    return api


@pytest.fixture
def api(store: Store, tmp_path: Path) -> Api:
    return make_api(store, tmp_path)


def error(r: Any) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error", "fields"} and "\n" not in body["error"], body
    return dict(body)


# --- authentication -----------------------------------------------------------------------


def test_requests_without_a_valid_token_are_401(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer sl_nope"}, {"Authorization": "Basic eDp5"}):
        r = api.client.get("/v1/jobs", headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        error(r)
    assert api.get("/v1/whoami", "ana").json() == {
        "token_id": 2,
        "name": "ana",
        "role": "user",
        "tenant": "vision",
        "user": "ana",
    }
    token_id = api.get("/v1/whoami", "bob").json()["token_id"]
    assert api.client.delete(f"/v1/tokens/{token_id}", headers=api.as_("root")).status_code == 200
    r = api.get("/v1/whoami", "bob")  # revoked
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_health_needs_no_token_and_metrics_do(api: Api, store: Store, tmp_path: Path) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/metrics").status_code == 401
    api.submit("ana")
    text = api.get("/metrics", "root").text
    assert 'suanli_api_requests_total{method="POST",route="/v1/jobs",status="201"} 1.0' in text
    assert 'route="/metrics",status="401"' in text
    assert 'suanli_jobs{queue="vision",state="pending"} 1.0' in text
    # A tenant's token sees its own queues, and not the platform's traffic.
    mine = api.get("/metrics", "ana").text
    assert 'suanli_jobs{queue="vision",state="pending"} 1.0' in mine
    assert "suanli_api_requests_total{" not in mine
    public = make_api(store, tmp_path, metrics_public=True)
    assert public.client.get("/metrics").status_code == 200


def test_metrics_read_gpu_telemetry_at_each_scrape(store: Store, tmp_path: Path) -> None:
    # Stands in for NVML's readings (this machine has no GPU): serve passes backends.inventory's.
    from suanli.backends.inventory import GpuSample

    readings = [
        {("n0", 0): GpuSample(30, 1024, 250.0, 55)},
        {("n0", 0): GpuSample(90, 2048, None, 60)},
    ]
    api = make_api(store, tmp_path, telemetry=lambda: readings.pop(0))
    assert 'suanli_gpu_utilization_ratio{gpu="0",node="n0"} 0.3' in api.get("/metrics", "ana").text
    text = api.get("/metrics", "ana").text
    assert 'suanli_gpu_utilization_ratio{gpu="0",node="n0"} 0.9' in text
    assert "suanli_gpu_power_watts{" not in text  # no longer reported


# --- jobs ---------------------------------------------------------------------------------


def test_submit_get_list_and_cancel(api: Api) -> None:
    job = api.submit("ana", name="resnet", memory="8G", env={"A": "1"})
    assert job["id"] == "1" and job["state"] == "pending" and job["name"] == "resnet"
    assert (job["tenant"], job["queue"], job["user"]) == ("vision", "vision", "ana")
    assert job["spec"]["memory"] == 8192 and job["spec"]["env"] == {"A": "1"}
    assert job["submitted_at"] == datetime.fromtimestamp(NOW / 1000, UTC).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    assert api.wakes == [1]
    unnamed = api.submit("ana", queue="shared", priority_class="spot")
    assert (unnamed["name"], unnamed["queue"], unnamed["priority_class"]) == (
        "python",
        "shared",
        "spot",
    )
    detail = api.get("/v1/jobs/1", "ana").json()
    assert detail["job"] == job and detail["attempts"] == []
    assert [e["kind"] for e in detail["history"]] == ["submitted"]
    page = api.get("/v1/jobs", "ana").json()
    assert [j["id"] for j in page["jobs"]] == ["1", "2"] and page["next"] is None
    assert [j["id"] for j in api.get("/v1/jobs?queue=shared", "ana").json()["jobs"]] == ["2"]
    assert api.get("/v1/jobs?user=bob", "ana").json()["jobs"] == []

    r = api.post("/v1/jobs/1/cancel", "ana")
    assert r.status_code == 202 and r.json()["cancel_requested"] is True
    assert api.wakes == [1, 1, 1]
    kinds = [e["kind"] for e in api.get("/v1/jobs/1", "ana").json()["history"]]
    assert kinds == ["submitted", "cancel-requested"]
    assert api.get("/v1/jobs?state=pending,running", "ana").json()["jobs"][0]["id"] == "1"
    assert api.get("/v1/jobs?state=succeeded", "ana").json()["jobs"] == []
    r = api.get("/v1/jobs?state=sleeping", "ana")
    assert r.status_code == 422 and "sleeping" in error(r)["error"]
    assert [f["field"] for f in error(r)["fields"]] == ["state"]


def test_pages_follow_the_cursor(api: Api) -> None:
    ids = [api.submit("ana")["id"] for _ in range(5)]
    seen, after, pages = [], None, 0
    while True:
        query = "/v1/jobs?limit=2" + (f"&after={after}" if after else "")
        page = api.get(query, "ana").json()
        seen += [j["id"] for j in page["jobs"]]
        pages += 1
        after = page["next"]
        if after is None:
            break
    assert seen == ids and pages == 3
    for bad in ("limit=0", "limit=1001", "after=-1", "after=x", "after=" + "9" * 30):
        r = api.get(f"/v1/jobs?{bad}", "ana")
        assert r.status_code == 422, bad
        assert error(r)["fields"][0]["field"] in ("limit", "after")


def test_tenants_cannot_see_each_others_jobs(api: Api) -> None:
    job = api.submit("ana")
    theirs = api.submit("nina")
    assert theirs["tenant"] == "nlp"
    missing = api.get("/v1/jobs/999", "nina")
    assert missing.status_code == 404
    for method, path in (
        ("get", "/v1/jobs/{}"),
        ("post", "/v1/jobs/{}/cancel"),
        ("get", "/v1/jobs/{}/logs"),
    ):
        other = getattr(api, method)(path.format(job["id"]), "nina")
        absent = getattr(api, method)(path.format("999"), "nina")
        assert other.status_code == absent.status_code == 404
        assert other.json()["error"].replace(job["id"], "X") == absent.json()["error"].replace(
            "999", "X"
        )
    assert [j["id"] for j in api.get("/v1/jobs", "nina").json()["jobs"]] == [theirs["id"]]
    assert api.get("/v1/jobs?tenant=vision", "nina").json()["jobs"] == []
    assert len(api.get("/v1/jobs", "root").json()["jobs"]) == 2
    assert [j["id"] for j in api.get("/v1/jobs?tenant=nlp", "root").json()["jobs"]] == [
        theirs["id"]
    ]
    r = api.post("/v1/jobs", "nina", json={**JOB, "tenant": "vision"})
    assert r.status_code == 403
    r = api.post("/v1/jobs", "root", json=JOB)  # an admin's job without a tenant
    assert r.status_code == 201 and r.json()["tenant"] == "default"
    assert api.post("/v1/jobs", "root", json={**JOB, "tenant": "nlp"}).status_code == 201


def test_a_user_cancels_its_own_jobs_and_a_tenant_admin_any(api: Api) -> None:
    first, second = api.submit("ana"), api.submit("ana")
    r = api.post(f"/v1/jobs/{first['id']}/cancel", "bob")
    assert r.status_code == 403 and "ana" in error(r)["error"]
    assert api.post(f"/v1/jobs/{first['id']}/cancel", "vlead").status_code == 202
    assert api.post(f"/v1/jobs/{second['id']}/cancel", "root").status_code == 202
    assert api.post(f"/v1/jobs/{second['id']}/cancel", "ana").status_code == 202  # again: ok


# --- errors -------------------------------------------------------------------------------


def test_validation_errors_name_each_field(api: Api) -> None:
    r = api.post("/v1/jobs", "ana", json={"command": ["x"], "gpus": 1.5, "gpu": 1})
    assert r.status_code == 422
    body = error(r)
    fields = {f["field"]: f["problem"] for f in body["fields"]}
    assert fields["gpus"] == "more than one GPU must be a whole number, got 1.5"
    assert fields["gpu"] == "unknown field"
    assert "gpus" in body["error"] and "body." not in body["error"]
    r = api.post("/v1/jobs", "ana", json={"env": {"A=B": "1"}, "name": "x"})
    fields = {f["field"]: f["problem"] for f in error(r)["fields"]}
    assert fields["command"] == "required" and "A=B" in fields["env"]
    r = api.post("/v1/jobs", "ana", json={**JOB, "name": "bad\u0000name"})
    assert r.status_code == 422 and error(r)["fields"][0]["field"] == "name"
    r = api.post("/v1/jobs", "ana", content=b"{not json", headers={"Content-Type": "x"})
    assert r.status_code == 422
    error(r)
    r = api.get("/v1/nowhere", "ana")
    assert r.status_code == 404
    error(r)


def test_request_bodies_are_bounded(store: Store, tmp_path: Path) -> None:
    api = make_api(store, tmp_path, max_body_bytes=1000)
    big = {**JOB, "env": {"PAD": "x" * 2000}}
    r = api.post("/v1/jobs", "ana", json=big)
    assert r.status_code == 413 and "1000 bytes" in error(r)["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked
        yield b'{"command": ["x"], "env": {"PAD": "'
        for _ in range(10):
            yield b"x" * 200
        yield b'"}}'

    r = api.post("/v1/jobs", "ana", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert api.post("/v1/jobs", "ana", json=JOB).status_code == 201
    assert api.get("/v1/jobs", "ana").json()["jobs"][0]["id"] == "1"
    assert 'route="/v1/jobs",status="413"} 2.0' in api.get("/metrics", "root").text


# --- logs ---------------------------------------------------------------------------------


def started(api: Api, job_id: str, attempt: int = 1) -> None:
    js.sync_inventory(
        api.store,
        [js.NodeRow("n0", 2, "H100", 81920, 96000, 1 << 20, True, "declared")],
        [js.GpuRow("n0", i, "H100", f"virtual-{i}", 81920) for i in range(2)],
        NOW,
    )
    place = [{"task": 0, "node": "n0", "gpus": [0], "gpu_milli": 500, "gpu_memory_mib": 0,
              "cpu_milli": 1000, "memory_mib": 1024}]  # fmt: skip
    with api.store.begin() as conn:
        js.admit_attempt(conn, job_id, attempt, place, NOW)


def test_logs(api: Api) -> None:
    job = api.submit("ana")["id"]
    r = api.get(f"/v1/jobs/{job}/logs", "ana")
    assert r.status_code == 404 and "no attempt" in error(r)["error"]
    started(api, job)
    assert api.get(f"/v1/jobs/{job}/logs", "ana").status_code == 404  # no file yet
    (api.logs / f"{job}.1.0.stdout").write_bytes(b"one\ntwo\nthree\n")
    (api.logs / f"{job}.1.0.stderr").write_bytes(b"oops")
    r = api.get(f"/v1/jobs/{job}/logs", "ana")
    assert r.status_code == 200 and r.text == "one\ntwo\nthree\n"
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["x-suanli-log-size"] == "14"
    assert api.get(f"/v1/jobs/{job}/logs?tail=2", "ana").text == "two\nthree\n"
    assert api.get(f"/v1/jobs/{job}/logs?tail=0", "ana").text == ""
    assert api.get(f"/v1/jobs/{job}/logs?tail=99", "ana").text == "one\ntwo\nthree\n"
    assert api.get(f"/v1/jobs/{job}/logs?offset=8", "ana").text == "three\n"
    assert api.get(f"/v1/jobs/{job}/logs?offset=99", "ana").text == ""
    assert api.get(f"/v1/jobs/{job}/logs?stream=stderr&attempt=1", "ana").text == "oops"
    assert api.get(f"/v1/jobs/{job}/logs?attempt=2", "ana").status_code == 404
    assert api.get(f"/v1/jobs/{job}/logs?task=9", "ana").status_code == 404
    assert api.get(f"/v1/jobs/{job}/logs?stream=both", "ana").status_code == 422
    assert api.get(f"/v1/jobs/{job}/logs?tail=1&offset=1", "ana").status_code == 400
    detail = api.get(f"/v1/jobs/{job}", "ana").json()
    assert detail["job"]["state"] == "admitted"
    assert detail["attempts"][0]["placement"][0]["node"] == "n0"


# --- cluster ------------------------------------------------------------------------------


def test_queues_nodes_and_usage(store: Store, tmp_path: Path) -> None:
    queues = [
        {
            "name": "vision",
            "org": "vision",
            "cohort": "all",
            "tenants": ["vision"],
            "nominal": {"gpu": 8},
        },
        {"name": "nlp", "org": "nlp", "cohort": "all", "tenants": ["nlp"], "nominal": {"gpu": 4}},
    ]
    api = make_api(store, tmp_path, queues=queues)
    job = api.submit("ana")["id"]
    api.submit("ana")
    started(api, job)
    mine = api.get("/v1/queues", "ana").json()["queues"]
    assert [q["name"] for q in mine] == ["vision"]
    assert mine[0]["jobs"] == {"pending": 1, "running": 1}
    assert mine[0]["nominal"] == {"gpu": 8}
    assert [q["name"] for q in api.get("/v1/queues", "root").json()["queues"]] == [
        "vision",
        "nlp",
    ]
    nodes = api.get("/v1/nodes", "nina").json()["nodes"]
    assert nodes[0]["name"] == "n0" and nodes[0]["gpu_count"] == 2
    assert [g["used_milli"] for g in nodes[0]["gpus"]] == [500, 0]

    def charge(i: int, org: str, queue: str, amount: str) -> Charge:
        return Charge(
            f"k{i}", f"r{i}", str(i), 1, org, queue, "normal", "c", "gpu", "H100", "",
            NOW, NOW + 3_600_000, 3_600_000_000, Decimal(1), Decimal(amount), Decimal(amount),
            "USD", "v1",
        )  # fmt: skip

    post_charges(
        store,
        [charge(0, "vision/ana", "vision", "2.5"), charge(1, "nlp/nina", "nlp", "4")],
        datetime(2025, 11, 25, tzinfo=UTC),
        "b",
    )
    rows = api.get("/v1/usage", "root").json()
    assert rows["by"] == ["queue", "resource"]
    assert [(t["group"], t["amount"]) for t in rows["totals"]] == [
        ({"queue": "nlp", "resource": "gpu"}, "4.000000"),
        ({"queue": "vision", "resource": "gpu"}, "2.500000"),
    ]
    rows = api.get("/v1/usage?by=queue&by=day", "ana").json()["totals"]
    assert [(t["group"], t["amount"]) for t in rows] == [
        ({"queue": "vision", "day": "2025-11-24"}, "2.500000")
    ]
    rows = api.get("/v1/usage?by=user", "nina").json()["totals"]
    assert [t["group"] for t in rows] == [{"user": "nlp/nina"}]
    assert api.get(f"/v1/usage?since={NOW + 1}", "root").json()["totals"] == []
    assert len(api.get("/v1/usage?until=2030-01-01", "root").json()["totals"]) == 2
    for bad in ("by=colour", "since=yesterday"):
        r = api.get(f"/v1/usage?{bad}", "root")
        assert r.status_code == 422 and error(r)["fields"][0]["field"] in ("by", "since")


# --- tokens -------------------------------------------------------------------------------


def test_token_roles(api: Api) -> None:
    r = api.post("/v1/tokens", "vlead", json={"name": "ci", "user": "ci"})
    assert r.status_code == 201
    made = r.json()
    assert made["token"].startswith("sl_") and (made["tenant"], made["role"]) == ("vision", "user")
    ci = {"Authorization": f"Bearer {made['token']}"}
    assert api.client.get("/v1/whoami", headers=ci).json()["user"] == "ci"
    for body in (
        {"name": "x", "user": "x", "role": "admin"},
        {"name": "x", "user": "x", "tenant": "nlp"},
    ):
        assert api.post("/v1/tokens", "vlead", json=body).status_code == 403
    assert api.post("/v1/tokens", "ana", json={"name": "x", "user": "x"}).status_code == 403
    r = api.post("/v1/tokens", "root", json={"name": "x", "user": "x", "role": "tenant-admin"})
    assert r.status_code == 400 and "tenant" in error(r)["error"]
    r = api.post("/v1/tokens", "root", json={"name": "bad name", "user": "x"})
    assert r.status_code == 422 and error(r)["fields"][0]["field"] == "name"

    assert api.get("/v1/tokens", "ana").status_code == 403
    listed = api.get("/v1/tokens", "vlead").json()["tokens"]
    assert {t["tenant"] for t in listed} == {"vision"} and "token" not in listed[0]
    assert len(api.get("/v1/tokens", "root").json()["tokens"]) == 6
    nina = api.get("/v1/whoami", "nina").json()["token_id"]
    assert api.client.delete(f"/v1/tokens/{nina}", headers=api.as_("vlead")).status_code == 404
    assert api.client.delete(f"/v1/tokens/{nina}", headers=api.as_("ana")).status_code == 403
    r = api.client.delete(f"/v1/tokens/{made['id']}", headers=api.as_("vlead"))
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    assert api.client.get("/v1/whoami", headers=ci).status_code == 401
    ana = api.get("/v1/whoami", "ana").json()["token_id"]
    assert api.client.delete(f"/v1/tokens/{ana}", headers=api.as_("ana")).status_code == 200
    assert api.client.delete("/v1/tokens/0", headers=api.as_("root")).status_code == 422


def test_data_sets_held_here_are_an_admins_to_read_and_write(api: Api) -> None:
    """``/v1/datasets`` (item 6 of a live member): an admin records, lists and forgets
    copies; a plain user's and a tenant admin's token are 403 on each route and write
    nothing; a bad body is 422 naming the field."""
    put = lambda name, who, **body: api.client.put(  # noqa: E731
        f"/v1/datasets/{name}", headers=api.as_(who), json=body)  # fmt: skip
    for who in ("ana", "vlead"):
        assert api.get("/v1/datasets", who).status_code == 403
        assert "admin" in error(put("scans", who, gb=1))["error"]
        assert api.client.delete("/v1/datasets/scans", headers=api.as_(who)).status_code == 403
    assert api.get("/v1/datasets", "root").json() == {"datasets": []}

    r = put("scans", "root", gb=500, state="arriving", arrives_in_s=120, source="eu-west")
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "scans", "gb": 500.0, "state": "arriving",
                        "arrives_at": "2025-11-24T16:02:00.000Z", "source": "eu-west",
                        "updated_at": "2025-11-24T16:00:00.000Z", "updated_by": "root"}  # fmt: skip
    assert put("scans", "root", gb=500).json()["state"] == "present"
    # A front saying a copy is on its way does not make a present one arriving again.
    again = put("scans", "root", gb=500, state="arriving", arrives_in_s=60).json()
    assert (again["state"], again["arrives_at"]) == ("present", None)

    for body, named in (
        ({"gb": -1}, "gb"), ({"gb": 2e9}, "gb"), ({"gb": 1, "state": "lost"}, "state"),
        ({"gb": 1, "state": "arriving"}, "arrives_in_s"),
        ({"gb": 1, "arrives_in_s": 5}, "arrives_in_s"), ({"gb": 1, "copies": 2}, "copies"),
        ({"gb": 1, "source": "a b"}, "source"), ({}, "gb"),
    ):
        r = put("other", "root", **body)
        assert r.status_code == 422, (body, r.text)
        assert named in {f["field"].split(".")[-1] for f in error(r)["fields"]}, r.text
    r = api.client.put("/v1/datasets/other", headers={**api.as_("root"),
                       "Content-Type": "application/json"}, content=b'{"gb": NaN}')  # fmt: skip
    assert r.status_code == 422
    for name in ("a b", "-x", "x" * 201, "caf\u00e9"):
        assert put(name, "root", gb=1).status_code == 422, name
    assert [d["name"] for d in api.get("/v1/datasets", "root").json()["datasets"]] == ["scans"]

    gone = api.client.delete("/v1/datasets/scans", headers=api.as_("root"))
    assert gone.status_code == 200 and gone.json() == {"datasets": []}
    assert api.client.delete("/v1/datasets/scans", headers=api.as_("root")).status_code == 404


def test_the_openapi_document(api: Api) -> None:
    doc = api.client.get("/openapi.json").json()
    assert doc["info"]["title"] == "suanli"
    paths = set(doc["paths"])
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/v1/jobs/{job_id}/logs",
            "/v1/queues", "/v1/nodes", "/v1/usage", "/v1/whoami", "/v1/tokens",
            "/v1/tokens/{token_id}", "/metrics", "/healthz"} <= paths  # fmt: skip


# --- no input makes a 5xx -------------------------------------------------------------------


@dataclass
class Fuzzed:
    app: Any
    headers: dict[str, str]


@pytest.fixture
def fuzzed(store: Store, tmp_path: Path) -> Fuzzed:
    api = make_api(store, tmp_path, queues=[{"name": "vision", "tenants": ["vision"]}])
    job = api.submit("ana")["id"]
    started(api, job)
    (api.logs / f"{job}.1.0.stdout").write_text("a\nb\n")
    return Fuzzed(api.client.app, api.as_("root"))


FUZZ_EXAMPLES = 40
"""Examples per operation and mode (positive and negative): the run stays well under 60 s."""


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode), ids=str)
def test_no_input_makes_a_server_error(fuzzed: Fuzzed, mode: schemathesis.GenerationMode) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed.app)
    client = TestClient(fuzzed.app, raise_server_exceptions=False)
    ops = operations(schema)
    errors: list[str] = []
    seen: dict[int, int] = {}

    def send(case: Any) -> None:
        response = client.request(**request_of(case, "http://testserver", fuzzed.headers))
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            errors.append(describe(case, response.status_code, response.text))

    unsatisfiable = [op.label for op in ops if not fuzz(op, mode, send, FUZZ_EXAMPLES)]
    assert len(unsatisfiable) < len(ops) // 2, unsatisfiable
    assert not errors, "\n".join(errors[:20])
    assert any(200 <= code < 300 for code in seen), seen
