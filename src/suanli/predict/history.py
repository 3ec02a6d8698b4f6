"""runtime/history: quantiles of the recent runtimes of similar jobs (QSSF's idea).

Helios' Quasi-Shortest-Service-First (Hu et al., "Characterization and Prediction of Deep
Learning Workloads in Large-Scale GPU Datacenters", SC'21) predicts a job's length from the
past jobs of the same user with a similar request. Here: per key, a rolling window of the
last ``window`` learned runtimes; a job's ``q``-quantile is the empirical ``q``-quantile of the
window of its most specific key that holds at least ``min_samples`` runtimes, keys from most
to least specific:

1. (user, shape): the user's jobs of the same shape (tasks, GPUs per task, milli-GPU);
2. the user;
3. the tenant;
4. the shape, anyone's;
5. all jobs.

Where a job's user is not known (``""``) its tenant stands in for it
(``suanli.predict.features.who``). Before any key qualifies the answer is the user's estimate
if given, else ``default``.

The empirical quantile interpolates linearly between order statistics (numpy's default,
``method="linear"``): deterministic and non-decreasing in ``q``. Each key keeps a sorted copy
of its window, made again only after the window changed, and the quantiles asked of it since
(plans ask every running job's ``duration`` at the same ``plan_q``), so a prediction is a few
dictionary look-ups.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable

import numpy as np

from suanli.core.model import Job, SpecError
from suanli.core.seams import PLAN_Q
from suanli.predict.features import shape, who

DEFAULT_RUNTIME = 86_400.0
"""Seconds assumed before anything is learned, for a job without an estimate (as
``runtime/estimate``: Slurm's ``DefaultTime``)."""

LEVELS = ("user+shape", "user", "tenant", "shape", "all")
"""The keys, most specific first (``HistoryPredictor.source`` names them)."""


def check_options(plugin: str, plan_q: float, default: float) -> None:
    """``SpecError`` naming ``plugin`` for a planning quantile outside (0, 1) or a default
    that is not a finite number of seconds >= 0."""
    if isinstance(plan_q, bool) or not isinstance(plan_q, int | float) or not 0 < plan_q < 1:
        raise SpecError(f"{plugin}: plan_q must be a quantile in (0, 1), got {plan_q!r}")
    if (
        isinstance(default, bool)
        or not isinstance(default, int | float)
        or not (default >= 0 and math.isfinite(default))
    ):
        raise SpecError(
            f"{plugin}: default must be a finite number of seconds >= 0, got {default!r}"
        )


def check_int(plugin: str, name: str, value: object, least: int) -> int:
    """``value`` as an int, or ``SpecError`` naming ``plugin`` and ``name`` unless it is an
    integer >= ``least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SpecError(f"{plugin}: {name} must be an integer >= {least}, got {value!r}")
    return value


def check_q(q: float) -> None:
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q!r}")


def check_runtime(runtime: float) -> None:
    if not (runtime >= 0 and math.isfinite(runtime)):
        raise ValueError(
            f"learned runtime must be a finite number of seconds >= 0, got {runtime!r}"
        )


class _Window:
    """One key's last runtimes; the sorted copy and the quantiles asked since it changed."""

    __slots__ = ("values", "_sorted", "_memo")

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=size)
        self._sorted: np.ndarray | None = None
        self._memo: dict[float, float] = {}

    def add(self, runtime: float) -> None:
        self.values.append(runtime)
        self._sorted = None
        self._memo.clear()

    def quantile(self, q: float) -> float:
        v = self._memo.get(q)
        if v is not None:
            return v
        a = self._sorted
        if a is None:
            a = self._sorted = np.sort(np.fromiter(self.values, dtype=np.float64))
        pos = q * (len(a) - 1)
        lo = int(pos)
        lo_v = float(a[lo])
        if lo + 1 < len(a):
            hi_v = float(a[lo + 1])
            # min(): rounding may never lift a point of one segment above the next one's start
            v = min(lo_v + (hi_v - lo_v) * (pos - lo), hi_v)
        else:
            v = lo_v
        self._memo[q] = v
        return v


class HistoryPredictor:
    """Quantiles of the last runtimes of the same user and shape, else user, tenant, shape, all.

    Options: ``plan_q`` (the quantile ``duration`` answers, ``PLAN_Q``), ``default`` (seconds,
    before anything is learned, for a job without an estimate), ``window`` (runtimes kept per
    key, 32) and ``min_samples`` (the fewest a key needs to answer, 3)."""

    plugin = "runtime/history"

    def __init__(
        self,
        plan_q: float = PLAN_Q,
        default: float = DEFAULT_RUNTIME,
        window: int = 32,
        min_samples: int = 3,
    ) -> None:
        check_options(self.plugin, plan_q, default)
        self.window = check_int(self.plugin, "window", window, 1)
        self.min_samples = check_int(self.plugin, "min_samples", min_samples, 1)
        if min_samples > window:
            raise SpecError(
                f"{self.plugin}: min_samples ({min_samples}) must be at most window ({window}): "
                "no key could ever answer"
            )
        self.plan_q = float(plan_q)
        self.default = float(default)
        self.learned = 0
        self._windows: dict[Hashable, _Window] = {}

    @staticmethod
    def _keys(job: Job) -> tuple[Hashable, ...]:
        w = who(job)
        s = shape(job)
        return ((0, w, s), (1, w), (2, job.tenant), (3, s), (4,))

    def _pick(self, job: Job) -> tuple[int, _Window | None]:
        windows = self._windows
        need = self.min_samples
        for level, key in enumerate(self._keys(job)):
            w = windows.get(key)
            if w is not None and len(w.values) >= need:
                return level, w
        return len(LEVELS), None

    def source(self, job: Job) -> str:
        """Which key answers for ``job`` now: one of ``LEVELS``, or "estimate" / "default"."""
        level, _ = self._pick(job)
        if level < len(LEVELS):
            return LEVELS[level]
        return "estimate" if job.estimate is not None else "default"

    def quantile(self, job: Job, q: float) -> float:
        check_q(q)
        _, w = self._pick(job)
        if w is None:
            est = job.estimate
            return float(est) if est is not None else self.default
        return w.quantile(q)

    def duration(self, job: Job) -> float:
        return self.quantile(job, self.plan_q)

    def learn(self, job: Job, runtime: float, at: float) -> None:
        check_runtime(runtime)
        rt = float(runtime)
        windows = self._windows
        for key in self._keys(job):
            w = windows.get(key)
            if w is None:
                w = windows[key] = _Window(self.window)
            w.add(rt)
        self.learned += 1
