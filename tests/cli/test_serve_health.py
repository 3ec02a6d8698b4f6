"""GPU health and node holds through the real server (``suanli serve`` as ``build_server``
builds it, real processes), on SQLite and PostgreSQL.

This machine has no GPU and no NVML: the server's health watch is given a stand-in for the
NVML health reader (through ``build_server(health_reader=...)``, which no command-line option
or API request can reach) whose faults the test sets; the reader itself is tested over a
stand-in ``pynvml`` in ``tests/backends/test_gpu_health.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, Running, run_cli, start, submit, tenant_token, wait_for, wait_state

LONG = [PY, "-c", "import time; time.sleep(60)"]

db_location = location_fixture()


class Faults:
    """A stand-in health reader: GPU index -> fault (absent: healthy), set by the test."""

    name = "stand-in"

    def __init__(self) -> None:
        self.faults: dict[int, str] = {}
        self.lock = threading.Lock()

    def read(self, gpus: Mapping[int, str]) -> dict[int, str | None]:
        with self.lock:
            return {i: self.faults.get(i) for i in gpus}


def attempts(c: Any, job: str) -> list[dict[str, Any]]:
    return list(c.get(f"/v1/jobs/{job}").json()["attempts"])


def running_on(c: Any, job: str, n: int) -> int | None:
    """The GPU attempt ``n`` of ``job`` runs on, once it runs."""
    a = attempts(c, job)
    if len(a) < n or a[n - 1]["state"] != "running":
        return None
    (gpu,) = a[n - 1]["placement"][0]["gpus"]
    return int(gpu)


def test_a_faulty_gpu_requeues_its_job_elsewhere_and_returns_when_healthy(
    tmp_path: Path, db_location: str
) -> None:
    faults = Faults()
    srv: Running = start(tmp_path / "state", db_location, health_reader=faults, health_interval=0.1)
    try:
        user = tenant_token(srv, "vision")
        with srv.client(user) as c:
            job = submit(c, command=LONG, gpus=1)
            gpu = wait_for("the first attempt to run", lambda: running_on(c, job, 1) is not None)
            gpu = running_on(c, job, 1)
            with faults.lock:
                faults.faults[gpu] = "xid 79"
            other = wait_for("a second attempt", lambda: running_on(c, job, 2))
            assert other is not None and other != gpu
            wait_for("the first attempt to end", lambda: attempts(c, job)[0]["state"] == "ended")
            first = attempts(c, job)[0]
            assert first["outcome"] == "preempted"
            assert first["detail"].startswith(f"interrupted: GPU {gpu} of node ")
            assert first["detail"].endswith("is out of service (xid 79)")
            (node,) = c.get("/v1/nodes").json()["nodes"]
            assert [g["fault"] for g in node["gpus"] if not g["healthy"]] == ["xid 79"]
            listed = run_cli(srv, user, "nodes")  # a user reads the nodes, faults included
            assert f"GPU {gpu}: xid 79" in listed
            with faults.lock:
                faults.faults.clear()
            wait_for(
                "the GPU to be healthy",
                lambda: all(g["healthy"] for g in c.get("/v1/nodes").json()["nodes"][0]["gpus"]),
            )
            assert c.post(f"/v1/jobs/{job}/cancel").status_code == 202
            wait_state(c, job, "cancelled")
    finally:
        srv.stop()


def test_an_admin_drains_and_uncordons_a_node_and_a_user_may_not(
    tmp_path: Path, db_location: str
) -> None:
    srv = start(tmp_path / "state", db_location, gpus=1)
    try:
        user = tenant_token(srv, "vision")
        with srv.client(user) as c, srv.client() as admin:
            (node,) = [n["name"] for n in c.get("/v1/nodes").json()["nodes"]]
            job = submit(c, command=LONG, gpus=1)
            wait_for("the job to run", lambda: running_on(c, job, 1) is not None)
            # A hostile tenant: a plain user's token may not hold a node, by any route.
            for action in ("cordon", "drain", "uncordon"):
                r = c.post(f"/v1/nodes/{node}/{action}", json={"reason": "mine"})
                assert r.status_code == 403, r.text
                assert "only admins" in r.json()["error"]
            assert admin.post("/v1/nodes/nope/drain", json={}).status_code == 404
            # A user never learns whether a node exists, nor reaches a malformed one.
            assert c.post("/v1/nodes/nope/drain", json={}).status_code == 403
            for bad in ("a%00b", "x" * 201):
                assert admin.post(f"/v1/nodes/{bad}/drain", json={}).status_code == 422
            assert admin.post(f"/v1/nodes/{node}/drain", json=["x"]).status_code == 422
            assert admin.post(f"/v1/nodes/{node}/drain", json={"reason": 7}).status_code == 422
            r = admin.post(f"/v1/nodes/{node}/cordon")  # no body: no reason
            assert r.status_code == 200, r.text
            assert r.json()["state"] == "cordoned" and r.json()["cordon_reason"] is None
            assert admin.post(f"/v1/nodes/{node}/uncordon").json()["state"] == "up"
            assert (
                admin.post(f"/v1/nodes/{node}/drain", json={"reason": "x" * 501}).status_code == 422
            )
            assert admin.post(f"/v1/nodes/{node}/drain", json={"why": "x"}).status_code == 422
            assert (
                admin.post(f"/v1/nodes/{node}/drain", json={"reason": "a\u0000b"}).status_code
                == 422
            )
            assert c.get("/v1/nodes").json()["nodes"][0]["state"] == "up"  # none of it landed
            assert running_on(c, job, 1) is not None
            # The admin drains it with the CLI: the job is requeued and waits.
            said = run_cli(srv, srv.admin, "nodes", "drain", node, "--reason", "new firmware")
            assert said.strip() in (f"node {node}: draining", f"node {node}: drained")
            wait_for("the job to be requeued", lambda: attempts(c, job)[0]["state"] == "ended")
            first = attempts(c, job)[0]
            assert first["detail"] == f"interrupted: node {node} is drained (new firmware)"
            shown = wait_for(
                "the node to be drained",
                lambda: (n := c.get("/v1/nodes").json()["nodes"][0])["state"] == "drained" and n,
            )
            assert shown["cordon_reason"] == "new firmware"
            time.sleep(0.5)  # several passes: nothing lands on a drained node
            assert len(attempts(c, job)) == 1
            assert wait_state(c, job, "pending")["state"] == "pending"
            run_cli(srv, srv.admin, "nodes", "uncordon", node)
            wait_for("the job to run again", lambda: running_on(c, job, 2) is not None)
            assert c.post(f"/v1/jobs/{job}/cancel").status_code == 202
            wait_state(c, job, "cancelled")
    finally:
        srv.stop()
