"""autoscaler/predictive: replicas for the demand forecast over the next cold start, from the
curve's own history.

Forecast (seasonal, from what the service has seen and nothing later): the demand one
``period`` ago (a day by default) over the coming ``cold_start + lead`` seconds, scaled by
how the last ``level`` seconds compare with the same stretch one period earlier (so a day
busier than yesterday is forecast busier; the ratio is clipped to [0.5, 2]). A replica asked
for now serves after the cold start, so the count covers the highest forecast until then,
and never less than the latest demand needs. Before one period of history it is
``reactive``. Scale-down goes through the same stabilisation window as ``reactive``.
"""

from __future__ import annotations

import math

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
    ) -> None:
        super().__init__(stabilise)
        if not (period > 0 and lead >= 0 and level > 0):
            raise SpecError("autoscaler/predictive: need period > 0, lead >= 0 and level > 0")
        self.period, self.lead, self.level = period, lead, level

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
        want = needed(service, capacity, self.forecast(service, demand))
        return self._stabilised(service.name, demand.now, want)
