"""The Slurm backend's readings of Slurm's output and its submission, without a cluster
(the cluster tests are in test_slurm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.backends.base import Launch
from suanli.backends.slurm_backend import SlurmBackend, node_specs, node_up, parse_gres
from suanli.backends.slurm_task import control_paths, launch_from_json, launch_to_json
from suanli.core.model import SpecError


def test_gres_counts_and_types() -> None:
    assert parse_gres("n1", "gpu:h100:8(S:0-1)") == (8, "h100")
    assert parse_gres("n1", "gpu:a100:2,gpu:a100:2") == (4, "a100")
    assert parse_gres("n1", "(null)") == (0, None)
    assert parse_gres("n1", "gpu:4") == (4, None)
    with pytest.raises(SpecError, match="n1: GPUs of several types"):
        parse_gres("n1", "gpu:h100:2,gpu:a100:2")
    with pytest.raises(SpecError, match="cannot read its GRES"):
        parse_gres("n1", "gpu:h100:x")


def test_sinfo_lines_become_nodes() -> None:
    text = (
        "n1|8|16000|gpu:h100:4(S:0)|idle|127.0.0.1|(null)\n"
        "n2|16|32000|gpu:A100:2|mixed|10.0.0.2|ib,nvlink\n"
        "n3|4|8000|(null)|down*|10.0.0.3|(null)\n"
    )
    nodes = node_specs(text)
    assert [n.name for n in nodes] == ["n1", "n2", "n3"]
    n1, n2, n3 = (n.spec for n in nodes)
    assert (n1.gpus, n1.gpu_model.name, n1.cpu_milli, n1.memory_mib) == (4, "H100", 8000, 16000)
    assert n2.gpu_model is not None and n2.gpu_model.name == "A100"
    assert dict(n2.labels) == {"slurm.feature/ib": "true", "slurm.feature/nvlink": "true"}
    assert nodes[1].address == "10.0.0.2"
    assert n3.gpus == 0 and n3.gpu_model is None
    with pytest.raises(SpecError, match="sinfo line 1: expected 7 fields"):
        node_specs("n1|8|16000\n")
    with pytest.raises(SpecError, match="n1: 2 GPUs of no type"):
        node_specs("n1|8|16000|gpu:2|idle|n1|(null)\n")


@pytest.mark.parametrize(
    ("state", "up"),
    [
        ("idle", True), ("mixed", True), ("allocated", True), ("completing", True),
        ("down", False), ("down*", False), ("idle*", False), ("drained", False),
        ("draining", False), ("idle~", False), ("maint", False), ("fail", False),
        ("mixed-", True), ("idle$", False),
    ],
)  # fmt: skip
def test_node_states(state: str, up: bool) -> None:
    assert node_up(state) is up


def test_launch_round_trips_through_json() -> None:
    spec = Launch(
        job_id="j/1", attempt=2, task=1, command=("python", "-c", "print(1)"),
        env=(("A", "1"),), gpus=(3,), max_runtime_s=5.0, run_as=(65534, 65534),
        allowed_env=frozenset({"LD_PRELOAD"}), rendezvous=(2, 1, 1, 0, "10.0.0.1", 23456),
        elastic=(2, 1, 0), node="n2", cpu_milli=1500, memory_mib=512,
    )  # fmt: skip
    assert launch_from_json(launch_to_json(spec)) == spec


def test_requests_lie_where_the_task_cannot_write_and_answers_where_it_can(
    tmp_path: Path,
) -> None:
    paths = control_paths(tmp_path / "job" / "1" / "0")
    assert paths["stop"] == tmp_path / "job" / "1.0.stop.json"  # the control plane's directory
    assert paths["resize"].parent == tmp_path / "job"
    assert paths["elastic"].parent == paths["output"].parent == tmp_path / "job" / "1"


def test_sbatch_pins_the_task(tmp_path: Path) -> None:
    backend = SlurmBackend.__new__(SlurmBackend)  # no cluster: only the arguments are made
    backend.partition = "suanli"
    backend.python = "/usr/bin/python3"
    backend.root = tmp_path / "runs"
    backend.source = None
    spec = Launch(
        job_id="j", attempt=1, task=0, command=("true",), gpus=(1, 3), node="n2",
        cpu_milli=2500, memory_mib=0, max_runtime_s=90.0, grace_s=20.0, stop_signal="SIGINT",
        run_as=(1000, 1000),
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "j" / "1" / "0"
    args = backend.sbatch_args(spec, "suanli/x/j/1/0", run_dir)
    assert "--nodelist=n2" in args and "--gres=gpu:2" in args
    assert "--cpus-per-task=3" in args
    assert "--mem=1M" in args  # never none: Slurm would give the job the whole node's
    assert "--time=3" in args  # (90 + 20) s, rounded up to minutes, + 1: a backstop
    assert "--signal=B:2@20" in args  # SIGINT, 20 s before Slurm's own limit
    assert "--uid=1000" in args and "--gid=1000" in args
    assert "--no-requeue" in args and "--export=NONE" in args
    fractional = Launch(job_id="j", attempt=1, task=0, command=("true",), gpus=(0,),
                        gpu_milli=500, node="n2")  # fmt: skip
    assert not any(a.startswith("--gres") for a in backend.sbatch_args(fractional, "x", run_dir))
    script = backend.batch_script(spec)
    assert script.startswith("#!/usr/bin/python3 -P\n")
    assert "from suanli.backends.slurm_task import main" in script
