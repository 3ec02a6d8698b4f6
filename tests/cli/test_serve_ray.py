"""``suanli serve --backend ray`` through the real server, against a real Ray cluster.

The cluster (``ray_cluster``, tests/ray_cluster.py) is a head and two worker nodes, ``node-a``
and ``node-b``, of four GPUs each: declared to Ray, since there are none here; the tasks only
read ``CUDA_VISIBLE_DEVICES``. Each node has its own ``TMPDIR``; run directories, logs and
checkpoints lie on the shared path (``--shared-dir``), which here is a directory of this
host that every node sees, as a mount would be on a real cluster.

Everything goes through the HTTP API with a plain user's token where a tenant would act.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine_scenarios as scenarios
import ray_cluster as rc
import serving
from serving import PY, Running, logs, start, submit, submit_in_outage, user_token, wait_state
from suanli.backends.base import rendezvous_port
from tasks import CHECKPOINTED, ELASTIC_WORKER, RENDEZVOUS_WORKER, told

DEADLINE_S = 90.0  # Ray starts a worker process per task: seconds on a loaded 2-core host


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[rc.RayTestCluster]:
    yield from rc.running()


def wait(c: httpx.Client, job: str, *states: str) -> dict[str, Any]:
    return wait_state(c, job, *states, deadline_s=DEADLINE_S)


def wait_log(c: httpx.Client, job: str, text: str, **params: Any) -> str:
    return serving.wait_log(c, job, text, DEADLINE_S, **params)


@pytest.fixture
def shared(ray_cluster: Any) -> Path:
    path = Path(ray_cluster.base) / f"shared-{os.urandom(4).hex()}"
    path.mkdir()
    path.chmod(0o755)
    return path


@pytest.fixture
def srv(tmp_path: Path, ray_cluster: Any, shared: Path) -> Iterator[Running]:
    r = start(
        tmp_path / "state", str(tmp_path / "suanli.db"), engine="ray",
        ray_address=ray_cluster.address, shared_dir=shared, preempt=True, min_runtime=0,
        inventory_interval=0.5,
    )  # fmt: skip
    try:
        yield r
    finally:
        r.stop()


def test_the_inventory_is_the_ray_clusters(srv: Running) -> None:
    with srv.client() as c:
        nodes = {n["name"]: n for n in c.get("/v1/nodes").json()["nodes"]}
        for name in ("node-a", "node-b"):
            assert [g["model"] for g in nodes[name]["gpus"]] == ["H100"] * 4
            assert nodes[name]["source"] == "ray" and nodes[name]["healthy"]
        assert 'suanli_gpus{model="H100"} 8.0' in c.get("/metrics").text


def test_a_gang_spreads_over_two_nodes_and_meets_at_rank_0(srv: Running) -> None:
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        job = submit(c, command=[PY, "-c", RENDEZVOUS_WORKER], tasks=2, gpus=4, env={"RANK": "9"})
        done = wait(c, job, "succeeded", "failed")
        out = [logs(c, job, task=t) for t in (0, 1)]
        assert done["state"] == "succeeded", (done, out, logs(c, job, task=0, stream="stderr"))
        env = [told(o) for o in out]
        placed = admin.get(f"/v1/jobs/{job}").json()["attempts"][0]["placement"]
        assert sorted(t["node"] for t in placed) == ["node-a", "node-b"]
        for rank, e in enumerate(env):
            assert e["WORLD_SIZE"] == "2" and e["RANK"] == str(rank)  # the user's 9 lost
            assert e["LOCAL_WORLD_SIZE"] == "1" and e["LOCAL_RANK"] == "0"  # one per node
            assert e["MASTER_PORT"] == str(rendezvous_port(job, 1))
            assert e["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
        assert env[0]["MASTER_ADDR"] == env[1]["MASTER_ADDR"] != ""
        # Each task worked in a scratch directory of its own node, not of the control plane.
        rank_node = {int(t["task"]): t["node"] for t in placed}
        for rank in range(2):
            assert env[rank]["TMPDIR"].endswith(f"tmp-{rank_node[rank]}")
            assert env[rank]["CWD"].startswith(env[rank]["TMPDIR"])
        assert "rank 0 heard from rank 1" in out[0] and "rank 1 reached rank 0" in out[1]


def test_a_gang_stands_or_falls_together_across_nodes(srv: Running) -> None:
    """Rank 1 fails on its node: rank 0, on the other node, is stopped with the job's signal
    and the job fails with rank 1's exit code."""
    scenarios.gang_stands_or_falls_together(srv, DEADLINE_S)


def test_cancel_and_max_runtime_on_ray(srv: Running) -> None:
    scenarios.cancel_and_max_runtime(srv, DEADLINE_S)


def test_a_checkpoint_dir_off_the_shared_path_is_refused(srv: Running, tmp_path: Path) -> None:
    with srv.client(user_token(srv.client())) as c:
        r = c.post("/v1/jobs", json={"command": ["true"], "checkpoint_dir": str(tmp_path)})
        assert r.status_code == 422 and "shared path" in r.text, r.text


def test_a_spot_gang_preempted_by_a_high_job_resumes_from_its_checkpoint(
    srv: Running, shared: Path
) -> None:
    scenarios.spot_gang_resumes_after_preemption(srv, shared, DEADLINE_S)


def test_a_killed_raylet_loses_its_attempts_which_are_requeued(
    srv: Running, ray_cluster: Any, shared: Path
) -> None:
    """A third node, of two A100s, joins: a job that only it can hold, refused before, is
    accepted and lands there (a second GPU model in the cluster); the node's raylet is
    killed: the attempt is lost, the node unhealthy, the job requeued and resumed on another
    node from its checkpoint (the job accepts H100s too)."""
    ckpt = shared / "ckpt-c"
    ckpt.mkdir()
    ckpt.chmod(0o777)
    only_a100 = {"command": ["true"], "gpus": 2, "gpu_models": ["A100"]}
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        refused = c.post("/v1/jobs", json=only_a100)
        assert refused.status_code == 422 and "never" in refused.text, refused.text
        ray_cluster.add("node-c", gpus=2, model="A100")
        deadline = time.monotonic() + DEADLINE_S
        while "node-c" not in {n["name"] for n in admin.get("/v1/nodes").json()["nodes"]}:
            assert time.monotonic() < deadline, "node-c never joined the inventory"
            time.sleep(0.2)
        assert wait(c, submit(c, **only_a100), "succeeded")["state"] == "succeeded"
        job = submit(c, command=[PY, "-c", CHECKPOINTED],
                     gpus=2, gpu_models=["A100", "H100"], checkpoint_dir=str(ckpt))  # fmt: skip
        wait(c, job, "running")
        first = admin.get(f"/v1/jobs/{job}").json()["attempts"][0]
        assert [t["node"] for t in first["placement"]] == ["node-c"]
        while not (ckpt / "step").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ray_cluster.kill("node-c")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            attempts = admin.get(f"/v1/jobs/{job}").json()["attempts"]
            if len(attempts) >= 2 and attempts[0]["outcome"] == "lost":
                break
            assert time.monotonic() < deadline, attempts
            time.sleep(0.2)
        assert [t["node"] for t in attempts[1]["placement"]] != ["node-c"]
        out = wait_log(c, job, "resumes at", attempt=2)
        assert int(out.split()[-1]) >= 10
        nodes = {n["name"]: n for n in admin.get("/v1/nodes").json()["nodes"]}
        assert not nodes["node-c"]["healthy"]
        c.post(f"/v1/jobs/{job}/cancel")
        wait(c, job, "cancelled")


def test_an_elastic_job_grows_onto_the_other_node_and_shrinks_for_a_waiting_job(
    srv: Running,
) -> None:
    """The resize contract across Ray nodes: started on one node (4 GPUs), grown onto the
    other; a job that needs those 4 GPUs makes it shrink (rank 1 stopped), and the survivor,
    on the other node, is told through its node-local elastic file and SIGUSR1."""
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        e = submit(c, command=[PY, "-c", ELASTIC_WORKER], gpus=4, tasks=1, min_workers=1,
                   max_workers=2, grace=5)  # fmt: skip
        wait(c, e, "running")
        out0 = wait_log(c, e, "world=2 rank=0", task=0)
        out1 = wait_log(c, e, "start world=2 rank=1", task=1)
        placed = admin.get(f"/v1/jobs/{e}").json()["attempts"][0]["placement"]
        nodes = {int(t["task"]): t["node"] for t in placed}
        assert sorted(nodes.values()) == ["node-a", "node-b"]
        other = submit(c, command=[PY, "-c", "print('took the GPUs')"], gpus=4)
        assert wait(c, other, "succeeded", "failed")["state"] == "succeeded"
        assert "stopped" in wait_log(c, e, "stopped", task=1)
        out0 = wait_log(c, e, "resized world=1 rank=0", task=0)
        assert out0 and out1
        c.post(f"/v1/jobs/{e}/cancel")
        wait(c, e, "cancelled")


def test_kill_9_of_the_control_plane_and_the_restart_adopts_what_runs(
    tmp_path: Path, ray_cluster: Any, shared: Path
) -> None:
    """``suanli serve --backend ray`` as its own process; killed with SIGKILL while a job
    runs on Ray; a new server on the same state adopts it: one attempt, and it succeeds."""
    scenarios.kill_9_and_adopt(
        tmp_path, shared, ["--backend", "ray", "--ray-address", ray_cluster.address], DEADLINE_S
    )


def test_the_head_down_and_back_under_a_submission_load_loses_and_repeats_nothing(
    srv: Running, ray_cluster: Any, shared: Path
) -> None:
    """The head's GCS killed while a job runs and 16 more are submitted by a plain user:
    every submission is accepted and waits with the reason; the running job is not taken
    for lost; once the GCS is back, it is adopted where it runs and every job runs exactly
    once (one attempt each, one run directory each)."""
    if ray_cluster.redis is None:
        pytest.skip("redis-server not installed (Debian package redis-server): the head "
                    "cannot keep its actors across a GCS restart")  # fmt: skip
    marker = shared / "go"
    waits = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.1)\nprint('went')"
    with srv.client(user_token(srv.client())) as c:
        first = submit(c, command=[PY, "-c", waits], gpus=1)
        wait(c, first, "running")
        ray_cluster.gcs_down()
        try:
            time.sleep(6)  # past the backend's 5 s answer time: the cluster is down
            load = submit_in_outage(c, deadline_s=DEADLINE_S)
            assert c.get(f"/v1/jobs/{first}").json()["job"]["state"] == "running"
        finally:
            ray_cluster.gcs_up()
        marker.write_text("")
        done = [wait(c, j, "succeeded", "failed", "lost") for j in [first, *load]]
        assert {d["state"] for d in done} == {"succeeded"}, done
        assert {d["attempts"] for d in done} == {1}
        runs = shared / "runs"
        for j in [first, *load]:
            assert sorted(p.name for p in (runs / j).iterdir()) == ["1"]
            assert logs(c, j).strip() in ("went", "ran")
