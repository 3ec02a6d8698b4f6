"""The Slurm test cluster itself (tests/slurm_cluster.py: ``n1`` and ``n2`` of four stand-in
GPUs each), proved against what the Slurm backend's tests rely on: a GPU job runs on the
node asked for, sees the GPU indices Slurm gave it and is accounted in ``sacct`` with its
GPUs; a job runs as the user it was submitted for; a running job outlives a crash of
slurmctld, during which ``sbatch`` fails with Slurm's connection error; and a node's death
takes its job's processes, turns the node DOWN and ends the job as NODE_FAIL, until its
slurmd comes back and the node is IDLE again.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import slurm_cluster as sc

DEADLINE_S = 30.0
# What sbatch and squeue print when slurmctld is down (Slurm 22.05).
UNREACHABLE = "Unable to contact slurm controller (connect failure)"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[sc.SlurmTestCluster]:
    yield from sc.running()


@pytest.fixture(scope="module")
def shared(cluster: sc.SlurmTestCluster) -> Path:
    """A directory every job may write to, whichever user it runs as."""
    path = Path(tempfile.mkdtemp(dir=cluster.base, prefix="shared-"))
    path.chmod(0o1777)
    return path


def sbatch(cluster: sc.SlurmTestCluster, shared: Path, *args: str) -> str:
    out = cluster.run(
        "sbatch", "--parsable", "--partition", cluster.partition, f"--chdir={shared}",
        f"--output={shared}/%j.out", *args,
    )  # fmt: skip
    return out.strip().split(";")[0]


def accounted(cluster: sc.SlurmTestCluster, job: str, fields: str = "State") -> list[str]:
    """The job's ``fields`` in ``sacct`` once it has ended there (which takes a moment
    after the job's end: slurmctld tells slurmdbd)."""

    def ended() -> list[str] | None:
        line = cluster.run("sacct", "-X", "-n", "-P", "-j", job, "-o", fields).strip()
        row = line.split("|") if line else []
        return row if row and row[0].split()[0] in ENDED else None

    return sc.poll(ended, DEADLINE_S, f"job {job} to end in sacct", every=0.25)


def accounted_now(cluster: sc.SlurmTestCluster, job: str) -> str:
    return cluster.run("sacct", "-X", "-n", "-P", "-j", job, "-o", "State").strip()


def queued_state(cluster: sc.SlurmTestCluster, job: str) -> str:
    return cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip()


def wait_running(cluster: sc.SlurmTestCluster, job: str) -> None:
    sc.poll(lambda: queued_state(cluster, job) == "RUNNING", DEADLINE_S, f"job {job} to run")


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_gpu_job_runs_and_is_accounted(cluster: sc.SlurmTestCluster, shared: Path) -> None:
    """Start-up time (printed for CI's budget), then a two-GPU job on n2: it sees two GPU
    indices, as SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES, runs as root (who submitted it)
    and is COMPLETED in sacct with gres/gpu=2 among its TRES."""
    print(f"Slurm test cluster started in {cluster.started_in_s:.1f}s")
    assert cluster.node_states() == {"n1": "IDLE", "n2": "IDLE"}
    job = sbatch(
        cluster, shared, "--nodelist=n2", "--gres=gpu:2",
        "--wrap", "echo GPUS=$SLURM_JOB_GPUS CVD=$CUDA_VISIBLE_DEVICES; id -u",
    )  # fmt: skip
    state, elapsed, tres = accounted(cluster, job, "State,ElapsedRaw,AllocTRES")
    assert state == "COMPLETED" and int(elapsed) >= 0
    assert "gres/gpu=2" in tres.split(","), tres
    gpus_line, uid = (shared / f"{job}.out").read_text().split("\n")[:2]
    gpus, cvd = (part.split("=", 1)[1] for part in gpus_line.split())
    indices = [int(i) for i in gpus.split(",")]
    assert gpus == cvd and len(set(indices)) == 2 and set(indices) <= set(range(4)), gpus_line
    assert uid == "0"
    assert cluster.run("sacct", "-X", "-n", "-P", "-j", job, "-o", "NodeList").strip() == "n2"


def test_job_runs_as_the_user_it_was_submitted_for(
    cluster: sc.SlurmTestCluster, shared: Path
) -> None:
    job = sbatch(cluster, shared, "--uid=65534", "--gid=65534", "--wrap", "id -u; id -g")
    assert accounted(cluster, job, "State,User") == ["COMPLETED", "nobody"]
    assert (shared / f"{job}.out").read_text().split() == ["65534", "65534"]


def test_running_job_outlives_a_controller_crash(
    cluster: sc.SlurmTestCluster, shared: Path
) -> None:
    """slurmctld killed and started again: the job's very processes run on (not a restart
    of the job under its old id), and while it is down sbatch fails saying so."""
    job = sbatch(cluster, shared, "--nodelist=n2", "--gres=gpu:1", "--wrap", "sleep 300")
    try:
        wait_running(cluster, job)
        pids = sc.poll(lambda: cluster.job_pids(job), DEADLINE_S, "the job's processes")
        cluster.stop_controller()
        try:
            began = time.monotonic()
            with pytest.raises(sc.SlurmCommandError) as refused:
                sbatch(cluster, shared, "--wrap", "true")
            print(f"sbatch failed after {time.monotonic() - began:.1f}s: {refused.value.stderr}")
            assert UNREACHABLE in refused.value.stderr
            # slurmdbd still answers for the job; it may not have heard of its start yet
            # (slurmctld tells it some seconds after: sacct lags squeue).
            assert accounted_now(cluster, job) in ("PENDING", "RUNNING")
        finally:
            cluster.start_controller()
        assert queued_state(cluster, job) == "RUNNING"
        assert pids <= cluster.job_pids(job)  # the same processes (its sleep may be newer)
        began = time.monotonic()
        sc.poll(lambda: accounted_now(cluster, job) == "RUNNING", DEADLINE_S, "sacct: RUNNING")
        print(f"sacct says RUNNING {time.monotonic() - began:.1f}s after the restart")
    finally:
        cluster.run("scancel", job)
    assert accounted(cluster, job) == ["CANCELLED by 0"]


def test_a_node_lost_with_its_job(cluster: sc.SlurmTestCluster, shared: Path) -> None:
    """n1's slurmd and its job's processes killed at once: the processes are gone, the node
    is DOWN within about 20 s (printed), the job NODE_FAIL in sacct (not requeued:
    JobRequeue=0), and n1 IDLE again once its slurmd is back."""
    job = sbatch(cluster, shared, "--nodelist=n1", "--gres=gpu:4", "--wrap", "sleep 300")
    wait_running(cluster, job)
    pids = sc.poll(lambda: cluster.job_pids(job), DEADLINE_S, "the job's processes")
    began = time.monotonic()
    cluster.kill_node("n1")
    try:
        assert not [pid for pid in pids if alive(pid)]
        assert not cluster.node_pids("n1")
        state = cluster.wait_node_state("n1", "DOWN", timeout=45)
        print(f"n1 {state} after {time.monotonic() - began:.1f}s")
        assert state == "DOWN+NOT_RESPONDING"
        assert accounted(cluster, job, "State,ExitCode") == ["NODE_FAIL", "0:0"]
        assert queued_state(cluster, job) == ""  # not requeued
    finally:
        cluster.start_node("n1")
    assert cluster.wait_node_state("n1", "IDLE", timeout=DEADLINE_S, exact=True) == "IDLE"
    # The node takes work again.
    again = sbatch(cluster, shared, "--nodelist=n1", "--gres=gpu:1", "--wrap", "true")
    assert accounted(cluster, again) == ["COMPLETED"]
    assert (shared / f"{again}.out").exists()
