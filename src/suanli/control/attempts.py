"""What the live loop keeps of each attempt it runs, and the small conversions it shares.

``LiveAttempt`` is one attempt as ``suanli.control.loop.Controller`` tracks it (its job, spec,
placement, task handles and exits, why it is stopping); ``Health`` is what ``/healthz``
reports of the loop. ``job_of`` turns a stored job into its spec and core job; ``to_ms``
seconds into the store's epoch milliseconds; ``one_line`` a text into a reason;
``stopping_outcome`` an attempt's stored stop detail into the outcome it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from suanli.backends.base import Exit, Handle, Outcome
from suanli.control.spec import JobSpec
from suanli.core.decisions import JobPlacement
from suanli.core.model import Job
from suanli.core.view import TaskPlacement
from suanli.store import jobs as js


@dataclass
class LiveAttempt:
    """One live attempt, as the loop tracks it."""

    job: Job
    record: js.JobRecord
    spec: JobSpec
    attempt: int
    placement: JobPlacement
    state: str  # admitted | running | stopping
    handles: dict[int, Handle] = field(default_factory=dict)
    exits: dict[int, Exit] = field(default_factory=dict)
    why_stopping: Outcome | None = None
    """PREEMPTED, CANCELLED, or the outcome of the task whose end stopped the gang."""
    cause: Exit | None = None
    """The exit of the task whose failure stopped the gang (None otherwise)."""
    started_at: float | None = None
    """When its tasks were launched (None: not yet)."""
    slots: list[int] = field(default_factory=list)
    """The task number of each task of ``placement``, by rank: ``0..n-1`` until an elastic
    job is resized; a task added later gets the next number never used in the attempt
    (its run directory is its own)."""
    joined_ms: dict[int, int] = field(default_factory=dict)
    """Tasks added by a resize (task number -> when), for the stored placement."""
    left: list[dict[str, Any]] = field(default_factory=list)
    """The stored placement entries of tasks a resize removed (with ``until_ms``)."""
    retiring: dict[int, TaskPlacement] = field(default_factory=dict)
    """Tasks a shrink is stopping (task number -> what they held): their GPUs drain, and
    the survivors are told their new layout once none is left."""
    interrupted: str | None = None
    """Why it was taken off faulty or drained hardware (``suanli.control.hardware``): its
    ended row's detail; None for any other stop."""
    generation: int = 0
    """An elastic attempt's layout: 0 at its start, one more with each resize (what its
    tasks' elastic files say once told)."""

    def __post_init__(self) -> None:
        if not self.slots:
            self.slots = list(range(len(self.placement.tasks)))

    @property
    def key(self) -> tuple[str, int]:
        return (self.job.id, self.attempt)

    @property
    def next_slot(self) -> int:
        used = [*self.slots, *self.retiring, *(int(e["task"]) for e in self.left)]
        return max(used, default=-1) + 1

    def ended_at(self, now: float) -> float:
        """When the attempt ended: its last task's recorded exit, within [start, now]."""
        recorded = [self.exits[s].finished_at for s in self.slots if s in self.exits]
        if not recorded or len(recorded) < len(self.slots):
            return now
        return max(self.started_at or 0.0, min(now, max(recorded)))


@dataclass
class Health:
    """What ``/healthz`` reports of the loop: its state (``starting``, ``running``,
    ``stopped``, ``failed``), when a pass last completed (``time.monotonic``), and the error
    that stopped it."""

    state: str = "starting"
    last_pass: float | None = None
    error: str | None = None
    passes: int = 0
    failures: int = 0
    """Passes in a row that failed (reset by one that completes)."""


def job_of(rec: js.JobRecord) -> tuple[JobSpec, Job]:
    """A stored job's spec and its core job (in its stored class: a budget may have
    demoted it)."""
    spec = JobSpec.model_validate(rec.spec)
    job = spec.job(
        rec.id, rec.submitted_ms / 1000, rec.tenant, rec.queue, rec.priority_class, rec.user
    )
    return spec, job


def to_ms(seconds: float) -> int:
    return round(seconds * 1000)


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` on one line, at most ``limit`` characters (for reasons and events)."""
    line = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


INTERRUPTED = "interrupted"
"""How an attempt taken off faulty or drained hardware is marked: its stopping detail and its
ended row's detail start with it (its outcome is ``preempted``)."""


def is_interruption(detail: str | None) -> bool:
    """Whether an attempt's detail says the hardware interrupted it (not a preemption)."""
    return detail is not None and detail.startswith(INTERRUPTED)


def stopping_outcome(detail: str | None) -> Outcome:
    if detail == "preempted" or is_interruption(detail):
        return Outcome.PREEMPTED
    if detail == "cancel requested":
        return Outcome.CANCELLED
    return Outcome.FAILED
