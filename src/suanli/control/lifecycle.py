"""The loop's attempt lifecycle: launching attempts whose GPUs are free and ending them when
their tasks have (``Lifecycle``, a part of ``suanli.control.loop.Controller``).

- **Launching** (``_launch_ready``): an admitted attempt starts once no process that held its
  GPUs is still draining; its tasks' launches are recorded together after the last of them,
  in one transaction. A launch that fails fails the attempt alone: lost (the job requeued)
  where it was not the job's fault (its node left, its engine did not answer, a task of it
  ran before a crash), else failed.
- **Endings** (``_task_exited``, ``_end``): an attempt is over when all its tasks are; a task
  that fails stops the rest of its gang; the outcome, exit code and reason are written with
  the job's new state, a lost attempt is requeued up to ``ControlConfig.max_lost`` times, and
  the backend frees what it kept for the attempt. A job that ran to an end (succeeded,
  failed, timed out) is learned by the scheduler's runtime predictor (``Scheduler.learn``),
  as the simulator does at each end.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from suanli.backends.base import Exit, LaunchLost, Outcome
from suanli.control.attempts import LiveAttempt, one_line, to_ms
from suanli.control.crash import crash_point
from suanli.store import jobs as js

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control")


class Lifecycle:
    """The launching and ending half of ``Controller`` (see the module docstring); it has no
    state of its own."""

    # ------------------------------------------------------------------ launching
    def _launch_ready(self: Controller, now: float) -> None:
        """Launch every admitted attempt whose GPUs are free; the launches are recorded
        together, in one transaction, after the last of them (``_record_launches``)."""
        launched: list[LiveAttempt] = []
        for live in list(self.live.values()):
            if live.state == "admitted" and not live.handles and not self._waits(live):
                with self._guard(live.job.id, "launching it"):
                    if self._start_tasks(live, now):
                        launched.append(live)
        self._record_launches(launched, now)

    def _waits(self: Controller, live: LiveAttempt) -> bool:
        return any(self.draining.get((tp.node, g)) for tp in live.placement.tasks for g in tp.gpus)

    def _launch(self: Controller, live: LiveAttempt, now: float) -> None:
        if self._start_tasks(live, now):
            self._record_launches([live], now)

    def _start_tasks(self: Controller, live: LiveAttempt, now: float) -> bool:
        """Launch ``live``'s tasks (those not adopted); True if they all started (the
        attempt runs, to be recorded by ``_record_launches``), False if one failed (the
        attempt then ended)."""
        try:
            for i, slot in enumerate(live.slots):
                if slot in live.handles:
                    continue  # launched before a restart and adopted (_unrecorded_launch)
                if i:
                    crash_point("launch-partial")
                live.handles[slot] = self.backend.launch(self._launch_spec(live, slot))
        except Exception as e:  # noqa: BLE001 - any launch failure fails the attempt alone
            log.error("job %s: launch failed: %s", live.job.id, e)
            text = one_line(f"launch failed: {type(e).__name__}: {e}")
            # A task of this attempt ran before a crash and cannot be found again: the
            # attempt is lost (and the job requeued), not the job's fault.
            # So is one the backend could not start for a reason not the job's (its node
            # has left, its engine did not answer).
            lost = isinstance(e, FileExistsError | LaunchLost)
            for h in live.handles.values():
                try:
                    self.backend.stop(h, Outcome.CANCELLED)
                except Exception:  # noqa: BLE001
                    log.exception("job %s: could not stop task %d", live.job.id, h.task)
            live.state = "stopping"
            live.why_stopping = Outcome.LOST if lost else Outcome.FAILED
            self._attempt_over(live, now, detail=text)
            return False
        live.started_at = now
        crash_point("launch-unrecorded")
        live.state = "running"
        return True

    def _record_launches(self: Controller, launched: list[LiveAttempt], now: float) -> None:
        """Record that ``launched`` run (their handles), in one transaction; if it fails,
        one by one, each under its job's guard (one that cannot be recorded fails alone)."""
        rows = [(a.job.id, a.attempt, [h.to_json() for h in a.handles.values()])
                for a in launched]  # fmt: skip
        if len(rows) > 1:
            try:
                js.attempts_started(self.store, rows, to_ms(now))
                return
            except Exception as e:  # noqa: BLE001 - each is tried alone, and fails alone
                log.warning("recording %d launches in one transaction failed (%s: %s): "
                            "recording them one by one", len(rows), type(e).__name__, e)  # fmt: skip
        for live, (job_id, attempt, handles) in zip(launched, rows, strict=True):
            with self._guard(live.job.id, "recording its launch"):
                js.attempt_started(self.store, job_id, attempt, handles, to_ms(now))

    # ------------------------------------------------------------------ endings
    def _task_exited(self: Controller, e: Exit, now: float) -> None:
        live = self.live.get((e.handle.job_id, e.handle.attempt))
        if live is None or e.handle.task in live.exits:
            return
        if e.handle.task in live.retiring:
            # Removed by a shrink, stopped as asked: the resize's end, not the job's.
            self._retire(live, e.handle.task, now)
            if not live.retiring and all(s in live.exits for s in live.slots):
                self._attempt_over(live, now)  # the others had ended meanwhile
            return
        live.exits[e.handle.task] = e
        done = all(s in live.exits for s in live.slots) and not live.retiring
        if not done and e.outcome is not Outcome.SUCCEEDED and live.state != "stopping":
            # A gang stands or falls together: stop the other tasks.
            live.cause = e
            self._stop(live, e.outcome, now, f"task {e.handle.task}: {e.detail}")
        if done:
            self._attempt_over(live, now)

    def _attempt_over(
        self: Controller, live: LiveAttempt, now: float, detail: str | None = None
    ) -> None:
        crash_point("exit-unrecorded")
        try:
            self._end(live, now, detail)
        finally:
            if live.key not in self.live:
                self._release(live)

    def _release(self: Controller, live: LiveAttempt) -> None:
        """Let the backend free what it kept for an ended attempt (its scratch)."""
        try:
            self.backend.release(live.job.id, live.attempt)
        except Exception:  # noqa: BLE001 - a leftover directory is no reason to stop
            log.exception("job %s: could not release attempt %d", live.job.id, live.attempt)

    def _end(self: Controller, live: LiveAttempt, now: float, detail: str | None) -> None:
        del self.live[live.key]
        self._undrain(live)
        exits = [live.exits[t] for t in sorted(live.exits)]
        first_bad = live.cause or next(
            (x for x in exits if x.outcome is not Outcome.SUCCEEDED), None
        )
        why = live.why_stopping
        ended = live.ended_at(now)  # the recorded end, for the attempt's row and its bill
        job_id, ms = live.job.id, to_ms(ended)
        if why is Outcome.PREEMPTED:
            # Already requeued (and its claims released) when the decision was applied.
            self._end_attempt_row(job_id, live.attempt, ended, "preempted", None,
                                  live.interrupted or "preempted")  # fmt: skip
            return
        self.sched.release(live.placement, job_id, now)
        if why is Outcome.CANCELLED:
            outcome, state, reason, code = "cancelled", "cancelled", "cancelled", None
        elif first_bad is None and why is None:
            outcome, state, reason, code = "succeeded", "succeeded", None, 0
        elif why is Outcome.LOST or (first_bad is not None and first_bad.outcome is Outcome.LOST):
            self.lost[job_id] = self.lost.get(job_id, 0) + 1
            text = detail or (first_bad.detail if first_bad is not None else "lost")
            self._end_attempt_row(job_id, live.attempt, ended, "lost", None, text)
            if self.lost[job_id] > self.config.max_lost:
                js.set_job_state(self.store, job_id, "lost", ms, reason=f"lost: {text}")
                return
            js.set_job_state(
                self.store,
                job_id,
                "pending",
                ms,
                reason=f"requeued: attempt lost ({text})",
                event="requeued",
            )
            self.sched.submit(live.job, now, requeued=True)
            self._requeued(live, live.job)
            return
        elif first_bad is None and not exits:
            # Failed before any task ran (a launch that failed): nothing exited.
            outcome, state, code = "failed", "failed", None
            reason = detail or "failed before any task started"
        else:
            bad = first_bad or exits[-1]
            timed_out = bad.outcome is Outcome.TIMED_OUT
            outcome = "timed-out" if timed_out else "failed"
            state, code = "failed", bad.exit_code
            reason = detail or (f"task {bad.handle.task}: {bad.detail}")
        text = detail or (first_bad.detail if first_bad is not None else "exit code 0")
        if live.started_at is not None and exits and outcome != "cancelled":
            # Its runtime is known now: a runtime predictor learns it (the run of its last
            # attempt, from launch to its recorded end), never before the job has ended; a
            # cancelled run is no runtime (nor is a preempted or lost one, requeued above).
            self.sched.learn(live.job, max(0.0, ended - live.started_at), ended)
            self.starts.learn(live.job, max(0.0, ended - live.started_at), ended)
        with self.store.begin() as conn:
            js.end_attempt(
                conn, job_id, live.attempt, ms, outcome=outcome, exit_code=code, detail=text
            )
            js.set_job_state(conn, job_id, state, ms, reason=reason, exit_code=code)
        self.cancelling.discard(job_id)

    def _end_attempt_row(
        self: Controller,
        job_id: str,
        attempt: int,
        now: float,
        outcome: str,
        code: int | None,
        detail: str,
    ) -> None:
        with self.store.begin() as conn:
            js.end_attempt(
                conn, job_id, attempt, to_ms(now), outcome=outcome, exit_code=code, detail=detail
            )
