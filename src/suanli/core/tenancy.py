"""Tenancy: queues with guaranteed quotas, borrowing and lending inside cohorts.

A *queue* serves a subtree of the organisation (``org``, a path such as ``ai-lab/vision``)
and holds, per resource, a **nominal** (guaranteed) quota, a **borrowing limit** (how far above
its nominal it may go, with capacity other queues of its cohort are not using) and a **lending
limit** (how much of its nominal it lends when idle; the rest stays reserved for it). Queues
that share a **cohort** pool what they lend. Resources are ``cpu`` (milli-CPU), ``memory``
(MiB), ``gpu`` (milli-GPU of any model) and ``gpu:<MODEL>`` (milli-GPU of one model). A
resource that any queue names is governed for every queue: a queue that does not name it has
a nominal of 0 and can only borrow it (as in Kueue, a queue must cover what its jobs ask). A
resource no queue names is not governed at all.

Admission of a demand ``d`` to queue ``q`` for each governed resource ``r`` (Kueue's rules):

* ``usage_q + d <= nominal_q + borrowing_limit_q`` (the borrowing limit; unlimited if unset);
* the cohort's pool: every queue ``p`` reserves ``nominal_p - lendable_p`` for itself, where
  ``lendable_p = min(lending_limit_p, nominal_p)``; the pool is the sum of ``lendable_p``; what
  a queue uses above its reserve comes out of the pool, and the pool may not be overdrawn.

A queue without a cohort is a cohort of one: it can use its nominal and nothing more.

``QuotaBook`` keeps usage and answers ``check`` (None, or an ``OverQuota`` with the numbers)
in O(resources); it is pure state, changed only by ``charge`` and ``refund``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from suanli.core.model import Job, SpecError

CPU = "cpu"
MEMORY = "memory"
GPU = "gpu"
GPU_MODEL_PREFIX = "gpu:"


def gpu_of(model: str) -> str:
    """The resource name of one GPU model's milli-GPU."""
    return GPU_MODEL_PREFIX + model


def _check_resource(name: str, where: str) -> None:
    if name in (CPU, MEMORY, GPU):
        return
    if name.startswith(GPU_MODEL_PREFIX) and len(name) > len(GPU_MODEL_PREFIX):
        return
    raise SpecError(f"{where}: unknown resource {name!r} (cpu, memory, gpu or gpu:<MODEL>)")


@dataclass(frozen=True)
class QueueSpec:
    """One queue: who it serves, its cohort, and its quotas (milli-CPU, MiB, milli-GPU)."""

    name: str
    org: str = ""
    cohort: str | None = None
    nominal: Mapping[str, int] = field(default_factory=dict)
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    """Per resource, how far above nominal the queue may go (absent: no limit)."""
    lending_limit: Mapping[str, int] = field(default_factory=dict)
    """Per resource, the most of its nominal the queue lends (absent: all of it)."""
    weight: float = 1.0
    """Fair-share weight."""

    def __post_init__(self) -> None:
        where = f"queue {self.name!r}"
        if not self.name:
            raise SpecError("queue: a name is required")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise SpecError(f"{where}: weight must be > 0, got {self.weight}")
        for label, values in (
            ("nominal", self.nominal),
            ("borrowing_limit", self.borrowing_limit),
            ("lending_limit", self.lending_limit),
        ):
            for r, v in values.items():
                _check_resource(r, f"{where} {label}")
                if v < 0:
                    raise SpecError(f"{where} {label}.{r}: must be >= 0, got {v}")


@dataclass(frozen=True)
class TenancySpec:
    """All queues of a cluster. Jobs name their queue, or land in the queue of their org."""

    queues: tuple[QueueSpec, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for q in self.queues:
            if q.name in seen:
                raise SpecError(f"queue {q.name!r} is defined twice")
            seen.add(q.name)

    def serves(self, queue: str, tenant: str) -> bool:
        """Whether queue ``queue`` serves ``tenant``: its org is the tenant's path or above
        it (a queue without an org serves everyone). False for an unknown queue."""
        for q in self.queues:
            if q.name == queue:
                org = q.org.strip("/")
                return not org or tenant == org or tenant.startswith(org + "/")
        return False

    def queue_of(self, job: Job) -> str:
        """The queue a job is charged to: the one it names, else the deepest queue whose org
        contains the job's tenant. ``SpecError`` if there is none."""
        names = {q.name for q in self.queues}
        if job.queue in names:
            return job.queue
        best, depth = None, -1
        for q in self.queues:
            org = q.org.strip("/")
            if not org or job.tenant == org or job.tenant.startswith(org + "/"):
                d = len(org.split("/")) if org else 0
                if d > depth:
                    best, depth = q.name, d
        if best is None:
            raise SpecError(
                f"job {job.id}: no queue {job.queue!r} and no queue serves tenant {job.tenant!r}"
            )
        return best


@dataclass(frozen=True, slots=True)
class OverQuota:
    """The job's queue cannot take its demand of ``resource``: it asks ``need``, the queue can
    take ``available`` more now (``limit`` says which rule binds: borrowing limit or cohort)."""

    queue: str
    resource: str
    need: int
    available: int
    limit: str
    scope: str = "cohort"
    """``queue``: a limit of the queue's own binds (its borrowing limit, or its nominal for a
    job that may not borrow), so only the queue's own jobs ending can lift it; ``cohort``:
    the cohort's shared pool is what is short."""

    def __str__(self) -> str:
        unit, scale = _unit(self.resource)
        return (
            (
                f"over quota: queue {self.queue} needs {self.need / scale:g} {unit} of "
                f"{self.resource}, can take {self.available / scale:g} more ({self.limit})"
            )
            .replace(" 1 GPUs", " 1 GPU")
            .replace(" 1 CPUs", " 1 CPU")
        )


def _unit(resource: str) -> tuple[str, float]:
    if resource == CPU:
        return "CPUs", 1000.0
    if resource == MEMORY:
        return "GiB", 1024.0
    return "GPUs", 1000.0


class QuotaBook:
    """Usage of every queue, and the admission check against quotas (see the module)."""

    def __init__(self, spec: TenancySpec) -> None:
        self.spec = spec
        self.queues = [q.name for q in spec.queues]
        self.index = {name: i for i, name in enumerate(self.queues)}
        resources = sorted(
            {r for q in spec.queues for r in (*q.nominal, *q.borrowing_limit, *q.lending_limit)}
        )
        self.resources = resources
        self.r_index = {r: i for i, r in enumerate(resources)}
        nq, nr = len(spec.queues), len(resources)
        inf = np.inf
        self.nominal = np.zeros((nq, nr))
        self.cap = np.full((nq, nr), inf)  # nominal + borrowing limit
        self.reserve = np.zeros((nq, nr))  # nominal - lendable
        cohorts: dict[str, int] = {}
        self.cohort = np.zeros(nq, dtype=np.int64)
        for i, q in enumerate(spec.queues):
            self.cohort[i] = cohorts.setdefault(q.cohort or f"\0{q.name}", len(cohorts))
            for r, j in self.r_index.items():
                nom = float(q.nominal.get(r, 0))
                self.nominal[i, j] = nom
                if r in q.borrowing_limit:
                    self.cap[i, j] = nom + q.borrowing_limit[r]
                lend = min(float(q.lending_limit.get(r, nom)), nom)
                self.reserve[i, j] = nom - lend
        self.cohort_names = list(cohorts)
        self.pool = np.zeros((len(cohorts), nr))
        np.add.at(self.pool, self.cohort, self.nominal - self.reserve)
        self.usage = np.zeros((nq, nr))
        self.pool_used = np.zeros((len(cohorts), nr))

    # ---------------------------------------------------------------- demand vectors
    def demand(
        self, cpu_milli: int, memory_mib: int, gpu_milli: int, model: str | None
    ) -> np.ndarray:
        """A demand vector over the governed resources (``model``: where the GPUs are)."""
        d = np.zeros(len(self.resources))
        for r, v in ((CPU, cpu_milli), (MEMORY, memory_mib), (GPU, gpu_milli)):
            j = self.r_index.get(r)
            if j is not None:
                d[j] += v
        if model is not None and gpu_milli:
            j = self.r_index.get(gpu_of(model))
            if j is not None:
                d[j] += gpu_milli
        return d

    @property
    def per_model(self) -> bool:
        """Whether some queue governs GPUs of a particular model."""
        return any(r.startswith(GPU_MODEL_PREFIX) for r in self.resources)

    # ---------------------------------------------------------------- admission
    def check(
        self, queue: str, d: np.ndarray, no_borrow: str | None = None, scope: str = "queue"
    ) -> OverQuota | None:
        """None if ``queue`` can take demand ``d`` now, else the first rule that binds.
        ``no_borrow`` (why the demand may not borrow) caps it at the queue's nominal; ``scope``
        is that cap's ``OverQuota.scope``."""
        i = self.index[queue]
        c = self.cohort[i]
        u = self.usage[i]
        after = u + d
        if no_borrow is not None:
            for j in np.flatnonzero((d > 0) & (after > self.nominal[i])):
                can = max(0.0, self.nominal[i, j] - u[j])
                return OverQuota(
                    queue, self.resources[j], int(d[j]), int(can), f"nominal: {no_borrow}", scope
                )
        for j in np.flatnonzero(d > 0):
            room = max(0.0, self.pool[c, j] - self.pool_used[c, j])
            own = max(0.0, self.reserve[i, j] - u[j])
            # What the queue could still take: its reserve left, plus the pool's room above
            # what it already draws, never past its borrowing cap.
            drawn = max(0.0, u[j] - self.reserve[i, j])
            can = min(self.cap[i, j] - u[j], own + room)
            if after[j] > self.cap[i, j]:
                return OverQuota(
                    queue,
                    self.resources[j],
                    int(d[j]),
                    int(max(0.0, can)),
                    "borrowing limit",
                    "queue",
                )
            extra = max(0.0, after[j] - self.reserve[i, j]) - drawn
            if extra > 0 and self.pool_used[c, j] + extra > self.pool[c, j]:
                return OverQuota(
                    queue, self.resources[j], int(d[j]), int(max(0.0, can)),
                    "cohort" if self.cohort_names[c][:1] != "\0" else "nominal",
                )  # fmt: skip
        return None

    def charge(self, queue: str, d: np.ndarray) -> None:
        """Count demand ``d`` as used by ``queue``."""
        self._add(self.index[queue], d)

    def refund(self, queue: str, d: np.ndarray) -> None:
        """The inverse of ``charge``."""
        self._add(self.index[queue], -d)

    def _add(self, i: int, d: np.ndarray) -> None:
        c = self.cohort[i]
        before = np.maximum(0.0, self.usage[i] - self.reserve[i])
        self.usage[i] += d
        self.pool_used[c] += np.maximum(0.0, self.usage[i] - self.reserve[i]) - before

    def ceiling(self, queue: str) -> np.ndarray:
        """Per resource, the most ``queue`` could ever hold: its borrowing cap, or its reserve
        plus its whole cohort's pool, whichever is less."""
        i = self.index[queue]
        return np.minimum(self.cap[i], self.reserve[i] + self.pool[self.cohort[i]])

    def impossible(self, queue: str, d: np.ndarray, no_borrow: str | None = None) -> str | None:
        """Why demand ``d`` can never be admitted to ``queue`` (None if it can be);
        ``no_borrow`` (why it may not borrow) caps it at the nominal."""
        top = self.ceiling(queue)
        if no_borrow is not None:
            top = np.minimum(top, self.nominal[self.index[queue]])
        for j in np.flatnonzero(d > top):
            unit, scale = _unit(self.resources[j])
            why = f" ({no_borrow}: it may not borrow)" if no_borrow is not None else ""
            return (
                f"queue {queue} can never hold {d[j] / scale:g} {unit} of {self.resources[j]} "
                f"(its most: {top[j] / scale:g}){why}"
            )
        return None

    # ---------------------------------------------------------------- read-outs
    def borrowed(self, queue: str) -> np.ndarray:
        """Per resource, how far ``queue`` is above its nominal (0 if within)."""
        i = self.index[queue]
        return np.maximum(0.0, self.usage[i] - self.nominal[i])

    def share(self, queue: str, totals: Sequence[float] | np.ndarray) -> float:
        """Dominant resource share of ``queue``: max over resources of usage / total, ÷ weight."""
        i = self.index[queue]
        t = np.asarray(totals, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(t > 0, self.usage[i] / t, 0.0)
        return float(s.max(initial=0.0)) / self.spec.queues[i].weight
