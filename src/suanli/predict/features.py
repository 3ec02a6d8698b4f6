"""What a runtime predictor may know of a job at its submission, and the history it keeps.

Nothing here reads ``Job.runtime`` (the true runtime, known to the simulator only): a
predictor learns a runtime only when ``learn`` tells it, at the job's end.

* ``who(job)``: whose job it is: the user, or the tenant where the user is not known
  (``user == ""``; per-user limits count such a job under its tenant too).
* ``shape(job)``: the job's shape: (tasks, GPUs per task, milli-GPU per GPU).
* ``Codes``: categorical codes, assigned in first-seen order (deterministic for a call
  sequence).
* ``EndHistory``: per key, the runtimes learned so far in order of their end times, so that
  the history *as it was* at any instant (every job that had ended by then) can be read back.
* ``Features``: the feature row of a job (``NAMES``), from its request and from the history
  as it was at its submission.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Hashable

from suanli.core.model import Job

Shape = tuple[int, int, int]
Who = tuple[str, str]

RECENT = 16
"""How many of the user's most recent runtimes the history features summarise."""

NAMES: tuple[str, ...] = (
    "user",  # categorical: who(job)
    "tenant",  # categorical
    "tasks",
    "gpus_per_task",
    "gpus",  # tasks × GPUs per task
    "gpu_milli",
    "gpu_model",  # categorical: the requested models, "" if any will do
    "estimate",  # the user's estimate, NaN if none
    "hour",  # hour of day of the submission (seconds since the trace's start)
    "weekday",  # day of week of the submission, 0..6 from the trace's start
    "user_count",  # the user's jobs that had ended by the submission, at most RECENT
    "user_median",  # log1p of the median of the user's last RECENT runtimes
    "user_mean",  # log1p of their mean
    "user_last",  # log1p of the user's last runtime
    "user_shape_median",  # log1p of the median of the last RECENT of the user's at this shape
)
"""The features, in column order."""

CATEGORICAL: tuple[int, ...] = tuple(
    i for i, n in enumerate(NAMES) if n in ("user", "tenant", "gpu_model")
)
"""The columns that hold categorical codes."""

NAN = float("nan")


def who(job: Job) -> Who:
    """Whose job this is: ``("user", name)``, or ``("tenant", name)`` where the user is not
    known."""
    return ("user", job.user) if job.user else ("tenant", job.tenant)


def shape(job: Job) -> Shape:
    """(tasks, GPUs per task, milli-GPU per GPU)."""
    t = job.task
    return (job.tasks, t.gpus, t.gpu_milli)


def gpu_model(job: Job) -> str:
    """The GPU models the job accepts, sorted and joined by commas ("" if any will do)."""
    models = job.task.gpu_models
    return ",".join(sorted(models)) if models else ""


class Codes:
    """Categorical codes 0, 1, 2, ... in the order the values are first seen."""

    __slots__ = ("_codes",)

    def __init__(self) -> None:
        self._codes: dict[Hashable, int] = {}

    def __call__(self, value: Hashable) -> int:
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._codes)
        return code

    def __len__(self) -> int:
        return len(self._codes)


class _Ends:
    """One key's learned runtimes, sorted by end time (ties: in the order learned)."""

    __slots__ = ("ats", "runtimes")

    def __init__(self) -> None:
        self.ats: list[float] = []
        self.runtimes: list[float] = []

    def add(self, runtime: float, at: float) -> None:
        ats = self.ats
        if not ats or at >= ats[-1]:
            ats.append(at)
            self.runtimes.append(runtime)
        else:  # told out of order: keep the end-time order
            i = bisect_right(ats, at)
            ats.insert(i, at)
            self.runtimes.insert(i, runtime)

    def before(self, t: float) -> int:
        """How many had ended at or before ``t``."""
        ats = self.ats
        if not ats or t >= ats[-1]:
            return len(ats)
        return bisect_right(ats, t)


class EndHistory:
    """Learned runtimes per key, kept in end-time order: ``recent(key, t)`` is the key's
    history as it was at time ``t`` (the jobs that had ended at or before ``t``), whenever it
    is asked."""

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: dict[Hashable, _Ends] = {}

    def add(self, key: Hashable, runtime: float, at: float) -> None:
        ends = self._ends.get(key)
        if ends is None:
            ends = self._ends[key] = _Ends()
        ends.add(runtime, at)

    def recent(self, key: Hashable, t: float, n: int = RECENT) -> tuple[int, list[float]]:
        """(how many of the key's jobs had ended by ``t``, the runtimes of the last ``n`` of
        them, oldest first)."""
        ends = self._ends.get(key)
        if ends is None:
            return 0, []
        i = ends.before(t)
        return i, ends.runtimes[max(0, i - n) : i]


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])


class Features:
    """Feature rows (``NAMES``) for jobs, and the history they are computed from.

    A row's history features are the history as it was at the job's submission: only jobs
    that had ended at or before ``job.submit`` count, however late the row is computed.
    ``learn`` records an end; compute a job's own row before learning it."""

    __slots__ = ("users", "tenants", "models", "ends")

    def __init__(self) -> None:
        self.users = Codes()
        self.tenants = Codes()
        self.models = Codes()
        self.ends = EndHistory()

    def learn(self, job: Job, runtime: float, at: float) -> None:
        w = who(job)
        self.ends.add(w, runtime, at)
        self.ends.add((w, shape(job)), runtime, at)

    def row(self, job: Job) -> list[float]:
        w = who(job)
        t = job.task
        s = job.submit
        count, last = self.ends.recent(w, s)
        if last:
            med = math.log1p(_median(last))
            mean = math.log1p(sum(last) / len(last))
            latest = math.log1p(last[-1])
        else:
            med = mean = latest = NAN
        _, same = self.ends.recent((w, shape(job)), s)
        est = job.estimate
        return [
            float(self.users(w)),
            float(self.tenants(job.tenant)),
            float(job.tasks),
            float(t.gpus),
            float(job.tasks * t.gpus),
            float(t.gpu_milli),
            float(self.models(gpu_model(job))),
            float(est) if est is not None else NAN,
            float(int(s // 3600) % 24),
            float(int(s // 86_400) % 7),
            float(min(count, RECENT)),
            med,
            mean,
            latest,
            math.log1p(_median(same)) if same else NAN,
        ]
