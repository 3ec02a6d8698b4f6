"""autoscaler/reactive: replicas for the demand seen now, scaling down only after a
stabilisation window.

The rule of Kubernetes' Horizontal Pod Autoscaler: scale up at once to what the latest
demand needs; scale down to the largest recommendation of the last ``stabilise`` seconds
(HPA's ``downscaleStabilizationWindowSeconds`` defaults to 300 s), so that a dip does not
drop replicas that the next minute needs again (each of which would pay its cold start).
"""

from __future__ import annotations

from collections import deque

from suanli.core.model import SpecError
from suanli.core.registry import register
from suanli.core.serving.autoscaler import needed
from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import Demand, ServiceSpec


@register("autoscaler", "reactive")
class Reactive:
    """Replicas for the latest demand; down only after a 300 s stabilisation window (HPA)."""

    def __init__(self, stabilise: float = 300.0) -> None:
        if not stabilise >= 0:
            raise SpecError(f"autoscaler/reactive: stabilise must be >= 0 s, got {stabilise}")
        self.stabilise = stabilise
        self._recent: dict[str, deque[tuple[float, int]]] = {}

    def replicas(
        self, service: ServiceSpec, capacity: Capacity, demand: Demand, current: int
    ) -> int:
        want = needed(service, capacity, demand.latest)
        return self._stabilised(service.name, demand.now, want)

    def _stabilised(self, name: str, now: float, want: int) -> int:
        recent = self._recent.setdefault(name, deque())
        recent.append((now, want))
        while recent and recent[0][0] < now - self.stabilise:
            recent.popleft()
        return max(w for _, w in recent)

    def reset(self) -> None:
        self._recent.clear()
