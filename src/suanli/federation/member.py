"""A member of a simulated federation: one region's cluster with its own scheduler (built by
the core builder from the region's policy set), the simulator's applier and a start-time
estimator, stepped on the federation's clock.

``Member`` is also the interface a live member control plane must serve to a router
(``docs/network.md``, "A live member"): whether it is up, whether a job could ever run there
and could start now, its load and utilisation, when a job would start there if sent now and
how long it would run, and its prices. The simulator answers from its own state; a live
member would answer the same questions through its API.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from suanli.core.builder import ImpossibleJobError, PolicySet, Setting, build, check_feasible
from suanli.core.decisions import Admit, apply
from suanli.core.model import DEFAULT_PRIORITY_CLASSES, MILLI, Job, PriorityClass, TaskRequest
from suanli.core.seams import Predictor
from suanli.core.starts import Estimate, RunningRow, StartEstimator
from suanli.core.view import ClusterView
from suanli.federation.model import Outage, Region
from suanli.federation.units import units_per_gpu_hour
from suanli.sim.engine import Replay
from suanli.sim.explain import Explainer

__all__ = ["PRIORITY_CLASSES", "RESERVED", "Member", "Offer"]

RESERVED = "reserved"
"""The priority class of a job whose use draws on capacity bought ahead: it schedules as a
``normal`` job and is priced at nothing more (``suanli.federation.settle``)."""

PRIORITY_CLASSES: Mapping[str, PriorityClass] = {
    **DEFAULT_PRIORITY_CLASSES, RESERVED: PriorityClass(RESERVED, 0, preemptible=True),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Offer:
    """What a member tells a router of one job: the mean speed, on-demand price and common
    units (``suanli.federation.units``) per GPU-hour of the GPUs it could use there
    (weighted by how many there are), the slowest speed and dearest price of those (a worst
    case), and whether it could start now."""

    speed: float
    price: float
    units: float
    slowest: float
    dearest: float
    admits_now: bool


class Member:
    """One region of the federation on the federation's clock (module docstring)."""

    def __init__(
        self,
        region: Region,
        seed: int,
        runtime: Predictor,
        outages: tuple[Outage, ...] = (),
        shares: StartEstimator | None = None,
    ) -> None:
        """``runtime``: the predictor the federation shares (it learns each job's end once,
        wherever the job ran); ``shares``: a member whose calibration of predicted to real
        runtimes this one's start-time plans share."""
        self.region = region
        self.name = region.name
        self.view = view = ClusterView(region.cluster)
        self.sched = build(view, PolicySet.parse(region.policy),
                           Setting(priority_classes=PRIORITY_CLASSES))  # fmt: skip
        self.rep = Replay(self.sched, region.cluster, [], view, Explainer(()), 0.0)
        self.runtime = runtime
        self.starts = StartEstimator(view, runtime)
        if shares is not None:
            self.starts.calibration = shares.calibration
        self.rng = np.random.default_rng(seed)
        self.capacity_milli = view.total_gpus * MILLI
        self.queued_milli = 0
        self.outages = tuple((o.start, o.end) for o in outages if o.region == region.name)
        self._never: dict[object, str] = {}
        self._offers: dict[frozenset[str], tuple[float, float, float, float, float]] = {}
        self._models: dict[frozenset[str], list[str]] = {}
        self.changed = False

    # ---------------------------------------------------------------- what a router reads
    def up(self, t: float) -> bool:
        return not any(s <= t < e for s, e in self.outages)

    def back_at(self, t: float) -> float:
        """When the member, down at ``t``, takes jobs again."""
        return max((e for s, e in self.outages if s <= t < e), default=t)

    def never(self, job: Job) -> str:
        """Why no node of this member could ever hold ``job`` ("" if one could)."""
        key = (job.task, job.tasks, job.gang_min)
        why = self._never.get(key)
        if why is None:
            try:
                check_feasible(self.region.cluster, [job])
                why = ""
            except ImpossibleJobError as e:
                why = str(e)
            self._never[key] = why
        return why

    def offer(self, job: Job, task: TaskRequest | None = None) -> Offer:
        """What this member tells a router of ``job`` (run as ``task`` if given: held to a
        GPU model)."""
        task = job.task if task is None else task
        models = task.gpu_models
        figures = self._offers.get(models)
        if figures is None:
            view = self.view
            ok = (view.model_ok(models) & (view.node_gpus > 0)).tolist()
            nodes = [n for n, k in zip(self.region.cluster.nodes, ok, strict=True) if k]
            gpus = np.array([n.gpus for n in nodes], float)
            speeds = view.node_speed[np.flatnonzero(ok)]
            names = [n.gpu_model.name for n in nodes]  # type: ignore[union-attr]
            prices = np.array([self.region.prices[m] for m in names])
            units = np.array([units_per_gpu_hour(m) for m in names])
            total = gpus.sum()
            figures = (
                float((gpus * speeds).sum() / total), float((gpus * prices).sum() / total),
                float((gpus * units).sum() / total), float(speeds.min()), float(prices.max()),
            ) if total else (1.0, 0.0, 1.0, 1.0, 0.0)  # fmt: skip
            self._offers[models] = figures
        k = self.view.fit_counts(task, job.tasks)
        return Offer(*figures, admits_now=int(k.sum()) >= job.min_tasks)

    def models(self, job: Job) -> list[str]:
        """The GPU models of this member the job may run on, by name."""
        key = job.task.gpu_models
        names = self._models.get(key)
        if names is None:
            view = self.view
            ok = view.model_ok(key) & (view.node_gpus > 0)
            names = sorted({view.models[i].name for i in view.node_model[ok].tolist() if i >= 0})
            self._models[key] = names
        return names

    def predict(self, job: Job) -> float:
        """The job's median runtime at reference speed, as the federation's predictor has
        learned it from the jobs ended anywhere so far."""
        return float(self.runtime.quantile(job, 0.5))

    def load(self) -> float:
        """GPUs held and GPUs the queue asks for, over the member's GPUs."""
        return (self.view.allocated_milli + self.queued_milli) / max(self.capacity_milli, 1)

    def utilisation(self) -> float:
        return self.view.allocated_milli / max(self.capacity_milli, 1)

    def running_rows(self) -> list[RunningRow]:
        rep = self.rep
        return [(rep.jobs[i], rep.attempt_start[i], p) for i, p in rep.running.items()]

    def what_if(self, job: Job, t: float) -> Estimate:
        """When ``job`` would start here if sent now (``StartEstimator.what_if``)."""
        return self.starts.what_if(t, self.running_rows, self.sched.pending_jobs, job)

    # ---------------------------------------------------------------- the clock
    def submit(self, job: Job, t: float) -> None:
        rep = self.rep
        i = rep.index.get(job.id)
        if i is None:
            rep.add(job)
        else:  # taken back earlier (never started) and sent here again
            rep.jobs[i] = job
        told = self.sched.submit(job, t)
        if told is not None:
            apply((told,), self.rep, t)
        self.queued_milli += job.gpu_demand_milli
        self.changed = True

    def withdraw(self, job_id: str) -> bool:
        """Take a pending job back (to route it elsewhere); False if it is not pending."""
        rep = self.rep
        if not self.sched.remove(job_id):
            return False
        job = rep.jobs[rep.index[job_id]]
        self.queued_milli -= job.gpu_demand_milli
        self.changed = True
        return True

    def next_finish(self) -> float:
        return self.rep.finish_heap[0][0] if self.rep.finish_heap else math.inf

    def finish(self, t: float) -> list[Job]:
        """Apply every attempt's end at ``t``: the jobs that ended."""
        rep, heap, seqs = self.rep, self.rep.finish_heap, self.rep.attempt_seq
        ended = []
        while heap and heap[0][0] == t:
            _, fseq, i = heapq.heappop(heap)
            if seqs.get(i) != fseq:
                continue
            rep.finished(i, t)
            job = rep.jobs[i]
            self.starts.learn(job, job.runtime)
            ended.append(job)
            self.changed = True
        return ended

    def cycle(self, t: float) -> None:
        """A scheduling cycle at ``t`` if anything is pending."""
        self.changed = False
        if not len(self.sched):
            return
        out = self.sched.cycle(self.rng, t)
        apply(out, self.rep, t)
        for d in out:
            if type(d) is Admit:
                self.queued_milli -= d.job.gpu_demand_milli

    def wake_at(self) -> float:
        return self.sched.wake_at if len(self.sched) else math.inf
