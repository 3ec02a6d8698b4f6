"""queue/srtf: shortest remaining GPU-time first on TRUE runtimes (an oracle, for reference).

The preemptive reference for predictive orders: a job's key is its GPUs × the true runtime it
has left (its runtime less the work its earlier attempts' checkpoints kept,
``RunningSet.worked``). With ``preemption/by-order`` a waiting job evicts running jobs with
more GPU-time left than it (under the same checkpoint, restart and anti-thrash rules as every
preemptive policy). A running job's remaining time only falls, so a job it does not overtake
now it never will (``first_pass`` is inf). No real scheduler knows runtimes: this bounds
what runtime prediction could win.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from suanli.core.model import MILLI, Job
from suanli.core.registry import register
from suanli.core.running import Running
from suanli.core.seams import DynamicKeys, Handle, OrderContext


@register("queue", "srtf")
class ShortestRemainingTime:
    """Shortest remaining true GPU-time first (oracle reference; preemptive with preemption/by-order)."""

    def __init__(self) -> None:
        self.h: Handle | None = None

    def bind(self, h: Handle) -> DynamicKeys | None:
        self.h = h
        return None

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        done = self.h.running.worked.get(job.id, 0.0) if self.h is not None else 0.0
        left = max(0.0, job.runtime - done) * job.gpu_demand_milli / MILLI
        return (left, job.submit, job.id)

    def line(self, r: Running) -> tuple[float, float, float]:
        """``r``'s GPU-time left as ``a + b × now``, at most ``cap`` (clipped at 0): its
        running after the restart overhead does the work."""
        assert self.h is not None
        job = r.job
        g = job.gpu_demand_milli / MILLI
        left = max(0.0, job.runtime - self.h.running.worked.get(job.id, 0.0))
        return (g * (left + r.start + r.overhead), -g, g * left)

    def levels(self, values: np.ndarray) -> np.ndarray:
        return values

    def first_pass(self, a: np.ndarray, b: np.ndarray, level: Any, now: float) -> float:
        return math.inf
