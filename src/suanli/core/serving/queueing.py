"""The queueing model of a replicated service: M/M/c, first come first served.

Requests arrive as a Poisson stream of rate ``lam`` (per second) and each of ``c`` replicas
serves one at a time, with exponential service times of mean ``1 / mu``. For ``lam < c mu``:

* the offered load is ``a = lam / mu`` (replicas' worth of work) and each replica is busy
  ``rho = a / c`` of the time: that is a replica's GPU duty;
* a request waits with probability ``C`` (Erlang's C formula), and then for an exponential
  time of rate ``theta = c mu - lam``;
* its latency ``T`` (wait plus service) has the tail
  ``P(T > t) = (1 - C) e^(-mu t) + C (theta e^(-mu t) - mu e^(-theta t)) / (theta - mu)``
  (for ``theta == mu``: ``(1 - C) e^(-mu t) + C (1 + mu t) e^(-mu t)``).

Erlang C is computed through the Erlang B recursion (``B(0) = 1``,
``B(k) = a B(k-1) / (k + a B(k-1))``), which stays finite for thousands of replicas. For
``lam >= c mu`` the queue grows without bound: every latency is infinite and the tail is 1.

Why exponential service: it is the standard, conservative model (a diffusion model's service
time is closer to constant, and M/D/c waits are shorter). A consequence worth knowing: with
exponential service, ``P(S > 5 / mu) = e^-5 = 0.67%`` of requests exceed five mean service
times even with no wait at all.
"""

from __future__ import annotations

import math

import numpy as np


def erlang_c(c: int, a: float) -> float:
    """The probability that a request waits, with ``c`` replicas and offered load ``a``
    (1.0 when ``a >= c``)."""
    if c <= 0 or a >= c:
        return 1.0
    if a <= 0:
        return 0.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1.0 - rho + rho * b)


def latency_tail(t: float, lam: float, mu: float, c: int) -> float:
    """``P(T > t)``: the share of requests slower than ``t`` seconds (1.0 if unstable)."""
    if lam <= 0:
        return math.exp(-mu * t)
    if c <= 0 or lam >= c * mu:
        return 1.0
    w = erlang_c(c, lam / mu)
    theta = c * mu - lam
    es = math.exp(-mu * t)
    if abs(theta - mu) <= 1e-12 * mu:
        conv = (1.0 + mu * t) * es
    else:
        conv = (theta * es - mu * math.exp(-theta * t)) / (theta - mu)
    return min(1.0, max(0.0, (1.0 - w) * es + w * conv))


def latency_quantile(q: float, lam: float, mu: float, c: int) -> float:
    """The ``q`` quantile of latency (seconds; ``inf`` if unstable), by bisection on the tail."""
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if c <= 0 or lam >= c * mu:
        return math.inf
    target = 1.0 - q
    lo, hi = 0.0, 1.0 / mu
    while latency_tail(hi, lam, mu, c) > target:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if latency_tail(mid, lam, mu, c) > target:
            lo = mid
        else:
            hi = mid
    return hi


def max_rate(c: int, mu: float, slo: float, q: float = 0.99) -> float:
    """The highest arrival rate ``c`` replicas serve with the ``q`` quantile of latency at
    most ``slo`` seconds (0.0 if even an idle replica misses it: ``slo`` below the service
    time's own quantile, ``-ln(1 - q) / mu``)."""
    if c <= 0 or math.exp(-mu * slo) > 1.0 - q:
        return 0.0
    lo, hi = 0.0, c * mu
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if latency_tail(slo, mid, mu, c) <= 1.0 - q:
            lo = mid
        else:
            hi = mid
    return lo


def _erlang_c_vec(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``erlang_c`` for each pair ``(c[i], a[i])`` at once (``a < c``, ``c >= 1``)."""
    b = np.ones_like(a)
    for k in range(1, int(c.max()) + 1):
        step = a * b / (k + a * b)
        b = np.where(k <= c, step, b)
    rho = a / c
    return b / (1.0 - rho + rho * b)


def latency_tail_many(t: float, lam: np.ndarray, mu: float, c: np.ndarray) -> np.ndarray:
    """``latency_tail`` for each pair ``(lam[i], c[i])`` at once (only stable ones:
    ``lam < c mu``, ``c >= 1``)."""
    w = _erlang_c_vec(c, lam / mu)
    theta = c * mu - lam
    es = math.exp(-mu * t)
    near = np.abs(theta - mu) <= 1e-9 * mu
    safe = np.where(near, theta + mu, theta)  # any value away from mu: that branch is unused
    # np.where computes both branches; the one not taken may divide 0 by 0 (at rates so
    # small that 1e-9 mu underflows, say): its value is discarded, so is its warning.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        conv = np.where(
            near, (1.0 + mu * t) * es, (safe * es - mu * np.exp(-safe * t)) / (safe - mu)
        )
    return np.clip((1.0 - w) * es + w * conv, 0.0, 1.0)


class Capacity:
    """What ``c`` replicas of one service can carry under its SLO, for ``c`` up to ``limit``:
    ``rate[c]`` is ``max_rate(c, ...)``, computed once for every ``c`` together (one
    bisection, vectorised over ``c``), so that the replicas a demand needs is one
    ``searchsorted``."""

    def __init__(self, mu: float, slo: float, limit: int, q: float = 0.99) -> None:
        if not (mu > 0 and slo > 0 and limit >= 1):
            raise ValueError(
                f"capacity needs mu > 0, slo > 0 and limit >= 1, got {mu}, {slo}, {limit}"
            )
        self.mu, self.slo, self.q, self.limit = mu, slo, q, limit
        if math.exp(-mu * slo) > 1.0 - q:
            raise ValueError(
                f"no number of replicas meets the SLO: {slo:g} s is below the service time's "
                f"own {q:.0%} quantile, {-math.log(1 - q) / mu:.3g} s"
            )
        c = np.arange(1, limit + 1, dtype=float)
        lo, hi = np.zeros(limit), c * mu
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            ok = latency_tail_many(slo, mid, mu, c) <= 1.0 - q
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        self.rate = np.concatenate([[0.0], lo])

    def replicas(self, lam: float) -> int:
        """The fewest replicas that carry ``lam`` within the SLO (``limit + 1`` if none up to
        ``limit`` does)."""
        if lam <= 0:
            return 0
        return int(np.searchsorted(self.rate, lam, side="left"))

    def meets(self, lam: float, c: int) -> bool:
        """Whether ``c`` replicas carry ``lam`` within the SLO."""
        if lam <= 0:
            return True
        if c > self.limit:
            return latency_tail(self.slo, lam, self.mu, c) <= 1.0 - self.q
        return c > 0 and lam <= self.rate[c]
