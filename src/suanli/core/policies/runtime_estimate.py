"""runtime/estimate: the user's estimate of a job's runtime, else a default."""

from __future__ import annotations

from suanli.core.model import Job, SpecError
from suanli.core.registry import register

DEFAULT_ESTIMATE = 86_400.0
"""Seconds assumed for a job that gives no estimate (Slurm's ``DefaultTime`` plays this part)."""


@register("runtime", "estimate")
class UserEstimate:
    """The user's estimate (Job.estimate), else 24 h, as Slurm's DefaultTime."""

    def __init__(self, default: float = DEFAULT_ESTIMATE) -> None:
        if not default >= 0:
            raise SpecError(f"runtime/estimate: default must be >= 0 seconds, got {default}")
        self.default = default

    def duration(self, job: Job) -> float:
        est = job.estimate
        return est if est is not None else self.default
