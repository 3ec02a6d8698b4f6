"""Preemption that counts the work it destroys, with anti-thrash rules.

When a job cannot start, the scheduler may evict running jobs to make room. A running job is
a *candidate victim* of a waiting job only if all of these hold:

* its priority class is preemptible (``PriorityClass.preemptible``; ``online`` and ``high``
  are not by default);
* it has run at least ``min_runtime`` seconds (a job just started is protected), or, when
  the waiting job's queue reclaims what it lent, ``reclaim_within`` seconds if that is less:
  a queue gets its guaranteed quota back within ``reclaim_within`` of asking for it;
* it has been preempted fewer than ``max_preemptions`` times in the last ``window`` seconds;
* and either its priority is strictly lower than the waiting job's, or (``reclaim``) its
  queue is above its nominal quota while the waiting job's queue, with the job, would stay
  within its own: the waiting queue takes back what it lent;
* with quotas, it runs in the waiting job's own queue, or in a queue of the same cohort that
  is above its nominal quota (borrowing): a queue within its quota keeps it, whatever the
  priorities (its guarantee holds), and other cohorts are never touched.

Two admission rules make that guarantee hold with reclaim on (``reclaim``): a job that could
never be reclaimed (its class is not preemptible) or that has reached its thrash cap is
admitted only within its queue's nominal quota: it may not borrow. So whatever a queue
borrows can always be taken back, and taking it back never breaks the thrash cap.

Among the candidates the victims are chosen to destroy the least work: candidates are taken
cheapest first (GPU-seconds since their last checkpoint, then the most recently started)
until the waiting job fits; then every victim whose eviction turns out not to be needed is
reprieved, most expensive first. A job is evicted whole (all tasks of a gang), and with it
all work since its last checkpoint (``Job.checkpoint_interval``; none: all work this
attempt). The simulator charges that lost work and ``restart_overhead`` when the job resumes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from suanli.core.model import PriorityClass, SpecError
from suanli.core.running import Running


@dataclass(frozen=True)
class PreemptionConfig:
    """The preemption rules (see the module docstring)."""

    min_runtime: float = 600.0
    max_preemptions: int = 3
    window: float = 86_400.0
    restart_overhead: float = 60.0
    reclaim: bool = True
    reclaim_within: float | None = None
    """Longest a borrower's minimum runtime shields it from reclaim (None: ``min_runtime``)."""
    policy: str = "checkpoint-aware"
    """The ``preemption/...`` plugin that applies these rules (``suanli policies``)."""
    defrag_moves_per_hour: float = 6.0
    """``preemption/defrag``: at most this many jobs moved in any hour (no published
    figure: a budget to set; ``docs/defrag.md``)."""

    def __post_init__(self) -> None:
        for name in ("min_runtime", "window", "restart_overhead", "reclaim_within"):
            v = getattr(self, name)
            if v is None:
                continue
            if not (math.isfinite(v) and v >= 0):
                raise SpecError(f"preemption {name} must be >= 0, got {v}")
        if not (math.isfinite(self.defrag_moves_per_hour) and self.defrag_moves_per_hour >= 0):
            raise SpecError(
                f"preemption defrag_moves_per_hour must be >= 0, got {self.defrag_moves_per_hour}"
            )
        if self.max_preemptions < 0:
            raise SpecError(f"preemption max_preemptions must be >= 0, got {self.max_preemptions}")


def min_runtime(cfg: PreemptionConfig, reclaim: bool) -> float:
    """How long a job just started is protected (from reclaim: at most ``reclaim_within``)."""
    if reclaim and cfg.reclaim_within is not None:
        return min(cfg.min_runtime, cfg.reclaim_within)
    return cfg.min_runtime


def capped(preempted_at: Sequence[float], now: float, cfg: PreemptionConfig) -> bool:
    """Whether a job preempted at ``preempted_at`` (ascending) has reached the thrash cap:
    ``max_preemptions`` within the last ``window`` seconds."""
    if len(preempted_at) < cfg.max_preemptions:
        return False
    recent = len(preempted_at) - bisect_right(preempted_at, now - cfg.window)
    # bisect counts t > now - window; the cap counts now - t < window: the same set.
    return recent >= cfg.max_preemptions


def protected(r: Running, now: float, cfg: PreemptionConfig, reclaim: bool = False) -> bool:
    """Whether ``r`` may not be evicted now (class, minimum runtime, thrash cap); ``reclaim``:
    by a queue taking back what it lent."""
    if not r.preemptible or now - r.start < min_runtime(cfg, reclaim):
        return True
    return capped(r.preempted_at, now, cfg)


def protected_until(r: Running, now: float, cfg: PreemptionConfig, reclaim: bool) -> float:
    """When a preemptible ``r`` protected now stops being protected (a lower bound for the
    thrash cap: the oldest preemption in the window leaves it then)."""
    until = r.start + min_runtime(cfg, reclaim)
    if now >= until and r.preempted_at:
        k = len(r.preempted_at) - cfg.max_preemptions
        until = r.preempted_at[max(0, k)] + cfg.window
    return until


def victim_order(candidates: Sequence[Running], now: float) -> list[Running]:
    """Cheapest first: least work lost, then the most recently started, then by id."""
    return sorted(candidates, key=lambda r: (r.lost_gpu_seconds(now), -r.start, r.job.id))


def no_borrow_class(
    job_class: str, classes: Mapping[str, PriorityClass], cfg: PreemptionConfig | None
) -> str | None:
    """Why jobs of ``job_class`` may not borrow quota (None: they may): with reclaim on, a
    class that is not preemptible could never give borrowed capacity back (nor could any job
    with a thrash cap of 0)."""
    if cfg is None or not cfg.reclaim:
        return None
    if cfg.max_preemptions == 0:
        return "max_preemptions is 0, so nothing could be reclaimed"
    pc = classes.get(job_class)
    if pc is None or not pc.preemptible:
        return f"class {job_class} is not preemptible"
    return None
