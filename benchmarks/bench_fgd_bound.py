"""A reference for the FGD replay: how much GPU capacity an offline packer leaves idle.

For each openb pod list and seed, take the pods that have arrived when the GPU requests reach
100% of capacity (same arrival order as ``suanli bench fgd``), put every whole-GPU task on its
own GPUs, and pack the shared (fractional) tasks into GPUs offline with best-fit decreasing,
looking at GPU shares only (no CPU, memory or node boundaries). The share of capacity left in
the shared GPUs' leftovers is what even this relaxed, offline packer wastes: no online policy
is expected to get far below it. Prints the median over seeds beside the replay's figures.

    PYTHONPATH=src python benchmarks/bench_fgd_bound.py            # four lists, seeds 42-51
    PYTHONPATH=src python benchmarks/bench_fgd_bound.py default 42-44
"""

from __future__ import annotations

import bisect
import sys

import numpy as np

from suanli.bench.fgd import WORKLOADS, arrival_order, load_workload
from suanli.cli.bench import parse_seeds
from suanli.core.model import MILLI
from suanli.traces import find_trace_dir


def leftover_share(name: str, seed: int) -> float:
    """% of GPU capacity left in shared GPUs by offline best-fit decreasing (see above)."""
    work = load_workload(find_trace_dir(None), name)
    rng = np.random.default_rng(seed)
    seq = arrival_order(work.demand, work.capacity_milli, rng)
    cum = np.cumsum(work.demand[seq])
    arrived = seq[: int(np.searchsorted(cum, work.capacity_milli)) + 1]
    shares = sorted(
        (
            t.gpu_milli
            for t in (work.tasks[i] for i in arrived)
            if t.gpus == 1 and t.gpu_milli < MILLI
        ),
        reverse=True,
    )
    free: list[int] = []  # free share of each shared GPU opened so far, kept sorted
    for s in shares:
        k = bisect.bisect_left(free, s)  # the tightest GPU that still fits
        if k < len(free):
            left = free.pop(k) - s
        else:
            left = MILLI - s
        bisect.insort(free, left)
    return 100.0 * sum(free) / work.capacity_milli


def main() -> None:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(WORKLOADS)
    seeds = parse_seeds(sys.argv[2]) if len(sys.argv) > 2 else list(range(42, 52))
    for name in names:
        values = [leftover_share(name, s) for s in seeds]
        print(
            f"pod_list={name}  seeds={len(seeds)}  offline_bfd_leftover_pct_median="
            f"{np.median(values):.2f}  min={min(values):.2f}  max={max(values):.2f}"
        )


if __name__ == "__main__":
    main()
