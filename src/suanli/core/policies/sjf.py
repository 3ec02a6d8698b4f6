"""queue/sjf: shortest job first on the TRUE runtime; queue/sjf-gpu: on the true GPU-time
(GPUs × runtime, the SJF of Helios' evaluation). Both are oracles, for reference only."""

from __future__ import annotations

from typing import Any

from suanli.core.model import MILLI, Job
from suanli.core.registry import register
from suanli.core.seams import OrderContext, StaticOrder


@register("queue", "sjf")
class ShortestJobFirst(StaticOrder):
    """Shortest true runtime first (oracle reference: no real scheduler knows it)."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (job.runtime, job.submit, job.id)


@register("queue", "sjf-gpu")
class ShortestGpuTimeFirst(StaticOrder):
    """Least true GPU-time (GPUs × runtime) first (oracle reference: no real scheduler knows it)."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (job.gpu_demand_milli / MILLI * job.runtime, job.submit, job.id)
