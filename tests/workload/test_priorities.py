"""Priority classes drawn from a mix, and checkpoint intervals, for traces without them."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest

from builders import job
from suanli.core.model import DEFAULT_PRIORITY_CLASSES, PriorityClass, SpecError
from suanli.workload.calibration import PRIORITY_MIX
from suanli.workload.priorities import (
    DEFAULT_CHECKPOINT_INTERVAL,
    TRAINING_PRIORITY_MIX,
    assign_priorities,
    normalise_mix,
    with_checkpoints,
)


def jobs(n: int) -> list:  # type: ignore[type-arg]
    return [job(f"j{i}", submit=float(i)) for i in range(n)]


def classes(js) -> list[str]:  # type: ignore[no-untyped-def]
    return [j.priority_class for j in js]


def test_training_mix_is_the_openb_mix_without_online() -> None:
    mix = dict(TRAINING_PRIORITY_MIX)
    assert list(mix) == ["high", "normal", "spot"]
    assert math.isclose(sum(mix.values()), 1.0)
    assert mix["high"] == pytest.approx(0.49 / 0.91)
    assert mix["high"] == pytest.approx(0.538, abs=1e-3)
    assert mix["normal"] == pytest.approx(0.231, abs=1e-3)
    assert mix["spot"] == pytest.approx(0.231, abs=1e-3)
    base = dict(PRIORITY_MIX)
    assert mix["normal"] / mix["high"] == pytest.approx(base["normal"] / base["high"])


def test_same_seed_same_classes() -> None:
    js = jobs(500)
    a = assign_priorities(js, seed=7)
    b = assign_priorities(js, seed=7)
    assert classes(a) == classes(b)
    assert classes(assign_priorities(js, seed=8)) != classes(a)


def test_only_the_class_changes() -> None:
    js = [job(f"j{i}", submit=float(i), runtime=10.0 + i, gpus=2, tenant="t") for i in range(50)]
    out = assign_priorities(js, {"high": 1, "spot": 1}, seed=0)
    assert [j.id for j in out] == [j.id for j in js]
    for before, after in zip(js, out, strict=True):
        assert after == dataclasses.replace(before, priority_class=after.priority_class)
    assert all(j.priority_class == "normal" for j in js)  # the input is untouched


def test_shares_match_the_mix_on_many_jobs() -> None:
    n = 40_000
    got = Counter(classes(assign_priorities(jobs(n), seed=0)))
    for name, share in TRAINING_PRIORITY_MIX:
        # 4 standard deviations of a binomial share at n = 40,000 is under 0.01.
        assert got[name] / n == pytest.approx(share, abs=0.01)
    assert set(got) == {"high", "normal", "spot"}


def test_weights_are_normalised_and_mappings_equal_pairs() -> None:
    js = jobs(1000)
    a = assign_priorities(js, {"high": 2, "spot": 6}, seed=3)
    b = assign_priorities(js, [("high", 0.25), ("spot", 0.75)], seed=3)
    assert classes(a) == classes(b)
    assert normalise_mix({"high": 2, "spot": 6}) == (("high", 0.25), ("spot", 0.75))


def test_a_zero_weight_class_never_appears() -> None:
    got = set(classes(assign_priorities(jobs(2000), {"high": 1, "normal": 0}, seed=1)))
    assert got == {"high"}


def test_single_class_mix_and_no_jobs() -> None:
    assert set(classes(assign_priorities(jobs(20), {"spot": 1.0}))) == {"spot"}
    assert assign_priorities([], seed=0) == []


def test_custom_classes_and_unchecked_names() -> None:
    custom = {"batch": PriorityClass("batch", 5, preemptible=True)}
    assert set(classes(assign_priorities(jobs(10), {"batch": 1}, classes=custom))) == {"batch"}
    assert set(classes(assign_priorities(jobs(10), {"anything": 1}, classes=None))) == {"anything"}


@pytest.mark.parametrize(
    "mix, message",
    [
        ({}, "at least one class"),
        ([], "at least one class"),
        ({"high": -0.1, "spot": 1.0}, "weight of 'high' must be >= 0"),
        ({"high": math.nan}, "weight of 'high' must be >= 0"),
        ({"high": math.inf}, "weight of 'high' must be >= 0"),
        ({"high": "a lot"}, "weight of 'high' must be >= 0"),
        ({"high": True}, "weight of 'high' must be >= 0"),
        ({"high": 0, "spot": 0.0}, "at least one weight must be > 0"),
        ([("high", 0.5), ("high", 0.5)], "'high' is given twice"),
        ({"hihg": 1.0}, "unknown priority class 'hihg'"),
        ({"": 1.0}, "non-empty strings"),
        (["high"], "expected (class, weight) pairs"),
        ([("high", 0.5, 1)], "expected (class, weight) pairs"),
    ],
)
def test_bad_mix(mix, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match="priority mix") as err:
        assign_priorities(jobs(3), mix, seed=0)
    assert message in str(err.value)


def test_negative_seed_is_refused() -> None:
    with pytest.raises(SpecError, match="seed"):
        assign_priorities(jobs(3), seed=-1)


def test_default_classes_know_the_default_mix() -> None:
    assert all(name in DEFAULT_PRIORITY_CLASSES for name, _ in TRAINING_PRIORITY_MIX)


def test_with_checkpoints_sets_missing_intervals_only() -> None:
    js = [job("a"), job("b", checkpoint_interval=600.0)]
    out = with_checkpoints(js)
    assert [j.checkpoint_interval for j in out] == [DEFAULT_CHECKPOINT_INTERVAL, 600.0]
    assert DEFAULT_CHECKPOINT_INTERVAL == 1_800.0
    assert with_checkpoints(js, 60.0)[0].checkpoint_interval == 60.0
    assert js[0].checkpoint_interval is None  # the input is untouched
    assert out[0].id == "a" and out[0].runtime == js[0].runtime


@pytest.mark.parametrize("interval", [0.0, -5.0, math.nan, math.inf])
def test_with_checkpoints_bad_interval(interval: float) -> None:
    with pytest.raises(SpecError, match="checkpoint interval"):
        with_checkpoints(jobs(2), interval)
