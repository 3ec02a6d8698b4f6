"""A co-location run summed up: the scenario's columns, and the bound on its utilisation.

SLO attainment is the share of requests that arrive in a step where the service meets its
SLO (its latency quantile within the SLO, under M/M/c with the replicas ready then and the
slowest one's rate). ``within`` is the share of all requests whose own latency is within
the SLO's latency, from the same model (with exponential service it cannot pass
``1 - e^(-mu slo)``: 99.33% at 5 mean service times); ``p99`` the 99th percentile of all
requests' latencies (the mixture over steps). Training JCT is over the jobs that finished
in the week; queueing delay is over every job submitted, a job still waiting at the end
counted up to the end (a lower bound).

The utilisation bound (``bound``) holds for any policy on the scenario: a GPU's busy time
comes from the service (``lam / mu`` replicas' worth of work per second, stretched by at
most the sharing slowdown) or from training. A training job of duty ``d`` and runtime ``R``
on ``r`` workers holds ``n R S(r) / S(n)`` GPU-seconds to finish on ``n`` workers, most at
``n = max`` (``n / S(n)`` grows with ``n``), at most ``max x (T - submit)`` within the
week, and at most ``1 + kappa x share_max_duty`` times that if it hosts replicas; it is busy
``d`` of them. Summing both, capped at the cluster per step for the service, divided by the
cluster's GPU time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from suanli.core.serving.queueing import latency_tail_many
from suanli.sim.colocation.engine import Trace
from suanli.sim.colocation.model import Scenario


@dataclass(frozen=True, slots=True)
class Summary:
    """One setup's columns (shares in [0, 1], times in seconds, work in GPU-hours)."""

    name: str
    allocation: float
    utilisation: float
    useful_gpu_hours: float
    slo_attainment: float
    within_slo: float
    p99_latency: float
    under_provisioned_hours: float
    jct_mean: float
    jct_p99: float
    finished: int
    queue_mean: float
    queue_p99: float
    still_waiting: int
    preemptions: int
    resizes: int
    lost_gpu_hours: float
    replicas_mean: float
    shared_gpu_hours: float
    idle_flagged_gpu_hours: float
    idle_warned: int
    idle_reclaimed: int

    def to_json(self) -> dict[str, Any]:
        """As plain JSON: a figure that is not finite is null (a P99 latency is infinite
        when more than 1% of requests met a queue that grew without bound)."""
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(self).items()
        }


def _mixture_tail(x: float, lam: np.ndarray, mu: np.ndarray, c: np.ndarray) -> float:
    """The share of requests slower than ``x`` seconds, over all steps (weights ``lam``)."""
    w = lam > 0
    lam, mu, c = lam[w], mu[w], c[w]
    if not len(lam):
        return 0.0
    stable = (c > 0) & (lam < c * mu)
    tail = np.ones(len(lam))
    if stable.any():
        s = np.flatnonzero(stable)
        # One call per distinct rate (the shared replicas' rates differ): grouped.
        for m in np.unique(mu[s]):
            k = s[mu[s] == m]
            tail[k] = latency_tail_many(x, lam[k], float(m), c[k].astype(float))
    return float((tail * lam).sum() / lam.sum())


def p99(lam: np.ndarray, mu: np.ndarray, c: np.ndarray, q: float = 0.99) -> float:
    """The ``q`` quantile of all requests' latencies (inf past the unstable share)."""
    target = 1.0 - q
    hi = 1.0 / float(mu.max())
    if _mixture_tail(1e9, lam, mu, c) > target:
        return math.inf
    while _mixture_tail(hi, lam, mu, c) > target:
        hi *= 2.0
    lo = 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _mixture_tail(mid, lam, mu, c) > target:
            lo = mid
        else:
            hi = mid
    return hi


def summarise(name: str, sc: Scenario, tr: Trace) -> Summary:
    n, dt = sc.gpus, sc.step
    training = sc.training
    lam = tr.lam
    reqs = lam.sum()
    attain = float((lam * tr.slo_met).sum() / reqs) if reqs > 0 else 1.0
    c = tr.replicas
    within = 1.0 - _mixture_tail(sc.service.slo, lam, tr.mu_eff, c)
    fin = ~np.isnan(tr.finish)
    jct = (tr.finish - training.submit)[fin]
    q = tr.wait
    return Summary(
        name=name,
        allocation=float(tr.alloc.mean() / n),
        utilisation=float(tr.busy.mean() / n),
        useful_gpu_hours=float(tr.useful.sum() / 3600),
        slo_attainment=attain,
        within_slo=within,
        p99_latency=p99(lam, tr.mu_eff, c, sc.service.slo_quantile),
        under_provisioned_hours=float((~tr.slo_met & (lam > 0)).sum() * dt / 3600),
        jct_mean=float(jct.mean()) if len(jct) else math.nan,
        jct_p99=float(np.percentile(jct, 99)) if len(jct) else math.nan,
        finished=int(fin.sum()),
        queue_mean=float(q.mean()) if len(q) else math.nan,
        queue_p99=float(np.percentile(q, 99)) if len(q) else math.nan,
        still_waiting=int((~np.isnan(tr.waiting_since)).sum()),
        preemptions=int(tr.preemptions.sum()),
        resizes=int(tr.resizes.sum()),
        lost_gpu_hours=float((tr.lost_work.sum() + tr.paused_gpu_seconds) / 3600),
        replicas_mean=float(c.mean()),
        shared_gpu_hours=tr.shared_gpu_seconds / 3600,
        idle_flagged_gpu_hours=tr.idle_flagged_gpu_seconds / 3600,
        idle_warned=tr.warned,
        idle_reclaimed=tr.reclaimed,
    )


@dataclass(frozen=True, slots=True)
class Bound:
    """The utilisation no policy can pass on a scenario, and its two parts (shares of the
    cluster's GPU time)."""

    utilisation: float
    service: float
    training: float


def bound(sc: Scenario) -> Bound:
    """The utilisation bound of the module docstring."""
    tr = sc.training
    total = sc.gpus * sc.horizon
    stretch = sc.interference.slowdown(0.0, sc.share_max_duty)
    svc = float(np.minimum(sc.gpus, sc.demand / sc.service.mu * stretch).sum() * sc.step)
    s = sc.speedup
    hold = np.array(
        [
            m * r * s(float(g)) / s(float(m))
            for m, r, g in zip(tr.max_w, tr.runtime, tr.gpus, strict=True)
        ]
    )
    within = tr.max_w * np.maximum(0.0, sc.horizon - tr.submit)
    train = float((tr.duty * np.minimum(hold * stretch, within)).sum())
    return Bound(min(1.0, (svc + train) / total), svc / total, train / total)
