"""queue/qssf: shortest predicted GPU-time first, with aging (Helios' quasi-shortest-service-first).

Helios (Hu et al., SC 2021) orders a queue by each job's *predicted* GPU-time (GPUs × the
runtime predicted from the user's history) and reports it within 1.09× of SJF with true
runtimes on Philly. Here the prediction is the scheduler's runtime estimator's median
(``seams.expected``: ``runtime/history``, ``runtime/learned``, or any other), taken once at
submission: what the estimator knew then, never later.

Shortest-first alone can starve a long job for ever behind a stream of short ones, so the
key ages: a job's predicted GPU-time counts half for every ``half_life`` seconds it has
waited. In log terms its priority is ``log2(GPU-time) - wait / half_life``, and since every
waiting job's wait grows at the same rate, ordering by ``log2(GPU-time) + submit / half_life``
is the same order at every instant: the key is static (a heap keeps it) and no job waits
more than ``half_life × log2(its GPU-time / the smallest)`` behind later arrivals.

Default ``half_life``: 6 hours (a day's wait counts as a factor of 16), a stated choice, not
fitted to any trace; ``half_life: .inf`` switches aging off.
"""

from __future__ import annotations

import math
from typing import Any

from suanli.core.model import MILLI, Job, SpecError
from suanli.core.registry import register
from suanli.core.seams import DynamicKeys, Handle, OrderContext, RuntimeEstimator, expected

DEFAULT_HALF_LIFE = 6 * 3_600.0
"""Seconds of waiting that halve a job's predicted GPU-time in the order (see the module)."""


@register("queue", "qssf")
class ShortestPredictedService:
    """Shortest predicted GPU-time first (Helios' QSSF), aged so that long jobs do not starve."""

    def __init__(self, half_life: float = DEFAULT_HALF_LIFE) -> None:
        if not half_life > 0:
            raise SpecError(f"queue/qssf: half_life must be > 0 seconds, got {half_life}")
        self.half_life = float(half_life)
        self.runtime: RuntimeEstimator | None = None

    def bind(self, h: Handle) -> DynamicKeys | None:
        self.runtime = h.runtime
        return None

    def predicted_gpu_s(self, job: Job) -> float:
        """GPUs × the median predicted runtime."""
        assert self.runtime is not None, "queue/qssf: bind it to a scheduler first"
        return job.gpu_demand_milli / MILLI * expected(self.runtime, job)

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        size = math.log2(max(self.predicted_gpu_s(job), 1.0))
        return (size + job.submit / self.half_life, job.submit, job.id)
