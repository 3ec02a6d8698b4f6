"""The steady-state modes of the synthetic generator: a horizon, a derived job count or arrival
rate, and a wall-clock time limit."""

from __future__ import annotations

import numpy as np
import pytest

from suanli.core.model import MILLI, ClusterSpec, GpuModel, NodeSpec, SpecError
from suanli.workload import WorkloadConfig, generate, generate_with_info

H100 = GpuModel("H100", 81920, 5.0)
T4 = GpuModel("T4", 16 * 1024, 0.5)
DAY = 86400.0


def _cluster(*groups: tuple[str, int, int, GpuModel | None]) -> ClusterSpec:
    nodes = tuple(
        NodeSpec(f"{p}{i}", g, m, 96000, 1 << 20) for p, count, g, m in groups for i in range(count)
    )
    return ClusterSpec("c", nodes)


H100X16 = _cluster(("h", 16, 8, H100))
MIXED = _cluster(("h", 4, 8, H100), ("t", 8, 4, T4))


def _gpu_seconds(jobs) -> float:
    return sum(j.gpu_demand_milli * j.runtime for j in jobs) / MILLI


def test_job_count_derived_from_a_horizon_at_the_load() -> None:
    config = WorkloadConfig(jobs=None, horizon=3 * DAY, target_load=0.8, seed=3)
    jobs, info = generate_with_info(config, H100X16)
    assert info.derived == "jobs" and info.jobs == len(jobs)
    # The span is the horizon up to the sampling error of the heavy-tailed mean job.
    assert jobs[-1].submit == pytest.approx(3 * DAY, rel=0.25)
    capacity = 16 * 8 * H100.speed
    load = _gpu_seconds(jobs) / (capacity * jobs[-1].submit)
    assert load == pytest.approx(0.8, rel=0.01)
    assert "job count derived from the horizon" in info.describe()


def test_horizon_derived_from_the_job_count() -> None:
    jobs, info = generate_with_info(WorkloadConfig(jobs=300, seed=1), H100X16)
    assert info.derived == "horizon" and len(jobs) == 300
    assert info.span == jobs[-1].submit > 0
    assert "derived from the job count" in info.describe()


def test_small_lists_work_at_the_default_load() -> None:
    # The burst basis refused these ("out of reach with load_window"); a steady list does not.
    for n in (1, 2, 30, 300):
        assert len(generate(WorkloadConfig(jobs=n, seed=0), H100X16)) == n


def test_arrival_rate_derived_from_jobs_and_horizon() -> None:
    config = WorkloadConfig(jobs=1000, horizon=DAY, target_load=None, seed=2)
    jobs, info = generate_with_info(config, H100X16)
    assert info.derived == "arrival rate"
    assert jobs[0].submit == 0 and jobs[-1].submit == pytest.approx(DAY, rel=1e-9)
    assert info.arrival_rate == pytest.approx(999 / DAY)
    assert info.offered_load == pytest.approx(
        _gpu_seconds(jobs) / (16 * 8 * H100.speed * DAY), rel=1e-9
    )


def test_a_horizon_with_jobs_and_a_load_is_refused() -> None:
    with pytest.raises(SpecError, match=r"WorkloadConfig\.horizon: .*arrival rate is derived"):
        WorkloadConfig(jobs=10, horizon=DAY, target_load=0.9)
    with pytest.raises(SpecError, match=r"WorkloadConfig\.jobs: give jobs, or a horizon"):
        WorkloadConfig(jobs=None)
    with pytest.raises(SpecError, match=r"WorkloadConfig\.horizon: must be a finite number"):
        WorkloadConfig(jobs=None, horizon=-1.0)
    with pytest.raises(SpecError, match=r"WorkloadConfig\.load_window"):
        WorkloadConfig(jobs=None, horizon=DAY, load_window=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_time_limit_is_wall_clock_on_the_slowest_eligible_node(seed: int) -> None:
    limit = 6 * 3600.0
    base = generate(WorkloadConfig(jobs=20000, seed=seed), MIXED)
    jobs, info = generate_with_info(WorkloadConfig(jobs=20000, seed=seed, time_limit=limit), MIXED)
    slowest_gpu = min(H100.speed, T4.speed)
    cut = 0
    for b, j in zip(base, jobs, strict=True):
        # A job that may land on a T4 runs at 0.5: at most limit x 0.5 reference seconds.
        # CPU-only jobs run at 1.0. The 8-GPU jobs fit only the H100 nodes.
        speed = 1.0 if not j.task.gpus else H100.speed if j.task.gpus > 4 else slowest_gpu
        assert j.runtime == min(b.runtime, limit * speed)
        cut += j.runtime < b.runtime
    assert cut == info.capped > 0
    lost = 1 - _gpu_seconds([j for j in jobs]) / _gpu_seconds(base)
    assert info.cut == pytest.approx(lost, rel=1e-9)
    assert "time limit" in info.describe()


def test_time_limit_keeps_the_arrival_clock_at_the_load() -> None:
    # The rate comes from the cut runtimes, so the load holds with the limit.
    jobs = generate(WorkloadConfig(jobs=20000, seed=4, time_limit=3600.0), H100X16)
    load = _gpu_seconds(jobs) / (16 * 8 * H100.speed * jobs[-1].submit)
    assert load == pytest.approx(0.9, rel=0.02)
    assert max(j.runtime / (H100.speed if j.task.gpus else 1.0) for j in jobs) <= 3600.0


def test_steady_arrivals_are_poisson() -> None:
    jobs = generate(WorkloadConfig(jobs=50000, seed=5), H100X16)
    gaps = np.diff([j.submit for j in jobs])
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)  # exponential: CV 1
