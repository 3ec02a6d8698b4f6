"""Fair-share state: what each group holds now and its decayed usage (``queue/drf``,
``queue/fair-share``), and the moving keys it gives the lanes (``seams.DynamicKeys``).

A group is a queue: the job's quota queue when there are quotas (``OrderContext.tenancy``),
else its ``queue`` name. ``Shares`` keeps, per group, the GPU (milli), CPU (milli) and memory
(MiB) its running jobs hold, and in ``usage`` mode the integral of its dominant share over
time, halved every ``half_life`` seconds. ``share(g)`` is the key fair sharing orders by
(lower goes first), divided by the group's weight. It is the one owner of this state: the
scheduler tells it of every start and end as it tells any ledger, and reads keys from it.

Keys: a lane's head is ordered by (priority, its group's share, then the rest of its static
key), so an ``online`` job never waits behind a ``normal`` one for fairness. Reasons: a job
that finds no room after a lower share's job started this cycle, or while a queue with a
lower share waits, is told ``FairShareWait``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from suanli.core.decisions import (
    Admit,
    Decision,
    FairShareWait,
    JobPlacement,
    NoCapacity,
    Reason,
    Skip,
)
from suanli.core.lanes import Lane, Lanes
from suanli.core.model import MILLI, Job
from suanli.core.tenancy import TenancySpec
from suanli.core.view import ClusterView


class Shares:
    """Per-group holdings and decayed usage, and the keys from them; see the module."""

    def __init__(
        self,
        mode: str,
        half_life: float,
        capacity: np.ndarray,
        tenancy: TenancySpec | None = None,
    ) -> None:
        self.mode = mode  # "drf" or "usage"
        self.half_life = half_life
        self.tenancy = tenancy
        self.inv_cap = np.where(capacity > 0, 1.0 / np.maximum(capacity, 1.0), 0.0)
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.weight: list[float] = []
        self.held = np.zeros((0, 3))
        self.decayed = np.zeros(0)
        self.clock = 0.0
        self.of_job: dict[str, tuple[int, JobPlacement]] = {}
        self._suspended: set[str] = set()
        self._groups: dict[tuple[str, str], int] = {}  # (queue, tenant) -> group
        self._took: int | None = None  # the group of this cycle's last admission

    @classmethod
    def of_view(
        cls, mode: str, half_life: float, view: ClusterView, tenancy: TenancySpec | None
    ) -> Shares:
        """Shares of ``view``'s capacity (GPUs, CPU, memory)."""
        caps = np.array(
            [view.total_gpus * MILLI, float(view.cap_cpu.sum()), float(view.cap_mem.sum())]
        )
        return cls(mode, half_life, caps, tenancy)

    # ---------------------------------------------------------------- groups and shares
    def group_named(self, name: str, weight: float = 1.0) -> int:
        """The index of group ``name``, added on first sight with ``weight``."""
        g = self.ids.get(name)
        if g is None:
            g = self.ids[name] = len(self.ids)
            self.names.append(name)
            self.weight.append(weight)
            self.held = np.vstack((self.held, np.zeros(3)))
            self.decayed = np.append(self.decayed, 0.0)
        return g

    def group(self, job: Job) -> int:
        """The group of ``job``: its quota queue (with its weight), or its queue name."""
        ck = (job.queue, job.tenant)
        g = self._groups.get(ck)
        if g is None:
            t = self.tenancy
            if t is not None:
                name = t.queue_of(job)
                weight = next(q.weight for q in t.queues if q.name == name)
                g = self.group_named(name, weight)
            else:
                g = self.group_named(job.queue)
            self._groups[ck] = g
        return g

    def share(self, g: int) -> float:
        """Group ``g``'s key: dominant share now (``drf``) or decayed usage, ÷ weight."""
        if self.mode == "drf":
            return float((self.held[g] * self.inv_cap).max()) / self.weight[g]
        return float(self.decayed[g]) / self.weight[g]

    def decay(self, now: float) -> None:
        """Advance every group's decayed usage to ``now`` (holdings constant since the last)."""
        dt = now - self.clock
        if self.mode != "usage" or dt <= 0 or not len(self.decayed):
            return
        self.clock = now
        h = self.half_life
        f = 0.5 ** (dt / h)
        dominant = (self.held * self.inv_cap).max(axis=1)
        self.decayed = self.decayed * f + dominant * (h / math.log(2)) * (1.0 - f)

    # ---------------------------------------------------------------- the ledger
    def started(self, job: Job, placement: JobPlacement, at: float) -> None:
        g = self.group(job)
        self.of_job[job.id] = (g, placement)
        self._add(g, placement, 1)

    def ended(self, job_id: str, at: float) -> None:
        self.decay(at)
        g, placement = self.of_job.pop(job_id)
        if job_id in self._suspended:
            self._suspended.discard(job_id)  # an eviction made real: already taken off
        else:
            self._add(g, placement, -1)

    def suspend(self, job_id: str) -> None:
        g, placement = self.of_job[job_id]
        self._suspended.add(job_id)
        self._add(g, placement, -1)

    def resume(self, job_id: str) -> None:
        g, placement = self.of_job[job_id]
        self._suspended.discard(job_id)
        self._add(g, placement, 1)

    def holds(self, job_id: str) -> bool:
        return job_id in self.of_job

    def _add(self, g: int, placement: JobPlacement, sign: int) -> None:
        held = self.held[g]
        for tp in placement.tasks:
            held[0] += sign * tp.gpu_milli * len(tp.gpus)
            held[1] += sign * tp.cpu_milli
            held[2] += sign * tp.memory_mib

    # ---------------------------------------------------------------- the keys
    def begin(self, now: float) -> None:
        self.decay(now)
        self._took = None

    def head_key(self, lane: Lane, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """A lane head's dynamic key: priority, then its group's share, then FIFO."""
        return (key[0], self.share(lane.group), *key[1:])

    def decided(self, lane: Lane, d: Decision) -> Decision:
        """After an admission this cycle, a lane of another group that finds no room is told
        that a lower (or equal) share went first."""
        if type(d) is Admit:
            self._took = lane.group
        elif (
            self._took is not None
            and self._took != lane.group
            and isinstance(d, Skip)
            and isinstance(d.reason, NoCapacity)
        ):
            return Skip(d.job, self._wait(d.reason, lane.group, self._took))
        return d

    def explain(self, lane: Lane, why: NoCapacity, lanes: Lanes) -> Reason:
        """The waiting queue with the lowest share, if lower than this lane's, goes first."""
        own = self.share(lane.group)
        ahead = min(
            (
                (self.share(other.group), other.group)
                for other in lanes.lanes
                if other.heap and other.group != lane.group
            ),
            default=None,
        )
        if ahead is not None and ahead[0] < own:
            return self._wait(why, lane.group, ahead[1])
        return why

    def _wait(self, why: NoCapacity, group: int, ahead: int) -> FairShareWait:
        return FairShareWait(
            why, self.names[group], self.share(group), self.names[ahead], self.share(ahead)
        )
