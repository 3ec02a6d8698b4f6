"""The variant grid of ``suanli bench fgd --variants grid``: its wall time against the 10-minute
target, and each policy's replay time against FGD's, measured in the same run.

    PYTHONPATH=src python benchmarks/bench_fgd_variants.py            # the grid, seeds 42-44
    PYTHONPATH=src python benchmarks/bench_fgd_variants.py 42 2       # one seed, 2 processes

Prints the verdict of the default sharing placement against FGD (cells where it leaves at
most FGD's unallocated share, mean ratio), the wall time of the whole grid, and the median
seconds per replay of each policy with its ratio to FGD's (machines differ; the ratio does
not depend on the machine as much).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from suanli.bench.variants import cell_rows, grid, variant_sweep, verdict
from suanli.cli.bench import DEFAULT_SHARING_PLACEMENT, parse_seeds
from suanli.traces import find_trace_dir

TARGET_S = 600.0


def main(argv: list[str]) -> None:
    seeds = parse_seeds(argv[0]) if argv else [42, 43, 44]
    workers = int(argv[1]) if len(argv) > 1 else (os.cpu_count() or 1)
    policies = ["FGD", "BestFit", DEFAULT_SHARING_PLACEMENT]
    cells = grid()
    t0 = time.perf_counter()
    runs = variant_sweep(find_trace_dir(None), "default", cells, policies, seeds, workers)
    wall = time.perf_counter() - t0
    rows = cell_rows(runs)
    for p in policies[1:]:
        v = verdict(rows, p)
        print(
            f"{p}: at most FGD on {v.at_most_100}/{v.cells} cells at 100% load, "
            f"{v.at_most_130}/{v.cells} at 130%; mean ratio {v.mean_ratio_100:.3f} / "
            f"{v.mean_ratio_130:.3f}"
        )
    print(
        f"grid: {len(cells)} cells x {len(policies)} policies x {len(seeds)} seeds = "
        f"{len(runs)} replays in {wall:.1f} s on {workers} process(es) "
        f"({wall / TARGET_S:.2f} of the {TARGET_S:.0f} s target)"
    )
    per = {p: statistics.median(r.wall_s for r in runs if r.policy == p) for p in policies}
    for p in policies:
        print(f"  {p}: {per[p]:.3f} s per replay, {per[p] / per['FGD']:.2f} x FGD's")


if __name__ == "__main__":
    main(sys.argv[1:])
