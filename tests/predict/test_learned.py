"""runtime/learned: LightGBM quantile regression, retrained online on the jobs that ended;
and the accuracy helpers that score predictors."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from builders import Spy
from suanli.core.model import Job, SpecError, TaskRequest
from suanli.core.registry import create
from suanli.core.seams import PLAN_Q, expected
from suanli.predict.accuracy import accuracy, replay
from suanli.predict.features import NAMES, RECENT, who
from suanli.predict.history import HistoryPredictor
from suanli.predict.learned import LearnedPredictor

SMALL = {"trees": 10, "min_train": 40, "min_data_in_leaf": 5}
"""A quick model, for the tests of mechanics."""

COL = {n: i for i, n in enumerate(NAMES)}


def job(
    id: str,
    submit: float = 0.0,
    user: str = "ann",
    tenant: str = "lab",
    gpus: int = 1,
    tasks: int = 1,
    estimate: float | None = None,
    runtime: float = 1.0,
    models: frozenset[str] = frozenset(),
) -> Job:
    return Job(
        id=id,
        submit=submit,
        runtime=runtime,
        task=TaskRequest(gpus=gpus, gpu_models=models),
        tasks=tasks,
        user=user,
        tenant=tenant,
        estimate=estimate,
    )


def trace(n: int, seed: int = 0, users: int = 30, gap: float = 600.0) -> list[Job]:
    """Jobs whose runtime depends on the user (each a log-normal median of its own) and a
    little on the GPUs asked; submissions ``gap`` seconds apart on average."""
    rng = np.random.default_rng(seed)
    mu = rng.uniform(math.log(120), math.log(36_000), users)
    out, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(gap))
        u = int(rng.integers(users))
        g = int(rng.choice([1, 2, 4, 8]))
        rt = float(np.exp(mu[u] + 0.3 * math.log2(g) + rng.normal(0, 0.5)))
        est = float(rt * rng.uniform(1, 5)) if rng.random() < 0.3 else None
        out.append(
            job(f"j{i}", t, f"u{u}", f"t{u % 4}", g, estimate=est, runtime=rt, models=frozenset())
        )
    return out


def teach(p: LearnedPredictor | HistoryPredictor, jobs: list[Job], ask: bool = True) -> None:
    """Each job asked at its submission (if ``ask``), learned at submit + runtime."""
    replay(p, jobs, (0.5,) if ask else ())


# --------------------------------------------------------------------------------------------
# retraining


@pytest.mark.parametrize(
    ("min_train", "retrain_every", "learned", "fitted_at"),
    [
        (200, 2000, 7_300, [200, 400, 800, 1600, 3200, 5200, 7200]),  # the defaults
        (10, 15, 60, [10, 20, 35, 50]),  # doubling, capped at every 15
        (5, 1000, 45, [5, 10, 20, 40]),  # doubling only
        (30, 1, 33, [30, 31, 32, 33]),  # every job
        (50, 10, 49, []),  # not yet
    ],
)
def test_fits_happen_at_the_stated_counts(
    min_train: int, retrain_every: int, learned: int, fitted_at: list[int]
) -> None:
    p = LearnedPredictor(min_train=min_train, retrain_every=retrain_every, trees=1, leaves=2)
    for i in range(learned):
        p.learn(job(f"j{i}", submit=float(i), user=f"u{i % 3}"), 10.0 + i % 7, at=i + 1.0)
    assert p.fitted_at == fitted_at
    assert p.fits == len(fitted_at) == p.version
    assert (p.train_seconds > 0) == bool(fitted_at)


def test_it_trains_on_the_last_window_of_learned_jobs() -> None:
    p = LearnedPredictor(min_train=10_000, window=50)
    teach(p, trace(120), ask=False)
    x, y = p.training_rows
    assert x.shape == (50, len(NAMES)) and y.shape == (50,)
    assert p.learned == 120


def test_before_the_first_fit_the_history_answers() -> None:
    jobs = trace(150)
    p = LearnedPredictor(min_train=200, plan_q=0.8, default=60.0, history_window=8)
    h = HistoryPredictor(plan_q=0.8, default=60.0, window=8)
    assert p.duration(jobs[0]) == h.duration(jobs[0]) == 60.0
    teach(p, jobs)
    teach(h, jobs)
    asked = trace(20, seed=9)
    assert [p.quantile(j, 0.6) for j in asked] == [h.quantile(j, 0.6) for j in asked]
    assert [p.duration(j) for j in asked] == [h.duration(j) for j in asked]
    assert p.fits == 0


# --------------------------------------------------------------------------------------------
# contract


def test_the_same_learn_sequence_gives_the_same_predictions() -> None:
    jobs, asked = trace(400), trace(50, seed=3)
    a, b = LearnedPredictor(**SMALL), LearnedPredictor(**SMALL)
    teach(a, jobs)
    teach(b, jobs)
    assert a.fits == b.fits > 0
    qs = (0.3, 0.5, 0.85, 0.9, 0.99)
    assert [a.quantile(j, q) for j in asked for q in qs] == [
        b.quantile(j, q) for j in asked for q in qs
    ]


def test_the_single_row_path_batches_and_booster_predict_agree() -> None:
    jobs, asked = trace(300), trace(40, seed=4)
    fast, slow = LearnedPredictor(**SMALL), LearnedPredictor(**SMALL)
    slow.fast = False
    teach(fast, jobs)
    teach(slow, jobs)
    assert fast._one_row is not None and slow._one_row is None
    one = [fast.quantile(j, q) for j in asked for q in (0.5, 0.9)]
    assert one == [slow.quantile(j, q) for j in asked for q in (0.5, 0.9)]
    primed = LearnedPredictor(**SMALL)
    teach(primed, jobs)
    primed.prime(asked)
    assert all(primed._preds[j.id][0] == primed.version for j in asked)
    assert [primed.quantile(j, q) for j in asked for q in (0.5, 0.9)] == one


def test_predictions_never_decrease_in_the_quantile() -> None:
    p = LearnedPredictor(**SMALL)
    teach(p, trace(300))
    qs = sorted({*np.linspace(0.0, 1.0, 101).tolist(), *p.quantiles, 0.0001, 0.9999})
    for j in trace(60, seed=5):
        vals = [p.quantile(j, q) for q in qs]
        assert all(b >= a for a, b in zip(vals, vals[1:], strict=False))
        assert all(v >= 0 for v in vals)
        # outside the grid: its end points
        assert p.quantile(j, 0.01) == p.quantile(j, 0.5) == expected(p, j)
        assert p.quantile(j, 0.999) == p.quantile(j, 0.95)
        assert p.duration(j) == p.quantile(j, PLAN_Q)


def test_between_grid_points_it_interpolates_in_log_space() -> None:
    p = LearnedPredictor(**SMALL)
    teach(p, trace(300))
    j = trace(1, seed=6)[0]
    lo, hi = p.quantile(j, 0.8), p.quantile(j, 0.9)
    mid = p.quantile(j, 0.85)
    assert mid == pytest.approx(math.expm1((math.log1p(lo) + math.log1p(hi)) / 2), rel=1e-9)


def test_it_never_reads_the_true_runtime() -> None:
    jobs, asked = trace(300), trace(40, seed=7)
    spied = LearnedPredictor(**SMALL)
    truth = {j.id: j.runtime for j in jobs}
    events = sorted((j.submit + j.runtime, j.submit, j.id) for j in jobs)
    by_id = {j.id: j for j in jobs}
    results = []
    for sentinel in (None, 0.0, 9e9):
        p = spied if sentinel is None else LearnedPredictor(**SMALL)

        def shown(j: Job, s: float | None = sentinel) -> Job:
            return Spy(j) if s is None else replace(j, runtime=s)  # type: ignore[return-value]

        for at, _, jid in events:
            p.quantile(shown(by_id[jid]), 0.9)
            p.learn(shown(by_id[jid]), truth[jid], at)
        assert p.fits > 0
        results.append([p.quantile(shown(j), q) for j in asked for q in (0.5, 0.9)])
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("asked", ["never", "at submit", "late"])
def test_a_training_row_sees_only_jobs_that_ended_by_its_submission(asked: str) -> None:
    p = LearnedPredictor(min_train=1, trees=1, leaves=2)
    p.learn(job("b", submit=0.0), 50.0, at=50.0)  # ended before x's submission
    x = job("x", submit=100.0)
    if asked == "at submit":
        p.quantile(x, 0.5)
    p.learn(job("c", submit=0.0), 150.0, at=150.0)  # ended after it
    p.learn(job("d", submit=0.0, gpus=2), 120.0, at=120.0)  # after it, told out of order
    if asked == "late":
        p.quantile(x, 0.5)
    p.learn(x, 200.0, at=300.0)
    row = p.training_rows[0][-1]
    assert row[COL["user_count"]] == 1
    assert row[COL["user_median"]] == row[COL["user_last"]] == pytest.approx(math.log1p(50.0))
    assert row[COL["user_mean"]] == pytest.approx(math.log1p(50.0))
    assert row[COL["user_shape_median"]] == pytest.approx(math.log1p(50.0))
    # a later job of the user sees all four (c, d and x ended by then), in end-time order
    late = p.row(job("y", submit=400.0))
    assert late[COL["user_count"]] == 4
    assert late[COL["user_last"]] == pytest.approx(math.log1p(200.0))
    assert late[COL["user_median"]] == pytest.approx(math.log1p((120.0 + 150.0) / 2))
    assert late[COL["user_shape_median"]] == pytest.approx(math.log1p(150.0))


def test_no_training_row_uses_a_job_that_ended_after_its_submission() -> None:
    jobs = trace(400, gap=60.0)  # long jobs overlap many later submissions
    p = LearnedPredictor(min_train=100, trees=5)
    order: list[tuple[Job, float]] = []
    learn = p.learn

    def spy_learn(j: Job, rt: float, at: float) -> None:
        order.append((j, at))
        learn(j, rt, at)

    p.learn = spy_learn  # type: ignore[method-assign]
    replay(p, jobs, (0.5,))
    x, _ = p.training_rows
    assert len(order) == len(x) == 400
    for (j, _), row in zip(order, x, strict=True):
        before = [(at, o.runtime) for o, at in order if who(o) == who(j) and at <= j.submit]
        assert row[COL["user_count"]] == min(len(before), RECENT)
        if before:
            assert row[COL["user_last"]] == pytest.approx(math.log1p(max(before)[1]))
        else:
            assert math.isnan(row[COL["user_last"]])


def test_the_features_are_the_request_and_the_submission_time() -> None:
    p = LearnedPredictor()
    a = p.row(job("a", submit=3 * 86_400 + 5 * 3600 + 7, gpus=4, tasks=2, estimate=90.0))
    b = p.row(job("b", user="bob", tenant="ops", models=frozenset({"V100", "A100"})))
    c = p.row(job("c", user="", tenant="ops"))
    assert [a[COL[k]] for k in ("user", "tenant", "gpu_model", "tasks", "gpus_per_task")] == [
        0,
        0,
        0,
        2,
        4,
    ]
    assert (a[COL["gpus"]], a[COL["gpu_milli"]], a[COL["estimate"]]) == (8, 1000, 90.0)
    assert (a[COL["hour"]], a[COL["weekday"]]) == (5, 3)
    assert (b[COL["user"]], b[COL["tenant"]], b[COL["gpu_model"]]) == (1, 1, 1)
    assert math.isnan(b[COL["estimate"]]) and math.isnan(b[COL["user_median"]])
    assert (c[COL["user"]], c[COL["tenant"]]) == (2, 1)  # "ops" the tenant, as a user of its own
    assert p.row(job("a")) is p.row(job("a"))  # kept until learned


# --------------------------------------------------------------------------------------------
# accuracy


def test_it_learns_who_runs_long_much_better_than_a_global_median() -> None:
    jobs = trace(3000, seed=11)
    held = jobs[2000:]
    p = LearnedPredictor()
    true, pred = replay(p, jobs, (0.5, 0.9), score=[j.id for j in held])
    assert p.fits == 4 and p.fitted_at == [200, 400, 800, 1600]
    got = accuracy(true, pred)
    seen = np.array([j.runtime for j in jobs[:2000]])
    base = accuracy(
        true,
        {0.5: np.full(len(true), np.median(seen)), 0.9: np.full(len(true), np.quantile(seen, 0.9))},
    )
    assert got.mae < 0.6 * base.mae
    assert got.median_rel_error < 0.5 * base.median_rel_error
    assert 0.8 <= got.coverage[0.9] <= 0.97
    assert 0.4 <= got.coverage[0.5] <= 0.6


def test_accuracy_scores_the_median_and_the_coverage() -> None:
    true = [100.0, 200.0, 300.0, 0.0]
    got = accuracy(true, {0.5: [110.0, 150.0, 300.0, 0.5], 0.9: [200.0, 199.0, 300.0, 1.0]})
    assert got.jobs == 4
    assert got.mae == pytest.approx((10 + 50 + 0 + 0.5) / 4)
    assert got.median_rel_error == pytest.approx(np.median([0.1, 0.25, 0.0, 0.5]))
    assert got.coverage == {0.5: 0.75, 0.9: 0.75}
    with pytest.raises(ValueError, match="median"):
        accuracy(true, {0.9: true})
    with pytest.raises(ValueError, match="4 true runtimes"):
        accuracy(true, {0.5: [1.0]})


def test_replay_asks_at_submission_and_teaches_at_the_end() -> None:
    calls: list[tuple[str, str, float]] = []

    class Recorder:
        plan_q = 0.9

        def duration(self, j: Job) -> float:
            return self.quantile(j, self.plan_q)

        def quantile(self, j: Job, q: float) -> float:
            calls.append(("ask", j.id, q))
            return 1.0

        def learn(self, j: Job, runtime: float, at: float) -> None:
            calls.append(("learn", j.id, at))

    jobs = [job("a", 0.0, runtime=10.0), job("b", 5.0, runtime=1.0), job("c", 10.0, runtime=1.0)]
    true, pred = replay(Recorder(), jobs, (0.5,), score=["b", "c"])
    assert calls == [
        ("ask", "b", 0.5),  # only the scored jobs are asked
        ("learn", "b", 6.0),
        ("learn", "a", 10.0),  # ends first at equal times
        ("ask", "c", 0.5),
        ("learn", "c", 11.0),
    ]
    assert true.tolist() == [1.0, 1.0] and pred[0.5].tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------------------------
# options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"plan_q": 1.2}, r"runtime/learned: plan_q must be a quantile in \(0, 1\)"),
        ({"default": -5}, "runtime/learned: default must be a finite number of seconds"),
        ({"quantiles": []}, "runtime/learned: quantiles must be a non-empty list"),
        ({"quantiles": [0.5, 1.0]}, r"runtime/learned: quantiles must be a non-empty list in \(0"),
        ({"quantiles": [0.9, 0.5]}, "runtime/learned: quantiles must be strictly increasing"),
        ({"quantiles": "0.5"}, "runtime/learned: quantiles must be a list of numbers"),
        ({"min_train": 0}, "runtime/learned: min_train must be an integer >= 1"),
        ({"retrain_every": 0}, "runtime/learned: retrain_every must be an integer >= 1"),
        ({"window": -1}, "runtime/learned: window must be an integer >= 1"),
        ({"seed": -1}, "runtime/learned: seed must be an integer >= 0"),
        ({"trees": 0}, "runtime/learned: trees must be an integer >= 1"),
        ({"leaves": 1}, "runtime/learned: leaves must be an integer >= 2"),
        ({"learning_rate": 0}, r"runtime/learned: learning_rate must be in \(0, 1\]"),
        ({"min_data_in_leaf": 0}, "runtime/learned: min_data_in_leaf must be an integer >= 1"),
        ({"history_window": 0}, "runtime/learned: history_window must be an integer >= 1"),
        (
            {"history_window": 2, "min_samples": 3},
            r"runtime/learned: min_samples \(3\) must be at most history_window \(2\)",
        ),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        create("runtime", "learned", **options)


def test_it_is_registered_by_entry_point_with_its_options() -> None:
    p = create("runtime", "learned", plan_q=0.8, quantiles=[0.5, 0.8], seed=3, default=60.0)
    assert isinstance(p, LearnedPredictor)
    assert (p.plan_q, p.quantiles, p.seed) == (0.8, (0.5, 0.8), 3)
    assert p.duration(job("x")) == 60.0
    assert p.duration(job("x", estimate=7.0)) == 7.0
    with pytest.raises(ValueError, match="learned runtime"):
        p.learn(job("x"), -1.0, at=0.0)
