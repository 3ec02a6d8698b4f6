"""The memory-pooling bench of ``suanli bench hardware``: a workload where some tasks need
1-2× a GPU's memory, with pooling off (they can never start: no GPU holds them) and on
(their overflow on NVLink peers or in host memory, slower: ``suanli.core.pooling``;
``docs/pooling.md``).

The workload is generated (``PoolingScenario``, by seed): whole-GPU jobs of 1, 2, 4 and 8 GPUs,
log-normal runtimes, arrivals spread evenly at random over the horizon that gives the offered
load (counted with no job slowed down); a share of them asks for ``U(1, 2]`` times the GPU's
memory a GPU, the rest ``U(0.25, 1]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.bench.hardware import BenchResult, arrivals
from suanli.config.cluster import load_cluster
from suanli.core.model import Job, TaskRequest
from suanli.core.pooling import MemoryPool
from suanli.core.speed import native_basis
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.pooling import pool_summary

__all__ = ["PoolingScenario", "pooling_bench", "pooling_workload"]


@dataclass(frozen=True)
class PoolingScenario:
    """The bench's workload and cluster (every figure a parameter)."""

    cluster: str = "16x8xH100"
    jobs: int = 2000
    load: float = 0.7
    gpus: tuple[int, ...] = (1, 2, 4, 8)
    weights: tuple[float, ...] = (0.4, 0.25, 0.2, 0.15)
    big_share: float = 0.2
    """Share of jobs asking for more memory a GPU than a GPU has (1-2×)."""
    median_runtime_s: float = 3600.0
    runtime_sigma: float = 1.0


def pooling_workload(sc: PoolingScenario, seed: int) -> list[Job]:
    """The scenario's jobs for ``seed`` (the big ones' ids end in ``-big``)."""
    cluster = load_cluster(sc.cluster)
    (model,) = cluster.gpu_models
    rng = np.random.default_rng(seed)
    gpus, runtime, submit = arrivals(rng, sc.jobs, sc.gpus, sc.weights, sc.median_runtime_s,
                                     sc.runtime_sigma, sc.load, cluster.total_gpus)  # fmt: skip
    big = rng.random(sc.jobs) < sc.big_share
    # (1, 2] and (0.25, 1] of the GPU's memory: 1 - U[0, 1) is in (0, 1].
    share = np.where(big, 2.0 - rng.random(sc.jobs), 1.0 - 0.75 * rng.random(sc.jobs))
    return [
        Job(f"j{i:05d}{'-big' if big[i] else ''}", float(submit[i]), float(runtime[i]),
            TaskRequest(gpus=int(gpus[i]), gpu_memory_mib=int(share[i] * model.memory_mib)))
        for i in range(sc.jobs)
    ]  # fmt: skip


def pooling_bench(
    scenario: PoolingScenario = PoolingScenario(), seeds: tuple[int, ...] = (0,)
) -> BenchResult:
    """Per seed: pooling off (the big jobs never start), then on from peers or the host (the
    cheaper), from the host only, from either where it costs at most 2x, and from either
    with 90% of the remote traffic hidden."""
    t0 = time.perf_counter()
    cluster = load_cluster(scenario.cluster)
    basis = native_basis(cluster)
    ps = PolicySet.parse("fifo+best-fit")
    runs: tuple[tuple[str, MemoryPool | None], ...] = (
        ("off", None), ("peer,host", MemoryPool()), ("host", MemoryPool(sources=("host",))),
        ("peer,host at most 2x", MemoryPool(max_slowdown=2.0)),
        ("peer,host overlap 0.9", MemoryPool(overlap=0.9)),
    )  # fmt: skip
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        jobs = pooling_workload(scenario, seed)
        base_s = None
        for name, pool in runs:
            # Off (or a big job no source serves within the pool's bounds): no GPU holds it, so
            # it can never start (the simulator refuses a job no state of the cluster could
            # hold): counted, not replayed.
            run = [j for j in jobs if not j.id.endswith("-big")
                   or (pool is not None and pool.plan(j, cluster) is not None)]  # fmt: skip
            t = time.perf_counter()
            r = simulate(cluster, run, ps, speed_basis=basis, memory_pool=pool)
            wall = time.perf_counter() - t
            base_s = base_s or wall
            rec = r.records
            jct = rec.finish - rec.submit
            big = np.array([i.endswith("-big") for i in rec.ids])
            summary = pool_summary(rec) if rec.pooled is not None else None
            rows.append({
                "seed": seed, "pooling": name, "ran": r.finished, "never_ran": len(jobs) - len(run),
                "allocation": r.gpu_allocation_run, "utilisation": r.gpu_utilisation_run,
                "jct_h": float(jct.mean()) / 3600,
                "small_jct_h": float(jct[~big].mean()) / 3600,
                "big_jct_h": float(jct[big].mean()) / 3600 if big.any() else float("nan"),
                "big_slowdown": float(summary["mean_slowdown"]) if summary else float("nan"),  # type: ignore[arg-type]
                "pool_cost_gpu_h": float(summary["pooling_cost_gpu_hours"]) if summary else 0.0,  # type: ignore[arg-type]
                "wall_s": wall, "wall_ratio": wall / base_s,
            })  # fmt: skip
    title = (f"memory pooling: {scenario.cluster} ({cluster.total_gpus} GPUs of "
             f"{cluster.gpu_models[0].memory_mib // 1024} GiB), {scenario.jobs:,} jobs at load "
             f"{scenario.load:g}, {scenario.big_share:.0%} of them asking 1-2x a GPU's memory; "
             f"{ps.label}, native speed")  # fmt: skip
    notes = ["slowdowns: a memory-bound bound (HBM 3.35 TB/s against NVLink 4 450 GB/s or PCIe 5 "
             "63 GB/s each way), lowered by the overlap; utilisation counts a pooled job's "
             "useful share only"]  # fmt: skip
    return BenchResult("pooling", title, rows, time.perf_counter() - t0, notes)
