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
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suanli.core import quota_lanes
from suanli.core.backfill import DEFAULT_DEPTH, Easy, Reservation, make_backfill, reserve
from suanli.core.budget import BudgetBlock, BudgetBook
from suanli.core.budget_gate import BudgetGate
from suanli.core.decisions import (
    Admit,
    BehindReservation,
    Decision,
    FairShareWait,
    HeadOfLine,
    JobPlacement,
    NoCapacity,
    Preempt,
    Reason,
    Skip,
)
from suanli.core.eviction import preempt
from suanli.core.gang import no_capacity, place_job
from suanli.core.model import MILLI, Job
from suanli.core.preemption import PreemptionConfig, Running
from suanli.core.seams import OrderContext, Placement, QueueOrder
from suanli.core.shapes import ShapeTable
from suanli.core.shares import Shares
from suanli.core.tenancy import OverQuota, QuotaBook
from suanli.core.view import ClusterView, TaskPlacement


@dataclass(slots=True)
class _Shape:
    """A lane: the jobs of one shape, charged to one quota queue, waiting in queue order."""

    sid: int  # the shape's id in the shape table
    lane: int  # this lane's index in Scheduler._shapes
    queue: int = -1  # quota queue index in the QuotaBook (-1: no quotas)
    group: int = 0  # fair-share group (the quota queue, or the jobs' queue name)
    heap: list[tuple[Any, Job]] = field(default_factory=list)
    active_key: Any = None  # key of the entry in the active heap, if any
    skipped: str | None = None  # the head job last tried and found not to fit
    blocked: OverQuota | NoCapacity | BudgetBlock | None = None
    """Why the head cannot start although its shape fits the cluster: its queue's quota, or
    no room on the GPU models its quota allows. Cleared (and the lane woken) by a release."""


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
        quotas: QuotaBook | None = None,
        preemption: PreemptionConfig | None = None,
        backfill: str | None = None,
        backfill_depth: int = DEFAULT_DEPTH,
        budgets: BudgetBook | None = None,
    ) -> None:
        self.view = view
        self.order = order
        self.placement = placement
        self.strict = strict
        self.ctx = ctx or OrderContext()
        self.quotas = quotas
        """Quota queues and their usage; None: no quotas (every job may use any capacity)."""
        self.budget = BudgetGate(budgets) if budgets is not None else None
        """Budgets and their hard actions (``suanli.core.budget_gate``); None: no budgets."""
        self.table = ShapeTable(view)
        self._shapes: list[_Shape] = []  # lanes, by lane index
        # (shape, queue or group, may not borrow, budgets) -> lane
        self._lane_ids: dict[tuple[int, int, bool, int], int] = {}
        self._lanes_of: dict[int, list[int]] = {}  # shape id -> its lanes
        self._waiting: dict[int, int] = {}  # shape id -> jobs of that shape pending
        self._pending: dict[str, tuple[Any, int]] = {}  # job id -> (key, lane)
        self._charged: dict[str, tuple[str, np.ndarray]] = {}  # running job -> (queue, demand)
        # cohort (or -1 - queue, for a limit of the queue's own) -> lanes blocked by quota
        self._blocked: dict[int, set[int]] = {}
        self._blocked_room: set[int] = set()  # lanes blocked for room on their allowed models
        self._queue_cache: dict[tuple[str, str], int] = {}
        self.preemption = preemption
        """Preemption rules; None: never evict a running job."""
        self._running: dict[str, Running] = {}  # with preemption: running jobs by id
        self._evictable: dict[int, set[str]] = {}  # priority -> running preemptible job ids
        self._preempted_at: dict[str, list[float]] = {}  # job id -> when it was preempted
        self._evictions: list[Preempt] = []  # this cycle's evictions, before their Admit
        self._now = 0.0
        self._preempting = False
        self._bf = make_backfill(backfill, view, backfill_depth)
        self.backfill = backfill
        """Backfill behind reservations (``suanli.core.backfill.MODES``: ``easy`` for the
        blocked head, ``conservative`` for the first ``backfill_depth`` pending jobs; their
        ``-oracle`` forms by true runtimes, a reference); None: plain skip-ahead."""
        self._track_running = preemption is not None or backfill is not None
        self._deferred: list[int] = []  # lanes held behind a reservation, for the next cycle
        self._health_seen = view.health_changes
        self._protect_wake = math.inf  # the earliest end of a protection that blocked a job
        self._protect_lanes: set[int] = set()
        self._reservation: Reservation | None = None  # the head's, kept while it holds
        self._reservation_key: tuple[str, int] | None = None
        self._ended = 0  # running jobs that ended or were evicted so far
        # Fair sharing between queues (queue orders drf and fair-share): per group, what it
        # holds now (GPU milli, CPU milli, memory MiB) and its decayed usage.
        self.fair: str | None = getattr(order, "fair", None)
        caps = np.array(
            [view.total_gpus * MILLI, float(view.cap_cpu.sum()), float(view.cap_mem.sum())]
        )
        self._shares = Shares(self.fair or "drf", getattr(order, "half_life", math.inf), caps)
        self._evicted_group: dict[str, int] = {}
        self._owed: dict[int, set[int]] = {}  # cohort -> lanes waiting within their nominal
        self._active: list[tuple[Any, int]] = []  # heads of shapes worth trying, by key
        self._all: list[tuple[Any, Job]] = []  # strict mode: every pending job, by key

    # ---------------------------------------------------------------- queue
    def __len__(self) -> int:
        return len(self._pending)

    @property
    def wake_at(self) -> float:
        """When a cycle could start a job although nothing arrives or ends before then (a
        protection that kept a waiting job from evicting ends); inf: no such time."""
        return self._protect_wake

    def submit(
        self,
        job: Job,
        now: float | None = None,
        *,
        requeued: bool = False,
        preempted_at: Sequence[float] = (),
    ) -> Decision | None:
        """Add ``job`` to the pending queue. Job ids must be unique among pending jobs.

        With quotas, the job is charged to the queue it names or, failing that, the queue of
        its organisation (``TenancySpec.queue_of``; ``SpecError`` if none serves it). With
        budgets, a new job (not ``requeued``) may be refused (``Reject``, not queued) or
        demoted (``Demoted``, queued in its new class); that decision is returned.
        ``preempted_at``: when the job was preempted before, for a scheduler rebuilt from a
        store (``restore``); the thrash cap and the restart overhead count them.
        """
        if job.id in self._pending:
            raise ValueError(f"job {job.id} is already pending")
        if preempted_at:
            self._preempted_at[job.id] = list(preempted_at)
        told: Decision | None = None
        if self.budget is not None and not requeued:
            queued, told = self.budget.submitted(job, self._now if now is None else now)
            if queued is None:
                return told
            job = queued
        queue = self._queue_index(job) if self.quotas is not None else -1
        key = self.order.key(job, self.ctx)
        self.placement.observe(job)
        sid = self.table.id_of((job.task, job.tasks, job.min_tasks))
        group = self._group_of(job, queue) if self.fair else 0
        # Jobs that may not borrow wait in lanes of their own: a quota answer is the same for
        # every job of one lane, so a blocked head never holds back a job that could start.
        lk = (
            sid,
            group if self.fair else queue,
            queue >= 0 and quota_lanes.no_borrow(self, job) is not None,
            self.budget.lane_key(job) if self.budget is not None else 0,
        )
        lane_id = self._lane_ids.get(lk)
        if lane_id is None:
            lane_id = len(self._shapes)
            self._shapes.append(_Shape(sid, lane_id, queue, group))
            self._lane_ids[lk] = lane_id
            self._lanes_of.setdefault(sid, []).append(lane_id)
        shape = self._shapes[lane_id]
        waiting = self._waiting.get(sid, 0)
        if not waiting:
            self.table.set_idle(sid, False)
        self._waiting[sid] = waiting + 1
        heapq.heappush(shape.heap, (key, job))
        self._pending[job.id] = (key, lane_id)
        if self.strict or self.backfill is not None:
            heapq.heappush(self._all, (key, job))
        if self._bf is not None:
            self._bf.submitted(key, job)
        if not self.strict:
            # Tried in the next cycle: it fits, or it gets its Skip with the reason.
            self._activate(shape)
        return told

    def _group_of(self, job: Job, queue: int) -> int:
        """The fair-share group of ``job``: its quota queue, or its queue name."""
        book = self.quotas
        if book is not None and queue >= 0:
            return self._shares.group(book.queues[queue], book.spec.queues[queue].weight)
        return self._shares.group(job.queue)

    def _queue_index(self, job: Job) -> int:
        book = self.quotas
        assert book is not None
        ck = (job.queue, job.tenant)
        q = self._queue_cache.get(ck)
        if q is None:
            q = self._queue_cache[ck] = book.index[book.spec.queue_of(job)]
        return q

    def remove(self, job_id: str) -> bool:
        """Withdraw a pending job (e.g. cancelled). False if it is not pending."""
        entry = self._pending.pop(job_id, None)
        if entry is None:
            return False
        shape = self._shapes[entry[1]]
        was_head = shape.heap[0][1].id == job_id
        shape.heap = [e for e in shape.heap if e[1].id != job_id]
        heapq.heapify(shape.heap)
        self._waiting[shape.sid] -= 1
        if not self._pending:
            self.table.untrack_all()
        elif not self._waiting[shape.sid]:
            self.table.set_idle(shape.sid, True)
        if self.strict or self.backfill is not None:
            self._all = [e for e in self._all if e[1].id != job_id]
            heapq.heapify(self._all)
        if was_head and shape.active_key is not None:
            # Its entry in the active heap carries the removed job's key (its plain key, or
            # with fair sharing its fair key): re-enter the shape under its new head's key
            # (the old entry turns stale and is skipped).
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
        lane = self._shapes[entry[1]]
        if lane.blocked is not None:
            return lane.blocked  # the same answer for every job of the lane (same demand)
        sid = lane.sid
        if not self.table.is_tracked(sid) or self.table.fits(sid):
            return None
        job = next(j for _, j in lane.heap if j.id == job_id)
        why = self._no_capacity(sid, job)
        if self.fair:
            # The other queue with the lowest share among those waiting goes first.
            own = self._shares.share(lane.group)
            ahead = min(
                (
                    (self._shares.share(other.group), other.group)
                    for other in self._shapes
                    if other.heap and other.group != lane.group
                ),
                default=None,
            )
            if ahead is not None and ahead[0] < own:
                return self._fair_wait(why, lane.group, ahead[1])
        return why

    def _fair_wait(self, why: NoCapacity, group: int, ahead: int) -> FairShareWait:
        sh = self._shares
        return FairShareWait(
            why, sh.names[group], sh.share(group), sh.names[ahead], sh.share(ahead)
        )

    # ---------------------------------------------------------------- capacity changes
    def restore(
        self,
        job: Job,
        placement: JobPlacement,
        started_at: float,
        *,
        preempted_at: Sequence[float] = (),
    ) -> None:
        """Record ``job`` as running on ``placement`` since ``started_at`` without deciding it:
        for a control plane that restarts and rebuilds its scheduler from its store. The
        placement is allocated in the view and charged exactly as an ``Admit`` would have been
        (quota usage, fair-share usage, budgets' running spend, preemption candidates and
        backfill's running set), so that the next cycle decides as if the scheduler had never
        stopped; ``release`` then works on it as on an admitted job. ``preempted_at``: when
        the job was preempted before (its thrash cap and restart overhead count them). The
        job is counted by the placement policy as a submitted job is (``observe``).

        With budgets, a job the budget book already holds as running (a book rebuilt from a
        ledger) is not committed twice. ``ValueError`` (and nothing changed) if the job is
        pending, already running (as far as the scheduler tracks running jobs: with quotas,
        fair sharing, preemption or backfill), has a task count outside its gang's range, or
        the placement does not fit the view (``OvercommitError``)."""
        jid = job.id
        if jid in self._pending:
            raise ValueError(f"job {jid} is pending, not running")
        if jid in self._running or jid in self._charged or jid in self._shares.of_job:
            raise ValueError(f"job {jid} is already running")
        if not job.min_tasks <= len(placement.tasks) <= job.tasks:
            raise ValueError(
                f"job {jid}: {len(placement.tasks)} tasks placed, needs "
                f"{job.min_tasks}..{job.tasks}"
            )
        queue = self._queue_index(job) if self.quotas is not None else -1
        done: list[TaskPlacement] = []
        try:
            for tp in placement.tasks:
                self.view.allocate(tp)
                done.append(tp)
        except ValueError:
            for tp in reversed(done):
                self.view.release(tp)
            raise
        self.placement.observe(job)
        if preempted_at:
            self._preempted_at[jid] = list(preempted_at)
        self._started(
            job, placement, queue, self._group_of(job, queue) if self.fair else 0, started_at
        )
        if self._bf is not None:
            self._bf.by_end.add(self._running[jid])

    def release(
        self, placement: JobPlacement, job_id: str | None = None, now: float | None = None
    ) -> None:
        """Give a finished or evicted job's resources back to the view (and, with quotas, its
        usage back to its queue: ``job_id`` is then required). ``now``, when given, lets
        decayed fair-share usage count the job up to the moment it ended."""
        if job_id is None and (
            self.fair or self._track_running or self.quotas is not None or self.budget is not None
        ):
            raise ValueError(
                "with quotas, fair sharing, preemption or backfill, release needs the job id"
            )
        if now is not None and self.fair == "usage":
            self._shares.decay(now)
        for tp in placement.tasks:
            self.view.release(tp)
        if self.fair:
            assert job_id is not None
            self._shares.stop(job_id, placement)
        if self._track_running:
            assert job_id is not None
            self._ended += 1
            r = self._running.get(job_id)
            if r is not None:
                self._drop_running(r)
            if self._bf is not None:
                self._bf.ended(job_id)
        if self.budget is not None:
            assert job_id is not None
            self._settled(job_id, self._now if now is None else now)
        book = self.quotas
        if book is None:
            return
        assert job_id is not None
        queue, demand = self._charged.pop(job_id)
        book.refund(queue, demand)
        quota_lanes.wake_blocked(self, queue)

    # ---------------------------------------------------------------- the cycle
    def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
        """Run one scheduling cycle at time ``now``; every admission (and eviction) is already
        assumed on the view. ``now`` matters only to preemption (minimum runtimes, lost work)."""
        self._now = now
        if self.fair == "usage":
            self._shares.decay(now)
        if self.fair:
            # Shares moved since the heads were pushed: re-key them all (a few per queue).
            lanes = set()
            for key, lane in self._active:
                shape = self._shapes[lane]
                if shape.active_key == key:
                    if shape.heap:
                        lanes.add(lane)
                    else:  # emptied: no entry is left for it, so it holds no key either
                        shape.active_key = None
            self._active = []
            for lane in sorted(lanes):
                shape = self._shapes[lane]
                shape.active_key = self._fair_key(lane)
                heapq.heappush(self._active, (shape.active_key, lane))
        if now >= self._protect_wake:
            # A protection that kept a job from evicting, a budget's hold or a thrash cap has
            # ended: those jobs are worth another try (in either discipline: a strict queue's
            # head may be the one held).
            self._protect_wake = math.inf
            for lane_id in self._protect_lanes:
                lane = self._shapes[lane_id]
                lane.skipped = None
                self._activate(lane)
            self._protect_lanes.clear()
        return self._cycle_strict(rng) if self.strict else self._cycle_skip_ahead(rng)

    def _fair_key(self, lane: int) -> Any:
        """A lane head's dynamic key: priority, then its group's share, then FIFO."""
        shape = self._shapes[lane]
        k = self._pending[shape.heap[0][1].id][0]
        return (k[0], self._shares.share(shape.group), *k[1:])

    def _cycle_skip_ahead(self, rng: np.random.Generator) -> list[Decision]:
        for lane_id in self._deferred:
            self._activate(self._shapes[lane_id])
        self._deferred.clear()
        self._wake()
        decisions: list[Decision] = []
        active = self._active
        table = self.table
        res: Reservation | None = None
        plan = self._bf.begin(self, rng, decisions) if self._bf is not None else None
        head = self._pending_head() if self._bf is not None and plan is None else None
        res_known = head is None
        fair = self.fair
        took: int | None = None  # the fair-share group of this cycle's last admission
        while active:
            key, lane_id = heapq.heappop(active)
            shape = self._shapes[lane_id]
            if shape.active_key != key:
                continue  # stale entry: the shape's head changed since it was pushed
            shape.active_key = None
            if not shape.heap:
                continue
            if fair:
                now_key = self._fair_key(lane_id)
                if now_key > key:  # its group's share grew since: back in line
                    shape.active_key = now_key
                    heapq.heappush(active, (now_key, lane_id))
                    continue
            job = shape.heap[0][1]
            if shape.skipped == job.id and (
                shape.blocked is not None
                or (table.is_tracked(shape.sid) and not table.fits(shape.sid))
            ):
                continue  # known not to fit, and already told: out until it fits again
            decision: Decision | None = None
            if plan is not None:
                if plan.decided(job):
                    continue  # within the plan's depth: its pass decided this job
                decision = plan.attempt(self, job, shape, rng, decisions)
                if decision is None:
                    continue  # held back by a reservation: back when the plan changes
            if not res_known and job is not head:
                # Worked out when a job behind the head first gets its turn.
                res_known = True
                res = self._head_reservation(head)
            if res is not None and job is not res.job and self._behind(job, res):
                decisions.append(Skip(job, BehindReservation(res.job.id, res.until)))
                self._deferred.append(lane_id)  # tried again next cycle
                continue
            if decision is None:
                decision = self._try(job, shape, rng)
            if self._evictions:
                decisions.extend(self._evictions)
                self._evictions.clear()
            if fair:
                if type(decision) is Admit:
                    took = shape.group  # a lower (or equal) share went first this cycle
                elif (
                    took is not None
                    and took != shape.group
                    and isinstance(decision, Skip)
                    and isinstance(decision.reason, NoCapacity)
                ):
                    decision = Skip(job, self._fair_wait(decision.reason, shape.group, took))
            decisions.append(decision)
            if type(decision) is Admit:
                self._activate(shape)
                if self._bf is not None:
                    self._bf.started(self, job)
                if head is not None and job is head:
                    # The head started: the next pending job is the one to reserve for.
                    head = self._pending_head()
                    res, res_known = None, head is None
            else:
                if res is None and self._bf is not None and plan is None:
                    res = self._reserve_for(job)
                # Out of the active heap until a node change makes the shape fit again.
                shape.skipped = job.id
        return decisions

    def _cycle_strict(self, rng: np.random.Generator) -> list[Decision]:
        self.table.began_to_fit.clear()  # strict mode looks at its head only (fits() flushes)
        decisions: list[Decision] = []
        while (job := self._head()) is not None:
            shape = self._shapes[self._pending[job.id][1]]
            decision = self._try(job, shape, rng)
            if self._evictions:
                decisions.extend(self._evictions)
                self._evictions.clear()
            decisions.append(decision)
            if type(decision) is Skip:
                shape.skipped = job.id
                break
            heapq.heappop(self._all)
        return decisions

    def _try(self, job: Job, shape: _Shape, rng: np.random.Generator) -> Decision:
        """Admit ``job`` if it can start now (evicting running jobs if the preemption rules
        allow and it takes that), else Skip it."""
        decision = self._place(job, shape, rng)
        if type(decision) is Skip and self.preemption is not None and not self._preempting:
            assert isinstance(decision, Skip)
            done = preempt(self, job, shape, rng, decision.reason)
            if done is not None:
                return done
            if (
                self.preemption.reclaim
                and shape.queue >= 0
                and quota_lanes.owed_to(self, job, shape.queue)
            ):
                # Waiting within its guarantee: nobody may borrow in its cohort meanwhile.
                assert self.quotas is not None
                self._owed.setdefault(int(self.quotas.cohort[shape.queue]), set()).add(shape.lane)
        return decision

    def _place(self, job: Job, shape: _Shape, rng: np.random.Generator) -> Decision:
        """Admit ``job`` if its shape fits (and its queue's quota allows it), else Skip it; a
        shape that fails to fit starts being tracked.

        A tracked shape's fit is known exactly, and its per-node counts are read instead of
        recomputed (copied: the row changes as the job's own tasks are allocated). An untracked
        shape (nothing of it failed since the queue was last empty) is simply placed.
        """
        table = self.table
        sid = shape.sid
        allowed: np.ndarray | None = None
        if shape.queue >= 0:
            over, allowed = quota_lanes.quota(self, job, shape.queue)
            if over is not None:
                return quota_lanes.block(self, job, shape, over)
        if self.budget is not None:
            held = self.budget.check(job, self._now)
            if held is not None:
                return self._budget_block(job, shape, held)
        if table.is_tracked(sid):
            if not table.fits(sid):
                return Skip(job, self._no_capacity(sid, job))
            k = table.counts(sid)
            if allowed is not None:
                k *= allowed
            placement, reason, _ = place_job(self.view, job, self.placement, rng, k=k)
            if placement is None:
                if allowed is None:
                    raise AssertionError(
                        f"shape of job {job.id} fits but placement failed: {reason}"
                    )
                assert reason is not None
                return quota_lanes.block(self, job, shape, reason)
        else:
            k = None
            if allowed is not None:
                k = self.view.fit_counts(job.task, job.tasks) * allowed
            placement, reason, k = place_job(self.view, job, self.placement, rng, k=k)
            if placement is None:
                assert reason is not None
                if allowed is not None:
                    table.track(sid, self.view.fit_counts(job.task, job.tasks))
                    if table.fits(sid):
                        return quota_lanes.block(self, job, shape, reason)
                else:
                    table.track(sid, k)
                return Skip(job, reason)
        if shape.heap[0][1] is job:
            heapq.heappop(shape.heap)
        else:  # behind its lane's head (conservative backfill may start it first)
            shape.heap.remove((self._pending[job.id][0], job))
            heapq.heapify(shape.heap)
        del self._pending[job.id]
        self._started(job, placement, shape.queue, shape.group, self._now)
        self._waiting[sid] -= 1
        if not self._pending:
            # An empty queue needs no counts at all.
            table.untrack_all()
        elif not self._waiting[sid]:
            table.set_idle(sid, True)
        shape.blocked = None
        return Admit(job, placement)

    def _started(
        self, job: Job, placement: JobPlacement, queue: int, group: int, at: float
    ) -> None:
        """Record ``job`` as running on ``placement`` (already on the view) since ``at``: its
        budgets' running spend, its quota queue's usage, its fair-share group's holdings and,
        with preemption or backfill, the running set."""
        if self.budget is not None:
            m = int(self.view.node_model[placement.tasks[0].node])
            self.budget.started(job, self.view.models[m].name if m >= 0 else None, at)
        if queue >= 0:
            quota_lanes.charge(self, job, queue, placement)
        if self.fair:
            self._shares.start(job.id, group, placement)
        if self._track_running:
            pc = self.ctx.priority_classes.get(job.priority_class)
            history = self._preempted_at.get(job.id, [])
            self._add_running(
                Running(
                    job,
                    placement,
                    queue,
                    at,
                    self.ctx.priority(job),
                    pc.preemptible if pc is not None else False,
                    history,
                    self.preemption.restart_overhead if self.preemption and history else 0.0,
                )
            )

    def _add_running(self, r: Running) -> None:
        self._running[r.job.id] = r
        if r.preemptible:
            self._evictable.setdefault(r.priority, set()).add(r.job.id)

    def _drop_running(self, r: Running) -> None:
        del self._running[r.job.id]
        if r.preemptible:
            self._evictable[r.priority].discard(r.job.id)

    # ---------------------------------------------------------------- backfill
    def _pending_head(self) -> Job | None:
        """The first pending job in queue order (admitted jobs leave ``_all`` lazily)."""
        heap = self._all
        while heap:
            key, job = heap[0]
            entry = self._pending.get(job.id)
            if entry is not None and entry[0] == key:
                return job
            heapq.heappop(heap)
        return None

    def _head_reservation(self, head: Job | None) -> Reservation | None:
        """A reservation for the first pending job, if it cannot start now."""
        if head is None or head.id not in self._pending:
            return None
        shape = self._shapes[self._pending[head.id][1]]
        blocked = shape.blocked is not None and shape.skipped == head.id
        if not blocked and not (
            self.table.is_tracked(shape.sid) and not self.table.fits(shape.sid)
        ):
            return None  # the head may well start this cycle
        key = (head.id, self._ended)
        if self._reservation_key != key:
            # Nothing ended since it was made (only jobs it allowed started): it still holds.
            self._reservation_key = key
            self._reservation = self._reserve_for(head)
        return self._reservation

    def _reserve_for(self, job: Job) -> Reservation | None:
        """EASY's reservation for ``job``, made now (``suanli.core.backfill.reserve``)."""
        assert isinstance(self._bf, Easy)
        return reserve(self.view, job, self._bf.running(self), self._now)

    def _behind(self, job: Job, res: Reservation) -> bool:
        """Whether starting ``job`` now could delay reservation ``res`` (EASY's test)."""
        assert isinstance(self._bf, Easy)
        if self._bf.ends_before(job, self._now, res):
            return False  # it ends before the reservation starts
        lane = self._shapes[self._pending[job.id][1]]
        if self.table.is_tracked(lane.sid) and not self.table.fits(lane.sid):
            return False  # cannot start anyway: its own Skip says why
        return self._bf.behind(self.view, job, res, self.placement)

    # ---------------------------------------------------------------- quotas
    def _quota(self, job: Job, queue: int) -> tuple[OverQuota | None, np.ndarray | None]:
        """``quota_lanes.quota`` (for ``suanli.core.eviction``)."""
        return quota_lanes.quota(self, job, queue)

    def _wake_blocked(self, queue: str) -> None:
        """``quota_lanes.wake_blocked`` (for ``suanli.core.eviction``)."""
        quota_lanes.wake_blocked(self, queue)

    def _settled(self, job_id: str, now: float) -> None:
        """A job ended (or was evicted): settle its cost; budget-blocked lanes look again."""
        assert self.budget is not None
        for lane_id in self.budget.ended(job_id, now):
            lane = self._shapes[lane_id]
            if isinstance(lane.blocked, BudgetBlock):
                lane.blocked = None
                lane.skipped = None
                self._activate(lane)

    def _budget_block(self, job: Job, shape: _Shape, why: BudgetBlock) -> Skip:
        """Skip ``job``: its lane waits until ``why.until``, or until a job ends."""
        assert self.budget is not None
        shape.blocked = why
        shape.skipped = job.id
        self.budget.blocked.add(shape.lane)
        self._protect_wake = min(self._protect_wake, why.until)
        self._protect_lanes.add(shape.lane)
        return Skip(job, why)

    # ---------------------------------------------------------------- helpers
    def _wake(self) -> None:
        # Phase 1: shapes that began to fit rejoin the active heap. Lanes waiting for room on
        # the GPU models their quota allows are woken by releases, and here by a change of
        # node health (which can make that room too).
        if self._blocked_room and self.view.health_changes != self._health_seen:
            self._health_seen = self.view.health_changes
            for lane_id in self._blocked_room:
                lane = self._shapes[lane_id]
                lane.blocked = None
                self._activate(lane)
            self._blocked_room = set()
        table = self.table
        if table.waiting_tracked():
            table.flush()  # else nothing tracked waits: the recount can wait for a look
        woken = table.began_to_fit
        if woken:
            lanes_of = self._lanes_of
            for sid in woken:
                for lane_id in lanes_of[sid]:
                    self._activate(self._shapes[lane_id])
            woken.clear()

    def _no_capacity(self, sid: int, job: Job) -> NoCapacity:
        t = self.table
        return no_capacity(self.view, job, t.total(sid), t.largest(sid))

    def _activate(self, shape: _Shape) -> None:
        if not shape.heap:
            return
        key = self._fair_key(shape.lane) if self.fair else self._pending[shape.heap[0][1].id][0]
        if shape.active_key is None or key < shape.active_key:
            shape.active_key = key
            heapq.heappush(self._active, (key, shape.lane))

    def _head(self) -> Job | None:
        # Strict mode: admitted jobs leave _all as they start and removed ones in remove().
        return self._all[0][1] if self._all else None
