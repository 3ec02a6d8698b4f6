"""The Ray backend against a real Ray cluster (``ray_cluster``, tests/ray_cluster.py: a head
and ``node-a``, ``node-b`` of four declared GPUs each; declared, since there are none here),
and its reading of Ray's node table.

What is checked here, below the control plane: a task runs on the node it was placed on and
sees the GPU indices suanli chose (``CUDA_VISIBLE_DEVICES=3`` where Ray, asked for one GPU,
would have handed out index 0), while Ray's own accounting holds the GPUs it uses; a second
launch of one attempt's task is refused (its actor's name is taken) and so never runs twice;
a task without a working directory runs in its node's own temporary directory; and the
task's end is read from the shared path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ray_cluster as rc
from suanli.backends.base import Exit, Launch, NodeGone, Outcome
from suanli.backends.ray_backend import node_specs
from suanli.core.model import SpecError

DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[rc.RayTestCluster]:
    yield from rc.running()


def ray_node(name: str, node_id: str, gpus: float, **extra: Any) -> dict[str, Any]:
    res = {"CPU": 8.0, "memory": 64.0 * (1 << 30), "GPU": gpus, **extra.pop("res", {})}
    return {"NodeID": node_id, "Alive": extra.pop("alive", True), "NodeManagerAddress":
            "10.0.0.1", "NodeManagerHostname": name, "Resources": res,
            "Labels": extra.pop("labels", {})}  # fmt: skip


def test_ray_nodes_become_suanli_nodes() -> None:
    """Names from the label or the host (made unique where hosts repeat), GPU models from
    Ray's accelerator resource or label (several models in one cluster), dead nodes left
    out, and clear errors for what suanli cannot schedule."""
    table = [
        ray_node("gpu1", "aa" * 28, 8, res={"accelerator_type:H100": 1}),
        ray_node("gpu2", "bb" * 28, 4, labels={"ray.io/accelerator-type": "A100"}),
        ray_node("head", "cc" * 28, 0),
        ray_node("gone", "dd" * 28, 8, res={"accelerator_type:H100": 1}, alive=False),
        ray_node("same", "ee" * 28, 0, labels={"suanli.io/node": "named"}),
    ]
    got = {n.name: n for n in node_specs(table)}
    assert sorted(got) == ["gpu1", "gpu2", "head", "named"]
    assert got["gpu1"].spec.gpus == 8 and got["gpu1"].spec.gpu_model.name == "H100"
    assert got["gpu2"].spec.gpu_model.name == "A100" and got["gpu2"].spec.gpus == 4
    assert got["head"].spec.gpu_model is None and got["head"].spec.cpu_milli == 8000
    assert got["gpu1"].spec.memory_mib == 64 * 1024 and got["gpu1"].node_id == "aa" * 28
    twins = node_specs([ray_node("h", "11" * 28, 0), ray_node("h", "22" * 28, 0)])
    assert [n.name for n in twins] == ["h-11111111", "h-22222222"]
    with pytest.raises(SpecError, match="no GPU model"):
        node_specs([ray_node("bare", "ff" * 28, 2)])
    with pytest.raises(SpecError, match="whole GPUs"):
        node_specs([ray_node("half", "ff" * 28, 0.5, res={"accelerator_type:H100": 1})])
    with pytest.raises(SpecError, match="both called x"):
        node_specs([ray_node("a", "12" * 28, 0, labels={"suanli.io/node": "x"}),
                    ray_node("b", "34" * 28, 0, labels={"suanli.io/node": "x"})])  # fmt: skip


def wait_exits(backend: Any, n: int) -> list[Exit]:
    got: list[Exit] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < n:
        got.extend(backend.poll())
        assert time.monotonic() < deadline, got
        time.sleep(0.1)
    return got


@pytest.fixture
def backend(ray_cluster: Any, tmp_path: Path) -> Any:
    from suanli.backends.ray_backend import RayBackend

    shared = Path(ray_cluster.base) / f"shared-{tmp_path.name}"
    b = RayBackend(ray_cluster.address, shared)
    yield b
    b.close()


def test_a_task_runs_on_its_node_with_the_gpu_indices_suanli_chose(
    backend: Any, ray_cluster: Any
) -> None:
    import ray

    show = ("sh", "-c", "echo $CUDA_VISIBLE_DEVICES $TMPDIR $PWD; sleep 2")
    node_b = next(n for n in backend.refresh() if n.name == "node-b")
    before = ray.available_resources()["GPU"]
    h = backend.launch(Launch("pin", 1, 0, show, gpus=(3,), node="node-b"))
    # A second launch of the same task of the same attempt never starts a second copy.
    with pytest.raises(FileExistsError):
        backend.launch(Launch("pin", 1, 0, show, gpus=(3,), node="node-b"))
    with pytest.raises(NodeGone):
        backend.launch(Launch("pin", 1, 1, show, gpus=(0,), node="node-z"))
    deadline = time.monotonic() + DEADLINE_S
    while ray.available_resources().get("GPU", 0.0) != before - 1:
        assert time.monotonic() < deadline, "Ray's accounting never held the task's GPU"
        time.sleep(0.1)
    [e] = wait_exits(backend, 1)
    assert e.outcome is Outcome.SUCCEEDED, e
    gpus, tmp, cwd = Path(backend.log_paths(h)[0]).read_text().split()
    assert gpus == "3"  # suanli's index, not the 0 Ray would have handed out
    assert tmp == str(ray_cluster.node_tmp("node-b")) and cwd.startswith(tmp)
    placed = (Path(h.run_dir) / "ray.json").read_text()
    assert node_b.node_id in placed
    backend.release("pin", 1)
    deadline = time.monotonic() + DEADLINE_S
    while ray.available_resources().get("GPU", 0.0) != before:
        assert time.monotonic() < deadline, "the actor never gave its GPU back to Ray"
        time.sleep(0.1)
    assert not Path(cwd).exists()  # its node-local scratch went with it


def test_a_fractional_task_holds_its_share_in_ray(backend: Any) -> None:
    import ray

    before = ray.available_resources()["GPU"]
    backend.launch(Launch("half", 1, 0, ("sleep", "30"), gpus=(1,), gpu_milli=500,
                          node="node-a", grace_s=0))  # fmt: skip
    h = backend.running()[0]
    deadline = time.monotonic() + DEADLINE_S
    while ray.available_resources().get("GPU", 0.0) != before - 0.5:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    while not Path(h.run_dir, "pid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    backend.stop(h, Outcome.CANCELLED)
    [e] = wait_exits(backend, 1)
    assert e.outcome is Outcome.CANCELLED
    backend.release("half", 1)


def test_an_outage_loses_nothing_early_and_a_given_up_task_never_runs_on(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """The head's GCS killed: the backend says it is unavailable, reads no task as lost
    before ``outage_timeout_s``, then reports the running one lost; when the GCS is back,
    that task (still running on its node) is stopped, so a requeued attempt never runs
    beside it. A task that ended in the outage is read from its exit record meanwhile."""
    from suanli.backends.ray_backend import RayBackend

    if ray_cluster.redis is None:
        pytest.skip("redis-server not installed (Debian package redis-server): the head "
                    "cannot keep its actors across a GCS restart")  # fmt: skip
    shared = Path(ray_cluster.base) / f"shared-{tmp_path.name}"
    b = RayBackend(ray_cluster.address, shared, answer_s=1.0, outage_timeout_s=6.0)
    try:
        long = b.launch(Launch("out", 1, 0, ("sleep", "300"), gpus=(2,), node="node-a"))
        short = b.launch(Launch("out", 1, 1, ("sleep", "4"), gpus=(3,), node="node-a"))
        deadline = time.monotonic() + DEADLINE_S
        while not all(Path(h.run_dir, "pid").exists() for h in (long, short)):
            assert time.monotonic() < deadline
            b.poll()
            time.sleep(0.1)
        ray_cluster.gcs_down()
        down_at = time.monotonic()
        got: list[Exit] = []
        while time.monotonic() - down_at < 5.0:
            got.extend(b.poll())
            time.sleep(0.2)
        assert b.available() is not None and "has not answered" in b.available()
        assert [e.handle.task for e in got] == [1] and got[0].outcome is Outcome.SUCCEEDED
        while not got[1:]:
            got.extend(b.poll())
            assert time.monotonic() - down_at < 30
            time.sleep(0.2)
        lost = got[1]
        assert lost.handle.task == 0 and lost.outcome is Outcome.LOST
        assert "did not answer for 6 s" in lost.detail
        assert time.monotonic() - down_at >= 6.0
        assert not Path(long.run_dir, "exit.json").exists()  # it still runs, unreachable
        ray_cluster.gcs_up()
        deadline = time.monotonic() + DEADLINE_S
        while not Path(long.run_dir, "exit.json").exists():
            b.poll()
            assert time.monotonic() < deadline, "the given-up task was never stopped"
            time.sleep(0.2)
        assert b.available() is None
        assert "tether_lost" in Path(long.run_dir, "exit.json").read_text()
        b.release("out", 1)  # the ended task's actor gives its GPU back to Ray
        import ray

        deadline = time.monotonic() + DEADLINE_S
        while "out/1/" in " ".join(ray.util.list_named_actors()):
            assert time.monotonic() < deadline, ray.util.list_named_actors()
            time.sleep(0.2)
    finally:
        b.close()


def test_a_job_expected_soon_has_its_checkpoint_read_ahead_on_its_nodes(
    backend: Any, ray_cluster: Any
) -> None:
    """Pre-staging on Ray: the actor of a running suanli task on each node the waiting job
    is expected to land on reads the job's checkpoint ahead there (two regular files; a link
    in it is not followed); a node without such a task is skipped, and said to be."""
    from suanli.backends.prepare import Prepare, prepared_path

    ckpt = Path(ray_cluster.base) / "ckpt-next"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "model.pt").write_bytes(b"x" * 4096)
    (ckpt / "optim.pt").write_bytes(b"y" * 4096)
    if not (ckpt / "elsewhere").is_symlink():
        (ckpt / "elsewhere").symlink_to("/etc/passwd")
    h = backend.launch(Launch("ending", 1, 0, ("sleep", "30"), gpus=(2,), node="node-b",
                              grace_s=0))  # fmt: skip
    ask = Prepare("next", 1, str(ckpt), ("node-b", "node-a"))
    deadline = time.monotonic() + DEADLINE_S
    while (note := backend.prepare(ask)).startswith("no suanli task"):
        assert time.monotonic() < deadline, note  # (until its actor says it started)
        backend.poll()
        time.sleep(0.1)
    assert note == "checkpoint read ahead on 1 of 2 expected node(s): node-b"
    answer = prepared_path(h.run_dir)
    while not answer.exists():
        assert time.monotonic() < deadline, "the task's actor never read the checkpoint ahead"
        time.sleep(0.1)
    got = json.loads(answer.read_text())
    assert got["job_id"] == "next" and got["files"] == 2
    assert backend.prepare(Prepare("none", 1, None, ("node-b",))).startswith("no checkpoint")
    backend.stop(h, Outcome.CANCELLED)
    [e] = wait_exits(backend, 1)
    assert e.outcome is Outcome.CANCELLED
    backend.release("ending", 1)
