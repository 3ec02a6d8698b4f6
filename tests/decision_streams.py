"""Decision streams: every decision of a seeded replay, in order, reduced to one digest.

The scheduling core must decide exactly as it did when the streams were recorded (the commit
named in ``fixtures/streams/cases.json``): the same admissions on the same GPUs, the same
preemptions with the same lost and kept work, the same skips with the same reasons, at the
same instants. The job lists, quota files, budgets and price book are fixtures of their own
(``fixtures/streams/``), so that later changes to the workload generator or to the derived
quotas do not move them. ``make_fixtures.py`` there made them and recorded the digests.

A stream is hashed as it is made (SHA-256 over one line per cycle and per decision); beside it
an *outcome* digest covers what the simulator reported per job (start, finish, tasks, GPUs,
preemptions, lost work, last reason, budget verdict), so that an applier that mis-reads a
decision shows up even where the core decided the same.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suanli.config.budgets import load_budgets
from suanli.config.cluster import load_cluster
from suanli.config.tenancy import load_tenancy
from suanli.core.budget import BudgetBook
from suanli.core.decisions import Admit, Decision, Demoted, Preempt, Reject, Skip
from suanli.core.model import Job, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.core.scheduler import Scheduler
from suanli.core.seams import OrderContext
from suanli.core.speed import REFERENCE, SpeedBasis
from suanli.metering.costmodel import PriceBookCostModel
from suanli.metering.prices import load_price_book
from suanli.metering.simout import DEFAULT_EPOCH, parse_epoch
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.results import SimResult

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "streams"

PREEMPTION = {
    "off": None,
    "reclaim": PreemptionConfig(min_runtime=300.0),
    "priority-only": PreemptionConfig(min_runtime=300.0, reclaim=False),
    "reclaim-within": PreemptionConfig(min_runtime=1800.0, reclaim_within=120.0, max_preemptions=2),
}
"""The preemption settings the cases name."""

JOB_FIELDS = (
    "id", "submit", "runtime", "tasks", "gang_min", "tenant", "queue", "priority_class",
    "estimate", "gpu_util", "checkpoint_interval",
)  # fmt: skip
TASK_FIELDS = ("gpus", "gpu_milli", "gpu_memory_mib", "cpu_milli", "memory_mib")


def job_to_json(j: Job) -> list[Any]:
    t = j.task
    return [getattr(j, f) for f in JOB_FIELDS] + [
        [getattr(t, f) for f in TASK_FIELDS] + [sorted(t.gpu_models)]
    ]


def job_from_json(row: list[Any]) -> Job:
    *fields, task = row
    *counts, models = task
    return Job(
        **dict(zip(JOB_FIELDS, fields, strict=True)),
        task=TaskRequest(*counts, gpu_models=frozenset(models)),
    )


def load_jobs(name: str, root: Path = FIXTURES) -> tuple[str, list[Job]]:
    """A fixture job list: its cluster (a short form) and its jobs."""
    doc = json.loads((root / f"jobs-{name}.json").read_text())
    return doc["cluster"], [job_from_json(r) for r in doc["jobs"]]


def save_jobs(name: str, cluster: str, jobs: list[Job], root: Path = FIXTURES) -> None:
    rows = ",\n".join(json.dumps(job_to_json(j), separators=(",", ":")) for j in jobs)
    (root / f"jobs-{name}.json").write_text(
        f'{{"cluster": {json.dumps(cluster)},\n"jobs": [\n{rows}\n]}}\n'
    )


@dataclass(frozen=True)
class Case:
    """One recorded replay: a job list, a policy set, quotas, preemption and budgets."""

    name: str
    jobs: str
    policy: str
    quotas: str | None = None
    """A tenancy file in the fixtures (``tenancy-*.yaml``), or None."""
    preemption: str = "off"
    budgets: bool = False
    seed: int = 0
    cycle_interval: float = 0.0
    trace: str | None = None
    """A public trace slice instead of a fixture job list: ``philly:FIRST:COUNT``."""
    cluster: str | None = None
    """The cluster, for a trace slice (a fixture job list names its own)."""

    @classmethod
    def of(cls, d: dict[str, Any]) -> Case:
        return cls(**{k: v for k, v in d.items() if k not in ("expect",)})

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, False, 0, 0.0, "off")}


def digest_line(h: Any, *parts: object) -> None:
    h.update(("\t".join(map(str, parts)) + "\n").encode())


def placement_text(p: Any) -> str:
    return ";".join(
        f"{tp.node}:{','.join(map(str, tp.gpus))}:{tp.gpu_milli}:{tp.gpu_memory_mib}:"
        f"{tp.cpu_milli}:{tp.memory_mib}"
        for tp in p.tasks
    )


def decision_line(h: Any, t: float, d: Decision) -> None:
    """One decision, with every figure it carries (floats by ``repr``: exact)."""
    if type(d) is Admit:
        digest_line(h, "A", repr(t), d.job.id, d.job.priority_class, placement_text(d.placement))
    elif type(d) is Skip:
        digest_line(h, "S", repr(t), d.job.id, repr(d.reason))
    elif type(d) is Preempt:
        digest_line(
            h, "P", repr(t), d.job.id, d.by, d.kind, repr(d.lost_gpu_s), repr(d.kept_s),
            placement_text(d.placement),
        )  # fmt: skip
    elif type(d) is Reject:
        digest_line(h, "R", repr(t), d.job.id, repr(d.reason))
    elif type(d) is Demoted:
        digest_line(h, "D", repr(t), d.job.id, d.job.priority_class, d.was, repr(d.reason))
    else:
        raise TypeError(f"not a decision: {d!r}")


def recording(base: type[Scheduler]) -> type[Scheduler]:
    """``base`` that hashes every cycle and every decision it returns (and a submission's
    verdict) as it goes."""

    class Recording(base):  # type: ignore[valid-type,misc]
        last: Recording

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.hash = hashlib.sha256()
            self.decisions = 0
            self.cycles = 0
            Recording.last = self

        def submit(self, job: Job, now: float | None = None, **kw: Any) -> Decision | None:
            told = super().submit(job, now, **kw)
            if told is not None:
                self.decisions += 1
                decision_line(self.hash, -1.0 if now is None else now, told)
            return told

        def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
            out = super().cycle(rng, now)
            self.cycles += 1
            digest_line(self.hash, "C", repr(now), len(out))
            for d in out:
                decision_line(self.hash, now, d)
            self.decisions += len(out)
            return out

    return Recording


def outcome_digest(res: SimResult) -> str:
    """What the simulator reported per job, to the bit."""
    h = hashlib.sha256()
    r = res.records
    pre = r.preemptions if r.preemptions is not None else np.zeros(len(r.ids), np.int64)
    lost = r.lost_gpu_s if r.lost_gpu_s is not None else np.zeros(len(r.ids))
    for i, jid in enumerate(r.ids):
        digest_line(
            h, jid, repr(float(r.start[i])), repr(float(r.finish[i])), int(r.tasks[i]),
            int(r.gpu_milli[i]), int(pre[i]), repr(float(lost[i])), r.reason.get(i, ""),
            r.budget.get(i, ""),
        )  # fmt: skip
    digest_line(h, res.cycles, res.decisions, res.finished)
    return h.hexdigest()


def budget_book(cluster_name: str, models: list[str], root: Path = FIXTURES) -> BudgetBook:
    epoch_s = parse_epoch(DEFAULT_EPOCH) // 1000
    spec = load_budgets(root / "budgets.yaml", epoch_s=epoch_s)
    prices = load_price_book(root / "prices.yaml")
    return BudgetBook(spec, PriceBookCostModel(prices, cluster_name, epoch_s * 1000, models))


def trace_jobs(spec: str, trace_dir: Path) -> tuple[list[Job], SpeedBasis]:
    """``philly:FIRST:COUNT``: COUNT jobs of the Philly trace from the FIRST, submit times
    shifted to start at 0, and the trace's speed basis (its durations are on its own K80s
    and P40s: on another cluster they are scaled, as ``suanli simulate --trace`` does)."""
    from dataclasses import replace

    from suanli.traces import resolve_trace

    name, first, count = spec.split(":")
    loaded = resolve_trace(name, trace_dir)
    jobs = loaded.jobs[int(first) : int(first) + int(count)]
    t0 = jobs[0].submit
    return [replace(j, submit=j.submit - t0) for j in jobs], loaded.basis


def run_case(case: Case, trace_dir: Path | None = None, root: Path = FIXTURES) -> dict[str, Any]:
    """Replay ``case``; its stream and outcome digests and counts."""
    basis = REFERENCE  # the fixture job lists: seconds at V100 = 1.0
    if case.trace is not None:
        assert trace_dir is not None and case.cluster is not None
        jobs, basis = trace_jobs(case.trace, trace_dir)
        cluster_text = case.cluster
    else:
        cluster_text, jobs = load_jobs(case.jobs, root)
    cluster = load_cluster(cluster_text)
    tenancy = ctx = None
    if case.quotas is not None:
        config = load_tenancy(root / case.quotas)
        tenancy = config.tenancy
        ctx = OrderContext(config.priority_classes)
    cls = recording(Scheduler)
    res = simulate(
        cluster,
        jobs,
        PolicySet.parse(case.policy),
        seed=case.seed,
        tenancy=tenancy,
        ctx=ctx,
        preemption=PREEMPTION[case.preemption],
        cycle_interval=case.cycle_interval,
        scheduler=cls,
        budgets=(
            budget_book(cluster.name, [m.name for m in cluster.gpu_models], root)
            if case.budgets
            else None
        ),
        speed_basis=basis,
    )
    rec = cls.last
    return {
        "stream": rec.hash.hexdigest(),
        "decisions": rec.decisions,
        "cycles": rec.cycles,
        "outcome": outcome_digest(res),
        "finished": res.finished,
        "preemptions": int(res.records.preemptions.sum())
        if res.records.preemptions is not None
        else 0,
        "budget_verdicts": len(res.records.budget),
    }
