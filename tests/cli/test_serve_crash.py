"""Crash safety: ``kill -9`` of ``suanli serve`` while jobs run and submissions arrive.

The server runs as its own process (``python -m suanli.cli.main serve``) with two declared
GPUs and a price book. Jobs are started, a client keeps submitting, and the server is killed
with SIGKILL; a new server is started on the same state. Then:

- every submission the server acknowledged (answered 201) is in the store;
- no GPU share is claimed twice: per GPU, the claims add up to the GPU's ``used_milli``,
  never more than one GPU (the database's own constraint), and both reach zero at the end;
- the jobs that were running are adopted (they finish in their first attempt);
- the ledger holds exactly the usage recomputed from the attempts table, and the charges
  of that usage.
Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pg import BACKENDS, postgres_server, store_location  # noqa: F401  (postgres_server: a fixture)
from suanli.backends.inventory import declared
from suanli.control.loop import ControlConfig
from suanli.control.metering import recomputed_usage
from suanli.metering.prices import load_price_book
from suanli.metering.rating import rate
from suanli.sim.engine import PolicySet
from suanli.store import entries, open_store, read_usage
from suanli.store import jobs as js
from tasks import TASK_PY

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "examples" / "prices.yaml"
DEADLINE_S = 60.0
MAX_SUBMISSIONS = 400  # a bound on the jobs to run afterwards


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(state: Path, db: str, port: int) -> subprocess.Popen[bytes]:
    args = [
        sys.executable, "-m", "suanli.cli.main", "serve", "--state-dir", str(state),
        "--db", db, "--port", str(port), "--gpus", "2", "--gpu-model", "H100",
        "--node-name", "crash-node", "--interval", "0.1", "--prices", str(PRICES),
    ]  # fmt: skip
    log = open(state.parent / f"serve-{port}.log", "ab")  # noqa: SIM115 - kept by the child
    return subprocess.Popen(args, stdout=log, stderr=log, cwd=ROOT)


def wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.1)


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_location(request, tmp_path) as where:
        yield where


def gpu_accounts_agree(db: str) -> dict[tuple[str, int], int]:
    store = open_store(db)
    try:
        with store.read() as snapshot:  # both at one instant, while the server runs
            claimed = js.claims(snapshot)
            used = {(g.node, g.idx): g.used_milli for _, gs in js.list_nodes(snapshot) for g in gs}
    finally:
        store.close()
    for key, milli in used.items():
        assert claimed.get(key, 0) == milli <= 1000, (key, claimed, used)
    return used


def test_kill_9_loses_no_acknowledged_job_and_double_allocates_nothing(
    tmp_path: Path, db: str
) -> None:
    state = tmp_path / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve(state, db, port)
    try:
        wait_healthy(url, proc)
        token = (state / "admin.token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        c = httpx.Client(base_url=url, headers=headers, timeout=5)
        long_job = {"command": [TASK_PY, "-c", "import time; time.sleep(4)"],
                    "gpus": 1, "tenant": "lab"}  # fmt: skip
        running = [c.post("/v1/jobs", json=long_job).json()["id"] for _ in range(2)]
        deadline = time.monotonic() + DEADLINE_S
        while {c.get(f"/v1/jobs/{j}").json()["job"]["state"] for j in running} != {"running"}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        acknowledged: list[str] = []
        refused: list[int] = []
        stop = threading.Event()

        def submitter() -> None:
            short: dict[str, Any] = {"command": ["true"], "gpus": 0.5, "tenant": "lab"}
            with httpx.Client(base_url=url, headers=headers, timeout=2) as sc:
                while not stop.is_set() and len(acknowledged) < MAX_SUBMISSIONS:
                    try:
                        r = sc.post("/v1/jobs", json=short)
                    except httpx.HTTPError:
                        refused.append(1)  # the server is down: not acknowledged
                        continue
                    if r.status_code == 201:
                        acknowledged.append(r.json()["id"])
                    time.sleep(0.005)  # paced, so that submissions still arrive at the kill

        t = threading.Thread(target=submitter)
        t.start()
        time.sleep(0.8)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(0.3)
        stop.set()
        t.join()
        assert acknowledged, "no submission was acknowledged before the kill"
        assert refused, "the submissions stopped before the kill"
        gpu_accounts_agree(db)
        # Restart on the same state.
        proc = serve(state, db, port)
        wait_healthy(url, proc)
        for job_id in acknowledged:
            assert c.get(f"/v1/jobs/{job_id}").status_code == 200, job_id
        ids = running + acknowledged
        deadline = time.monotonic() + DEADLINE_S
        while True:
            states = {j: c.get(f"/v1/jobs/{j}").json()["job"] for j in ids}
            gpu_accounts_agree(db)
            if all(s["state"] == "succeeded" for s in states.values()):
                break
            bad = {j: s["state"] for j, s in states.items() if s["state"] in js.FINAL_STATES
                   and s["state"] != "succeeded"}  # fmt: skip
            assert not bad, bad
            assert time.monotonic() < deadline, {j: s["state"] for j, s in states.items()}
            time.sleep(0.1)
        # The running jobs were adopted, not rerun.
        assert [states[j]["attempts"] for j in running] == [1, 1]
        # Wait for the metering of the last attempts, then compare with the attempts.
        time.sleep(0.5)
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert set(gpu_accounts_agree(db).values()) == {0}
    config = ControlConfig(
        cluster=declared(2, "H100", node_name="crash-node").cluster("local"),
        policy=PolicySet.parse("fifo+best-fit"),
    )
    store = open_store(db)
    try:
        want = sorted(recomputed_usage(store, config), key=lambda r: r.key)
        got = sorted(read_usage(store), key=lambda r: r.key)
        assert got == want
        assert {r.job_id for r in got} >= set(ids)
        charged = sum((e.amount for e in entries(store)), start=0)
        assert charged == sum((x.amount for x in rate(want, load_price_book(PRICES))), start=0)
    finally:
        store.close()
    assert os.path.exists(state / "runs")
