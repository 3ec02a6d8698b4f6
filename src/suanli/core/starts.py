"""Start-time estimates for pending jobs: when each would start if the queue ran as planned
(Slurm's ``squeue --start``).

The plan is conservative backfill (Mu'alem and Feitelson) on a profile of free GPU capacity
over time: running jobs hold what they hold until their expected end, and each pending job,
in queue order, takes the earliest window in which its whole request fits without moving any
job planned before it. Each job is planned at its *expected* runtime (a queue drains at the
mean, not the median, of heavy-tailed runtimes): the scheduler's estimator's median times the
mean ratio of runtime to predicted median over the jobs that have ended (the calibration),
and a running job at the mean of that ratio over the past jobs that ran longer than it has
so far (with fewer than 20 of those, as long again as it has run). It is never stopped for
outliving anything; the next plan is made around it.

The range given (``Estimate``) is the planned wait scaled by the median and the P90 of how
real waits compared with the waits first planned for jobs that have since started: an honest
spread, learned from what happened (the plan alone knows nothing of the jobs that will
arrive and jump ahead in a shortest-first queue, nor of its own errors).

Capacity is counted per *pool*, not per node: the healthy nodes a job's task could use (its
GPU models, its GPU memory, and, for whole GPUs, nodes with at least as many GPUs as a task
asks for), in milli-GPU. A reservation is charged to every pool that shares a node with its
own. So the plan sees a pool's capacity but not how it is split over nodes: a gang of big
tasks may start later than planned when free GPUs are scattered (the estimate's error, as
measured by ``suanli bench predict``, includes it).

The plan's time is cut into buckets (``grid``: the first 10 s long, each next 2% longer):
a job starts at a bucket's edge and holds its buckets up to the edge nearest its end, so a
plan of 6,000 pending jobs around 8,500 running ones costs tens of milliseconds
(``benchmarks/bench_starts.py``); a start is placed to within 10 s or 2% of how far ahead it
is.

Estimates are made at submission and on request, never every cycle, and do not jump: a plan
is kept for ``refresh`` seconds (jobs submitted meanwhile are placed after the jobs it holds,
as conservative backfill would); after that the next request plans again from what is
running and pending then (unless those are the same jobs and nothing the plan foresaw, an
end or a start, has come: the same plan would come out), and an estimate already given stands
unless the new plan moves it by more than ``DAMPING`` of how far ahead it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
from numba import njit

from suanli.core.decisions import JobPlacement
from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.registry import create
from suanli.core.seams import PLAN_Q, RuntimeEstimator
from suanli.core.view import ClusterView

REFRESH_S = 300.0
"""How long a plan answers before the next request plans again (seconds)."""

ROW_COLS = 6
"""What a plan needs of a job, a row of ``StartEstimator``'s table: its pool, the milli-GPU
it asks for, its predicted median (the calibration's base), the estimator's own P50 and P90,
and how many jobs had ended when it was predicted."""

RunningRow = tuple[Job, float, JobPlacement]
"""A running job, the start of its current attempt, and where it runs."""

MIN_WAIT_S = 60.0
"""Planned waits at least this long are calibrated (a shorter one is given as planned)."""

CALIBRATION_WINDOW = 5000
"""Ended jobs the calibration remembers (the latest)."""

GRID_STEP_S = 10.0
GRID_GROWTH = 1.02
GRID_BUCKETS = 800
"""A plan's time buckets: the first 10 s long, each next 2% longer (800 reach a century
ahead); a start is placed to within 10 s or 2% of how far ahead it is."""

DAMPING = 0.1
"""A new plan moves an estimate already given only by more than this share of how far
ahead it is (so plans made a minute apart on the same state, on grids a minute apart, do
not make it jump; a real change, a job ending early, moves it)."""

MIN_SAMPLES = 20
"""Ended jobs (longer than a running job has run, for its end) the calibration needs."""


def _ranged(start: float, at: float, lo: float, hi: float) -> tuple[float, float]:
    """A planned start made at ``at`` as a range: the planned wait scaled by ``lo`` and
    ``hi`` (the calibration's P50 and P90 of real over planned waits), for waits of at least
    ``MIN_WAIT_S`` (a shorter one is given as planned)."""
    wait = start - at
    if wait >= MIN_WAIT_S and math.isfinite(wait):
        return at + wait * lo, at + wait * max(hi, lo)
    return start, start


def _close(said: float, new: float, now: float) -> bool:
    """Whether a new plan's time ``new`` is within the damping of the time ``said`` before:
    ``DAMPING`` of how far ahead it is, or a bucket's first width."""
    if said == new:
        return True
    if not (math.isfinite(said) and math.isfinite(new)):
        return False
    return abs(new - said) <= max(GRID_STEP_S, DAMPING * (said - now))


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a pending job is expected to start, as a range: ``p50`` and ``p90``, absolute
    times (its start is as likely before ``p50`` as after; nine in ten start by ``p90``);
    ``planned_at`` is when the plan was made. Both are ``inf`` for a job no healthy pool
    could ever hold."""

    p50: float
    p90: float
    planned_at: float

    @property
    def known(self) -> bool:
        return math.isfinite(self.p50)


def grid(
    now: float, step: float = GRID_STEP_S, growth: float = GRID_GROWTH, buckets: int = GRID_BUCKETS
) -> np.ndarray:
    """The edges of a plan's time buckets from ``now``: the first ``step`` seconds long, each
    next one ``growth`` times the last (so a start ``x`` seconds ahead is placed to within
    about ``(growth - 1) * x``); the last bucket never ends."""
    edges = np.empty(buckets + 1, np.float64)
    edges[0] = now
    edges[1:-1] = now + np.cumsum(step * growth ** np.arange(buckets - 1))
    edges[-1] = np.inf
    return edges


@njit(cache=True, nogil=True)
def _charge_running(edges, run_end, run_use, used):  # type: ignore[no-untyped-def]
    """``used`` (pools × buckets) from the running jobs: each holds what it holds until the
    bucket edge nearest its expected end."""
    n_pools, nb = used.shape
    diff = np.zeros((n_pools, nb + 1), np.int64)
    for r in range(run_end.shape[0]):
        e = run_end[r]
        b = np.searchsorted(edges, e, side="right") - 1
        if b >= 0 and b < nb and e <= edges[b] + 0.5 * (edges[b + 1] - edges[b]):
            b -= 1  # it ends in the first half of its bucket: free from the bucket's start
        if b < 0:
            continue
        for q in range(n_pools):
            diff[q, 0] += run_use[r, q]
            diff[q, min(b + 1, nb)] -= run_use[r, q]
    for q in range(n_pools):
        acc = 0
        for b in range(nb):
            acc += diff[q, b]
            used[q, b] = acc


@njit(cache=True, nogil=True)
def _earliest(edges, now, c, p, k, dur, used):  # type: ignore[no-untyped-def]
    """From bucket ``k`` on, the earliest bucket from which a run of ``dur`` fits pool
    ``p`` of ``used`` with ``c`` left to others in every bucket it holds: (that bucket, the
    first bucket past the run, the start)."""
    nb = used.shape[1]
    while True:
        t0 = max(edges[k], now)
        end = t0 + dur
        i = k
        ok = True
        # The buckets its run holds: its first, and each whose middle it reaches (ends fall
        # to the nearest edge, so a chain of jobs neither gains nor loses on average).
        while i < nb and (i == k or edges[i] + 0.5 * (edges[i + 1] - edges[i]) < end):
            if used[p, i] > c:
                ok = False
                break
            i += 1
        if ok:
            return k, i, t0
        k = i + 1


@njit(cache=True, nogil=True)
def _plan(cap, overlap, edges, first, now, pool, dem, dur, used, out):  # type: ignore[no-untyped-def]
    """Place jobs (``pool``, ``dem``, ``dur``, in queue order) on ``used`` (pools × the
    buckets of ``edges``), none before bucket ``first`` nor before ``now``: each at the start
    of the earliest bucket from which its request fits in every bucket its run touches,
    charged to every pool that shares a node with its own. Starts go to ``out``."""
    n_pools, nb = used.shape
    # Per pool, a bucket before which none has room for the smallest of these jobs (a busy
    # queue's front has none).
    full = np.full(n_pools, first)
    smallest = np.full(n_pools, np.iinfo(np.int64).max)
    for j in range(pool.shape[0]):
        if pool[j] >= 0 and 0 < dem[j] < smallest[pool[j]]:
            smallest[pool[j]] = dem[j]
    for j in range(pool.shape[0]):
        p = pool[j]
        d = dem[j]
        if p < 0 or d <= 0:
            out[j] = now
            continue
        if d > cap[p]:
            out[j] = np.inf
            continue
        room = cap[p] - smallest[p]
        k = full[p]
        while k < nb - 1 and used[p, k] > room:
            k += 1
        full[p] = k
        k, i, t0 = _earliest(edges, now, cap[p] - d, p, k, dur[j], used)
        out[j] = t0
        for q in range(n_pools):
            if overlap[p, q]:
                for x in range(k, i):
                    used[q, x] += d


@njit(cache=True, nogil=True)
def _probe(cap, edges, first, now, p, d, dur, used):  # type: ignore[no-untyped-def]
    """Where ``_plan`` would place one job (pool ``p``, demand ``d``, duration ``dur``) on
    ``used``, without charging it: its start."""
    if p < 0 or d <= 0:
        return now
    if d > cap[p]:
        return np.inf
    return _earliest(edges, now, cap[p] - d, p, first, dur, used)[2]


class _Calibration:
    """How what happened compared with what was foreseen: the log of the ratio (a runtime to
    its predicted median; a wait to its planned wait) over the last ``window`` cases.

    The ratios are kept sorted as they come (the one that leaves the window taken out, the
    new one put in: two shifts of the array, where sorting it again at every use after a job
    ended was most of an estimate's cost); the suffix sums are worked out again on use."""

    def __init__(self, window: int = CALIBRATION_WINDOW) -> None:
        self.window = window
        self._ring = np.zeros(window, np.float64)
        self._buf = np.zeros(window, np.float64)  # the ring's values, sorted, in [:m]
        self.n = 0
        self._sorted: np.ndarray | None = None
        self._suffix = np.zeros(1)

    def learn(self, base: float, runtime: float) -> None:
        v = math.log(max(runtime, 1.0) / max(base, 1.0))
        buf, m, k = self._buf, min(self.n, self.window), self.n % self.window
        if self.n >= self.window:  # the oldest leaves the window
            i = int(np.searchsorted(buf[:m], self._ring[k]))
            buf[i : m - 1] = buf[i + 1 : m]
            m -= 1
        j = int(np.searchsorted(buf[:m], v))
        buf[j + 1 : m + 1] = buf[j:m]
        buf[j] = v
        self._ring[k] = v
        self.n += 1
        self._sorted = None

    @property
    def ready(self) -> bool:
        return self.n >= MIN_SAMPLES

    def _ready_sorted(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            s = self._buf[: min(self.n, self.window)].copy()
            # Suffix sums of the ratios: the mean of those above any point in one step.
            self._sorted = s
            self._suffix = np.concatenate((np.cumsum(np.exp(s)[::-1])[::-1], [0.0]))
        return self._sorted, self._suffix

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the ratio."""
        s, _ = self._ready_sorted()
        return float(np.exp(s[min(int(q * (len(s) - 1)), len(s) - 1)]))

    def expected(self, base: np.ndarray, age: np.ndarray) -> np.ndarray:
        """Each job's expected runtime given that it has run ``age`` seconds: its base times
        the mean ratio of the past jobs whose ratio is above what it has run already (or, with
        too few of them, as long again as it has run)."""
        s, suffix = self._ready_sorted()
        b = np.maximum(base, 1.0)
        x = np.log(np.maximum(age, 1e-9) / b)
        lo = np.searchsorted(s, x, side="right")
        left = len(s) - lo  # past jobs that ran longer, against their base, than this one has
        mean = b * suffix[lo] / np.maximum(left, 1)
        return np.maximum(np.where(left >= MIN_SAMPLES, mean, 2.0 * age), age)


class _Ids:
    """The ids a plan is made on, gathered once: the running attempts (job id, start) and
    jobs, the queue's jobs; ``state`` fingerprints them (the same jobs, the same plan)."""

    __slots__ = ("attempts", "running", "queue", "_state")

    def __init__(self, rows: Sequence[RunningRow], pending: Sequence[Job]) -> None:
        self.attempts = [(r[0].id, r[1]) for r in rows]
        self.running = [a[0] for a in self.attempts]
        self.queue = [j.id for j in pending]
        self._state: int | None = None

    @property
    def state(self) -> int:
        if self._state is None:
            self._state = hash((tuple(self.attempts), tuple(self.queue)))
        return self._state


class StartEstimator:
    """Start-time estimates (see the module docstring) over ``view`` with the runtimes of
    ``runtime``; ``refresh``: seconds a plan answers before the next request plans again.
    ``learn`` is told each job's runtime when it ends (for the calibration)."""

    def __init__(
        self, view: ClusterView, runtime: RuntimeEstimator, refresh: float = REFRESH_S
    ) -> None:
        if not refresh >= 0:
            raise ValueError(f"refresh must be >= 0 seconds, got {refresh}")
        self.view = view
        self.runtime = runtime
        self.refresh = refresh
        self._quantile = getattr(runtime, "quantile", None)
        self.calibration = _Calibration()
        """Ended jobs' runtimes against their predicted medians."""
        self.waits = _Calibration()
        """Started jobs' waits against the waits first planned for them on calibrated
        runtimes (those planned to wait at least ``MIN_WAIT_S``)."""
        self._said: dict[str, tuple[float, float]] = {}  # id -> first (planned at, start)
        self._pool_of: dict[tuple[frozenset[str], int, int, bool], int] = {}
        self._pool_by_mask: dict[bytes, int] = {}
        self._masks: list[np.ndarray] = []
        self._health = -1
        self._cap = np.zeros(0, np.int64)
        self._overlap = np.zeros((0, 0), np.bool_)
        # The jobs' rows (``ROW_COLS``), one slot each: a plan gathers its jobs' rows at once.
        self._slot: dict[str, int] = {}
        self._table = np.zeros((64, ROW_COLS), np.float64)
        self._free: list[int] = []
        self._ended = 0  # jobs ended so far (``learn``)
        # Per running attempt (job id, start): milli-GPU it holds in each pool.
        self._use: dict[tuple[str, float], np.ndarray] = {}
        self._planned_at = -math.inf
        self._edges = grid(0.0)
        self._plans: list[np.ndarray] = []  # the plan: milli-GPU used, pools × buckets
        # The plan's jobs: id -> index into the planned starts and the times they were placed.
        self._known: dict[str, int] = {}
        self._kstart: list[float] = []
        self._kat: list[float] = []
        self._shown: dict[str, Estimate] = {}  # id -> the estimate last given for it
        self._planned_state = 0
        self._next_event = -math.inf
        self.plans = 0
        """Full plans made so far (each request within ``refresh`` of one reuses it)."""

    # ---------------------------------------------------------------- pools
    def _pool(self, task: TaskRequest) -> int:
        """The pool of ``task``: tasks that could use the same nodes share one."""
        whole = task.gpus > 0 and task.gpu_milli >= MILLI
        key = (task.gpu_models, task.gpu_memory_mib if whole else 0, task.gpus, whole)
        p = self._pool_of.get(key)
        if p is None:
            view = self.view
            mask = view.task_ok(task) & (view.node_gpus >= max(task.gpus, 1))
            p = self._pool_by_mask.setdefault(mask.tobytes(), len(self._masks))
            if p == len(self._masks):
                self._masks.append(mask)
                self._health = -1  # capacities and overlaps are worked out again
            self._pool_of[key] = p
        return p

    def _pools_ready(self) -> None:
        view = self.view
        if self._health == view.health_changes and len(self._cap) == len(self._masks):
            return
        masks = np.array(self._masks, dtype=np.bool_).reshape(len(self._masks), view.n_nodes)
        live = masks & view.healthy[None, :]
        gpus = view.node_gpus
        if view.any_out:  # GPUs out of service hold nothing anyone waits for
            gpus = gpus - view.gpu_out.sum(axis=1)
        self._cap = (live * gpus[None, :]).sum(axis=1).astype(np.int64) * MILLI
        self._overlap = (live.astype(np.int64) @ live.T.astype(np.int64)) > 0
        np.fill_diagonal(self._overlap, True)
        self._health = view.health_changes

    # ---------------------------------------------------------------- runtimes
    def _slots(self, jobs: Sequence[Job], ids: Sequence[str] | None = None) -> np.ndarray:
        """The slots of the jobs' rows in the table (``ids``: their ids, if at hand), each
        predicted again once twice as many jobs have ended as when it last was (a prediction
        made early, from little, does not stay)."""
        slot, ended = self._slot, self._ended
        if len(jobs) <= 4:  # (one arrival: no array work to find out)
            out = []
            for j in jobs:
                i = slot.get(j.id)
                if i is None or self._table[i, 5] * 2 + 1 <= ended:
                    i = self._predict([j])[0]
                out.append(i)
            return np.array(out, np.int64)
        if ids is None:
            ids = [j.id for j in jobs]
        idx = np.fromiter(map(slot.get, ids, repeat(-1)), np.int64, len(ids))
        redo = np.flatnonzero((idx < 0) | (self._table[idx, 5] * 2 + 1 <= ended))
        if len(redo):
            idx[redo] = self._predict([jobs[k] for k in redo.tolist()])
        return idx

    def _predict(self, jobs: Sequence[Job]) -> list[int]:
        """Predict the jobs' rows into the table (a slot each, kept or new): their slots."""
        slot, free = self._slot, self._free
        short = sum(1 for j in jobs if j.id not in slot) - len(free)
        if short > 0:
            n = len(self._table)
            grow = max(n, short)
            self._table = np.concatenate((self._table, np.zeros((grow, ROW_COLS))))
            free.extend(range(n + grow - 1, n - 1, -1))
        quantile, ended = self._quantile, self._ended
        at, rows = [], []
        for job in jobs:
            i = slot.get(job.id)
            if i is None:
                i = slot[job.id] = free.pop()
            t = job.task
            if quantile is not None:
                lo, hi = (max(0.0, float(quantile(job, q))) for q in (0.5, PLAN_Q))
            else:
                lo = hi = max(0.0, float(self.runtime.duration(job)))
            at.append(i)
            rows.append((self._pool(t), t.gpus * t.gpu_milli * job.tasks, lo, lo, hi, ended))
        self._table[at] = rows
        return at

    def _rows(self, jobs: Sequence[Job], ids: Sequence[str] | None = None) -> np.ndarray:
        """The jobs' rows (a copy)."""
        idx = self._slots(jobs, ids)  # (may grow the table)
        return self._table[idx]

    def learn(self, job: Job, runtime: float) -> None:
        """``job`` ended after ``runtime`` seconds: the calibration learns how far off its
        prediction was (a job never planned is not counted)."""
        self._ended += 1
        i = self._slot.pop(job.id, None)
        if i is not None:
            self._free.append(i)
            self.calibration.learn(float(self._table[i, 2]), runtime)

    def learn_past(self, job: Job, runtime: float) -> None:
        """A job that ended before this estimator was made (a control plane's history, read
        after a restart): predicted from what was learned before it, then learned."""
        self._slots([job])
        self.learn(job, runtime)

    def _runtimes(self, rows: np.ndarray, age: np.ndarray) -> np.ndarray:
        """The expected runtime of each job (``rows``: the ``_row`` columns) that has run
        ``age`` seconds, as one row (the plan's)."""
        if self.calibration.ready:
            return self.calibration.expected(rows[:, 2], age)[None, :]
        # Too few ended jobs to calibrate on: the estimator's median, and a running job past
        # it runs as long again as it has run.
        own = rows[:, 3]
        return np.where(own > age, own, 2.0 * age)[None, :]

    def expected_ends(self, now: float, rows: Sequence[RunningRow]) -> np.ndarray:
        """When each running attempt of ``rows`` is expected to end, as a plan made at
        ``now`` would take it (its predicted runtime as the ended jobs calibrate it, given
        how long it has run)."""
        if not rows:
            return np.zeros(0)
        starts = np.array([r[1] for r in rows], np.float64)
        age = np.maximum(now - starts, 0.0)
        return starts + self._runtimes(self._rows([r[0] for r in rows]), age)[0]

    # ---------------------------------------------------------------- estimates
    def estimate(
        self,
        now: float,
        running: Callable[[], Iterable[RunningRow]],
        pending: Callable[[], Sequence[Job]],
        want: Sequence[Job] | None = None,
        refresh: float | None = None,
    ) -> dict[str, Estimate]:
        """Estimates for the pending jobs ``want`` (default: every pending job). ``pending()``
        gives every pending job in queue order and ``running()`` the running jobs as (job, the
        start of its attempt, its placement); they are asked for only when a plan is made.
        Plans again if the last plan is older than ``refresh`` (default: the estimator's
        ``refresh``) and the running or pending
        jobs changed since or time reached something it foresaw (a job's end or start), if
        the cluster's health changed, or if a job of a pool never planned comes; else the
        jobs of ``want`` that the plan does not hold yet are placed after those it does, in
        the order given."""
        pools = len(self._masks)
        known = self._known
        queue: Sequence[Job] | None = None
        if want is None:
            want = queue = pending()
        missing = [j for j in want if j.id not in known]
        for j in missing:
            self._pool(j.task)
        fresh = (
            len(self._masks) == pools  # a new pool: what is planned was never charged to it
            and self._health == self.view.health_changes
            and bool(self._plans)
        )
        rows: list[RunningRow] | None = None
        ids: _Ids | None = None
        if fresh and now - self._planned_at >= (self.refresh if refresh is None else refresh):
            # Due for a plan; but one on the same jobs, before anything it foresaw happens,
            # would be the same plan: it stands.
            rows = list(running())
            queue = queue if queue is not None else pending()
            ids = _Ids(rows, queue)
            fresh = now < self._next_event and ids.state == self._planned_state
        if not fresh:
            rows = list(running()) if rows is None else rows
            queue = queue if queue is not None else pending()
            self._replan(now, rows, queue, ids if ids is not None else _Ids(rows, queue))
        elif missing:
            self._place(missing, self._rows(missing), now)
        known, kstart, kat = self._known, self._kstart, self._kat
        shown = self._shown
        said = self._said
        waits = self.waits
        lo, hi = (waits.quantile(0.5), waits.quantile(PLAN_Q)) if waits.ready else (1.0, 1.0)
        out = {}
        for j in want:
            k = known.get(j.id)
            if k is None:
                continue
            start, at = kstart[k], kat[k]
            if j.id not in said and self.calibration.ready:
                # Its first estimate made on calibrated runtimes: the one its real wait will
                # be compared with (one made before, from too little, would teach nothing).
                said[j.id] = (at, start)
            p50, p90 = _ranged(start, at, lo, hi)
            last = shown.get(j.id)
            if last is not None and _close(last.p50, p50, now) and _close(last.p90, p90, now):
                out[j.id] = last  # within the damping of what was said: it stands
            else:
                out[j.id] = shown[j.id] = Estimate(p50, p90, at)
        return out

    def what_if(
        self,
        now: float,
        running: Callable[[], Iterable[RunningRow]],
        pending: Callable[[], Sequence[Job]],
        job: Job,
        current: bool = False,
    ) -> Estimate:
        """When ``job``, not queued here, would start if it were submitted now (placed after
        the jobs the plan holds, as ``estimate`` places a new arrival), without keeping it in
        the plan: what a member tells a router that asks where to send a job. The plan is
        made again on the same terms as ``estimate``'s; with ``current``, also whenever the
        running or pending jobs changed since it was made, however recently."""
        self._pool(job.task)  # a pool never planned makes the plan due
        self.estimate(now, running, pending, (), refresh=0.0 if current else None)
        row = self._rows([job])[0]
        first = max(int(np.searchsorted(self._edges, now, side="right")) - 1, 0)
        dur = float(self._runtimes(row[None, :], np.zeros(1))[0][0])
        start = float(_probe(self._cap, self._edges, first, now, int(row[0]), int(row[1]), dur,
                             self._plans[0]))  # fmt: skip
        waits = self.waits
        lo, hi = (waits.quantile(0.5), waits.quantile(PLAN_Q)) if waits.ready else (1.0, 1.0)
        return Estimate(*_ranged(start, now, lo, hi), now)

    def started(self, job_id: str, at: float) -> None:
        """``job_id`` started at ``at``: the waits' calibration learns how its real wait
        compared with the first it was planned to have."""
        first = self._said.pop(job_id, None)
        self._shown.pop(job_id, None)
        if first is not None and first[1] - first[0] >= MIN_WAIT_S:
            self.waits.learn(first[1] - first[0], at - first[0])

    def _replan(
        self, now: float, rows: list[RunningRow], pending: Sequence[Job], ids: _Ids
    ) -> None:
        table = self._rows(pending, ids.queue)
        run_rows = self._rows([r[0] for r in rows], ids.running)
        self._pools_ready()
        n_pools = len(self._cap)
        use = self._use
        if len(use) > 2 * len(rows) + 1000:
            self._use = use = {k: use[k] for k in ids.attempts if k in use}
        keys = ids.attempts
        held = list(map(use.get, keys))
        masks: np.ndarray | None = None
        for r, u in enumerate(held):
            if u is None or len(u) != n_pools:  # an attempt new since (or a pool new)
                if masks is None:
                    masks = np.array(self._masks, dtype=np.bool_).reshape(-1, self.view.n_nodes)
                u = np.zeros(n_pools, np.int64)
                for tp in rows[r][2].tasks:
                    u += masks[:, tp.node] * (tp.gpu_milli * len(tp.gpus))
                held[r] = use[keys[r]] = u
        run_use = np.array(held, np.int64) if held else np.zeros((0, n_pools), np.int64)
        if len(self._slot) > 4 * (len(rows) + len(pending)) + 1000:
            # Rows of jobs gone without ending here (cancelled): their slots are freed.
            here = set(ids.queue).union(ids.running)
            slot = self._slot
            for k in [k for k in slot if k not in here]:
                self._free.append(slot.pop(k))
        starts = np.array([r[1] for r in rows], np.float64)
        age = np.maximum(now - starts, 0.0)
        run_end = starts + self._runtimes(run_rows, age)
        self._edges = edges = grid(now)
        self._plans = []
        for qi in range(len(run_end)):
            used = np.zeros((n_pools, len(edges) - 1), np.int64)
            _charge_running(edges, np.ascontiguousarray(run_end[qi]), run_use, used)
            self._plans.append(used)
        self._known, self._kstart, self._kat = {}, [], []
        if len(self._shown) + len(self._said) > 4 * len(pending) + 2000:
            # What was said of jobs gone without starting (cancelled): forgotten.
            here = set(ids.queue)
            self._shown = {k: v for k, v in self._shown.items() if k in here}
            self._said = {k: v for k, v in self._said.items() if k in here}
        self._planned_at = now
        self._planned_state = ids.state
        self.plans += 1
        planned = self._place(pending, table, now, ids.queue)
        # The first thing the plan foresees: a running job's end or a pending job's start.
        ahead = run_end[run_end > now]
        self._next_event = float(ahead.min()) if len(ahead) else math.inf
        later = planned[planned > now]
        if len(later):
            self._next_event = min(self._next_event, float(later.min()))

    def _place(
        self, jobs: Sequence[Job], cols: np.ndarray, now: float, ids: Sequence[str] | None = None
    ) -> np.ndarray:
        """Place ``jobs`` (their rows ``cols``) after those the plan holds: their starts."""
        if not jobs:
            return np.zeros(0)
        pools = cols[:, 0].astype(np.int64)
        dem = cols[:, 1].astype(np.int64)
        durations = self._runtimes(cols, np.zeros(len(cols)))
        edges = self._edges
        first = max(int(np.searchsorted(edges, now, side="right")) - 1, 0)
        out = np.zeros(len(jobs), np.float64)
        dur = np.ascontiguousarray(durations[0])
        _plan(self._cap, self._overlap, edges, first, now, pools, dem, dur, self._plans[0], out)
        known, kstart = self._known, self._kstart
        base = len(kstart)
        if len(jobs) == 1:
            known[jobs[0].id] = base
        else:
            names = [j.id for j in jobs] if ids is None else ids
            known.update(zip(names, range(base, base + len(jobs)), strict=True))
        kstart.extend(out.tolist())
        self._kat.extend([now] * len(jobs))
        return out


def for_runtime(
    view: ClusterView, runtime: RuntimeEstimator
) -> tuple[StartEstimator, Callable[[Job, float, float], None] | None]:
    """The start-time estimator for a queue whose scheduler has ``runtime``, and what else to
    tell of each job's end besides ``StartEstimator.learn`` (None: nothing). It plans with
    ``runtime`` where it is a predictor, else with a ``runtime/history`` predictor of its own
    (a user's estimate or a default is no runtime to plan a queue on, and the oracle's would
    make no estimate), which must then learn each job's runtime at its end."""
    if getattr(runtime, "quantile", None) is not None:
        return StartEstimator(view, runtime), None
    own = create("runtime", "history")
    return StartEstimator(view, own), own.learn
