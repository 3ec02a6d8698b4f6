"""queue/priority: highest priority class first, FIFO within a class."""

from __future__ import annotations

from typing import Any

from suanli.core.model import Job
from suanli.core.registry import register
from suanli.core.seams import OrderContext, StaticOrder


@register("queue", "priority")
class Priority(StaticOrder):
    """Highest priority class first, then submit time, then job id."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (-ctx.priority(job), job.submit, job.id)
