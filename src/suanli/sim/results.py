"""Simulation results as typed values: per-job records, time series and summary statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suanli.core.decisions import Reason
from suanli.core.model import MILLI, ClusterSpec, Job
from suanli.sim.attempts import AttemptUse

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
    """Job completion time and queueing delay of one group of jobs."""

    jobs: int
    jct: Stats
    wait: Stats


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
    use: AttemptUse | None = None
    """What each attempt held and how it ended, aligned with ``attempts``."""
    waited: dict[int, Reason] = field(default_factory=dict)
    """Job index -> the last reason it was given while pending (started jobs too)."""
    budget: dict[int, str] = field(default_factory=dict)
    """Job index -> what a budget did to it at submission (refused or demoted, and why)."""

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
    """Time-weighted share of GPU capacity allocated while the workload arrives (first to last
    arrival): the figure to compare policies on, free of the drain at the end."""
    gpu_utilisation: float
    """Same window: share of GPU capacity kept busy (allocation × each job's ``gpu_util``)."""
    gpu_allocation_run: float
    """Time-weighted share of GPU capacity allocated from the first arrival to the end of the run."""
    jct: Stats
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
    job_gpu_util: np.ndarray | None = None
    job_storage_gb: np.ndarray | None = None
    job_network_gb: np.ndarray | None = None
    """Per job (record order): what metering needs besides the records."""
    budget_alerts: list[str] = field(default_factory=list)
    """Budget thresholds crossed during the run, in order."""

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
            return {k: {"jobs": v.jobs, "jct": st(v.jct), "wait": st(v.wait)} for k, v in g.items()}

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
            "jct_s": st(self.jct),
            "queueing_delay_s": st(self.wait),
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


def _groups(keys: list[str], jct: np.ndarray, wait: np.ndarray) -> dict[str, GroupStats]:
    names, inv = np.unique(np.array(keys, dtype=object), return_inverse=True)
    out = {}
    for gi, name in enumerate(names):
        sel = inv == gi
        out[str(name)] = GroupStats(int(sel.sum()), Stats.of(jct[sel]), Stats.of(wait[sel]))
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
) -> SimResult:
    t, alloc, busy, pending = series
    cap = max(cluster.total_gpus * MILLI, 1)
    finished = ~np.isnan(rec.finish)
    started = ~np.isnan(rec.start)
    t0 = float(rec.submit.min()) if len(rec.submit) else 0.0
    last = float(np.nanmax(rec.finish)) if finished.any() else t0
    t1 = end if end is not None else max(last, float(t[-1]) if len(t) else t0)
    # The arrival window; a single arrival (or all at once) falls back to the whole run.
    ta = min(float(rec.submit.max()) if len(rec.submit) else t0, t1)
    if ta <= t0:
        ta = t1
    jct = rec.finish - rec.submit
    wait = rec.start - rec.submit
    tenants = [j.tenant for j in jobs]
    classes = [j.priority_class for j in jobs]
    return SimResult(
        label=label,
        cluster=cluster.name,
        total_gpus=cluster.total_gpus,
        jobs=len(jobs),
        started=int(started.sum()),
        finished=int(finished.sum()),
        unfinished=int((~finished).sum()),
        makespan=last - t0,
        gpu_allocation=_time_weighted(t, alloc / cap, t0, ta),
        gpu_utilisation=_time_weighted(t, busy / cap, t0, ta),
        gpu_allocation_run=_time_weighted(t, alloc / cap, t0, t1),
        jct=Stats.of(jct),
        wait=Stats.of(wait),
        by_class=_groups(classes, jct, wait),
        by_tenant=_groups(tenants, jct, wait),
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
        job_gpu_util=np.fromiter((j.gpu_util for j in jobs), np.float64, len(jobs)),
        job_storage_gb=np.fromiter((j.storage_gb for j in jobs), np.float64, len(jobs)),
        job_network_gb=np.fromiter((j.network_gb for j in jobs), np.float64, len(jobs)),
    )
