"""Every attempt of every job, with what it held: the simulator's input to metering.

An attempt is one run of a job, from its start until it finished, was preempted, or was still
running when the clock stopped (``until``). ``AttemptLog`` collects them during a replay in
plain lists (cheap appends on the hot path) and turns them into ``AttemptUse`` arrays at the
end. What an attempt held: milli-GPU, milli-CPU and MiB summed over its tasks, and the GPU
model of its nodes (``model``, an index into ``AttemptUse.models``); an attempt whose tasks
sit on nodes of different models keeps its split per model in ``mixed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from suanli.core.decisions import JobPlacement

ATTEMPT_COLUMNS = (
    "job",
    "attempt",
    "tenant",
    "queue",
    "priority_class",
    "start",
    "end",
    "outcome",
    "gpu",
    "gpu_milli",
    "cpu_milli",
    "memory_mib",
    "gpu_util",
    "storage_gb",
    "network_gb",
)
"""One row per attempt (``<stem>-attempts.csv``): what metering reads. ``gpu`` is
``MODEL=milli`` (``;``-separated when an attempt spans GPU models); ``network_gb`` is the job's
declared transfer, shared among its attempts in proportion to their durations."""

FINISHED, PREEMPTED, RUNNING, FAILED = 0, 1, 2, 3
OUTCOMES = ("finished", "preempted", "running", "failed")
"""Attempt outcomes by code: it ended, it was evicted, it was cut by the end of the run, or
the hardware under it failed."""


@dataclass(slots=True)
class AttemptUse:
    """Per attempt (aligned with ``JobRecords.attempts``): what it held and how it ended."""

    gpu_milli: np.ndarray
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    model: np.ndarray
    """Index into ``models`` of the GPU model of the attempt's nodes (-1: no GPU model)."""
    outcome: np.ndarray
    """``FINISHED``, ``PREEMPTED``, ``RUNNING`` or ``FAILED`` (see ``OUTCOMES``)."""
    models: tuple[str, ...]
    mixed: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    """Attempts on nodes of several GPU models: attempt index -> ((model index, milli-GPU), ...)."""

    def per_model(self, values: np.ndarray) -> dict[str, float]:
        """``values`` (one figure per attempt, such as the milli-GPU-seconds it held) summed
        per GPU model name; an attempt across models is split by its milli-GPU on each.
        Attempts without a GPU model are left out."""
        out: dict[str, float] = {}
        for m in np.unique(self.model).tolist():
            if m >= 0:
                out[self.models[m]] = float(values[self.model == m].sum())
        # An attempt across models was counted under its first node's; split it by milli-GPU.
        for a, split in self.mixed.items():
            total = sum(milli for _, milli in split) or 1
            first = self.models[int(self.model[a])]
            out[first] -= float(values[a])
            for m, milli in split:
                name = self.models[m]
                out[name] = out.get(name, 0.0) + float(values[a]) * milli / total
        return out

    def gpu_by_model(self, a: int) -> tuple[tuple[str, int], ...]:
        """Attempt ``a``'s milli-GPU per GPU model name."""
        split = self.mixed.get(a)
        if split is not None:
            return tuple((self.models[m], milli) for m, milli in split)
        g = int(self.gpu_milli[a])
        m = int(self.model[a])
        if not g:
            return ()
        return ((self.models[m] if m >= 0 else "", g),)


class AttemptLog:
    """Collects attempts during a replay (see the module docstring)."""

    def __init__(self, node_model: Sequence[int], models: Sequence[str]) -> None:
        self._node_model = list(node_model)
        self._models = tuple(models)
        self.job: list[int] = []
        self.start: list[float] = []
        self.end: list[float] = []
        self._gpu: list[int] = []
        self._cpu: list[int] = []
        self._mem: list[int] = []
        self._model: list[int] = []
        self._outcome: list[int] = []
        self._mixed: dict[int, tuple[tuple[int, int], ...]] = {}

    def add(self, i: int, start: float, end: float, p: JobPlacement, outcome: int) -> None:
        """Job ``i``'s attempt from ``start`` to ``end`` holding ``p``."""
        self.job.append(i)
        self.start.append(start)
        self.end.append(end)
        self._gpu.append(p.gpu_milli)
        self._outcome.append(outcome)
        tasks = p.tasks
        nm = self._node_model
        if len(tasks) == 1:
            tp = tasks[0]
            self._cpu.append(tp.cpu_milli)
            self._mem.append(tp.memory_mib)
            self._model.append(nm[tp.node])
            return
        cpu = mem = 0
        per: dict[int, int] = {}
        for tp in tasks:
            cpu += tp.cpu_milli
            mem += tp.memory_mib
            m = nm[tp.node]
            per[m] = per.get(m, 0) + tp.gpu_milli * len(tp.gpus)
        self._cpu.append(cpu)
        self._mem.append(mem)
        self._model.append(nm[tasks[0].node])
        if len(per) > 1:
            self._mixed[len(self.job) - 1] = tuple(sorted(per.items()))

    def arrays(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], AttemptUse]:
        """``JobRecords.attempts`` (job index, start, end) and the matching ``AttemptUse``."""
        times = (
            np.array(self.job, dtype=np.int64),
            np.array(self.start, dtype=np.float64),
            np.array(self.end, dtype=np.float64),
        )
        use = AttemptUse(
            gpu_milli=np.array(self._gpu, dtype=np.int64),
            cpu_milli=np.array(self._cpu, dtype=np.int64),
            memory_mib=np.array(self._mem, dtype=np.int64),
            model=np.array(self._model, dtype=np.int64),
            outcome=np.array(self._outcome, dtype=np.int8),
            models=self._models,
            mixed=dict(self._mixed),
        )
        return times, use
