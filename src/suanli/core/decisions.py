"""What a scheduling cycle decides, as plain data.

The cycle never changes the world: it returns ``Admit``, ``Preempt`` and ``Skip`` decisions
(and a submission may be answered ``Reject`` or ``Demoted``), and an ``Applier`` (the
simulator, or the live control plane) carries them out, through ``apply``. A ``Skip`` always
carries a typed ``Reason`` with the numbers behind it, so "why is my job pending" has an answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from suanli.core.model import Job, TaskRequest
from suanli.core.view import TaskPlacement


class Reason(Protocol):
    """Why a job waits: a frozen value with the numbers behind it, whose ``str`` tells a user.
    The cycle's own are below; each admission check brings its own (``OverQuota``,
    ``BudgetBlock``, ``UserLimitReached``), so a new check needs no change here."""

    def __str__(self) -> str: ...


@dataclass(frozen=True, slots=True)
class JobPlacement:
    """Where every started task of a job runs, and the milli-GPU it holds in all."""

    tasks: tuple[TaskPlacement, ...]
    gpu_milli: int

    @classmethod
    def of(cls, tasks: tuple[TaskPlacement, ...]) -> JobPlacement:
        if len(tasks) == 1:
            return cls(tasks, tasks[0].gpu_milli * len(tasks[0].gpus))
        return cls(tasks, sum(t.gpu_milli * len(t.gpus) for t in tasks))

    @property
    def nodes(self) -> tuple[int, ...]:
        """Distinct nodes used, in placement order."""
        return tuple(dict.fromkeys(t.node for t in self.tasks))


@dataclass(frozen=True, slots=True)
class NoCapacity:
    """Not enough free capacity anywhere for this job's shape.

    ``fit_tasks`` is how many of its tasks the whole cluster could take at the time,
    ``largest_block`` the most any single node could take, ``need_tasks`` the fewest it
    can start with.
    """

    need_tasks: int
    fit_tasks: int
    largest_block: int
    task: TaskRequest | None = field(default=None, compare=False)
    """The request of each task, for the message (None: not known)."""
    largest_free_gpus: int = field(default=-1, compare=False)
    """The most whole GPUs free on any one node the job may use (-1: not known). This and
    ``task`` are for the message: two reasons with the same counts are equal."""

    def __str__(self) -> str:
        t = self.task
        if t is None or not t.gpus:
            what = f"{self.need_tasks} task(s)"
        else:
            gpus = (
                f"{t.gpus} GPU{'s' if t.gpus > 1 else ''}"
                if t.gpu_milli >= 1000
                else (f"{t.gpu_milli / 1000:g} of a GPU")
            )
            models = f" of model {'|'.join(sorted(t.gpu_models))}" if t.gpu_models else ""
            what = f"{self.need_tasks} task(s) of {gpus}{models}"
        free = ""
        if self.largest_free_gpus >= 0:
            free = f"; largest free block: {self.largest_free_gpus} GPU(s) on one node"
            if t is not None and self.largest_free_gpus >= t.gpus and not self.largest_block:
                free += " (short of CPU or memory there)"
        return (
            f"no capacity: needs {what}, cluster fits {self.fit_tasks}, "
            f"largest node fits {self.largest_block}{free}"
        )


@dataclass(frozen=True, slots=True)
class FairShareWait:
    """No capacity now, and capacity went first to queue ``ahead``, whose fair share
    (``ahead_share``) is lower than this job's queue's (``share``): it goes first again when
    capacity frees, until the shares cross."""

    inner: NoCapacity
    queue: str
    share: float
    ahead: str
    ahead_share: float

    def __str__(self) -> str:
        return (
            f"{self.inner}; lower fair share than queue {self.ahead} "
            f"(queue {self.queue}: {self.share:.4g} > {self.ahead_share:.4g}), which goes first"
        )


@dataclass(frozen=True, slots=True)
class HeadOfLine:
    """Strict order: the job waits behind the blocked head of the queue."""

    head: str

    def __str__(self) -> str:
        return f"behind blocked head-of-line job {self.head}"


@dataclass(frozen=True, slots=True)
class BehindReservation:
    """The job could start now but would delay the reservation of job ``job`` at ``until``
    (EASY backfill, ``suanli.core.backfill``)."""

    job: str
    until: float

    def __str__(self) -> str:
        return f"behind a reservation for job {self.job} until t={self.until:g} s"


@dataclass(frozen=True, slots=True)
class Admit:
    """Start ``job`` now with ``placement`` (possibly fewer tasks than asked, never below its gang minimum)."""

    job: Job
    placement: JobPlacement


@dataclass(frozen=True, slots=True)
class Skip:
    """Leave ``job`` pending this cycle, for ``reason``."""

    job: Job
    reason: Reason


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict running ``job`` (all its tasks, released at once) to make room for job ``by``.

    ``kind`` is ``priority`` (``by`` has a higher priority class), ``reclaim`` (``by``'s queue
    takes back quota that ``job``'s queue borrowed) or ``defrag`` (``job`` is moved to make
    scattered free room whole for ``by``: ``preemption/defrag``). ``lost_gpu_s`` is the work destroyed: GPU-
    seconds since the job's last checkpoint. ``kept_s`` is the work this attempt keeps: seconds
    of its running (after its restart overhead) saved by its last checkpoint, which the job
    resumes from (0 without checkpoints). The applier stops the job and requeues it.
    """

    job: Job
    placement: JobPlacement
    by: str
    kind: str
    lost_gpu_s: float
    kept_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Reject:
    """``job`` is refused at submission: it leaves the queue without running."""

    job: Job
    reason: Reason

    def __str__(self) -> str:
        return f"refused: {self.reason}"


@dataclass(frozen=True, slots=True)
class Demoted:
    """``job`` (as now queued) was submitted in class ``was`` and demoted for ``reason``."""

    job: Job
    was: str
    reason: Reason

    def __str__(self) -> str:
        return f"demoted from {self.was} to {self.job.priority_class}: {self.reason}"


Decision = Admit | Skip | Preempt | Reject | Demoted


class Applier(Protocol):
    """What carries out decisions: the simulator (a state change and a finish event) or the
    live control plane (a store write, then a backend call). Both are written against this
    contract, and take every figure a decision carries (placement, lost and kept work) from
    the decision itself rather than working it out again. ``now`` is the cycle's time."""

    def admit(self, d: Admit, now: float) -> None:
        """Start ``d.job`` on ``d.placement`` (already assumed on the scheduler's view)."""

    def preempt(self, d: Preempt, now: float) -> None:
        """Stop ``d.job`` (already released on the view) and requeue it (``requeued=True``)."""

    def skip(self, d: Skip, now: float) -> None:
        """``d.job`` stays pending; record why."""

    def reject(self, d: Reject, now: float) -> None:
        """``d.job`` was refused at submission: it ends without running."""

    def demote(self, d: Demoted, now: float) -> None:
        """``d.job`` was queued in a cheaper class: record it in that class."""


def apply(decisions: Iterable[Decision], applier: Applier, now: float) -> None:
    """Carry out ``decisions`` in order (evictions come before the admission they make room
    for); ``TypeError`` for anything that is not a decision."""
    for d in decisions:
        t = type(d)
        if t is Admit:
            applier.admit(d, now)  # type: ignore[arg-type]
        elif t is Skip:
            applier.skip(d, now)  # type: ignore[arg-type]
        elif t is Preempt:
            applier.preempt(d, now)  # type: ignore[arg-type]
        elif t is Reject:
            applier.reject(d, now)  # type: ignore[arg-type]
        elif t is Demoted:
            applier.demote(d, now)  # type: ignore[arg-type]
        else:
            raise TypeError(f"not a decision: {d!r}")
