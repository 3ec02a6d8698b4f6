"""Running ``suanli serve`` in a test: the real server on a loopback port, in this process.

The server is built as ``suanli serve`` builds it (``cli.serve.build_server``) with two
declared (virtual) GPUs (or ``gpus``), its loop, its GPU utilisation sampler (when it has one: a
``util_reader`` stand-in, since there is no NVML here) and its HTTP server on threads of
their own.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from suanli.cli.serve import Server, build_server
from tasks import TASK_PY

PY = TASK_PY
"""The interpreter tasks run (see ``tasks``)."""
DEADLINE_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    server: Server
    url: str
    admin: str
    state: Path
    threads: list[threading.Thread]
    uv: uvicorn.Server

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token or self.admin}"},
            timeout=10,
        )

    def stop(self) -> None:
        self.uv.should_exit = True
        self.server.stop.set()
        self.server.wake.set()
        for t in self.threads:
            t.join(timeout=20)
        self.server.close()


def start(state: Path, db: str, gpus: int = 2, **options: Any) -> Running:
    """The server on ``gpus`` declared H100s, or on a Ray cluster (``engine="ray"``, with
    ``ray_address`` and ``shared_dir``), whose nodes say what they have."""
    if options.get("engine") in ("ray", "slurm"):
        server = build_server(state, db=db, **options)
    else:
        server = build_server(state, db=db, gpus=gpus, gpu_model="H100", **options)
    port = free_port()
    uv = uvicorn.Server(
        uvicorn.Config(server.app, host="127.0.0.1", port=port, log_level="warning")
    )
    loop = threading.Thread(
        target=server.controller.run, args=(server.stop, server.wake, 0.1), daemon=True
    )
    http = threading.Thread(target=uv.run, daemon=True)
    loop.start()
    http.start()
    threads = [loop, http]
    if server.sampler is not None:
        threads.append(server.sampler.start(server.stop))
    if server.health is not None:
        threads.append(server.health.start(server.stop))
    deadline = time.monotonic() + DEADLINE_S
    while not uv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    # Written on the first start; a restart on the same state finds it there.
    admin = (server.token_file or state / "admin.token").read_text().strip()
    return Running(server, f"http://127.0.0.1:{port}", admin, state, threads, uv)


def submit(c: httpx.Client, **spec: Any) -> str:
    r = c.post("/v1/jobs", json=spec)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def hold_gpu(c: httpx.Client, sleep_s: float, max_runtime: float) -> str:
    """A one-GPU job that sleeps ``sleep_s`` and may run ``max_runtime``, once it runs."""
    job = submit(c, command=[PY, "-c", f"import time; time.sleep({sleep_s})"], gpus=1,
                 max_runtime=max_runtime)  # fmt: skip
    wait_state(c, job, "running")
    return job


def submit_in_outage(c: httpx.Client, n: int = 16, deadline_s: float = DEADLINE_S) -> list[str]:
    """Submit ``n`` one-GPU jobs while the execution engine is unreachable: every one is taken
    in and stays pending, and the last is told that the engine has not answered."""
    load = [submit(c, command=[PY, "-c", "print('ran')"], gpus=1) for _ in range(n)]
    deadline = time.monotonic() + deadline_s
    while True:
        job = c.get(f"/v1/jobs/{load[-1]}").json()["job"]
        if "has not answered" in (job.get("reason") or ""):
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert {c.get(f"/v1/jobs/{j}").json()["job"]["state"] for j in load} == {"pending"}
    return load


def wait_state(
    c: httpx.Client, job_id: str, *states: str, deadline_s: float = DEADLINE_S
) -> dict[str, Any]:
    deadline = time.monotonic() + deadline_s
    while True:
        job = c.get(f"/v1/jobs/{job_id}").json()["job"]
        if job["state"] in states:
            return dict(job)
        assert time.monotonic() < deadline, f"job {job_id} stuck in {job['state']}: {job}"
        time.sleep(0.05)


def logs(c: httpx.Client, job_id: str, **params: Any) -> str:
    r = c.get(f"/v1/jobs/{job_id}/logs", params=params)
    assert r.status_code == 200, r.text
    return r.text


# What the tests of the engines' backends (tests/cli/test_serve_ray.py, test_serve_slurm.py)
# share: their tasks start slowly (seconds), so they wait longer.


def wait_log(
    c: httpx.Client, job: str, text: str, deadline_s: float = DEADLINE_S, **params: Any
) -> str:
    """The log once it holds ``text`` (until the task has started there is none: 404)."""
    deadline = time.monotonic() + deadline_s
    while True:
        r = c.get(f"/v1/jobs/{job}/logs", params=params)
        if r.status_code == 200 and text in r.text:
            return r.text
        assert r.status_code in (200, 404), r.text
        assert time.monotonic() < deadline, f"job {job}: {text!r} never in its log: {r.text!r}"
        time.sleep(0.1)


def user_token(c: httpx.Client, tenant: str = "lab") -> str:
    """A plain user's token (alice of ``tenant``), made by the admin's client ``c``."""
    r = c.post("/v1/tokens", json={"name": "alice", "role": "user", "tenant": tenant,
                                   "user": "alice"})  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def tenant_token(srv: Running, tenant: str) -> str:
    """A plain user's token (user ``ana``) of ``tenant``, made by the admin."""
    with srv.client() as admin:
        r = admin.post(
            "/v1/tokens", json={"name": tenant, "role": "user", "tenant": tenant, "user": "ana"}
        )
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


def run_cli(srv: Running, token: str, *args: str) -> str:
    """``suanli ARGS`` against the server with ``token``; its stdout (it must succeed)."""
    from typer.testing import CliRunner

    from suanli.cli.main import app as cli

    result = CliRunner().invoke(cli, [*args, "--server", srv.url, "--token", token])
    assert result.exit_code == 0, (result.exit_code, result.output)
    return str(result.stdout)


def wait_for(what: str, probe: Any) -> Any:
    """``probe()``'s first truthy answer, polled until ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.05)


def federation(tmp_path: Path, members: list[tuple[str, str, str]]) -> Path:
    """A federation file of (name, url, admin token file) members, H100s at $10 an hour."""
    rows = "".join(f"  - name: {n}\n    url: {u}\n    token_file: {t}\n    prices: {{H100: 10.0}}\n"
                   for n, u, t in members)  # fmt: skip
    path = tmp_path / "federation.yaml"
    path.write_text("members:\n" + rows)
    return path
