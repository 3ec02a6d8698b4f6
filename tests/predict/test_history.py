"""runtime/history: quantiles of the last runtimes of the most specific key with enough of them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from builders import Spy
from suanli.core.model import Job, SpecError, TaskRequest
from suanli.core.registry import create
from suanli.core.seams import PLAN_Q, expected
from suanli.predict.history import LEVELS, HistoryPredictor


def job(
    id: str,
    user: str = "ann",
    tenant: str = "lab",
    gpus: int = 1,
    tasks: int = 1,
    submit: float = 0.0,
    estimate: float | None = None,
    runtime: float = 1.0,
) -> Job:
    return Job(
        id=id,
        submit=submit,
        runtime=runtime,
        task=TaskRequest(gpus=gpus),
        tasks=tasks,
        user=user,
        tenant=tenant,
        estimate=estimate,
    )


def taught(jobs: list[tuple[Job, float]], **options: object) -> HistoryPredictor:
    p = HistoryPredictor(**options)  # type: ignore[arg-type]
    for i, (j, rt) in enumerate(jobs):
        p.learn(j, rt, at=float(i))
    return p


def random_jobs(n: int, seed: int) -> list[tuple[Job, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        j = job(
            f"j{i}",
            user=f"u{rng.integers(6)}" if rng.random() < 0.8 else "",
            tenant=f"t{rng.integers(3)}",
            gpus=int(rng.choice([1, 2, 4, 8])),
            tasks=int(rng.choice([1, 1, 2])),
            submit=float(i),
        )
        out.append((j, float(rng.lognormal(7, 1.5))))
    return out


# --------------------------------------------------------------------------------------------
# the quantile of a window


@pytest.mark.parametrize("n", [1, 2, 3, 7, 32])
def test_the_quantile_is_numpys_linear_empirical_quantile(n: int) -> None:
    rts = [float(x) for x in np.random.default_rng(n).lognormal(6, 2, n)]
    p = taught([(job(f"j{i}"), rt) for i, rt in enumerate(rts)], min_samples=1)
    for q in (0.0, 0.01, 0.25, 0.5, 0.8, 0.9, 0.95, 0.999, 1.0):
        assert p.quantile(job("x"), q) == pytest.approx(np.quantile(rts, q), rel=1e-12)


def test_the_window_keeps_the_last_runtimes_and_answers_change_with_it() -> None:
    p = taught([(job(f"old{i}"), 1e6) for i in range(8)], window=4, min_samples=1)
    assert p.quantile(job("x"), 0.5) == 1e6
    for i in range(4):
        p.learn(job(f"new{i}"), 10.0 * (i + 1), at=100.0 + i)
    assert p.quantile(job("x"), 1.0) == 40.0  # the old ones rolled out
    assert p.quantile(job("x"), 0.5) == 25.0
    p.learn(job("newest"), 1000.0, at=200.0)  # the cached answers are recomputed
    assert p.quantile(job("x"), 1.0) == 1000.0


def test_duration_is_the_planning_quantile_and_expected_the_median() -> None:
    rts = [10.0, 20.0, 30.0, 40.0, 50.0]
    p = taught([(job(f"j{i}"), rt) for i, rt in enumerate(rts)])
    assert p.plan_q == PLAN_Q
    assert p.duration(job("x")) == pytest.approx(np.quantile(rts, PLAN_Q))
    assert expected(p, job("x")) == 30.0
    assert taught([(job("a"), 5.0)] * 3, plan_q=0.5).duration(job("x")) == 5.0


# --------------------------------------------------------------------------------------------
# keys, most specific first


ANN_1 = [(job(f"a{i}", user="ann", gpus=1), 100.0) for i in range(3)]  # ann's 1-GPU jobs
ANN_8 = [(job(f"b{i}", user="ann", gpus=8), 800.0) for i in range(3)]  # ann's 8-GPU jobs
BOB_8 = [(job(f"c{i}", user="bob", gpus=8), 8000.0) for i in range(3)]  # bob (lab), 8 GPUs
EVE_2 = [(job(f"e{i}", user="eve", tenant="ops", gpus=2), 2.0) for i in range(3)]
NOBODY = [(job(f"n{i}", user="", tenant="ops", gpus=4), 40.0) for i in range(3)]


@pytest.mark.parametrize(
    ("history", "asked", "source", "answer"),
    [
        # nothing learned: the user's estimate, else the default
        ([], job("x", estimate=123.0), "estimate", 123.0),
        ([], job("x"), "default", 86_400.0),
        # the same user and shape
        (ANN_1 + ANN_8, job("x", user="ann", gpus=8), "user+shape", 800.0),
        # the user, another shape: all of the user's jobs
        (ANN_1 + ANN_8, job("x", user="ann", gpus=2), "user", 450.0),
        # another user of the tenant
        (ANN_1, job("x", user="bob", gpus=1), "tenant", 100.0),
        # another tenant, a shape seen before
        (ANN_1 + EVE_2, job("x", user="zed", tenant="far", gpus=2), "shape", 2.0),
        # nothing of the kind: all jobs
        (ANN_1 + BOB_8, job("x", user="zed", tenant="far", gpus=4), "all", 4_050.0),
        # a user-less job: its tenant stands in for its user (the tenant's user-less jobs)
        (NOBODY + EVE_2, job("x", user="", tenant="ops", gpus=4), "user+shape", 40.0),
        (NOBODY + EVE_2, job("x", user="", tenant="ops", gpus=2), "user", 40.0),
        (NOBODY + EVE_2, job("x", user="ivy", tenant="ops", gpus=1), "tenant", 21.0),
        # the job's estimate only counts while nothing is known
        (ANN_1, job("x", estimate=5.0), "user+shape", 100.0),
    ],
)
def test_the_most_specific_key_with_enough_samples_answers(
    history: list[tuple[Job, float]], asked: Job, source: str, answer: float
) -> None:
    p = taught(history)
    assert p.source(asked) == source
    assert p.quantile(asked, 0.5) == pytest.approx(answer)


@pytest.mark.parametrize(
    ("min_samples", "learned", "source"),
    [
        (3, 2, "default"),  # not even all jobs have 3
        (3, 3, "user+shape"),
        (1, 1, "user+shape"),
        (4, 3, "default"),
    ],
)
def test_a_key_answers_only_with_min_samples(min_samples: int, learned: int, source: str) -> None:
    p = taught(ANN_1[:learned], min_samples=min_samples)
    assert p.source(job("x")) == source


def test_min_samples_falls_through_to_a_wider_key() -> None:
    # ann has 2 jobs of her own: too few, the tenant (ann's 2 + bob's 3) answers
    p = taught(ANN_1[:2] + [(job(f"c{i}", user="bob", gpus=8), 50.0) for i in range(3)])
    assert p.source(job("x", user="ann")) == "tenant"
    assert p.quantile(job("x", user="ann"), 0.5) == 50.0
    assert LEVELS == ("user+shape", "user", "tenant", "shape", "all")


# --------------------------------------------------------------------------------------------
# contract


def test_the_same_learn_sequence_gives_the_same_predictions() -> None:
    seq = random_jobs(300, seed=1)
    a, b = taught(seq), taught(seq)
    asked = [j for j, _ in random_jobs(50, seed=2)]
    qs = (0.1, 0.5, 0.9, 0.97)
    assert [a.quantile(j, q) for j in asked for q in qs] == [
        b.quantile(j, q) for j in asked for q in qs
    ]


def test_predictions_never_decrease_in_the_quantile() -> None:
    p = taught(random_jobs(400, seed=3))
    qs = np.linspace(0.0, 1.0, 201)
    for j, _ in random_jobs(60, seed=4):
        vals = [p.quantile(j, float(q)) for q in qs]
        assert all(b >= a for a, b in zip(vals, vals[1:], strict=False))


def test_it_never_reads_the_true_runtime() -> None:
    seq = random_jobs(200, seed=5)
    spied = HistoryPredictor()
    for i, (j, rt) in enumerate(seq):
        spied.quantile(Spy(j), 0.9)  # type: ignore[arg-type]
        spied.learn(Spy(j), rt, at=float(i))  # type: ignore[arg-type]
    # and a sentinel runtime changes nothing
    a = taught([(replace(j, runtime=0.0), rt) for j, rt in seq])
    b = taught([(replace(j, runtime=9e9), rt) for j, rt in seq])
    asked = [j for j, _ in random_jobs(40, seed=6)]
    for x in asked:
        for q in (0.5, 0.9):
            s = spied.quantile(Spy(x), q)  # type: ignore[arg-type]
            assert a.quantile(replace(x, runtime=0.0), q) == s
            assert b.quantile(replace(x, runtime=9e9), q) == s


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"plan_q": 0.0}, r"runtime/history: plan_q must be a quantile in \(0, 1\), got 0.0"),
        ({"plan_q": 1.0}, "runtime/history: plan_q must be a quantile"),
        ({"plan_q": "p90"}, "runtime/history: plan_q must be a quantile"),
        ({"default": -1.0}, "runtime/history: default must be a finite number of seconds"),
        ({"default": float("inf")}, "runtime/history: default must be a finite"),
        ({"window": 0}, "runtime/history: window must be an integer >= 1, got 0"),
        ({"window": 2.5}, "runtime/history: window must be an integer"),
        ({"min_samples": 0}, "runtime/history: min_samples must be an integer >= 1"),
        ({"min_samples": True}, "runtime/history: min_samples must be an integer"),
        ({"window": 4, "min_samples": 5}, r"min_samples \(5\) must be at most window \(4\)"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        create("runtime", "history", **options)


def test_bad_calls_are_refused() -> None:
    p = HistoryPredictor()
    with pytest.raises(ValueError, match="quantile must be in"):
        p.quantile(job("x"), 1.5)
    with pytest.raises(ValueError, match="learned runtime"):
        p.learn(job("x"), -1.0, at=0.0)
    with pytest.raises(ValueError, match="learned runtime"):
        p.learn(job("x"), float("nan"), at=0.0)


def test_it_is_registered_by_entry_point_with_its_options() -> None:
    p = create("runtime", "history", plan_q=0.8, window=8, min_samples=2, default=60.0)
    assert isinstance(p, HistoryPredictor)
    assert (p.plan_q, p.window, p.min_samples, p.default) == (0.8, 8, 2, 60.0)
    assert p.duration(job("x")) == 60.0
