"""GPU memory pooling in the simulator (``suanli.core.pooling``): what the pooled jobs cost.

``simulate(..., memory_pool=MemoryPool())`` rewrites each job that no GPU could hold as asked
before the replay, and ``records.pooled`` says how each is served. Of the GPU-seconds a pooled
job held, the share ``1 − 1 / ((1 + L) · s)`` (``L`` lenders a GPU, slowdown ``s``) is what
pooling cost: idle lenders and the time spent waiting on memory over a link.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from suanli.core.pooling import SOURCES

if TYPE_CHECKING:
    from suanli.sim.results import JobRecords

__all__ = ["pool_line", "pool_summary"]


def pool_summary(rec: JobRecords) -> dict[str, object]:
    """Plain data: pooled jobs by source, their mean slowdown, the GPU-hours they held and
    the share of those that pooling cost."""
    assert rec.pooled is not None
    index = {j: i for i, j in enumerate(rec.ids)}
    held = cost = slow = 0.0
    by_source = dict.fromkeys(SOURCES, 0)
    for jid, p in rec.pooled.items():
        i = index[jid]
        by_source[p.source] += 1
        slow += p.slowdown
        h = (
            float(rec.gpu_milli[i])
            / 1000.0
            * (float(rec.held_s[i]) if rec.held_s is not None else 0.0)
        )
        held += h
        cost += h * (1.0 - 1.0 / ((1 + p.lenders) * p.slowdown))
    n = len(rec.pooled)
    return {
        "pooled_jobs": n,
        "by_source": by_source,
        "mean_slowdown": slow / n if n else 1.0,
        "held_gpu_hours": held / 3600.0,
        "pooling_cost_gpu_hours": cost / 3600.0,
    }


def pool_line(rec: JobRecords) -> str:
    """One line for a report."""
    s = pool_summary(rec)
    by = s["by_source"]
    assert isinstance(by, dict)
    return (f"memory pool: {s['pooled_jobs']:,} job(s) pooled (peer {by['peer']:,}, host "
            f"{by['host']:,}), {s['mean_slowdown']:.2f}x slower on average; they held "
            f"{s['held_gpu_hours']:,.1f} GPU-h, {s['pooling_cost_gpu_hours']:,.1f} of it the "
            "pooling's cost")  # fmt: skip
