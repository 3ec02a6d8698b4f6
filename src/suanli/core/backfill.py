"""Backfill behind reservations: EASY (one, for the blocked head) and conservative (one for
every waiting job up to a depth), and the tests a later job must pass to start now.

EASY backfilling (Lifka's, as analysed by Mu'alem and Feitelson, IEEE TPDS 2001): when the
first job in queue order cannot start, it gets a *reservation*: the earliest time ``until`` at
which it would fit if running jobs end when their expected runtimes say (a
``RuntimeEstimator``: ``runtime/estimate``, the user's estimate or a default for jobs without
one; ``runtime/oracle``, the true runtime, as a reference only). Later
jobs may still start now, but only if they end (by their estimate) before ``until``, or if the
reserved job would still fit at ``until`` with them running. So a backfilled job never delays
the reservation, as long as the estimates hold.

Here "would fit" is exact: the jobs expected to end by ``until`` are released, in estimated-end
order, until the reserved job's fit counts (``ClusterView.fit_counts``' rule) reach its gang
minimum. Running jobs are kept in that order as they start (``RunningByEnd``), and a release
recounts only the nodes it touches (a count on a node depends on that node alone), in a
compiled loop over arrays: nothing is released on the view itself. The reservation keeps the
capacity the ending jobs give back per node (``Reservation.freed``), so testing a later job
recounts only the nodes it would take. For a one-task job the test first looks at every node
the job fits on now: when the answer is the same wherever the placement would put it, no
placement is tried at all; otherwise the job is placed in a what-if (with a generator seeded
0, so the answer never depends on the cycle's random stream).

Conservative backfilling (Mu'alem and Feitelson's "conservative"; Slurm's backfill plugin
with ``bf_max_job_test``) is in ``suanli.core.conservative``; it builds on the running-jobs
index and the compiled counting here.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from suanli.core.decisions import BehindReservation, Decision, JobPlacement, Skip
from suanli.core.gang import place_job
from suanli.core.lanes import Lane
from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.policies.runtime_estimate import UserEstimate
from suanli.core.registry import register
from suanli.core.running import Running
from suanli.core.seams import HELD, Handle, Held, Placement, RuntimeEstimator
from suanli.core.view import ClusterView

DEFAULT_DEPTH = 100
"""Pending jobs that get a conservative reservation, in queue order (Slurm's
``bf_max_job_test`` default is 100 as well)."""


def estimated_end(r: Running, runtime: RuntimeEstimator) -> float:
    """When ``r`` is expected to end: its start plus its expected runtime."""
    return r.start + runtime.duration(r.job)


def fits(view: ClusterView, job: Job) -> bool:
    """Whether the view has room for ``job``'s smallest start now (exact counts)."""
    return int(view.fit_counts(job.task, job.tasks).sum()) >= job.min_tasks


_PARAMS: dict[tuple[TaskRequest, int], np.ndarray] = {}


def task_params(task: TaskRequest, limit: int) -> np.ndarray:
    """A task request as the compiled counters read it: GPUs, milli-GPU per GPU, GPU memory,
    CPU, memory, and the most tasks to count per node (read-only; one array per request)."""
    tp = _PARAMS.get((task, limit))
    if tp is None:
        tp = np.array(
            [
                task.gpus,
                task.gpu_milli,
                task.gpu_memory_mib,
                task.cpu_milli,
                task.memory_mib,
                limit,
            ],
            dtype=np.int64,
        )
        tp.flags.writeable = False
        if len(_PARAMS) < 65_536:  # a bound on what a long run of distinct requests keeps
            _PARAMS[(task, limit)] = tp
    return tp


# ------------------------------------------------------------------ compiled counting


@njit(cache=True, nogil=True)
def node_count(fm, gm, cpu, mem, tp):  # type: ignore[no-untyped-def]
    """How many tasks ``tp`` (see ``task_params``) one node with free GPU shares ``fm``, GPU
    memory ``gm``, CPU ``cpu`` and memory ``mem`` can take: ``ClusterView.fit_counts``' rule
    for one node, before its mask. Negative capacity (a plan overtaken by preemption) counts
    as none."""
    gpus, milli, gmem, c, m, limit = tp[0], tp[1], tp[2], tp[3], tp[4], tp[5]
    if gpus == 0:
        k = limit
    elif milli < MILLI:
        k = 0
        for g in range(fm.shape[0]):
            f = fm[g] // milli
            if gmem:
                h = gm[g] // gmem
                if h < f:
                    f = h
            if f > 0:
                k += f
    else:
        full = 0
        for g in range(fm.shape[0]):
            if fm[g] == MILLI:
                full += 1
        k = full // gpus
    if c:
        h = cpu // c
        if h < k:
            k = h
    if m:
        h = mem // m
        if h < k:
            k = h
    if limit < k:
        k = limit
    return k if k > 0 else 0


@njit(cache=True, nogil=True)
def _count_freed(x, fm, gm, cpu, mem, dfm, dgm, dcpu, dmem, tp, sfm, sgm):  # type: ignore[no-untyped-def]
    """``node_count`` on node ``x`` with ``d*`` added to its free capacity (``sfm``/``sgm``: scratch)."""
    for g in range(fm.shape[1]):
        sfm[g] = fm[x, g] + dfm[x, g]
        sgm[g] = gm[x, g] + dgm[x, g]
    return node_count(sfm, sgm, cpu[x] + dcpu[x], mem[x] + dmem[x], tp)


@njit(cache=True, nogil=True)
def _release_scan(  # type: ignore[no-untyped-def]
    order, n, j_t0, j_t1, j_milli, t_node, t_milli, t_gmem, t_cpu, t_mem, t_gpus,
    fm, gm, cpu, mem, ok, tp, counts, free, need, min_tasks, dfm, dgm, dcpu, dmem,
):  # fmt: skip
    """Release running jobs ``order[:n]`` one by one, into ``d*`` (what they give back per
    node), recounting ``counts`` on the nodes each touches; stop at the first after which
    ``free >= need`` and the counts sum to ``min_tasks``. Returns its position, or -1."""
    n_nodes, n_gpus = fm.shape
    mark = np.full(n_nodes, -1, np.int64)
    touched = np.empty(n_nodes, np.int64)
    sfm = np.empty(n_gpus, np.int64)
    sgm = np.empty(n_gpus, np.int64)
    total = 0
    for x in range(n_nodes):
        total += counts[x]
    for i in range(n):
        s = order[i]
        nt = 0
        for t in range(j_t0[s], j_t1[s]):
            x = t_node[t]
            for g in range(n_gpus):
                if t_gpus[t, g]:
                    dfm[x, g] += t_milli[t]
                    dgm[x, g] += t_gmem[t]
            dcpu[x] += t_cpu[t]
            dmem[x] += t_mem[t]
            if mark[x] != i:
                mark[x] = i
                touched[nt] = x
                nt += 1
        free += j_milli[s]
        for j in range(nt):
            x = touched[j]
            k = 0
            if ok[x]:
                k = _count_freed(x, fm, gm, cpu, mem, dfm, dgm, dcpu, dmem, tp, sfm, sgm)
            total += k - counts[x]
            counts[x] = k
        if free >= need and total >= min_tasks:
            return i
    return -1


@njit(cache=True, nogil=True)
def _recount(nodes, fm, gm, cpu, mem, dfm, dgm, dcpu, dmem, ok, tp):  # type: ignore[no-untyped-def]
    """``_count_freed`` on each of ``nodes`` (0 where ``ok`` is False)."""
    n_gpus = fm.shape[1]
    sfm = np.empty(n_gpus, np.int64)
    sgm = np.empty(n_gpus, np.int64)
    out = np.zeros(nodes.shape[0], np.int64)
    for i in range(nodes.shape[0]):
        x = nodes[i]
        if ok[x]:
            out[i] = _count_freed(x, fm, gm, cpu, mem, dfm, dgm, dcpu, dmem, tp, sfm, sgm)
    return out


_FINE, _BEHIND, _DEPENDS = 0, 1, 2
_NOT_THERE, _NODE_FINE, _NODE_BEHIND, _NODE_RECOUNT, _NODE_MIXED = -1, 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _one_task_outcome(  # type: ignore[no-untyped-def]
    fm, gm, cpu, mem, cap_gm, jok, jp, dfm, dgm, dcpu, dmem, hok, hp, counts, total, min_tasks,
    node_out, node_after,
):  # fmt: skip
    """EASY's test for a one-task job ``jp`` against a reservation, wherever it may go.

    For every node the job fits now (``ClusterView.feasible``' rule) and every GPU choice a
    placement could make there, the reserved job's count on that node is recounted with the
    job taking its share and the ending jobs giving theirs back. Per node (``node_out``):
    ``_NOT_THERE`` (it does not fit), ``_NODE_FINE`` (no choice drops the reserved job below
    its minimum, nor changes the count kept for the node), ``_NODE_BEHIND`` (every choice
    drops it), ``_NODE_RECOUNT`` (no choice drops it, every choice leaves the node's count at
    ``node_after``), ``_NODE_MIXED`` (it depends on the GPUs). Returns ``_BEHIND`` if every
    node says behind, ``_FINE`` if every node says fine (or none fits: no placement exists),
    else ``_DEPENDS``.

    Whole GPUs a task may take are fully free ones, which no running task holds, so ending
    jobs give nothing back on them and any choice among them recounts the same.
    """
    n_nodes, n_gpus = fm.shape
    g_want, milli, gmem, c, m = jp[0], jp[1], jp[2], jp[3], jp[4]
    sfm = np.empty(n_gpus, np.int64)
    sgm = np.empty(n_gpus, np.int64)
    n_behind = 0
    n_fine = 0
    n_fit = 0
    for x in range(n_nodes):
        node_out[x] = _NOT_THERE
        if not jok[x] or (c and cpu[x] < c) or (m and mem[x] < m):
            continue
        for g in range(n_gpus):
            sfm[g] = fm[x, g] + dfm[x, g]
            sgm[g] = gm[x, g] + dgm[x, g]
        scpu = cpu[x] + dcpu[x] - c
        smem = mem[x] + dmem[x] - m
        out = _NOT_THERE
        for choice in range(n_gpus if (g_want and milli < MILLI) else 1):
            if g_want and milli < MILLI:
                g = choice
                if fm[x, g] < milli or (gmem and gm[x, g] < gmem):
                    continue
                sfm[g] -= milli
                sgm[g] -= gmem
            elif g_want:
                free_whole = 0
                for g in range(n_gpus):
                    if fm[x, g] == MILLI:
                        free_whole += 1
                if free_whole < g_want:
                    continue
                left = g_want
                for g in range(n_gpus):
                    if left and fm[x, g] == MILLI:
                        sfm[g] -= MILLI
                        sgm[g] -= cap_gm[x, g]
                        left -= 1
            after = node_count(sfm, sgm, scpu, smem, hp) if hok[x] else 0
            if total - counts[x] + after < min_tasks:
                this = _NODE_BEHIND
            elif after == counts[x]:
                this = _NODE_FINE
            else:
                this = _NODE_RECOUNT
            if out == _NOT_THERE:
                out = this
                node_after[x] = after
            elif out != this or (this == _NODE_RECOUNT and node_after[x] != after):
                out = _NODE_MIXED
            # Undo this choice for the next one.
            for g in range(n_gpus):
                sfm[g] = fm[x, g] + dfm[x, g]
                sgm[g] = gm[x, g] + dgm[x, g]
        node_out[x] = out
        if out != _NOT_THERE:
            n_fit += 1
            n_behind += out == _NODE_BEHIND
            n_fine += out == _NODE_FINE
    if n_behind == n_fit and n_fit > 0:
        return _BEHIND
    if n_fine == n_fit:
        return _FINE
    return _DEPENDS


# ------------------------------------------------------------------ running jobs by end


class RunningByEnd:
    """Running jobs in order of estimated end (then job id), with their task placements as
    arrays for the compiled loops.

    Entries are added as jobs start (``add``) and dropped lazily: ``sync`` compares with the
    scheduler's running jobs whenever one has ended or been evicted since it last looked, and
    rebuilds everything if the two still disagree (a start it was not told of).
    """

    def __init__(self, view: ClusterView, runtime: RuntimeEstimator) -> None:
        self.runtime = runtime
        self.n_gpus = view.gpu_slots
        self.keys: list[tuple[float, str]] = []
        self.runs: list[Running] = []
        self.order = np.zeros(64, np.int64)  # slot of each entry, parallel to keys
        self._entry: dict[str, tuple[tuple[float, str], int]] = {}  # job id -> (key, slot)
        self._ended_seen = -1  # ends and evictions not told through ``ended``, last seen
        self._told = 0
        self._dead = 0
        self._alloc(64, 256)

    def _alloc(self, slots: int, tasks: int) -> None:
        self.j_t0 = np.zeros(slots, np.int64)
        self.j_t1 = np.zeros(slots, np.int64)
        self.j_milli = np.zeros(slots, np.int64)
        self.j_end = np.zeros(slots, np.float64)
        self.t_node = np.zeros(tasks, np.int64)
        self.t_milli = np.zeros(tasks, np.int64)
        self.t_gmem = np.zeros(tasks, np.int64)
        self.t_cpu = np.zeros(tasks, np.int64)
        self.t_mem = np.zeros(tasks, np.int64)
        self.t_gpus = np.zeros((tasks, self.n_gpus), np.bool_)
        self.n_slots = 0
        self.n_tasks = 0

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, r: Running) -> None:
        """``r`` started (a job restarted after an eviction replaces its old entry)."""
        jid = r.job.id
        if jid in self._entry:
            self._remove(jid)
        if self._dead > max(64, len(self.keys)):
            self._compact()
        key = (estimated_end(r, self.runtime), jid)
        slot = self._write(r.placement, key[0])
        p = bisect.bisect_left(self.keys, key)
        self.keys.insert(p, key)
        self.runs.insert(p, r)
        n = len(self.keys)
        if n > len(self.order):
            self.order = np.concatenate((self.order, np.zeros(len(self.order), np.int64)))
        o = self.order
        o[p + 1 : n] = o[p : n - 1].copy()
        o[p] = slot
        self._entry[jid] = (key, slot)

    def ended(self, jid: str) -> None:
        """Job ``jid`` ended (or was never running): its entry, if any, goes."""
        self._told += 1
        if jid in self._entry:
            self._remove(jid)

    def sync(self, running: Mapping[str, Running], ended: int) -> RunningByEnd:
        """Drop the entries of jobs no longer running. ``ended`` is the scheduler's count of
        ends and evictions: the ends were told (``ended``); if more left than were told
        (evictions), the entries are compared with ``running``."""
        if ended - self._told != self._ended_seen:
            self._ended_seen = ended - self._told
            for jid in self._entry.keys() - running.keys():
                self._remove(jid)
        if len(self._entry) != len(running):
            self.rebuild(running.values())
        return self

    def rebuild(self, running: Iterable[Running]) -> None:
        self.keys, self.runs, self._entry, self._dead = [], [], {}, 0
        self._alloc(max(64, len(self.j_t0)), max(256, len(self.t_node)))
        for r in sorted(running, key=lambda r: (estimated_end(r, self.runtime), r.job.id)):
            self.add(r)

    def _remove(self, jid: str) -> None:
        key, _ = self._entry.pop(jid)
        p = bisect.bisect_left(self.keys, key)
        del self.keys[p]
        del self.runs[p]
        n = len(self.keys)
        o = self.order
        o[p:n] = o[p + 1 : n + 1].copy()
        self._dead += 1

    def _compact(self) -> None:
        """Rewrite the slot and task arrays with the live entries only (same order)."""
        runs, keys = self.runs, self.keys
        self._alloc(max(64, len(self.j_t0)), max(256, len(self.t_node)))
        for i, (r, key) in enumerate(zip(runs, keys, strict=True)):
            slot = self._write(r.placement, key[0])
            self.order[i] = slot
            self._entry[key[1]] = (key, slot)
        self._dead = 0

    def _write(self, p: JobPlacement, end: float) -> int:
        s = self.n_slots
        if s == len(self.j_t0):
            for name in ("j_t0", "j_t1", "j_milli", "j_end"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros_like(a))))
        t0 = self.n_tasks
        t1 = t0 + len(p.tasks)
        while t1 > len(self.t_node):
            for name in ("t_node", "t_milli", "t_gmem", "t_cpu", "t_mem", "t_gpus"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros_like(a))))
        for i, tp in enumerate(p.tasks, t0):
            self.t_node[i] = tp.node
            self.t_milli[i] = tp.gpu_milli
            self.t_gmem[i] = tp.gpu_memory_mib
            self.t_cpu[i] = tp.cpu_milli
            self.t_mem[i] = tp.memory_mib
            row = self.t_gpus[i]
            row[:] = False
            for g in tp.gpus:
                row[g] = True
        self.j_t0[s], self.j_t1[s], self.j_milli[s], self.j_end[s] = t0, t1, p.gpu_milli, end
        self.n_slots = s + 1
        self.n_tasks = t1
        return s


# ------------------------------------------------------------------ EASY


@dataclass(slots=True)
class Reservation:
    """Job ``job`` is reserved to start at ``until``, when the jobs in ``ending`` have ended.

    ``counts`` is how many of its tasks each node could take then (with what runs now);
    ``freed``, when kept, is what the ending jobs give back per node (per-GPU share and
    memory, CPU, memory), so a node's count at ``until`` can be recounted from the view.
    """

    job: Job
    until: float
    ending: list[Running]
    counts: np.ndarray
    freed: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    total: int = -1
    """``counts.sum()``, kept with ``freed`` (-1: not kept)."""


def reserve(view: ClusterView, head: Job, running: RunningByEnd, now: float) -> Reservation | None:
    """The earliest reservation for ``head``, or None if it would not fit even on an empty
    cluster of what is running now (it then waits for something else, such as quota)."""
    n = len(running)
    if not n:
        return None
    t = head.task
    counts = view.fit_counts(t, head.tasks)
    shape = (view.n_nodes, view.gpu_slots)
    freed = (np.zeros(shape, np.int64), np.zeros(shape, np.int64)) + (
        np.zeros(view.n_nodes, np.int64),
        np.zeros(view.n_nodes, np.int64),
    )
    i = _release_scan(
        running.order, n, running.j_t0, running.j_t1, running.j_milli,
        running.t_node, running.t_milli, running.t_gmem, running.t_cpu, running.t_mem,
        running.t_gpus, view.gpu_free_milli, view.gpu_free_mem, view.free_cpu, view.free_mem,
        view.task_mask(t), task_params(t, head.tasks), counts,
        int(view.node_free_milli.sum()), head.min_tasks * t.gpu_share_milli if t.gpus else 0,
        head.min_tasks, *freed,
    )  # fmt: skip
    if i < 0:
        return None
    until = max(now, running.keys[i][0])
    return Reservation(head, until, running.runs[: i + 1], counts, freed, int(counts.sum()))


def still_fits(view: ClusterView, res: Reservation, nodes: Iterable[int]) -> bool:
    """Whether the reserved job still fits at its time now that something new holds
    ``nodes``: only those nodes' counts can have changed, so only they are recounted (with
    what the ending jobs give back there). If it does, the reservation's counts take the new
    job in (it is about to start)."""
    assert res.freed is not None
    touched = np.array(sorted(set(nodes)), dtype=np.int64)
    t = res.job.task
    after = _recount(
        touched, view.gpu_free_milli, view.gpu_free_mem, view.free_cpu, view.free_mem,
        *res.freed, view.task_mask(t), task_params(t, res.job.tasks),
    )  # fmt: skip
    total = int(res.counts.sum()) - int(res.counts[touched].sum()) + int(after.sum())
    if total < res.job.min_tasks:
        return False
    res.counts[touched] = after  # the new job will run past ``until``: count it from now on
    res.total = total
    return True


@register("backfill", "none")
class NoBackfill:
    """No backfill: plain skip-ahead (a job that cannot start is passed over)."""

    needs_running = False
    needs_order = False
    gates = False
    """Takes no part in the cycle: the scheduler drops it."""

    def __init__(self, runtime: RuntimeEstimator | None = None, depth: int = DEFAULT_DEPTH) -> None:
        pass


@register("backfill", "easy")
class Easy:
    """EASY: a reservation for the blocked head job; later jobs start only if they do not delay it."""

    needs_running = True
    needs_order = True
    gates = True

    def __init__(self, runtime: RuntimeEstimator | None = None, depth: int = DEFAULT_DEPTH) -> None:
        self.runtime = runtime if runtime is not None else UserEstimate()

    def bind(self, h: Handle) -> None:
        """State between cycles: the running jobs by expected end, the reservation while it
        holds, the lanes held behind it, and a generator reset to seed 0 for the what-if
        placement of a candidate."""
        self.h = h
        view = h.view
        self.by_end = RunningByEnd(view, self.runtime)
        self._rng = np.random.default_rng(0)
        self._rng_seed0 = self._rng.bit_generator.state
        self._node_out = np.empty(view.n_nodes, np.int64)  # per node, for one-task jobs
        self._node_after = np.empty(view.n_nodes, np.int64)
        self._masks: dict[TaskRequest, np.ndarray] = {}  # task_mask, while health holds
        self._health = view.health_changes
        self._res_seen: Reservation | None = None
        self._res_head: tuple[np.ndarray, TaskRequest] = (np.zeros(6, np.int64), TaskRequest())
        self._reservation: Reservation | None = None  # the head's, kept while it holds
        self._reservation_key: tuple[str, int] | None = None
        self._deferred: list[int] = []  # lanes held behind a reservation, for the next cycle
        # This cycle's head (the first pending job) and its reservation, once worked out.
        self._head: Job | None = None
        self._res: Reservation | None = None
        self._res_known = True

    # ---------------------------------------------------------------- the cycle
    def submitted(self, key: Any, job: Job) -> None:
        """A job joined the queue (EASY reads the scheduler's own queue)."""

    def begin(self, rng: np.random.Generator, out: list[Decision]) -> None:
        """EASY plans nothing ahead: lanes held last cycle are back in line, and the
        reservation is made as the cycle goes, when a job behind the head first comes up."""
        h = self.h
        for i in self._deferred:
            h.activate(h.lanes.lanes[i])
        self._deferred.clear()
        self._head = h.lanes.first_pending()
        self._res = None
        self._res_known = self._head is None

    def gate(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision | Held | None:
        if not self._res_known and job is not self._head:
            # Worked out when a job behind the head first gets its turn.
            self._res_known = True
            self._res = self._head_reservation(self._head)
        res = self._res
        if res is not None and job is not res.job and self._behind(job, lane, res):
            out.append(Skip(job, BehindReservation(res.job.id, res.until)))
            self._deferred.append(lane.index)  # tried again next cycle
            return HELD
        return None

    def started(self, job: Job) -> None:
        h = self.h
        self.by_end.add(h.running.records[job.id])
        if self._head is not None and job is self._head:
            # The head started: the next pending job is the one to reserve for.
            self._head = h.lanes.first_pending()
            self._res, self._res_known = None, self._head is None

    def failed(self, job: Job) -> None:
        if self._res is None:
            self._res = self.reserve(job)

    def restored(self, r: Running) -> None:
        self.by_end.add(r)

    def ended(self, job_id: str) -> None:
        self.by_end.ended(job_id)

    # ---------------------------------------------------------------- reservations
    def _head_reservation(self, head: Job | None) -> Reservation | None:
        """A reservation for the first pending job, if it cannot start now."""
        h = self.h
        if head is None or head.id not in h.lanes.pending:
            return None
        lane = h.lanes.lane_of(head.id)
        table = h.table
        blocked = lane.blocked is not None and lane.skipped == head.id
        if not blocked and not (table.is_tracked(lane.shape) and not table.fits(lane.shape)):
            return None  # the head may well start this cycle
        key = (head.id, h.running.ended)
        if self._reservation_key != key:
            # Nothing ended since it was made (only jobs it allowed started): it still holds.
            self._reservation_key = key
            self._reservation = self.reserve(head)
        return self._reservation

    def running(self) -> RunningByEnd:
        h = self.h
        return self.by_end.sync(h.running.records, h.running.ended)

    def reserve(self, job: Job) -> Reservation | None:
        """EASY's reservation for ``job``, made now (``reserve``)."""
        return reserve(self.h.view, job, self.running(), self.h.now)

    def _behind(self, job: Job, lane: Lane, res: Reservation) -> bool:
        """Whether starting ``job`` now could delay reservation ``res`` (EASY's test)."""
        h = self.h
        if h.now + self.runtime.duration(job) <= res.until:
            return False  # it ends before the reservation starts
        if h.table.is_tracked(lane.shape) and not h.table.fits(lane.shape):
            return False  # cannot start anyway: its own Skip says why
        return self.delays(job, res)

    def _mask(self, view: ClusterView, task: TaskRequest) -> np.ndarray:
        if view.health_changes != self._health:
            self._health = view.health_changes
            self._masks.clear()
        m = self._masks.get(task)
        if m is None:
            m = self._masks[task] = view.task_mask(task)
        return m

    def delays(self, job: Job, res: Reservation) -> bool:
        """Whether starting ``job`` now where the placement would put it (a what-if with a
        generator seeded 0) would leave ``res.job`` without room at ``res.until``."""
        assert res.freed is not None
        view: ClusterView = self.h.view
        placement: Placement = self.h.placement
        if job.tasks == 1:
            hj = res.job
            if res is not self._res_seen:  # the reserved job's request, once per reservation
                self._res_seen = res
                self._res_head = (task_params(hj.task, hj.tasks), hj.task)
            outcome = _one_task_outcome(
                view.gpu_free_milli, view.gpu_free_mem, view.free_cpu, view.free_mem,
                view.gpu_cap_mem, self._mask(view, job.task), task_params(job.task, 1),
                *res.freed, self._mask(view, self._res_head[1]), self._res_head[0],
                res.counts, res.total, hj.min_tasks, self._node_out,
                self._node_after,
            )  # fmt: skip
            if outcome != _DEPENDS:
                return bool(outcome == _BEHIND)
            # It depends on the node: the one ``gang.place_job`` gives a one-task job, the
            # feasible node the placement scores lowest (first on ties).
            self._rng.bit_generator.state = self._rng_seed0
            nodes = view.feasible(job.task).nonzero()[0]
            x = int(nodes[int(placement.score(view, job.task, 1, nodes, self._rng).argmin())])
            there = self._node_out[x]
            if there == _NODE_BEHIND:
                return True
            if there == _NODE_RECOUNT:
                res.total += int(self._node_after[x] - res.counts[x])
                res.counts[x] = self._node_after[x]  # it will run past ``until`` there
            if there != _NODE_MIXED:
                return False
        self._rng.bit_generator.state = self._rng_seed0
        jp, _, _ = place_job(view, job, placement, self._rng)
        if jp is None:
            return False
        try:
            return not still_fits(view, res, (tp.node for tp in jp.tasks))
        finally:
            for tp in jp.tasks:
                view.release(tp)
