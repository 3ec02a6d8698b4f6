"""``POST /v1/what-if`` (Slurm's ``sbatch --test-only``): when a job would start if it were
submitted now, answered by the scheduler's own plan, through the real server on SQLite and
PostgreSQL with a plain user's token. Nothing is ever queued, and every check a submission
gets refuses what it would refuse."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import httpx

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, hold_gpu, run_cli, start, submit, tenant_token, wait_state

db_location = location_fixture()

HOUR_MS = 3_600_000


def ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def test_what_if_says_when_a_job_would_start_and_queues_nothing(
    tmp_path: Path, db_location: str
) -> None:
    srv = start(tmp_path / "state", db_location, gpus=1)
    try:
        user = tenant_token(srv, "vision")
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "max_runtime": 600}
        with srv.client(user) as c:
            before = round(time.time() * 1000)
            r = c.post("/v1/what-if", json=spec)
            assert r.status_code == 200, r.text
            idle = r.json()
            assert idle["tenant"] == "vision" and idle["queue"] == "vision"
            assert idle["room_now"] is True and idle["pending_jobs"] == 0 and idle["load"] == 0
            p50 = ms(idle["start_estimate"]["p50"])
            assert before - 1000 <= p50 <= round(time.time() * 1000) + 1000  # at once
            assert c.get("/v1/jobs").json()["jobs"] == []  # nothing was queued

            # The only GPU held by a job of an hour: no room now, and a start about an hour on.
            long = hold_gpu(c, 60, max_runtime=3600)
            busy = c.post("/v1/what-if", json=spec).json()
            assert busy["room_now"] is False and busy["load"] == 1.0
            now = round(time.time() * 1000)
            assert now + HOUR_MS // 2 <= ms(busy["start_estimate"]["p50"]) <= now + 2 * HOUR_MS
            assert [j["id"] for j in c.get("/v1/jobs").json()["jobs"]] == [long]

            # A hostile tenant's what-ifs are refused as its submissions would be.
            refused = {
                "another tenant": ({**spec, "tenant": "audio"}, 403),
                "a NUL": ({**spec, "command": [PY, "-c", "pass\u0000"]}, 422),
                "a job no node could hold": ({**spec, "gpus": 64}, 422),
                "a routing decision": ({**spec, "routing": {"member": "x", "router": "r",
                                                            "why": "w"}}, 403),  # fmt: skip
                "no command": ({"gpus": 1}, 422),
            }
            for what, (body, status) in refused.items():
                got = c.post("/v1/what-if", json=body)
                assert got.status_code == status, (what, got.text)
            assert "refused" in c.post("/v1/what-if", json={**spec, "gpus": 64}).json()["error"]
            assert httpx.post(f"{srv.url}/v1/what-if", json=spec).status_code == 401
            assert [j["id"] for j in c.get("/v1/jobs").json()["jobs"]] == [long]
            c.post(f"/v1/jobs/{long}/cancel")

        # The command line: suanli submit --test-only says the same and queues nothing.
        spec_file = tmp_path / "job.yaml"
        spec_file.write_text(f"command: [{PY!r}, -c, pass]\ngpus: 1\nmax_runtime: 600\n")
        said = run_cli(srv, user, "submit", str(spec_file), "--test-only")
        assert "would start" in said and "nothing was queued" in said
        with srv.client(user) as c:
            assert [j["id"] for j in c.get("/v1/jobs").json()["jobs"]] == [long]
    finally:
        srv.stop()


def test_what_ifs_are_limited_per_tenant_apart_from_submissions(tmp_path: Path) -> None:
    """A plain user's token cannot make the scheduler plan without end: past its tenant's
    burst its what-ifs are 429, in a bucket apart from its submissions (which still go in),
    and another tenant's are untouched."""
    srv = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=1, limits=(1.0, 3, None))
    try:
        spec = {"command": [PY, "-c", "pass"], "gpus": 1}
        with srv.client(tenant_token(srv, "vision")) as c:
            codes = [c.post("/v1/what-if", json=spec).status_code for _ in range(6)]
            assert codes[:3] == [200, 200, 200] and 429 in codes[3:], codes
            late = c.post("/v1/what-if", json=spec)
            assert late.status_code == 429
            assert "asks when a job would start faster than 1 what-ifs/s" in late.json()["error"]
            assert int(late.headers["Retry-After"]) >= 1
            assert c.post("/v1/jobs", json=spec).status_code == 201  # its own bucket
        with srv.client(tenant_token(srv, "audio")) as other:
            assert other.post("/v1/what-if", json=spec).status_code == 200
    finally:
        srv.stop()


def test_the_answer_holds_against_what_then_happens(tmp_path: Path) -> None:
    """Against the real run: the GPU is held by a job that runs 3 s and may run at most
    8 s; a what-if for a job behind it says when it would start; submitted at once, the job
    is admitted no sooner than the holder ended, and no later than the P90 said (the plan
    counts the holder at its maximum runtime; 2 s allowed for the control plane's own
    launch and exit detection, which no plan of runtimes holds)."""
    srv = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=1)
    try:
        with srv.client(tenant_token(srv, "vision")) as c:
            holder = hold_gpu(c, 3, max_runtime=8)
            spec = {"command": [PY, "-c", "pass"], "gpus": 1, "max_runtime": 4}
            said = c.post("/v1/what-if", json=spec).json()
            assert said["room_now"] is False
            job = submit(c, **spec)
            assert wait_state(c, job, "succeeded")["state"] == "succeeded"
            (ran,) = c.get(f"/v1/jobs/{job}").json()["attempts"]
            (held,) = c.get(f"/v1/jobs/{holder}").json()["attempts"]
            admitted = ms(ran["admitted_at"])
            assert admitted <= ms(said["start_estimate"]["p90"]) + 2000
            assert admitted >= ms(held["ended_at"]) - 1000
    finally:
        srv.stop()


def test_a_loop_that_runs_no_passes_is_503_at_once(tmp_path: Path) -> None:
    """While the loop runs no passes (here: marked failed, as a loop that died is), nothing
    would answer: 503 at once with the loop's state, not a wait for a pass that never comes;
    once it runs again, what-ifs are answered."""
    srv = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=1)
    try:
        spec = {"command": [PY, "-c", "pass"], "gpus": 1}
        health = srv.server.controller.health
        with srv.client(tenant_token(srv, "vision")) as c:
            health.state, health.error = "failed", "RuntimeError: boom"
            t0 = time.monotonic()
            r = c.post("/v1/what-if", json=spec)
            assert r.status_code == 503 and time.monotonic() - t0 < 5
            assert "the scheduler loop is failed: RuntimeError: boom" in r.json()["error"]
            health.state, health.error = "running", None
            assert c.post("/v1/what-if", json=spec).status_code == 200
    finally:
        srv.stop()
