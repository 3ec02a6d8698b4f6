"""What each fair-share group holds now, and its decayed usage (``queue/drf``, ``fair-share``).

A group is a queue (the quota queue, or the jobs' ``queue`` name). ``Shares`` keeps, per group,
the GPU (milli), CPU (milli) and memory (MiB) its running jobs hold, and for ``usage`` mode the
integral of its dominant share over time, halved every ``half_life`` seconds. ``share(g)`` is
the key fair sharing orders by (lower goes first), divided by the group's weight.
"""

from __future__ import annotations

import math

import numpy as np

from suanli.core.decisions import JobPlacement


class Shares:
    """Per-group holdings and decayed usage; see the module docstring."""

    def __init__(self, mode: str, half_life: float, capacity: np.ndarray) -> None:
        self.mode = mode  # "drf" or "usage"
        self.half_life = half_life
        self.inv_cap = np.where(capacity > 0, 1.0 / np.maximum(capacity, 1.0), 0.0)
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.weight: list[float] = []
        self.held = np.zeros((0, 3))
        self.decayed = np.zeros(0)
        self.clock = 0.0
        self.of_job: dict[str, int] = {}

    def group(self, name: str, weight: float = 1.0) -> int:
        """The index of group ``name``, added on first sight with ``weight``."""
        g = self.ids.get(name)
        if g is None:
            g = self.ids[name] = len(self.ids)
            self.names.append(name)
            self.weight.append(weight)
            self.held = np.vstack((self.held, np.zeros(3)))
            self.decayed = np.append(self.decayed, 0.0)
        return g

    def share(self, g: int) -> float:
        """Group ``g``'s key: dominant share now (``drf``) or decayed usage, ÷ weight."""
        if self.mode == "drf":
            return float((self.held[g] * self.inv_cap).max()) / self.weight[g]
        return float(self.decayed[g]) / self.weight[g]

    def start(self, job_id: str, g: int, placement: JobPlacement) -> None:
        """Job ``job_id`` of group ``g`` now holds ``placement``."""
        self.of_job[job_id] = g
        self._add(g, placement, 1)

    def stop(self, job_id: str, placement: JobPlacement) -> int:
        """Job ``job_id`` no longer holds ``placement``; returns its group."""
        g = self.of_job.pop(job_id)
        self._add(g, placement, -1)
        return g

    def _add(self, g: int, placement: JobPlacement, sign: int) -> None:
        held = self.held[g]
        for tp in placement.tasks:
            held[0] += sign * tp.gpu_milli * len(tp.gpus)
            held[1] += sign * tp.cpu_milli
            held[2] += sign * tp.memory_mib

    def decay(self, now: float) -> None:
        """Advance every group's decayed usage to ``now`` (holdings constant since the last)."""
        dt = now - self.clock
        if self.mode != "usage" or dt <= 0 or not len(self.decayed):
            return
        self.clock = now
        h = self.half_life
        f = 0.5 ** (dt / h)
        dominant = (self.held * self.inv_cap).max(axis=1)
        self.decayed = self.decayed * f + dominant * (h / math.log(2)) * (1.0 - f)
