"""The benchmarks' own baselines, on tiny inputs: a benchmark that stops running against the
current contracts (as ``bench_sim.py saturated`` once did) fails here, not when it is next
measured. The benchmarks themselves are not run in the test suite."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_sim  # noqa: E402

from suanli.sim.engine import PolicySet, simulate  # noqa: E402


def test_the_rescan_baseline_starts_every_job_when_the_scheduler_does() -> None:
    spec = bench_sim.cluster(4)
    jobs = bench_sim.workload(300, spec, 1.5)
    fast = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    slow = simulate(spec, jobs, PolicySet("fifo", "best-fit"), scheduler=bench_sim.RescanEverything)
    assert fast.finished == slow.finished == len(jobs)
    assert np.array_equal(fast.records.start, slow.records.start, equal_nan=True)
