"""The defects a hostile tenant found in ``suanli serve``, one test each, through the real
server (loopback port, real processes, a plain user's token where a tenant acts), on SQLite
and PostgreSQL.

Two faults cannot be caused from outside and are injected, as each test says: a backend
whose ``launch`` raises (a launch that fails in an unforeseen way) and a store row written
past the API (a spec stored by an older version, a hand-edited database).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from pg import BACKENDS, postgres_server, store_location  # noqa: F401  (postgres_server: a fixture)
from serving import DEADLINE_S, PY, Running, logs, start, submit, wait_state
from suanli.store import jobs as js
from suanli.store import read_usage
from suanli.store.schema import gpu_claims
from tasks import ROOT

REPO = Path(__file__).resolve().parents[2]
PRICES = REPO / "examples" / "prices.yaml"
BUDGETS = REPO / "examples" / "budgets.yaml"
OK = [PY, "-c", "print('ok')"]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_location(request, tmp_path) as where:
        yield where


@pytest.fixture
def srv(tmp_path: Path, db: str) -> Iterator[Running]:
    r = start(tmp_path / "state", db, reconcile_interval=0.5)
    yield r
    r.stop()


def user_token(r: Running, tenant: str, user: str, role: str = "user") -> str:
    with r.client() as admin:
        made = admin.post(
            "/v1/tokens", json={"name": user, "role": role, "tenant": tenant, "user": user}
        )
        assert made.status_code == 201, made.text
        return str(made.json()["token"])


def runs_normally(c: httpx.Client, **spec: Any) -> None:
    """A plain job still starts and finishes."""
    job = submit(c, command=OK, **spec)
    assert wait_state(c, job, "succeeded", "failed")["state"] == "succeeded"


def used_milli(r: Running) -> int:
    return sum(g.used_milli for _, gs in js.list_nodes(r.server.store) for g in gs)


def refused(r: httpx.Response, status: int, field: str | None = None) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    if field is not None:
        assert field in [f["field"] for f in body["fields"]], body
    return str(body["error"])


# --- 1. one job stops the scheduler ---------------------------------------------------------


def test_1_a_huge_quantity_is_refused_at_the_edge_and_a_bad_stored_job_fails_alone(
    srv: Running,
) -> None:
    token = user_token(srv, "lab", "ana")
    with srv.client(token) as c:
        r = c.post("/v1/jobs", json={"command": OK, "memory": "99999999999999999999T"})
        assert "at most" in refused(r, 422, "memory")
        assert c.get("/v1/jobs").json()["jobs"] == []
        # Past the API (a row an older version stored): the core refuses it with a typed
        # error, the job fails alone and the loop goes on.
        bad = {"command": OK, "memory": 2**62, "tenant": "lab", "queue": "lab"}
        with srv.server.store.begin() as conn:
            (rec,) = js.submit_jobs(conn, [js.NewJob(bad, "lab", "ana", "bad", "lab", "normal")], 1)
        srv.server.wake.set()
        job = wait_state(c, rec.id, "failed")
        assert job["reason"].startswith("refused:"), job
        runs_normally(c)
        assert c.get("/healthz").json() == {"status": "ok"}


def test_1_recovery_fails_a_job_it_cannot_rebuild_and_the_loop_lives(
    tmp_path: Path, db: str
) -> None:
    state = tmp_path / "state"
    r = start(state, db)
    with r.client() as c:
        job = submit(c, command=["sleep", "30"], gpus=2, tenant="lab", grace=1)
        wait_state(c, job, "running")
    r.stop()
    # Past the API: the running job's stored spec is made one the core cannot rebuild.
    with r.server.store.begin() as conn:
        conn.execute(sa.update(js.jobs).where(js.jobs.c.id == job).values(spec='{"command": []}'))
    r.server.store.close()
    r = start(state, db)
    try:
        with r.client() as c:
            failed = wait_state(c, job, "failed")
            assert "internal error while recovering its attempt" in failed["reason"]
            assert c.get("/healthz").json() == {"status": "ok"}
            assert used_milli(r) == 0  # its claims were given back
            runs_normally(c, gpus=2, tenant="lab")  # on the very GPUs it held
    finally:
        r.stop()


def test_1_healthz_reports_a_scheduler_that_cannot_start(tmp_path: Path, db: str) -> None:
    """Injected: recovery fails every time (as with a store that cannot be read)."""
    from suanli.cli.serve import build_server

    server = build_server(tmp_path / "state", db=db, gpus=1, gpu_model="H100")

    def broken() -> None:
        raise RuntimeError("the store cannot be read")

    server.controller.recover = broken  # type: ignore[method-assign]
    loop = threading.Thread(
        target=server.controller.run, args=(server.stop, server.wake, 0.05), daemon=True
    )
    loop.start()
    try:
        with TestClient(server.app) as client:
            deadline = time.monotonic() + DEADLINE_S
            while server.controller.health.failures < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            r = client.get("/healthz")
            assert r.status_code == 503
            assert "recovering its state" in r.json()["error"]
            assert "the store cannot be read" in r.json()["error"]
    finally:
        server.stop.set()
        server.wake.set()
        loop.join(timeout=10)
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_1_serve_exits_non_zero_when_its_loop_stops(tmp_path: Path) -> None:
    """Injected: the loop raises past its own guard (it should never; if it does, the process
    must exit so that a supervisor restarts it, not go on answering without a scheduler)."""
    code = (
        "import sys, suanli.control.loop as loop\n"
        "def stop(self, *a):\n"
        "    raise SystemError('scheduler bug')\n"
        "loop.Controller._run = stop\n"
        "from suanli.cli.main import main\n"
        "sys.argv = ['suanli'] + sys.argv[1:]\n"
        "main()\n"
    )
    args = [sys.executable, "-c", code, "serve", "--state-dir", str(tmp_path / "s"),
            "--gpus", "1", "--gpu-model", "H100", "--port", str(free_port())]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1, done
    assert "the scheduler loop stopped (SystemError: scheduler bug): exiting" in done.stderr


# --- 2. a GPU leaks forever -----------------------------------------------------------------


def test_2_a_failed_launch_gives_its_gpus_back_and_stray_claims_are_reconciled(
    srv: Running,
) -> None:
    token = user_token(srv, "lab", "ana")
    with srv.client(token) as c:
        assert "absolute path" in refused(
            c.post("/v1/jobs", json={"command": OK, "workdir": ""}), 422, "workdir"
        )
        # Injected: the backend's launch raises (an unforeseen failure, once).
        real = srv.server.backend.launch
        calls: list[int] = []

        def failing(spec: Any) -> Any:
            if not calls:
                calls.append(1)
                raise IndexError("injected launch failure")
            return real(spec)

        srv.server.backend.launch = failing
        job = submit(c, command=OK, gpus=2)
        failed = wait_state(c, job, "failed")
        assert "launch failed: IndexError: injected launch failure" in failed["reason"]
        assert used_milli(srv) == 0
        runs_normally(c, gpus=2)  # the same GPUs, at once
        # A claim no live attempt holds (a crash, a bug, a hand edit): released within one
        # reconciliation period, with a record in the job's history.
        with srv.server.store.begin() as conn:
            conn.execute(
                sa.insert(gpu_claims).values(
                    job_id=job, attempt=1, task=0, node=js.list_nodes(conn)[0][0].name,
                    idx=0, milli=1000,
                )
            )  # fmt: skip
        assert used_milli(srv) == 1000
        deadline = time.monotonic() + DEADLINE_S
        while used_milli(srv):
            assert time.monotonic() < deadline, "the stray claim was not released"
            time.sleep(0.05)
        kinds = [e["kind"] for e in c.get(f"/v1/jobs/{job}").json()["history"]]
        assert "reconciled" in kinds
        runs_normally(c, gpus=2)


# --- 3. a job reads the admin token ---------------------------------------------------------


def test_3_a_job_cannot_read_the_control_planes_secrets(srv: Running) -> None:
    token = user_token(srv, "lab", "ana")
    secret = srv.state / "admin.token"
    with srv.client(token) as c:
        inside = c.post("/v1/jobs", json={"command": OK, "workdir": str(srv.state / "runs")})
        assert "state directory" in refused(inside, 422, "workdir")
        if not ROOT:
            pytest.skip(
                "the tests run as an ordinary user: tasks run as that same user (single-user "
                "mode, no isolation from the server's files, as docs/serve.md says)"
            )
        spy = submit(c, command=["sh", "-c", f"id -u; cat {secret}; cat ../../../../admin.token"])
        wait_state(c, spy, "succeeded", "failed")
        out = logs(c, spy) + logs(c, spy, stream="stderr")
        assert out.split()[0] == "65534"  # nobody
        assert srv.admin not in out
        assert "Permission denied" in out or "No such file" in out


# --- 4. a user spends another tenant's quota ------------------------------------------------

TWO_TEAMS = """\
queues:
  - {name: teama, org: a, nominal: {gpu: 1}}
  - {name: teamb, org: b, nominal: {gpu: 1}}
"""


def test_4_a_tenant_submits_only_to_its_own_queues(tmp_path: Path, db: str) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(TWO_TEAMS)
    r = start(tmp_path / "state", db, quotas=quotas)
    try:
        a, b = user_token(r, "a", "ana"), user_token(r, "b", "bo")
        with r.client(a) as ca, r.client(b) as cb:
            steal = ca.post("/v1/jobs", json={"command": ["sleep", "30"], "gpus": 1,
                                              "queue": "teamb"})  # fmt: skip
            assert "does not serve tenant 'a'" in refused(steal, 403, "queue")
            assert cb.get("/v1/jobs").json()["jobs"] == []
            mine = submit(cb, command=OK, gpus=1)
            assert wait_state(cb, mine, "succeeded")["queue"] == "teamb"
            assert [q["name"] for q in cb.get("/v1/queues").json()["queues"]] == ["teamb"]
            own = submit(ca, command=OK, gpus=1)  # no queue named: its org's
            assert wait_state(ca, own, "succeeded")["queue"] == "teama"
    finally:
        r.stop()


# --- 5. billed for downtime -----------------------------------------------------------------


def test_5_an_attempt_that_ended_while_the_server_was_down_is_billed_to_its_exit(
    tmp_path: Path, db: str
) -> None:
    state = tmp_path / "state"
    r = start(state, db, prices=PRICES)
    with r.client() as c:
        job = submit(c, command=["sleep", "1"], gpus=1, tenant="lab")
        wait_state(c, job, "running")
    r.stop()
    time.sleep(4)  # the task exits while nothing watches it
    r = start(state, db, prices=PRICES)
    try:
        with r.client() as c:
            wait_state(c, job, "succeeded")
            (attempt,) = js.job_attempts(r.server.store, job)
            assert attempt.started_ms is not None and attempt.ended_ms is not None
            held_s = (attempt.ended_ms - attempt.started_ms) / 1000
            assert 0.9 <= held_s < 2.5, held_s  # the recorded exit, not the restart (~5 s)
            deadline = time.monotonic() + DEADLINE_S
            while not (usage := [u for u in read_usage(r.server.store) if u.job_id == job]):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert sum(u.end_ms - u.start_ms for u in usage) / 1000 == held_s
    finally:
        r.stop()


# --- 6. files -------------------------------------------------------------------------------


def test_6_the_state_directory_is_private_and_the_database_files_too(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    r = start(state, str(state / "suanli.db"))
    try:
        with r.client() as c:
            runs_normally(c, tenant="lab")
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        files = [p for p in state.iterdir() if p.name.startswith("suanli.db")]
        assert {p.name for p in files} >= {"suanli.db", "suanli.db-wal", "suanli.db-shm"}
        for p in files + [state / "admin.token"]:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    finally:
        r.stop()


# --- 7. metrics -----------------------------------------------------------------------------


def test_7_metrics_pass_promtool_agree_with_nodes_and_show_a_tenant_its_own(srv: Running) -> None:
    ana, bo = user_token(srv, "lab", "ana"), user_token(srv, "other", "bo")
    with srv.client() as admin, srv.client(ana) as c, srv.client(bo) as other:
        made = admin.post("/v1/tokens", json={"name": "prom", "role": "metrics", "user": "prom"})
        assert made.status_code == 201, made.text
        scraper = made.json()["token"]
        job = submit(c, command=["sleep", "30"], gpus=1, grace=1)
        wait_state(c, job, "running")
        submit(other, command=OK)
        # A user cannot make up queue names (without a quota file its queue is its tenant)...
        assert c.post("/v1/jobs", json={"command": OK, "queue": "q1"}).status_code == 403
        # ...and an admin's many queue names stay bounded in the label set.
        for i in range(150):
            admin.post("/v1/jobs", json={"command": OK, "tenant": f"t{i}", "queue": f"q{i}"})
        with srv.client(scraper) as prom:
            text = prom.get("/metrics").text
            assert prom.get("/v1/jobs").status_code == 403  # a scraper reads metrics only
        claimed = used_milli(srv) / 1000
        assert f'suanli_gpus_allocated{{model="H100"}} {claimed}' in text
        assert 'suanli_gpus{model="H100"} 2.0' in text
        queues = {line.split('queue="')[1].split('"')[0]
                  for line in text.splitlines() if line.startswith("suanli_jobs{")}  # fmt: skip
        assert len(queues) <= 101 and {"lab", "other", "_other"} <= queues
        mine = c.get("/metrics").text
        assert 'queue="lab"' in mine and 'queue="other"' not in mine and 'queue="q1"' not in mine
        c.post(f"/v1/jobs/{job}/cancel")
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus): not checked")
    for body in (text, mine):
        check = subprocess.run([promtool, "check", "metrics"], input=body,
                               capture_output=True, text=True)  # fmt: skip
        assert check.returncode == 0 and not check.stdout + check.stderr, check


# --- 8. budgets with prices -----------------------------------------------------------------


def test_8_serve_starts_with_budgets_and_prices(tmp_path: Path, db: str) -> None:
    r = start(tmp_path / "state", db, budgets=BUDGETS, prices=PRICES)
    try:
        with r.client() as c:
            assert c.get("/healthz").json() == {"status": "ok"}
    finally:
        r.stop()


# --- 9. smaller -----------------------------------------------------------------------------


def test_9_smaller_defects(srv: Running) -> None:
    token = user_token(srv, "lab", "ana")
    with srv.client(token) as c, srv.client() as admin:
        assert "boolean" in refused(c.post("/v1/jobs", json={"command": OK, "gpus": True}), 422,
                                    "gpus")  # fmt: skip
        syntax = c.post("/v1/jobs", content=b'{"command": ["x"],,}',
                        headers={"Content-Type": "application/json"})  # fmt: skip
        assert "invalid JSON at character" in refused(syntax, 422, "body")
        assert "state" in refused(c.get("/v1/jobs", params={"state": "bogus"}), 422, "state")
        nul = c.post("/v1/jobs", json={"command": OK, "env": {"FOO": "a\u0000b"}})
        assert "the value of 'FOO'" in refused(nul, 422)
        other = admin.post("/v1/tokens", json={"name": "x", "user": "x", "tenant": "lab"})
        assert other.status_code == 201
        revoke = c.delete(f"/v1/tokens/{other.json()['id']}")
        assert "revoke" in refused(revoke, 403)
        tenanted = admin.post(
            "/v1/tokens", json={"name": "y", "user": "y", "role": "admin", "tenant": "lab"}
        )
        assert "no tenant" in refused(tenanted, 422, "tenant")


# --- 10. a newcomer stumbles ----------------------------------------------------------------


def test_10_a_job_larger_than_the_cluster_is_refused_at_submission(srv: Running) -> None:
    token = user_token(srv, "lab", "ana")
    with srv.client(token) as c:
        big = c.post("/v1/jobs", json={"command": OK, "gpus": 4})
        assert refused(big, 422).startswith("refused: the job can never run on cluster")
        # The refusal says what no node has enough of, not the whole request alone.
        assert "(no node has enough: GPUs: 4 on one node" in refused(big, 422)
        huge = c.post("/v1/jobs", json={"command": OK, "gpus": 1, "gpu_memory": "4T"})
        assert "(no node has enough: GPU memory: 4194304 MiB a GPU, the largest GPU has" in (
            refused(huge, 422)
        )
        assert "mCPU, the largest" not in refused(huge, 422)  # never blames the CPU
        assert c.get("/v1/jobs").json()["jobs"] == []


def test_10_serve_logs_to_its_state_directory_and_says_when_it_is_ready(tmp_path: Path) -> None:
    state, port = tmp_path / "s", free_port()
    args = [sys.executable, "-m", "suanli.cli.main", "serve", "--state-dir", str(state),
            "--gpus", "1", "--gpu-model", "H100", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(2)]
        assert "admin token written to" in lines[0] and "log " in lines[0]
        assert lines[1].strip() == f"suanli serve: ready at http://127.0.0.1:{port}/v1"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        token = (state / "admin.token").read_text().strip()
        r = httpx.post(f"http://127.0.0.1:{port}/v1/jobs", json={"command": OK, "gpus": 9},
                       headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 422
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert out == "" and "Traceback" not in err
    assert (state / "serve.log").exists()


# --- fair use -------------------------------------------------------------------------------


def test_fair_use_limits_submissions_per_tenant(tmp_path: Path, db: str) -> None:
    r = start(tmp_path / "state", db, limits=(1.0, 3, None))
    try:
        ana, bo = user_token(r, "lab", "ana"), user_token(r, "other", "bo")
        with r.client(ana) as c, r.client(bo) as other:
            answers = [c.post("/v1/jobs", json={"command": OK}) for _ in range(5)]
            assert [a.status_code for a in answers[:3]] == [201, 201, 201]
            late = answers[3]
            assert "faster than 1 jobs/s" in refused(late, 429)
            assert int(late.headers["Retry-After"]) >= 1
            assert other.post("/v1/jobs", json={"command": OK}).status_code == 201  # its own
            assert len(c.get("/v1/jobs").json()["jobs"]) == 3  # nothing stored for a 429
    finally:
        r.stop()


def test_fair_use_limits_pending_jobs_per_tenant(tmp_path: Path, db: str) -> None:
    r = start(tmp_path / "state", db, limits=(None, 1, 2))
    try:
        ana = user_token(r, "lab", "ana")
        with r.client(ana) as c:
            holder = submit(c, command=["sleep", "30"], gpus=2, grace=1)
            wait_state(c, holder, "running")
            time.sleep(1.2)  # the pending counts are read from the store once a second
            waiting = [submit(c, command=OK, gpus=2) for _ in range(2)]
            time.sleep(1.2)
            over = c.post("/v1/jobs", json={"command": OK, "gpus": 2})
            assert "pending jobs, the most it may have is 2" in refused(over, 429)
            c.post(f"/v1/jobs/{holder}/cancel")
            for job in waiting:
                assert wait_state(c, job, "succeeded")["state"] == "succeeded"
    finally:
        r.stop()


def test_3_tenants_sharing_the_run_as_user_are_not_isolated_unless_refused(
    tmp_path: Path, db: str
) -> None:
    """Tenants without a user of their own share the ``--run-as`` uid: one reads another's
    files (here its scratch directory, found from its own). ``--isolate-tenants`` refuses
    the jobs of such tenants."""
    if not ROOT:
        pytest.skip("the tests run as an ordinary user: tasks cannot switch users here")
    r = start(tmp_path / "state", db)
    try:
        a, b = user_token(r, "ta", "a"), user_token(r, "tb", "b")
        with r.client(a) as ca, r.client(b) as cb:
            secret = submit(ca, command=["sh", "-c", "echo SECRET-A > s; sleep 20"], grace=1)
            wait_state(ca, secret, "running")
            time.sleep(0.5)
            spy = submit(cb, command=["sh", "-c", f'p=$(pwd); cat "${{p%/*/*/*}}/{secret}/1/0/s"'])
            wait_state(cb, spy, "succeeded", "failed")
            assert "SECRET-A" in logs(cb, spy)  # the same uid: the documented limit
            ca.post(f"/v1/jobs/{secret}/cancel")
    finally:
        r.stop()


def test_3_isolate_tenants_refuses_the_jobs_of_tenants_without_a_user(
    tmp_path: Path, db: str
) -> None:
    if not ROOT:
        pytest.skip("the tests run as an ordinary user: tasks cannot switch users here")
    r = start(tmp_path / "state", db, tenant_users=["ta=nobody"], isolate_tenants=True)
    try:
        a, b = user_token(r, "ta", "a2"), user_token(r, "tb", "b2")
        with r.client(a) as ca, r.client(b) as cb:
            refused_b = cb.post("/v1/jobs", json={"command": OK})
            assert "has no user of its own" in refused(refused_b, 403, "tenant")
            runs_normally(ca)
    finally:
        r.stop()
