"""What a scheduling cycle decides, as plain data.

The cycle never changes the world: it returns ``Admit`` and ``Skip`` decisions, and an
applier (the simulator, or later the live control plane) carries them out. A ``Skip`` always
carries a typed ``Reason`` with the numbers behind it, so "why is my job pending" has an answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.core.model import Job
from suanli.core.tenancy import OverQuota
from suanli.core.view import TaskPlacement


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

    def __str__(self) -> str:
        return (
            f"no capacity: needs {self.need_tasks} task(s), cluster fits {self.fit_tasks}, "
            f"largest node fits {self.largest_block}"
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


Reason = NoCapacity | HeadOfLine | OverQuota | BehindReservation


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

    ``kind`` is ``priority`` (``by`` has a higher priority class) or ``reclaim`` (``by``'s queue
    takes back quota that ``job``'s queue borrowed). ``lost_gpu_s`` is the work destroyed: GPU-
    seconds since the job's last checkpoint. The applier stops the job and requeues it.
    """

    job: Job
    placement: JobPlacement
    by: str
    kind: str
    lost_gpu_s: float


Decision = Admit | Skip | Preempt
