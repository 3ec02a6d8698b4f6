"""The scheduling cycle: pending jobs in, ``Admit``/``Skip`` decisions out.

One ``Scheduler`` owns a ``ClusterView`` (its snapshot of free capacity) and the pending
queue. The cycle *assumes* each admission on that view at once, so the next job in the same
cycle sees it (kube-scheduler's "assume in the cache"); the caller, an applier, makes the
decisions real: the simulator by scheduling finish events, the live control plane by writing
to its store and starting processes. Nothing here reads a clock or does I/O; randomness comes
from the ``numpy.random.Generator`` handed to ``cycle``.

Cycle phases (see docs/architecture.md):
  1. Wake: shapes that began to fit since the last cycle (the shape table saw a node change
     that made room) rejoin the active heap.
  2. Order: each job's static queue-order key; jobs of one shape wait in one heap, and the
     heads of the shapes worth trying in the active heap.
  3. Place: all tasks of a job or none (``gang.place_job``), via the placement policy, using
     the shape table's exact per-node counts: a job is only tried when its shape fits.
  4. Decide: ``Admit`` with its placement, or ``Skip`` with a typed reason.
Two disciplines: *skip-ahead* (a job that does not fit is passed over, later jobs may start)
and *strict* (the head of the queue blocks everything behind it).

Why a saturated queue is cheap: a shape that does not fit leaves the active heap and returns
only when a node change makes it fit, so a cycle costs O(shapes tried + jobs admitted), never
O(pending jobs).
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
    active_key: Any = None  # key of the entry in the active heap, if any
    skipped: str | None = None  # the head job last tried and found not to fit


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
        self.placement.observe(job)
        sid = self.table.id_of((job.task, job.tasks, job.min_tasks))
        if sid == len(self._shapes):
            self._shapes.append(_Shape(sid))
        shape = self._shapes[sid]
        if not shape.heap:
            self.table.set_idle(sid, False)
        heapq.heappush(shape.heap, (key, job))
        self._pending[job.id] = (key, sid)
        if self.strict:
            heapq.heappush(self._all, (key, job))
        else:
            # Tried in the next cycle: it fits, or it gets its Skip with the reason.
            self._activate(shape)

    def remove(self, job_id: str) -> bool:
        """Withdraw a pending job (e.g. cancelled). False if it is not pending."""
        entry = self._pending.pop(job_id, None)
        if entry is None:
            return False
        shape = self._shapes[entry[1]]
        was_head = shape.heap[0][1].id == job_id
        shape.heap = [e for e in shape.heap if e[1].id != job_id]
        heapq.heapify(shape.heap)
        if not self._pending:
            self.table.untrack_all()
        elif not shape.heap:
            self.table.set_idle(shape.sid, True)
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
        """Why a pending job is still pending (None: it would fit now, or was never tried)."""
        entry = self._pending.get(job_id)
        if entry is None:
            return None
        if self.strict:
            head = self._head()
            if head is not None and head.id != job_id:
                # Only a head that has been tried and failed blocks the line.
                head_shape = self._shapes[self._pending[head.id][1]]
                return HeadOfLine(head.id) if head_shape.skipped == head.id else None
            if self._shapes[entry[1]].skipped != job_id:
                return None
        sid = entry[1]
        if not self.table.is_tracked(sid) or self.table.fits(sid):
            return None
        return self._no_capacity(sid)

    # ---------------------------------------------------------------- capacity changes
    def release(self, placement: JobPlacement) -> None:
        """Give a finished or evicted job's resources back to the view."""
        for tp in placement.tasks:
            self.view.release(tp)

    # ---------------------------------------------------------------- the cycle
    def cycle(self, rng: np.random.Generator) -> list[Decision]:
        """Run one scheduling cycle; every admission is already assumed on the view."""
        return self._cycle_strict(rng) if self.strict else self._cycle_skip_ahead(rng)

    def _cycle_skip_ahead(self, rng: np.random.Generator) -> list[Decision]:
        self._wake()
        decisions: list[Decision] = []
        active = self._active
        table = self.table
        while active:
            key, sid = heapq.heappop(active)
            shape = self._shapes[sid]
            if shape.active_key != key:
                continue  # stale entry: the shape's head changed since it was pushed
            shape.active_key = None
            if not shape.heap:
                continue
            job = shape.heap[0][1]
            if shape.skipped == job.id and table.is_tracked(sid) and not table.fits(sid):
                continue  # known not to fit, and already told: out until it fits again
            decision = self._try(job, shape, rng)
            decisions.append(decision)
            if type(decision) is Admit:
                self._activate(shape)
            else:
                # Out of the active heap until a node change makes the shape fit again.
                shape.skipped = job.id
        return decisions

    def _cycle_strict(self, rng: np.random.Generator) -> list[Decision]:
        self.table.began_to_fit.clear()  # strict mode looks at its head only (fits() flushes)
        decisions: list[Decision] = []
        while (job := self._head()) is not None:
            shape = self._shapes[self._pending[job.id][1]]
            decision = self._try(job, shape, rng)
            decisions.append(decision)
            if type(decision) is Skip:
                shape.skipped = job.id
                break
            heapq.heappop(self._all)
        return decisions

    def _try(self, job: Job, shape: _Shape, rng: np.random.Generator) -> Decision:
        """Admit ``job`` if its shape fits, else Skip it; a shape that fails starts being tracked.

        A tracked shape's fit is known exactly, and its per-node counts are read instead of
        recomputed (copied: the row changes as the job's own tasks are allocated). An untracked
        shape (nothing of it failed since the queue was last empty) is simply placed.
        """
        table = self.table
        sid = shape.sid
        if table.is_tracked(sid):
            if not table.fits(sid):
                return Skip(job, self._no_capacity(sid))
            placement, reason, _ = place_job(
                self.view, job, self.placement, rng, k=table.counts(sid)
            )
            if placement is None:
                raise AssertionError(f"shape of job {job.id} fits but placement failed: {reason}")
        else:
            placement, reason, k = place_job(self.view, job, self.placement, rng)
            if placement is None:
                assert reason is not None
                table.track(sid, k)
                return Skip(job, reason)
        heapq.heappop(shape.heap)
        del self._pending[job.id]
        if not self._pending:
            # An empty queue needs no counts at all.
            table.untrack_all()
        elif not shape.heap:
            table.set_idle(sid, True)
        return Admit(job, placement)

    # ---------------------------------------------------------------- helpers
    def _wake(self) -> None:
        # Phase 1: shapes that began to fit rejoin the active heap.
        table = self.table
        if table.waiting_tracked():
            table.flush()  # else nothing tracked waits: the recount can wait for a look
        woken = table.began_to_fit
        if woken:
            for sid in woken:
                self._activate(self._shapes[sid])
            woken.clear()

    def _no_capacity(self, sid: int) -> NoCapacity:
        t = self.table
        return NoCapacity(int(t.need[sid]), t.total(sid), t.largest(sid))

    def _activate(self, shape: _Shape) -> None:
        if not shape.heap:
            return
        key = self._pending[shape.heap[0][1].id][0]
        if shape.active_key is None or key < shape.active_key:
            shape.active_key = key
            heapq.heappush(self._active, (key, shape.sid))

    def _head(self) -> Job | None:
        # Admitted jobs leave _all as they start and removed ones in remove(): the top is current.
        return self._all[0][1] if self._all else None
