"""Entitlement met per queue and Jain's index, on hand-computed examples."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from builders import gpus_cluster, job
from suanli.core.model import MILLI, ClusterSpec, Job
from suanli.core.tenancy import GPU, QueueSpec, TenancySpec
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.fairness import entitlement_met, fairness, jain
from suanli.sim.results import JobRecords, SimResult, summarise

NAN = math.nan


def quotas(**gpus: int) -> TenancySpec:
    """Queues named as given, each with a nominal of that many GPUs."""
    return TenancySpec(tuple(QueueSpec(q, nominal={GPU: g * MILLI}) for q, g in gpus.items()))


def result(
    spec: ClusterSpec,
    jobs: list[Job],
    start: list[float],
    finish: list[float],
    attempts: list[tuple[int, float, float]],
    gpus: list[int] | None = None,
) -> SimResult:
    """A result with the given outcomes (``jobs`` in submit order; ``gpus`` held per job)."""
    rec = JobRecords.empty(jobs)
    rec.start = np.array(start, dtype=np.float64)
    rec.finish = np.array(finish, dtype=np.float64)
    held = gpus if gpus is not None else [j.task.gpus for j in jobs]
    rec.gpu_milli = np.array(held, dtype=np.int64) * MILLI
    rec.attempts = (
        np.array([a[0] for a in attempts], dtype=np.int64),
        np.array([a[1] for a in attempts], dtype=np.float64),
        np.array([a[2] for a in attempts], dtype=np.float64),
    )
    empty = np.zeros(0)
    return summarise(
        label="hand",
        cluster=spec,
        jobs=jobs,
        rec=rec,
        series=(empty, empty, empty, empty),
        end=None,
        cycles=0,
        decisions=0,
        wall_s=0.0,
    )


# ------------------------------------------------------------------------------- Jain's index


def test_jain_equal_values_is_one() -> None:
    assert jain([0.7, 0.7, 0.7]) == pytest.approx(1.0)
    assert jain([1.0]) == 1.0
    assert jain([0.0, 0.0]) == 1.0


def test_jain_one_of_two_is_a_half() -> None:
    assert jain([1.0, 0.0]) == pytest.approx(0.5)
    assert jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # (1 + 0.5)^2 / (2 * (1 + 0.25)) = 2.25 / 2.5
    assert jain([1.0, 0.5]) == pytest.approx(0.9)


@pytest.mark.parametrize("values", [[], [1.0, -0.1], [math.nan], [math.inf, 1.0]])
def test_jain_bad_values(values: list[float]) -> None:
    with pytest.raises(ValueError, match="Jain"):
        jain(values)


# ------------------------------------------------------------------------------- entitlement


def test_a_tenant_that_always_gets_its_entitlement_scores_one() -> None:
    # Queue a (nominal 2): a1 holds 2 GPUs over [0, 100]; a2 (1 GPU) arrives at 50 and runs at
    # once. Its demand is 2 then 3, its entitlement 2, what it holds 2 then 3: x = 1. Queue b
    # only submits at 100, the end of the window: never owed anything, x = 1, outside Jain.
    spec = gpus_cluster(8)
    jobs = [
        job("a1", 0, 100, gpus=2, queue="a"),
        job("a2", 50, 100, gpus=1, queue="a"),
        job("b1", 100, 10, gpus=1, queue="b"),
    ]
    res = result(
        spec, jobs, [0, 50, 100], [100, 150, 110], [(0, 0, 100), (1, 50, 150), (2, 100, 110)]
    )
    f = fairness(res, jobs, quotas(a=2, b=1))
    assert f.met == {"a": 1.0, "b": 1.0}
    assert f.entitled_gpu_hours["a"] == pytest.approx(2 * 100 / 3600)
    assert f.entitled_gpu_hours["b"] == 0.0
    assert f.jain == 1.0
    assert f.min_met == 1.0


def test_a_tenant_that_gets_half_of_it_scores_a_half() -> None:
    # One 2-GPU node, FIFO on the whole pool. j1 (queue b, 2 GPUs, 0..100) takes the node;
    # j2 (queue a, 1 GPU) arrives at 0 too but waits until 100 and runs 100..200; j3 at 200
    # closes the window [0, 200]. Queue a (nominal 1) is owed 1 GPU over 200 s and holds it
    # over 100 s: x = 0.5. Queue b (nominal 1) is owed 1 GPU over [0, 100] and holds 2 (the
    # borrowed one does not count): x = 1. Jain(1, 0.5) = 0.9.
    spec = gpus_cluster(2)
    jobs = [
        job("j1", 0, 100, gpus=2, queue="b"),
        job("j2", 0, 100, gpus=1, queue="a"),
        job("j3", 200, 10, gpus=1, queue="b"),
    ]
    res = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    ten = quotas(a=1, b=1)
    assert entitlement_met(res, jobs, ten) == {"a": pytest.approx(0.5), "b": pytest.approx(1.0)}
    f = fairness(res, jobs, ten)
    assert f.jain == pytest.approx(0.9)
    assert f.min_met == pytest.approx(0.5)
    assert f.received_gpu_hours["a"] == pytest.approx(100 / 3600)
    assert f.entitled_gpu_hours["a"] == pytest.approx(200 / 3600)


def test_only_the_guarantee_is_owed() -> None:
    # Queue a (nominal 2) asks 4 GPUs (two 2-GPU jobs) over [0, 100] and holds 2: its
    # entitlement is min(2, 4) = 2, all of it met.
    spec = gpus_cluster(8)
    jobs = [
        job("a1", 0, 100, gpus=2, queue="a"),
        job("a2", 0, 100, gpus=2, queue="a"),
        job("z", 100, 1, gpus=1, queue="a"),
    ]
    res = result(
        spec, jobs, [0, 100, 100], [100, 200, 101], [(0, 0, 100), (1, 100, 200), (2, 100, 101)]
    )
    assert entitlement_met(res, jobs, quotas(a=2)) == {"a": 1.0}


def test_preempted_attempts_count_only_while_they_run() -> None:
    # Queue a (nominal 2): x (2 GPUs) runs [0, 40), is preempted, waits, runs [60, 100].
    # Owed 2 GPUs over [0, 100] (200 GPU-s), held 2 over 80 s (160 GPU-s): x = 0.8.
    spec = gpus_cluster(8)
    jobs = [job("x", 0, 80, gpus=2, queue="a"), job("m", 100, 1, gpus=1, queue="b")]
    res = result(spec, jobs, [0, 100], [100, 101], [(0, 0, 40), (0, 60, 100), (1, 100, 101)])
    assert entitlement_met(res, jobs, quotas(a=2, b=1))["a"] == pytest.approx(0.8)


def test_a_job_that_never_starts_is_owed_to_the_end_of_the_window() -> None:
    spec = gpus_cluster(8)
    jobs = [job("x", 0, 80, gpus=1, queue="a"), job("m", 100, 1, gpus=1, queue="b")]
    res = result(spec, jobs, [NAN, 100], [NAN, 101], [(1, 100, 101)])
    f = fairness(res, jobs, quotas(a=1, b=1))
    assert f.met["a"] == 0.0
    assert f.entitled_gpu_hours["a"] == pytest.approx(100 / 3600)
    assert f.jain == 1.0  # b was never owed anything: only a counts


def test_a_run_cut_off_before_it_ends_holds_its_gpus_from_its_start() -> None:
    # With simulate(until=...), the attempt in progress is not recorded: x started at 50 and
    # still runs at 100, the end of the window. Owed 1 GPU over 100 s, held over 50 s.
    spec = gpus_cluster(8)
    jobs = [job("x", 0, 500, gpus=1, queue="a"), job("m", 100, 1, gpus=1, queue="a")]
    res = result(spec, jobs, [50, 100], [NAN, 101], [(1, 100, 101)])
    assert entitlement_met(res, jobs, quotas(a=1))["a"] == pytest.approx(0.5)


def test_with_until_in_the_simulator() -> None:
    # One GPU: a1 (queue a) runs 0..1000; b1 (queue b) arrives at 0, waits; m at 500 closes
    # the window; the run stops at 600 with a1 still running (no ended attempt).
    spec = gpus_cluster(1)
    jobs = [
        job("a1", 0, 1000, gpus=1, queue="a"),
        job("b1", 0, 10, gpus=1, queue="b"),
        job("m", 500, 10, gpus=1, queue="a"),
    ]
    res = simulate(spec, jobs, PolicySet("fifo", "best-fit"), until=600)
    assert entitlement_met(res, jobs, quotas(a=1, b=1)) == {"a": 1.0, "b": 0.0}


def test_all_at_once_falls_back_to_the_whole_run() -> None:
    # One GPU, both jobs submitted at 0: the window is [0, 200], the end of the run. a runs
    # 0..100 (x = 1); b waits until 100 and runs 100..200 (owed over 200 s, held 100 s).
    spec = gpus_cluster(1)
    jobs = [job("a", 0, 100, gpus=1, queue="a"), job("b", 0, 100, gpus=1, queue="b")]
    res = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    assert entitlement_met(res, jobs, quotas(a=1, b=1)) == {"a": 1.0, "b": pytest.approx(0.5)}


def test_jobs_are_matched_by_id_and_charged_like_the_scheduler() -> None:
    # The jobs' order does not matter; a job whose queue is no queue of the tenancy goes to the
    # queue serving its tenant (the org), as in the scheduler.
    spec = gpus_cluster(2)
    jobs = [
        job("j1", 0, 100, gpus=2, queue="b"),
        job("j2", 0, 100, gpus=1, queue="elsewhere", tenant="lab/a"),
        job("j3", 200, 10, gpus=1, queue="b"),
    ]
    res = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    ten = TenancySpec(
        (
            QueueSpec("a", org="lab/a", nominal={GPU: MILLI}),
            QueueSpec("b", org="lab/b", nominal={GPU: MILLI}),
        )
    )
    met = entitlement_met(res, list(reversed(jobs)), ten)
    assert met == {"a": pytest.approx(0.5), "b": pytest.approx(1.0)}


def test_missing_jobs_and_records_are_errors() -> None:
    spec = gpus_cluster(2)
    jobs = [job("j1", 0, 10, queue="a"), job("j2", 5, 10, queue="a")]
    res = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    with pytest.raises(ValueError, match="j2"):
        fairness(res, jobs[:1], quotas(a=1))
    res.records.attempts = None
    with pytest.raises(ValueError, match="attempt records"):
        fairness(res, jobs, quotas(a=1))


def test_philly_sized_result_takes_well_under_a_second() -> None:
    # 82,000 jobs over 15 queues, a fifth of them preempted once (two attempts each).
    rng = np.random.default_rng(0)
    n, nq = 82_000, 15
    submit = np.sort(rng.uniform(0, 3.3e6, n))
    wait = rng.exponential(3600, n)
    run = rng.exponential(8000, n)
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.9, 0.04, 0.03, 0.03])
    queue = rng.integers(0, nq, n)
    jobs = [
        job(f"j{i}", float(submit[i]), float(run[i]), gpus=int(gpus[i]), queue=f"q{queue[i]}")
        for i in range(n)
    ]
    start = submit + wait
    finish = start + run
    cut = rng.random(n) < 0.2
    mid = start + run / 2
    whole, split = np.flatnonzero(~cut).tolist(), np.flatnonzero(cut).tolist()
    attempts = [(i, float(start[i]), float(finish[i])) for i in whole]
    attempts += [(i, float(start[i]), float(mid[i])) for i in split]
    attempts += [(i, float(mid[i] + 60), float(finish[i])) for i in split]
    res = result(gpus_cluster(*([8] * 300)), jobs, list(start), list(finish), attempts)
    ten = quotas(**{f"q{i}": 150 for i in range(nq)})
    t = time.perf_counter()
    f = fairness(res, jobs, ten)
    elapsed = time.perf_counter() - t
    assert elapsed < 1.0
    assert all(0.0 <= x <= 1.0 for x in f.met.values())
    assert 0.0 < f.jain <= 1.0
