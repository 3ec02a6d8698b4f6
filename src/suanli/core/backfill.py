"""EASY backfill: a reservation for the blocked head job, and the test a later job must pass.

EASY backfilling (Lifka's, as analysed by Mu'alem and Feitelson, IEEE TPDS 2001): when the
first job in queue order cannot start, it gets a *reservation*: the earliest time ``until`` at
which it would fit if running jobs end when their estimates say (``Job.estimate``, or a
default for jobs without one; the true runtime with ``oracle``, as a reference only). Later
jobs may still start now, but only if they end (by their estimate) before ``until``, or if the
reserved job would still fit at ``until`` with them running. So a backfilled job never delays
the reservation, as long as the estimates hold.

Here "would fit" is exact: the jobs expected to end by ``until`` are released from the cluster
view in a what-if and the reserved job's fit counts are read, then everything is restored. The
counts at ``until`` are kept; a later job changes only the nodes it takes, which alone are
recounted to test it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from suanli.core.model import Job
from suanli.core.preemption import Running
from suanli.core.view import ClusterView

DEFAULT_ESTIMATE = 86_400.0
"""Seconds assumed for a job that gives no estimate (Slurm's ``DefaultTime`` plays this part)."""


@dataclass(slots=True)
class Reservation:
    """Job ``job`` is reserved to start at ``until``, when the jobs in ``ending`` have ended.

    ``counts`` is how many of its tasks each node could take then (with what runs now).
    """

    job: Job
    until: float
    ending: list[Running]
    counts: np.ndarray


def estimated_end(r: Running, oracle: bool, default: float = DEFAULT_ESTIMATE) -> float:
    """When ``r`` is expected to end: its start plus its estimate (or true runtime)."""
    if oracle:
        return r.start + r.job.runtime
    est = r.job.estimate
    return r.start + (est if est is not None else default)


def fits(view: ClusterView, job: Job) -> bool:
    """Whether the view has room for ``job``'s smallest start now (exact counts)."""
    return int(view.fit_counts(job.task, job.tasks).sum()) >= job.min_tasks


def reserve(
    view: ClusterView, head: Job, running: Iterable[Running], now: float, oracle: bool
) -> Reservation | None:
    """The earliest reservation for ``head``, or None if it would not fit even on an empty
    cluster of what is running now (it then waits for something else, such as quota)."""
    order = sorted(running, key=lambda r: (estimated_end(r, oracle), r.job.id))
    need = head.min_tasks * head.task.gpu_share_milli if head.task.gpus else 0
    free = int(view.node_free_milli.sum())
    done: list[Running] = []
    try:
        for r in order:
            for tp in r.placement.tasks:
                view.release(tp)
            done.append(r)
            free += r.placement.gpu_milli
            if free >= need and fits(view, head):
                counts = view.fit_counts(head.task, head.tasks)
                return Reservation(head, max(now, estimated_end(r, oracle)), list(done), counts)
        return None
    finally:
        for r in reversed(done):
            for tp in r.placement.tasks:
                view.allocate(tp)


def still_fits(view: ClusterView, res: Reservation, nodes: Iterable[int]) -> bool:
    """Whether the reserved job still fits at its time now that something new holds
    ``nodes``: only those nodes' counts can have changed, so only they are recounted (with
    the tasks of the ending jobs that sit on them released in a what-if). If it does, the
    reservation's counts take the new job in (it is about to start)."""
    touched = sorted(set(nodes))
    mine = [tp for r in res.ending for tp in r.placement.tasks if tp.node in set(touched)]
    for tp in mine:
        view.release(tp)
    try:
        after = view.fit_counts(res.job.task, res.job.tasks)[touched]
    finally:
        for tp in reversed(mine):
            view.allocate(tp)
    total = int(res.counts.sum()) - int(res.counts[touched].sum()) + int(after.sum())
    if total < res.job.min_tasks:
        return False
    res.counts[touched] = after  # the new job will run past ``until``: count it from now on
    return True
