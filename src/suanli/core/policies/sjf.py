"""queue/sjf: shortest job first on the TRUE runtime (an oracle, for reference only)."""

from __future__ import annotations

from typing import Any

from suanli.core.model import Job
from suanli.core.registry import register
from suanli.core.seams import OrderContext, StaticOrder


@register("queue", "sjf")
class ShortestJobFirst(StaticOrder):
    """Shortest true runtime first (oracle reference: no real scheduler knows it)."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (job.runtime, job.submit, job.id)
