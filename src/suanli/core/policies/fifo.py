"""queue/fifo: first come, first served."""

from __future__ import annotations

from typing import Any

from suanli.core.model import Job
from suanli.core.registry import register
from suanli.core.seams import OrderContext, StaticOrder


@register("queue", "fifo")
class Fifo(StaticOrder):
    """First come, first served: by submit time, then job id."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (job.submit, job.id)
