"""Simulation results as typed values: per-job records, time series and summary statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suanli.core.decisions import Reason
from suanli.core.model import MILLI, ClusterSpec, Job
from suanli.core.pooling import Pooled
from suanli.sim.attempts import AttemptUse
from suanli.sim.failures import FailureLog
from suanli.sim.pooling import pool_summary
from suanli.sim.topology import spread_summary

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True, slots=True)
class Stats:
    """Mean and percentiles (linear interpolation) of a sample; NaN when it is empty."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Stats:
        v = values[~np.isnan(values)]
        if not len(v):
            return cls(0, float("nan"), float("nan"), float("nan"), float("nan"))
        p50, p95, p99 = np.percentile(v, PERCENTILES)
        return cls(len(v), float(v.mean()), float(p50), float(p95), float(p99))


@dataclass(frozen=True, slots=True)
class GroupStats:
    """Job completion time and queueing delay of one group of jobs (those that arrived in the
    measurement window), and the share of the cluster's GPU capacity the group held and kept
    busy over the window."""

    jobs: int
    jct: Stats
    wait: Stats
    gpu_allocation: float = float("nan")
    gpu_utilisation: float = float("nan")


@dataclass(frozen=True, slots=True)
class ModelUse:
    """One GPU model over the measurement window: its GPUs, and the share of their capacity
    allocated and kept busy."""

    gpus: int
    gpu_allocation: float
    gpu_utilisation: float


WARMUP = 0.1
"""Share of the arrival span ``suanli simulate``'s measurement window leaves out at its start
(the warm-up, while the cluster fills)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The part of a run a summary measures, in seconds after the first arrival.

    Default: from ``warmup`` of the arrival span (the warm-up, while the cluster fills; none by
    default, ``WARMUP`` in ``suanli simulate``) to the last arrival (after it the cluster
    drains). A run whose jobs all arrive at once is measured whole. ``start``/``end`` override
    either side.
    """

    start: float | None = None
    end: float | None = None
    warmup: float = 0.0

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            v = getattr(self, name)
            if v is not None and not (v >= 0 and v != float("inf")):
                raise ValueError(f"window {name} must be a finite number of seconds >= 0, got {v}")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"window warm-up must be a share in [0, 1), got {self.warmup}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(
                f"window end ({self.end:g} s) must come after its start ({self.start:g} s)"
            )

    def resolve(self, t0: float, ta: float, t1: float) -> tuple[float, float, str]:
        """(start, end, how) in absolute seconds, for a run whose first arrival is ``t0``, last
        ``ta`` and end ``t1``."""
        if self.start is None and self.end is None and ta <= t0:
            return t0, t1, "the whole run (every job arrives at once)"
        end = t0 + self.end if self.end is not None else ta
        start = t0 + self.start if self.start is not None else t0 + self.warmup * (ta - t0)
        end = min(end, t1)
        start = min(start, end)
        parts = []
        if self.start is None and self.warmup > 0:
            parts.append(f"the first {self.warmup:.0%} of the arrivals (warm-up)")
        if self.end is None:
            parts.append("the drain after the last arrival")
        how = "leaves out " + " and ".join(parts) if parts else "as given"
        if self.start is None and self.warmup == 0 and self.end is not None:
            how = "from the first arrival, as given"
        return start, end, how


@dataclass(slots=True)
class JobRecords:
    """Per-job outcome arrays, aligned with the submit-sorted job list (NaN: never happened)."""

    ids: list[str]
    submit: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    tasks: np.ndarray
    gpu_milli: np.ndarray
    nodes: np.ndarray
    reason: dict[int, str] = field(default_factory=dict)
    held_s: np.ndarray | None = None
    """Seconds each job held its resources, over all its attempts."""
    attempts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    """Every attempt that ended (finished or preempted): job index, start, end. A job's
    milli-GPU held is ``gpu_milli`` (the same in each attempt for whole-GPU jobs)."""
    preemptions: np.ndarray | None = None
    """Times each job was preempted (None: preemption was off)."""
    lost_gpu_s: np.ndarray | None = None
    """GPU-seconds of work each job lost to preemption (None: preemption was off)."""
    interruptions: np.ndarray | None = None
    """Attempts of each job lost to hardware failures (None: failures were off)."""
    failures: FailureLog | None = None
    """What failed, when, and what it cost (None: failures were off)."""
    spread_gpu_s: np.ndarray | None = None
    """GPU-seconds each job ran slower than on the best placement for it (None: the
    topology model was off; ``suanli.sim.topology``)."""
    pooled: dict[str, Pooled] | None = None
    """Job id -> how its GPU memory overflow was served (None: memory pooling was off;
    ``suanli.sim.pooling``)."""
    slowdown: np.ndarray | None = None
    """Each job's slowdown from its last attempt's placement (1.0: as fast as on the best
    placement; None: the topology model was off)."""
    use: AttemptUse | None = None
    """What each attempt held and how it ended, aligned with ``attempts``."""
    waited: dict[int, Reason] = field(default_factory=dict)
    """Job index -> the last reason it was given while pending (started jobs too)."""
    budget: dict[int, str] = field(default_factory=dict)
    """Job index -> what a budget did to it at submission (refused or demoted, and why)."""
    predicted: tuple[np.ndarray, np.ndarray] | None = None
    """The P50 and P90 of each job's runtime as the runtime predictor predicted them at its
    submission (None: the estimator predicts no quantiles)."""
    startup_paid: np.ndarray | None = None
    """Start-up seconds each job's attempts spent on their GPUs (None: no start-up delay)."""
    startup_saved: np.ndarray | None = None
    """Start-up seconds pre-staging saved each job."""
    train_s: float = 0.0
    """Wall seconds the runtime predictor spent training in the run (a statistic: 0 for an
    estimator that does not train)."""
    fits: int = 0
    """How many times it trained."""
    start_estimate: tuple[np.ndarray, np.ndarray] | None = None
    """When each job was expected to start, as estimated at its submission
    (``suanli.core.starts``): the P50 and the P90 of the range, absolute times; NaN for a job never estimated (refused at submission), the start itself for
    one that started at once (None: estimates were not asked for)."""

    @classmethod
    def empty(cls, jobs: Sequence[Job]) -> JobRecords:
        n = len(jobs)
        return cls(
            ids=[j.id for j in jobs],
            submit=np.fromiter((j.submit for j in jobs), dtype=np.float64, count=n),
            start=np.full(n, np.nan),
            finish=np.full(n, np.nan),
            tasks=np.zeros(n, np.int64),
            gpu_milli=np.zeros(n, np.int64),
            nodes=np.zeros(n, np.int64),
        )


@dataclass(frozen=True, slots=True)
class Series:
    """Cluster state after each simulated instant: time, GPU allocation and busy ratios, pending jobs."""

    t: np.ndarray
    allocation: np.ndarray
    utilisation: np.ndarray
    pending: np.ndarray


@dataclass(frozen=True, slots=True)
class SimResult:
    """Everything one simulation run measured."""

    label: str
    cluster: str
    total_gpus: int
    jobs: int
    started: int
    finished: int
    unfinished: int
    makespan: float
    gpu_allocation: float
    """Time-weighted share of GPU capacity allocated over the measurement window (``window``):
    the figure to compare policies on, free of the warm-up and of the drain at the end."""
    gpu_utilisation: float
    """Same window: share of GPU capacity kept busy (each job's allocation × its GPU duty,
    ``Job.gpu_util``)."""
    gpu_allocation_run: float
    """Time-weighted share of GPU capacity allocated from the first arrival to the end of the run."""
    jct: Stats
    """Jobs that arrived in the window (``jct_run``: all of them)."""
    wait: Stats
    by_class: dict[str, GroupStats]
    by_tenant: dict[str, GroupStats]
    cycles: int
    decisions: int
    wall_s: float
    series: Series
    records: JobRecords
    job_tenant: list[str]
    job_class: list[str]
    preemptions: int = 0
    lost_gpu_hours: float = 0.0
    explain: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    """Timelines of the jobs asked about (``simulate(..., explain=...)``)."""
    job_queue: list[str] = field(default_factory=list)
    job_outcome: list[str] = field(default_factory=list)
    """Per job (record order): how the trace recorded it ending (``Job.outcome``; ``""``: not
    recorded). Empty for a result made without it."""
    job_gpu_util: np.ndarray | None = None
    job_storage_gb: np.ndarray | None = None
    job_network_gb: np.ndarray | None = None
    """Per job (record order): what metering needs besides the records."""
    budget_alerts: list[str] = field(default_factory=list)
    """Budget thresholds crossed during the run, in order."""
    window: tuple[float, float] = (0.0, 0.0)
    """The measurement window, absolute seconds (start, end)."""
    window_rule: str = ""
    """How the window was chosen, in words."""
    window_jobs: int = 0
    """Jobs that arrived in the window (what ``jct``, ``wait`` and the groups count)."""
    gpu_utilisation_run: float = float("nan")
    jct_run: Stats | None = None
    wait_run: Stats | None = None
    by_model: dict[str, ModelUse] = field(default_factory=dict)

    @property
    def decisions_per_s(self) -> float:
        return self.decisions / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s if self.wall_s > 0 else float("inf")

    def summary(self) -> dict[str, Any]:
        """Plain-data summary (JSON-ready)."""

        def num(x: float) -> float | None:
            return None if x != x else x  # NaN (nothing measured) is not valid JSON

        def st(s: Stats) -> dict[str, float | None]:
            return {
                "count": s.count,
                "mean": num(s.mean),
                "p50": num(s.p50),
                "p95": num(s.p95),
                "p99": num(s.p99),
            }

        def grp(g: dict[str, GroupStats]) -> dict[str, Any]:
            return {
                k: {
                    "jobs": v.jobs,
                    "jct": st(v.jct),
                    "wait": st(v.wait),
                    "gpu_allocation": num(v.gpu_allocation),
                    "gpu_utilisation": num(v.gpu_utilisation),
                }
                for k, v in g.items()
            }

        return {
            "policy": self.label,
            "cluster": self.cluster,
            "total_gpus": self.total_gpus,
            "jobs": self.jobs,
            "started": self.started,
            "finished": self.finished,
            "unfinished": self.unfinished,
            "makespan_s": self.makespan,
            "gpu_allocation": self.gpu_allocation,
            "gpu_utilisation": self.gpu_utilisation,
            "gpu_allocation_run": self.gpu_allocation_run,
            "window": {
                "start_s": self.window[0],
                "end_s": self.window[1],
                "rule": self.window_rule,
                "jobs": self.window_jobs,
            },
            "jct_s": st(self.jct),
            "queueing_delay_s": st(self.wait),
            "whole_run": {
                "gpu_allocation": self.gpu_allocation_run,
                "gpu_utilisation": num(self.gpu_utilisation_run),
                "jct_s": st(self.jct_run) if self.jct_run is not None else None,
                "queueing_delay_s": st(self.wait_run) if self.wait_run is not None else None,
            },
            "by_gpu_model": {
                k: {
                    "gpus": v.gpus,
                    "gpu_allocation": num(v.gpu_allocation),
                    "gpu_utilisation": num(v.gpu_utilisation),
                }
                for k, v in self.by_model.items()
            },
            "by_priority_class": grp(self.by_class),
            "by_tenant": grp(self.by_tenant),
            "cycles": self.cycles,
            "decisions": self.decisions,
            "wall_s": self.wall_s,
            "decisions_per_s": self.decisions_per_s,
            "jobs_per_s": self.jobs_per_s,
            "preemptions": self.preemptions,
            "lost_gpu_hours": self.lost_gpu_hours,
            "refused": sum(1 for v in self.records.budget.values() if v.startswith("refused")),
            "demoted": sum(1 for v in self.records.budget.values() if v.startswith("demoted")),
            "budget_alerts": self.budget_alerts,
            **(
                {"failures": self.records.failures.summary()}
                if self.records.failures is not None
                else {}
            ),
            **(
                {"memory_pool": pool_summary(self.records)}
                if self.records.pooled is not None
                else {}
            ),
            **(
                {"topology": spread_summary(self.records)}
                if self.records.spread_gpu_s is not None
                else {}
            ),
            **(
                {
                    "explain": {
                        j: [{"t": t, "event": e} for t, e in ev] for j, ev in self.explain.items()
                    }
                }
                if self.explain
                else {}
            ),
        }


def _time_weighted(t: np.ndarray, v: np.ndarray, t0: float, t1: float) -> float:
    """Mean of the step function ``v`` (value ``v[i]`` from ``t[i]`` to ``t[i+1]``) over [t0, t1]."""
    if t1 <= t0 or not len(t):
        return 0.0
    edges = np.clip(np.append(t, t1), t0, t1)
    return float((v * np.diff(edges)).sum() / (t1 - t0))


def _groups(
    keys: list[str],
    jct: np.ndarray,
    wait: np.ndarray,
    inside: np.ndarray,
    held: np.ndarray,
    busy: np.ndarray,
) -> dict[str, GroupStats]:
    """Per group: the stats of its jobs that arrived in the window (``inside``), and its share
    of the window's GPU capacity held and kept busy (``held``/``busy``: per job, already
    divided by capacity x window)."""
    names, inv = np.unique(np.array(keys, dtype=object), return_inverse=True)
    held_g = np.bincount(inv, weights=held, minlength=len(names))
    busy_g = np.bincount(inv, weights=busy, minlength=len(names))
    out = {}
    for gi, name in enumerate(names):
        sel = (inv == gi) & inside
        out[str(name)] = GroupStats(
            int(sel.sum()),
            Stats.of(jct[sel]),
            Stats.of(wait[sel]),
            float(held_g[gi]),
            float(busy_g[gi]),
        )
    return out


def _window_use(
    rec: JobRecords, util: np.ndarray, w0: float, w1: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per attempt: GPU-milli-seconds held inside [w0, w1], and the same for busy; and the
    attempts' job indices."""
    if rec.attempts is None or rec.use is None or not len(rec.attempts[0]):
        empty = np.zeros(0)
        return empty, empty, np.zeros(0, np.int64)
    job, start, end = rec.attempts
    overlap = np.clip(np.minimum(end, w1) - np.maximum(start, w0), 0.0, None)
    held = rec.use.gpu_milli * overlap
    return held, held * util[job], job


def _by_model(
    cluster: ClusterSpec, rec: JobRecords, held: np.ndarray, busy: np.ndarray, span: float
) -> dict[str, ModelUse]:
    """Each GPU model's share of its own capacity allocated and busy over the window."""
    gpus = cluster.gpus_by_model
    if not gpus:
        return {}
    use = rec.use
    h = dict.fromkeys(gpus, 0.0)
    b = dict.fromkeys(gpus, 0.0)
    if use is not None and len(held):
        for total, per in ((h, use.per_model(held)), (b, use.per_model(busy))):
            for name, v in per.items():
                total[name] += v
    out = {}
    for name, count in gpus.items():
        cap = count * MILLI * span
        out[name] = ModelUse(
            count, h[name] / cap if cap > 0 else 0.0, b[name] / cap if cap > 0 else 0.0
        )
    return out


def summarise(
    *,
    label: str,
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    rec: JobRecords,
    series: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    end: float | None,
    cycles: int,
    decisions: int,
    wall_s: float,
    explain: dict[str, list[tuple[float, str]]] | None = None,
    budget_alerts: list[str] | None = None,
    window: Window | None = None,
) -> SimResult:
    t, alloc, busy, pending = series
    cap = max(cluster.total_gpus * MILLI, 1)
    finished = ~np.isnan(rec.finish)
    started = ~np.isnan(rec.start)
    t0 = float(rec.submit.min()) if len(rec.submit) else 0.0
    last = float(np.nanmax(rec.finish)) if finished.any() else t0
    t1 = end if end is not None else max(last, float(t[-1]) if len(t) else t0)
    ta = min(float(rec.submit.max()) if len(rec.submit) else t0, t1)
    w0, w1, rule = (window or Window()).resolve(t0, ta, t1)
    jct = rec.finish - rec.submit
    wait = rec.start - rec.submit
    inside = (rec.submit >= w0) & (rec.submit <= w1)
    tenants = [j.tenant for j in jobs]
    classes = [j.priority_class for j in jobs]
    util = np.fromiter((j.gpu_util for j in jobs), np.float64, len(jobs))
    held_a, busy_a, job_a = _window_use(rec, util, w0, w1)
    span = w1 - w0
    scale = 1.0 / (cap * span) if span > 0 else 0.0
    held_j = np.bincount(job_a, weights=held_a, minlength=len(jobs)) * scale
    busy_j = np.bincount(job_a, weights=busy_a, minlength=len(jobs)) * scale
    return SimResult(
        label=label,
        cluster=cluster.name,
        total_gpus=cluster.total_gpus,
        jobs=len(jobs),
        started=int(started.sum()),
        finished=int(finished.sum()),
        unfinished=int((~finished).sum()),
        makespan=last - t0,
        gpu_allocation=_time_weighted(t, alloc / cap, w0, w1),
        gpu_utilisation=_time_weighted(t, busy / cap, w0, w1),
        gpu_allocation_run=_time_weighted(t, alloc / cap, t0, t1),
        jct=Stats.of(jct[inside]),
        wait=Stats.of(wait[inside]),
        by_class=_groups(classes, jct, wait, inside, held_j, busy_j),
        by_tenant=_groups(tenants, jct, wait, inside, held_j, busy_j),
        cycles=cycles,
        decisions=decisions,
        wall_s=wall_s,
        series=Series(t, alloc / cap, busy / cap, pending),
        records=rec,
        job_tenant=tenants,
        job_class=classes,
        preemptions=int(rec.preemptions.sum()) if rec.preemptions is not None else 0,
        lost_gpu_hours=float(rec.lost_gpu_s.sum()) / 3600 if rec.lost_gpu_s is not None else 0.0,
        explain=explain or {},
        budget_alerts=budget_alerts or [],
        job_queue=[j.queue for j in jobs],
        job_outcome=[j.outcome for j in jobs],
        job_gpu_util=util,
        job_storage_gb=np.fromiter((j.storage_gb for j in jobs), np.float64, len(jobs)),
        job_network_gb=np.fromiter((j.network_gb for j in jobs), np.float64, len(jobs)),
        window=(w0, w1),
        window_rule=rule,
        window_jobs=int(inside.sum()),
        gpu_utilisation_run=_time_weighted(t, busy / cap, t0, t1),
        jct_run=Stats.of(jct),
        wait_run=Stats.of(wait),
        by_model=_by_model(cluster, rec, held_a, busy_a, span),
    )
