"""The defragmentation bench of ``suanli bench hardware``: gang waiting time with
``preemption/defrag`` against ``preemption/checkpoint-aware`` (which, with one priority
class, moves nothing), and the GPU-hours the moves cost (``suanli.core.defrag``;
``docs/defrag.md``).

Two workloads, every job checkpointed every 1,800 s: a trace at a time scale (Philly × 0.19 by
default, the failure bench's replay), and the topology bench's generated gangs (16-64 GPUs of
8-GPU tasks among one-node jobs, ``suanli.bench.topology``) at load 0.85, without the topology
model. A move costs the work since the moved job's last checkpoint and the restart overhead
(60 s) on its GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from suanli.bench.hardware import BenchResult
from suanli.core.model import ClusterSpec, Job
from suanli.core.preemption import PreemptionConfig
from suanli.core.speed import SpeedBasis
from suanli.sim.engine import PolicySet, simulate

__all__ = ["CHECKPOINT_S", "defrag_bench", "pair"]

CHECKPOINT_S = 1800.0
GANG_LOAD = 0.85


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")  # (no gang waited: no ratio)


def pair(name: str, cluster: ClusterSpec, jobs: list[Job], basis: SpeedBasis, gang: np.ndarray,
         seed: int, moves_per_hour: float = PreemptionConfig().defrag_moves_per_hour,
         ) -> list[dict[str, Any]]:  # fmt: skip
    """The workload without moves, then with them (``gang``: which jobs are gangs, in submit
    order)."""
    rows: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    for policy in ("checkpoint-aware", "defrag"):
        cfg = PreemptionConfig(policy=policy, defrag_moves_per_hour=moves_per_hour)
        t = time.perf_counter()
        r = simulate(cluster, jobs, PolicySet.parse("fifo+best-fit"), speed_basis=basis,
                     preemption=cfg, seed=seed)  # fmt: skip
        wall = time.perf_counter() - t
        rec = r.records
        assert rec.preemptions is not None and rec.lost_gpu_s is not None
        wait = rec.start - rec.submit
        jct = rec.finish - rec.submit
        restarts = float((rec.preemptions * rec.gpu_milli / 1000.0).sum()) * cfg.restart_overhead
        row = {
            "workload": name, "seed": seed, "defrag": policy == "defrag",
            "moves": int(rec.preemptions.sum()),
            "move_gpu_h": (float(rec.lost_gpu_s.sum()) + restarts) / 3600,
            "gang_wait_h": float(wait[gang].mean()) / 3600,
            "wait_h": float(wait.mean()) / 3600, "jct_h": float(jct.mean()) / 3600,
            "wall_s": wall,
        }  # fmt: skip
        if not base:
            base = row
        row["gang_wait_ratio"] = _ratio(row["gang_wait_h"], base["gang_wait_h"])
        row["jct_ratio"] = _ratio(row["jct_h"], base["jct_h"])
        row["wall_ratio"] = wall / base["wall_s"]
        rows.append(row)
    return rows


def defrag_bench(
    trace: str = "philly",
    scale: float = 0.19,
    seeds: Sequence[int] = (0, 1, 2),
    *,
    trace_dir: str | Path | None = None,
    first: int | None = None,
) -> BenchResult:
    """The trace (if found) and the generated gangs for each seed, each without and with
    moves."""
    from suanli.bench.predict import load, prepare
    from suanli.bench.topology import TopologyScenario, topology_workload
    from suanli.config.cluster import load_cluster
    from suanli.core.speed import native_basis

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        loaded, jobs = load(trace, trace_dir, first)
    except FileNotFoundError as e:
        notes.append(f"trace {trace!r} not found ({e}): its rows are left out")
    else:
        p = prepare(loaded, scale, jobs)
        run = [replace(j, checkpoint_interval=CHECKPOINT_S) for j in p.jobs]
        # A trace's gangs: jobs that need a whole node of its largest nodes.
        per_node = max(n.gpus for n in p.cluster.nodes)
        gang = np.array(
            [j.task.gpus * j.tasks >= per_node for j in sorted(run, key=lambda j: (j.submit, j.id))]
        )
        rows += pair(f"{trace} x {scale:g}", p.cluster, run, p.basis, gang, 0)
    sc = TopologyScenario()
    cluster = load_cluster(sc.cluster)
    for seed in seeds:
        gen, _ = topology_workload(sc, seed, GANG_LOAD)
        gen = [replace(j, checkpoint_interval=CHECKPOINT_S) for j in gen]
        gang = np.array([j.tasks > 1 for j in gen])
        rows += pair(f"gangs at {GANG_LOAD:g}", cluster, gen, native_basis(cluster), gang, seed)
    title = (f"defragmentation: {trace} x {scale:g} and generated gangs on {sc.cluster}, "
             f"checkpoints every {CHECKPOINT_S:,.0f} s, fifo+best-fit, at most "
             f"{PreemptionConfig().defrag_moves_per_hour:g} moves an hour")  # fmt: skip
    notes.append("gangs: on the trace, jobs of a whole node or more; generated, jobs of 2-8 nodes")
    return BenchResult("defrag", title, rows, time.perf_counter() - t0, notes)
