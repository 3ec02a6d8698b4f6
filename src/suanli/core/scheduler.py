"""The scheduling cycle: pending jobs in, ``Admit``/``Preempt``/``Skip`` decisions out.

One ``Scheduler`` owns a ``ClusterView`` (its snapshot of free capacity), the pending queue
(``Lanes``) and the running set, and runs the cycle over them with its plugins (one per seam,
``suanli.core.seams``): a queue order, a placement, admission checks, a backfill, a preemptor.
It is also the plugins' ``Handle``: they read its public members and act through its methods,
never its private state. The cycle *assumes* each admission on the view at once, so the next
job in the same cycle sees it (kube-scheduler's "assume in the cache"); an ``Applier`` makes
the decisions real. Nothing here reads a clock or does I/O; randomness comes from the
``numpy.random.Generator`` handed to ``cycle``.

The cycle's phases (numbered where they are in the code; docs/architecture.md):

  0. Keys: a queue order with moving keys (fair sharing) brings them to ``now`` and every
     lane in line is re-keyed; lanes whose timed wake (``retry_at``) came are let go.
  1. Wake: each admission check's own wake-ups (``Admission.begin``), then shapes that began
     to fit since the last cycle (the shape table saw a node change that made room) rejoin the
     active heap. (Skip-ahead only.)
  2. Plan: the backfill plans (``Backfill.begin``).
  3. Order: lane heads come off the active heap in key order; a lane whose key moved goes
     back in line, one known not to fit is passed.
  4. Gate: the backfill may decide, or hold the job back behind a reservation.
  5. Admit: each admission check (a ``Skip`` with its reason, or the nodes the job may use),
     then placement: all tasks of a gang or none (``gang.place_job``), using the shape
     table's exact per-node counts, so a job is only tried when its shape fits.
  6. Preempt: a job that could not start may evict running jobs (``Preemptor``).
  7. Decide: ``Admit`` with its placement, or ``Skip`` with a typed reason; the backfill and
     the dynamic keys see the outcome.

Two disciplines: *skip-ahead* (a job that does not fit is passed over, later jobs may start;
phases 0-7) and *strict* (the head of the queue blocks everything behind it; phases 0, 5-7).

Why a saturated queue is cheap: a lane that does not fit leaves the active heap and returns
only when a node change makes its shape fit, or the admission that parked it lets it go, so a
cycle costs O(lanes tried + jobs admitted), never O(pending jobs).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from suanli.core.decisions import (
    Admit,
    Decision,
    HeadOfLine,
    JobPlacement,
    NoCapacity,
    Reason,
    Reject,
    Skip,
)
from suanli.core.gang import no_capacity, place_job
from suanli.core.lanes import Lane, Lanes
from suanli.core.model import Job
from suanli.core.policies.runtime_estimate import UserEstimate
from suanli.core.running import Running, RunningSet
from suanli.core.seams import (
    HELD,
    Admission,
    Backfill,
    Ledger,
    OrderContext,
    Placement,
    Preemptor,
    QueueOrder,
    RuntimeEstimator,
)
from suanli.core.shapes import ShapeTable
from suanli.core.view import ClusterView, TaskPlacement


class Scheduler:
    """Pending queue plus the scheduling cycle over one ``ClusterView`` (see the module).

    ``admissions`` are checked in order (a job blocked by two is told of the first);
    ``backfill`` None: plain skip-ahead; ``preemptor`` None: never evict a running job;
    ``runtime``: the runtime estimator (default: the users' estimates). Each
    plugin is bound to this scheduler here, once: build a scheduler per run
    (``suanli.core.builder.build`` makes one from a policy set and its configuration)."""

    def __init__(
        self,
        view: ClusterView,
        order: QueueOrder,
        placement: Placement,
        *,
        strict: bool = False,
        ctx: OrderContext | None = None,
        admissions: Sequence[Admission] = (),
        backfill: Backfill | None = None,
        preemptor: Preemptor | None = None,
        runtime: RuntimeEstimator | None = None,
    ) -> None:
        self.view = view
        self.runtime: RuntimeEstimator = runtime if runtime is not None else UserEstimate()
        """How long jobs are expected to run: what the backfill plans with and a predictive
        order sorts by (one estimator per scheduler, so both see the same figures)."""
        self._learns = getattr(self.runtime, "learn", None)
        self.order = order
        self.placement = placement
        self.strict = strict
        self.ctx = ctx or OrderContext()
        self.table = ShapeTable(view)
        self.admissions = tuple(admissions)
        if backfill is not None and not backfill.gates:
            backfill = None  # backfill/none: plain skip-ahead, no hooks to call
        self.backfill = backfill
        self.preemptor = preemptor
        self.lanes = Lanes(self.table, strict or (backfill is not None and backfill.needs_order))
        self.running = RunningSet(
            preemptor is not None or (backfill is not None and backfill.needs_running),
            preemptor.config.restart_overhead if preemptor is not None else 0.0,
        )
        self._now = 0.0
        self._preempting = False
        self._wake_t = math.inf  # the earliest timed wake asked for (``wake_at``)
        self._wake_lanes: set[int] = set()
        self.keys = order.bind(self)
        """The moving keys of a dynamic queue order (fair sharing), or None."""
        ledgers: list[Ledger] = list(self.admissions)
        if self.keys is not None:
            ledgers.insert(0, self.keys)
        self.ledgers = tuple(ledgers)
        """Everything that counts what running jobs hold: the dynamic keys, then the
        admission checks."""
        for slot, a in enumerate(self.admissions):
            a.bind(self, slot)
        if backfill is not None:
            backfill.bind(self)
        if preemptor is not None:
            preemptor.bind(self)

    # ---------------------------------------------------------------- the handle
    @property
    def now(self) -> float:
        return self._now

    def activate(self, lane: Lane) -> None:
        if not lane.heap:
            return
        keys = self.keys
        key = self.lanes.pending[lane.heap[0][1].id][0]
        if keys is not None:
            key = keys.head_key(lane, key)
        if lane.active_key is None or key < lane.active_key:
            lane.active_key = key
            heapq.heappush(self.lanes.active, (key, lane.index))

    def block(self, job: Job, lane: Lane, why: Reason) -> Skip:
        lane.blocked = why
        lane.skipped = job.id
        return Skip(job, why)

    def unblock(self, lane: Lane, retry: bool = False) -> None:
        lane.blocked = None
        if retry:
            lane.skipped = None
        self.activate(lane)

    def retry_at(self, t: float, lane: Lane) -> None:
        if t < self._wake_t:
            self._wake_t = t
        self._wake_lanes.add(lane.index)

    def try_start(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision:
        decision = self._place(job, lane, rng)
        if type(decision) is Skip and self.preemptor is not None and not self._preempting:
            assert isinstance(decision, Skip)
            done = self.preemptor.preempt(job, lane, rng, decision.reason, out)
            if done is not None:
                return done
        return decision

    def place(self, job: Job, lane: Lane, rng: np.random.Generator) -> Decision:
        self._preempting = True
        try:
            return self._place(job, lane, rng)
        finally:
            self._preempting = False

    def evicted(self, r: Running) -> None:
        self.running.evicted(r, self._now)
        for ledger in self.ledgers:
            ledger.ended(r.job.id, self._now)

    # ---------------------------------------------------------------- queue
    def __len__(self) -> int:
        return len(self.lanes.pending)

    @property
    def wake_at(self) -> float:
        """When a cycle could start a job although nothing arrives or ends before then (a
        protection, a budget's hold or a thrash cap ends); inf: no such time."""
        return self._wake_t

    def submit(
        self,
        job: Job,
        now: float | None = None,
        *,
        requeued: bool = False,
        preempted_at: Sequence[float] = (),
    ) -> Decision | None:
        """Add ``job`` to the pending queue. Job ids must be unique among pending jobs.

        A new job (not ``requeued``) goes past each admission check's ``arrive`` first: it may
        be refused (``Reject``, not queued) or demoted (``Demoted``, queued in its new
        class); that decision is returned. ``SpecError`` if an admission check cannot place
        it (no quota queue serves it). ``preempted_at``: when the job was preempted before,
        for a scheduler rebuilt from a store (``restore``); the thrash cap and the restart
        overhead count them.
        """
        lanes = self.lanes
        if job.id in lanes.pending:
            raise ValueError(f"job {job.id} is already pending")
        if preempted_at:
            self.running.preempted_at[job.id] = list(preempted_at)
        told: Decision | None = None
        adm = self.admissions
        if adm and not requeued:
            at = self._now if now is None else now
            for a in adm:
                verdict = a.arrive(job, at)
                if verdict is not None:
                    if type(verdict) is Reject:
                        return verdict
                    told = verdict
                    job = verdict.job  # type: ignore[union-attr]
        # Jobs that admission checks answer differently wait in lanes of their own: one
        # answer then holds for every job of a lane, and a blocked head never holds back a
        # job that could start.
        keys = tuple([a.lane_key(job) for a in adm]) if adm else ()
        key = self.order.key(job, self.ctx)
        self.placement.observe(job)
        sid = self.table.id_of((job.task, job.tasks, job.min_tasks))
        lane = lanes.lane_for(sid, self.keys.group(job) if self.keys is not None else 0, keys)
        lanes.push(job, key, lane)
        if self.backfill is not None:
            self.backfill.submitted(key, job)
        if not self.strict:
            # Tried in the next cycle: it fits, or it gets its Skip with the reason.
            self.activate(lane)
        return told

    def remove(self, job_id: str) -> bool:
        """Withdraw a pending job (e.g. cancelled). False if it is not pending."""
        gone = self.lanes.remove(job_id)
        if gone is None:
            return False
        lane, was_head = gone
        if was_head and lane.active_key is not None:
            # Its entry in the active heap carries the removed job's key: re-enter the lane
            # under its new head's key (the old entry turns stale and is skipped).
            lane.active_key = None
            self.activate(lane)
        return True

    def pending_jobs(self) -> list[Job]:
        """Every pending job, in queue order."""
        return self.lanes.jobs()

    def reason(self, job_id: str) -> Reason | None:
        """Why a pending job is still pending (None: it would fit now, or was never tried)."""
        lanes = self.lanes
        entry = lanes.pending.get(job_id)
        if entry is None:
            return None
        if self.strict:
            head = lanes.head()
            if head is not None and head.id != job_id:
                # Only a head that has been tried and failed blocks the line.
                return HeadOfLine(head.id) if lanes.lane_of(head.id).skipped == head.id else None
            if lanes.lanes[entry[1]].skipped != job_id:
                return None
        lane = lanes.lanes[entry[1]]
        if lane.blocked is not None:
            return lane.blocked  # the same answer for every job of the lane (same demand)
        sid = lane.shape
        if not self.table.is_tracked(sid) or self.table.fits(sid):
            return None
        job = next(j for _, j in lane.heap if j.id == job_id)
        why = self._no_capacity(sid, job)
        if self.keys is not None:
            return self.keys.explain(lane, why, lanes)
        return why

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
        placement is allocated in the view and every ledger (quotas, budgets, fair shares),
        the running set and the backfill count it exactly as an ``Admit`` would have, so that
        the next cycle decides as if the scheduler had never stopped; ``release`` then works on
        it as on an admitted job. ``preempted_at``: when the job was preempted before (its
        thrash cap and restart overhead count them). The job is counted by the placement
        policy as a submitted job is (``observe``).

        A ledger that already counts the job (a budget book rebuilt from a ledger) does not
        count it twice. ``ValueError`` (and nothing changed) if the job is pending, already
        running (as far as the scheduler tracks running jobs: a ledger, or the running set),
        has a task count outside its gang's range, or the placement does not fit the view
        (``OvercommitError``); ``SpecError`` if an admission check cannot place it."""
        jid = job.id
        if jid in self.lanes.pending:
            raise ValueError(f"job {jid} is pending, not running")
        if jid in self.running or any(ledger.holds(jid) for ledger in self.ledgers):
            raise ValueError(f"job {jid} is already running")
        if not job.min_tasks <= len(placement.tasks) <= job.tasks:
            raise ValueError(
                f"job {jid}: {len(placement.tasks)} tasks placed, needs "
                f"{job.min_tasks}..{job.tasks}"
            )
        for a in self.admissions:
            a.lane_key(job)  # SpecError before anything changes
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
            self.running.preempted_at[jid] = list(preempted_at)
        self._started(job, placement, started_at)
        if self.backfill is not None and jid in self.running:
            self.backfill.restored(self.running.records[jid])

    def release(
        self, placement: JobPlacement, job_id: str | None = None, now: float | None = None
    ) -> None:
        """Give a finished job's resources back to the view, and tell every ledger (quota
        usage, budget spend, fair-share holdings) and the running set that it ended: ``job_id``
        is then required. ``now`` (default: the last cycle's time) is when it ended."""
        if job_id is None and (self.ledgers or self.running.enabled):
            raise ValueError(
                "with quotas, fair sharing, budgets, preemption or backfill, release needs "
                "the job id"
            )
        for tp in placement.tasks:
            self.view.release(tp)
        if job_id is None:
            return
        at = self._now if now is None else now
        if self.running.enabled:
            self.running.finished(job_id)
            if self.backfill is not None:
                self.backfill.ended(job_id)
        for ledger in self.ledgers:
            ledger.ended(job_id, at)

    def interrupted(self, job: Job, placement: JobPlacement, now: float, failed_at: float) -> None:
        """``job``'s attempt on ``placement`` was lost to a hardware failure at ``failed_at``,
        found at ``now``: its resources go back to the view, every ledger counts the attempt
        ended, the running set keeps what the attempt attained and saved
        (``RunningSet.interrupted``), and the job is queued again (requeued: no admission
        check)."""
        for tp in placement.tasks:
            self.view.release(tp)
        if self.running.enabled:
            self.running.interrupted(job.id, now, failed_at)
            if self.backfill is not None:
                self.backfill.ended(job.id)
        for ledger in self.ledgers:
            ledger.ended(job.id, now)
        self.submit(job, now, requeued=True)

    def learn(self, job: Job, runtime: float, at: float) -> None:
        """``job`` ended at ``at`` after running ``runtime`` seconds (at effective speed 1):
        a runtime predictor learns it (``seams.Predictor``; others ignore it). Told only at a
        job's end, so a predictor never knows a runtime before the job has ended."""
        if self._learns is not None:
            self._learns(job, runtime, at)

    # ---------------------------------------------------------------- the cycle
    def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
        """Run one scheduling cycle at time ``now``; every admission (and eviction) is already
        assumed on the view."""
        self._now = now
        # Phase 0: keys that move while jobs wait are brought to now, and every lane in line
        # is re-keyed (a few per group); lanes whose timed wake came are let go.
        keys = self.keys
        if keys is not None:
            keys.begin(now)
            lane_list = self.lanes.lanes
            live = set()
            for key, i in self.lanes.active:
                lane = lane_list[i]
                if lane.active_key == key:
                    if lane.heap:
                        live.add(i)
                    else:  # emptied: no entry is left for it, so it holds no key either
                        lane.active_key = None
            active: list[tuple[Any, int]] = []
            pending = self.lanes.pending
            for i in sorted(live):
                lane = lane_list[i]
                lane.active_key = keys.head_key(lane, pending[lane.heap[0][1].id][0])
                heapq.heappush(active, (lane.active_key, i))
            self.lanes.active = active
        if now >= self._wake_t:
            # A protection that kept a job from evicting, a budget's hold or a thrash cap has
            # ended: those jobs are worth another try (in either discipline: a strict queue's
            # head may be the one held).
            self._wake_t = math.inf
            lane_list = self.lanes.lanes
            for i in self._wake_lanes:
                lane = lane_list[i]
                lane.skipped = None
                self.activate(lane)
            self._wake_lanes.clear()
        return self._cycle_strict(rng) if self.strict else self._cycle_skip_ahead(rng)

    def _cycle_skip_ahead(self, rng: np.random.Generator) -> list[Decision]:
        # Phase 1: each admission check's own wake-ups; then shapes that began to fit rejoin
        # the active heap.
        for a in self.admissions:
            a.begin()
        table = self.table
        lanes = self.lanes
        lane_list = lanes.lanes
        if table.waiting_tracked():
            table.flush()  # else nothing tracked waits: the recount can wait for a look
        woken = table.began_to_fit
        if woken:
            for sid in woken:
                for i in lanes.of_shape(sid):
                    self.activate(lane_list[i])
            woken.clear()
        decisions: list[Decision] = []
        # Phase 2: the backfill plans.
        bf = self.backfill
        if bf is not None:
            bf.begin(rng, decisions)
        keys = self.keys
        active = lanes.active
        pending = lanes.pending
        while active:
            # Phase 3: the next lane head in key order.
            key, i = heapq.heappop(active)
            lane = lane_list[i]
            if lane.active_key != key:
                continue  # stale entry: the lane's head changed since it was pushed
            lane.active_key = None
            if not lane.heap:
                continue
            job = lane.heap[0][1]
            if keys is not None:
                now_key = keys.head_key(lane, pending[job.id][0])
                if now_key > key:  # its group's share grew since: back in line
                    lane.active_key = now_key
                    heapq.heappush(active, (now_key, i))
                    continue
            if lane.skipped == job.id and (
                lane.blocked is not None
                or (table.is_tracked(lane.shape) and not table.fits(lane.shape))
            ):
                continue  # known not to fit, and already told: out until it fits again
            # Phase 4: the backfill may decide, or hold the job back.
            decision: Any = None
            if bf is not None:
                decision = bf.gate(job, lane, rng, decisions)
                if decision is HELD:
                    continue
            # Phases 5-6: admission, placement, preemption.
            if decision is None:
                decision = self.try_start(job, lane, rng, decisions)
            # Phase 7: decide.
            if keys is not None:
                decision = keys.decided(lane, decision)
            decisions.append(decision)
            if type(decision) is Admit:
                self.activate(lane)
                if bf is not None:
                    bf.started(job)
            else:
                if bf is not None:
                    bf.failed(job)
                # Out of the active heap until a node change makes the shape fit again.
                lane.skipped = job.id
        return decisions

    def _cycle_strict(self, rng: np.random.Generator) -> list[Decision]:
        self.table.began_to_fit.clear()  # strict mode looks at its head only (fits() flushes)
        decisions: list[Decision] = []
        lanes = self.lanes
        while (job := lanes.head()) is not None:
            lane = lanes.lane_of(job.id)
            decision = self.try_start(job, lane, rng, decisions)
            decisions.append(decision)
            if type(decision) is Skip:
                lane.skipped = job.id
                break
            lanes.pop_head()
        return decisions

    def _place(self, job: Job, lane: Lane, rng: np.random.Generator) -> Decision:
        """Phase 5: ``Admit`` ``job`` if every admission check lets it start and its shape
        fits (on the nodes the checks allow), else ``Skip`` it; a shape that fails to fit
        starts being tracked.

        A tracked shape's fit is known exactly, and its per-node counts are read instead of
        recomputed (copied: the row changes as the job's own tasks are allocated). An untracked
        shape (nothing of it failed since the queue was last empty) is simply placed.
        """
        allowed: np.ndarray | None = None
        masker: Admission | None = None
        for a in self.admissions:
            verdict = a.check(job, lane)
            if verdict is None:
                continue
            if isinstance(verdict, Skip):
                return verdict
            masker = a
            allowed = verdict if allowed is None else allowed * verdict
        table = self.table
        sid = lane.shape
        if table.is_tracked(sid):
            if not table.fits(sid):
                return Skip(job, self._no_capacity(sid, job))
            k = table.counts(sid)
            if allowed is not None:
                k *= allowed
            placement, reason, _ = place_job(self.view, job, self.placement, rng, k=k)
            if placement is None:
                if masker is None:
                    raise AssertionError(
                        f"shape of job {job.id} fits but placement failed: {reason}"
                    )
                assert reason is not None
                return masker.no_room(job, lane, reason)
        else:
            k = None
            if allowed is not None:
                k = self.view.fit_counts(job.task, job.tasks) * allowed
            placement, reason, k = place_job(self.view, job, self.placement, rng, k=k)
            if placement is None:
                assert reason is not None
                if masker is not None:
                    table.track(sid, self.view.fit_counts(job.task, job.tasks))
                    if table.fits(sid):
                        return masker.no_room(job, lane, reason)
                else:
                    table.track(sid, k)
                return Skip(job, reason)
        self.lanes.take(job, lane)
        self._started(job, placement, self._now)
        lane.blocked = None
        return Admit(job, placement)

    def _started(self, job: Job, placement: JobPlacement, at: float) -> None:
        """Record ``job`` as running on ``placement`` (already on the view) since ``at``: in
        every ledger and, when kept, the running set."""
        for ledger in self.ledgers:
            ledger.started(job, placement, at)
        if self.running.enabled:
            ctx = self.ctx
            self.running.start(
                job, placement, at, ctx.priority(job), ctx.priority_classes.get(job.priority_class)
            )

    def _no_capacity(self, sid: int, job: Job) -> NoCapacity:
        t = self.table
        return no_capacity(self.view, job, t.total(sid), t.largest(sid))
