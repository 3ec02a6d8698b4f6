"""An online inference service: replicas of one model behind a queue, sized by an autoscaler.

Each replica is a task holding ``gpu_milli`` of one GPU and ``gpu_memory_mib`` of its memory,
serving ``mu`` requests per second one at a time (``suanli.core.serving.queueing``). The SLO
is on latency: its ``slo_quantile`` (P99 by default) at most ``slo`` seconds. A new replica
serves only after ``cold_start`` seconds (loading the model). The service never runs fewer
than ``min_replicas`` replicas nor more than ``max_replicas``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from suanli.core.model import MILLI, SpecError


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One service (see the module docstring). ``headroom`` is the share of extra demand the
    autoscaler provisions for beyond what it sees or forecasts."""

    name: str
    mu: float
    slo: float
    cold_start: float = 60.0
    min_replicas: int = 1
    max_replicas: int = 1 << 16
    headroom: float = 0.0
    slo_quantile: float = 0.99
    gpu_milli: int = MILLI
    gpu_memory_mib: int = 0
    tenant: str = "default"

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("service needs a name")
        if not (self.mu > 0 and np.isfinite(self.mu)):
            raise SpecError(f"service {self.name}: mu must be a finite rate > 0, got {self.mu}")
        if not self.slo > 0:
            raise SpecError(f"service {self.name}: slo must be > 0 s, got {self.slo}")
        if not 0 < self.slo_quantile < 1:
            raise SpecError(f"service {self.name}: slo_quantile must be in (0, 1)")
        if not self.cold_start >= 0:
            raise SpecError(f"service {self.name}: cold_start must be >= 0 s")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise SpecError(
                f"service {self.name}: need 0 <= min_replicas <= max_replicas, got "
                f"{self.min_replicas} and {self.max_replicas}"
            )
        if not self.headroom >= 0:
            raise SpecError(f"service {self.name}: headroom must be >= 0")
        if not 0 < self.gpu_milli <= MILLI:
            raise SpecError(f"service {self.name}: gpu_milli must be in 1..{MILLI}")

    def clamp(self, replicas: int) -> int:
        """``replicas`` within ``[min_replicas, max_replicas]``."""
        return max(self.min_replicas, min(self.max_replicas, replicas))


@dataclass(frozen=True, slots=True)
class Demand:
    """What a service's demand has been, up to now and no further: ``rates[i]`` is the mean
    request rate (per second) seen over ``[start + i step, start + (i + 1) step)``; the last
    entry is the latest. An autoscaler sees only this (the future is not in it)."""

    rates: np.ndarray
    step: float
    start: float = 0.0

    def __post_init__(self) -> None:
        if not self.step > 0:
            raise SpecError(f"demand step must be > 0 s, got {self.step}")

    @property
    def now(self) -> float:
        """The end of the latest observation."""
        return self.start + len(self.rates) * self.step

    @property
    def latest(self) -> float:
        return float(self.rates[-1]) if len(self.rates) else 0.0
