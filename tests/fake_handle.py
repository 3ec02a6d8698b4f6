"""A hand-built ``seams.Handle``: what a plugin sees of the scheduler, without a scheduler.

Plugins are tested alone against it: it holds a real view, shape table, pending lanes and
running set (plain data a test sets up), and records every action a plugin takes instead of
running a cycle: lanes activated, blocked and let go, timed retries, evictions. ``place``
starts a job with ``gang.place_job`` alone (no admission checks), as the scheduler's
``place`` would once the checks pass; ``try_start`` is ``place``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from suanli.core.decisions import Admit, Decision, JobPlacement, Reason, Skip
from suanli.core.gang import place_job
from suanli.core.lanes import Lane, Lanes
from suanli.core.model import ClusterSpec, Job
from suanli.core.registry import create
from suanli.core.running import Running, RunningSet
from suanli.core.seams import Ledger, OrderContext, Placement
from suanli.core.shapes import ShapeTable
from suanli.core.view import ClusterView


class FakeHandle:
    """See the module docstring. ``now`` is set by the test."""

    def __init__(
        self,
        cluster: ClusterSpec,
        ctx: OrderContext | None = None,
        placement: Placement | None = None,
        ledgers: tuple[Ledger, ...] = (),
        keep_order: bool = False,
        restart_overhead: float = 0.0,
    ) -> None:
        self.view = ClusterView(cluster)
        self.ctx = ctx or OrderContext()
        self.placement = placement if placement is not None else create("placement", "first-fit")
        self.table = ShapeTable(self.view)
        self.lanes = Lanes(self.table, keep_order)
        self.running = RunningSet(True, restart_overhead)
        self.ledgers = ledgers
        self.now = 0.0
        self.activated: list[int] = []
        self.blocked: list[tuple[str, Reason]] = []
        self.unblocked: list[tuple[int, bool]] = []
        self.retries: list[tuple[float, int]] = []
        self.evictions: list[str] = []

    # ------------------------------------------------------------------ set-up
    def pend(self, job: Job, key: Any = None, keys: tuple[Any, ...] = (), group: int = 0) -> Lane:
        """``job`` waits in the lane of its shape, ``keys`` and ``group``."""
        sid = self.table.id_of((job.task, job.tasks, job.min_tasks))
        lane = self.lanes.lane_for(sid, group, keys)
        self.lanes.push(job, key if key is not None else (job.submit, job.id), lane)
        return lane

    def run(self, job: Job, node: int, gpus: tuple[int, ...], at: float = 0.0) -> Running:
        """``job`` (one task) runs on ``node``/``gpus`` since ``at``, told to every ledger."""
        tp = self.view.placement_for(node, np.array(gpus, dtype=np.int64), job.task)
        self.view.allocate(tp)
        p = JobPlacement.of((tp,))
        for ledger in self.ledgers:
            ledger.started(job, p, at)
        pc = self.ctx.priority_classes.get(job.priority_class)
        return self.running.start(job, p, at, self.ctx.priority(job), pc)

    # ------------------------------------------------------------------ the handle
    def activate(self, lane: Lane) -> None:
        self.activated.append(lane.index)

    def block(self, job: Job, lane: Lane, why: Reason) -> Skip:
        lane.blocked = why
        lane.skipped = job.id
        self.blocked.append((job.id, why))
        return Skip(job, why)

    def unblock(self, lane: Lane, retry: bool = False) -> None:
        lane.blocked = None
        if retry:
            lane.skipped = None
        self.unblocked.append((lane.index, retry))

    def retry_at(self, t: float, lane: Lane) -> None:
        self.retries.append((t, lane.index))

    def place(self, job: Job, lane: Lane, rng: np.random.Generator) -> Decision:
        p, reason, _ = place_job(self.view, job, self.placement, rng)
        if p is None:
            assert reason is not None
            return Skip(job, reason)
        self.lanes.take(job, lane)
        for ledger in self.ledgers:
            ledger.started(job, p, self.now)
        pc = self.ctx.priority_classes.get(job.priority_class)
        self.running.start(job, p, self.now, self.ctx.priority(job), pc)
        return Admit(job, p)

    def try_start(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision:
        return self.place(job, lane, rng)

    def evicted(self, r: Running) -> None:
        self.running.evicted(r, self.now)
        for ledger in self.ledgers:
            ledger.ended(r.job.id, self.now)
        self.evictions.append(r.job.id)
