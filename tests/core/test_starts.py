"""Start-time estimates: conservative plans of the queue under expected runtimes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.builders import gpus_cluster, job, take, task

from suanli.core.decisions import JobPlacement
from suanli.core.model import Job
from suanli.core.policies.runtime_oracle import TrueRuntime as Oracle
from suanli.core.starts import GRID_GROWTH, GRID_STEP_S, StartEstimator, _Calibration
from suanli.core.view import ClusterView


class Quantiles:
    """A predictor whose P50 is the true runtime and whose P90 is twice it."""

    plan_q = 0.9

    def quantile(self, j: Job, q: float) -> float:
        return j.runtime * (1.0 if q <= 0.5 else 2.0)

    def duration(self, j: Job) -> float:
        return self.quantile(j, self.plan_q)

    def learn(self, j: Job, runtime: float, at: float) -> None:
        pass


def near(got: float, want: float, now: float = 0.0) -> bool:
    """Equal to within the plan's time buckets (``suanli.core.starts.grid``): a start or an
    end falls to the next bucket's edge, a bucket being 10 s or 2% of how far ahead it is."""
    return abs(got - want) <= 2 * (GRID_STEP_S + (GRID_GROWTH - 1) * (want - now)) + 1e-6


def running(view: ClusterView, j: Job, node: int, gpus: list[int], start: float):  # type: ignore[no-untyped-def]
    tp = take(view, node, gpus, j.task)
    return (j, start, JobPlacement.of((tp,)))


def test_a_job_waits_for_the_running_jobs_it_needs_to_end() -> None:
    view = ClusterView(gpus_cluster(4))
    r1 = running(view, job("r1", runtime=100.0, gpus=2), 0, [0, 1], 0.0)
    r2 = running(view, job("r2", runtime=300.0, gpus=2), 0, [2, 3], 0.0)
    est = StartEstimator(view, Oracle())
    pend = [
        job("a", 10.0, 50.0, gpus=2),
        job("b", 10.0, 50.0, gpus=4),
        job("c", 10.0, 40.0, gpus=2),
    ]
    out = est.estimate(10.0, lambda: [r1, r2], lambda: pend)
    assert out["a"].p50 == out["a"].p90 and near(out["a"].p50, 100.0, 10.0)  # r1's GPUs
    assert near(out["b"].p50, 300.0, 10.0)  # all four: after r2
    # c backfills into r1's freed pair after a ends (150) if it ends before b's 300: it does.
    assert near(out["c"].p50, 150.0, 10.0) and out["c"].p50 < out["b"].p50


def test_the_range_is_the_planned_wait_scaled_by_how_real_waits_compared() -> None:
    view = ClusterView(gpus_cluster(2))
    r = running(view, job("r", runtime=100.0, gpus=2), 0, [0, 1], 0.0)
    est = StartEstimator(view, Quantiles(), refresh=0.0)
    a = job("a", 0.0, 50.0, gpus=2)
    first = est.estimate(0.0, lambda: [r], lambda: [a])["a"]
    assert first.p50 == first.p90 and near(first.p50, 100.0)  # nothing learned yet: the plan
    # Forty jobs planned to wait 1,000 s waited 1,000 to 3,000 s.
    for i in range(40):
        w = job(f"w{i}", 0.0, 10.0, gpus=2)
        est._said[w.id] = (0.0, 1000.0)
        est.started(w.id, 1000.0 + 50.0 * i)
    b = job("b", 1.0, 50.0, gpus=2)
    got = est.estimate(1.0, lambda: [r], lambda: [b])["b"]
    planned = 100.0 - 1.0
    assert near(got.p50, 1.0 + planned * 2.0, 1.0) and near(got.p90, 1.0 + planned * 2.8, 1.0)


def test_a_job_past_its_expected_end_runs_as_long_again_until_ended_jobs_say_more() -> None:
    view = ClusterView(gpus_cluster(1))
    r = running(view, job("r", runtime=100.0), 0, [0], 0.0)
    est = StartEstimator(view, Oracle(), refresh=0.0)
    assert near(est.estimate(500.0, lambda: [r], lambda: [job("a", 400.0)])["a"].p50, 1000.0, 500.0)


def test_the_calibration_learns_how_far_off_predictions_were() -> None:
    # Every ended job ran three times its predicted median: jobs are planned at 3x.
    view = ClusterView(gpus_cluster(1))
    est = StartEstimator(view, Quantiles(), refresh=0.0)
    done = [job(f"d{i}", 0.0, 100.0) for i in range(40)]
    est.estimate(0.0, list, lambda: done)  # each is predicted once, when first seen
    for d in done:
        est.learn(d, 300.0)
    r = running(view, job("r", runtime=100.0), 0, [0], 0.0)
    out = est.estimate(10.0, lambda: [r], lambda: [job("a", 10.0, 50.0), job("b", 10.0, 50.0)])
    assert out["a"].p50 == out["a"].p90 and near(out["a"].p50, 300.0, 10.0)  # r: 3 x 100
    assert near(out["b"].p50, 450.0, 10.0)  # a runs 3 x 50 after it


def test_the_calibration_keeps_its_window_sorted_as_cases_come_and_go() -> None:
    # Kept sorted incrementally (the oldest out, the new one in), with repeated values: always
    # the sorted window of the latest cases, as sorting it again would give.
    rng = np.random.default_rng(1)
    cal = _Calibration(window=50)
    window: list[float] = []
    for _ in range(400):
        base = float(rng.choice([1.0, 5.0, 10.0, 100.0]))
        ran = float(rng.choice([1.0, 5.0, 10.0, 100.0, rng.exponential(50.0)]))
        cal.learn(base, ran)
        window = [*window, math.log(max(ran, 1.0) / max(base, 1.0))][-50:]
        assert np.array_equal(cal._ready_sorted()[0], np.sort(np.array(window)))


def test_a_running_job_ends_as_the_past_jobs_that_ran_as_long_did() -> None:
    # Half the past jobs ran 1x their median, half 10x: one that has run 6x is one of the
    # long ones, so it is expected to run 10x; one that has run 0.5x, 5.5x on average.
    view = ClusterView(gpus_cluster(1))
    est = StartEstimator(view, Quantiles(), refresh=0.0)
    done = [job(f"d{i}", 0.0, 100.0) for i in range(60)]
    est.estimate(0.0, list, lambda: done)
    for i, d in enumerate(done):
        est.learn(d, 100.0 if i % 2 else 1000.0)
    r = running(view, job("r", runtime=100.0), 0, [0], 0.0)
    first = est.estimate(50.0, lambda: [r], lambda: [job("a", 50.0)])["a"].p50
    assert near(first, 550.0, 50.0)  # either kind: 5.5 x on average
    # Past the end it foresaw, it is one of the long ones.
    again = est.estimate(600.0, lambda: [r], lambda: [job("a", 600.0)])["a"].p50
    assert near(again, 1000.0, 600.0)


def test_an_impossible_job_gets_no_start_and_others_are_not_held() -> None:
    view = ClusterView(gpus_cluster(2, 2))
    est = StartEstimator(view, Oracle())
    out = est.estimate(0.0, list, lambda: [job("big", gpus=4), job("small", gpus=2)])
    assert not out["big"].known and math.isinf(out["big"].p90)
    assert out["small"].p50 == 0.0


def test_a_task_bigger_than_a_node_plans_on_the_nodes_that_can_hold_it() -> None:
    # Two 2-GPU nodes and one 4-GPU node: a 4-GPU task has only the big node.
    view = ClusterView(gpus_cluster(2, 2, 4))
    r = running(view, job("r", runtime=100.0, gpus=1), 2, [0], 0.0)
    est = StartEstimator(view, Oracle())
    out = est.estimate(
        0.0, lambda: [r], lambda: [job("a", t=task(4)), job("b", t=task(2), tasks=2)]
    )
    assert near(out["a"].p50, 100.0)
    assert out["b"].p50 == 0.0  # two 2-GPU tasks fit on the small nodes now


def test_within_refresh_later_jobs_go_after_the_plan_and_nothing_earlier_moves() -> None:
    view = ClusterView(gpus_cluster(2))
    r = running(view, job("r", runtime=100.0, gpus=2), 0, [0, 1], 0.0)
    est = StartEstimator(view, Oracle(), refresh=60.0)
    a, b = job("a", 0.0, 100.0, gpus=2), job("b", 30.0, 10.0, gpus=1)
    first = est.estimate(0.0, lambda: [r], lambda: [a])
    later = est.estimate(30.0, lambda: [r], lambda: [a, b])
    assert later["a"] == first["a"] and est.plans == 1
    assert near(later["b"].p50, 200.0)  # after a, which the plan holds
    # At submission: only the new job is asked for; the queue is not even read.
    c = job("c", 40.0, 10.0, gpus=1)
    assert near(est.estimate(40.0, lambda: [r], list, [c])["c"].p50, 200.0)
    est.estimate(61.0, lambda: [r], lambda: [a])  # the same jobs: the plan stands
    assert est.plans == 1
    est.estimate(62.0, lambda: [r], lambda: [a, b, c])  # jobs came since: a plan
    assert est.plans == 2


def test_a_current_what_if_plans_again_when_the_jobs_changed_within_refresh() -> None:
    view = ClusterView(gpus_cluster(2))
    est = StartEstimator(view, Oracle(), refresh=300.0)
    asked = job("q", 0.0, 10.0, gpus=2)
    assert near(est.what_if(0.0, list, list, asked).p50, 0.0)  # an idle cluster: at once
    r = running(view, job("r", runtime=100.0, gpus=2), 0, [0, 1], 5.0)
    # A job started since: the plan made at 0 stands within refresh, and does not hold it;
    # a current what-if plans again (once) and waits for it.
    assert est.what_if(10.0, lambda: [r], list, asked).p50 == 10.0
    assert near(est.what_if(10.0, lambda: [r], list, asked, current=True).p50, 105.0, 10.0)
    plans = est.plans
    assert near(est.what_if(11.0, lambda: [r], list, asked, current=True).p50, 105.0, 11.0)
    assert est.plans == plans  # nothing changed since: the plan stands


def test_estimates_do_not_jump_from_one_minute_to_the_next() -> None:
    # A busy queue, asked every minute while nothing starts or ends: each estimate stays put.
    gen = np.random.default_rng(3)
    view = ClusterView(gpus_cluster(8, 8, 8, 8))
    rows = []
    for n in range(4):
        for g in range(8):
            rows.append(
                running(view, job(f"r{n}{g}", runtime=float(gen.uniform(600, 7200))), n, [g], 0.0)
            )
    pend = [
        job(f"p{i}", 0.0, float(gen.uniform(60, 3600)), gpus=int(gen.choice([1, 2, 4, 8])))
        for i in range(200)
    ]
    est = StartEstimator(view, Quantiles(), refresh=60.0)
    first = est.estimate(0.0, lambda: rows, lambda: pend)
    for minute in range(1, 10):
        now = 60.0 * minute
        again = est.estimate(now, lambda: rows, lambda: pend)
        for jid, e in first.items():
            assert near(again[jid].p50, e.p50, now) and near(again[jid].p90, e.p90, now)
    assert est.plans == 1  # nothing changed, and nothing it foresaw came: the plan stands
    # A job ends: the next request a refresh later plans again.
    gone = rows.pop()
    moved = est.estimate(600.0, lambda: rows, lambda: pend)
    assert est.plans == 2 and gone[0].id not in moved


def test_a_health_change_plans_again_at_once() -> None:
    view = ClusterView(gpus_cluster(2, 2))
    est = StartEstimator(view, Oracle(), refresh=3600.0)
    a = job("a", gpus=2, tasks=2)
    assert est.estimate(0.0, list, lambda: [a])["a"].p50 == 0.0
    view.set_health(1, False)
    assert not est.estimate(1.0, list, lambda: [a])["a"].known


def test_refresh_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="refresh"):
        StartEstimator(ClusterView(gpus_cluster(1)), Oracle(), refresh=-1.0)
