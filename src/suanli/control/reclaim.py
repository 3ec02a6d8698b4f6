"""Idle-GPU detection live: the core's ``IdleTracker`` fed with the sampled utilisation.

``IdleWatch.tick`` (once per pass of the scheduler loop) reads the GPU samples the sampler
(``suanli.control.sampler``) stored since the last pass, one reading per attempt and sampler
pass (the mean over the attempt's GPUs, of what it holds: its duty), and gives each running
attempt's readings to the tracker, at the time each was read. Then, by the tracker's verdict:

- ``WARN`` (below the threshold for the whole window): the job's history gets an
  ``idle-warning`` event, which its owner sees in ``suanli show``: its duty, the threshold,
  the window and when it will be reclaimed unless its duty rises;
- ``EXEMPT`` (as idle, but online or carrying a protected label): an ``idle`` event, once,
  saying it is idle and will not be reclaimed, and why;
- ``RECLAIM`` (still idle ``grace`` seconds after the warning): the attempt is handed back
  to the loop, which reclaims it by the policy's action (``Controller._reclaim_idle``) once
  some job waits, if it is still idle then.

``IdleReclaim`` is the loop's half of it (a part of ``suanli.control.loop.Controller``): it
feeds the watch each pass and reclaims what is due.

``flagged`` is what ``suanli_job_gpu_idle`` exports: 1 for a running job idle for the whole
window (warned, exempt or in its grace period), 0 for one that is not. Attempts are tracked
by ``(job, attempt)``: a requeued job starts afresh. Without samples (no NVML, sampling off)
nothing is ever idle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from suanli.backends.base import Outcome
from suanli.control.attempts import LiveAttempt, to_ms
from suanli.core.idle import IdlePolicy, IdleTracker, Verdict
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import utilisation as su

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control.reclaim")


@dataclass(frozen=True, slots=True)
class Flag:
    """A running job's idle flag, for ``/metrics``."""

    queue: str
    tenant: str
    idle: bool


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


def _iso(seconds: float) -> str:
    t = datetime.fromtimestamp(seconds, UTC)
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


class IdleWatch:
    """See the module docstring. One thread (the scheduler loop's) calls ``tick``."""

    def __init__(self, store: Store, policy: IdlePolicy) -> None:
        self.store = store
        self.policy = policy
        self.tracker = IdleTracker(policy)
        self.after: int | None = None
        self.noted: set[tuple[str, int]] = set()  # exempt attempts whose `idle` event is in
        self.flags: dict[str, Flag] = {}
        self.keys: set[str] = set()  # the attempts the tracker may hold

    @staticmethod
    def _key(job_id: str, attempt: int) -> str:
        return f"{job_id}/{attempt}"

    def exempt_why(self, live: LiveAttempt) -> str | None:
        """Why ``live`` is never reclaimed (None: it may be)."""
        if live.job.priority_class == "online":
            return "an online job"
        hit = sorted(self.policy.protected & set(live.spec.labels))
        return f"labelled {', '.join(hit)}" if hit else None

    def flagged(self, live: LiveAttempt, now: float) -> bool:
        """Whether ``live`` is idle now (for the whole window, by its last reading)."""
        return self.tracker.flagged(self._key(*live.key), now)

    def tick(self, now: float, live: Mapping[tuple[str, int], LiveAttempt]) -> list[LiveAttempt]:
        """Feed the new readings to the tracker; returns the attempts to reclaim now."""
        if self.after is None:
            self.after = su.last_sample_id(self.store)
        readings = su.readings_after(self.store, self.after)
        reclaim: list[LiveAttempt] = []
        p = self.policy
        for r in readings:
            self.after = max(self.after, r.last_id)
            a = live.get((r.job_id, r.attempt))
            if a is None or a.state != "running":
                continue
            duty = r.util_bp / 10_000
            at = r.at_ms / 1000
            key = self._key(r.job_id, r.attempt)
            self.keys.add(key)
            v = self.tracker.observe(
                key, at, duty, online=a.job.priority_class == "online", labels=a.spec.labels
            )
            if v is Verdict.WARN:
                when = _iso(at + p.grace)
                detail = (
                    f"attempt {r.attempt}: GPU duty {_pct(duty)}, below the idle threshold "
                    f"{_pct(p.threshold)} for {_span(p.window)} (the idle window); it will be "
                    f"reclaimed ({p.action}) at {when}, {_span(p.grace)} from now, unless "
                    f"its duty rises to {_pct(p.threshold)} or more"
                )
                js.add_event(self.store, r.job_id, r.at_ms, "idle-warning", detail)
                log.info("job %s: idle, warned (%s)", r.job_id, detail)
            elif v is Verdict.EXEMPT and a.key not in self.noted:
                self.noted.add(a.key)
                js.add_event(
                    self.store, r.job_id, r.at_ms, "idle",
                    f"attempt {r.attempt}: GPU duty {_pct(duty)}, below the idle threshold "
                    f"{_pct(p.threshold)} for {_span(p.window)}; not reclaimed: "
                    f"{self.exempt_why(a)}",
                )  # fmt: skip
            elif v is Verdict.RECLAIM:
                reclaim.append(a)
        # Attempts no longer running are forgotten; flags are those of the running ones.
        running = {self._key(*k): a for k, a in live.items() if a.state == "running"}
        for key in self.keys - set(running):
            self.tracker.forget(key)
        self.keys &= set(running)
        self.noted &= set(live)
        self.flags = {
            a.job.id: Flag(a.job.queue, a.job.tenant, self.tracker.flagged(key, now))
            for key, a in running.items()
        }
        return reclaim


class IdleReclaim:
    """The loop's idle reclaim, a part of ``Controller`` (module docstring); it has no state
    of its own (the loop's ``idle`` watch and ``idle_due`` attempts)."""

    def _watch_idle(self: Controller, now: float) -> None:
        """Feed the idle watch the new samples and reclaim what it says is idle past its
        grace period (``suanli.control.reclaim``), once some job waits: reclaiming GPUs
        nobody waits for would only restart the job on them. Until then it stays due, as
        long as it stays idle."""
        idle = self.idle
        assert idle is not None
        try:
            for live in idle.tick(now, self.live):
                self.idle_due[live.key] = live
        except Exception:  # noqa: BLE001 - reading samples must not stop scheduling
            log.exception("idle watch: pass failed; scheduling goes on")
            return
        waiting = len(self.sched) > 0
        for key, live in list(self.idle_due.items()):
            if self.live.get(key) is not live or live.state != "running":
                del self.idle_due[key]
            elif not idle.flagged(live, now):
                del self.idle_due[key]  # busy again: the tracker starts afresh
            elif waiting:
                del self.idle_due[key]
                with self._guard(live.job.id, "reclaiming its idle GPUs"):
                    self._reclaim_idle(live, now)
        if self.metrics is not None:
            self.metrics.set_job_idle(idle.flags)

    def _reclaim_idle(self: Controller, live: LiveAttempt, now: float) -> None:
        """Stop an idle attempt as a preemption does (its stop signal, its grace, then the
        kill) and requeue its job behind the jobs waiting now; its next attempt finds its
        checkpoint directory as it left it. The cycle did not evict it, so its resources
        are released in the scheduler here. With the ``shrink`` action, an elastic job above
        its minimum is shrunk to it instead (``suanli.control.resize``)."""
        if live.key not in self.live or live.state != "running":
            return
        p = self.config.idle
        assert p is not None
        least = live.spec.workers.min_workers
        if p.action == "shrink" and self._resizable(live) and len(live.slots) > least:
            # An elastic job gives back all but its minimum and goes on (one already at its
            # minimum is preempted below, as a job that is not elastic).
            self._shrink(live, least, f"its GPUs were idle (duty below {p.threshold:.3g} for "
                         f"{p.window:g} s and {p.grace:g} s after the warning)", now)  # fmt: skip
            return
        why = (f"reclaimed: its GPUs were idle (duty below {p.threshold:.3g} for "
               f"{p.window:g} s and {p.grace:g} s after the warning)")  # fmt: skip
        with self.store.begin() as conn:
            js.release_claims(conn, live.job.id, live.attempt)
            js.attempt_stopping(conn, live.job.id, live.attempt, to_ms(now), "preempted")
            js.set_job_state(
                conn, live.job.id, "pending", to_ms(now), reason=why, event="reclaimed"
            )
        self.sched.release(live.placement, live.job.id, now)
        job = replace(live.job, submit=max(live.job.submit, now))  # behind those waiting
        self.sched.submit(job, now, requeued=True)
        self._requeued(live, job)
        if self.metrics is not None:
            self.metrics.preempted(live.job.queue, "idle")
        live.why_stopping = Outcome.PREEMPTED
        self._drain(live)
        live.state = "stopping"
        self._send_stop(live)
