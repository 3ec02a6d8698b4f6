"""A real Ray cluster on this machine for the Ray backend's tests: a head (no GPUs) and
worker nodes that declare GPUs (there are none here: Ray only counts them, and the tasks
only read ``CUDA_VISIBLE_DEVICES``; nothing else stands in for hardware).

Each worker node is named for suanli by the ``suanli.io/node`` label, declares its GPU model
as Ray does for detected GPUs (the ``accelerator_type:<model>`` resource) and has a
temporary directory of its own (``TMPDIR``), so that a test sees a node-local path where a
shared one was needed. The head's health checks are fast (a dead raylet is noticed in about
two seconds rather than Ray's default of about fifteen).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'suanli[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 0,
}


@dataclass
class RayTestCluster:
    cluster: Any
    base: Path
    nodes: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node_tmp(self, name: str) -> Path:
        return self.base / f"tmp-{name}"

    def add(self, name: str, gpus: int = 4, model: str = "H100", cpus: int = 1) -> None:
        tmp = self.node_tmp(name)
        tmp.mkdir(parents=True, exist_ok=True)
        tmp.chmod(0o1777)  # as /tmp: tasks run as an unprivileged user when this is root
        self.nodes[name] = self.cluster.add_node(
            num_cpus=cpus,
            num_gpus=gpus,
            resources={f"accelerator_type:{model}": 1},
            labels={"suanli.io/node": name},
            env_vars={"TMPDIR": str(tmp)},
        )

    def kill(self, name: str) -> None:
        """Kill the node's raylet (and with it its workers), as a machine's loss would."""
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)

    def shutdown(self) -> None:
        self.cluster.shutdown()
        shutil.rmtree(self.base, ignore_errors=True)


def start(names: tuple[str, ...] = ("node-a", "node-b"), gpus: int = 4) -> RayTestCluster:
    base = Path(tempfile.mkdtemp(prefix="suanli-ray-"))
    base.chmod(0o755)  # tasks' users pass through to their nodes' directories
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "num_gpus": 0,
            "include_dashboard": False,
            "_system_config": HEALTH,
        },
    )
    test_cluster = RayTestCluster(cluster, base)
    for name in names:
        test_cluster.add(name, gpus=gpus)
    cluster.wait_for_nodes()
    return test_cluster
