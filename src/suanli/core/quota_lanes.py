"""The scheduler's quota checks: whether a lane's head fits its queue's quota, and the lanes
that wait for quota to come back.

Functions of a ``Scheduler``'s state, as ``suanli.core.eviction`` is for preemption. A lane
whose head is over quota is parked (``block``) under its cohort, or under its own queue for a
limit of the queue's own, until a release there wakes it (``wake_blocked``). With reclaim, a
lane whose head waits within its queue's nominal quota is owed room: while it waits, no other
queue of its cohort may borrow (``lender_waiting``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from suanli.core.decisions import JobPlacement, NoCapacity, Skip
from suanli.core.eviction import job_demand
from suanli.core.model import Job
from suanli.core.preemption import capped, no_borrow_class
from suanli.core.tenancy import OverQuota

if TYPE_CHECKING:
    from suanli.core.scheduler import Scheduler, _Shape


def quota(s: Scheduler, job: Job, queue: int) -> tuple[OverQuota | None, np.ndarray | None]:
    """Whether ``queue`` can take ``job`` now; with per-model GPU quotas, also the mask of
    nodes whose GPU model it may use (None: any)."""
    book = s.quotas
    assert book is not None
    name = book.queues[queue]
    t = job.task
    n = job.tasks
    cpu, mem, gpu = n * t.cpu_milli, n * t.memory_mib, n * t.gpu_share_milli if t.gpus else 0
    nb = no_borrow(s, job)
    scope = "queue"
    if nb is None and s._owed:
        lender = lender_waiting(s, queue)
        if lender is not None:
            nb, scope = f"queue {lender} waits for its quota", "cohort"
    over = book.check(name, book.demand(cpu, mem, gpu, None), nb, scope)
    if over is not None or not gpu or not book.per_model:
        return over, None
    ok: list[str] = []
    first: OverQuota | None = None
    for m in s.view.models:
        if t.gpu_models and m.name not in t.gpu_models:
            continue
        o = book.check(name, book.demand(cpu, mem, gpu, m.name), nb, scope)
        if o is None:
            ok.append(m.name)
        elif first is None:
            first = o
    if not ok:
        return first, None
    return None, s.view.model_ok(frozenset(ok))


def no_borrow(s: Scheduler, job: Job) -> str | None:
    """Why ``job`` may not borrow quota (None: it may): with reclaim on, a job that could not
    be reclaimed (not preemptible, or at its thrash cap) stays within the nominal."""
    cfg = s.preemption
    why = no_borrow_class(job.priority_class, s.ctx.priority_classes, cfg)
    if why is not None or cfg is None or not cfg.reclaim:
        return why
    history = s._preempted_at.get(job.id, ())
    if capped(history, s._now, cfg):
        return f"job preempted {len(history)} times, at its cap"
    return None


def owed_to(s: Scheduler, job: Job, queue: int) -> bool:
    """Whether ``queue`` could take ``job`` within its nominal quota (it is owed room)."""
    book = s.quotas
    assert book is not None
    d = job_demand(job, book)
    return bool((book.usage[queue] + d <= book.nominal[queue])[d > 0].all())


def lender_waiting(s: Scheduler, queue: int) -> str | None:
    """A queue of ``queue``'s cohort whose head job waits within its nominal quota (so
    ``queue`` may not borrow now), or None. Stale entries are dropped here."""
    book = s.quotas
    assert book is not None
    lanes = s._owed.get(int(book.cohort[queue]))
    if not lanes:
        return None
    for lane_id in sorted(lanes):
        lane = s._shapes[lane_id]
        if lane.queue == queue:
            continue
        if lane.heap and owed_to(s, lane.heap[0][1], lane.queue):
            return book.queues[lane.queue]
        lanes.discard(lane_id)
    return None


def block(s: Scheduler, job: Job, shape: _Shape, why: OverQuota | NoCapacity) -> Skip:
    """Skip ``job``: its lane waits for a release (in its cohort, for a quota)."""
    book = s.quotas
    assert book is not None
    shape.blocked = why
    shape.skipped = job.id
    if isinstance(why, OverQuota):
        # Woken by a release in its cohort, or (a limit of its own) in its queue only.
        key = -1 - shape.queue if why.scope == "queue" else int(book.cohort[shape.queue])
        s._blocked.setdefault(key, set()).add(shape.lane)
        history = s._preempted_at.get(job.id)
        cfg = s.preemption
        if history and cfg is not None and capped(history, s._now, cfg):
            # Kept from borrowing by its thrash cap: look again when the cap lifts.
            lifts = history[max(0, len(history) - cfg.max_preemptions)] + cfg.window
            s._protect_wake = min(s._protect_wake, lifts)
            s._protect_lanes.add(shape.lane)
    else:
        s._blocked_room.add(shape.lane)
    return Skip(job, why)


def charge(s: Scheduler, job: Job, queue: int, placement: JobPlacement) -> None:
    """Charge ``placement`` (per GPU model where the quotas have one) to quota queue
    ``queue``, and remember it for the refund."""
    book = s.quotas
    assert book is not None
    view = s.view
    name = book.queues[queue]
    total = np.zeros(len(book.resources))
    for tp in placement.tasks:
        m = int(view.node_model[tp.node])
        model = view.models[m].name if m >= 0 else None
        total += book.demand(tp.cpu_milli, tp.memory_mib, tp.gpu_milli * len(tp.gpus), model)
    book.charge(name, total)
    s._charged[job.id] = (name, total)


def wake_blocked(s: Scheduler, queue: str) -> None:
    """Capacity came back to quota queue ``queue``: lanes waiting for room on their allowed
    models, and lanes over quota in its cohort (or over a limit of its own), are worth
    another try."""
    book = s.quotas
    assert book is not None
    q = book.index[queue]
    woken = s._blocked.pop(int(book.cohort[q]), set())
    woken |= s._blocked.pop(-1 - q, set())  # over a limit of this queue's own
    woken |= s._blocked_room
    s._blocked_room = set()
    for lane_id in woken:
        lane = s._shapes[lane_id]
        lane.blocked = None
        s._activate(lane)
