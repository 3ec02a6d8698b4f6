"""Online services through the real server (``suanli serve`` as ``build_server`` builds it,
real replica processes), on SQLite: a service follows its demand up and back down and never
below its minimum, a plain user's token sees and scales only its own tenant's services and
cannot flood the store with demand reports, bad input is 422 naming the field, and the
client's ``suanli service`` commands.

The server's demand step is 0.2 s, so the autoscaler is asked five times a second; the
reactive autoscaler is given no stabilisation window (``stabilise: 0``), so that it scales
down at the first step whose demand needs fewer replicas (its 300 s default is HPA's).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from serving import DEADLINE_S, PY, Running, start
from suanli.cli.main import app as cli
from suanli.core.serving.queueing import Capacity
from suanli.store.schema import service_demand

STEP_S = 0.2
LONG = [PY, "-c", "import time; time.sleep(120)"]
MU, SLO = 10.0, 0.6  # a replica serves 10 requests/s; P99 latency within 0.6 s


def service(name: str = "web", **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "replica": {"command": LONG, "gpus": 0.25, "cpu": 0.1, "memory": "64M", "grace": 1},
        "mu": MU,
        "slo": SLO,
        "cold_start": 0,
        "min_replicas": 1,
        "max_replicas": 6,
        "autoscaler": "reactive",
        "autoscaler_options": {"stabilise": 0},
    }
    body.update(over)
    return body


def token(srv: Running, tenant: str, user: str = "ana", role: str = "user") -> str:
    with srv.client() as admin:
        r = admin.post(
            "/v1/tokens", json={"name": f"{tenant}-{user}", "role": role, "tenant": tenant,
                                "user": user},
        )  # fmt: skip
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


def wait_running(c: httpx.Client, name: str, n: int) -> dict[str, Any]:
    """The service once exactly ``n`` replicas run and none is starting; meanwhile, the
    replicas it runs never drop below its minimum."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        svc = c.get(f"/v1/services/{name}").json()
        live = svc["running"] + svc["starting"]
        assert live >= svc["min_replicas"] or svc["desired"] is None, svc
        if svc["running"] == n and svc["starting"] == 0 and svc["desired"] == n:
            return dict(svc)
        assert time.monotonic() < deadline, f"service {name} never ran {n} replicas: {svc}"
        time.sleep(0.05)


@pytest.fixture
def srv(tmp_path: Path) -> Any:
    running = start(tmp_path / "state", str(tmp_path / "suanli.db"), service_step=STEP_S)
    try:
        yield running
    finally:
        running.stop()


def test_replicas_follow_the_demand_up_and_down_never_below_the_minimum(srv: Running) -> None:
    cap = Capacity(MU, SLO, 6)
    with srv.client(token(srv, "vision")) as c:
        r = c.post("/v1/services", json=service())
        assert r.status_code == 201, r.text
        wait_running(c, "web", 1)  # no demand yet: its minimum
        high = 25.0
        want = cap.replicas(high)
        assert want == 4  # what M/M/c says 25 requests/s at 10/s each need for P99 <= 0.6 s
        assert c.post("/v1/services/web/demand", json={"rate": high}).status_code == 202
        svc = wait_running(c, "web", want)
        assert svc["demand"] == high
        replicas = [x["job"] for x in svc["replicas"]]
        jobs = [c.get(f"/v1/jobs/{j}").json()["job"] for j in replicas]
        assert {j["priority_class"] for j in jobs} == {"online"}
        assert all("service=web" in j["spec"]["labels"] for j in jobs)
        assert {j["tenant"] for j in jobs} == {"vision"}

        assert c.post("/v1/services/web/demand", json={"rate": 10.0}).status_code == 202
        down = wait_running(c, "web", cap.replicas(10.0))
        assert down["desired"] == 2
        kept = {x["job"] for x in down["replicas"]}
        assert kept == set(sorted(replicas, key=int)[:2])  # the newest were stopped
        for j in set(replicas) - kept:
            job = c.get(f"/v1/jobs/{j}").json()["job"]
            assert job["cancel_requested"]

        assert c.post("/v1/services/web/demand", json={"rate": 0.0}).status_code == 202
        wait_running(c, "web", 1)  # back to its minimum, never below

        r = c.delete("/v1/services/web")
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + DEADLINE_S
        while any(c.get(f"/v1/jobs/{j}").json()["job"]["state"] != "cancelled" for j in kept):
            assert time.monotonic() < deadline, "the deleted service's replicas still run"
            time.sleep(0.05)
        assert c.get("/v1/services/web").status_code == 404


def demand_rows(srv: Running) -> int:
    with srv.server.store.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(service_demand)).scalar())


def test_demand_reports_are_rate_limited_per_tenant_and_pruned_once_folded(
    tmp_path: Path,
) -> None:
    """A plain user's token cannot flood the store with demand reports: past its tenant's
    burst they are 429 (a bucket apart from its submissions, other tenants untouched), and
    the loop keeps only each service's latest report once it has folded them."""
    srv = start(tmp_path / "state", str(tmp_path / "suanli.db"), service_step=STEP_S,
                limits=(1.0, 3, None))  # fmt: skip
    try:
        vision, nlp = token(srv, "vision"), token(srv, "nlp")
        with srv.client(vision) as c, srv.client(nlp) as other, srv.client() as admin:
            assert c.post("/v1/services", json=service()).status_code == 201
            assert other.post("/v1/services", json=service()).status_code == 201
            answers = [c.post("/v1/services/web/demand", json={"rate": 5.0 + i})
                       for i in range(6)]  # fmt: skip
            codes = [a.status_code for a in answers]
            assert codes[:3] == [202, 202, 202] and 429 in codes[3:], codes
            late = next(a for a in answers if a.status_code == 429)
            assert "reports demand faster than 1 reports/s (burst 3)" in late.json()["error"]
            assert int(late.headers["Retry-After"]) >= 1
            # Its submissions have a bucket of their own (the service's creation took one).
            job = c.post("/v1/jobs", json={"command": [PY, "-c", "pass"]})
            assert job.status_code == 201, job.text
            assert other.post("/v1/services/web/demand", json={"rate": 1.0}).status_code == 202
            # An admin is not limited: its reports all land, and are folded and pruned too.
            for i in range(40):
                r = admin.post("/v1/services/web/demand?tenant=vision", json={"rate": 7.0 + i})
                assert r.status_code == 202, r.text
            deadline = time.monotonic() + DEADLINE_S
            while demand_rows(srv) > 2:  # one per service: the latest, which is shown
                assert time.monotonic() < deadline, f"{demand_rows(srv)} demand rows kept"
                time.sleep(0.05)
            assert c.get("/v1/services/web").json()["demand"] == 46.0
            assert other.get("/v1/services/web").json()["demand"] == 1.0
    finally:
        srv.stop()


def test_a_tenant_sees_and_scales_only_its_own_services(srv: Running) -> None:
    vision, nlp = token(srv, "vision"), token(srv, "nlp")
    with srv.client(vision) as c, srv.client(nlp) as other:
        assert c.post("/v1/services", json=service()).status_code == 201
        assert other.get("/v1/services").json() == {"services": []}
        mine = c.get("/v1/services").json()["services"]
        assert [x["name"] for x in mine] == ["web"]
        missing = other.get("/v1/services/nope")
        for r in (
            other.get("/v1/services/web"),
            other.post("/v1/services/web/demand", json={"rate": 50.0}),
            other.delete("/v1/services/web"),
            other.get("/v1/services/web", params={"tenant": "vision"}),
        ):
            assert r.status_code == 404 and r.json()["error"] == "no service 'web'"
        assert missing.status_code == 404
        # Creating for another tenant is refused; the same name in one's own tenant is not.
        r = other.post("/v1/services", json=service(tenant="vision"))
        assert r.status_code == 403 and r.json()["fields"][0]["field"] == "tenant"
        assert other.post("/v1/services", json=service()).status_code == 201
        assert c.post("/v1/services", json=service()).status_code == 409
        # The other tenant's demand did not reach this one.
        assert c.get("/v1/services/web").json()["demand"] is None


@pytest.mark.parametrize(
    ("over", "field"),
    [
        pytest.param({"mu": -1}, "mu", id="negative-mu"),
        pytest.param({"mu": 0}, "mu", id="zero-mu"),
        # P99 of one exponential service time at mu = 10/s is ln(100)/10 = 0.46 s.
        pytest.param({"slo": 0.4}, "slo", id="slo-below-the-service-time-p99"),
        pytest.param({"min_replicas": 5, "max_replicas": 2}, "min_replicas", id="min-above-max"),
        pytest.param({"max_replicas": 100_000}, "max_replicas", id="too-many-replicas"),
        pytest.param({"autoscaler": "clairvoyant"}, "autoscaler", id="unknown-autoscaler"),
        pytest.param(
            {"autoscaler_options": {"bogus": 1}}, "autoscaler_options", id="unknown-option"
        ),  # fmt: skip
        pytest.param({"name": "no spaces"}, "name", id="bad-name"),
        pytest.param(
            {"replica": {"command": LONG, "gpus": 2}}, "replica.gpus", id="replica-of-two-gpus"
        ),  # fmt: skip
        pytest.param(
            {"replica": {"command": LONG, "tasks": 2}}, "replica.tasks", id="replica-gang"
        ),  # fmt: skip
        pytest.param(
            {"replica": {"command": LONG, "gpus": 0.5, "gpu_models": ["A100"]}},
            None,
            id="replica-that-never-fits",
        ),  # fmt: skip
    ],
)
def test_bad_services_are_422_naming_the_field(
    srv: Running, over: dict[str, Any], field: str | None
) -> None:
    with srv.client(token(srv, "vision")) as c:
        r = c.post("/v1/services", json=service(**over))
        assert r.status_code == 422, r.text
        fields = [f["field"] for f in r.json()["fields"]]
        if field is None:
            assert "refused" in r.json()["error"], r.json()
        else:
            assert field in fields, r.json()
        assert c.get("/v1/services").json() == {"services": []}
        bad_rate = c.post("/v1/services/web/demand", json={"rate": -1})
        assert bad_rate.status_code in (404, 422)


def test_the_client_creates_reports_and_shows_services(srv: Running, tmp_path: Path) -> None:
    tok = token(srv, "vision")
    spec = tmp_path / "web.json"
    spec.write_text(json.dumps(service()))

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "--server", srv.url, "--token", tok])
        assert result.exit_code == 0, (result.exit_code, result.output)
        return str(result.stdout)

    assert "service web created" in run("service", "create", str(spec))
    with srv.client(tok) as c:
        wait_running(c, "web", 1)
        assert "reported 25 requests/s" in run("service", "demand", "web", "25")
        wait_running(c, "web", 4)
    shown = run("service", "show", "web")
    assert "desired" in shown and "4" in shown and "25" in shown
    listed = run("service", "list").splitlines()
    assert listed[0].split()[:4] == ["SERVICE", "AUTOSCALER", "DESIRED", "RUNNING"]
    assert listed[1].split()[:4] == ["web", "reactive", "4", "4"]
    data = json.loads(run("service", "show", "web", "--json"))
    assert data["desired"] == 4 and data["running"] == 4
    assert "deleted" in run("service", "delete", "web")
