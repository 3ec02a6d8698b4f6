"""The scheduler's side of budgets: verdicts at submission, blocks at admission, accounts.

``BudgetGate`` wraps a ``BudgetBook`` (``suanli.core.budget``) for ``Scheduler``:

* at submission a job is queued, queued in a cheaper class (``Demoted``) or refused
  (``Reject``), as its budgets' hard actions say; a requeued (preempted) job is not new and is
  not judged again;
* before a job starts, its budgets must leave room (``BudgetBlock`` otherwise, with the time
  to look again: the scheduler wakes the lane then, or earlier when a job of the same budgets
  ends and gives back the part of its commitment it did not use);
* a start commits the job's admitted cost; its end (finished or preempted) settles it.

Jobs governed by different budgets never share a lane (``lane_key``), so a lane blocked by a
budget holds back only jobs of that budget.
"""

from __future__ import annotations

from suanli.core.budget import BudgetBlock, BudgetBook, Demote, Refuse
from suanli.core.decisions import Decision, Demoted, Reject
from suanli.core.model import Job


class BudgetGate:
    """See the module docstring."""

    def __init__(self, book: BudgetBook) -> None:
        self.book = book
        self._keys: dict[str, int] = {}  # tenant -> id of its tuple of governing budgets
        self._ids: dict[tuple[object, ...], int] = {}
        self.blocked: set[int] = set()  # lanes held back by a budget

    def lane_key(self, job: Job) -> int:
        """The same number for jobs governed by the same budgets."""
        k = self._keys.get(job.tenant)
        if k is None:
            gov = self.book.governing(job)
            k = self._keys[job.tenant] = self._ids.setdefault(gov, len(self._ids))
        return k

    def submitted(self, job: Job, now: float) -> tuple[Job | None, Decision | None]:
        """The job to queue (None: refused) and the decision to report, if any."""
        verdict = self.book.on_submit(job, now)
        if isinstance(verdict, Refuse):
            return None, Reject(job, verdict.reason)
        if isinstance(verdict, Demote):
            demoted = job.with_class(verdict.to_class)
            return demoted, Demoted(demoted, job.priority_class, verdict.reason)
        return job, None

    def check(self, job: Job, now: float) -> BudgetBlock | None:
        return self.book.admissible(job, now)

    def started(self, job: Job, gpu_model: str | None, now: float) -> None:
        self.book.commit(job, gpu_model, now)

    def ended(self, job_id: str, now: float) -> set[int]:
        """Settle ``job_id``; returns the budget-blocked lanes worth another look (and
        forgets them)."""
        self.book.settle(job_id, now)
        woken, self.blocked = self.blocked, set()
        return woken
