"""admission/user-limit: at most N GPUs, or N running jobs, per user or per organisation path.

Slurm's ``MaxTRESPerUser`` and ``MaxJobsPerUser`` (on an association or a QOS) in suanli's
terms. Configured in the quota file, beside the queues::

    admission:
      user-limit:
        - max_gpus: 16          # every user alone: at most 16 GPUs at once
          max_jobs: 8           #   and 8 running jobs
        - org: ai-lab/vision    # the subtree ai-lab/vision as a whole
          per: org
          max_gpus: 48

Each entry governs the jobs whose tenant is ``org`` or lies below it (no ``org``: every
job); ``per: user`` (the default) counts each user's jobs alone, ``per: org`` all of the
subtree's jobs together. ``max_gpus`` is in GPUs (fractions of a GPU count as such), and
``max_jobs`` counts running jobs. A job is governed by every entry that matches it, and
starts only if each of them has room for its whole demand. A job's user is ``Job.user`` (the
trace's user where it records one, such as ``philly-users``; the token's user live), or its
tenant when it has none.

A lane whose head is over a limit waits until a job counted by that limit ends (finished or
preempted); jobs of different users (or of different limits) never share a lane, so one
user at their limit never holds back another's job. A job that asks more GPUs than a limit
allows could never start, and is refused up front (``refusal``), in the simulator and at
live submission alike.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.core.decisions import Decision, JobPlacement, NoCapacity, Skip
from suanli.core.lanes import Lane
from suanli.core.model import MILLI, Job, KeyPathError
from suanli.core.registry import register
from suanli.core.seams import Handle, OrderContext
from suanli.core.view import ClusterView

_KEYS = ("org", "per", "max_gpus", "max_jobs")
_PER = ("user", "org")


@dataclass(frozen=True, slots=True)
class UserLimit:
    """One limit: ``org`` subtree (``""``: everyone), counted ``per`` user or as a whole,
    with at most ``max_gpu_milli`` milli-GPU and ``max_jobs`` running jobs (None: no cap)."""

    org: str = ""
    per: str = "user"
    max_gpu_milli: int | None = None
    max_jobs: int | None = None

    def governs(self, tenant: str) -> bool:
        o = self.org
        return not o or tenant == o or tenant.startswith(o + "/")

    def who(self, job: Job) -> str:
        if self.per == "org":
            return f"org {self.org}" if self.org else "everyone"
        return f"user {job.user or job.tenant}"


@dataclass(frozen=True, slots=True)
class UserLimitReached:
    """The job's user (or organisation) holds ``held`` of at most ``limit`` ``resource``
    (GPUs or running jobs) and the job needs ``need`` more."""

    who: str
    resource: str
    need: float
    held: float
    limit: float

    def __str__(self) -> str:
        return (
            f"per-user limit: {self.who} holds {self.held:g} of at most {self.limit:g} "
            f"{self.resource}, the job needs {self.need:g} more"
        )


def parse_limits(raw: Any, where: str = "") -> tuple[UserLimit, ...]:
    """The limits of the ``admission.user-limit`` section (a list of mappings); a
    ``KeyPathError`` locates the first fault."""
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes) or not raw:
        raise KeyPathError("", "must be a non-empty list of limits", where)
    out = []
    for i, entry in enumerate(raw):
        at = f"[{i}]"
        if not isinstance(entry, Mapping):
            raise KeyPathError(at, "must be a mapping (org, per, max_gpus, max_jobs)", where)
        for k in entry:
            if k not in _KEYS:
                raise KeyPathError(f"{at}.{k}", f"unknown key (known: {', '.join(_KEYS)})", where)
        org = entry.get("org", "")
        if not isinstance(org, str):
            raise KeyPathError(f"{at}.org", "must be an organisation path", where)
        per = entry.get("per", "user")
        if per not in _PER:
            raise KeyPathError(f"{at}.per", f"must be user or org, got {per!r}", where)
        gpus = entry.get("max_gpus")
        milli = None
        if gpus is not None:
            if (
                isinstance(gpus, bool)
                or not isinstance(gpus, int | float)
                or not (math.isfinite(gpus) and gpus >= 0)
            ):
                raise KeyPathError(f"{at}.max_gpus", f"must be a number >= 0, got {gpus!r}", where)
            milli = round(gpus * MILLI)
            if abs(milli - gpus * MILLI) > 1e-6:
                raise KeyPathError(f"{at}.max_gpus", f"steps of 0.001 GPU, got {gpus!r}", where)
        jobs = entry.get("max_jobs")
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise KeyPathError(
                f"{at}.max_jobs", f"must be a whole number >= 1, got {jobs!r}", where
            )
        if milli is None and jobs is None:
            raise KeyPathError(at, "needs max_gpus, max_jobs or both", where)
        if per == "org" and not org:
            raise KeyPathError(f"{at}.per", "per: org needs an org", where)
        out.append(UserLimit(org.strip("/"), per, milli, jobs))
    return tuple(out)


def _gpu_milli(job: Job) -> int:
    t = job.task
    return job.tasks * t.gpu_share_milli if t.gpus else 0


@register("admission", "user-limit")
class UserLimitAdmission:
    """Per-user limits: at most N GPUs or N running jobs per user or organisation path (Slurm's MaxTRESPerUser, MaxJobsPerUser)."""

    def __init__(self, config: Any = None, limits: Sequence[UserLimit] = ()) -> None:
        self.limits = tuple(limits) if config is None else parse_limits(config)
        self._keys: dict[tuple[str, str], tuple[tuple[int, str], ...]] = {}
        self.held: dict[tuple[int, str], list[int]] = {}
        """(limit, user or "") -> [milli-GPU, running jobs] held now."""
        self._of_job: dict[str, tuple[tuple[tuple[int, str], ...], int]] = {}
        self._parked: dict[tuple[int, str], set[int]] = {}  # limit key -> lanes waiting on it

    def bind(self, h: Handle, slot: int) -> None:
        self.h = h

    def governing(self, job: Job) -> tuple[tuple[int, str], ...]:
        """The (limit, user) counts that govern ``job`` (the same for every job of a user)."""
        ck = (job.tenant, job.user)
        keys = self._keys.get(ck)
        if keys is None:
            who = job.user or job.tenant
            keys = self._keys[ck] = tuple(
                (i, who if lim.per == "user" else "")
                for i, lim in enumerate(self.limits)
                if lim.governs(job.tenant)
            )
        return keys

    def arrive(self, job: Job, at: float) -> Decision | None:
        return None

    def lane_key(self, job: Job) -> Hashable:
        return self.governing(job)

    def begin(self) -> None:
        pass

    def check(self, job: Job, lane: Lane) -> Skip | np.ndarray | None:
        milli = _gpu_milli(job)
        for key in self.governing(job):
            lim = self.limits[key[0]]
            held = self.held.get(key, (0, 0))
            why = None
            if lim.max_gpu_milli is not None and held[0] + milli > lim.max_gpu_milli:
                why = UserLimitReached(
                    lim.who(job), "GPUs", milli / MILLI, held[0] / MILLI, lim.max_gpu_milli / MILLI
                )
            elif lim.max_jobs is not None and held[1] + 1 > lim.max_jobs:
                why = UserLimitReached(lim.who(job), "running jobs", 1, held[1], lim.max_jobs)
            if why is not None:
                self._parked.setdefault(key, set()).add(lane.index)
                return self.h.block(job, lane, why)
        return None

    def no_room(self, job: Job, lane: Lane, why: NoCapacity) -> Skip:
        raise AssertionError("admission/user-limit gives no node mask")

    def refusal(self, job: Job, view: ClusterView, ctx: OrderContext) -> str | None:
        milli = _gpu_milli(job)
        for key in self.governing(job):
            lim = self.limits[key[0]]
            if lim.max_gpu_milli is not None and milli > lim.max_gpu_milli:
                return (
                    f"{lim.who(job)} may hold at most {lim.max_gpu_milli / MILLI:g} GPUs "
                    f"(per-user limit), the job asks {milli / MILLI:g}"
                )
        return None

    # ---------------------------------------------------------------- the ledger
    def started(self, job: Job, placement: JobPlacement, at: float) -> None:
        keys = self.governing(job)
        if not keys:
            return
        milli = placement.gpu_milli
        for key in keys:
            held = self.held.setdefault(key, [0, 0])
            held[0] += milli
            held[1] += 1
        self._of_job[job.id] = (keys, milli)

    def ended(self, job_id: str, at: float) -> None:
        entry = self._of_job.pop(job_id, None)
        if entry is None:
            return
        keys, milli = entry
        lane_list = self.h.lanes.lanes
        for key in keys:
            held = self.held[key]
            held[0] -= milli
            held[1] -= 1
            for i in self._parked.pop(key, ()):
                self.h.unblock(lane_list[i])

    def suspend(self, job_id: str) -> None:
        pass  # evicting others gives a limit no room: a preemptor tries only for capacity

    def resume(self, job_id: str) -> None:
        pass

    def holds(self, job_id: str) -> bool:
        return job_id in self._of_job
