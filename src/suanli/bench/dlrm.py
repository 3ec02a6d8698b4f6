"""The DLRM replay of ``suanli bench hardware``: the Alibaba 2025 GPU-disaggregated
recommendation-serving trace (Yang et al., NSDI 2025; ``suanli.traces.dlrm``) served
co-located against disaggregated, on a fleet that grows as it needs (``suanli.sim.fleet``).

- ``co-located``: every instance of a service, its CPU-node part (``CN``: embedding and
  feature work) and its GPU-node part (``HN``: the dense model on one GPU), runs on GPU
  servers, as DLRMs were served before disaggregation: the CPU-heavy parts take the GPU
  servers' cores and memory.
- ``disaggregated``: ``CN`` instances run on CPU nodes and ``HN`` instances on GPU nodes;
  each GPU is reached from its service's CPU part over RDMA, at the instance's share of a
  NIC (``suanli.core.attach``).

Every instance keeps the trace's CPU, GPU, memory and RDMA requests (disk is not replayed:
no node's disk is known) and its density limit, counted over its service's instances of its
role on the node. It starts when it was scheduled
(at 0 if it was there before the trace began) and leaves when it was deleted (or stays to
the end of the trace).

The trace publishes no node inventory. The rule here (``DlrmScenario``, every figure a
parameter): a GPU node is an 8-GPU server as NVIDIA's DGX H100 datasheet gives it (two
56-core Xeon Platinum 8480C, 224 hardware threads, 2 TiB of memory, eight 400 Gb/s
ConnectX-7 ports, one a GPU); a CPU node is the same host without the GPUs and with two
ports. The trace's cores are taken as hardware threads. Its largest instance (192 cores,
1,000 GiB) fits either.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suanli.bench.hardware import BenchResult
from suanli.core.attach import AttachModel
from suanli.core.model import MILLI, GpuModel, TaskRequest
from suanli.sim.fleet import FleetResult, Instance, NodeType, replay_fleet
from suanli.traces.dlrm import DlrmInstance, DlrmInstances, load_dlrm_instances
from suanli.traces.locate import find_trace_dir

__all__ = ["MODES", "DlrmScenario", "dlrm_bench", "dlrm_fleet", "trace_path"]

MODES = ("co-located", "disaggregated")
TRACE = Path("dlrm-2025") / "disaggregated_DLRM_trace.csv"

DGX_H100 = NodeType("gpu", gpus=8, cpu=224, memory_gib=2048, nics=8,
                    gpu_model=GpuModel("H100", 80 * 1024, 5.0))  # fmt: skip
"""NVIDIA DGX H100 datasheet: 8 H100, 2 × Xeon Platinum 8480C (112 cores, 224 threads),
2 TB of memory, 8 single-port ConnectX-7 at 400 Gb/s for the compute fabric."""
CPU_HOST = NodeType("cpu", gpus=0, cpu=224, memory_gib=2048, nics=2)
"""The same host without its GPUs, with the two ports of one dual-port ConnectX-7."""


@dataclass(frozen=True)
class DlrmScenario:
    """The replay's fleet and workload (every figure a parameter)."""

    gpu_node: NodeType = DGX_H100
    cpu_node: NodeType = CPU_HOST
    placement: str = "best-fit"
    apps_share: float = 1.0
    """Share of the services replayed (a seeded draw; 1: all of them)."""
    window: tuple[float, float] | None = None
    """Replay only the instances alive in [start, end) seconds of the trace (None: all)."""
    density: bool = True
    """Keep the trace's density limits (False: no instance has one)."""


def trace_path(trace_dir: str | Path | None = None) -> Path:
    """The DLRM trace's file under the trace directory (``FileNotFoundError`` if absent)."""
    path = find_trace_dir(trace_dir) / TRACE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not a file")
    return path


def _task(i: DlrmInstance) -> TaskRequest:
    return TaskRequest(gpus=i.gpus, cpu_milli=round(i.cpu * MILLI),
                       memory_mib=round(i.memory_gib * 1024))  # fmt: skip


def workload(
    trace: DlrmInstances, sc: DlrmScenario, mode: str, seed: int = 0
) -> tuple[list[Instance], float]:
    """The instances of ``mode`` (``MODES``) and the horizon (the trace's last time)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    xs = trace.instances
    horizon = max((t for i in xs for t in (i.created, i.scheduled, i.deleted) if t is not None),
                  default=0.0)  # fmt: skip
    apps = sorted({i.app for i in xs})
    if sc.apps_share < 1.0:
        rng = np.random.default_rng(seed)
        keep = rng.permutation(len(apps))[: max(1, round(sc.apps_share * len(apps)))]
        chosen = {apps[k] for k in keep.tolist()}
        xs = tuple(i for i in xs if i.app in chosen)
    lo, hi = sc.window if sc.window is not None else (0.0, horizon)
    interned: dict[TaskRequest, TaskRequest] = {}
    out: list[Instance] = []
    for i in xs:
        start = i.scheduled if i.scheduled is not None else 0.0
        end = i.deleted
        if start >= hi or (end is not None and end <= lo):
            continue
        start = max(start, lo) - lo
        end = None if end is None or end >= hi else end - lo
        pool = "gpu" if mode == "co-located" or i.role == "HN" else "cpu"
        task = _task(i)
        # A service's density limit spreads its instances of one role (co-located, the two
        # roles share the GPU servers, each under its own limit).
        out.append(Instance(i.sn, pool, interned.setdefault(task, task), i.rdma_pct,
                            f"{i.app}/{i.role}", i.max_per_node if sc.density else None, start,
                            end))  # fmt: skip
    return out, hi - lo


def probe(trace: DlrmInstances) -> tuple[TaskRequest, float]:
    """The commonest GPU instance shape (task and NIC share): what a stranded GPU cannot take."""
    [(shape, _count)] = Counter((_task(i), i.rdma_pct) for i in trace.of("HN")).most_common(1)
    return shape


def dlrm_fleet(
    trace: DlrmInstances, sc: DlrmScenario, mode: str, seed: int = 0
) -> tuple[FleetResult, list[Instance]]:
    """One replay of ``mode``."""
    instances, horizon = workload(trace, sc, mode, seed)
    task, nic = probe(trace)
    types = (sc.gpu_node, sc.cpu_node) if mode == "disaggregated" else (sc.gpu_node,)
    r = replay_fleet(instances, types, horizon=horizon, placement=sc.placement, seed=seed,
                     probe=task, probe_nic_pct=nic)  # fmt: skip
    return r, instances


def attach_bandwidth(instances: list[Instance], attach: AttachModel) -> tuple[float, float]:
    """Mean GB/s each way between a GPU instance and its service's CPU part over RDMA, at its
    share of one NIC, and that as a share of a local GPU's (``suanli.core.attach``)."""
    shares = [min(1.0, i.nic_pct / 100) for i in instances if i.task.gpus]
    if not shares:
        return float("nan"), float("nan")
    bw = [attach.link_gbs("rdma", nic_share=s) for s in shares]
    pen = [attach.penalty("rdma", nic_share=s) for s in shares]
    return float(np.mean(bw)), float(np.mean(pen))


def rows_for(trace: DlrmInstances, sc: DlrmScenario, seed: int = 0,
             label: str = "") -> list[dict[str, Any]]:  # fmt: skip
    """One row a mode, co-located first (the model off: no GPU attached across hosts)."""
    attach = AttachModel()
    rows: list[dict[str, Any]] = []
    base_s = None
    for mode in MODES:
        r, instances = dlrm_fleet(trace, sc, mode, seed)
        base_s = base_s or r.wall_s
        gpu_nodes, cpu_nodes = r.nodes.get("gpu", 0), r.nodes.get("cpu", 0)
        bw, pen = attach_bandwidth(instances, attach) if mode == "disaggregated" else (
            float("nan"), float("nan"))  # fmt: skip
        rows.append({
            **({"variant": label} if label else {}),
            "mode": mode, "instances": r.placed, "refused": r.refused,
            "gpu_nodes": gpu_nodes, "gpu_nodes_bound": r.bound.get("gpu", 0),
            "cpu_nodes": cpu_nodes, "cpu_nodes_bound": r.bound.get("cpu", 0), "gpus": int(r.capacity["gpu"]),
            "gpus_used_peak": int(r.peak["gpu"]),
            "cores": int(r.capacity["cpu"]), "gpu_alloc": r.allocation["gpu"],
            "cpu_alloc": r.allocation["cpu"], "mem_alloc": r.allocation["memory"],
            "rdma_use": r.allocation["nic"], "rdma_peak_nics": r.peak["nic"],
            "stranded_gpus": r.stranded_gpus, "attach_gbs": bw, "attach_vs_local": pen,
            "wall_s": r.wall_s, "wall_ratio": r.wall_s / base_s,
        })  # fmt: skip
    return rows


def dlrm_bench(
    trace_dir: str | Path | None = None, scenario: DlrmScenario = DlrmScenario()
) -> BenchResult:
    """The DLRM trace served co-located and disaggregated (module docstring)."""
    t0 = time.perf_counter()
    trace = load_dlrm_instances(trace_path(trace_dir))
    rows = rows_for(trace, scenario)
    g, c = scenario.gpu_node, scenario.cpu_node
    title = (f"DLRM serving (Alibaba 2025, {len(trace.instances):,} instances of "
             f"{len({i.app for i in trace.instances})} services, 31 days): co-located on GPU "
             f"servers against disaggregated; fleet grown as needed, {scenario.placement}")  # fmt: skip
    notes = [
        f"GPU node: {g.gpus} GPUs, {g.cpu} cores, {g.memory_gib:,} GiB, {g.nics} NICs (DGX H100 "
        f"datasheet); CPU node: {c.cpu} cores, {c.memory_gib:,} GiB, {c.nics} NICs (the same "
        "host without GPUs); allocation and RDMA use are time-averaged shares of the fleet in "
        "service; stranded GPUs: free GPUs where the commonest GPU instance no longer fits",
        "attach: the GPU instances' RDMA share of a 400 Gb/s NIC, GB/s each way and as a share "
        "of a local PCIe 5 x16 slot (63 GB/s)",
    ]
    return BenchResult("dlrm", title, rows, time.perf_counter() - t0, notes)
