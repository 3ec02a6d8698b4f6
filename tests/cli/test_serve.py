"""``suanli serve`` end to end: the real server on a loopback port, real processes.

The server is built as ``suanli serve`` builds it (``cli.serve.build_server``) with two
declared (virtual) GPUs, since this machine has none: jobs see the GPU indices they were
given, which is what is checked. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pg import BACKENDS, postgres_server, store_location  # noqa: F401  (postgres_server: a fixture)
from serving import DEADLINE_S, PY, Running, logs, start, submit, user_token, wait_state
from tasks import open_dir


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_location(request, tmp_path) as where:
        yield where


@pytest.fixture
def srv(tmp_path: Path, db: str) -> Iterator[Running]:
    r = start(tmp_path / "state", db, preempt=True, min_runtime=0)
    yield r
    r.stop()


def test_a_job_sees_the_gpus_it_was_given(srv: Running) -> None:
    with srv.client() as c:
        show = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['SUANLI_JOB_ID'])"
        whole = submit(c, command=[PY, "-c", show], gpus=2, tenant="lab")
        done = wait_state(c, whole, "succeeded", "failed")
        assert done["state"] == "succeeded" and done["exit_code"] == 0
        assert logs(c, whole).split() == ["0,1", whole]
        share = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'])"
        half = submit(c, command=[PY, "-c", share], gpus=0.5, gpu_memory="20G", tenant="lab")
        assert wait_state(c, half, "succeeded", "failed")["state"] == "succeeded"
        gpu, pct = logs(c, half).split()
        assert gpu in ("0", "1") and pct == "50"
        nodes = c.get("/v1/nodes").json()["nodes"]
        assert sum(g["used_milli"] for n in nodes for g in n["gpus"]) == 0
        metrics = c.get("/metrics").text
        assert 'suanli_gpus{model="H100"} 2.0' in metrics
        assert 'suanli_admissions_total{queue="lab"} 2.0' in metrics
        assert 'suanli_jobs{queue="lab",state="succeeded"} 2.0' in metrics
        assert "suanli_scheduling_cycle_seconds_count" in metrics


def test_a_job_without_a_workdir_runs_in_scratch_removed_at_its_end(srv: Running) -> None:
    with srv.client() as c:
        job = submit(c, command=[PY, "-c", "import os; print(os.getcwd())"], tenant="lab")
        assert wait_state(c, job, "succeeded")["state"] == "succeeded"
        where = Path(logs(c, job).strip())
        state = srv.state.resolve()
        assert state not in where.parents  # never inside the state directory
        deadline = time.monotonic() + DEADLINE_S
        while where.exists():
            assert time.monotonic() < deadline, f"{where} was not removed"
            time.sleep(0.05)


def test_cancel_and_max_runtime(srv: Running) -> None:
    with srv.client() as c:
        sleeper = submit(c, command=["sleep", "60"], gpus=1, tenant="lab", grace=1)
        wait_state(c, sleeper, "running")
        assert c.post(f"/v1/jobs/{sleeper}/cancel").status_code == 202
        assert wait_state(c, sleeper, "cancelled", "failed")["state"] == "cancelled"
        limited = submit(c, command=["sleep", "60"], gpus=1, tenant="lab", max_runtime=1, grace=1)
        job = wait_state(c, limited, "failed", "succeeded")
        assert job["state"] == "failed" and "max runtime" in job["reason"]


CHECKPOINTED = """
import os, signal, sys, time
ckpt = os.path.join(os.environ["SUANLI_CHECKPOINT_DIR"], "step")
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print("attempt", os.environ["SUANLI_ATTEMPT"], "resumes at", step, flush=True)
def save(*_):
    open(ckpt, "w").write(str(step)); sys.exit(0)
signal.signal(signal.SIGTERM, save)
while step < 30:
    step += 1; time.sleep(0.05)
    if step == 10: open(ckpt, "w").write(str(step))
print("done at", step, flush=True)
"""


def test_a_high_job_preempts_a_spot_job_which_resumes_from_its_checkpoint(srv: Running) -> None:
    with open_dir() as ckpt, srv.client() as c:
        spot = submit(
            c,
            command=[PY, "-c", CHECKPOINTED.replace("step < 30", "step < 10**9")],
            gpus=2,
            tenant="lab",
            priority_class="spot",
            checkpoint_dir=str(ckpt),
        )
        wait_state(c, spot, "running")
        deadline = time.monotonic() + DEADLINE_S
        while not (ckpt / "step").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        high = submit(
            c, command=[PY, "-c", "print('high')"], gpus=2, tenant="lab", priority_class="high"
        )
        assert wait_state(c, high, "succeeded", "failed")["state"] == "succeeded"
        detail = c.get(f"/v1/jobs/{spot}").json()
        assert detail["attempts"][0]["outcome"] == "preempted"
        assert "preempted" in [e["kind"] for e in detail["history"]]
        job = wait_state(c, spot, "running")
        assert job["attempts"] == 2
        deadline = time.monotonic() + DEADLINE_S
        while "resumes at" not in logs(c, spot, attempt=2):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        saved = int(logs(c, spot, attempt=2).split()[-1])
        assert saved >= 10  # resumed from the checkpoint written on SIGTERM
        c.post(f"/v1/jobs/{spot}/cancel")
        wait_state(c, spot, "cancelled")


def test_two_tenants_cannot_see_each_other(srv: Running) -> None:
    with srv.client() as admin:
        tokens = {}
        for tenant in ("vision", "nlp"):
            r = admin.post(
                "/v1/tokens",
                json={"name": tenant, "role": "user", "tenant": tenant, "user": f"{tenant}-ana"},
            )
            assert r.status_code == 201, r.text
            tokens[tenant] = r.json()["token"]
    with srv.client(tokens["vision"]) as vision, srv.client(tokens["nlp"]) as nlp:
        mine = submit(vision, command=["true"], gpus=0)
        assert nlp.get(f"/v1/jobs/{mine}").status_code == 404
        # Exactly what a job that does not exist gets.
        assert nlp.get("/v1/jobs/999999").json() == {"error": "no job '999999'", "fields": []}
        assert nlp.get(f"/v1/jobs/{mine}").json() == {"error": f"no job '{mine}'", "fields": []}
        assert nlp.post(f"/v1/jobs/{mine}/cancel").status_code == 404
        assert nlp.get(f"/v1/jobs/{mine}/logs").status_code == 404
        assert [j["id"] for j in nlp.get("/v1/jobs").json()["jobs"]] == []
        assert [j["id"] for j in vision.get("/v1/jobs").json()["jobs"]] == [mine]
        assert wait_state(vision, mine, "succeeded")["tenant"] == "vision"


LIMITS = """\
queues:
  - {name: lab, org: lab, nominal: {gpu: 1}}
admission:
  user-limit:
    - {max_jobs: 1, max_gpus: 1}
"""


def test_per_user_limits_and_refusals_through_the_server(tmp_path: Path, db: str) -> None:
    """With a plain user's token: a job its queue can never admit, or larger than its user's
    limit, is refused with the reason the simulator gives; a second job of a user at their
    limit waits (why: the limit), while another user's job of the same queue is not held
    back by it."""
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(LIMITS.replace("nominal: {gpu: 1}", "nominal: {gpu: 2}"))
    r = start(tmp_path / "state", db, quotas=quotas)
    try:
        with r.client() as admin:
            tokens = {}
            for user in ("ana", "bo"):
                made = admin.post(
                    "/v1/tokens",
                    json={"name": user, "role": "user", "tenant": "lab", "user": user},
                )
                assert made.status_code == 201, made.text
                tokens[user] = made.json()["token"]
        with r.client(tokens["ana"]) as ana, r.client(tokens["bo"]) as bo:
            big = ana.post("/v1/jobs", json={"command": ["true"], "gpus": 2})
            assert big.status_code == 422, big.text
            assert big.json()["error"] == (
                "refused: the job can never be admitted: user ana may hold at most 1 GPUs "
                "(per-user limit), the job asks 2"
            )
            # A user cannot charge another user's limit: the spec has no say in who submits.
            posing = ana.post("/v1/jobs", json={"command": ["true"], "gpus": 1, "user": "bo"})
            assert posing.status_code == 422, posing.text
            first = submit(ana, command=["sleep", "30"], gpus=1, grace=1)
            wait_state(ana, first, "running")
            second = submit(ana, command=["true"], gpus=1)
            other = submit(bo, command=["true"], gpus=1)
            assert wait_state(bo, other, "succeeded")["state"] == "succeeded"
            deadline = time.monotonic() + DEADLINE_S
            while True:
                job = ana.get(f"/v1/jobs/{second}").json()["job"]
                if job["reason"]:
                    break
                assert time.monotonic() < deadline, job
                time.sleep(0.05)
            assert job["state"] == "pending"
            assert job["reason"] == (
                "per-user limit: user ana holds 1 of at most 1 GPUs, the job needs 1 more"
            )
            assert ana.post(f"/v1/jobs/{first}/cancel").status_code in (200, 202)
            assert wait_state(ana, second, "succeeded")["state"] == "succeeded"
    finally:
        r.stop()


def test_a_job_its_queue_can_never_admit_is_refused_at_submission(tmp_path: Path, db: str) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(LIMITS.replace("max_jobs: 1, max_gpus: 1", "max_jobs: 5"))
    r = start(tmp_path / "state", db, quotas=quotas)
    try:
        with r.client() as admin:
            huge = admin.post("/v1/jobs", json={"command": ["true"], "gpus": 2, "tenant": "lab"})
            assert huge.status_code == 422, huge.text
            assert huge.json()["error"] == (
                "refused: the job can never be admitted: queue lab can never hold 2 GPUs "
                "of gpu (its most: 1)"
            )
            assert admin.get("/v1/jobs").json()["jobs"] == []  # nothing stored for it
    finally:
        r.stop()


def test_a_waiting_jobs_checkpoint_is_read_ahead_and_a_hostile_one_reads_nothing_else(
    srv: Running,
) -> None:
    """Pre-staging through the real server, as a plain user: a job expected to start within
    minutes has its checkpoint read ahead, but only the regular file in it; a FIFO (which
    would block a reader) and a link to a file outside are not opened, and the server goes
    on answering. Another tenant cannot see that it happened."""
    with srv.client() as admin:
        mine = user_token(admin)
        r = admin.post("/v1/tokens", json={"name": "bob", "role": "user", "tenant": "nlp",
                                           "user": "bob"})  # fmt: skip
        assert r.status_code == 201, r.text
        theirs = r.json()["token"]
    with open_dir() as ckpt, srv.client(mine) as c, srv.client(theirs) as other:
        (ckpt / "model.pt").write_bytes(b"w" * 65536)
        os.mkfifo(ckpt / "pipe")
        (ckpt / "elsewhere").symlink_to("/etc/passwd")
        busy = submit(c, command=[PY, "-c", "import time; time.sleep(60)"], gpus=2, estimate=20)
        wait_state(c, busy, "running")
        waiting = submit(c, command=["true"], gpus=2, estimate=10, checkpoint_dir=str(ckpt))
        deadline = time.monotonic() + DEADLINE_S
        while True:
            history = c.get(f"/v1/jobs/{waiting}").json()["history"]
            said = [e["detail"] for e in history if e["kind"] == "prepared"]
            if said:
                break
            assert time.monotonic() < deadline, history
            time.sleep(0.1)
        assert said == ["expected to start soon; 1 checkpoint file(s) read ahead"]
        assert other.get(f"/v1/jobs/{waiting}").status_code == 404
        for j in (waiting, busy):
            assert c.post(f"/v1/jobs/{j}/cancel").status_code in (200, 202)
            wait_state(c, j, "cancelled")
