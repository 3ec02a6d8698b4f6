"""``suanli serve --backend slurm`` through the real server, against a real Slurm cluster.

The cluster (tests/slurm_cluster.py) is ``slurmctld``, ``slurmdbd`` on MariaDB, and two
``slurmd`` nodes, ``n1`` and ``n2``, of four GPUs each, declared as GRES over stand-in device
files (there are no GPUs here; the tasks only read ``CUDA_VISIBLE_DEVICES``). Run directories,
logs and checkpoints lie on the shared path (``--shared-dir``), which here is a directory of
this host that every node sees, as a mount would be on a real cluster.

Everything goes through the HTTP API with a plain user's token where a tenant would act.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine_scenarios as scenarios
import serving
import slurm_cluster as sc
from serving import PY, Running, logs, start, submit, submit_in_outage, user_token, wait_state
from suanli.backends.base import rendezvous_port
from tasks import CHECKPOINTED, RENDEZVOUS_WORKER, told

DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[sc.SlurmTestCluster]:
    for c in sc.running():
        before = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = c.env["SLURM_CONF"]  # as an admin's shell would have it
        try:
            yield c
        finally:
            if before is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = before


def wait(c: httpx.Client, job: str, *states: str) -> dict[str, Any]:
    return wait_state(c, job, *states, deadline_s=DEADLINE_S)


def wait_log(c: httpx.Client, job: str, text: str, **params: Any) -> str:
    return serving.wait_log(c, job, text, DEADLINE_S, **params)


def accounted(cluster: sc.SlurmTestCluster, part: str, n: int) -> list[str]:
    """The ``n`` lines of Slurm's accounting (``sacct``: JobName, AllocTRES, NodeList) of
    the jobs whose name starts with ``part``, once slurmdbd has them all."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        text = cluster.run("sacct", "-X", "-n", "-P", "-a", "-o", "JobName,AllocTRES,NodeList")
        mine = [line for line in text.splitlines() if line.startswith(part)]
        if len(mine) >= n:
            assert len(mine) == n, mine
            return mine
        assert time.monotonic() < deadline, text
        time.sleep(0.5)


@pytest.fixture
def shared(cluster: sc.SlurmTestCluster) -> Path:
    path = cluster.base / f"shared-{os.urandom(4).hex()}"
    path.mkdir()
    path.chmod(0o755)
    return path


@pytest.fixture
def srv(tmp_path: Path, cluster: sc.SlurmTestCluster, shared: Path) -> Iterator[Running]:
    r = start(
        tmp_path / "state", str(tmp_path / "suanli.db"), engine="slurm", shared_dir=shared,
        slurm_python=PY, preempt=True, min_runtime=0, inventory_interval=0.5,
    )  # fmt: skip
    try:
        yield r
    finally:
        r.stop()


def test_the_inventory_is_the_partitions(srv: Running) -> None:
    with srv.client() as c:
        nodes = {n["name"]: n for n in c.get("/v1/nodes").json()["nodes"]}
        assert sorted(nodes) == ["n1", "n2"]
        for n in nodes.values():
            assert [g["model"] for g in n["gpus"]] == ["H100"] * 4
            assert n["source"] == "slurm" and n["healthy"]
        assert 'suanli_gpus{model="H100"} 8.0' in c.get("/metrics").text


def test_a_gang_spreads_over_two_nodes_and_meets_at_rank_0(
    srv: Running, cluster: sc.SlurmTestCluster
) -> None:
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        job = submit(c, command=[PY, "-c", RENDEZVOUS_WORKER], tasks=2, gpus=4, env={"RANK": "9"})
        done = wait(c, job, "succeeded", "failed")
        out = [logs(c, job, task=t) for t in (0, 1)]
        assert done["state"] == "succeeded", (done, out, logs(c, job, task=0, stream="stderr"))
        env = [told(o) for o in out]
        placed = admin.get(f"/v1/jobs/{job}").json()["attempts"][0]["placement"]
        assert sorted(t["node"] for t in placed) == ["n1", "n2"]
        for rank, e in enumerate(env):
            assert e["WORLD_SIZE"] == "2" and e["RANK"] == str(rank)  # the user's 9 lost
            assert e["LOCAL_WORLD_SIZE"] == "1" and e["LOCAL_RANK"] == "0"  # one per node
            assert e["MASTER_PORT"] == str(rendezvous_port(job, 1))
            assert e["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
            assert e["MASTER_ADDR"] == "127.0.0.1"  # n1's NodeAddr
        assert "rank 0 heard from rank 1" in out[0] and "rank 1 reached rank 0" in out[1]
        # One Slurm job per task, each holding its node's four GPUs in Slurm's accounting.
        mine = accounted(cluster, f"{srv.server.backend.prefix}{job}/1/", 2)
        assert all("gres/gpu=4" in line for line in mine), mine
        assert sorted(line.split("|")[2] for line in mine) == ["n1", "n2"]


def test_a_gang_stands_or_falls_together_across_nodes(srv: Running) -> None:
    scenarios.gang_stands_or_falls_together(srv, DEADLINE_S)


def test_cancel_and_max_runtime_on_slurm(srv: Running) -> None:
    scenarios.cancel_and_max_runtime(srv, DEADLINE_S)


def test_a_spot_gang_preempted_by_a_high_job_resumes_from_its_checkpoint(
    srv: Running, shared: Path
) -> None:
    scenarios.spot_gang_resumes_after_preemption(srv, shared, DEADLINE_S)


def test_a_killed_slurmd_loses_its_attempts_which_are_requeued(
    srv: Running, cluster: sc.SlurmTestCluster, shared: Path
) -> None:
    """n1 dies (its slurmd and its jobs' processes killed): the attempt there is lost, n1
    unhealthy, the job requeued and resumed on n2 from its checkpoint; n1's slurmd comes
    back and n1 is healthy again."""
    ckpt = shared / "ckpt-n1"
    ckpt.mkdir()
    ckpt.chmod(0o777)
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        job = submit(c, command=[PY, "-c", CHECKPOINTED], gpus=4, checkpoint_dir=str(ckpt))
        wait(c, job, "running")
        node = admin.get(f"/v1/jobs/{job}").json()["attempts"][0]["placement"][0]["node"]
        deadline = time.monotonic() + DEADLINE_S
        while not (ckpt / "step").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        cluster.kill_node(node)
        try:
            deadline = time.monotonic() + DEADLINE_S
            while True:
                attempts = admin.get(f"/v1/jobs/{job}").json()["attempts"]
                if len(attempts) >= 2 and attempts[0]["outcome"] == "lost":
                    break
                assert time.monotonic() < deadline, attempts
                time.sleep(0.2)
            assert [t["node"] for t in attempts[1]["placement"]] != [node]
            out = wait_log(c, job, "resumes at", attempt=2)
            assert int(out.split()[-1]) >= 10
            nodes = {n["name"]: n for n in admin.get("/v1/nodes").json()["nodes"]}
            assert not nodes[node]["healthy"]
        finally:
            cluster.start_node(node)
        cluster.wait_node_state(node, ("IDLE", "MIXED", "ALLOCATED"), DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        while not {n["name"]: n for n in admin.get("/v1/nodes").json()["nodes"]}[node]["healthy"]:
            assert time.monotonic() < deadline, f"{node} never healthy again"
            time.sleep(0.2)
        c.post(f"/v1/jobs/{job}/cancel")
        wait(c, job, "cancelled")


def test_kill_9_of_the_control_plane_and_the_restart_adopts_what_runs(
    tmp_path: Path, cluster: sc.SlurmTestCluster, shared: Path
) -> None:
    """``suanli serve --backend slurm`` as its own process; killed with SIGKILL while a job
    runs on Slurm; a new server on the same state adopts it: one attempt, and it succeeds."""
    scenarios.kill_9_and_adopt(
        tmp_path, shared, ["--backend", "slurm", "--slurm-python", PY], DEADLINE_S
    )


def test_slurmctld_down_and_back_under_a_submission_load_loses_and_repeats_nothing(
    srv: Running, cluster: sc.SlurmTestCluster, shared: Path
) -> None:
    """``slurmctld`` killed while two jobs run and 16 more are submitted by a plain user:
    every submission is accepted and waits with the reason; the running jobs are not taken
    for lost. While the controller is down, the node of one of them dies too. Once the
    controller is back, the job still running is adopted, the one whose node died is found
    lost and requeued, and every job runs exactly once to its end (one attempt each, one
    run directory each, one Slurm job each, the requeued one two)."""
    marker = shared / "go"
    waits = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.1)\nprint('went')"
    with srv.client() as admin, srv.client(user_token(srv.client())) as c:
        first = submit(c, command=[PY, "-c", waits], gpus=1)
        wait(c, first, "running")
        doomed = submit(c, command=[PY, "-c", waits], gpus=4)  # the other node: 3 GPUs left
        wait(c, doomed, "running")
        placed = [admin.get(f"/v1/jobs/{j}").json()["attempts"][0]["placement"][0]["node"]
                  for j in (first, doomed)]  # fmt: skip
        assert placed[0] != placed[1], placed
        cluster.stop_controller()
        dead = placed[1]
        try:  # the dead node comes back whatever fails: later tests need both nodes
            try:
                cluster.kill_node(dead)
                # Once the control plane has seen the outage (its next read of Slurm's queue,
                # within a second): a launch that met it first would be lost, and requeued as
                # a second attempt, never a second run.
                deadline = time.monotonic() + DEADLINE_S
                while srv.server.backend.available() is None:
                    assert time.monotonic() < deadline, "the outage was never seen"
                    time.sleep(0.1)
                load = submit_in_outage(c, deadline_s=DEADLINE_S)
                for j in (first, doomed):
                    got = admin.get(f"/v1/jobs/{j}").json()
                    assert got["job"]["state"] == "running", (j, got["attempts"])
            finally:
                cluster.start_controller()
            deadline = time.monotonic() + DEADLINE_S
            while True:  # Slurm declares the dead node's job NODE_FAIL after SlurmdTimeout
                attempts = admin.get(f"/v1/jobs/{doomed}").json()["attempts"]
                if attempts[0]["outcome"] == "lost":
                    break
                assert time.monotonic() < deadline, attempts
                time.sleep(0.2)
            assert c.get(f"/v1/jobs/{first}").json()["job"]["state"] == "running"
        finally:
            cluster.start_node(dead)
        marker.write_text("")
        done = [wait(c, j, "succeeded", "failed", "lost") for j in [first, doomed, *load]]
        assert {d["state"] for d in done} == {"succeeded"}, done
        assert [d["attempts"] for d in done] == [1, 2] + [1] * len(load)
        runs = shared / "runs"
        for j in [first, doomed, *load]:
            want = ["1", "2"] if j == doomed else ["1"]
            assert sorted(p.name for p in (runs / j).iterdir()) == want
            assert logs(c, j, attempt=2 if j == doomed else 1).strip() in ("went", "ran")
        prefix = srv.server.backend.prefix  # this control plane's jobs in Slurm
        accounted(cluster, f"{prefix}{load[-1]}/", 1)
        names = cluster.run("sacct", "-X", "-n", "-P", "-a", "-o", "JobName").split()
        for j in [first, doomed, *load]:
            n = sum(1 for name in names if name.startswith(f"{prefix}{j}/"))
            assert n == (2 if j == doomed else 1), (j, names)


def test_the_ledger_agrees_with_slurms_accounting(
    srv: Running, cluster: sc.SlurmTestCluster, shared: Path, tmp_path: Path
) -> None:
    """A gang of two 4-GPU tasks, a 1-GPU job and a cancelled one run; once metered, the
    ledger's usage of each attempt agrees with sacct's (``suanli bill slurm``): elapsed
    seconds times allocated GPUs, and the span, within the stated tolerance."""
    from typer.testing import CliRunner

    from suanli.cli.main import app
    from suanli.store import open_store
    from suanli.store.ledger import read_usage

    with srv.client(user_token(srv.client())) as c:
        gang = submit(c, command=[PY, "-c", "import time; time.sleep(3)"], tasks=2, gpus=4)
        one = submit(c, command=[PY, "-c", "import time; time.sleep(4)"], gpus=1)
        cancelled = submit(c, command=["sleep", "60"], gpus=1, grace=1)
        wait(c, cancelled, "running")
        time.sleep(2)
        c.post(f"/v1/jobs/{cancelled}/cancel")
        for job, state in ((gang, "succeeded"), (one, "succeeded"), (cancelled, "cancelled")):
            assert wait(c, job, "succeeded", "failed", "cancelled")["state"] == state
    db = str(tmp_path / "suanli.db")
    deadline = time.monotonic() + DEADLINE_S
    while True:
        store = open_store(db)
        try:
            metered = {r.job_id for r in read_usage(store)}
        finally:
            store.close()
        if {gang, one, cancelled} <= metered:
            break
        assert time.monotonic() < deadline, metered
        time.sleep(0.5)
    prefix = srv.server.backend.prefix
    while True:  # slurmdbd has every end (a job's end reaches it after its start)
        text = cluster.run("sacct", "-X", "-n", "-P", "-a", "-o", "JobName,State,End")
        mine = [line.split("|") for line in text.splitlines() if line.startswith(prefix)]
        if len(mine) >= 4 and all(end not in ("Unknown", "") for _, _, end in mine):
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.5)
    args = ["bill", "slurm", "--db", db, "--shared-dir", str(shared), "--json"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    rows = {r["job_id"]: r for r in report["attempts"]}
    assert set(rows) == {gang, one, cancelled}, report
    assert rows[gang]["tasks"] == 2 and rows[gang]["slurm_gpu_s"] >= 2 * 4 * 3, rows[gang]
    for r in rows.values():
        assert not r["flagged"], r
        # Slurm counts whole seconds from its batch step's start; the ledger from the launch
        # to the end read: a few seconds apart at most on this loaded host.
        assert abs(r["ledger_span_s"] - r["slurm_span_s"]) <= 3.0, r
    totals = report["totals"]
    assert abs(totals["ledger_gpu_hours"] - totals["slurm_gpu_hours"]) * 3600 <= 3.0 * 10, totals
