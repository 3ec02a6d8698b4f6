"""Capacity loaning: taking back GPUs lent to training, preempting as few jobs as possible.

GPUs that the online services do not need now are lent to training (elastic jobs grow into
them, waiting jobs start on them). When a service needs GPUs back, ``reclaim`` chooses where
they come from, in Lyra's order (Li et al., "Lyra: Elastic Scheduling for Deep Learning
Clusters", EuroSys 2023: reclaim the lent servers whose jobs cost least to preempt):

1. free GPUs;
2. elastic jobs shrunk toward their minimum (no job stops: each pays a resize);
3. jobs preempted whole, lowest priority first: while no single job covers what is still
   needed, the one holding the most GPUs (so that the fewest jobs stop); then the smallest
   that covers the rest; of equal sizes, the one that loses least work (progress since its
   last checkpoint); then a pass that gives back any victim not needed after all.

Pure: the caller passes what runs and applies the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from suanli.core.elastic import Resizable, plan_shrink


@dataclass(frozen=True, slots=True)
class Victim:
    """A running job that could be preempted: its GPUs, priority and the work it would lose
    (seconds of progress since its last checkpoint, times its GPUs)."""

    job_id: str
    gpus: int
    priority: int = 0
    lost: float = 0.0


@dataclass(frozen=True, slots=True)
class Reclaim:
    """Where ``need`` GPUs come from: ``free`` of them idle, ``shrink`` the elastic jobs'
    new sizes, ``preempt`` the jobs stopped; ``short`` how many could not be found."""

    free: int
    shrink: dict[str, int] = field(default_factory=dict)
    preempt: tuple[str, ...] = ()
    short: int = 0


def reclaim(
    need: int,
    free: int,
    elastic: Sequence[Resizable],
    victims: Sequence[Victim],
) -> Reclaim:
    """Free ``need`` GPUs (see the module docstring). ``elastic`` and ``victims`` may name
    the same job: a job shrunk is not also preempted."""
    take = min(need, free)
    left = need - take
    shrink: dict[str, int] = {}
    if left > 0 and elastic:
        shrink, freed = plan_shrink(elastic, left)
        left -= freed
    chosen: list[Victim] = []
    if left > 0:
        pool = [v for v in victims if v.job_id not in shrink and v.gpus > 0]
        got = 0
        while got < left and pool:
            low = min(v.priority for v in pool)
            level = [v for v in pool if v.priority == low]
            covers = [v for v in level if v.gpus >= left - got]
            if covers:  # one more job is enough: the smallest that is, losing least
                v = min(covers, key=lambda v: (v.gpus, v.lost, v.job_id))
            else:  # not yet: the largest, so that the fewest jobs stop
                v = min(level, key=lambda v: (-v.gpus, v.lost, v.job_id))
            pool.remove(v)
            chosen.append(v)
            got += v.gpus
        # Give back the victims that turned out unnecessary (largest loss first).
        for v in sorted(chosen, key=lambda v: (-v.lost, v.job_id)):
            if got - v.gpus >= left:
                chosen.remove(v)
                got -= v.gpus
        left = max(0, left - got)
    return Reclaim(take, shrink, tuple(v.job_id for v in chosen), left)
