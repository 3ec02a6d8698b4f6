"""Failures in the simulator: goodput lost and JCT against the same replay without failures.

Philly (82,247 jobs on its own 2,490 GPUs) at arrival time scale 0.19 (the predictive bench's
load), every job checkpointed every 1,800 s, FIFO with best-fit, repairs 4 h, the default
failure rates (``suanli.sim.failures``), seeds 0-4; each row beside the failure-free replay
of the same run (ratios), and the wall time of each replay against it.

    PYTHONPATH=src python benchmarks/bench_failures.py [--seeds 5] [--scale 0.19]

Needs the public traces (``../shared/traces`` or ``SUANLI_TRACE_DIR``).
"""

from __future__ import annotations

import argparse

from suanli.bench.hardware import failure_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.19)
    ap.add_argument("--policy", default="fifo+best-fit")
    args = ap.parse_args()
    r = failure_bench("philly", args.scale, range(args.seeds), policy=args.policy)
    print(r.title)
    print(f"{'run':8s} {'failures':>9s} {'interrupted':>11s} {'lost GPU-h':>10s} "
          f"{'down GPU-h':>10s} {'JCT h':>7s} {'/base':>6s} {'wait h':>7s} {'/base':>6s} "
          f"{'s':>5s} {'/base':>6s}")  # fmt: skip
    for x in r.rows:
        print(f"{x['run']:8s} {x['failures']:9d} {x['interrupted']:11d} {x['lost_gpu_h']:10.1f} "
              f"{x['down_gpu_h']:10.1f} {x['jct_h']:7.2f} {x['jct_ratio']:6.3f} "
              f"{x['wait_h']:7.2f} {x['wait_ratio']:6.3f} {x['wall_s']:5.1f} "
              f"{x['wall_ratio']:6.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
