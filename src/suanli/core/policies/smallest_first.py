"""queue/smallest-first: fewest GPUs first, a size-only order needing no runtime knowledge."""

from __future__ import annotations

from typing import Any

from suanli.core.model import Job
from suanli.core.registry import register
from suanli.core.seams import OrderContext, StaticOrder


@register("queue", "smallest-first")
class SmallestFirst(StaticOrder):
    """Smallest GPU demand first (then CPU demand, submit time, job id)."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (job.gpu_demand_milli, job.task.cpu_milli * job.tasks, job.submit, job.id)
