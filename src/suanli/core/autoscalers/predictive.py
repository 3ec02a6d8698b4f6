"""autoscaler/predictive: replicas for the demand forecast over the next cold start, from the
curve's own history.

Forecast (seasonal, from what the service has seen and nothing later): the demand one
``period`` ago (a day by default) over the coming ``cold_start + lead`` seconds, scaled by
how the last ``level`` seconds compare with the same stretch one period earlier (so a day
busier than yesterday is forecast busier; the ratio is clipped to [0.5, 2]). A replica asked
for now serves after the cold start, so the count covers the highest forecast until then,
and never less than the latest demand needs. Before one period of history it is
``reactive``. Scale-down goes through the same stabilisation window as ``reactive``.

The forecast learns from its own misses: once the window a forecast covered has been seen,
the ratio of the highest demand in it to the forecast is kept (the last ``memory`` seconds
of them, a day by default), and every forecast is raised by their ``error_quantile``
(0.99, the SLO's own quantile) once ``min_errors`` of them are known. A demand that repeats
itself keeps the ratio at 1 and costs nothing; a noisy one buys the headroom its noise
needs, measured rather than guessed. The service's own ``headroom`` applies on top.
"""

from __future__ import annotations

import bisect
import math
from collections import deque

import numpy as np

from suanli.core.autoscalers.reactive import Reactive
from suanli.core.model import SpecError
from suanli.core.registry import register
from suanli.core.serving.autoscaler import needed
from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import Demand, ServiceSpec


@register("autoscaler", "predictive")
class Predictive(Reactive):
    """Replicas for yesterday's demand over the next cold start, scaled to today's level."""

    def __init__(
        self,
        period: float = 86400.0,
        lead: float = 60.0,
        level: float = 3600.0,
        stabilise: float = 300.0,
        error_quantile: float = 0.99,
        memory: float = 86400.0,
        min_errors: int = 60,
    ) -> None:
        super().__init__(stabilise)
        if not (period > 0 and lead >= 0 and level > 0 and memory > 0 and min_errors >= 1):
            raise SpecError(
                "autoscaler/predictive: need period > 0, lead >= 0, level > 0, memory > 0 "
                "and min_errors >= 1"
            )
        if not 0 < error_quantile <= 1:
            raise SpecError("autoscaler/predictive: error_quantile must be in (0, 1]")
        self.period, self.lead, self.level = period, lead, level
        self.error_quantile, self.memory, self.min_errors = error_quantile, memory, min_errors
        self._open: dict[str, deque[tuple[int, int, float]]] = {}
        self._errors: dict[str, deque[float]] = {}  # in arrival order
        self._sorted: dict[str, list[float]] = {}  # the same, sorted

    def forecast(self, service: ServiceSpec, demand: Demand) -> float:
        """The highest rate forecast over ``[now, now + cold_start + lead]`` (the latest rate
        before a period of history)."""
        r, step = demand.rates, demand.step
        n = len(r)
        p = int(round(self.period / step))
        if p < 1 or n <= p:
            return demand.latest
        ahead = max(1, int(math.ceil((service.cold_start + self.lead) / step)))
        lv = max(1, int(round(self.level / step)))
        past = r[n - p : min(n, n - p + ahead)]
        if len(past) == 0:
            return demand.latest
        if n - p >= lv:
            then = float(np.mean(r[n - p - lv : n - p]))
            level = float(np.mean(r[n - lv :]))
            ratio = 1.0 if then <= 0 else min(2.0, max(0.5, level / then))
        else:  # not a whole level window a period back: yesterday as it was
            ratio = 1.0
        return max(demand.latest, float(past.max()) * ratio)

    def replicas(
        self, service: ServiceSpec, capacity: Capacity, demand: Demand, current: int
    ) -> int:
        fc = self.forecast(service, demand)
        want = needed(service, capacity, fc * self._raise(service, demand, fc))
        return self._stabilised(service.name, demand.now, want)

    def _raise(self, service: ServiceSpec, demand: Demand, fc: float) -> float:
        """Settle the forecasts whose window has now been seen, record this one, and return
        the factor the forecasts' own errors call for (1.0 until enough are known)."""
        r, n = demand.rates, len(demand.rates)
        ahead = max(1, int(math.ceil((service.cold_start + self.lead) / demand.step)))
        keep = max(1, int(round(self.memory / demand.step)))
        pending = self._open.setdefault(service.name, deque())
        errors = self._errors.setdefault(service.name, deque())
        ranked = self._sorted.setdefault(service.name, [])
        while pending and pending[0][1] <= n:
            start, end, then = pending.popleft()
            if then > 0 and end > start:
                e = float(r[start:end].max()) / then
                errors.append(e)
                bisect.insort(ranked, e)
                if len(errors) > keep:
                    del ranked[bisect.bisect_left(ranked, errors.popleft())]
        pending.append((n, n + ahead, fc))
        if len(ranked) < self.min_errors:
            return 1.0
        # numpy's default (linear) quantile, read off the sorted list
        pos = self.error_quantile * (len(ranked) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(ranked) - 1)
        q = ranked[lo] + (ranked[hi] - ranked[lo]) * (pos - lo)
        return max(1.0, q)

    def reset(self) -> None:
        super().reset()
        self._open.clear()
        self._errors.clear()
        self._sorted.clear()
