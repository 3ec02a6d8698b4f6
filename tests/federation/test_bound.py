"""The federation's mean-JCT bound (``suanli.federation.bound``): exact where nothing
contends, between the loose bound and the true optimum where jobs contend for the fast GPUs,
never above what any router reaches through the federation simulator, and a clear error for
a job no GPU could hold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.federation.test_engine import ROUTERS, federation, region

from suanli.core.model import Job, SpecError, TaskRequest
from suanli.federation.bound import fastest_allowed, jct_bound
from suanli.federation.engine import federate
from suanli.federation.model import Dataset, Federation, FedJob, Network

H = 3600.0


def two_speeds(fast: str = "1x1xA100") -> Federation:
    """Eight V100 nodes (the bulk, speed 1) in ``us`` and ``fast`` in ``us2`` (A100: 2.5)."""
    return Federation((region("us", "8x8xV100", 3.0, "us"), region("us2", fast, 4.0, "us"),
                       region("eu", "1x8xV100", 3.3, "eu")),
                      Network(), {"eu-only": Dataset("eu-only", 1.0, "eu", frozenset({"eu"}))})  # fmt: skip


def one(i: int, runtime_h: float, submit_h: float = 0.0, gpus: int = 1, **kw: object) -> FedJob:
    job = Job(f"j{i}", submit_h * H, runtime_h * H, TaskRequest(gpus=gpus), tenant="t")
    return FedJob(job, "us", **kw)  # type: ignore[arg-type]


def test_alone_the_bound_is_the_run_on_the_fastest_gpu() -> None:
    b = jct_bound(two_speeds(), [one(0, 2.5)])
    assert b.mean_jct_s == pytest.approx(1.0 * H, rel=1e-6)
    assert b.loose_s == pytest.approx(1.0 * H)
    assert b.free_s == pytest.approx(2.5 * H)
    assert b.classes == ((1.0, 72, False), (2.5, 1, True))
    assert b.fast_gpu_h == {1: pytest.approx(1.0)}


def test_two_jobs_for_one_fast_gpu() -> None:
    # The best schedule: one runs on the A100 (1 h), the other waits for it (1 + 1 h) rather
    # than run 2.5 h on a V100: a mean of 1.5 h. The bound lies between that and the loose
    # bound (both at once on the A100: 1 h).
    b = jct_bound(two_speeds(), [one(0, 2.5), one(1, 2.5)])
    assert 1.0 * H < b.mean_jct_s <= 1.5 * H + 1e-6
    assert b.loose_s == pytest.approx(1.0 * H)
    # The A100 is one GPU: at most its hours are used, over the window of the two jobs.
    assert sum(b.fast_gpu_h.values()) <= 2.5 + 1e-6


def test_what_may_not_go_to_the_fast_gpus_gets_no_help_from_them() -> None:
    fed = two_speeds()
    kept = [one(0, 2.5, data=("eu-only",)), one(1, 2.5, regions=frozenset({"us"})),
            one(2, 2.5, gpus=8)]  # fmt: skip
    b = jct_bound(fed, kept)
    assert b.mean_jct_s == pytest.approx(2.5 * H, rel=1e-6)
    assert b.fast_gpu_h == {}


def test_fastest_allowed_follows_the_same_rules() -> None:
    fed = two_speeds()
    kept = [one(0, 2.5), one(1, 2.5, data=("eu-only",)), one(2, 2.5, regions=frozenset({"us"})),
            one(3, 2.5, gpus=8), one(4, 2.5, regions=frozenset({"us2"}))]  # fmt: skip
    assert fastest_allowed(fed, kept) == [2.5, 1.0, 1.0, 1.0, 2.5]
    held = Job("h", 0.0, H, TaskRequest(gpus=1, gpu_models=frozenset({"H100"})), tenant="t")
    assert fastest_allowed(fed, [FedJob(held, "us")]) == [0.0]


def test_a_divisible_job_counts_as_two_halves() -> None:
    fed = two_speeds("1x8xA100")
    whole = Job("w", 0.0, 5 * H, TaskRequest(gpus=8), tasks=2, tenant="t")
    b = jct_bound(fed, [FedJob(whole, "us")])
    split = jct_bound(fed, [FedJob(whole, "us", divisible=True)])
    # Whole, its 16 GPUs never fit the eight A100s at once. Split, the best schedule runs one
    # half there (2 h) and the other after it (2 + 2 h): its JCT, the later half's, is 4 h,
    # and the halves' mean 3 h; the bound lies between that and both halves at once (2 h).
    assert 2.0 * H <= split.mean_jct_s <= 3.0 * H + 1e-6
    assert split.mean_jct_s <= b.mean_jct_s + 1e-6  # a split can only help


def test_a_job_that_may_start_with_part_of_its_gang_counts_that_part() -> None:
    # Eight one-GPU replicas that may start with one: alone on one A100 it could run there at
    # once, so the bound is its runtime on an A100.
    job = Job("e", 0.0, 2.5 * H, TaskRequest(gpus=1), tasks=8, gang_min=1, tenant="t")
    assert jct_bound(two_speeds(), [FedJob(job, "us")]).mean_jct_s == pytest.approx(1.0 * H)


def test_a_job_no_gpu_could_hold_is_an_error_naming_it() -> None:
    job = Job("held", 0.0, H, TaskRequest(gpus=1, gpu_models=frozenset({"H100"})), tenant="t")
    with pytest.raises(SpecError, match="held"):
        jct_bound(two_speeds(), [FedJob(job, "us")])
    with pytest.raises(SpecError, match="no jobs"):
        jct_bound(two_speeds(), [])
    with pytest.raises(SpecError, match="block_s"):
        jct_bound(two_speeds(), [one(0, 1.0)], block_s=0)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**16))
def test_no_router_beats_the_bound(seed: int) -> None:
    """Through the federation simulator, every router's mean JCT is at least the bound."""
    rng = np.random.default_rng(seed)
    fed = federation()
    jobs = []
    for i in range(30):
        gpus = int(rng.choice([1, 1, 1, 2, 8]))
        job = Job(f"j{i:03d}", float(rng.uniform(0, 4 * H)), float(np.exp(rng.uniform(np.log(300), np.log(8 * H)))),
                  TaskRequest(gpus=gpus), tenant="t")  # fmt: skip
        jobs.append(FedJob(job, str(rng.choice(["us", "us2", "eu", "jp"]))))
    b = jct_bound(fed, jobs, block_s=900.0)
    assert b.loose_s <= b.mean_jct_s + 1e-6
    # Keeping wide jobs off the fast GPUs only takes schedules away.
    assert jct_bound(fed, jobs, block_s=900.0, fast_max_gpus=1).mean_jct_s >= b.mean_jct_s - 1e-6
    for router in ROUTERS:
        res = federate(fed, jobs, router, seed=seed)
        mean = float(np.mean([o.finish - o.fed.job.submit for o in res.outcomes]))
        assert b.mean_jct_s <= mean + 1e-6, router


def test_a_router_that_keeps_wide_jobs_off_the_fast_gpus_is_bounded_by_their_free_run() -> None:
    fed = two_speeds("1x8xA100")
    jobs = [one(0, 2.5, gpus=2), one(1, 2.5)]
    # Together: each at once on the eight A100s, 1 h each.
    assert jct_bound(fed, jobs).mean_jct_s == pytest.approx(1.0 * H, rel=1e-6)
    # The two-GPU job kept off them runs 2.5 h on the V100s; the one-GPU job still has them.
    kept = jct_bound(fed, jobs, fast_max_gpus=1)
    assert kept.mean_jct_s == pytest.approx((2.5 + 1.0) / 2 * H, rel=1e-6)
    assert kept.fast_gpu_h == {1: pytest.approx(1.0)}
    assert jct_bound(fed, jobs, fast_max_gpus=2).mean_jct_s == pytest.approx(1.0 * H, rel=1e-6)
    with pytest.raises(SpecError, match="fast_max_gpus must be >= 0"):
        jct_bound(fed, jobs, fast_max_gpus=-1)


def test_a_job_only_the_fast_gpus_hold_keeps_them() -> None:
    # Held to the A100 (its only model), a wide job cannot be kept off it by any router.
    fed = two_speeds("1x8xA100")
    held = Job("h", 0.0, 2.5 * H, TaskRequest(gpus=2, gpu_models=frozenset({"A100"})), tenant="t")
    b = jct_bound(fed, [FedJob(held, "us")], fast_max_gpus=1)
    assert b.mean_jct_s == pytest.approx(1.0 * H, rel=1e-6)
