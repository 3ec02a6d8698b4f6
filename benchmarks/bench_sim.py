"""Simulator throughput and memory.

Scenarios (each prints jobs/s, wall time and peak memory):
  100k   100,000 synthetic jobs on 1,000 nodes × 8 H100 at 0.9 offered load
         (target: >= 10,000 jobs/s, <= 10 s, peak RSS < 1 GiB)
  1m     1,000,000 synthetic jobs on 10,000 GPUs (1,250 nodes × 8) at 0.9 load (target: <= 60 s)
  saturated  6,000 jobs at 1.5 offered load on 100 nodes × 8, a queue that never drains,
         against a baseline measured in the same run: a scheduler that tries every pending job,
         in queue order, in every cycle (what the shape table avoids). Prints the speed-up and
         checks that both start every job at the same time.

Workload: ``suanli.workload.synthetic`` defaults (calibrated to openb and Philly) with
runtimes capped at 4 h, so that the arrival window is many times the longest job and the
offered load is really reached (uncapped, half of Philly's GPU-time is in jobs longer than a
100k-job window). Run: ``python benchmarks/bench_sim.py [100k] [1m] [saturated]`` (all by
default). Each scenario runs in a fresh subprocess so that its peak memory is its own;
``--one NAME`` runs one in this process and prints its JSON line (``--one saturated
--no-baseline``: without the rescan baseline, for timing the scheduler alone).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np

from suanli.core.decisions import Admit, Decision, Skip
from suanli.core.gang import place_job
from suanli.core.model import ClusterSpec, GpuModel, Job, NodeSpec
from suanli.core.scheduler import Scheduler
from suanli.sim.engine import PolicySet, simulate
from suanli.workload.synthetic import WorkloadConfig, generate

RUNTIME_CAP_S = 4 * 3600.0


def cluster(nodes: int, gpus: int = 8) -> ClusterSpec:
    h100 = GpuModel("H100", 80 * 1024, 1.0)
    return ClusterSpec(
        f"{nodes}x{gpus}xH100",
        tuple(
            NodeSpec(f"n{i}", gpus, h100, 96_000, 1024 * 1024, rack=f"rack-{i // 32}")
            for i in range(nodes)
        ),
    )


def workload(jobs: int, spec: ClusterSpec, load: float) -> list[Job]:
    return generate(
        WorkloadConfig(jobs=jobs, seed=1, target_load=load, runtime_cap=RUNTIME_CAP_S), spec
    )


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RescanEverything(Scheduler):
    """Baseline only: tries every pending job in queue order in every cycle."""

    def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
        out: list[Decision] = []
        for job in self.pending_jobs():
            placement, reason, _ = place_job(self.view, job, self.placement, rng)
            if placement is None:
                assert reason is not None
                out.append(Skip(job, reason))
                continue
            self.remove(job.id)
            out.append(Admit(job, placement))
        return out


def run_scale(name: str, nodes: int, jobs: int, load: float) -> dict[str, float]:
    spec = cluster(nodes)
    t0 = time.perf_counter()
    js = workload(jobs, spec, load)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = simulate(spec, js, PolicySet("fifo", "best-fit"))
    total_s = time.perf_counter() - t0  # the whole call: validation, ordering and the replay
    return {
        "scenario": name,
        "jobs": jobs,
        "gpus": spec.total_gpus,
        "generate_s": round(gen_s, 2),
        "simulate_s": round(total_s, 2),
        "jobs_per_s": round(jobs / total_s),
        "decisions_per_s": round(r.decisions_per_s),
        "cycles": r.cycles,
        "gpu_allocation": round(r.gpu_allocation, 3),
        "mean_wait_s": round(r.wait.mean, 1),
        "peak_rss_mib": round(peak_rss_mib()),
    }


def run_saturated(baseline: bool = True) -> dict[str, float]:
    spec = cluster(100)
    js = workload(6_000, spec, 1.5)
    fast = simulate(spec, js, PolicySet("fifo", "best-fit"))
    if not baseline:
        return {
            "scenario": "saturated",
            "jobs": len(js),
            "simulate_s": round(fast.wall_s, 2),
            "mean_pending": round(float(fast.series.pending.mean())),
            "peak_rss_mib": round(peak_rss_mib()),
        }
    slow = simulate(spec, js, PolicySet("fifo", "best-fit"), scheduler=RescanEverything)
    same = bool(np.array_equal(fast.records.start, slow.records.start, equal_nan=True))
    return {
        "scenario": "saturated",
        "jobs": len(js),
        "gpus": spec.total_gpus,
        "simulate_s": round(fast.wall_s, 2),
        "baseline_rescan_s": round(slow.wall_s, 2),
        "speedup_vs_rescan": round(slow.wall_s / fast.wall_s, 1),
        "same_start_times": same,
        "mean_pending": round(float(fast.series.pending.mean())),
        "jobs_per_s": round(fast.jobs_per_s),
        "peak_rss_mib": round(peak_rss_mib()),
    }


SCENARIOS = {
    "100k": lambda: run_scale("100k", 1000, 100_000, 0.9),
    "1m": lambda: run_scale("1m", 1250, 1_000_000, 0.9),
    "saturated": run_saturated,
}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"] and len(argv) in (2, 3):
        if argv[2:] == ["--no-baseline"] and argv[1] == "saturated":
            print(json.dumps(run_saturated(baseline=False)))
        else:
            print(json.dumps(SCENARIOS[argv[1]]()))
        return
    names = argv or list(SCENARIOS)
    for name in names:
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
        out = subprocess.run(
            [sys.executable, __file__, "--one", name], capture_output=True, text=True, check=True
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print("  ".join(f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
