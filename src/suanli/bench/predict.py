"""``suanli bench predict``: runtime-predictive queue orders against FIFO, LAS and the oracles.

The sweep (``docs/predict.md``, "The benchmark"):

- **Policies** (``POLICIES``): FIFO, Tiresias' 2D-LAS (preemptive), QSSF on the
  ``runtime/history`` and ``runtime/learned`` estimators, and the two oracle references
  (SJF on true GPU-time, non-preemptive; SRTF, preemptive), each without and with EASY
  backfill planning with the policy's own estimator (at its planning quantile, P90). LAS and
  SRTF run with ``preemption/by-order`` (``PreemptionConfig`` defaults otherwise). Every job
  gets a checkpoint every 1,800 s (``with_checkpoints``) in every run, so preemptive and
  non-preemptive runs see the same jobs.
- **Load** (:func:`find_time_scale`): each trace is replayed on its own hardware
  (``speed_basis=trace.basis``) at the arrival time scale ``s`` (every submit × ``s``) where
  FIFO's mean wait is about the jobs' mean runtime (ratio in [0.9, 1.1]), so the queue is
  never empty and no ratio is tuned by choosing the load. The search starts at the
  offered-load scale and runs two FIFO replays a round (a safeguarded secant on
  ``log s``, at most ten runs); FIFO's row is run again at the chosen scale.
- **Columns** (:class:`Row`): mean and P99 JCT; mean and P99 queueing delay, defined as JCT
  minus the time the job held GPUs over all its attempts (``finish - submit - held_s``: for a
  non-preemptive run the wait before its start, for a preemptive one also the time spent
  requeued); mean wait (first start − submit); GPU allocation; preemptions; where the run has
  predictions at submission (``records.predicted``), the estimator's accuracy: MAE of the P50
  (seconds), median absolute relative error of the P50, coverage of the P90; wall seconds.
- **Targets** (:func:`verdict`), on Philly's traces: the best (least mean JCT)
  non-preemptive predictive row (QSSF on history or learned, with or without backfill) has a
  mean JCT at most 1.08 × SJF-oracle's and at most 0.8 × LAS's, and a mean queueing delay at
  most 0.14 × FIFO's, each against the row with the same backfill setting.

Replays spread over processes (``suanli.sim.spread``); each is a deterministic function of
its trace, scale and policy set, so the numbers do not depend on the number of workers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suanli.core.builder import PolicySet
from suanli.core.eviction_order import ranks_running
from suanli.core.model import MILLI, ClusterSpec, Job
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import create
from suanli.core.speed import SpeedBasis
from suanli.predict.accuracy import accuracy
from suanli.sim.engine import simulate
from suanli.sim.spread import spread_map
from suanli.traces.catalogue import ITP_VARIANTS, LoadedTrace, resolve_trace
from suanli.workload.priorities import with_checkpoints

POLICIES = (
    "fifo+best-fit",
    "fifo/easy@history+best-fit",
    "las+best-fit",
    "las/easy@history+best-fit",
    "qssf@history+best-fit",
    "qssf@history/easy+best-fit",
    "qssf@learned+best-fit",
    "qssf@learned/easy+best-fit",
    "sjf-gpu@oracle+best-fit",
    "sjf-gpu/easy-oracle+best-fit",
    "srtf@oracle+best-fit",
    "srtf/easy-oracle+best-fit",
)
"""The policy sets of the sweep, each without and with EASY backfill."""

FIFO = "fifo+best-fit"
"""The policy set the load rule is measured with."""


def preemptive(queue: str) -> bool:
    """Whether queue order ``queue`` ranks running jobs too (``preemption/by-order``'s
    contract: LAS, SRTF), and so runs preemptive."""
    return ranks_running(create("queue", queue))


PREDICTIVE = frozenset({"history", "learned"})
"""The runtime estimators of the rows the targets are about."""

ITP_TRACES = tuple(f"itp:{v}" for v in ITP_VARIANTS)
DEFAULT_TRACES = ("philly", "philly-users", *ITP_TRACES)
TARGET_KINDS = frozenset({"philly", "philly-users"})
"""Trace families the targets are computed for (by name or as a CSV of that kind)."""

BAND = (0.9, 1.1)
"""FIFO's mean wait / mean runtime the load rule accepts."""
SEARCH_POINTS = 2
"""FIFO runs per round of the load rule's search (run at once where there are processes)."""
SEED_STEP = 2.0
"""The search's first round: the offered-load scale and this many times it."""
STEP = 4.0
"""How far past the runs so far the search looks while one side is not yet found."""
MAX_FIFO_RUNS = 10
TRACE_BUDGET_S = 120.0
"""The wall time a trace's whole sweep (search and replays) should stay within."""

SJF_FACTOR = 1.08
LAS_FACTOR = 0.8
FIFO_QUEUE_FACTOR = 0.14
START_ERROR_LIMIT = 0.30
"""The median start-time estimate error allowed, as a share of the real wait."""
MIN_WAIT_S = 60.0
"""Jobs that waited at least this long are scored on their start-time estimates."""


def preemption_for(policy: PolicySet) -> PreemptionConfig | None:
    """``preemption/by-order`` for the preemptive orders (LAS, SRTF), else none."""
    return PreemptionConfig(policy="by-order") if preemptive(policy.queue) else None


def parse_policies(texts: Sequence[str]) -> list[PolicySet]:
    """The policy sets (``SpecError`` for one that does not parse or names no plugin)."""
    out = []
    for t in texts:
        p = PolicySet.parse(t)
        p.check()
        out.append(p)
    return out


# --- one replay ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One (trace, policy set) replay. Times in seconds; NaN: not measured (no predictions,
    nothing finished)."""

    trace: str
    policy: str
    queue: str
    backfill: str
    runtime: str
    preemptive: bool
    scale: float
    jobs: int
    finished: int
    jct_mean: float
    jct_p99: float
    queue_mean: float
    queue_p99: float
    wait_mean: float
    allocation: float
    preemptions: int
    mae_s: float = math.nan
    median_rel_error: float = math.nan
    coverage_p90: float = math.nan
    start_error: float = math.nan
    """Median over jobs that waited at least ``MIN_WAIT_S`` of |start − the P50 of its start
    as estimated at its submission| / its wait."""
    start_cover_p90: float = math.nan
    """Share of those jobs that started by the P90 of their estimate."""
    train_s: float = 0.0
    """Wall seconds the runtime predictor spent training (within ``wall_s``)."""
    fits: int = 0
    wall_s: float = 0.0

    @property
    def predicted(self) -> bool:
        return not math.isnan(self.mae_s)

    def to_json(self) -> dict[str, Any]:
        return {k: _num(v) for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class Replay:
    """A row and the per-job samples it was made of (for pooling clusters; not in JSON)."""

    row: Row
    jct: np.ndarray
    queue: np.ndarray
    wait: np.ndarray
    abs_err: np.ndarray | None
    rel_err: np.ndarray | None
    covered: np.ndarray | None
    start_rel: np.ndarray
    start_covered: np.ndarray
    capacity_s: float
    """GPUs × the length of the allocation's window (to pool allocations exactly)."""


@dataclass(frozen=True)
class Prepared:
    """A trace ready to replay at one time scale: submit-sorted, checkpointed jobs."""

    spec: str
    cluster: ClusterSpec
    basis: SpeedBasis
    jobs: list[Job]
    scale: float
    runtime: dict[str, float]


def prepare(trace: LoadedTrace, scale: float, jobs: Sequence[Job] | None = None) -> Prepared:
    """``trace``'s jobs (or ``jobs``) checkpointed every 1,800 s, arrivals × ``scale``, in the
    simulator's (submit, id) order."""
    base = with_checkpoints(trace.jobs if jobs is None else jobs)
    scaled = [j if scale == 1.0 else _scaled(j, scale) for j in base]
    scaled.sort(key=lambda j: (j.submit, j.id))
    return Prepared(trace.spec, trace.cluster, trace.basis, scaled, scale,
                    {j.id: j.runtime for j in scaled})  # fmt: skip


def _scaled(job: Job, scale: float) -> Job:
    from dataclasses import replace

    return replace(job, submit=job.submit * scale)


def replay(p: Prepared, policy: str, start_estimates: bool = True) -> Replay:
    """One replay of ``p`` under ``policy`` and its row (``start_estimates``: each job's
    start estimated at its submission and scored; the load rule's search needs none)."""
    ps = PolicySet.parse(policy)
    t0 = time.perf_counter()
    r = simulate(p.cluster, p.jobs, ps, preemption=preemption_for(ps), speed_basis=p.basis,
                 start_estimates=start_estimates)  # fmt: skip
    rec = r.records
    true = np.fromiter((p.runtime[i] for i in rec.ids), np.float64, len(rec.ids))
    jct = rec.finish - rec.submit
    held = rec.held_s if rec.held_s is not None else rec.finish - rec.start
    queue = jct - held
    wait = rec.start - rec.submit
    abs_err = rel_err = covered = None
    mae = mre = cov = math.nan
    if rec.predicted is not None:
        p50, p90 = (np.asarray(a, np.float64) for a in rec.predicted)
        ok = np.isfinite(p50) & np.isfinite(p90)
        if ok.any():
            acc = accuracy(true[ok], {0.5: p50[ok], 0.9: p90[ok]})
            mae, mre, cov = acc.mae, acc.median_rel_error, acc.coverage[0.9]
            abs_err = np.abs(p50[ok] - true[ok])
            rel_err = abs_err / np.maximum(true[ok], 1.0)
            covered = true[ok] <= p90[ok]
    s50, s90 = rec.start_estimate if rec.start_estimate is not None else (wait, wait)
    waited = (wait >= MIN_WAIT_S) & np.isfinite(s50)
    start_rel = np.abs(rec.start[waited] - s50[waited]) / wait[waited]
    start_covered = rec.start[waited] <= s90[waited]
    finished = ~np.isnan(rec.finish)
    qf = queue[finished]
    row = Row(
        trace=p.spec,
        policy=ps.label,
        queue=ps.queue,
        backfill=ps.backfill,
        runtime=ps.runtime,
        preemptive=preemptive(ps.queue),
        scale=p.scale,
        jobs=len(rec.ids),
        finished=int(finished.sum()),
        jct_mean=r.jct_run.mean if r.jct_run is not None else r.jct.mean,
        jct_p99=r.jct_run.p99 if r.jct_run is not None else r.jct.p99,
        queue_mean=float(qf.mean()) if len(qf) else math.nan,
        queue_p99=float(np.percentile(qf, 99)) if len(qf) else math.nan,
        wait_mean=float(np.nanmean(wait)) if (~np.isnan(wait)).any() else math.nan,
        allocation=r.gpu_allocation,
        preemptions=r.preemptions,
        mae_s=mae,
        median_rel_error=mre,
        coverage_p90=cov,
        start_error=float(np.median(start_rel)) if len(start_rel) else math.nan,
        start_cover_p90=float(start_covered.mean()) if len(start_covered) else math.nan,
        train_s=rec.train_s,
        fits=rec.fits,
        wall_s=time.perf_counter() - t0,
    )
    span = r.window[1] - r.window[0]
    return Replay(row, jct[finished], qf, wait[~np.isnan(wait)], abs_err, rel_err, covered,
                  start_rel, start_covered, r.total_gpus * span)  # fmt: skip


def _cost_rank(ps: PolicySet) -> tuple[bool, bool, bool]:
    """Sorts the costlier replays first: training a model, preempting, backfilling."""
    return (ps.runtime != "learned", not preemptive(ps.queue), ps.backfill == "none")


def run_one(p: Prepared, policy: str) -> Replay:
    """One replay, wherever ``spread_map`` runs it."""
    return replay(p, policy)


# --- the load rule ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeScale:
    """What the load rule found: the scale, FIFO's mean wait / mean runtime there, every
    (scale, ratio) tried in order, and whether the ratio is inside ``BAND``."""

    scale: float
    ratio: float
    mean_runtime_s: float
    tried: tuple[tuple[float, float], ...]
    converged: bool
    fifo: Replay | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "ratio": _num(self.ratio),
            "mean_runtime_s": self.mean_runtime_s,
            "converged": self.converged,
            "fifo_runs": [{"scale": s, "ratio": _num(r)} for s, r in self.tried],
        }

    def line(self) -> str:
        note = "" if self.converged else (
            f" (did not converge into [{BAND[0]:g}, {BAND[1]:g}] in {len(self.tried)} FIFO "
            "runs: the closest taken)"
        )  # fmt: skip
        return (
            f"time scale {self.scale:.4g} (arrivals × {self.scale:.4g}): FIFO mean wait / mean "
            f"runtime {self.ratio:.3f} (mean runtime {self.mean_runtime_s / 3600:.2f} h; "
            f"{len(self.tried)} FIFO runs){note}"
        )


def _fifo_ratio(trace: LoadedTrace, jobs: Sequence[Job], scale: float) -> tuple[float, Replay]:
    rp = replay(prepare(trace, scale, jobs), FIFO, start_estimates=False)
    mean_rt = float(np.mean([j.runtime for j in jobs]))
    return rp.row.wait_mean / mean_rt if mean_rt > 0 else math.nan, rp


def search_run(shared: tuple[LoadedTrace, Sequence[Job]], scale: float) -> tuple[float, Replay]:
    """One FIFO run of the search, wherever ``spread_map`` runs it."""
    return _fifo_ratio(shared[0], shared[1], scale)


def offered_scale(trace: LoadedTrace, jobs: Sequence[Job]) -> float:
    """The arrival time scale at which the jobs' GPU-time over their arrival span equals the
    cluster's GPUs (offered load 1): the search's first point. 1.0 where it cannot be worked
    out (no jobs, no span, no GPUs)."""
    cluster = getattr(trace, "cluster", None)
    gpus = cluster.total_gpus if cluster is not None else 0
    if len(jobs) < 2 or gpus <= 0:
        return 1.0
    work = sum(j.tasks * j.task.gpus * j.task.gpu_milli / MILLI * j.runtime for j in jobs)
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs)
    s = work / (gpus * span) if span > 0 else 0.0
    return s if s > 0 and math.isfinite(s) else 1.0


def _next_points(
    tried: Sequence[tuple[float, float]], x0: float, n: int, band: tuple[float, float]
) -> list[float]:
    """The search's next ``n`` points (``log s``) from the runs so far ((log s, ratio))."""
    lo_b, hi_b = band
    if not tried:  # the offered-load scale and SEED_STEP× it
        return [x0 + j * math.log(SEED_STEP) for j in range(n)]
    light = [(x, r) for x, r in tried if r < lo_b]
    below = [(x, r) for x, r in tried if r > hi_b and (not light or x < min(light)[0])]
    if not light or not below:
        # One side not found yet: every run waited too long (spread arrivals out) or every
        # run below the lightest too little (compress them). Where the two runs nearest it
        # have positive ratios, the line through them says where ratio 1 is (at most STEP²
        # away); and STEP× (or STEP²× where the line's point is near it) past the edge.
        toward = 1 if not light else -1
        side = sorted(tried, reverse=True)[:2] if not light else sorted(light)[:2]
        edge = side[0][0]
        steps = [edge + toward * j * math.log(STEP) for j in (1, 2)]
        line = _extrapolate(side, edge, toward) if len(side) == 2 else None
        if line is None:
            return steps[:n]
        return [line, steps[0] if abs(line - steps[0]) > 0.1 else steps[1]][:n]
    b, rb = min(light)
    a, ra = max(below)
    w = b - a
    if not (ra > 0 and rb > 0 and math.isfinite(ra) and math.isfinite(rb)):
        return [a + w * j / (n + 1) for j in range(1, n + 1)]  # split evenly
    la, lb = math.log(ra), math.log(rb)
    x = min(max(a + w * la / (la - lb), a + 0.1 * w), b - 0.1 * w)
    if n == 1:
        return [x]
    # And the bisection's point, which shrinks the bracket however the line misleads (a
    # quarter of the way from the line's point toward the farther end where the two meet).
    mid = (a + b) / 2
    if abs(mid - x) <= 0.02 * w:
        mid = x + ((b if x < mid else a) - x) / 4
    return [x, mid]


def _extrapolate(side: Sequence[tuple[float, float]], edge: float, toward: int) -> float | None:
    """Where the line through two runs ((log s, ratio)) on one side crosses ratio 1, kept
    between a twentieth and ``STEP``² past ``edge`` in the direction ``toward``; None where
    a ratio is 0 or infinite or the line does not fall."""
    (x1, r1), (x2, r2) = side
    if not (0 < r1 < math.inf and 0 < r2 < math.inf) or x1 == x2:
        return None
    slope = (math.log(r2) - math.log(r1)) / (x2 - x1)
    if not slope < 0:
        return None
    x = x1 - math.log(r1) / slope
    near, far = edge + toward * 0.05, edge + toward * 2 * math.log(STEP)
    return min(max(x, near), far) if toward > 0 else max(min(x, near), far)


def find_time_scale(
    trace: LoadedTrace,
    jobs: Sequence[Job] | None = None,
    *,
    band: tuple[float, float] = BAND,
    max_runs: int = MAX_FIFO_RUNS,
    evaluate: Callable[[float], tuple[float, Replay | None]] | None = None,
    evaluate_many: Callable[[list[float]], list[tuple[float, Replay | None]]] | None = None,
) -> TimeScale:
    """The arrival time scale at which FIFO's mean wait is about the mean runtime.

    FIFO's wait falls as arrivals spread out (``s`` grows). The search runs ``SEARCH_POINTS``
    FIFO replays a round (independent of each other: ``evaluate_many`` may run them at once)
    and takes the points from the runs so far (``_next_points``):

    - first, the offered-load scale (``offered_scale``) and ``SEED_STEP``× it;
    - while no run has waited too little (ratio below ``band``), or none below the lightest
      too long: where the line through (log s, log ratio) at the two runs nearest the side
      not found falls, where it crosses ratio 1 (at most ``STEP``² past them), and ``STEP``×
      past them (``STEP``²× where that is near the line's point); else ``STEP``× and
      ``STEP``²× (÷ toward compression);
    - else, between the largest scale ``a`` that waited too long and the smallest ``b`` above
      it that waited too little: the point where the line through (log s, log ratio) at both
      crosses ratio 1 (kept within the middle 80% of [a, b]) and the bisection's middle (a
      quarter of the way from the line's point toward the farther end where the two meet),
      as in Dekker's safeguarded secant; where a ratio there is 0 or infinite, the points
      that cut [a, b] evenly.

    Stops after a round with a ratio in ``band`` or ``max_runs`` FIFO runs; the closest (in
    log ratio) is taken. The points do not depend on how many processes run them, so neither
    does the scale. ``evaluate`` (scale -> (ratio, replay)) or ``evaluate_many`` (scales ->
    the same, in order) replace the FIFO runs, for tests and processes."""
    jobs = list(trace.jobs if jobs is None else jobs)
    mean_rt = float(np.mean([j.runtime for j in jobs])) if jobs else math.nan
    if evaluate_many is None:
        one = evaluate or (lambda s: _fifo_ratio(trace, jobs, s))
        evaluate_many = lambda scales: [one(s) for s in scales]  # noqa: E731
    x0 = math.log(offered_scale(trace, jobs))
    lo_b, hi_b = band
    tried: list[tuple[float, float, Replay | None]] = []
    while len(tried) < max_runs:
        done = {x for x, _, _ in tried}
        xs = _next_points([(x, r) for x, r, _ in tried], x0,
                          min(SEARCH_POINTS, max_runs - len(tried)), band)  # fmt: skip
        xs = [x for x in xs if x not in done]
        if not xs:
            break
        got = evaluate_many([math.exp(x) for x in xs])
        tried.extend((x, r, rp) for x, (r, rp) in zip(xs, got, strict=True))
        if any(lo_b <= r <= hi_b for r, _ in got):
            break

    def distance(t: tuple[float, float, Replay | None]) -> float:
        r = t[1]
        return abs(math.log(r)) if r > 0 and math.isfinite(r) else math.inf

    best = min(tried, key=lambda t: (distance(t), abs(t[1] - 1)))
    return TimeScale(
        scale=math.exp(best[0]),
        ratio=best[1],
        mean_runtime_s=mean_rt,
        tried=tuple((math.exp(x), r) for x, r, _ in tried),
        converged=lo_b <= best[1] <= hi_b,
        fifo=best[2],
    )


# --- targets -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One target: ``value`` = the best row's figure / the reference's, against ``limit``."""

    what: str
    reference: str
    ratio: float
    limit: float

    @property
    def met(self) -> bool:
        """At most the limit (NaN, 0/0 with nothing to compare, is not met)."""
        return self.ratio <= self.limit

    def to_json(self) -> dict[str, Any]:
        return {"target": self.what, "reference": self.reference, "ratio": _num(self.ratio),
                "limit": self.limit, "met": self.met}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Verdict:
    """The targets of one trace: the best non-preemptive predictive row and its ratios.
    ``missing``: references the sweep did not run (their targets are not judged)."""

    best: str
    backfill: str
    targets: tuple[Target, ...]
    missing: tuple[str, ...] = ()

    @property
    def met(self) -> bool:
        return bool(self.targets) and all(t.met for t in self.targets) and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {"best": self.best, "backfill": self.backfill, "met": self.met,
                "targets": [t.to_json() for t in self.targets],
                "missing": list(self.missing)}  # fmt: skip


def verdict(rows: Sequence[Row]) -> Verdict | None:
    """The targets on one trace's rows; None without a non-preemptive predictive row.

    Best: the least mean JCT among the non-preemptive rows whose estimator is ``history`` or
    ``learned`` (QSSF's). Against the rows with its backfill setting: mean JCT ≤ 1.08 ×
    SJF-oracle's (``sjf-gpu``) and ≤ 0.8 × LAS's; mean queueing delay ≤ 0.14 × FIFO's; and
    its own median start-time estimate error ≤ 30% of the real wait."""
    cands = [r for r in rows if not r.preemptive and r.queue == "qssf" and r.runtime in PREDICTIVE
             and not math.isnan(r.jct_mean)]  # fmt: skip
    if not cands:
        return None
    best = min(cands, key=lambda r: r.jct_mean)

    def ref(queue: str) -> Row | None:
        for r in rows:
            if r.queue == queue and r.backfill == best.backfill:
                return r
        return None

    targets, missing = [], []
    for queue, what, factor, attr in (
        ("sjf-gpu", "mean JCT vs SJF-oracle", SJF_FACTOR, "jct_mean"),
        ("las", "mean JCT vs LAS", LAS_FACTOR, "jct_mean"),
        ("fifo", "mean queueing delay vs FIFO", FIFO_QUEUE_FACTOR, "queue_mean"),
    ):
        r = ref(queue)
        if r is None:
            missing.append(
                f"{queue} ({'no backfill' if best.backfill == 'none' else best.backfill})"
            )
            continue
        num, den = getattr(best, attr), getattr(r, attr)
        ratio = num / den if den > 0 else (math.nan if num == 0 else math.inf)
        targets.append(Target(what, r.policy, ratio, factor))
    targets.append(Target("median start-time estimate error / real wait", "the real waits",
                          best.start_error, START_ERROR_LIMIT))  # fmt: skip
    return Verdict(best.policy, best.backfill, tuple(targets), tuple(missing))


# --- a trace's sweep -------------------------------------------------------------------------


@dataclass
class TraceResult:
    """One trace's sweep: its load, its rows (policy order), its verdict and its wall time."""

    spec: str
    kind: str
    jobs: int
    gpus: int
    time_scale: TimeScale
    replays: list[Replay]
    verdict: Verdict | None
    wall_s: float
    search_s: float = 0.0
    workers: int = 1
    cut: int | None = None

    @property
    def rows(self) -> list[Row]:
        return [r.row for r in self.replays]

    @property
    def over_budget(self) -> bool:
        return self.wall_s > TRACE_BUDGET_S

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.spec,
            "kind": self.kind,
            "jobs": self.jobs,
            "cut_to_first_jobs": self.cut,
            "gpus": self.gpus,
            "time_scale": self.time_scale.to_json(),
            "rows": [r.to_json() for r in self.rows],
            "verdict": self.verdict.to_json() if self.verdict is not None else None,
            "wall_s": self.wall_s,
            "search_s": self.search_s,
            "replay_s": sum(r.wall_s for r in self.rows),
            "workers": self.workers,
            "within_budget": not self.over_budget,
        }


def load(
    spec: str, trace_dir: str | Path | None = None, first: int | None = None
) -> tuple[LoadedTrace, list[Job]]:
    """The trace and its jobs in submission order, cut to the first ``first`` if given."""
    trace = resolve_trace(spec, trace_dir)
    jobs = sorted(trace.jobs, key=lambda j: (j.submit, j.id))
    if first is not None:
        jobs = jobs[:first]
    return trace, jobs


def run_trace(
    spec: str,
    policies: Sequence[str] = POLICIES,
    *,
    trace_dir: str | Path | None = None,
    first: int | None = None,
    workers: int = 1,
    loaded: tuple[LoadedTrace, list[Job]] | None = None,
) -> TraceResult:
    """The load rule, then every policy set on ``spec`` at the scale found, spread over
    ``workers`` processes (FIFO's row is run again there: the search's runs estimate no
    start times, which cost most where the search overloads the cluster)."""
    t0 = time.perf_counter()
    trace, jobs = loaded if loaded is not None else load(spec, trace_dir, first)

    # The search's rounds on the processes too (its points do not depend on how many).
    def many(scales: list[float]) -> list[tuple[float, Replay | None]]:
        return list(spread_map(search_run, scales, (trace, jobs), workers=workers))

    ts = find_time_scale(trace, jobs, evaluate_many=many if workers > 1 else None)
    search_s = time.perf_counter() - t0
    labels = [PolicySet.parse(p).label for p in policies]
    todo = list(policies)
    prepared = prepare(trace, ts.scale, jobs)
    # Longest first (those that train a model, then the preemptive orders, then backfill), so
    # that the pool's last replays are short ones.
    order = sorted(range(len(todo)), key=lambda i: _cost_rank(PolicySet.parse(todo[i])))
    done = spread_map(run_one, [todo[i] for i in order], prepared, workers=workers)
    by_label = {r.row.policy: r for r in done}
    replays = [by_label[lab] for lab in labels]
    return TraceResult(
        spec=trace.spec,
        kind=trace.kind,
        jobs=len(jobs),
        gpus=trace.cluster.total_gpus,
        time_scale=TimeScale(ts.scale, ts.ratio, ts.mean_runtime_s, ts.tried, ts.converged),
        replays=replays,
        verdict=verdict([r.row for r in replays]) if trace.kind in TARGET_KINDS else None,
        wall_s=time.perf_counter() - t0,
        search_s=search_s,
        workers=max(1, workers),
        cut=first,
    )


# --- pooling clusters --------------------------------------------------------------------------


def pooled(results: Sequence[TraceResult], name: str) -> list[Row]:
    """One row per policy set over several traces (e.g. the ten ITP clusters), each replayed
    at its own scale: job-weighted (the per-job samples pooled: means and P99 over all jobs,
    accuracy over all predicted jobs), allocation weighted by each cluster's GPUs × window,
    preemptions and wall seconds summed; ``scale`` NaN (one per cluster)."""
    out = []
    for i, first in enumerate(results[0].replays):
        reps = [r.replays[i] for r in results]
        jct = np.concatenate([r.jct for r in reps])
        q = np.concatenate([r.queue for r in reps])
        wait = np.concatenate([r.wait for r in reps])
        cap = sum(r.capacity_s for r in reps)
        alloc = sum(r.row.allocation * r.capacity_s for r in reps) / cap if cap > 0 else math.nan
        pred = [r for r in reps if r.abs_err is not None]
        mae = mre = cov = math.nan
        if pred:
            ae = np.concatenate([r.abs_err for r in pred])  # type: ignore[misc]
            re = np.concatenate([r.rel_err for r in pred])  # type: ignore[misc]
            cv = np.concatenate([r.covered for r in pred])  # type: ignore[misc]
            mae, mre, cov = float(ae.mean()), float(np.median(re)), float(cv.mean())
        sr = np.concatenate([r.start_rel for r in reps])
        sc = np.concatenate([r.start_covered for r in reps])
        row = first.row
        out.append(Row(
            trace=name, policy=row.policy, queue=row.queue, backfill=row.backfill,
            runtime=row.runtime, preemptive=row.preemptive, scale=math.nan,
            jobs=sum(r.row.jobs for r in reps), finished=sum(r.row.finished for r in reps),
            jct_mean=_mean(jct), jct_p99=_p99(jct), queue_mean=_mean(q), queue_p99=_p99(q),
            wait_mean=_mean(wait), allocation=alloc,
            preemptions=sum(r.row.preemptions for r in reps), mae_s=mae,
            median_rel_error=mre, coverage_p90=cov,
            start_error=float(np.median(sr)) if len(sr) else math.nan,
            start_cover_p90=float(sc.mean()) if len(sc) else math.nan,
            train_s=sum(r.row.train_s for r in reps), fits=sum(r.row.fits for r in reps),
            wall_s=sum(r.row.wall_s for r in reps),
        ))  # fmt: skip
    return out


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if len(a) else math.nan


def _p99(a: np.ndarray) -> float:
    return float(np.percentile(a, 99)) if len(a) else math.nan


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
