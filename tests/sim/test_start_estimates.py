"""The simulator's start-time estimates: made at each job's submission, kept per job, and
scored against the real start."""

from __future__ import annotations

import numpy as np

from builders import cluster, job, node
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.export import job_columns


def queue_of_equal_jobs(n: int = 40) -> list:  # type: ignore[type-arg]
    """One GPU, a job of 100 s every 50 s: job k starts at 100 k, having waited 50 k."""
    return [job(f"j{k:02d}", 50.0 * k, 100.0, user="u") for k in range(n)]


def test_each_job_gets_its_start_estimated_at_submission() -> None:
    jobs = queue_of_equal_jobs()
    res = simulate(cluster(node("n0", 1)), jobs, PolicySet.parse("fifo@history+best-fit"),
                   start_estimates=True)  # fmt: skip
    rec = res.records
    assert rec.start_estimate is not None
    p50, p90 = rec.start_estimate
    assert p50[0] == p90[0] == 0.0  # it started at once
    assert bool((p90 >= p50).all())
    # Once three jobs have ended (by 300 s), history knows the runtime: the plan is the queue.
    late = slice(7, None)
    err = np.abs(rec.start[late] - p50[late]) / (rec.start[late] - rec.submit[late])
    assert float(np.median(err)) < 0.05
    cols = job_columns(res)
    assert cols["start_error"][10] == rec.start[10] - p50[10]
    assert not np.isnan(cols["start_p50"]).any()


def test_without_a_predictor_in_the_policy_set_the_estimates_use_history_of_their_own() -> None:
    jobs = queue_of_equal_jobs()
    res = simulate(cluster(node("n0", 1)), jobs, PolicySet.parse("fifo+best-fit"),
                   start_estimates=True)  # fmt: skip
    p50, _ = res.records.start_estimate  # type: ignore[misc]
    rec = res.records
    err = np.abs(rec.start[7:] - p50[7:]) / (rec.start[7:] - rec.submit[7:])
    assert float(np.median(err)) < 0.05


def test_estimates_are_off_unless_asked_for_and_change_no_decision() -> None:
    jobs = queue_of_equal_jobs(25)
    c = cluster(node("n0", 2))
    plain = simulate(c, jobs, PolicySet.parse("fifo/easy@history+best-fit"))
    asked = simulate(c, jobs, PolicySet.parse("fifo/easy@history+best-fit"), start_estimates=True)
    assert plain.records.start_estimate is None
    assert np.array_equal(plain.records.start, asked.records.start)
    assert np.isnan(job_columns(plain)["start_p50"]).all()
