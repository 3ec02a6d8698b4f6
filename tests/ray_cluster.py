"""A real Ray cluster on this machine for the Ray backend's tests: a head (no GPUs) and
worker nodes that declare GPUs (there are none here: Ray only counts them, and the tasks
only read ``CUDA_VISIBLE_DEVICES``; nothing else stands in for hardware).

Each worker node is named for suanli by the ``suanli.io/node`` label, declares its GPU model
as Ray does for detected GPUs (the ``accelerator_type:<model>`` resource) and has a
temporary directory of its own (``TMPDIR``), so that a test sees a node-local path where a
shared one was needed. The head's health checks are fast (a dead raylet is noticed in about
two seconds rather than Ray's default of about fifteen).

Where Debian's ``redis-server`` is installed (``.ci/run`` installs it), the head keeps its
cluster state in a Redis of its own (Ray's GCS fault tolerance), so that the head's GCS can
be killed and restarted with every actor, and so every task, kept: the engine outage of the
outage test. Without it, that test skips and says so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
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
    # Raylets and drivers wait this long for a GCS that is down before they give up.
    "gcs_rpc_server_reconnect_timeout_s": 300,
}


@dataclass
class RayTestCluster:
    cluster: Any
    base: Path
    redis: subprocess.Popen[bytes] | None = None
    nodes: dict[str, Any] = field(default_factory=dict)

    def gcs_down(self) -> None:
        """Kill the head's GCS (the cluster's state service): Ray answers nothing."""
        self.cluster.head_node.kill_gcs_server()

    def gcs_up(self) -> None:
        """Start the GCS again; it reloads the cluster's state from Redis."""
        self.cluster.head_node.start_gcs_server()

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
        if self.redis is not None:
            self.redis.kill()
            self.redis.wait()
        shutil.rmtree(self.base, ignore_errors=True)


def _redis(base: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    """A throwaway Redis on a free loopback port, or None if redis-server is not installed."""
    exe = shutil.which("redis-server")
    if exe is None:
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)


def start(names: tuple[str, ...] = ("node-a", "node-b"), gpus: int = 4) -> RayTestCluster:
    base = Path(tempfile.mkdtemp(prefix="suanli-ray-"))
    base.chmod(0o755)  # tasks' users pass through to their nodes' directories
    redis = _redis(base)
    if redis is not None:
        os.environ["RAY_REDIS_ADDRESS"] = redis[1]  # read by the head as it starts
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "num_gpus": 0,
                "include_dashboard": False,
                "_system_config": HEALTH,
            },
        )
    finally:
        os.environ.pop("RAY_REDIS_ADDRESS", None)
    test_cluster = RayTestCluster(cluster, base, redis[0] if redis is not None else None)
    for name in names:
        test_cluster.add(name, gpus=gpus)
    cluster.wait_for_nodes()
    return test_cluster


def running() -> Iterator[RayTestCluster]:
    """For a module's fixture: a cluster (``start``) until the module's last test is done,
    so that its processes do not run beside the rest of the suite."""
    cluster = start()
    try:
        yield cluster
    finally:
        cluster.shutdown()
