"""preemption/by-order: evict the running jobs the queue order now ranks after a waiting job.

For the preemptive orders that rank running jobs as well as waiting ones (``queue/las``,
Tiresias' 2D-LAS; ``queue/srtf``, shortest remaining time): a job that cannot start may evict
running jobs whose order key, taken now, is in a strictly later class than its own (the
keys' first parts: a later LAS queue, more GPU-time left). Only the first part counts, so
jobs of one LAS queue, or of equal remaining time, never evict each other.

The same rules as every preemptive policy hold (``suanli.core.preemption``): a priority class
that is not preemptible is never evicted, a job just started is protected for
``min_runtime``, the thrash cap limits evictions per window, a victim loses the work since its
last checkpoint and pays ``restart_overhead`` when it resumes. Victims are taken from the
latest class first (then the least work lost) until the job fits, and any not needed after
all are reprieved. A running job that is not yet behind the waiting job but will be (its LAS
service passes a split), or that is protected for now, gets the waiting job a cycle at that
time (``Handle.retry_at``).

Speed: a blocked job is weighed against every running job, so the running jobs' keys are kept
as lines in time (``RanksRunning.line``: ``clip(a + b × now, 0, cap)``) in arrays, synced with
the running set when it changes, and compared all at once.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from suanli.core.decisions import Admit, Decision, NoCapacity, Preempt, Reason
from suanli.core.eviction import count_tasks, evict, restore, room_after_all
from suanli.core.lanes import Lane
from suanli.core.model import Job, SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import register
from suanli.core.running import Running, RunningSet
from suanli.core.seams import Handle
from suanli.core.view import ClusterView


class RanksRunning(Protocol):
    """A queue order that also ranks running jobs (``queue/las``, ``queue/srtf``)."""

    def line(self, r: Running) -> tuple[float, float, float]:
        """``r``'s ranking value at time t as ``clip(a + b × t, 0, cap)``: ``(a, b, cap)``."""

    def levels(self, values: np.ndarray) -> np.ndarray:
        """The key first parts of ranking values (comparable with a waiting job's)."""

    def first_pass(self, a: np.ndarray, b: np.ndarray, level: Any, now: float) -> float:
        """The earliest time after ``now`` one of these lines passes ``level`` (inf: none)."""


def ranks_running(order: object) -> bool:
    """Whether a queue order ranks running jobs too (``RanksRunning``: LAS, SRTF), so that
    ``preemption/by-order`` can make it preemptive."""
    return all(callable(getattr(order, m, None)) for m in ("line", "levels", "first_pass"))


class _Rows:
    """The running jobs' lines and what the rules read, as arrays (one row per job)."""

    def __init__(self) -> None:
        self.version = -1
        self.seen = -1  # changes of the running set (``RunningSet.log``) synced with
        self.row: dict[str, int] = {}
        self.runs: list[Running | None] = []
        # a, b, cap, start, GPU milli, preemptible (0 for a dead row), checkpoint interval
        # (0: none), restart overhead, and when the thrash cap's window began to hold it (the
        # ``max_preemptions``-th latest preemption; -inf: fewer)
        self.cols = np.zeros((9, 64))
        self.dead = 0

    def sync(self, rs: RunningSet, order: RanksRunning, cap_n: int) -> None:
        if rs.version == self.version:
            return
        self.version = rs.version
        records, row, runs = rs.records, self.row, self.runs
        changes = rs.log_base + len(rs.log)
        if self.seen < rs.log_base:  # (first, or too far behind the log): every record
            for jid in row.keys() - records.keys():
                self._kill(row.pop(jid))
            todo: list[Running] = list(records.values())
        else:
            # Only the jobs whose records changed: the latest change of each; a record
            # added since, in the order they were added (the records' own order).
            todo, done = [], set()
            for r in reversed(rs.log[self.seen - rs.log_base :]):
                jid = r.job.id
                if jid in done:
                    continue
                done.add(jid)
                cur = records.get(jid)
                if cur is None:
                    i = row.pop(jid, None)
                    if i is not None:
                        self._kill(i)
                elif cur is r:
                    todo.append(r)
            todo.reverse()
        self.seen = changes
        for r in todo:
            i = row.get(r.job.id)
            if i is not None and runs[i] is r:
                continue
            if i is not None:  # restarted: a new record for the same job
                self._kill(i)
            self._append(r, order, cap_n)
        if self.dead > max(64, len(row)):
            live = [r for r in runs if r is not None]
            self.row, self.runs, self.dead = {}, [], 0
            self.cols = np.zeros((9, max(64, 2 * len(live))))
            for r in live:
                self._append(r, order, cap_n)

    def _append(self, r: Running, order: RanksRunning, cap_n: int) -> None:
        i = len(self.runs)
        if i == self.cols.shape[1]:
            self.cols = np.concatenate((self.cols, np.zeros_like(self.cols)), axis=1)
        a, b, cap = order.line(r)
        self.cols[:, i] = (
            a, b, cap, r.start, r.placement.gpu_milli, float(r.preemptible),
            r.job.checkpoint_interval or 0.0, r.overhead,
            r.preempted_at[-cap_n] if 0 < cap_n <= len(r.preempted_at) else -math.inf,
        )  # fmt: skip
        self.runs.append(r)
        self.row[r.job.id] = i

    def _kill(self, i: int) -> None:
        self.runs[i] = None
        self.cols[5, i] = 0.0
        self.dead += 1


class Counts:
    """How many of ``job``'s tasks the view can take now, kept as evictions and restorations
    change the nodes of one running job at a time."""

    def __init__(self, view: ClusterView, job: Job) -> None:
        self.view, self.task, self.job = view, job.task, job
        self.k = view.fit_counts(job.task, job.tasks)
        self.ok = view.task_mask(job.task)
        self.total = int(self.k.sum())

    def moved(self, r: Running) -> bool:
        """``r``'s nodes changed: recount them; whether the job fits now."""
        v, t, k = self.view, self.task, self.k
        for n in {tp.node for tp in r.placement.tasks}:
            c = 0
            if self.ok[n]:
                c = count_tasks(
                    t, v.gpu_free_milli[n], v.gpu_free_mem[n], int(v.free_cpu[n]),
                    int(v.free_mem[n]), self.job.tasks,
                )  # fmt: skip
            self.total += c - int(k[n])
            k[n] = c
        return self.total >= self.job.min_tasks


@register("preemption", "by-order")
class ByOrder:
    """Evict running jobs the queue order (LAS, SRTF) now ranks after the waiting job."""

    def __init__(self, config: PreemptionConfig | None = None, quota: Any = None) -> None:
        self.config = config if config is not None else PreemptionConfig(policy="by-order")
        if quota is not None:
            raise SpecError(
                "preemption/by-order: evicts by the queue order alone; with quotas use "
                "preemption/checkpoint-aware (reclaim follows the quotas)"
            )
        self.rows = _Rows()

    def bind(self, h: Handle) -> None:
        order = h.order
        if not ranks_running(order):
            raise SpecError(
                f"preemption/by-order: the queue order {type(order).__name__} does not rank "
                "running jobs (use queue/las or queue/srtf)"
            )
        self.h = h
        self.order: RanksRunning = order  # type: ignore[assignment]

    def preempt(
        self, job: Job, lane: Lane, rng: np.random.Generator, why: Reason, out: list[Decision]
    ) -> Decision | None:
        if not isinstance(why, NoCapacity):
            return None
        h, cfg, order, rows = self.h, self.config, self.order, self.rows
        now = h.now
        level = h.lanes.pending[job.id][0][0]
        rows.sync(h.running, order, cfg.max_preemptions)
        n = len(rows.runs)
        a, b, cap, start, milli, ok, interval, overhead, capped_at = rows.cols[:, :n]
        live = ok > 0  # preemptible and running
        lv = order.levels(np.clip(a + b * now, 0.0, cap))
        behind = live & (lv > level)
        wake = order.first_pass(a[live & ~behind], b[live & ~behind], level, now)
        young = behind & (now - start < cfg.min_runtime)
        if young.any():
            wake = min(wake, float(start[young].min()) + cfg.min_runtime)
        pick = behind & ~young
        if cfg.max_preemptions == 0:
            pick[:] = False  # (nothing may ever be evicted)
        else:
            # The thrash cap: max_preemptions within the last window (``preemption.capped``).
            held = pick & (capped_at > now - cfg.window)
            if held.any():
                pick &= ~held
                wake = min(wake, float(capped_at[held].min()) + cfg.window)
        if math.isfinite(wake) and wake > now:
            h.retry_at(wake, lane)
        idx = np.flatnonzero(pick)
        if not len(idx):
            return None
        t = job.task
        share = t.gpu_share_milli if t.gpus else 0
        view = h.view
        if share and int(view.node_free_milli.sum()) + milli[idx].sum() < job.min_tasks * share:
            return None
        # The latest class first, then the least work lost, then the latest started (the
        # work lost as ``Running.lost_gpu_seconds`` reckons it, for all rows at once).
        ran = np.maximum(0.0, now - start[idx])
        worked = np.maximum(0.0, ran - overhead[idx])
        iv = interval[idx]
        kept = np.where(iv > 0, np.floor(worked / np.where(iv > 0, iv, 1.0)) * iv, 0.0)
        lost = milli[idx] / 1000.0 * (ran - kept)
        idx = idx[np.lexsort((-start[idx], lost, -lv[idx]))]
        cands: list[Running] = []
        at: dict[str, float] = {}
        for i in idx.tolist():
            r = rows.runs[i]
            assert r is not None  # (a dead row is never preemptible)
            cands.append(r)
            at[r.job.id] = float(lv[i])
        if job.tasks > 1 and room_after_all(h, job, cands) < job.min_tasks:
            return None
        # Evict in that order until the job fits, then reprieve those not needed after all,
        # the earliest class (then the costliest) first. Counted as ``fit_counts`` counts, but
        # only on the nodes each eviction touches (a node's count depends on it alone).
        counts = Counts(view, job)
        evicted: list[Running] = []
        for r in cands:
            evict(h, r)
            evicted.append(r)
            if counts.moved(r):
                break
        else:
            for r in reversed(evicted):
                restore(h, r)
            return None
        for r in sorted(evicted, key=lambda r: (at[r.job.id], -r.lost_gpu_seconds(now), r.job.id)):
            restore(h, r)
            if not counts.moved(r):
                evict(h, r)
                counts.moved(r)
        victims = [r for r in evicted if r.job.id not in h.running.records]
        decision = h.place(job, lane, rng)
        if type(decision) is not Admit:  # fits() said it would fit: cannot happen
            raise AssertionError(f"job {job.id} fits after evictions but was not placed")
        for r in victims:
            out.append(
                Preempt(r.job, r.placement, job.id, "order", r.lost_gpu_seconds(now), r.kept(now))
            )
            h.evicted(r)
        return decision
