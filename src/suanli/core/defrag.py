"""preemption/defrag: when a job waits for room that is free but scattered, move
checkpointable work to make it whole, if the predicted gain exceeds the cost and the hour's
budget of moves allows.

It first preempts as ``preemption/checkpoint-aware`` does (priorities, reclaim). If that
cannot start the job, and the job waits for room (``NoCapacity``) while the cluster has as
much free as the job needs:

1. Candidates: running jobs with checkpoints (``Job.checkpoint_interval``), never of an
   online class (``online``: a service, which has no checkpoint to resume from), past their
   minimum runtime and under the thrash cap (``PreemptionConfig``), and not larger than the
   job waiting (moving a bigger one would need more room than it makes).
2. Nodes are emptied, what-if, the node with the fewest candidate GPUs first (nodes that hold
   anything that may not move are passed over), until the job fits. Every moved job must then
   fit what is left once the job has its place, or nothing moves.
3. Cost: per moved job, its GPUs × (its work since its last checkpoint + the restart
   overhead: checkpoint, transfer and restart). Gain: the waiting job's GPUs × how long it
   would wait otherwise, predicted from the running jobs' expected ends (the runtime
   estimator's durations; a job past its duration runs as long again as it has run): the
   room frees when enough of them end. It moves only when the gain exceeds the cost.
4. Budget: at most ``PreemptionConfig.defrag_moves_per_hour`` jobs moved in any hour.

A moved job is evicted (``Preempt`` of kind ``defrag``) and requeued, and a cycle is asked for
at once: it starts again in the room left, from its checkpoint, after the restart overhead.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from suanli.core.admission.quota import QuotaAdmission
from suanli.core.decisions import Admit, Decision, NoCapacity, Preempt, Reason
from suanli.core.eviction import CheckpointAware, evict, fits, restore
from suanli.core.gang import place_job
from suanli.core.lanes import Lane
from suanli.core.model import MILLI, Job
from suanli.core.preemption import PreemptionConfig, capped, min_runtime
from suanli.core.registry import register
from suanli.core.running import Running

HOUR = 3600.0
ONLINE = "online"


@register("preemption", "defrag")
class Defrag(CheckpointAware):
    """Preempt as checkpoint-aware does; then move checkpointable work to make scattered free
    room whole, within a budget of moves per hour, when the gain exceeds the cost."""

    def __init__(
        self, config: PreemptionConfig | None = None, quota: QuotaAdmission | None = None
    ) -> None:
        super().__init__(config, quota)
        self.moves: deque[float] = deque()
        """When each job moved in the last hour was moved."""

    def preempt(
        self, job: Job, lane: Lane, rng: np.random.Generator, why: Reason, out: list[Decision]
    ) -> Decision | None:
        done = super().preempt(job, lane, rng, why, out)
        if done is not None or not isinstance(why, NoCapacity) or not job.task.gpus:
            return done
        return self._defrag(job, lane, rng, out)

    def _defrag(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision | None:
        s, cfg, now = self.h, self.config, self.h.now
        while self.moves and self.moves[0] <= now - HOUR:
            self.moves.popleft()
        budget = int(cfg.defrag_moves_per_hour) - len(self.moves)
        view = s.view
        t = job.task
        need = job.min_tasks * t.gpu_share_milli
        if budget <= 0 or int(view.node_free_milli.sum()) < need:
            return None
        if self.quota is not None and not fits_quota(self.quota, job, lane):
            return None
        size = job.min_tasks * t.gpus
        movable: dict[int, list[Running]] = {}
        stuck: set[int] = set()
        for r in s.running.records.values():
            nodes = {tp.node for tp in r.placement.tasks}
            if self._movable(r, now, size):
                for n in nodes:
                    movable.setdefault(n, []).append(r)
            else:
                stuck |= nodes
        order = sorted((n for n in movable if n not in stuck),
                       key=lambda n: (sum(r.placement.gpu_milli for r in movable[n]), n))  # fmt: skip
        moved: dict[str, Running] = {}
        for n in order:
            for r in movable[n]:
                if r.job.id not in moved and len(moved) < budget:
                    evict(s, r)
                    moved[r.job.id] = r
            if fits(s, None, job, lane) or len(moved) >= budget:
                break
        if not moved or not fits(s, None, job, lane):
            return self._undo(moved)
        cost = sum(r.lost_gpu_seconds(now) + r.placement.gpu_milli / MILLI * cfg.restart_overhead
                   for r in moved.values())  # fmt: skip
        for r in reversed(list(moved.values())):
            restore(s, r)
        gain = size * self._predicted_wait(job)
        if not gain > cost:
            return None
        for r in moved.values():
            evict(s, r)
        if not self._all_fit_again(job, list(moved.values())):
            return self._undo(moved)
        decision = s.place(job, lane, rng)
        if type(decision) is not Admit:  # fits() said it would fit: cannot happen
            raise AssertionError(f"job {job.id} fits after moves but was not placed")
        for r in moved.values():
            out.append(Preempt(r.job, r.placement, job.id, "defrag", r.lost_gpu_seconds(now),
                               r.kept(now)))  # fmt: skip
            s.evicted(r)
            self.moves.append(now)
        s.retry_at(now, lane)  # a cycle again now: the moved jobs start in the room left
        return decision

    def _movable(self, r: Running, now: float, size: int) -> bool:
        j = r.job
        if not j.checkpoint_interval or j.priority_class == ONLINE:
            return False
        if j.task.gpus * j.tasks > size:
            return False
        cfg = self.config
        return now - r.start >= min_runtime(cfg, False) and not capped(r.preempted_at, now, cfg)

    def _undo(self, moved: dict[str, Running]) -> None:
        """Put every job evicted for the what-if back."""
        for r in reversed(list(moved.values())):
            restore(self.h, r)
        return None

    def _all_fit_again(self, job: Job, moved: list[Running]) -> bool:
        """Whether, once ``job`` has its place, every moved job fits what is left (a what-if
        on the view: nothing stays allocated; deterministic, whatever the placement)."""
        view = self.h.view
        what_if = np.random.default_rng(0)
        placed = []
        ok = True
        for j in [job, *sorted((r.job for r in moved), key=lambda j: -j.task.gpus * j.tasks)]:
            p, _, _ = place_job(view, j, self.h.placement, what_if)
            if p is None:
                ok = False
                break
            placed.append(p)
        for p in reversed(placed):
            for tp in p.tasks:
                view.release(tp)
        return ok

    def _predicted_wait(self, job: Job) -> float:
        """Seconds until ``job`` would fit with no move: running jobs end at their start plus
        their restart overhead and expected duration, in that order; one that has run past
        that is expected to run as long again as it has (runtimes are heavy-tailed)."""
        s = self.h
        now = s.now
        view = s.view
        ends = sorted(((_expected_end(r, s.runtime.duration(r.job), now), r.job.id, r)
                       for r in s.running.records.values()), key=lambda e: (e[0], e[1]))  # fmt: skip
        released = []
        wait = float("inf")
        for end, _, r in ends:
            for tp in r.placement.tasks:
                view.release(tp)
            released.append(r)
            if int(view.fit_counts(job.task, job.tasks).sum()) >= job.min_tasks:
                wait = end - now
                break
        for r in reversed(released):
            for tp in r.placement.tasks:
                view.allocate(tp)
        return wait


def _expected_end(r: Running, duration: float, now: float) -> float:
    """``r``'s start, restart overhead and expected duration; past that, as long again as it
    has run."""
    end = r.start + r.overhead + duration
    return end if end > now else now + (now - r.start)


def fits_quota(quota: QuotaAdmission, job: Job, lane: Lane) -> bool:
    """Whether ``job``'s quota lets it start now (moving work makes room, never quota)."""
    over, _ = quota.allowed(job, quota.lane_queue(lane))
    return over is None
