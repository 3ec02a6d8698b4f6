"""The ``autoscaler`` seam: how many replicas a service should run now.

An ``Autoscaler`` sees the service, the capacity table of its SLO (``Capacity``: the fewest
replicas that carry a rate within the SLO), the demand seen so far (``Demand``, never the
future) and the replicas it runs, and answers a replica count. The caller clamps it to the
service's bounds and applies it: a new replica serves after the service's cold start, so a
scale-up decided now helps only from ``now + cold_start``; a scale-down takes effect at once.
The same plugins size services in the simulator and in ``suanli serve``.
"""

from __future__ import annotations

from typing import Protocol

from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import Demand, ServiceSpec


class Autoscaler(Protocol):
    """Replicas for a service from its demand (see the module docstring). ``reset`` forgets
    the plugin's own state (a new run)."""

    def replicas(
        self, service: ServiceSpec, capacity: Capacity, demand: Demand, current: int
    ) -> int: ...

    def reset(self) -> None: ...


def needed(service: ServiceSpec, capacity: Capacity, rate: float) -> int:
    """The replicas that carry ``rate`` (with the service's headroom) within its SLO,
    clamped to the service's bounds."""
    return service.clamp(capacity.replicas(rate * (1.0 + service.headroom)))
