"""One builder for the simulator and the live control plane: a policy set and its setting in,
a ``Scheduler`` with its plugins out, and the up-front checks both faces make.

A ``PolicySet`` names a queue order, a placement, the discipline (strict or skip-ahead), a
backfill and a runtime estimator, each a registered plugin (``suanli policies``). A
``Setting`` is the rest of what a scheduler is built from: the tenancy (queues and quotas,
which bring ``admission/quota``), the priority classes, the preemption rules (which bring a
``preemption/...`` plugin) and the configured admission plugins (the ``admission:`` section
of the quota file, such as ``admission/user-limit``). Budgets keep accounts, so a fresh
``BudgetBook`` comes with each build (``admission/budget``).

Up front: a job that no state of the cluster could hold (``check_feasible``), or that an
admission check could never let start (its queue's ceiling, a per-user limit:
``check_admissible``) is an ``ImpossibleJobError`` in the simulator and is refused at
submission live, with the same reason (``Refusals``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from suanli.core.admission.budget import BudgetAdmission
from suanli.core.admission.quota import QuotaAdmission
from suanli.core.backfill import DEFAULT_DEPTH
from suanli.core.budget import BudgetBook
from suanli.core.model import ClusterSpec, Job, PriorityClass, SpecError, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import check, create
from suanli.core.scheduler import Scheduler
from suanli.core.seams import Admission, OrderContext, Placement, QueueOrder
from suanli.core.tenancy import TenancySpec
from suanli.core.view import ClusterView


class ImpossibleJobError(SpecError):
    """A job that could not run even on the empty cluster, or that its admission checks
    could never let start."""


_ORACLE = "-oracle"


@dataclass(frozen=True, slots=True)
class PolicySet:
    """One combination of plugins to schedule with, by registry name.

    ``strict``: the head of the queue blocks everything behind it. ``backfill``: a
    ``backfill/...`` plugin (``none``, ``easy``, ``conservative``); ``runtime``: the
    ``runtime/...`` estimator it plans with and a predictive queue order sorts by
    (``estimate``, the users' estimates; ``oracle``, true runtimes, a reference only;
    ``history`` and ``learned``, predictors that learn from ended jobs).
    """

    queue: str = "fifo"
    placement: str = "best-fit"
    strict: bool = False
    backfill: str = "none"
    runtime: str = "estimate"

    @property
    def mode(self) -> str:
        """The ``/MODE`` of the label: ``strict``, the backfill (``-oracle`` for true
        runtimes, ``@NAME`` for another estimator), or empty."""
        if self.strict:
            return "strict"
        if self.backfill == "none":
            return ""
        if self.runtime == "estimate":
            return self.backfill
        if self.runtime == "oracle":
            return self.backfill + _ORACLE
        return f"{self.backfill}@{self.runtime}"

    @property
    def label(self) -> str:
        mode = self.mode
        queue = self.queue
        if self.runtime != "estimate" and (self.strict or self.backfill == "none"):
            queue += "@" + self.runtime  # (a backfill's mode names it otherwise)
        return f"{queue}{'/' + mode if mode else ''}+{self.placement}"

    @classmethod
    def parse(cls, text: str) -> PolicySet:
        """``QUEUE[@RUNTIME][/MODE]+PLACEMENT``, e.g. ``fifo/strict+first-fit``,
        ``priority+best-fit``, ``fair-share/easy+best-fit`` or ``qssf@learned/easy+best-fit``.
        ``@RUNTIME`` names the ``runtime/...`` estimator the queue order and the backfill
        share (a predictive order sorts by it). MODE is ``skip`` (the default), ``strict``, or a
        backfill plugin (``easy``, ``conservative``) planning with the users' estimates;
        ``BACKFILL-oracle`` plans with true runtimes and ``BACKFILL@RUNTIME`` with any
        ``runtime/...`` estimator. Names are checked against the registry by ``check``."""
        parts = [p.strip() for p in text.split("+")]
        if len(parts) != 2 or not all(parts):
            raise SpecError(f"policy set {text!r}: expected QUEUE[/MODE]+PLACEMENT")
        queue, _, mode = (p.strip() for p in parts[0].partition("/"))
        queue, at, q_runtime = (p.strip() for p in queue.partition("@"))
        if not queue or (at and not q_runtime):
            raise SpecError(f"policy set {text!r}: expected QUEUE[@RUNTIME][/MODE]+PLACEMENT")
        if mode in ("", "skip"):
            return cls(queue=queue, placement=parts[1], runtime=q_runtime or "estimate")
        if mode == "strict":
            return cls(queue, parts[1], True, runtime=q_runtime or "estimate")
        backfill, _, runtime = mode.partition("@")
        if not runtime:
            runtime = "estimate"
            if backfill.endswith(_ORACLE):
                backfill, runtime = backfill.removesuffix(_ORACLE), "oracle"
            elif q_runtime:
                runtime = q_runtime
        if not backfill or backfill in ("none", "skip", "strict"):
            raise SpecError(
                f"policy set {text!r}: mode must be skip, strict or a backfill (easy, "
                "conservative; with -oracle or @RUNTIME for its runtime estimator), "
                f"got {mode!r}"
            )
        if q_runtime and runtime != q_runtime:
            raise SpecError(
                f"policy set {text!r}: one runtime estimator per policy set: the queue names "
                f"{q_runtime!r}, the backfill {runtime!r}"
            )
        return cls(queue, parts[1], False, backfill, runtime)

    def check(self) -> None:
        """``UnknownPolicyError`` (listing the valid names) for the first unknown plugin."""
        check("queue", self.queue)
        check("placement", self.placement)
        check("backfill", self.backfill)
        check("runtime", self.runtime)


@dataclass(frozen=True)
class Setting:
    """What a scheduler is built from besides its policy set (see the module docstring)."""

    tenancy: TenancySpec | None = None
    priority_classes: Mapping[str, PriorityClass] | None = None
    preemption: PreemptionConfig | None = None
    admission: Mapping[str, Any] = field(default_factory=dict)
    """Configured admission plugins: name -> its configuration (``admission/<name>``)."""
    backfill_depth: int = DEFAULT_DEPTH

    @property
    def ctx(self) -> OrderContext:
        if self.priority_classes is None:
            return OrderContext(tenancy=self.tenancy)
        return OrderContext(dict(self.priority_classes), self.tenancy)

    def quota(self) -> QuotaAdmission | None:
        """A fresh quota plugin for the tenancy (None without one)."""
        if self.tenancy is None:
            return None
        return QuotaAdmission(self.tenancy, self.preemption)

    def admissions(
        self, budgets: BudgetBook | None = None, quota: QuotaAdmission | None = None
    ) -> list[Admission]:
        """Fresh admission plugins, in the order they are checked: quota (``quota``, else a
        fresh one), budget, then the configured ones in the order given."""
        out: list[Admission] = []
        quota = quota if quota is not None else self.quota()
        if quota is not None:
            out.append(quota)
        if budgets is not None:
            out.append(BudgetAdmission(budgets))
        for name, config in self.admission.items():
            out.append(create("admission", name, config=config))
        return out


def build(
    view: ClusterView,
    policy: PolicySet,
    setting: Setting | None = None,
    *,
    budgets: BudgetBook | None = None,
    scheduler: type[Scheduler] = Scheduler,
    order: QueueOrder | None = None,
    placement: Placement | None = None,
) -> Scheduler:
    """A scheduler over ``view`` with the plugins ``policy`` and ``setting`` name (and
    ``budgets``, a fresh book per run: it keeps the accounts). ``scheduler``: the class, for
    a baseline that changes the cycle itself; ``order``, ``placement``: instances to use
    instead of the policy set's (made with options of their own)."""
    setting = setting or Setting()
    quota = setting.quota()
    admissions = setting.admissions(budgets, quota)
    runtime = create("runtime", policy.runtime)
    backfill = create("backfill", policy.backfill, runtime=runtime, depth=setting.backfill_depth)
    preemptor = None
    if setting.preemption is not None:
        preemptor = create(
            "preemption", setting.preemption.policy, config=setting.preemption, quota=quota
        )
    return scheduler(
        view,
        order if order is not None else create("queue", policy.queue),
        placement if placement is not None else create("placement", policy.placement),
        strict=policy.strict,
        ctx=setting.ctx,
        admissions=admissions,
        backfill=backfill,
        preemptor=preemptor,
        runtime=runtime,
    )


# ------------------------------------------------------------------------------ up front


def _never_fits(cluster: ClusterSpec, view: ClusterView, job: Job) -> str | None:
    k = view.fit_counts(job.task, job.min_tasks)
    if int(k.sum()) >= job.min_tasks:
        return None
    t = job.task
    models = "|".join(sorted(t.gpu_models)) or "any"
    mem = f", {t.gpu_memory_mib} MiB a GPU" if t.gpu_memory_mib and t.gpus else ""
    return (
        f"can never run on cluster {cluster.name}: {job.min_tasks} task(s) of "
        f"{t.gpus} GPU(s) × {t.gpu_milli} milli{mem} ({models}), {t.cpu_milli} mCPU, "
        f"{t.memory_mib} MiB; the empty cluster fits {int(k.sum())}{_limit(cluster, t)}"
    )


def _limit(cluster: ClusterSpec, t: TaskRequest) -> str:
    """What no node has enough of for one task of ``t`` (empty: each alone fits a node, so
    it is the gang's size)."""
    nodes = [n for n in cluster.nodes
             if not t.gpus or (n.gpu_model is not None
                               and (not t.gpu_models or n.gpu_model.name in t.gpu_models))]  # fmt: skip
    if not nodes:
        return "; no node has the GPU model it asks for"
    out: list[str] = []
    if t.gpus and t.gpu_memory_mib:
        most = max(n.gpu_model.memory_mib for n in nodes if n.gpu_model is not None)
        if t.gpu_memory_mib > most:
            out.append(f"GPU memory: {t.gpu_memory_mib} MiB a GPU, the largest GPU has {most}")
    if t.gpus > max(n.gpus for n in nodes):
        out.append(f"GPUs: {t.gpus} on one node, the largest has {max(n.gpus for n in nodes)}")
    if t.cpu_milli > max(n.cpu_milli for n in nodes):
        out.append(f"CPU: {t.cpu_milli} mCPU, the largest node has "
                   f"{max(n.cpu_milli for n in nodes)}")  # fmt: skip
    if t.memory_mib > max(n.memory_mib for n in nodes):
        out.append(f"memory: {t.memory_mib} MiB, the largest node has "
                   f"{max(n.memory_mib for n in nodes)}")  # fmt: skip
    return f" (no node has enough: {'; '.join(out)})" if out else ""


class Refusals:
    """Why a job could never start on ``cluster`` under ``setting``'s admission checks (None:
    it could), remembered per request shape for the cluster and per job kind for each
    check. The text reads after the job's id: ``can never run on cluster ...`` or ``can
    never be admitted: ...``; ``SpecError`` if a check cannot place the job at all (no
    queue serves it)."""

    def __init__(self, cluster: ClusterSpec, setting: Setting | None = None) -> None:
        setting = setting or Setting()
        self.cluster = cluster
        self.view = ClusterView(cluster)
        self.ctx = setting.ctx
        self.checks = setting.admissions()
        self._fits: dict[tuple[object, int], str | None] = {}

    def capacity(self, job: Job) -> str | None:
        key = (job.task, job.min_tasks)
        if key not in self._fits:
            self._fits[key] = _never_fits(self.cluster, self.view, job)
        return self._fits[key]

    def admission(self, job: Job) -> str | None:
        for a in self.checks:
            why = a.refusal(job, self.view, self.ctx)
            if why is not None:
                return f"can never be admitted: {why}"
        return None

    def why(self, job: Job) -> str | None:
        return self.capacity(job) or self.admission(job)


def check_feasible(cluster: ClusterSpec, jobs: Iterable[Job]) -> None:
    """Raise ``ImpossibleJobError`` for the first job that cannot fit the empty cluster."""
    r = Refusals(cluster)
    for job in jobs:
        why = r.capacity(job)
        if why is not None:
            raise ImpossibleJobError(f"job {job.id} {why}")


def check_admissible(cluster: ClusterSpec, jobs: Sequence[Job], setting: Setting) -> None:
    """Raise ``ImpossibleJobError`` for the first job an admission check could never let
    start (its queue's ceiling, a per-user limit), ``SpecError`` for one that no queue
    serves."""
    r = Refusals(cluster, setting)
    if not r.checks:
        return
    for job in jobs:
        why = r.admission(job)
        if why is not None:
            raise ImpossibleJobError(f"job {job.id} {why}")
