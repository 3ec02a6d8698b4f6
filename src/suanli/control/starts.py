"""The control plane's start-time estimates: each pending job's, as ``suanli queue`` and
``suanli show`` (and ``GET /v1/jobs``) tell its user, like Slurm's ``squeue --start``.

The loop keeps one ``suanli.core.starts.StartEstimator`` on its view and its scheduler's
runtime predictor (or a history predictor of its own). A job is estimated on the pass that
takes it in (placed after the jobs the current plan holds), and the whole queue at most every
``REFRESH_S`` while anything changed (a plan on the same running and pending jobs would be
the same plan); never every pass. Only estimates that moved are written, in one write: the
estimator's damping keeps a small move from being one. The estimator learns each job's
runtime at its end and each job's real wait at its start, as in the simulator.

Pre-staging: a job the plan expects to start within ``PRESTAGE_LEAD_S`` is handed once to
the backend's ``prepare`` (where it has one: ``suanli.backends.prepare``), and its history
says so. With it go the nodes it is expected to land on (``nodes_for``): those of the running
attempts expected to end first, among the nodes it could use, until they hold as many GPUs as
it asks for (at most ``PRESTAGE_NODES``): where its GPUs will come from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from suanli.control.attempts import to_ms
from suanli.core.model import MILLI, Job
from suanli.core.scheduler import Scheduler
from suanli.core.starts import REFRESH_S, Estimate, RunningRow, for_runtime
from suanli.core.view import ClusterView
from suanli.store import Store
from suanli.store import predictions as pr

PRESTAGE_LEAD_S = REFRESH_S + 60.0
"""A pending job expected to start within this many seconds is prepared (a whole refresh of
the plan ahead, so that the next refresh is not too late)."""


PRESTAGE_NODES = 8
"""The most nodes one job's preparation is asked of."""


@dataclass(frozen=True)
class WhatIf:
    """When a job that is not queued would start if it were submitted now
    (``LiveStarts.what_if``), and the cluster as it found it."""

    estimate: Estimate
    room_now: bool
    """Its gang minimum fits the free GPUs now (it may still wait behind queued jobs)."""
    load: float
    """GPUs held and GPUs the pending jobs ask for, over the cluster's GPUs."""
    pending: int
    """Jobs pending."""


def _ms(t: float) -> int | None:
    return to_ms(t) if math.isfinite(t) else None


class LiveStarts:
    """See the module docstring. ``view`` and ``sched``: the loop's (a new one after a
    recovery reset gets a new ``LiveStarts``)."""

    def __init__(self, store: Store, view: ClusterView, sched: Scheduler) -> None:
        self.store = store
        self.estimator, self._teach = for_runtime(view, sched.runtime)
        self.written: dict[str, pr.StartEstimate] = {}  # pending job -> what the store has
        self.arrived: list[Job] = []
        self.full_at = -math.inf
        self.prepared: set[str] = set()  # pending jobs the backend was asked to prepare

    def arrive(self, job: Job) -> None:
        """``job`` was taken in: it is estimated at the end of this pass."""
        self.arrived.append(job)

    def learn(self, job: Job, runtime: float, at: float) -> None:
        """``job`` ended at ``at`` after running ``runtime`` seconds."""
        self.estimator.learn(job, runtime)
        if self._teach is not None:
            self._teach(job, runtime, at)

    def learn_past(self, job: Job, runtime: float, at: float) -> None:
        """``job`` ended at ``at``, before this control plane started (its store's history)."""
        self.estimator.learn_past(job, runtime)
        if self._teach is not None:
            self._teach(job, runtime, at)

    def started(self, job_id: str, at: float) -> None:
        """``job_id`` was admitted at ``at``: it waits no longer."""
        self.estimator.started(job_id, at)
        self.written.pop(job_id, None)
        self.prepared.discard(job_id)

    def left(self, job_id: str) -> None:
        """``job_id`` is no longer pending (cancelled, refused)."""
        self.written.pop(job_id, None)
        self.prepared.discard(job_id)

    def refresh(
        self,
        now: float,
        running: Callable[[], Iterable[RunningRow]],
        pending: Callable[[], Sequence[Job]],
        is_pending: Callable[[str], bool],
    ) -> list[str]:
        """This pass's estimates: the jobs that arrived, or every pending job once
        ``REFRESH_S`` has passed since the last time; the moved ones written. Returns the
        jobs to prepare now: those expected to start within ``PRESTAGE_LEAD_S`` that were
        not prepared yet (pre-staging)."""
        arrived = [j for j in self.arrived if is_pending(j.id)]
        self.arrived.clear()
        due = now - self.full_at >= REFRESH_S
        if not due and not arrived:
            return []
        got = self.estimator.estimate(now, running, pending, None if due else arrived)
        if due:
            self.full_at = now
        changed: dict[str, pr.StartEstimate] = {}
        for job_id, e in got.items():
            row = self._row(e)
            if self.written.get(job_id) != row:
                changed[job_id] = self.written[job_id] = row
        pr.set_start_estimates(self.store, changed)
        soon = [
            j for j, e in got.items() if e.p50 <= now + PRESTAGE_LEAD_S and j not in self.prepared
        ]
        self.prepared.update(soon)
        return soon

    def what_if(
        self,
        now: float,
        running: Callable[[], Iterable[RunningRow]],
        pending: Callable[[], Sequence[Job]],
        job: Job,
        current: bool = True,
    ) -> WhatIf:
        """When ``job``, not queued, would start if submitted now: placed after the jobs the
        plan holds, as a new arrival is (``StartEstimator.what_if``); nothing is kept. With
        ``current`` the plan is made again first if the running or pending jobs changed
        since it was made (the loop asks so once a pass, for the first what-if of the
        pass)."""
        est = self.estimator.what_if(now, running, pending, job, current)
        view = self.estimator.view
        queued = pending()
        room = int(view.fit_counts(job.task, job.tasks).sum()) >= job.min_tasks
        asked = sum(j.gpu_demand_milli for j in queued)
        load = (view.allocated_milli + asked) / max(view.total_gpus * MILLI, 1)
        return WhatIf(est, room, load, len(queued))

    def nodes_for(
        self, jobs: Sequence[Job], now: float, rows: Sequence[RunningRow]
    ) -> list[list[int]]:
        """The nodes each of ``jobs`` is expected to land on (see the module docstring), by
        index of the view, the first to free up first (``rows``: the running attempts, their
        ends expected once for all the jobs)."""
        if not rows:
            return [[] for _ in jobs]
        first = self.estimator.expected_ends(now, rows).argsort(kind="stable").tolist()
        return [self._nodes_for(job, [rows[k] for k in first]) for job in jobs]

    def _nodes_for(self, job: Job, ending: list[RunningRow]) -> list[int]:
        ok = self.estimator.view.task_ok(job.task)
        want = max(job.task.gpus, 1) * max(job.tasks, 1)
        got: list[int] = []
        held = 0
        for _, _, placement in ending:
            for tp in placement.tasks:
                if not ok[tp.node]:
                    continue
                if tp.node not in got:
                    if len(got) == PRESTAGE_NODES:
                        return got
                    got.append(tp.node)
                held += len(tp.gpus)
            if held >= want:
                break
        return got

    @staticmethod
    def _row(e: Estimate) -> pr.StartEstimate:
        return (_ms(e.p50), _ms(e.p90), to_ms(e.planned_at))
