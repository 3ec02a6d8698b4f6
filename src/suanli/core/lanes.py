"""The pending queue: jobs in *lanes*, a lane's head in the *active* heap when worth trying.

A **lane** holds the pending jobs of one request shape (``ShapeTable`` id) that every
admission check answers alike (their lane keys, ``Admission.lane_key``) and that a dynamic
queue order keys alike (``Lane.group``), in queue order. Because one answer holds for a whole
lane, a lane whose head cannot start is parked as a whole and never holds back a job that
could start. ``Lanes`` owns:

* ``lanes``: every lane, by index (lanes are never dropped: an index is stable);
* ``pending``: job id -> (its static queue-order key, its lane index);
* ``active``: a heap of (key, lane index): the heads worth trying in the next cycle. An entry
  is valid only while it equals its lane's ``active_key``; others are stale and skipped;
* ``ordered`` (only when kept: a strict queue, or a backfill that reserves for the first
  pending job): every pending job by key. Admitted jobs leave it lazily (``first_pending``)
  or, in strict order, at once (``pop_head``);
* per shape, how many jobs wait, so that the shape table counts only shapes with jobs;
* once ``jobs()`` was asked for (start-time plans ask for the whole queue), every pending
  job by key as two sorted lists, kept as jobs come and go (a new job after those of an equal
  key, as a stable sort would put it).

Nothing here decides: the scheduler's cycle and its plugins read and change the lanes through
these members.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from suanli.core.model import Job
from suanli.core.shapes import ShapeTable


@dataclass(slots=True)
class Lane:
    """The jobs of one shape that every admission check and the queue order treat alike."""

    shape: int
    """The shape's id in the shape table."""
    index: int
    """This lane's index in ``Lanes.lanes``."""
    group: int = 0
    """The group a dynamic queue order keys the lane by (a fair-share queue; 0: none)."""
    keys: tuple[Hashable, ...] = ()
    """Each admission check's lane key, in the scheduler's order of admissions."""
    heap: list[tuple[Any, Job]] = field(default_factory=list)
    """The lane's pending jobs, (static key, job), a heap."""
    active_key: Any = None
    """The key of the lane's valid entry in the active heap (None: not in it)."""
    skipped: str | None = None
    """The head job last tried and found unable to start (told once, until it may)."""
    blocked: Any = None
    """Why the head cannot start although its shape may fit (an admission's reason, or no
    room where an admission lets it go); the admission that set it clears it."""


class Lanes:
    """See the module docstring."""

    def __init__(self, table: ShapeTable, keep_order: bool) -> None:
        self.table = table
        self.keep_order = keep_order
        self.lanes: list[Lane] = []
        self.pending: dict[str, tuple[Any, int]] = {}
        self.active: list[tuple[Any, int]] = []
        self.ordered: list[tuple[Any, Job]] = []
        self._ids: dict[tuple[Hashable, ...], int] = {}
        self._of_shape: dict[int, list[int]] = {}
        self._waiting: dict[int, int] = {}
        self._keys: list[Any] | None = None  # every pending job's key, sorted (once asked for)
        self._jobs: list[Job] = []  # the jobs of ``_keys``, in its order

    def __len__(self) -> int:
        return len(self.pending)

    def lane_for(self, sid: int, group: int, keys: tuple[Hashable, ...]) -> Lane:
        """The lane of shape ``sid``, group ``group`` and admission keys ``keys`` (made on
        first sight)."""
        lk = (sid, group, *keys)
        i = self._ids.get(lk)
        if i is None:
            i = self._ids[lk] = len(self.lanes)
            self.lanes.append(Lane(sid, i, group, keys))
            self._of_shape.setdefault(sid, []).append(i)
        return self.lanes[i]

    def of_shape(self, sid: int) -> list[int]:
        """The lanes of shape ``sid``."""
        return self._of_shape[sid]

    def push(self, job: Job, key: Any, lane: Lane) -> None:
        """``job`` joins ``lane`` with static key ``key``."""
        sid = lane.shape
        waiting = self._waiting.get(sid, 0)
        if not waiting:
            self.table.set_idle(sid, False)
        self._waiting[sid] = waiting + 1
        heapq.heappush(lane.heap, (key, job))
        self.pending[job.id] = (key, lane.index)
        if self.keep_order:
            heapq.heappush(self.ordered, (key, job))
        if self._keys is not None:
            i = bisect_right(self._keys, key)
            self._keys.insert(i, key)
            self._jobs.insert(i, job)

    def take(self, job: Job, lane: Lane) -> None:
        """``job`` (pending in ``lane``) starts: it leaves the queue."""
        if lane.heap[0][1] is job:
            heapq.heappop(lane.heap)
        else:  # behind its lane's head (conservative backfill may start it first)
            lane.heap.remove((self.pending[job.id][0], job))
            heapq.heapify(lane.heap)
        self._unsort(self.pending.pop(job.id)[0], job.id)
        self._left(lane.shape)

    def _unsort(self, key: Any, job_id: str) -> None:
        if self._keys is not None:
            i = bisect_left(self._keys, key)
            while self._jobs[i].id != job_id:  # (an order whose keys can tie: the right one)
                i += 1
            del self._keys[i], self._jobs[i]

    def remove(self, job_id: str) -> tuple[Lane, bool] | None:
        """Withdraw pending ``job_id``: its lane and whether it was the lane's head; None if
        it is not pending."""
        entry = self.pending.pop(job_id, None)
        if entry is None:
            return None
        self._unsort(entry[0], job_id)
        lane = self.lanes[entry[1]]
        was_head = lane.heap[0][1].id == job_id
        lane.heap = [e for e in lane.heap if e[1].id != job_id]
        heapq.heapify(lane.heap)
        self._left(lane.shape)
        if self.keep_order:
            self.ordered = [e for e in self.ordered if e[1].id != job_id]
            heapq.heapify(self.ordered)
        return lane, was_head

    def _left(self, sid: int) -> None:
        self._waiting[sid] -= 1
        if not self.pending:
            self.table.untrack_all()  # an empty queue needs no counts at all
        elif not self._waiting[sid]:
            self.table.set_idle(sid, True)

    def lane_of(self, job_id: str) -> Lane:
        return self.lanes[self.pending[job_id][1]]

    def head(self) -> Job | None:
        """Strict order: the first pending job (admitted jobs leave ``ordered`` as they
        start, through ``pop_head``)."""
        return self.ordered[0][1] if self.ordered else None

    def pop_head(self) -> None:
        heapq.heappop(self.ordered)

    def first_pending(self) -> Job | None:
        """The first pending job in queue order (admitted jobs leave ``ordered`` lazily)."""
        heap = self.ordered
        while heap:
            key, job = heap[0]
            entry = self.pending.get(job.id)
            if entry is not None and entry[0] == key:
                return job
            heapq.heappop(heap)
        return None

    def jobs(self) -> list[Job]:
        """Every pending job, in queue order (a new list)."""
        if self._keys is None:
            both = sorted([e for lane in self.lanes for e in lane.heap], key=lambda e: e[0])
            self._keys = [k for k, _ in both]
            self._jobs = [j for _, j in both]
        return self._jobs.copy()
