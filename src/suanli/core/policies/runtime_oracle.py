"""runtime/oracle: the TRUE runtime (an oracle, for reference only)."""

from __future__ import annotations

from suanli.core.model import Job
from suanli.core.registry import register


@register("runtime", "oracle")
class TrueRuntime:
    """The true runtime (oracle reference: no real scheduler knows it)."""

    def duration(self, job: Job) -> float:
        return job.runtime
