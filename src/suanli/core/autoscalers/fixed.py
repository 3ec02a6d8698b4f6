"""autoscaler/fixed: a constant number of replicas (a pool sized once, e.g. for the peak)."""

from __future__ import annotations

from suanli.core.model import SpecError
from suanli.core.registry import register
from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import Demand, ServiceSpec


@register("autoscaler", "fixed")
class FixedReplicas:
    """A constant replica count, whatever the demand (a static pool)."""

    def __init__(self, replicas: int = 1) -> None:
        if replicas < 0:
            raise SpecError(f"autoscaler/fixed: replicas must be >= 0, got {replicas}")
        self.count = replicas

    def replicas(
        self, service: ServiceSpec, capacity: Capacity, demand: Demand, current: int
    ) -> int:
        return service.clamp(self.count)

    def reset(self) -> None:
        pass
