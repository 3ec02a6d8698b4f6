"""The first EASY implementation, kept as the reference the fast one is held to: a
reservation sorts the running jobs by expected end and releases them one by one on the view,
re-reading ``fit_counts`` over all nodes after each; a candidate is placed in a what-if and
the ending jobs' tasks on its nodes are released again to recount. Registered as
``backfill/easy-reference`` (for ``tests/core/test_backfill.py`` and
``benchmarks/bench_backfill.py``)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from suanli.core.backfill import Easy, Reservation, estimated_end, fits
from suanli.core.gang import place_job
from suanli.core.model import Job
from suanli.core.registry import names, register
from suanli.core.running import Running
from suanli.core.seams import RuntimeEstimator
from suanli.core.view import ClusterView


def reference_reserve(
    view: ClusterView,
    head: Job,
    running: Iterable[Running],
    now: float,
    runtime: RuntimeEstimator,
) -> Reservation | None:
    """The first implementation of ``backfill.reserve``, kept as the reference."""
    order_ = sorted(running, key=lambda r: (estimated_end(r, runtime), r.job.id))
    need = head.min_tasks * head.task.gpu_share_milli if head.task.gpus else 0
    free = int(view.node_free_milli.sum())
    done: list[Running] = []
    try:
        for r in order_:
            for tp in r.placement.tasks:
                view.release(tp)
            done.append(r)
            free += r.placement.gpu_milli
            if free >= need and fits(view, head):
                counts = view.fit_counts(head.task, head.tasks)
                return Reservation(head, max(now, estimated_end(r, runtime)), list(done), counts)
        return None
    finally:
        for r in reversed(done):
            for tp in r.placement.tasks:
                view.allocate(tp)


def reference_still_fits(view: ClusterView, res: Reservation, nodes: Iterable[int]) -> bool:
    """The first implementation of ``backfill.still_fits``, kept as the reference."""
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
    res.counts[touched] = after
    return True


class ReferenceEasy(Easy):
    """EASY with the first implementation's reservation and candidate test (the two parts
    an ``Easy`` backfill names for this: ``reserve`` and ``delays``)."""

    def reserve(self, job: Job) -> Reservation | None:
        h = self.h
        return reference_reserve(h.view, job, h.running.records.values(), h.now, self.runtime)

    def delays(self, job: Job, res: Reservation) -> bool:
        view = self.h.view
        jp, _, _ = place_job(view, job, self.h.placement, np.random.default_rng(0))
        if jp is None:
            return False
        try:
            return not reference_still_fits(view, res, (tp.node for tp in jp.tasks))
        finally:
            for tp in jp.tasks:
                view.release(tp)


if "easy-reference" not in names("backfill"):
    register("backfill", "easy-reference")(ReferenceEasy)
