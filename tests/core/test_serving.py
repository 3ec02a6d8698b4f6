"""The queueing model of a service and the autoscaler plugins.

Outside truths: Erlang C against the closed forms for one and two servers and the textbook
value for 10 servers at 8 erlangs (0.4092, as in every call-centre staffing table); the
latency tail against an independent discrete-event simulation of an M/M/c queue."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.model import SpecError
from suanli.core.registry import create, names
from suanli.core.serving.queueing import (
    Capacity,
    erlang_c,
    latency_quantile,
    latency_tail,
    max_rate,
)
from suanli.core.serving.service import Demand, ServiceSpec


@pytest.mark.parametrize(
    ("c", "a", "want"),
    [
        pytest.param(1, 0.7, 0.7, id="M/M/1: P(wait) = rho"),
        pytest.param(2, 1.0, 1 / 3, id="M/M/2: 2 rho^2 / (1 + rho)"),
        pytest.param(10, 8.0, 0.4092, id="10 servers, 8 erlangs: staffing tables"),
        pytest.param(5, 5.0, 1.0, id="saturated"),
        pytest.param(3, 0.0, 0.0, id="no load"),
    ],
)
def test_erlang_c(c: int, a: float, want: float) -> None:
    assert erlang_c(c, a) == pytest.approx(want, abs=5e-5)


def _simulate_mmc(lam: float, mu: float, c: int, n: int, seed: int) -> np.ndarray:
    """Latencies of ``n`` requests through an M/M/c FCFS queue (an independent check)."""
    rng = np.random.default_rng(seed)
    arrive = np.cumsum(rng.exponential(1 / lam, n))
    service = rng.exponential(1 / mu, n)
    free_at = np.zeros(c)
    out = np.empty(n)
    for i in range(n):
        k = int(np.argmin(free_at))
        begin = max(arrive[i], free_at[k])
        free_at[k] = begin + service[i]
        out[i] = free_at[k] - arrive[i]
    return out


@pytest.mark.parametrize(("lam", "c"), [(0.8, 1), (3.0, 4), (8.5, 10)])
def test_latency_tail_matches_a_simulated_queue(lam: float, c: int) -> None:
    mu = 1.0
    lat = _simulate_mmc(lam, mu, c, 120_000, seed=7)[5_000:]
    for t in (1.0, 3.0, 6.0):
        assert latency_tail(t, lam, mu, c) == pytest.approx((lat > t).mean(), abs=0.012)
    assert latency_quantile(0.99, lam, mu, c) == pytest.approx(np.quantile(lat, 0.99), rel=0.08)


def test_extreme_rates_give_no_numeric_warning() -> None:
    """Where the wait's rate is within rounding of the service rate (``theta == mu``, taken
    by the closed form's other branch), the branch ``np.where`` does not use must still be
    finite, or its warning silenced: at mu = 2e9 its placeholder once rounded back onto mu,
    and at a denormal mu the nearness test underflowed; both divided 0 by 0."""
    import warnings

    from suanli.core.serving.queueing import latency_tail_many

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mu, lam in ((2e9, 2e9 + 1.0), (5e-324, 5e-324)):  # a denormal: 1e-9 mu is 0
            got = latency_tail_many(1e-9, np.array([lam]), mu, np.array([2.0]))
            assert got[0] == pytest.approx(latency_tail(1e-9, lam, mu, 2), rel=1e-6)


def test_unstable_queue_has_no_quantile() -> None:
    assert latency_tail(100.0, 2.0, 1.0, 2) == 1.0
    assert math.isinf(latency_quantile(0.99, 2.0, 1.0, 2))


def test_capacity_is_the_fewest_replicas_that_meet_the_slo() -> None:
    cap = Capacity(0.5, 10.0, 300)
    assert cap.rate[1:].tolist() == sorted(cap.rate[1:].tolist())
    for c in (1, 7, 60, 205):
        assert cap.rate[c] == pytest.approx(max_rate(c, 0.5, 10.0), rel=1e-6)
    for lam in (0.01, 3.0, 47.7, 101.0):
        c = cap.replicas(lam)
        assert latency_quantile(0.99, lam, 0.5, c) <= 10.0 + 1e-6
        assert c == 1 or latency_quantile(0.99, lam, 0.5, c - 1) > 10.0
    assert cap.replicas(0.0) == 0


def test_an_slo_below_the_service_time_itself_is_refused() -> None:
    with pytest.raises(ValueError, match="below the service time's own 99% quantile"):
        Capacity(0.5, 9.0, 10)  # P99 of Exp(mean 2 s) is 9.21 s


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"mu": -1.0}, "mu", id="negative rate"),
        pytest.param({"slo": 0.0}, "slo", id="zero slo"),
        pytest.param({"min_replicas": 5, "max_replicas": 2}, "min_replicas", id="min > max"),
        pytest.param({"cold_start": -1.0}, "cold_start", id="negative cold start"),
    ],
)
def test_service_spec_refuses_what_cannot_exist(kwargs: dict, field: str) -> None:
    base = {"name": "s", "mu": 1.0, "slo": 10.0}
    with pytest.raises(SpecError, match=field):
        ServiceSpec(**{**base, **kwargs})


SVC = ServiceSpec("s", mu=0.5, slo=10.0, cold_start=120.0, min_replicas=2, max_replicas=400)
CAP = Capacity(0.5, 10.0, 400)


def test_the_seam_lists_its_plugins() -> None:
    assert {"fixed", "reactive", "predictive"} <= set(names("autoscaler"))


def test_reactive_scales_up_at_once_and_down_after_its_window() -> None:
    a = create("autoscaler", "reactive", stabilise=300.0)
    rates = [10.0] * 5
    up = a.replicas(SVC, CAP, Demand(np.array(rates), 60.0), 0)
    assert up == CAP.replicas(10.0)
    rates += [1.0]
    assert a.replicas(SVC, CAP, Demand(np.array(rates), 60.0), up) == up  # within 300 s
    rates += [1.0] * 6
    assert a.replicas(SVC, CAP, Demand(np.array(rates), 60.0), up) == max(2, CAP.replicas(1.0))


def test_predictive_scales_up_before_the_daily_rise() -> None:
    """Yesterday the demand rose at 10:00; today at 09:59 (one cold start before), the
    predictive plugin already asks for the replicas 10:00 needs; the reactive one does not."""
    step = 60.0
    day = np.where((np.arange(1440) >= 600) & (np.arange(1440) < 700), 50.0, 5.0)
    seen = np.concatenate([day, day[:599]])  # up to 09:59 today
    pred = create("autoscaler", "predictive")
    reac = create("autoscaler", "reactive")
    d = Demand(seen, step)
    assert pred.replicas(SVC, CAP, d, 0) >= CAP.replicas(50.0)
    assert reac.replicas(SVC, CAP, d, 0) == CAP.replicas(5.0)


def test_predictive_is_reactive_without_a_day_of_history() -> None:
    pred = create("autoscaler", "predictive")
    d = Demand(np.array([3.0, 4.0, 9.0]), 60.0)
    assert pred.replicas(SVC, CAP, d, 0) == CAP.replicas(9.0)


@settings(max_examples=60, deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 150.0), min_size=1, max_size=60),
    which=st.sampled_from(["reactive", "predictive", "fixed"]),
)
def test_a_service_never_falls_below_its_minimum(rates: list[float], which: str) -> None:
    a = create("autoscaler", which)
    for k in range(1, len(rates) + 1):
        n = a.replicas(SVC, CAP, Demand(np.array(rates[:k]), 60.0), 0)
        assert SVC.min_replicas <= n <= SVC.max_replicas


def test_predictive_learns_the_headroom_its_own_misses_call_for() -> None:
    """On a demand that repeats exactly, every forecast is right and nothing is added; on a
    noisy one (same mean), the forecast is raised by its own P99 miss, and the replicas
    asked then cover the noisy minutes that a plain seasonal forecast misses."""
    step, n = 60.0, 1440
    rng = np.random.default_rng(3)
    base = np.tile(20 + 10 * np.sin(2 * np.pi * np.arange(n) / n), 3)
    noisy = base * rng.lognormal(0.0, 0.15, len(base))
    svc = ServiceSpec("s", mu=0.5, slo=10.0, cold_start=120.0, max_replicas=400)
    for curve, raised in ((base, False), (noisy, True)):
        a = create("autoscaler", "predictive")
        plain = create("autoscaler", "predictive", min_errors=10**9)  # never learns
        misses = plain_misses = 0
        for k in range(n + 1, len(curve) - 3):
            d = Demand(curve[:k], step)
            got, ref = a.replicas(svc, CAP, d, 0), plain.replicas(svc, CAP, d, 0)
            assert got >= ref
            misses += not CAP.meets(curve[k + 2], got)  # ready after the cold start
            plain_misses += not CAP.meets(curve[k + 2], ref)
        if raised:
            assert misses < plain_misses / 5
        else:
            assert misses == plain_misses == 0
