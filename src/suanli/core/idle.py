"""Idle-GPU detection and reclaim: a task that holds GPUs and keeps them nearly idle.

A job is *idle* once its GPU duty (its busy share of the GPUs it holds: sampled by NVML live,
the job's duty in the simulator) has stayed under ``threshold`` for ``window`` seconds. An
idle job is flagged (reported, priced as waste) and its owner warned at once. If it is still
idle ``grace`` seconds after the warning, it is reclaimed by the policy's ``action``:

* ``share``: its GPUs take other work beside it (a co-located service replica);
* ``shrink``: an elastic job is resized to its minimum workers (one that is not elastic is
  shared instead);
* ``preempt``: it is stopped with its checkpoint and requeued behind the jobs waiting.

Never reclaimed, only flagged: an online job (a service replica) and a job that carries one
of the ``protected`` labels (interactive sessions and debugging by default). A duty back at
or above the threshold clears the flag. ``IdleTracker`` is the state machine; it reads no
clock: the caller passes each observation's time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from suanli.core.model import SpecError

ACTIONS = ("share", "shrink", "preempt")


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    """When a job is idle and what is done about it (see the module docstring)."""

    threshold: float = 0.05
    window: float = 1800.0
    grace: float = 600.0
    action: str = "preempt"
    protected: frozenset[str] = frozenset({"interactive", "debugging"})

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise SpecError(f"idle threshold must be in (0, 1], got {self.threshold}")
        if not (self.window >= 0 and self.grace >= 0):
            raise SpecError("idle window and grace must be >= 0 s")
        if self.action not in ACTIONS:
            raise SpecError(f"idle action {self.action!r}: one of {', '.join(ACTIONS)}")


class Verdict(enum.Enum):
    """What one observation means for a job."""

    BUSY = "busy"  # not idle (or no longer)
    BELOW = "below"  # under the threshold, not yet for the whole window
    WARN = "warn"  # idle for the window: flagged, owner warned (once)
    IDLE = "idle"  # flagged, warned, still in its grace period
    RECLAIM = "reclaim"  # idle past the grace period: reclaim it (once)
    EXEMPT = "exempt"  # idle, flagged, but online or protected: never reclaimed


@dataclass(slots=True)
class _State:
    below_since: float
    warned_at: float | None = None
    reclaimed: bool = False


@dataclass(slots=True)
class IdleTracker:
    """Per job: since when it has been below the threshold, whether it was warned and
    reclaimed. ``observe`` once per sample; ``forget`` when the job ends."""

    policy: IdlePolicy
    _jobs: dict[str, _State] = field(default_factory=dict)

    def exempt(self, online: bool, labels: Iterable[str]) -> bool:
        """Whether a job is never reclaimed: online, or carrying a protected label."""
        return online or not self.policy.protected.isdisjoint(labels)

    def observe(
        self,
        job_id: str,
        now: float,
        duty: float,
        *,
        online: bool = False,
        labels: Iterable[str] = (),
    ) -> Verdict:
        p = self.policy
        if duty >= p.threshold:
            self._jobs.pop(job_id, None)
            return Verdict.BUSY
        st = self._jobs.get(job_id)
        if st is None:
            st = self._jobs[job_id] = _State(now)
        if now - st.below_since < p.window:
            return Verdict.BELOW
        if self.exempt(online, labels):
            return Verdict.EXEMPT
        if st.warned_at is None:
            st.warned_at = now
            return Verdict.WARN
        if st.reclaimed:
            return Verdict.IDLE
        if now - st.warned_at >= p.grace:
            st.reclaimed = True
            return Verdict.RECLAIM
        return Verdict.IDLE

    def flagged(self, job_id: str, now: float) -> bool:
        """Whether ``job_id`` has been idle for the whole window by ``now``."""
        st = self._jobs.get(job_id)
        return st is not None and now - st.below_since >= self.policy.window

    def forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
