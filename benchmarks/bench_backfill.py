"""Backfill on a saturated queue: EASY against its first implementation, and conservative.

Scenario (the one ``docs/tenancy.md`` quotes): 20,000 synthetic jobs (``suanli.workload.
synthetic`` defaults, runtimes capped at 4 h as in ``bench_sim.py``) on 64 nodes x 8 H100 at
1.1 offered load, so the queue stays long for most of the run. Every run below replays it in
this one process, one after another, and is timed as a ratio to the first (machines here are
noisy; a ratio in one run is the number to read):

  fifo+best-fit                  plain skip-ahead, the baseline
  fifo/easy+best-fit             EASY backfill
  fifo/easy+best-fit, reference  the first EASY implementation (``ReferenceEasy`` in
                                 tests/easy_reference.py, the plugin
                                 ``backfill/easy-reference``): must decide the same, and does
                                 (start times and decision counts compared here; the tests
                                 compare every decision)
  fifo/conservative+best-fit     conservative backfill, depth 100

Compiled kernels are warmed on a small replay first, so no run pays for compiling them.

Run: ``PYTHONPATH=src python benchmarks/bench_backfill.py [--jobs N] [--nodes N] [--load L]
[--no-reference]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from suanli.sim.engine import PolicySet, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_sim import cluster, workload  # noqa: E402

import easy_reference  # noqa: E402, F401  (registers backfill/easy-reference)

RUNS = (
    ("fifo+best-fit", "fifo+best-fit"),
    ("fifo/easy+best-fit", "fifo/easy+best-fit"),
    ("fifo/easy+best-fit (reference)", "fifo/easy-reference+best-fit"),
    ("fifo/conservative+best-fit", "fifo/conservative+best-fit"),
)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--load", type=float, default=1.1)
    ap.add_argument("--no-reference", action="store_true", help="skip the slow reference EASY")
    args = ap.parse_args(argv)
    spec = cluster(args.nodes)
    jobs = workload(args.jobs, spec, args.load)
    small = cluster(8)  # warm the compiled kernels on a small saturated replay
    warm = workload(1_500, small, 1.5)
    for _, policy in RUNS:
        for oracle in ("", "-oracle"):
            ps = PolicySet.parse(policy.replace("+", oracle + "+") if "/" in policy else policy)
            simulate(small, warm, ps)
    print(f"{args.jobs:,} jobs, {spec.total_gpus:,} GPUs, load {args.load}")
    base = 0.0
    starts: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for label, policy in RUNS:
        if args.no_reference and "reference" in label:
            continue
        t0 = time.perf_counter()
        res = simulate(spec, jobs, PolicySet.parse(policy))
        wall = time.perf_counter() - t0
        base = base or wall
        starts[label] = res.records.start
        counts[label] = res.decisions
        wait = float(np.nanmean(res.records.start - res.records.submit))
        print(
            f"{label:32s} {wall:7.2f} s  {wall / base:6.1f}x  "
            f"decisions={res.decisions:,}  mean_wait_s={wait:,.0f}",
            flush=True,
        )
    ref = "fifo/easy+best-fit (reference)"
    if ref in starts:
        same = bool(
            np.array_equal(starts["fifo/easy+best-fit"], starts[ref], equal_nan=True)
            and counts["fifo/easy+best-fit"] == counts[ref]
        )
        print(f"EASY and its reference decide the same: {same}")


if __name__ == "__main__":
    main(sys.argv[1:])
