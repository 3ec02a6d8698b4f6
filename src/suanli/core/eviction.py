"""preemption/checkpoint-aware: evict the victims that lose the least work for a job that
cannot start.

The rules (who may evict whom, protection, lost work) are in ``suanli.core.preemption``; this
plugin applies them through the scheduler's handle. Everything is a what-if on the view, the
ledgers (quota usage, fair-share holdings) and the running set first (``evict`` and
``restore`` undo each other exactly); only a set of victims that lets the job start is kept,
and then one ``Preempt`` per victim goes out before the job's ``Admit``.

Two rules keep the guarantees of the other queues:

* a victim from *another* queue (a borrower being reclaimed, or a lower priority in a
  borrowing queue) is taken only while its queue is still above its nominal quota at that
  moment (Kueue's rule): reclaim takes back what was lent, never a guarantee;
* the candidates are scanned per priority and queue, so a job that may evict nothing (no
  lower priority and nothing to reclaim) costs one pass over a few sets.
"""

from __future__ import annotations

import numpy as np

from suanli.core.admission.quota import QuotaAdmission, job_demand
from suanli.core.decisions import Admit, Decision, NoCapacity, Preempt, Reason
from suanli.core.lanes import Lane
from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.preemption import PreemptionConfig, protected, protected_until, victim_order
from suanli.core.registry import register
from suanli.core.running import Running
from suanli.core.seams import Handle
from suanli.core.tenancy import OverQuota, QuotaBook


@register("preemption", "checkpoint-aware")
class CheckpointAware:
    """Evict lower priorities, and borrowers to reclaim lent quota, losing the least work since their checkpoints."""

    def __init__(
        self, config: PreemptionConfig | None = None, quota: QuotaAdmission | None = None
    ) -> None:
        self.config = config if config is not None else PreemptionConfig()
        self.quota = quota
        """The quota admission whose lent capacity may be reclaimed (None: no quotas)."""

    def bind(self, h: Handle) -> None:
        self.h = h

    def preempt(
        self, job: Job, lane: Lane, rng: np.random.Generator, why: Reason, out: list[Decision]
    ) -> Decision | None:
        """Evict the cheapest set of candidate victims that lets ``job`` start, and start it
        (the victims' ``Preempt`` decisions go to ``out``); None (nothing changed) if no
        such set exists. ``why`` is why it cannot start now: only room (``NoCapacity``) or
        quota (``OverQuota``) can be made by evicting. With reclaim, a job left waiting
        within its queue's nominal is owed room (``QuotaAdmission.note_owed``)."""
        done = None
        if isinstance(why, NoCapacity | OverQuota):  # (evicting gives a budget no room)
            done = preempt(self.h, self.config, self.quota, job, lane, rng, why, out)
        if done is None and self.config.reclaim and self.quota is not None:
            self.quota.note_owed(job, lane)
        return done


def preempt(
    s: Handle,
    cfg: PreemptionConfig,
    quota: QuotaAdmission | None,
    job: Job,
    lane: Lane,
    rng: np.random.Generator,
    why: Reason,
    out: list[Decision],
) -> Decision | None:
    """See ``CheckpointAware.preempt``."""
    now = s.now
    prio = s.ctx.priority(job)
    book = quota.book if quota is not None else None
    charged = quota.charged if quota is not None else {}
    q = quota.lane_queue(lane) if quota is not None else -1
    reclaiming = False
    if book is not None and q >= 0 and cfg.reclaim:
        d = job_demand(job, book)
        governed = d > 0
        reclaiming = bool((book.usage[q] + d <= book.nominal[q])[governed].all())
    borrowing: set[int] = set()
    if book is not None and q >= 0:
        over = (book.usage > book.nominal).any(axis=1) & (book.cohort == book.cohort[q])
        over[q] = False
        borrowing = set(np.flatnonzero(over).tolist())
    kinds: dict[str, str] = {}
    running = s.running.records
    for p_val, ids in s.running.evictable.items():
        lower = p_val < prio
        if not lower and not (reclaiming and borrowing):
            continue
        for i in ids:
            r = running[i]
            rq = charged[i][0] if book is not None else -1
            if book is None or rq == q:
                kind = "priority" if lower else ""
            elif rq in borrowing:
                # Taking back lent quota is the stronger right (and the shorter protection).
                kind = "reclaim" if reclaiming else "priority" if lower else ""
            else:
                kind = ""  # another queue within its quota, or another cohort: never
            if not kind:
                continue
            reclaim = kind == "reclaim"
            if not protected(r, now, cfg, reclaim):
                kinds[i] = kind
            else:
                # Protected for now: worth another look when its protection ends.
                until = protected_until(r, now, cfg, reclaim)
                if until > now:
                    s.retry_at(until, lane)
    if not kinds:
        return None
    if (
        isinstance(why, OverQuota)
        and quota is not None
        and book is not None
        and not book.per_model  # (per model, another model's quota may be the one to clear)
        and not _quota_can_clear(quota, q, why, kinds)
    ):
        return None
    # Cheap necessary condition, by GPU share alone: counting each node's free share plus
    # its candidates', enough of the job's tasks must fit; keep only candidates on nodes
    # that could then hold a task.
    t = job.task
    view = s.view
    share = t.gpu_share_milli if t.gpus else 0
    if share:
        freed: dict[int, int] = {}
        for i in kinds:
            for tp in running[i].placement.tasks:
                freed[tp.node] = freed.get(tp.node, 0) + tp.gpu_milli * len(tp.gpus)
        room = {n: int(view.node_free_milli[n]) + f for n, f in freed.items()}
        useful = {n for n, v in room.items() if v >= share}
        if int(view.node_free_milli.sum()) + sum(freed.values()) < job.min_tasks * share:
            return None
        if not useful:
            return None
        kinds = {
            i: k
            for i, k in kinds.items()
            if any(tp.node in useful for tp in running[i].placement.tasks)
        }
    order = victim_order([running[i] for i in kinds], now)
    if job.tasks == 1:
        evicted = _one_node(s, quota, job, lane, order, q, why)
        if evicted is _NO_NODE:
            return None  # no node could make room, whatever it evicted
    else:
        evicted = None
        if room_after_all(s, job, order) < job.min_tasks:
            return None
    if evicted is None:
        evicted = greedy(s, quota, job, lane, order, q, share)
        if evicted is None:
            return None
    # Reprieve every victim not needed after all, the most expensive first.
    for r in sorted(evicted, key=lambda r: (-r.lost_gpu_seconds(now), r.start, r.job.id)):
        restore(s, r)
        if not fits(s, quota, job, lane):
            evict(s, r)
    victims = [r for r in evicted if r.job.id not in running]
    decision = s.place(job, lane, rng)
    if type(decision) is not Admit:  # fits() said it would fit: cannot happen
        raise AssertionError(f"job {job.id} fits after evictions but was not placed")
    for r in victims:
        out.append(
            Preempt(
                r.job, r.placement, job.id, kinds[r.job.id], r.lost_gpu_seconds(now), r.kept(now)
            )
        )
        s.evicted(r)
    return decision


def greedy(
    s: Handle,
    quota: QuotaAdmission | None,
    job: Job,
    lane: Lane,
    order: list[Running],
    q: int,
    share: int,
) -> list[Running] | None:
    """Evict candidates cheapest first, wherever they run, until ``job`` fits (then kept
    evicted, to be reprieved); None, with everything restored, if it never does."""
    need = job.min_tasks * share
    free_now = int(s.view.node_free_milli.sum())
    evicted: list[Running] = []
    for r in order:
        if quota is not None:
            rq = quota.charged[r.job.id][0]
            if rq != q and not _borrowing(quota.book, rq):
                continue  # its queue is back within its quota: the rest of it is guaranteed
        evict(s, r)
        evicted.append(r)
        free_now += r.placement.gpu_milli
        if free_now >= need and fits(s, quota, job, lane):
            return evicted
    for r in reversed(evicted):
        restore(s, r)
    return None


_NO_NODE: list[Running] = []
"""``_one_node``'s answer when no node can make room (the general search would fail too)."""


def room_after_all(s: Handle, job: Job, order: list[Running]) -> int:
    """How many of ``job``'s tasks the cluster could take if every candidate were evicted
    (node by node, by arithmetic; nodes without candidates as they are): an upper bound."""
    view = s.view
    t = job.task
    k = view.fit_counts(t, job.tasks)
    on: dict[int, list[Running]] = {}
    for r in order:
        for n in dict.fromkeys(tp.node for tp in r.placement.tasks):
            on.setdefault(n, []).append(r)
    ok = view.task_mask(t)
    total = int(k.sum())
    for n, cands in on.items():
        total -= int(k[n])
        if not ok[n]:
            continue
        g_free = view.gpu_free_milli[n].copy()
        g_mem = view.gpu_free_mem[n].copy()
        free = [int(view.free_cpu[n]), int(view.free_mem[n])]
        for r in cands:
            free_on(r, n, g_free, g_mem, free)
        total += count_tasks(t, g_free, g_mem, free[0], free[1], job.tasks)
    return total


def count_tasks(
    t: TaskRequest, g_free: np.ndarray, g_mem: np.ndarray, cpu: int, mem: int, limit: int
) -> int:
    """How many tasks ``t`` fit a node with these free GPUs (milli, MiB), CPU and memory."""
    k = limit
    if t.cpu_milli:
        k = min(k, cpu // t.cpu_milli)
    if t.memory_mib:
        k = min(k, mem // t.memory_mib)
    if not t.gpus or k == 0:
        return max(k, 0)
    if t.gpu_milli >= MILLI:
        return min(k, int((g_free == MILLI).sum()) // t.gpus)
    per = g_free // t.gpu_milli
    if t.gpu_memory_mib:
        per = np.minimum(per, g_mem // t.gpu_memory_mib)
    return min(k, int(per.sum()))


def _one_node(
    s: Handle,
    quota: QuotaAdmission | None,
    job: Job,
    lane: Lane,
    order: list[Running],
    q: int,
    why: Reason,
) -> list[Running] | None:
    """Victims for a one-task job, in two parts worked out by arithmetic alone:

    1. if its queue's quota is what it lacks (``why``), the cheapest candidates that give
       back enough of it (its own queue's jobs, or for the cohort's pool also borrowers');
    2. then, for each node holding candidates, those of part 1 on it plus the cheapest
       further candidates there until the task has room on that node.

    The node whose set loses the least work (then has the fewest victims, then comes first)
    wins. Its victims are evicted (a what-if) and returned if the job then fits; None
    (nothing changed) if it still does not, for the general search to try, or ``_NO_NODE``
    if no set can work."""
    view = s.view
    book = quota.book if quota is not None else None
    charged = quota.charged if quota is not None else {}
    t = job.task
    now = s.now
    left0: dict[int, np.ndarray] = {}  # other queues: how far above nominal they still are
    if book is not None:
        for r in order:
            rq = charged[r.job.id][0]
            if rq != q and rq not in left0:
                left0[rq] = book.usage[rq] - book.nominal[rq]

    def allowed(r: Running, left: dict[int, np.ndarray]) -> bool:
        """Take ``r`` if its queue may lose it (within the what-if so far)."""
        if book is None:
            return True
        rq, demand = charged[r.job.id]
        if rq in left:
            if not (left[rq] > 0).any():
                return False  # back within its quota: the rest of it is guaranteed
            left[rq] = left[rq] - demand
        return True

    # Part 1: the quota.
    base: list[Running] = []
    left_q = dict(left0)
    if isinstance(why, OverQuota) and book is not None and not book.per_model:
        j = book.r_index[why.resource]
        short = _quota_short(book, q, why)
        own_only = why.scope == "queue"
        for r in order:
            if short <= 0:
                break
            if own_only and charged[r.job.id][0] != q:
                continue
            amount = charged[r.job.id][1][j]
            if amount <= 0 or not allowed(r, left_q):
                continue
            base.append(r)
            short -= amount
        if short > 0:
            return _NO_NODE
    base_ids = {r.job.id for r in base}
    base_cost = sum(r.lost_gpu_seconds(now) for r in base)
    # Part 2: room on one node.
    ok = view.task_mask(t)
    extra: dict[int, list[Running]] = {}  # node -> further candidates there, cheapest first
    for r in order:
        if r.job.id in base_ids:
            continue
        for n in dict.fromkeys(tp.node for tp in r.placement.tasks):
            if ok[n]:
                extra.setdefault(n, []).append(r)
    nodes = set(extra)
    if base:
        # Part 1 alone may be enough: on nodes with room now, or where its victims run.
        nodes.update(np.flatnonzero(view.feasible(t)).tolist())
        nodes.update(tp.node for b in base for tp in b.placement.tasks if ok[tp.node])
    best: tuple[float, int, int] | None = None
    chosen: list[Running] = []
    for n in sorted(nodes):
        g_free = view.gpu_free_milli[n].copy()
        g_mem = view.gpu_free_mem[n].copy()
        free = [int(view.free_cpu[n]), int(view.free_mem[n])]
        for r in base:
            free_on(r, n, g_free, g_mem, free)
        left = dict(left_q)
        taken = list(base)
        cost = base_cost
        fitted = room_for(t, g_free, g_mem, free[0], free[1])
        for r in extra.get(n, ()) if not fitted else ():
            if not allowed(r, left):
                continue
            free_on(r, n, g_free, g_mem, free)
            taken.append(r)
            cost += r.lost_gpu_seconds(now)
            if room_for(t, g_free, g_mem, free[0], free[1]):
                fitted = True
                break
        if fitted:
            key = (cost, len(taken), n)
            if best is None or key < best:
                best, chosen = key, taken
    if best is None:
        return _NO_NODE
    for r in chosen:
        evict(s, r)
    if fits(s, quota, job, lane):
        return chosen
    for r in reversed(chosen):
        restore(s, r)
    return None


def free_on(r: Running, n: int, g_free: np.ndarray, g_mem: np.ndarray, free: list[int]) -> None:
    """Add what ``r`` holds on node ``n`` to that node's free GPUs and [CPU, memory]."""
    for tp in r.placement.tasks:
        if tp.node == n:
            for g in tp.gpus:
                g_free[g] += tp.gpu_milli
                g_mem[g] += tp.gpu_memory_mib
            free[0] += tp.cpu_milli
            free[1] += tp.memory_mib


def room_for(t: TaskRequest, g_free: np.ndarray, g_mem: np.ndarray, cpu: int, mem: int) -> bool:
    """Whether one task ``t`` fits a node with these free GPUs (milli, MiB), CPU and memory."""
    if cpu < t.cpu_milli or mem < t.memory_mib:
        return False
    if not t.gpus:
        return True
    if t.gpu_milli >= MILLI:
        return int((g_free == MILLI).sum()) >= t.gpus
    fit = g_free >= t.gpu_milli
    if t.gpu_memory_mib:
        fit &= g_mem >= t.gpu_memory_mib
    return bool(fit.any())


def _quota_can_clear(quota: QuotaAdmission, q: int, why: OverQuota, kinds: dict[str, str]) -> bool:
    """Whether evicting every candidate could free the quota ``why`` lacks: only the job's
    own queue's jobs lower its usage (a nominal or borrowing-limit block); for a cohort's
    pool, borrowers of the cohort count too. A cheap necessary condition."""
    book = quota.book
    j = book.r_index[why.resource]
    short = _quota_short(book, q, why)
    own_only = not why.limit.startswith("cohort")
    freed = 0.0
    for i in kinds:
        rq, demand = quota.charged[i]
        if own_only and rq != q:
            continue
        freed += demand[j]
        if freed >= short:
            return True
    return False


def _quota_short(book: QuotaBook, q: int, why: OverQuota) -> float:
    """How much of ``why.resource`` must be given back before queue ``q`` can take the
    demand ``why.need``: its usage past the binding limit, plus the demand."""
    j = book.r_index[why.resource]
    u = float(book.usage[q, j])
    if why.limit.startswith("nominal"):
        return u + why.need - float(book.nominal[q, j])
    if why.limit == "borrowing limit":
        return u + why.need - float(book.cap[q, j])
    c = book.cohort[q]
    reserve = float(book.reserve[q, j])
    extra = max(0.0, u + why.need - reserve) - max(0.0, u - reserve)
    return float(book.pool_used[c, j]) + extra - float(book.pool[c, j])


def _borrowing(book: QuotaBook, queue: int) -> bool:
    return bool((book.usage[queue] > book.nominal[queue]).any())


def fits(s: Handle, quota: QuotaAdmission | None, job: Job, lane: Lane) -> bool:
    """Whether ``job`` could start now: its quota, then free capacity (exact counts)."""
    allowed = None
    if quota is not None:
        over, allowed = quota.allowed(job, quota.lane_queue(lane))
        if over is not None:
            return False
    k = s.view.fit_counts(job.task, job.tasks)
    if allowed is not None:
        k = k * allowed
    return int(k.sum()) >= job.min_tasks


def evict(s: Handle, r: Running) -> None:
    """Take ``r`` off the view, its ledgers and the running set (a what-if until the eviction
    is decided)."""
    for tp in r.placement.tasks:
        s.view.release(tp)
    for ledger in s.ledgers:
        ledger.suspend(r.job.id)
    s.running.drop(r)


def restore(s: Handle, r: Running) -> None:
    """Undo ``evict``."""
    for tp in r.placement.tasks:
        s.view.allocate(tp)
    for ledger in s.ledgers:
        ledger.resume(r.job.id)
    s.running.add(r)
