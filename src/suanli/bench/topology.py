"""The topology bench of ``suanli bench hardware``: gangs of 8-64 GPUs on a cluster of
8-GPU nodes in NVL72-style NVLink domains and racks, with the topology model
(``suanli.sim.topology``) off, then on under a topology-blind placement and under
``placement/topology`` (``docs/failures.md``, "Topology").

The workload is generated (``TopologyScenario``, by seed): jobs of 1, 2, 4 and 8 GPUs on one
node and gangs of 16, 32 and 64 GPUs (8-GPU tasks, one per node), log-normal runtimes,
arrivals spread evenly at random over the horizon that gives the offered load. Each job is
data-parallel: a step computes for ``6 · P · T / (F · MFU)`` seconds (``P`` parameters, ``T``
tokens per GPU per step, ``F`` the GPU's dense BF16 FLOP/s) and then all-reduces ``2 · P``
bytes of BF16 gradients (``suanli.core.topology``), so that its slowdown on a spread placement
depends on ``T`` alone: fewer tokens per step, more communication per unit of compute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.bench.hardware import BenchResult, arrivals
from suanli.config.cluster import load_cluster
from suanli.core.model import Job, TaskRequest
from suanli.core.speed import native_basis
from suanli.core.topology import Comm
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.topology import TopologyModel

__all__ = ["TopologyScenario", "topology_bench", "topology_workload"]

B200_BF16_FLOPS = 2.25e15
"""Dense BF16 tensor FLOP/s of a B200 (vendor datasheet; ``../shared/docs/ANCHORS.md``), taken
for the GB200's GPUs."""
MFU = 0.4
"""Model FLOP/s utilisation: Llama 3 (Meta, 2024) trained at 38-43% BF16 MFU on H100s."""


@dataclass(frozen=True)
class TopologyScenario:
    """The bench's workload and cluster (every figure a parameter)."""

    cluster: str = "72x8xGB200[nvlink=72,rack=18]"
    """72 nodes of 8 GPUs: 8 NVLink domains of 9 nodes, 2 domains a rack (576 GPUs)."""
    jobs: int = 2000
    loads: tuple[float, ...] = (0.6, 0.8)
    """Offered GPU-time over the cluster's GPU-time in the horizon, counted with no job slowed
    down: spread gangs take more, so that the higher load overloads the cluster once the
    model is on (the queue grows as gangs spread, and gangs spread more as it grows)."""
    gpus: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    weights: tuple[float, ...] = (0.2, 0.1, 0.1, 0.2, 0.2, 0.12, 0.08)
    median_runtime_s: float = 3600.0
    runtime_sigma: float = 1.0
    params: tuple[float, float] = (1e9, 30e9)
    """Log-uniform range of the model's parameters."""
    tokens: tuple[float, float] = (4096.0, 65536.0)
    """Log-uniform range of tokens per GPU per step."""
    waits: tuple[float, ...] = (300.0, 3600.0)
    """``admission/locality``'s waits to run with ``placement/topology``: Slurm's
    ``max_switch_wait`` default, and the scenario's median runtime."""


def topology_workload(
    sc: TopologyScenario, seed: int, load: float
) -> tuple[list[Job], dict[str, Comm]]:
    """The scenario's jobs at ``load`` and each job's step, for ``seed``."""
    cluster = load_cluster(sc.cluster)
    rng = np.random.default_rng(seed)
    gpus, runtime, submit = arrivals(rng, sc.jobs, sc.gpus, sc.weights, sc.median_runtime_s,
                                     sc.runtime_sigma, load, cluster.total_gpus)  # fmt: skip
    lo, hi = np.log(sc.params)
    params = np.exp(rng.uniform(lo, hi, sc.jobs))
    lo, hi = np.log(sc.tokens)
    tokens = np.exp(rng.uniform(lo, hi, sc.jobs))
    per_node = max(n.gpus for n in cluster.nodes)
    jobs: list[Job] = []
    comm: dict[str, Comm] = {}
    for i in range(sc.jobs):
        g = int(gpus[i])
        tasks, per_task = (g // per_node, per_node) if g > per_node else (1, g)
        jid = f"j{i:05d}"
        jobs.append(Job(jid, float(submit[i]), float(runtime[i]), TaskRequest(gpus=per_task),
                        tasks=tasks))  # fmt: skip
        compute = 6 * params[i] * tokens[i] / (B200_BF16_FLOPS * MFU)
        comm[jid] = Comm(grad_bytes=2 * params[i], compute_s=float(compute))
    return jobs, comm


def topology_bench(
    scenario: TopologyScenario = TopologyScenario(), seeds: tuple[int, ...] = (0,)
) -> BenchResult:
    """Per load and seed: the model off (best-fit), then on under best-fit, under topology,
    and under topology with gangs waiting for one domain or rack (``admission/locality``)
    for each of ``scenario.waits``."""
    t0 = time.perf_counter()
    cluster = load_cluster(scenario.cluster)
    basis = native_basis(cluster)
    runs: tuple[tuple[str, str, str, bool, dict[str, Any] | None], ...] = (
        ("off", "best-fit", "fifo+best-fit", False, None),
        ("on", "best-fit", "fifo+best-fit", True, None),
        ("on", "topology", "fifo+topology", True, None),
        *(("on", f"topology+wait {w:g}s", "fifo+topology", True,
           {"locality": {"max_wait_s": w}}) for w in scenario.waits),
    )  # fmt: skip
    rows: list[dict[str, Any]] = []
    for load, seed in ((ld, sd) for ld in scenario.loads for sd in seeds):
        jobs, comm = topology_workload(scenario, seed, load)
        gang = np.array([j.tasks > 1 for j in jobs])
        model = TopologyModel(comm=comm)
        base_s = None
        base_jct = None
        for name, label, policy, on, admission in runs:
            t = time.perf_counter()
            r = simulate(cluster, jobs, PolicySet.parse(policy), speed_basis=basis,
                         topology=model if on else None, admission=admission)  # fmt: skip
            wall = time.perf_counter() - t
            rec = r.records
            jct = rec.finish - rec.submit
            wait = rec.start - rec.submit
            spread = rec.spread_gpu_s if rec.spread_gpu_s is not None else np.zeros(len(jobs))
            slow = rec.slowdown if rec.slowdown is not None else np.ones(len(jobs))
            if base_s is None:
                base_s, base_jct = wall, float(jct.mean())
            rows.append({
                "load": load, "seed": seed, "model": name, "policy": label,
                "jct_h": float(jct.mean()) / 3600, "jct_ratio": float(jct.mean()) / base_jct,
                "gang_jct_h": float(jct[gang].mean()) / 3600,
                "gang_wait_h": float(wait[gang].mean()) / 3600,
                "spread_gangs": float((slow[gang] > 1.0 + 1e-9).mean()),
                "gang_slowdown": float(slow[gang].mean()),
                "spread_gpu_h": float(spread.sum()) / 3600,
                "wall_s": wall, "wall_ratio": wall / base_s,
            })  # fmt: skip
    title = (f"topology: {scenario.cluster} ({cluster.total_gpus} GPUs), {scenario.jobs:,} jobs "
             f"at loads {', '.join(f'{ld:g}' for ld in scenario.loads)}, gangs of 16-64 GPUs "
             f"{sum(w for g, w in zip(scenario.gpus, scenario.weights, strict=True) if g > 8):.0%}"
             " of jobs; fifo, native speed")  # fmt: skip
    notes = ["model off: no job slows down (best-fit); on: a spread gang steps over InfiniBand "
             "(50 GB/s a GPU) instead of NVLink 5 (900 GB/s)"]  # fmt: skip
    return BenchResult("topology", title, rows, time.perf_counter() - t0, notes)
