"""Builders for the quota tests, and an independent model of the admission rules.

``Ledger`` restates the rules of ``suanli.core.tenancy`` (nominal, borrowing limit, lending
limit, cohorts) in plain Python over dictionaries, with none of ``QuotaBook``'s code: the
tests compare what the scheduler and the simulator did against it. Amounts are in the spec's
units: milli-GPU, milli-CPU and MiB (``G`` is one GPU, or one CPU).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from builders import order, placement, rng, sched
from suanli.core.decisions import Admit
from suanli.core.model import MILLI, ClusterSpec, GpuModel, Job
from suanli.core.scheduler import Scheduler
from suanli.core.tenancy import CPU, GPU, MEMORY, QueueSpec, TenancySpec, gpu_of
from suanli.core.view import ClusterView, TaskPlacement

G = MILLI
"""One GPU, or one CPU, in milli-units."""

H100 = GpuModel("H100", 81_920, 4.0)


def queue(
    name: str,
    cohort: str | None = None,
    *,
    org: str = "",
    nominal: Mapping[str, int] | None = None,
    borrow: Mapping[str, int] | None = None,
    lend: Mapping[str, int] | None = None,
) -> QueueSpec:
    return QueueSpec(
        name,
        org=org,
        cohort=cohort,
        nominal=dict(nominal or {}),
        borrowing_limit=dict(borrow or {}),
        lending_limit=dict(lend or {}),
    )


def tenancy(*queues: QueueSpec) -> TenancySpec:
    return TenancySpec(tuple(queues))


def qsched(
    spec: ClusterSpec,
    *queues: QueueSpec,
    queue_order: str = "fifo",
    place: str = "first-fit",
    strict: bool = False,
) -> Scheduler:
    """A scheduler over ``spec`` with quotas for ``queues``."""
    return sched(
        ClusterView(spec),
        order(queue_order),
        placement(place),
        strict=strict,
        tenancy=(tenancy(*queues)),
    )


# ------------------------------------------------------------------ demands

Demand = dict[str, int]


def add(total: Demand, more: Mapping[str, int]) -> None:
    for r, v in more.items():
        total[r] = total.get(r, 0) + v


def whole_demand(job: Job, model: str | None = None) -> Demand:
    """What the job asks for with all its tasks (its GPUs on ``model``, if given)."""
    t, n = job.task, job.tasks
    gpu = n * t.gpu_share_milli if t.gpus else 0
    return _demand(n * t.cpu_milli, n * t.memory_mib, gpu, model)


def placed_demand(spec: ClusterSpec, tasks: Iterable[TaskPlacement]) -> Demand:
    """What a placement holds, each task's GPUs charged to its node's model."""
    total: Demand = {}
    for tp in tasks:
        m = spec.nodes[tp.node].gpu_model
        gpu = tp.gpu_milli * len(tp.gpus)
        add(total, _demand(tp.cpu_milli, tp.memory_mib, gpu, m.name if m and gpu else None))
    return total


def record_demand(job: Job, tasks: int, gpu_milli: int, model: str | None) -> Demand:
    """What a simulated job held: ``tasks`` started tasks, ``gpu_milli`` in all, on ``model``."""
    t = job.task
    return _demand(tasks * t.cpu_milli, tasks * t.memory_mib, gpu_milli, model)


def _demand(cpu: int, mem: int, gpu: int, model: str | None) -> Demand:
    d = {CPU: cpu, MEMORY: mem, GPU: gpu}
    if model is not None and gpu:
        d[gpu_of(model)] = gpu
    return d


# ------------------------------------------------------------------ the rules, restated


class Ledger:
    """Usage per queue, and Kueue's admission rules over it, in plain Python."""

    def __init__(self, spec: TenancySpec) -> None:
        self.queues = {q.name: q for q in spec.queues}
        self.resources = sorted(
            {r for q in spec.queues for r in (*q.nominal, *q.borrowing_limit, *q.lending_limit)}
        )
        # A queue without a cohort is a cohort of its own.
        self.cohort = {q.name: q.cohort or f"(alone) {q.name}" for q in spec.queues}
        self.usage: dict[str, Demand] = {q.name: {} for q in spec.queues}

    # quotas of one queue and resource
    def nominal(self, q: str, r: str) -> int:
        return self.queues[q].nominal.get(r, 0)

    def cap(self, q: str, r: str) -> float:
        limit = self.queues[q].borrowing_limit.get(r)
        return float("inf") if limit is None else self.nominal(q, r) + limit

    def lendable(self, q: str, r: str) -> int:
        nominal = self.nominal(q, r)
        return min(self.queues[q].lending_limit.get(r, nominal), nominal)

    def reserve(self, q: str, r: str) -> int:
        return self.nominal(q, r) - self.lendable(q, r)

    def members(self, q: str) -> list[str]:
        return [p for p in self.queues if self.cohort[p] == self.cohort[q]]

    def pool(self, q: str, r: str) -> int:
        return sum(self.lendable(p, r) for p in self.members(q))

    def ceiling(self, q: str, r: str) -> float:
        return min(self.cap(q, r), self.reserve(q, r) + self.pool(q, r))

    # usage
    def charge(self, q: str, d: Mapping[str, int]) -> None:
        add(self.usage[q], d)

    def refund(self, q: str, d: Mapping[str, int]) -> None:
        add(self.usage[q], {r: -v for r, v in d.items()})

    def used(self, q: str, r: str) -> int:
        return self.usage[q].get(r, 0)

    def pool_used(self, q: str, r: str) -> int:
        return sum(max(0, self.used(p, r) - self.reserve(p, r)) for p in self.members(q))

    # the rules
    def admits(self, q: str, d: Mapping[str, int]) -> bool:
        """Could ``q`` take demand ``d`` on top of its usage now?"""
        for r in self.resources:
            need = d.get(r, 0)
            if not need:
                continue
            used = self.used(q, r)
            if used + need > self.cap(q, r):
                return False
            extra = max(0, used + need - self.reserve(q, r)) - max(0, used - self.reserve(q, r))
            if self.pool_used(q, r) + extra > self.pool(q, r):
                return False
        return True

    def allowed_models(self, q: str, job: Job, models: Sequence[str]) -> list[str] | None:
        """The GPU models on which ``q`` could take the whole job now (None: any model, as
        no GPU is governed per model or the job holds none)."""
        if not job.task.gpus or not any(r.startswith("gpu:") for r in self.resources):
            return None
        ok = job.task.gpu_models
        return [m for m in models if (not ok or m in ok) and self.admits(q, whole_demand(job, m))]

    def violations(self) -> list[str]:
        """Every broken limit of the current usage: a queue above its nominal plus borrowing
        limit, or a cohort whose pool is overdrawn."""
        out = []
        for q in self.queues:
            for r in self.resources:
                if self.used(q, r) > self.cap(q, r):
                    out.append(f"queue {q} holds {self.used(q, r)} of {r} > {self.cap(q, r)}")
                if self.pool_used(q, r) > self.pool(q, r):
                    out.append(
                        f"cohort {self.cohort[q]}: {self.pool_used(q, r)} of {r} borrowed "
                        f"from a pool of {self.pool(q, r)}"
                    )
        return out


# ---------------------------------------------------------------- decisions


def ids(decisions) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(type(d).__name__, d.job.id) for d in decisions]


def admitted(decisions) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.job.id for d in decisions if isinstance(d, Admit)]


def run_one(s: Scheduler, *jobs: Job) -> list:  # type: ignore[type-arg]
    """Submit ``jobs`` and run one cycle; return its decisions."""
    for j in jobs:
        s.submit(j)
    return s.cycle(rng())


def held(spec: ClusterSpec, decisions) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """What the admitted jobs among ``decisions`` hold, from their placements."""
    total: dict[str, int] = {}
    for d in decisions:
        if isinstance(d, Admit):
            add(total, placed_demand(spec, d.placement.tasks))
    return total
