"""Taking a pending job back for a federation front (``POST /v1/jobs/{id}/withdraw``).

A front that re-routes a job which waits far longer than predicted (``docs/network.md``,
"Re-routing") must take it back from its member only while it has not started: a job
admitted in the meantime runs where it is. A cancel cannot promise that (it stops a running
job too), so the front asks the scheduler loop itself: ``Withdrawals.ask_withdraw`` queues the
ask, and the loop's next pass answers it after taking in the store's new jobs and cancels and
before its scheduling cycle, so nothing can admit the job between the check and the taking
back. A job still pending that has never started here is taken out of the scheduler and
stored as ``cancelled`` with the front's reason (its history has a ``withdrawn`` event); any
other answers why not: its state, a cancel asked since the pass took in the cancels, or an
earlier attempt (a job requeued after a preemption resumes here, from its checkpoint).
As the simulated federation's ``Member.withdraw``.
"""

from __future__ import annotations

import logging
import queue
from concurrent.futures import Future
from typing import TYPE_CHECKING

from suanli.control.attempts import to_ms
from suanli.store import jobs as js

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control")

WITHDRAWALS_PER_PASS = 64
"""The most withdrawals one pass answers; the rest wait for the next."""


class Withdrawals:
    """The loop's half (a part of ``Controller``; module docstring)."""

    withdrawals: queue.SimpleQueue[tuple[str, str, Future[str]]]

    def ask_withdraw(self: Controller, job_id: str, why: str) -> Future[str]:
        """Take ``job_id`` back if it is still pending at the loop's next pass: the
        future's result is "" when it was (it is then ``cancelled``, for ``why``), else why
        not. Safe to call from any thread. ``Unanswered`` while the loop runs no passes."""
        from suanli.control.loop import Unanswered

        h = self.health
        if h.state != "running":
            raise Unanswered(f"the scheduler loop is {h.state}")
        f: Future[str] = Future()
        self.withdrawals.put((job_id, why, f))
        return f

    def _withdraw(self: Controller, now: float) -> None:
        """Answer the withdrawals asked since the last pass (module docstring)."""
        for _ in range(WITHDRAWALS_PER_PASS):
            try:
                job_id, why, f = self.withdrawals.get_nowait()
            except queue.Empty:
                return
            if not f.set_running_or_notify_cancel():
                continue  # its asker gave up: the job stays
            try:
                f.set_result(self._take_back(job_id, why, now))
            except Exception as e:  # noqa: BLE001 - the failure is its asker's answer
                log.exception("withdrawing %s failed", job_id)
                f.set_exception(e)

    def _take_back(self: Controller, job_id: str, why: str, now: float) -> str:
        rec = js.get_job(self.store, job_id, tenant=None)
        if rec is None:
            return f"there is no job {job_id}"
        if rec.state != "pending" or job_id not in self.pending:
            return f"job {job_id} is {rec.state}"
        if rec.cancel_requested:  # asked since this pass took in the cancels: theirs stands
            return f"job {job_id} is being cancelled"
        if rec.attempts > 0 or any(k[0] == job_id for k in self.live):
            # Requeued after a preemption or a lost node: it resumes here, from its checkpoint
            # (and an attempt of it may still be stopping).
            return f"job {job_id} has run here before (attempt {rec.attempts}): it resumes here"
        if not self.sched.remove(job_id):
            return f"job {job_id} is not waiting in the scheduler"
        self._leave_pending(job_id)
        js.set_job_state(self.store, job_id, "cancelled", to_ms(now), reason=why,
                         event="withdrawn")  # fmt: skip
        return ""
