"""A deterministic in-memory backend: no processes, time comes from an injected clock.

For tests and for checking that the control plane and the simulator agree. A task's
runtime is declared in its environment (``SUANLI_FAKE_RUNTIME_S``, seconds); without it the
task runs until stopped. Everything that happens depends only on the launches, the stops
and the clock, so two runs with the same inputs report the same Exits in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from suanli.backends.base import (
    STOP_OUTCOMES,
    Elastic,
    Exit,
    Handle,
    Launch,
    Outcome,
    job_dir_name,
    signal_number,
    task_environment,
)
from suanli.backends.prepare import Prepare

RUNTIME_VARIABLE = "SUANLI_FAKE_RUNTIME_S"


@dataclass(slots=True)
class _FakeTask:
    spec: Launch
    handle: Handle
    started_at: float
    runtime_s: float | None  # None: runs until stopped
    stopped: Exit | None = None
    reported: Exit | None = None
    natural: Exit | None = field(init=False)
    """How the task ends if nobody stops it (``natural_exit``), worked out once: a poll
    looks at every running task."""

    def __post_init__(self) -> None:
        self.natural = self._natural_exit()

    def natural_exit(self) -> Exit | None:
        """How the task ends if nobody stops it; None if it never ends by itself."""
        return self.natural

    def _natural_exit(self) -> Exit | None:
        limit = self.spec.max_runtime_s
        if self.runtime_s is not None and (limit is None or self.runtime_s <= limit):
            return Exit(
                self.handle,
                Outcome.SUCCEEDED,
                0,
                None,
                self.started_at + self.runtime_s,
                "exit code 0",
            )
        if limit is not None:
            sig = signal_number(self.spec.stop_signal)
            return Exit(
                self.handle,
                Outcome.TIMED_OUT,
                None,
                sig,
                self.started_at + limit,
                f"stopped after max runtime {limit:g} s: killed by {self.spec.stop_signal}",
            )
        return None

    def exit_at(self, now: float) -> Exit | None:
        """The task's Exit if it has ended by ``now``."""
        if self.stopped is not None:
            return self.stopped
        natural = self.natural
        if natural is not None and natural.finished_at <= now:
            return natural
        return None


def _order(exit_: Exit) -> tuple[float, str, int, int]:
    h = exit_.handle
    return (exit_.finished_at, h.job_id, h.task, h.attempt)


class FakeBackend:
    """An in-memory :class:`~suanli.backends.base.Backend` driven by ``clock``.

    ``launched`` lists every launch in order. :meth:`restart` forgets what is tracked (as a
    restarted control plane would) while the tasks keep "running", so :meth:`adopt` can be
    exercised the same way as with the local backend.
    """

    def __init__(
        self, clock: Callable[[], float], addresses: Mapping[str, str] | None = None
    ) -> None:
        self._clock = clock
        self.addresses = dict(addresses or {})
        """Each node's address (``node_address``; a node not named here: loopback)."""
        self.launched: list[Launch] = []
        self.released: list[tuple[str, int]] = []  # attempts the control plane was done with
        self._world: dict[tuple[str, int, int], _FakeTask] = {}
        self._tracked: dict[tuple[str, int, int], None] = {}  # insertion-ordered set
        self._next_pid = 1
        self.files: dict[tuple[str, int, int], Elastic] = {}  # each elastic task's file
        self.resized: list[tuple[tuple[str, int, int], Elastic]] = []  # resizes told, in order
        self.prepared: list[tuple[Prepare, float]] = []  # pre-staging asked for, and when

    def prepare(self, job: Prepare) -> str:
        """Record that ``job`` was to be prepared (nothing to read ahead in memory)."""
        self.prepared.append((job, self._clock()))
        return f"recorded for {len(job.nodes)} node(s)"

    def launch(self, spec: Launch) -> Handle:
        task_environment(spec)  # same validation as the real backends
        runtime_s = _declared_runtime(spec)
        key = (spec.job_id, spec.attempt, spec.task)
        if key in self._world:
            raise FileExistsError(f"task {key} was already launched: launch a new attempt")
        pid = self._next_pid
        self._next_pid += 1
        run_dir = f"fake/{job_dir_name(spec.job_id)}/{spec.attempt}/{spec.task}"
        handle = Handle(spec.job_id, spec.attempt, spec.task, pid, pid, run_dir)
        self._world[key] = _FakeTask(spec, handle, self._clock(), runtime_s)
        self._tracked[key] = None
        self.launched.append(spec)
        if spec.elastic is not None:
            self.files[key] = Elastic.of(spec.elastic)
        return handle

    def resize(self, handle: Handle, told: Elastic) -> None:
        """Rewrite the task's elastic file (and "signal" it); no-op if it has ended."""
        task = self._world.get(handle.key)
        if task is None or task.handle != handle or task.exit_at(self._clock()) is not None:
            return
        self.files[handle.key] = told
        self.resized.append((handle.key, told))

    def elastic(self, handle: Handle) -> Elastic | None:
        return self.files.get(handle.key)

    def node_address(self, node: str) -> str:
        """The node's address in ``addresses``, else loopback (the fake runs nothing)."""
        return self.addresses.get(node, "127.0.0.1")

    def poll(self) -> list[Exit]:
        """Tasks that have ended by ``clock()``, ordered by (finished_at, job_id, task)."""
        now = self._clock()
        exits = []
        for key in list(self._tracked):
            task = self._world[key]
            ended = task.exit_at(now)
            if ended is not None:
                task.reported = ended
                del self._tracked[key]
                exits.append(ended)
        exits.sort(key=_order)
        return exits

    def next_exit_at(self) -> float | None:
        """When the next tracked task ends, by itself or as stopped (None: none will), for a driver that
        advances a fake clock from event to event."""
        ends = [
            end.finished_at
            for key in self._tracked
            if (end := self._world[key].stopped or self._world[key].natural) is not None
        ]
        return min(ends, default=None)

    def stop(self, handle: Handle, outcome: Outcome) -> None:
        """End the task now with ``outcome``; reported by the next poll. No-op if it ended."""
        if outcome not in STOP_OUTCOMES:
            raise ValueError(f"outcome: stop takes CANCELLED or PREEMPTED, got {outcome!r}")
        task = self._world.get(handle.key)
        if task is None or task.handle != handle:
            return
        now = self._clock()
        if task.exit_at(now) is not None:
            return
        name = task.spec.stop_signal
        task.stopped = Exit(
            handle,
            outcome,
            None,
            signal_number(name),
            now,
            f"{outcome.value} with {name}: killed by {name}",
        )

    def crash(self, handle: Handle, detail: str = "exit code 1") -> None:
        """End the task now as failed (exit code 1), as a process that crashed: what a task
        on a GPU that faults does. Reported by the next poll; no-op if it ended."""
        task = self._world.get(handle.key)
        now = self._clock()
        if task is None or task.handle != handle or task.exit_at(now) is not None:
            return
        task.stopped = Exit(handle, Outcome.FAILED, 1, None, now, detail)

    def adopt(self, handles: Iterable[Handle]) -> list[Exit]:
        """Re-track known running tasks; Exits for known ended ones; LOST for unknown ones."""
        now = self._clock()
        exits = []
        for handle in handles:
            task = self._world.get(handle.key)
            if task is None or task.handle != handle:
                exits.append(
                    Exit(handle, Outcome.LOST, None, None, now, "no such task on this backend")
                )
                continue
            if handle.key in self._tracked:
                continue
            ended = task.reported or task.exit_at(now)
            if ended is None:
                self._tracked[handle.key] = None
            else:
                task.reported = ended
                exits.append(ended)
        exits.sort(key=_order)
        return exits

    def running(self) -> list[Handle]:
        """Tracked tasks whose end has not been reported yet, in launch/adoption order."""
        return [self._world[key].handle for key in self._tracked]

    def find(self, job_id: str, attempt: int, task: int) -> Handle | None:
        """The handle of a task launched (on this fake world) earlier, if any."""
        found = self._world.get((job_id, attempt, task))
        return None if found is None else found.handle

    def release(self, job_id: str, attempt: int) -> None:
        """Nothing is kept for an attempt."""
        self.released.append((job_id, attempt))

    def log_paths(self, handle: Handle) -> tuple[Path, Path]:
        """Where the logs would be; the fake writes none."""
        run_dir = Path(handle.run_dir)
        return run_dir / "stdout.log", run_dir / "stderr.log"

    def restart(self) -> None:
        """Forget every tracked task, as a restarted control plane would; tasks go on."""
        self._tracked.clear()


def _declared_runtime(spec: Launch) -> float | None:
    value = dict(spec.env).get(RUNTIME_VARIABLE)
    if value is None:
        return None
    try:
        runtime_s = float(value)
    except ValueError:
        raise ValueError(f"env: {RUNTIME_VARIABLE} must be a number, got {value!r}") from None
    if not math.isfinite(runtime_s) or runtime_s < 0:
        raise ValueError(f"env: {RUNTIME_VARIABLE} must be a finite number >= 0, got {value!r}")
    return runtime_s
