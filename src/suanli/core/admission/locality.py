"""admission/locality: a gang that no single NVLink domain (or rack) can hold now waits for
one, up to ``max_wait_s`` from its submission, then takes whatever fits, as Slurm's
``--switches=N@max-time`` waits for few enough leaf switches. Default 300 s: Slurm's
``SchedulerParameters=max_switch_wait`` default (slurm.conf).

The level it waits for is the lowest that could ever hold the gang: one NVLink domain if the
largest domain has as many GPUs of the cluster's as the gang asks, else one rack, else none
(it never waits). It does not wait while the gang does not fit the cluster at all (capacity
is the reason then), nor for a job of one task (one node holds it). A lane it holds back is
tried again when any job ends, and at the end of the wait. Paired with
``placement/topology``, which takes the domain or rack once one can hold the gang.

Configured in the quota file's ``admission:`` section (``locality: {max_wait_s: 300}``) or
``simulate(admission={"locality": {"max_wait_s": 300}})``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.core.decisions import Decision, JobPlacement, NoCapacity, Skip
from suanli.core.lanes import Lane
from suanli.core.model import Job, KeyPathError
from suanli.core.registry import register
from suanli.core.seams import Handle, OrderContext
from suanli.core.view import ClusterView

_KEYS = ("max_wait_s",)
MAX_WAIT_S = 300.0
"""Slurm's ``max_switch_wait`` default."""


@dataclass(frozen=True, slots=True)
class WaitingForLocality:
    """The gang waits for one ``level`` (``NVLink domain`` or ``rack``) to hold it, until
    ``until`` (then it takes whatever fits)."""

    level: str
    until: float

    def __str__(self) -> str:
        return (f"waiting for one {self.level} to hold the gang (none can now; it takes "
                f"whatever fits from t={self.until:,.0f} s)")  # fmt: skip


def parse_wait(raw: Any, where: str = "") -> float:
    if not isinstance(raw, Mapping):
        raise KeyPathError("", "must be a mapping (max_wait_s)", where)
    for k in raw:
        if k not in _KEYS:
            raise KeyPathError(k, f"unknown key (known: {', '.join(_KEYS)})", where)
    v = raw.get("max_wait_s", MAX_WAIT_S)
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
        raise KeyPathError("max_wait_s", f"must be a number of seconds >= 0, got {v!r}", where)
    return float(v)


@register("admission", "locality")
class LocalityAdmission:
    """A gang waits, up to max_wait_s, for one NVLink domain or rack to hold it (Slurm's --switches=N@max-time)."""

    def __init__(self, config: Any = None, max_wait_s: float = MAX_WAIT_S) -> None:
        self.max_wait_s = parse_wait(config) if config is not None else max_wait_s
        self._parked: set[int] = set()
        self._levels: list[tuple[str, np.ndarray, np.ndarray]] = []

    def bind(self, h: Handle, slot: int) -> None:
        self.h = h
        v = h.view
        # Each level's groups and the GPUs each group has in all.
        for name, groups in (("NVLink domain", v.node_domain), ("rack", v.node_rack)):
            self._levels.append((name, groups, np.bincount(groups, weights=v.node_gpus)))

    def arrive(self, job: Job, at: float) -> Decision | None:
        return None

    def lane_key(self, job: Job) -> Hashable:
        return ()

    def begin(self) -> None:
        pass

    def check(self, job: Job, lane: Lane) -> Skip | np.ndarray | None:
        t = job.task
        until = job.submit + self.max_wait_s
        if job.tasks == 1 or not t.gpus or self.h.now >= until:
            return None
        need = job.min_tasks
        gpus = need * t.gpus
        level = next(((name, groups) for name, groups, cap in self._levels if cap.max() >= gpus),
                     None)  # fmt: skip
        if level is None:
            return None  # no domain or rack could ever hold it
        k = self.h.view.fit_counts(t, job.tasks)
        if int(k.sum()) < need or int(k.max(initial=0)) >= need:
            return None  # it does not fit at all (capacity says why), or one node holds it
        if (np.bincount(level[1], weights=k) >= need).any():
            return None
        self._parked.add(lane.index)
        self.h.retry_at(until, lane)
        return self.h.block(job, lane, WaitingForLocality(level[0], until))

    def no_room(self, job: Job, lane: Lane, why: NoCapacity) -> Skip:
        raise AssertionError("admission/locality gives no node mask")

    def refusal(self, job: Job, view: ClusterView, ctx: OrderContext) -> str | None:
        return None

    # ---------------------------------------------------------------- the ledger
    def started(self, job: Job, placement: JobPlacement, at: float) -> None:
        pass

    def ended(self, job_id: str, at: float) -> None:
        if self._parked:
            lanes = self.h.lanes.lanes
            for i in self._parked:
                self.h.unblock(lanes[i])
            self._parked.clear()

    def suspend(self, job_id: str) -> None:
        pass

    def resume(self, job_id: str) -> None:
        pass

    def holds(self, job_id: str) -> bool:
        return False
