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
import time

import numpy as np

from suanli.bench.predict import load, prepare
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.failures import FailureModel

REPAIR_S = 4 * 3600.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.19)
    ap.add_argument("--policy", default="fifo+best-fit")
    args = ap.parse_args()
    trace, jobs = load("philly")
    p = prepare(trace, args.scale, jobs)
    ps = PolicySet.parse(args.policy)

    def run(model: FailureModel | None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        r = simulate(p.cluster, p.jobs, ps, speed_basis=p.basis, failures=model)
        return r, time.perf_counter() - t0

    base, base_s = run(None)
    b_wait = float(np.mean(base.records.start - base.records.submit))
    b_jct = float(np.mean(base.records.finish - base.records.submit))
    print(f"philly × {args.scale:g}, {ps.label}, checkpoints every 1,800 s, repairs 4 h")
    print(f"{'run':8s} {'failures':>9s} {'interrupted':>11s} {'lost GPU-h':>10s} "
          f"{'down GPU-h':>10s} {'JCT h':>7s} {'/base':>6s} {'wait h':>7s} {'/base':>6s} "
          f"{'s':>5s} {'/base':>6s}")  # fmt: skip
    print(f"{'none':8s} {'-':>9s} {'-':>11s} {'-':>10s} {'-':>10s} {b_jct / 3600:7.2f} "
          f"{1:6.3f} {b_wait / 3600:7.2f} {1:6.3f} {base_s:5.1f} {1:6.3f}")  # fmt: skip
    for seed in range(args.seeds):
        r, s = run(FailureModel(repair_s=REPAIR_S, seed=seed))
        log = r.records.failures
        assert log is not None
        wait = float(np.mean(r.records.start - r.records.submit))
        jct = float(np.mean(r.records.finish - r.records.submit))
        print(f"seed {seed:<3d} {len(log.failures):9d} {log.interrupted:11d} "
              f"{log.lost_gpu_s / 3600:10.1f} {log.down_gpu_s / 3600:10.1f} {jct / 3600:7.2f} "
              f"{jct / b_jct:6.3f} {wait / 3600:7.2f} {wait / b_wait:6.3f} {s:5.1f} "
              f"{s / base_s:6.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
