"""admission/budget: budgets' hard actions at submission and at admission.

Wraps a ``BudgetBook`` (``suanli.core.budget``):

* at submission a job is queued, queued in a cheaper class (``Demoted``) or refused
  (``Reject``), as its budgets' hard actions say; a requeued (preempted) job is not new and is
  not judged again;
* before a job starts, its budgets must leave room (``BudgetBlock`` otherwise, with the time
  to look again: its lane is tried again then, or earlier when any job ends and gives back
  the part of its commitment it did not use);
* a start commits the job's admitted cost; its end (finished or preempted) settles it.

Jobs governed by different budgets never share a lane (``lane_key``), so a lane blocked by a
budget holds back only jobs of that budget.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from suanli.core.budget import BudgetBlock, BudgetBook, Demote, Refuse
from suanli.core.decisions import Decision, Demoted, JobPlacement, NoCapacity, Reject, Skip
from suanli.core.lanes import Lane
from suanli.core.model import Job
from suanli.core.registry import register
from suanli.core.seams import Handle, OrderContext
from suanli.core.view import ClusterView


@register("admission", "budget")
class BudgetAdmission:
    """Budgets: refuse, demote or hold off-peak the jobs of an organisation whose budget is spent."""

    def __init__(self, book: BudgetBook) -> None:
        self.book = book
        self._keys: dict[str, int] = {}  # tenant -> id of its tuple of governing budgets
        self._ids: dict[tuple[object, ...], int] = {}
        self._blocked: set[int] = set()  # lanes held back by a budget

    def bind(self, h: Handle, slot: int) -> None:
        self.h = h

    def arrive(self, job: Job, at: float) -> Decision | None:
        verdict = self.book.on_submit(job, at)
        if isinstance(verdict, Refuse):
            return Reject(job, verdict.reason)
        if isinstance(verdict, Demote):
            demoted = job.with_class(verdict.to_class)
            return Demoted(demoted, job.priority_class, verdict.reason)
        return None

    def lane_key(self, job: Job) -> Hashable:
        """The same number for jobs governed by the same budgets."""
        k = self._keys.get(job.tenant)
        if k is None:
            gov = self.book.governing(job)
            k = self._keys[job.tenant] = self._ids.setdefault(gov, len(self._ids))
        return k

    def begin(self) -> None:
        pass

    def check(self, job: Job, lane: Lane) -> Skip | np.ndarray | None:
        h = self.h
        held = self.book.admissible(job, h.now)
        if held is None:
            return None
        # The lane waits until ``held.until``, or until a job ends.
        skip = h.block(job, lane, held)
        self._blocked.add(lane.index)
        h.retry_at(held.until, lane)
        return skip

    def no_room(self, job: Job, lane: Lane, why: NoCapacity) -> Skip:
        raise AssertionError("admission/budget gives no node mask")

    def refusal(self, job: Job, view: ClusterView, ctx: OrderContext) -> str | None:
        return None  # a budget is spent for a while, never for good

    # ---------------------------------------------------------------- the ledger
    def started(self, job: Job, placement: JobPlacement, at: float) -> None:
        view = self.h.view
        m = int(view.node_model[placement.tasks[0].node])
        self.book.commit(job, view.models[m].name if m >= 0 else None, at)

    def ended(self, job_id: str, at: float) -> None:
        """Settle the job: the budget-blocked lanes are worth another look."""
        self.book.settle(job_id, at)
        woken, self._blocked = self._blocked, set()
        lane_list = self.h.lanes.lanes
        for i in woken:
            lane = lane_list[i]
            if isinstance(lane.blocked, BudgetBlock):
                self.h.unblock(lane, retry=True)

    def suspend(self, job_id: str) -> None:
        pass  # evicting others gives a budget no room: its what-if changes nothing here

    def resume(self, job_id: str) -> None:
        pass

    def holds(self, job_id: str) -> bool:
        return False  # the book never commits a job twice (a book rebuilt from a ledger)
