"""Alibaba PAI 2020: the machine list of the PAI GPU cluster (job tables are not read here).

File ``pai_machine_spec.csv`` (``alibaba/clusterdata``, ``cluster-trace-gpu-v2020``):
``machine, gpu_type, cap_cpu, cap_mem, cap_gpu`` -> :func:`load_pai2020_machines`.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from suanli.core.model import KNOWN_GPU_MODELS, GpuModel, NodeSpec
from suanli.traces.base import GIB, TraceCluster
from suanli.traces.table import Header, RowError, RowParser, parse_int, parse_name, read_rows

MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")

CPU_TYPES = frozenset({"CPU"})
"""``gpu_type`` values of machines without GPUs."""

# gpu_type -> GPU model. P100, T4 and V100M32 are the catalogue's. ASSUMPTIONS:
# - V100: PAI names its 32 GB V100s V100M32, so plain V100 is the 16 GB part (kept under its
#   trace name, 16 GiB, speed 1.0; the catalogue's "V100" is a 32 GiB part);
# - MISC: machines of other, unnamed GPU types, 8 per machine; kept as one model "MISC" with
#   16 GiB and speed 0.6 (P100-class), a guess: the trace says nothing about them.
PAI2020_GPU_MODELS: Mapping[str, GpuModel] = {
    "V100": GpuModel("V100", 16 * GIB, 1.0),
    "MISC": GpuModel("MISC", 16 * GIB, 0.6),
    **{n: KNOWN_GPU_MODELS[n] for n in ("P100", "T4", "V100M32")},
}


def load_pai2020_machines(
    path: str | Path,
    *,
    gpu_models: Mapping[str, GpuModel] = PAI2020_GPU_MODELS,
    name: str = "pai2020",
    skip_bad_rows: bool = False,
) -> TraceCluster:
    """The PAI 2020 machines as a cluster, in file order (node names: ``machine``).

    ``cap_cpu`` is in cores (x 1000 -> milli-cores), ``cap_mem`` in GB (taken as GiB:
    x 1024 -> MiB), ``cap_gpu`` GPUs. ``gpu_type`` ``CPU`` is a machine without GPUs (its
    ``cap_gpu`` must be 0); other types go through ``gpu_models`` (unknown: a bad row).
    """
    seen: set[str] = set()

    def make(h: Header) -> RowParser[NodeSpec]:
        i_m, i_type, i_cpu, i_mem, i_gpu = (h.index[c] for c in MACHINE_COLUMNS)

        def parse(row: list[str], line: int) -> NodeSpec:
            machine = parse_name(row[i_m], "machine")
            if machine in seen:
                raise RowError(f"machine {machine!r} appears twice", "machine", "duplicate machine")
            kind = row[i_type].strip()
            cpu = parse_int(row[i_cpu], "cap_cpu")
            mem = parse_int(row[i_mem], "cap_mem")
            gpus = parse_int(row[i_gpu], "cap_gpu")
            model: GpuModel | None = None
            if kind in CPU_TYPES:
                if gpus:
                    raise RowError(
                        f"a {kind} machine must have cap_gpu 0, got {gpus}",
                        "cap_gpu",
                        "GPUs on a CPU machine",
                    )
            elif gpus:
                model = gpu_models.get(kind)
                if model is None:
                    raise RowError(
                        f"unknown gpu_type {kind!r} (known: "
                        f"{', '.join(sorted({*gpu_models, *CPU_TYPES}))}; pass gpu_models=)",
                        "gpu_type",
                        "unknown gpu_type",
                    )
            seen.add(machine)
            return NodeSpec(machine, gpus, model, cpu * 1000, mem * GIB)

        return parse

    nodes, skipped, _ = read_rows(path, MACHINE_COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
    return TraceCluster(name, tuple(nodes), skipped=skipped)
