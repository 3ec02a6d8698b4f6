"""admission/quota: queues with guaranteed quotas, borrowing and lending in cohorts (Kueue's
model; the rules are ``suanli.core.tenancy``'s ``QuotaBook``).

Each job is charged to its queue (``TenancySpec.queue_of``). Before it starts, its queue must
take its whole demand (``QuotaBook.check``); with per-model GPU quotas, the GPU models its
queue may use give the nodes it may take. A lane whose head is over quota is parked under its
cohort, or under its own queue for a limit of the queue's own, until a job there ends; a lane
with no room on its allowed models waits for any end, or a change of node health.

With reclaim (``PreemptionConfig.reclaim``), a job that could never give borrowed capacity
back (its class is not preemptible, or it is at its thrash cap) may not borrow: such jobs wait
in lanes of their own, capped at their queue's nominal. And a lane whose head waits within its
queue's nominal is *owed* room: while it waits, no other queue of its cohort may borrow
(``note_owed``, told by the preemptor when it could not make room).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from suanli.core.decisions import Decision, JobPlacement, NoCapacity, Skip
from suanli.core.lanes import Lane
from suanli.core.model import Job
from suanli.core.preemption import PreemptionConfig, capped, no_borrow_class
from suanli.core.registry import register
from suanli.core.seams import Handle, OrderContext
from suanli.core.tenancy import OverQuota, QuotaBook, TenancySpec
from suanli.core.view import ClusterView


def job_demand(job: Job, book: QuotaBook) -> np.ndarray:
    """``job``'s whole demand over the book's governed resources (GPUs of any model)."""
    t, n = job.task, job.tasks
    return book.demand(
        n * t.cpu_milli, n * t.memory_mib, n * t.gpu_share_milli if t.gpus else 0, None
    )


@register("admission", "quota")
class QuotaAdmission:
    """Queue quotas: guaranteed nominal, borrowing and lending in cohorts, per GPU model."""

    def __init__(self, tenancy: TenancySpec, preemption: PreemptionConfig | None = None) -> None:
        self.book = QuotaBook(tenancy)
        self.preemption = preemption
        self.charged: dict[str, tuple[int, np.ndarray]] = {}
        """Running job -> (queue index, the demand charged to it)."""
        self._suspended: set[str] = set()
        # cohort (or -1 - queue, for a limit of the queue's own) -> lanes blocked by quota
        self._blocked: dict[int, set[int]] = {}
        self._blocked_room: set[int] = set()  # lanes blocked for room on their allowed models
        self._owed: dict[int, set[int]] = {}  # cohort -> lanes waiting within their nominal
        self._queue_cache: dict[tuple[str, str], int] = {}
        self._refusals: dict[tuple[object, ...], str | None] = {}

    def bind(self, h: Handle, slot: int) -> None:
        self.h = h
        self.slot = slot
        self._health_seen = h.view.health_changes
        self._classes = h.ctx.priority_classes
        self._history = h.running.preempted_at  # (the set's own dict: read, never replaced)

    # ---------------------------------------------------------------- lanes
    def queue_index(self, job: Job) -> int:
        """The index of ``job``'s queue (``SpecError`` if no queue serves it)."""
        ck = (job.queue, job.tenant)
        q = self._queue_cache.get(ck)
        if q is None:
            book = self.book
            q = self._queue_cache[ck] = book.index[book.spec.queue_of(job)]
        return q

    def lane_queue(self, lane: Lane) -> int:
        """The queue index of a lane's jobs."""
        return lane.keys[self.slot][0]  # type: ignore[index,no-any-return]

    def arrive(self, job: Job, at: float) -> Decision | None:
        return None

    def lane_key(self, job: Job) -> Hashable:
        # Jobs that may not borrow wait in lanes of their own: a quota answer is the same for
        # every job of one lane.
        return (self.queue_index(job), self.no_borrow(job) is not None)

    def no_borrow(self, job: Job) -> str | None:
        """Why ``job`` may not borrow quota (None: it may): with reclaim on, a job that could
        not be reclaimed (not preemptible, or at its thrash cap) stays within the nominal."""
        cfg = self.preemption
        why = no_borrow_class(job.priority_class, self._classes, cfg)
        if why is not None or cfg is None or not cfg.reclaim:
            return why
        history = self._history.get(job.id, ())
        if history and capped(history, self.h.now, cfg):
            return f"job preempted {len(history)} times, at its cap"
        return None

    # ---------------------------------------------------------------- the check
    def begin(self) -> None:
        """Lanes waiting for room on the models their quota allows are woken by ends, and here
        by a change of node health (which can make that room too)."""
        h = self.h
        if self._blocked_room and h.view.health_changes != self._health_seen:
            self._health_seen = h.view.health_changes
            for i in self._blocked_room:
                h.unblock(h.lanes.lanes[i])
            self._blocked_room = set()

    def check(self, job: Job, lane: Lane) -> Skip | np.ndarray | None:
        over, allowed = self.allowed(job, self.lane_queue(lane))
        if over is not None:
            return self._block(job, lane, over)
        return allowed

    def allowed(self, job: Job, queue: int) -> tuple[OverQuota | None, np.ndarray | None]:
        """Whether ``queue`` can take ``job`` now; with per-model GPU quotas, also the mask of
        nodes whose GPU model it may use (None: any)."""
        book = self.book
        name = book.queues[queue]
        t = job.task
        n = job.tasks
        cpu, mem, gpu = n * t.cpu_milli, n * t.memory_mib, n * t.gpu_share_milli if t.gpus else 0
        nb = self.no_borrow(job)
        scope = "queue"
        if nb is None and self._owed:
            lender = self._lender_waiting(queue)
            if lender is not None:
                nb, scope = f"queue {lender} waits for its quota", "cohort"
        over = book.check(name, book.demand(cpu, mem, gpu, None), nb, scope)
        if over is not None or not gpu or not book.per_model:
            return over, None
        view = self.h.view
        ok: list[str] = []
        first: OverQuota | None = None
        for m in view.models:
            if t.gpu_models and m.name not in t.gpu_models:
                continue
            o = book.check(name, book.demand(cpu, mem, gpu, m.name), nb, scope)
            if o is None:
                ok.append(m.name)
            elif first is None:
                first = o
        if not ok:
            return first, None
        return None, view.model_ok(frozenset(ok))

    def no_room(self, job: Job, lane: Lane, why: NoCapacity) -> Skip:
        self._blocked_room.add(lane.index)
        return self.h.block(job, lane, why)

    def _block(self, job: Job, lane: Lane, why: OverQuota) -> Skip:
        """Skip ``job``: its lane waits for an end in its cohort (or, for a limit of its own,
        in its queue), or for its thrash cap to lift."""
        h = self.h
        q = self.lane_queue(lane)
        key = -1 - q if why.scope == "queue" else int(self.book.cohort[q])
        self._blocked.setdefault(key, set()).add(lane.index)
        skip = h.block(job, lane, why)
        history = h.running.preempted_at.get(job.id)
        cfg = self.preemption
        if history and cfg is not None and capped(history, h.now, cfg):
            # Kept from borrowing by its thrash cap: look again when the cap lifts.
            h.retry_at(history[max(0, len(history) - cfg.max_preemptions)] + cfg.window, lane)
        return skip

    # ---------------------------------------------------------------- reclaim
    def owed_to(self, job: Job, queue: int) -> bool:
        """Whether ``queue`` could take ``job`` within its nominal quota (it is owed room)."""
        book = self.book
        d = job_demand(job, book)
        return bool((book.usage[queue] + d <= book.nominal[queue])[d > 0].all())

    def note_owed(self, job: Job, lane: Lane) -> None:
        """``job``, its lane's head, waits although its queue could take it within its
        nominal: nobody may borrow in its cohort meanwhile."""
        q = self.lane_queue(lane)
        if self.owed_to(job, q):
            self._owed.setdefault(int(self.book.cohort[q]), set()).add(lane.index)

    def _lender_waiting(self, queue: int) -> str | None:
        """A queue of ``queue``'s cohort whose head job waits within its nominal quota (so
        ``queue`` may not borrow now), or None. Stale entries are dropped here."""
        book = self.book
        lanes = self._owed.get(int(book.cohort[queue]))
        if not lanes:
            return None
        lane_list = self.h.lanes.lanes
        for i in sorted(lanes):
            lane = lane_list[i]
            q = self.lane_queue(lane)
            if q == queue:
                continue
            if lane.heap and self.owed_to(lane.heap[0][1], q):
                return book.queues[q]
            lanes.discard(i)
        return None

    # ---------------------------------------------------------------- the ledger
    def started(self, job: Job, placement: JobPlacement, at: float) -> None:
        """Charge ``placement`` (per GPU model where the quotas have one) to the job's queue,
        and remember it for the refund."""
        book = self.book
        view = self.h.view
        queue = self.queue_index(job)
        total = np.zeros(len(book.resources))
        for tp in placement.tasks:
            m = int(view.node_model[tp.node])
            model = view.models[m].name if m >= 0 else None
            total += book.demand(tp.cpu_milli, tp.memory_mib, tp.gpu_milli * len(tp.gpus), model)
        book.charge(book.queues[queue], total)
        self.charged[job.id] = (queue, total)

    def ended(self, job_id: str, at: float) -> None:
        """Refund the job's charge; lanes waiting for room on their allowed models, and lanes
        over quota in its cohort (or over a limit of its queue's own), are worth another try."""
        queue, demand = self.charged.pop(job_id)
        book = self.book
        if job_id in self._suspended:
            self._suspended.discard(job_id)  # an eviction made real: already refunded
        else:
            book.refund(book.queues[queue], demand)
        woken = self._blocked.pop(int(book.cohort[queue]), set())
        woken |= self._blocked.pop(-1 - queue, set())
        woken |= self._blocked_room
        self._blocked_room = set()
        lane_list = self.h.lanes.lanes
        for i in woken:
            self.h.unblock(lane_list[i])

    def suspend(self, job_id: str) -> None:
        queue, demand = self.charged[job_id]
        self._suspended.add(job_id)
        self.book.refund(self.book.queues[queue], demand)

    def resume(self, job_id: str) -> None:
        queue, demand = self.charged[job_id]
        self._suspended.discard(job_id)
        self.book.charge(self.book.queues[queue], demand)

    def holds(self, job_id: str) -> bool:
        return job_id in self.charged

    # ---------------------------------------------------------------- up front
    def refusal(self, job: Job, view: ClusterView, ctx: OrderContext) -> str | None:
        """Why ``job``'s queue can never admit it: its whole demand must fit the queue's
        ceiling (its nominal, for a job that may not borrow), on some GPU model it may use
        when GPUs are governed per model. ``SpecError`` if no queue serves it."""
        book = self.book
        queue = book.queues[self.queue_index(job)]
        t = job.task
        nb = no_borrow_class(job.priority_class, ctx.priority_classes, self.preemption)
        key = (queue, t, job.tasks, job.min_tasks, nb)
        if key in self._refusals:
            return self._refusals[key]
        self._refusals[key] = why = self._refusal(job, view, queue, nb)
        return why

    def _refusal(self, job: Job, view: ClusterView, queue: str, nb: str | None) -> str | None:
        book = self.book
        t = job.task
        n = job.tasks
        cpu, mem, gpu = n * t.cpu_milli, n * t.memory_mib, n * t.gpu_share_milli if t.gpus else 0
        why = book.impossible(queue, book.demand(cpu, mem, gpu, None), nb)
        if why is None and gpu and book.per_model:
            usable = [m.name for m in view.models if not t.gpu_models or m.name in t.gpu_models]
            whys = {m: book.impossible(queue, book.demand(cpu, mem, gpu, m), nb) for m in usable}
            allowed = [m for m, w in whys.items() if w is None]
            if not allowed:
                why = next(iter(whys.values()), None) or "no GPU model it may use"
            else:
                # The models its quota allows must also be able to hold it, on an empty cluster.
                k = view.fit_counts(t, job.tasks) * view.model_ok(frozenset(allowed))
                if int(k.sum()) < job.min_tasks:
                    why = (
                        f"queue {queue} allows GPU models {', '.join(allowed)}, whose nodes "
                        f"fit only {int(k.sum())} of its {job.min_tasks} task(s)"
                    )
        return why
