"""A cluster's nodes and GPUs written to the store as a declared inventory, as ``suanli serve``
does for declared GPUs: what the control plane's loop tests schedule on."""

from __future__ import annotations

from suanli.core.model import ClusterSpec
from suanli.store import Store
from suanli.store import jobs as js


def declare_inventory(store: Store, cluster: ClusterSpec, model: str = "TESTGPU") -> None:
    """Every node of ``cluster`` and its GPUs (80 GiB each), declared, healthy."""
    nodes = [
        js.NodeRow(n.name, n.gpus, model, 81920, n.cpu_milli, n.memory_mib, True, "declared")
        for n in cluster.nodes
    ]
    gpus = [
        js.GpuRow(n.name, i, model, f"v-{n.name}-{i}", 81920)
        for n in cluster.nodes
        for i in range(n.gpus)
    ]
    js.sync_inventory(store, nodes, gpus, 0)
