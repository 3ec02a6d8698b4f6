"""Alibaba spot-GPU cluster 2026 (ASPLOS'26 GFS paper): the node inventory.

File ``node_info_df.csv`` (``alibaba/clusterdata``, ``cluster-trace-v2026-spot-gpu/``):
``gpu_model, gpu_capacity_num, cpu_num, node_name`` -> :func:`load_spot2026_nodes`.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from suanli.core.model import KNOWN_GPU_MODELS, GpuModel, NodeSpec
from suanli.traces.base import GIB, TraceCluster, check_non_negative
from suanli.traces.table import Header, RowError, RowParser, parse_int, parse_name, read_rows

NODE_COLUMNS = ("gpu_model", "gpu_capacity_num", "cpu_num", "node_name")

# gpu_model -> GPU model. The named parts map to the catalogue's entries (and take their
# names: A100-SXM4-80GB -> A100, A800-SXM4-80GB -> A800). ASSUMPTION for the anonymised
# GPU-series-1 and GPU-series-2: kept under their trace names as 80 GiB parts of A100 speed
# (2.5), since every named part of this inventory but the A10 is an 80 GiB data-centre GPU
# and they sit in the same 192-vCPU servers as the H800s. The paper does not name them.
SPOT2026_GPU_MODELS: Mapping[str, GpuModel] = {
    "A10": KNOWN_GPU_MODELS["A10"],
    "A100-SXM4-80GB": KNOWN_GPU_MODELS["A100"],
    "A800-SXM4-80GB": KNOWN_GPU_MODELS["A800"],
    "H800": KNOWN_GPU_MODELS["H800"],
    "GPU-series-1": GpuModel("GPU-series-1", 80 * GIB, 2.5),
    "GPU-series-2": GpuModel("GPU-series-2", 80 * GIB, 2.5),
}

SPOT2026_MEMORY_MIB_PER_CPU = 8 * GIB
"""Node memory per vCPU (ASSUMPTION: the inventory has no memory column; 8 GiB per vCPU is
1 TiB for the 128-vCPU A100 servers)."""


def load_spot2026_nodes(
    path: str | Path,
    *,
    gpu_models: Mapping[str, GpuModel] = SPOT2026_GPU_MODELS,
    memory_mib_per_cpu: int = SPOT2026_MEMORY_MIB_PER_CPU,
    name: str = "spot2026",
    skip_bad_rows: bool = False,
) -> TraceCluster:
    """The spot-GPU node inventory as a cluster, in file order.

    Node names are ``spot-<node_name>``; ``cpu_num`` vCPUs (x 1000 -> milli-cores); memory
    ``cpu_num x memory_mib_per_cpu`` (ASSUMPTION); GPUs ``gpu_capacity_num`` of the model
    ``gpu_models[gpu_model]`` (unknown: a bad row; a node with 0 GPUs has no model).
    """
    check_non_negative("memory_mib_per_cpu", memory_mib_per_cpu)
    seen: set[str] = set()

    def make(h: Header) -> RowParser[NodeSpec]:
        i_model, i_gpus, i_cpu, i_name = (h.index[c] for c in NODE_COLUMNS)

        def parse(row: list[str], line: int) -> NodeSpec:
            node = "spot-" + parse_name(row[i_name], "node_name").strip()
            if node in seen:
                raise RowError(f"node {node!r} appears twice", "node_name", "duplicate node")
            gpus = parse_int(row[i_gpus], "gpu_capacity_num")
            cpus = parse_int(row[i_cpu], "cpu_num")
            model: GpuModel | None = None
            if gpus:
                text = row[i_model].strip()
                model = gpu_models.get(text)
                if model is None:
                    raise RowError(
                        f"unknown gpu_model {text!r} (known: {', '.join(sorted(gpu_models))}; "
                        "pass gpu_models=)",
                        "gpu_model",
                        "unknown gpu_model",
                    )
            seen.add(node)
            return NodeSpec(node, gpus, model, cpus * 1000, cpus * memory_mib_per_cpu)

        return parse

    nodes, skipped, _ = read_rows(path, NODE_COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
    return TraceCluster(name, tuple(nodes), skipped=skipped)
