"""The loop's repairs: one job's failure contained, recovery after a restart, and
reconciliation of the store, the loop and the backend (``Repair``, a part of
``suanli.control.loop.Controller``).

- ``_guard``/``_quarantine``: whatever one job's handling raises fails that job with the
  error as its reason, stops its tasks and gives its GPU claims back; the loop goes on.
- ``recover``: the scheduler rebuilt from the store after a restart, running attempts restored
  and their tasks adopted, job by job under the guard.
- ``reconcile``: level-triggered, on start and every ``ControlConfig.reconcile_interval_s``;
  what it repairs is in its docstring, each repair an event in the job's history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from suanli.backends.base import Exit, Handle, Outcome
from suanli.control.attempts import (
    LiveAttempt,
    is_interruption,
    job_of,
    one_line,
    stopping_outcome,
    to_ms,
)
from suanli.control.crash import crash_point
from suanli.core.model import SpecError
from suanli.store import jobs as js
from suanli.store import predictions as pr

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control")

HISTORY_JOBS = 20_000
"""Ended runs a restarted control plane's runtime predictor learns from its store (the
learned predictor's training window)."""


class Repair:
    """The repairing half of ``Controller`` (see the module docstring); it has no state of
    its own."""

    # ------------------------------------------------------------------ the guard
    @contextmanager
    def _guard(self: Controller, job_id: str, doing: str) -> Iterator[None]:
        """Run the body; if it raises, fail job ``job_id`` with the error (``_quarantine``)
        instead of letting the error stop the pass."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - one job's failure must not stop the loop
            log.exception("job %s: error while %s", job_id, doing)
            try:
                self._quarantine(job_id, f"{doing}: {type(e).__name__}: {e}")
            except Exception:  # noqa: BLE001 - the store may be the cause; the next pass retries
                log.exception("job %s: could not record the failure", job_id)

    def _learn_history(self: Controller) -> None:
        """The runtime predictor (and the start-time estimates) learn the store's latest
        ``HISTORY_JOBS`` ended runs, in the order they ended, as if they had ended while this
        control plane ran: a restart does not forget what jobs taught it. A record whose
        spec no longer reads is passed over."""
        for run in pr.ended_runs(self.store, HISTORY_JOBS):
            try:
                _, job = job_of(run.job)
            except (SpecError, ValueError):
                continue
            at = run.ended_ms / 1000
            self.starts.learn_past(job, run.runtime_s, at)
            self.sched.learn(job, run.runtime_s, at)

    def _quarantine(self: Controller, job_id: str, why: str) -> None:
        """Take ``job_id`` out of the scheduler and the loop, stop its tasks, end its live
        attempts (giving their GPU claims back) and fail it with ``why``. Each step is
        attempted whatever the state the error left behind."""
        now = self.clock()
        if job_id in self.pending:
            self._leave_pending(job_id)
        try:
            self.sched.remove(job_id)
        except Exception:  # noqa: BLE001 - it may not be there (or be half there)
            log.debug("job %s: not pending in the scheduler", job_id)
        for live in [a for a in self.live.values() if a.job.id == job_id]:
            del self.live[live.key]
            self._undrain(live)
            for t, h in live.handles.items():
                if t not in live.exits:
                    try:
                        self.backend.stop(h, Outcome.CANCELLED)
                    except Exception:  # noqa: BLE001
                        log.exception("job %s: could not stop task %d", job_id, t)
            if live.why_stopping is not Outcome.PREEMPTED:
                try:
                    self.sched.release(live.placement, job_id, now)
                except Exception:  # noqa: BLE001
                    log.exception("job %s: could not release its placement", job_id)
            self._release(live)
        reason = one_line(f"failed: internal error while {why}")
        with self.store.begin() as conn:
            for a in js.job_attempts(conn, job_id):
                if a.state != "ended":
                    js.end_attempt(
                        conn, job_id, a.attempt, to_ms(now), outcome="failed", exit_code=None,
                        detail=reason,
                    )  # fmt: skip
            if js.get_job(conn, job_id) is not None:
                js.set_job_state(conn, job_id, "failed", to_ms(now), reason=reason)
        self.cancelling.discard(job_id)

    # ------------------------------------------------------------------ recovery
    def recover(self: Controller) -> None:
        """Rebuild the scheduler from the store (see the module docstring). Call once,
        before the first ``step``."""
        now = self.clock()
        self._learn_history()
        records = {r.id: r for r in js.jobs_in(self.store, ["admitted", "running", "pending"])}
        adopt: list[Handle] = []
        for a in js.live_attempts(self.store):
            rec = records.get(a.job_id)
            if rec is None:  # the job ended; the attempt row was left behind by a crash
                self._end_attempt_row(a.job_id, a.attempt, now, "lost", None, "left over")
                continue
            with self._guard(rec.id, "recovering its attempt"):
                adopt.extend(self._restore_attempt(rec, a))
        for e in self._adopt(adopt, now):
            with self._guard(e.handle.job_id, "adopting its task"):
                self._task_exited(e, now)
        crash_point("recover-adopted")
        for live in list(self.live.values()):
            with self._guard(live.job.id, "recovering its launch"):
                if live.state == "admitted" and not live.handles:
                    self._unrecorded_launch(live, now)
                elif live.state == "stopping" and live.key in self.live:
                    self._send_stop(live)
                    self._stopped_if_done(live, now)
                elif live.state == "running" and live.spec.elastic:
                    self._resume_resize(live, now)
        for _, job_id in js.job_ids_in(self.store, ["pending"]):
            if job_id in self.pending:
                continue  # requeued while its attempt was recovered
            rec = records.get(job_id)
            if rec is None or rec.state != "pending":  # submitted or requeued since then
                rec = js.get_job(self.store, job_id)
            if rec is not None and rec.state == "pending":
                self._submit(rec, now)
        self.last_seq = max([self.last_seq, *(r.seq for r in records.values())])
        self.holds_at = -float("inf")  # the holds, on the rebuilt view (after the restores)
        self._watch_holds(now)
        self.reconcile(now)

    def _restore_attempt(self: Controller, rec: js.JobRecord, a: js.AttemptRecord) -> list[Handle]:
        """Put back one live attempt of the store (see ``recover``); its handles to adopt."""
        spec, job = job_of(rec)
        # An elastic job's attempt lists every task it ran: those a resize removed carry
        # ``until_ms``, those it added ``from_ms`` (``suanli.control.resize``).
        now_entries = [t for t in a.placement if t.get("until_ms") is None]
        placement = self._placement_of(now_entries)
        slots = [int(t["task"]) for t in now_entries]
        live = LiveAttempt(job, rec, spec, a.attempt, placement, a.state, slots=slots)
        live.joined_ms = {int(t["task"]): int(t["from_ms"]) for t in now_entries
                          if t.get("from_ms") is not None}  # fmt: skip
        live.left = [t for t in a.placement if t.get("until_ms") is not None]
        left = {int(t["task"]): t for t in live.left}
        if a.started_ms is not None:
            live.started_at = a.started_ms / 1000
        if a.state == "stopping":
            live.why_stopping = stopping_outcome(a.detail)
            if is_interruption(a.detail):
                live.interrupted = a.detail
        handles = [Handle.from_json(saved) for saved in a.handles or ()]
        if live.why_stopping is not Outcome.PREEMPTED:
            # A preempted attempt was released in the scheduler when it was preempted;
            # any other still holds its placement there until it ends.
            self.sched.restore(
                replace(job, tasks=max(job.tasks, len(slots))),
                placement,
                (a.started_ms or a.admitted_ms) / 1000,
                preempted_at=self._preempted_at(rec.id),
            )
        for handle in handles:
            live.handles[handle.task] = handle
            if handle.task in left:  # a shrink's: it may still be stopping
                live.retiring[handle.task] = self._placement_of([left[handle.task]]).tasks[0]
        self.live[live.key] = live
        if spec.elastic and a.state == "running":
            self._restore_generation(live)
        for tp in live.retiring.values():
            for g in tp.gpus:
                self.draining.setdefault((tp.node, g), set()).add(live.key)
        if a.state == "stopping" and live.why_stopping is Outcome.PREEMPTED:
            self._drain(live)
        return handles

    def _adopt(self: Controller, handles: list[Handle], now: float) -> list[Exit]:
        """The backend's adoption of ``handles``, task by task if it fails as a whole (a
        task it cannot adopt is lost, and only that one)."""
        try:
            return self.backend.adopt(handles)
        except Exception:  # noqa: BLE001
            log.exception("adopting %d tasks failed: adopting them one by one", len(handles))
        exits: list[Exit] = []
        for h in handles:
            try:
                exits.extend(self.backend.adopt([h]))
            except Exception as e:  # noqa: BLE001
                exits.append(Exit(h, Outcome.LOST, None, None, now, f"cannot adopt: {e}"))
        return exits

    def _unrecorded_launch(self: Controller, live: LiveAttempt, now: float) -> None:
        """An attempt admitted but not recorded as started when the control plane stopped.
        If none of its tasks was launched, it starts as usual (``_launch_ready``). If some
        were (found by the handle file each launch writes), they are adopted, the others
        launched, and the attempt goes on: work already running is not thrown away."""
        found = {
            t: h
            for t in live.slots
            if (h := self.backend.find(live.job.id, live.attempt, t)) is not None
        }
        if not found:
            return
        ended = self.backend.adopt(found.values())
        live.handles.update(found)
        self._launch(live, now)
        for e in ended:
            self._task_exited(e, now)

    def _stopped_if_done(self: Controller, live: LiveAttempt, now: float) -> None:
        """End a stopping attempt that has nothing left to wait for: every task it launched
        has exited, or it launched none (a control plane that died while ending it)."""
        if live.key in self.live and all(t in live.exits for t in live.handles):
            self._attempt_over(live, now)

    # ------------------------------------------------------------------ reconciliation
    def reconcile(self: Controller, now: float | None = None) -> list[str]:
        """Make the store, this loop and the backend agree, whatever happened before (a
        crash at any point, a bug, a hand-edited database); returns what was repaired.

        - A GPU claim in the store that no live attempt of this loop holds (one ended,
          preempted or unknown) is released.
        - An attempt the store calls live but this loop does not know is ended as lost, and
          its job, if it has no other live attempt, goes back to pending and is taken in.
        - A task this loop waits for but the backend neither runs nor has reported is lost
          (its attempt then ends, and its job is requeued as for any lost attempt).
        - A job the store says is pending but this loop does not hold is taken in.
        Each repair is a ``reconciled`` event in the job's history. Repairs run one by one
        under the guard: one that fails leaves the others done and is retried next time.
        """
        now = self.clock() if now is None else now
        self.reconciled_at = now
        done: list[str] = []

        def note(job_id: str, text: str) -> None:
            js.add_event(self.store, job_id, to_ms(now), "reconciled", text)
            log.warning("reconciled job %s: %s", job_id, text)
            done.append(f"job {job_id}: {text}")
            if len(done) == 1:
                crash_point("reconcile-partial")

        holding = {k for k, a in self.live.items() if a.why_stopping is not Outcome.PREEMPTED}
        for job_id, attempt in sorted(js.claimed_attempts(self.store)):
            if (job_id, attempt) not in holding:
                with self._guard(job_id, "reconciling its GPU claims"):
                    js.release_claims(self.store, job_id, attempt)
                    note(job_id, f"released the GPU claims of attempt {attempt}: "
                                 "no live attempt holds them")  # fmt: skip
        for a in js.live_attempts(self.store):
            if (a.job_id, a.attempt) in self.live:
                continue
            with self._guard(a.job_id, "reconciling its attempts"):
                self._end_attempt_row(
                    a.job_id, a.attempt, now, "lost", None, "reconciled: no process holds it"
                )
                note(a.job_id, f"attempt {a.attempt} ended as lost: no process holds it")
                rec = js.get_job(self.store, a.job_id)
                others = any(k[0] == a.job_id for k in self.live)
                if rec is not None and rec.state in ("admitted", "running") and not others:
                    js.set_job_state(self.store, a.job_id, "pending", to_ms(now),
                                     reason="requeued: attempt lost (reconciled)",
                                     event="requeued")  # fmt: skip
                    fresh = js.get_job(self.store, a.job_id)
                    if fresh is not None:
                        self._submit(fresh, now)
        for live in list(self.live.values()):
            if live.state == "stopping" and all(t in live.exits for t in live.handles):
                with self._guard(live.job.id, "reconciling its stopping attempt"):
                    note(live.job.id, f"attempt {live.attempt} ended: it was stopping with "
                                      "no task left to wait for")  # fmt: skip
                    self._attempt_over(live, now)
        known = {h.key for h in self.backend.running()}
        for live in list(self.live.values()):
            for t, h in list(live.handles.items()):
                if t in live.exits or h.key in known:
                    continue
                with self._guard(live.job.id, "reconciling its tasks"):
                    note(live.job.id, f"task {t} of attempt {live.attempt} is lost: "
                                      "the backend has no such task")  # fmt: skip
                    self._task_exited(
                        Exit(h, Outcome.LOST, None, None, now, "the backend has no such task"),
                        now,
                    )
        live_jobs = {k[0] for k in self.live}
        for seq, job_id in js.job_ids_in(self.store, ["pending"]):
            if seq > self.last_seq:
                continue  # submitted since this pass took submissions in: the next one will
            if job_id not in self.pending and job_id not in live_jobs:
                rec = js.get_job(self.store, job_id)
                if rec is None or rec.state != "pending":
                    continue  # it has moved on since
                note(rec.id, "taken in: pending in the store but not in the scheduler")
                self._submit(rec, now)
        return done
