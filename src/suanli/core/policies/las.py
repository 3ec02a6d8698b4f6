"""queue/las: Tiresias' discretised two-dimensional least-attained-service order (2D-LAS).

Tiresias (Gu et al., NSDI 2019) schedules without any runtime knowledge: a job's *attained
service* is the GPU-seconds it has held so far (GPUs × time, the "two dimensions"), and jobs
with less attained service go first. Discretised: the attained service is cut into queues at
``thresholds`` (GPU-seconds); a job is in queue k once it has attained ``thresholds[k-1]``,
and jobs within one queue go in arrival order, so jobs of one queue are never preempted for
each other. With ``preemption/by-order`` a waiting job evicts running jobs of a later queue
(with the checkpoint, restart overhead and anti-thrash rules every preemptive policy has,
``suanli.core.preemption``); without it the order is non-preemptive.

Defaults: two queues split at 3,600 GPU-seconds (one GPU-hour). The Tiresias paper's
evaluation runs 2D-LAS with a small number of queues and reports two as enough; the split is
an option (``thresholds``), never fitted to a trace.

A job's attained service over its earlier attempts is the running set's
(``RunningSet.attained``), so a requeued job rejoins in the queue it had reached. The queue a
running job is in moves up as it runs: ``overtaken_at`` says when, so that a waiting job of
an earlier queue gets a cycle at the moment the running job's service passes the split
(``first_pass``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from suanli.core.model import Job, SpecError
from suanli.core.registry import register
from suanli.core.running import Running
from suanli.core.seams import DynamicKeys, Handle, OrderContext

DEFAULT_THRESHOLDS = (3_600.0,)
"""GPU-seconds at which a job moves to the next queue (two queues; see the module)."""


@register("queue", "las")
class LeastAttainedService:
    """Tiresias 2D-LAS: least attained GPU-service first, in discrete queues (no runtimes needed)."""

    def __init__(self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> None:
        t = [float(x) for x in thresholds]
        if not t or any(not (math.isfinite(x) and x > 0) for x in t):
            raise SpecError(
                f"queue/las: thresholds must be GPU-seconds > 0, got {list(thresholds)}"
            )
        if any(b <= a for a, b in zip(t, t[1:], strict=False)):
            raise SpecError(f"queue/las: thresholds must rise, got {list(thresholds)}")
        self.thresholds = tuple(t)
        self.h: Handle | None = None

    def bind(self, h: Handle) -> DynamicKeys | None:
        self.h = h
        return None

    def level(self, attained: float) -> int:
        """The queue of a job that has attained ``attained`` GPU-seconds (0: the first)."""
        return bisect.bisect_right(self.thresholds, attained)

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        past = self.h.running.attained.get(job.id, 0.0) if self.h is not None else 0.0
        return (self.level(past), job.submit, job.id)

    def line(self, r: Running) -> tuple[float, float, float]:
        """``r``'s attained service as ``a + b × now`` (capped at ``cap``): for a vectorised
        ``levels``."""
        assert self.h is not None
        g = r.placement.gpu_milli / 1000.0
        return (self.h.running.attained.get(r.job.id, 0.0) - g * r.start, g, math.inf)

    def levels(self, values: np.ndarray) -> np.ndarray:
        """The queues of jobs with attained services ``values``."""
        return np.searchsorted(self.thresholds, values, side="right")

    def first_pass(self, a: np.ndarray, b: np.ndarray, level: Any, now: float) -> float:
        """The earliest time a job of line ``(a, b)`` (in queue ``level`` or before, now)
        passes queue ``level``; inf if none will."""
        k = int(level)
        if k >= len(self.thresholds) or not len(a):
            return math.inf
        moving = b > 0
        if not moving.any():
            return math.inf
        t = float(((self.thresholds[k] - a[moving]) / b[moving]).min())
        return max(t, now + 1.0)
