"""The running set: what the scheduler keeps about running jobs, for the plugins that need it.

Preemption chooses its victims among running jobs and backfill plans around their expected
ends; both read the running set through the scheduler's handle. It is kept only when a plugin
asks for it (``RunningSet.enabled``), so a scheduler without preemption or backfill pays
nothing per start. Its members:

* ``records``: job id -> ``Running`` (placement, start, priority, whether it may be evicted,
  its preemption history and this attempt's restart overhead);
* ``evictable``: priority value -> ids of running preemptible jobs of that priority;
* ``ended``: how many running jobs ended or were evicted so far (a version number: a plan
  made when it had another value may rest on jobs that are gone);
* ``log``: the records added or dropped since ``log_base`` changes, in order (so that a
  cache of the records syncs with what changed, not with every record; cleared once long,
  when a cache behind it syncs in full);
* ``preempted_at``: job id -> when it was preempted before, over all attempts (kept whether
  or not the set is enabled: quotas read it for the thrash cap);
* ``attained``: job id -> GPU-seconds it held in its earlier (evicted) attempts, and
  ``worked``: job id -> seconds of its work those attempts' checkpoints kept: what an order by
  attained service (Tiresias' LAS) or by remaining work (SRTF) reads for a requeued job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from suanli.core.decisions import JobPlacement
from suanli.core.model import Job, PriorityClass


@dataclass(slots=True)
class Running:
    """What the scheduler keeps about a running job, for choosing victims and planning."""

    job: Job
    placement: JobPlacement
    start: float
    priority: int
    preemptible: bool
    preempted_at: list[float] = field(default_factory=list)
    """When this job was preempted before (all attempts)."""
    overhead: float = 0.0
    """Restart overhead at the start of this attempt (a resumed job's), during which no work
    is done."""

    def kept(self, now: float) -> float:
        """Seconds of this attempt's running that its last checkpoint saved (checkpoints
        count working time, after the restart overhead; 0 without checkpoints)."""
        interval = self.job.checkpoint_interval
        if not interval:
            return 0.0
        worked = max(0.0, max(0.0, now - self.start) - self.overhead)
        return math.floor(worked / interval) * interval

    def since_checkpoint(self, now: float) -> float:
        """Seconds of this attempt an eviction now would waste: all but the work saved at its
        last checkpoint."""
        return max(0.0, now - self.start) - self.kept(now)

    def lost_gpu_seconds(self, now: float) -> float:
        """GPU-seconds of work an eviction now would destroy."""
        return self.placement.gpu_milli / 1000.0 * self.since_checkpoint(now)


class RunningSet:
    """See the module docstring."""

    def __init__(self, enabled: bool, restart_overhead: float = 0.0) -> None:
        self.enabled = enabled
        self.restart_overhead = restart_overhead
        """Charged at the start of a resumed attempt (one with a preemption before it)."""
        self.records: dict[str, Running] = {}
        self.evictable: dict[int, set[str]] = {}
        self.ended = 0
        self.preempted_at: dict[str, list[float]] = {}
        self.attained: dict[str, float] = {}
        self.worked: dict[str, float] = {}
        self.resumed: set[str] = set()
        """Jobs requeued after the hardware under them failed (``interrupted``): their next
        attempt pays the restart overhead, as a preempted job's does."""
        self.version = 0
        """Moves whenever a record is added or dropped (a cache of the records is stale)."""
        self.log: list[Running] = []
        self.log_base = 0
        """Changes before ``log``'s first (the count of changes is ``log_base + len(log)``)."""

    def __contains__(self, job_id: str) -> bool:
        return job_id in self.records

    def start(
        self, job: Job, placement: JobPlacement, at: float, priority: int, pc: PriorityClass | None
    ) -> Running:
        """``job`` runs on ``placement`` since ``at``: its record."""
        history = self.preempted_at.get(job.id, [])
        r = Running(
            job,
            placement,
            at,
            priority,
            pc.preemptible if pc is not None else False,
            history,
            self.restart_overhead if history or job.id in self.resumed else 0.0,
        )
        self.add(r)
        return r

    def _changed(self, r: Running) -> None:
        self.version += 1
        log = self.log
        log.append(r)
        if len(log) > 4 * len(self.records) + 4096:
            self.log_base += len(log)
            self.log = []

    def add(self, r: Running) -> None:
        self._changed(r)
        self.records[r.job.id] = r
        if r.preemptible:
            self.evictable.setdefault(r.priority, set()).add(r.job.id)

    def drop(self, r: Running) -> None:
        self._changed(r)
        del self.records[r.job.id]
        if r.preemptible:
            self.evictable[r.priority].discard(r.job.id)

    def finished(self, job_id: str) -> None:
        """``job_id`` ended (or, for a job it never held, was released): one more end."""
        self.ended += 1
        r = self.records.get(job_id)
        if r is not None:
            self.drop(r)

    def interrupted(self, job_id: str, now: float, failed_at: float) -> None:
        """``job_id``'s attempt was lost to a hardware failure at ``failed_at``, found at
        ``now``: one more end, its GPU-seconds held until ``now`` count as attained service
        and the work its checkpoints saved before ``failed_at`` as kept. It is not a
        preemption (the thrash cap does not count it), but its next attempt pays the restart
        overhead."""
        self.ended += 1
        self.resumed.add(job_id)
        r = self.records.get(job_id)
        if r is None:
            return
        self.drop(r)
        held = r.placement.gpu_milli / 1000.0 * max(0.0, now - r.start)
        self.attained[job_id] = self.attained.get(job_id, 0.0) + held
        self.worked[job_id] = self.worked.get(job_id, 0.0) + r.kept(max(r.start, failed_at))

    def evicted(self, r: Running, now: float) -> None:
        """``r`` was evicted at ``now`` (its record was dropped by the what-if that chose
        it): its history grows by one."""
        self.ended += 1
        jid = r.job.id
        self.preempted_at.setdefault(jid, []).append(now)
        held = r.placement.gpu_milli / 1000.0 * max(0.0, now - r.start)
        self.attained[jid] = self.attained.get(jid, 0.0) + held
        self.worked[jid] = self.worked.get(jid, 0.0) + r.kept(now)
