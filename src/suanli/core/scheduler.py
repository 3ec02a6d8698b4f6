"""The scheduling cycle: pending jobs in, ``Admit``/``Skip`` decisions out.

One ``Scheduler`` owns a ``ClusterView`` (its snapshot of free capacity) and the pending
queue. The cycle *assumes* each admission on that view at once, so the next job in the same
cycle sees it (kube-scheduler's "assume in the cache"); the caller, an applier, makes the
decisions real: the simulator by scheduling finish events, the live control plane by writing
to its store and starting processes. Nothing here reads a clock or does I/O; randomness comes
from the ``numpy.random.Generator`` handed to ``cycle``.

Cycle phases (see docs/architecture.md):
  1. Refresh: shapes blocked earlier whose nodes got capacity back are retried.
  2. Order: the queue order's static key; within one shape jobs wait in a heap.
  3. Place: all tasks of a job or none (``gang.place_job``), via the placement policy.
  4. Decide: ``Admit`` with its placement, or ``Skip`` with a typed reason.
Two disciplines: *skip-ahead* (a job that does not fit is passed over, later jobs may start)
and *strict* (the head of the queue blocks everything behind it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suanli.core.decisions import (
    Admit,
    Decision,
    HeadOfLine,
    JobPlacement,
    NoCapacity,
    Reason,
    Skip,
)
from suanli.core.gang import place_job
from suanli.core.model import Job
from suanli.core.seams import OrderContext, Placement, QueueOrder
from suanli.core.shapes import ShapeTable
from suanli.core.view import ClusterView


@dataclass(slots=True)
class _Shape:
    """Jobs of one shape waiting, in queue order."""

    sid: int
    heap: list[tuple[Any, Job]] = field(default_factory=list)
    reason: NoCapacity | None = None
    active_key: Any = None  # key of the entry in the active heap, if any


class Scheduler:
    """Pending queue plus the scheduling cycle over one ``ClusterView``."""

    def __init__(
        self,
        view: ClusterView,
        order: QueueOrder,
        placement: Placement,
        *,
        strict: bool = False,
        ctx: OrderContext | None = None,
    ) -> None:
        self.view = view
        self.order = order
        self.placement = placement
        self.strict = strict
        self.ctx = ctx or OrderContext()
        self.table = ShapeTable(view)
        self._shapes: list[_Shape] = []
        self._pending: dict[str, tuple[Any, int]] = {}  # job id -> (key, shape id)
        self._active: list[tuple[Any, int]] = []  # heads of shapes worth trying, by key
        self._all: list[tuple[Any, Job]] = []  # strict mode: every pending job, by key

    # ---------------------------------------------------------------- queue
    def __len__(self) -> int:
        return len(self._pending)

    def submit(self, job: Job) -> None:
        """Add ``job`` to the pending queue. Job ids must be unique among pending jobs."""
        if job.id in self._pending:
            raise ValueError(f"job {job.id} is already pending")
        key = self.order.key(job, self.ctx)
        sid = self.table.id_of((job.task, job.tasks, job.min_tasks))
        if sid == len(self._shapes):
            self._shapes.append(_Shape(sid))
        shape = self._shapes[sid]
        heapq.heappush(shape.heap, (key, job))
        self._pending[job.id] = (key, sid)
        if self.strict:
            heapq.heappush(self._all, (key, job))
        elif not self.table.blocked[sid]:
            self._activate(shape)

    def remove(self, job_id: str) -> bool:
        """Withdraw a pending job (e.g. cancelled). False if it is not pending."""
        entry = self._pending.pop(job_id, None)
        if entry is None:
            return False
        shape = self._shapes[entry[1]]
        was_head = bool(shape.heap) and shape.heap[0][1].id == job_id
        shape.heap = [e for e in shape.heap if e[1].id != job_id]
        heapq.heapify(shape.heap)
        if self.strict:
            self._all = [e for e in self._all if e[1].id != job_id]
            heapq.heapify(self._all)
        if was_head and shape.active_key == entry[0]:
            # Its entry in the active heap carries the removed job's key: re-enter the shape
            # under its new head's key (the old entry turns stale and is skipped).
            shape.active_key = None
            self._activate(shape)
        return True

    def pending_jobs(self) -> list[Job]:
        """Every pending job, in queue order."""
        jobs = [job for s in self._shapes for _, job in s.heap]
        return sorted(jobs, key=lambda j: self._pending[j.id][0])

    def reason(self, job_id: str) -> Reason | None:
        """Why a pending job is still pending, as of the last cycle (None: not yet tried)."""
        entry = self._pending.get(job_id)
        if entry is None:
            return None
        if self.strict:
            head = self._head()
            if head is not None and head.id != job_id:
                head_sid = self._pending[head.id][1]
                # Only a head that has been tried and failed blocks the line.
                return HeadOfLine(head.id) if self.table.blocked[head_sid] else None
        return self._shapes[entry[1]].reason if self.table.blocked[entry[1]] else None

    # ---------------------------------------------------------------- capacity changes
    def release(self, placement: JobPlacement) -> None:
        """Give a finished or evicted job's resources back to the view."""
        for tp in placement.tasks:
            self.view.release(tp)
        self.table.gained([tp.node for tp in placement.tasks])

    def capacity_changed(self, node: int) -> None:
        """Tell the scheduler that ``node`` may have more capacity (e.g. it became healthy)."""
        self.table.gained([node])

    # ---------------------------------------------------------------- the cycle
    def cycle(self, rng: np.random.Generator) -> list[Decision]:
        """Run one scheduling cycle; every admission is already assumed on the view."""
        return self._cycle_strict(rng) if self.strict else self._cycle_skip_ahead(rng)

    def _cycle_skip_ahead(self, rng: np.random.Generator) -> list[Decision]:
        # Phase 1: retry blocked shapes whose bound says they may fit on nodes that gained.
        for sid in self.table.refresh_all().tolist():
            self._activate(self._shapes[sid])
        decisions: list[Decision] = []
        active = self._active
        while active:
            key, sid = heapq.heappop(active)
            shape = self._shapes[sid]
            if shape.active_key != key:
                continue  # stale entry: the shape's head changed since it was pushed
            shape.active_key = None
            job = self._head_of(shape)
            if job is None or self.table.blocked[sid]:
                continue  # nothing waits, or re-blocked by an admission earlier in this cycle
            decision = self._try(job, shape, rng)
            decisions.append(decision)
            if type(decision) is Admit:
                self._activate(shape)
                if self.table.n_ready > 2:
                    # Re-check the ready shapes at once; one or two are cheaper to just try.
                    self.table.consumed([tp.node for tp in decision.placement.tasks])
        return decisions

    def _cycle_strict(self, rng: np.random.Generator) -> list[Decision]:
        decisions: list[Decision] = []
        while (job := self._head()) is not None:
            sid = self._pending[job.id][1]
            shape = self._shapes[sid]
            # Phase 1, strict: only the head's shape matters, so only it is recounted.
            if self.table.blocked[sid] and not len(self.table.refresh(np.array([sid]))):
                assert shape.reason is not None
                decisions.append(Skip(job, shape.reason))
                break
            decision = self._try(job, shape, rng)
            decisions.append(decision)
            if isinstance(decision, Skip):
                break
            heapq.heappop(self._all)
        return decisions

    def _try(self, job: Job, shape: _Shape, rng: np.random.Generator) -> Decision:
        self.table.tried(shape.sid)
        placement, reason, k = place_job(self.view, job, self.placement, rng)
        if placement is None:
            assert reason is not None
            shape.reason = reason
            self.table.block(shape.sid, k)
            return Skip(job, reason)
        heapq.heappop(shape.heap)
        del self._pending[job.id]
        return Admit(job, placement)

    # ---------------------------------------------------------------- helpers
    def _activate(self, shape: _Shape) -> None:
        job = self._head_of(shape)
        if job is None:
            return
        key = self._pending[job.id][0]
        if shape.active_key is None or key < shape.active_key:
            shape.active_key = key
            heapq.heappush(self._active, (key, shape.sid))

    def _head_of(self, shape: _Shape) -> Job | None:
        return shape.heap[0][1] if shape.heap else None

    def _head(self) -> Job | None:
        # Admitted jobs leave _all as they start and removed ones in remove(): the top is current.
        return self._all[0][1] if self._all else None
