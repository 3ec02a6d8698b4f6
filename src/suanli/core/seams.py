"""The seams of the scheduling cycle: one small contract per extension point.

Every policy is a plugin behind one of these, registered by name as ``seam/name``
(``suanli.core.registry``) and chosen by configuration:

=============  ===================  ==============================================================
seam           contract             what it decides
=============  ===================  ==============================================================
``queue``      ``QueueOrder``       the order of pending jobs: a static key per job, and for an
                                    order whose keys move while jobs wait (fair sharing) the
                                    ``DynamicKeys`` it keeps
``placement``  ``Placement``        which nodes and GPUs a job's tasks take
``admission``  ``Admission``        whether a job may start now (quota, budget, per-user limit),
                                    with a typed reason when not, and what it holds while it runs
``backfill``   ``Backfill``         which jobs may pass a job that cannot start (none, EASY,
                                    conservative)
``preemption`` ``Preemptor``        which running jobs to evict for a job that cannot start
``runtime``    ``RuntimeEstimator`` how long a job is expected to run
``autoscaler`` ``Autoscaler``       how many replicas an online service runs (its contract is in
                                    ``suanli.core.serving.autoscaler``: it sizes services, not
                                    jobs, and sees no ``Handle``)
``router``     ``Router``           which member of a federation a job goes to (its contract is
                                    in ``suanli.core.routing``: it reads plain candidates, not a
                                    scheduler)
=============  ===================  ==============================================================

A plugin sees the scheduler only through a ``Handle``: the time, the view, the pending lanes,
the running set and the few actions it may take. ``Scheduler`` satisfies ``Handle`` itself
(no wrapper object per call); no plugin imports ``suanli.core.scheduler``. Something that
counts what running jobs hold (a quota's usage, a budget's spend, a fair-share group's
holdings) is a ``Ledger``: told of every start and end, and of the evictions that a
preemptor only tries (``suspend`` and ``resume`` undo each other exactly).

A queue order's static key never changes while the job waits (jobs wait in heaps) and ends
with the job id: every order is total. A placement scores candidate nodes (lower is better;
ties go to the lowest node index) and picks the GPUs inside the chosen node; gang mechanics are
shared by all placements in ``suanli.core.gang``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from suanli.core.decisions import Decision, JobPlacement, NoCapacity, Reason, Skip
from suanli.core.lanes import Lane, Lanes
from suanli.core.model import DEFAULT_PRIORITY_CLASSES, MILLI, Job, PriorityClass, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.core.running import Running, RunningSet
from suanli.core.shapes import ShapeTable
from suanli.core.spread import compact
from suanli.core.tenancy import TenancySpec
from suanli.core.view import FREE_SCORE_CPU, FREE_SCORE_MEM, ClusterView


@dataclass(frozen=True, slots=True)
class OrderContext:
    """What a queue order (and a plugin) may know beyond the job itself: the priority classes
    and, with quotas, the queues (a fair-share group is a job's quota queue)."""

    priority_classes: Mapping[str, PriorityClass] = field(
        default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES)
    )
    tenancy: TenancySpec | None = None

    def priority(self, job: Job) -> int:
        pc = self.priority_classes.get(job.priority_class)
        return pc.value if pc is not None else 0


# --------------------------------------------------------------------------------------------
# The handle
# --------------------------------------------------------------------------------------------


class Handle(Protocol):
    """What a plugin may read of the scheduler, and the actions it may take.

    Read: ``now`` (the cycle's time), ``view`` (free capacity, with every admission of this
    cycle already assumed), ``ctx``, the ``placement`` policy, the ``table`` of shapes, the
    pending ``lanes``, the ``running`` set, the ``ledgers`` (a preemptor's what-if
    suspends and resumes a job in each), the queue ``order`` and the ``runtime`` estimator
    (the one the backfill plans with). Act: put a lane's head in line (``activate``),
    park a lane with a reason (``block``) and let it go again (``unblock``), ask for a cycle at
    a later time (``retry_at``), try to start a job (``try_start``, preempting if the rules
    allow; ``place``, never), and record an eviction a preemptor decided (``evicted``).
    """

    view: ClusterView
    ctx: OrderContext
    placement: Placement
    table: ShapeTable
    lanes: Lanes
    running: RunningSet
    ledgers: tuple[Ledger, ...]
    order: QueueOrder
    runtime: RuntimeEstimator

    @property
    def now(self) -> float: ...

    def activate(self, lane: Lane) -> None:
        """Put ``lane``'s head in the active heap (tried in this or the next cycle)."""

    def block(self, job: Job, lane: Lane, why: Reason) -> Skip:
        """Park ``lane`` (its head ``job`` was just tried) for ``why``: it is not tried again
        until ``unblock``; ``Scheduler.reason`` reports ``why`` for its jobs."""
        ...

    def unblock(self, lane: Lane, retry: bool = False) -> None:
        """``lane`` may start again: tried in the next cycle (``retry``: its head is told its
        reason again even if it is the one it was last told)."""

    def retry_at(self, t: float, lane: Lane) -> None:
        """Run a cycle at ``t`` even if nothing arrives or ends, and try ``lane`` again then
        (its head is told its reason again)."""

    def try_start(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision:
        """``Admit`` ``job`` (pending in ``lane``) if it can start now, evicting running jobs
        if the preemption rules allow (their ``Preempt`` decisions go to ``out`` first), else
        ``Skip`` it with its reason. An admission is assumed on the view at once."""
        ...

    def place(self, job: Job, lane: Lane, rng: np.random.Generator) -> Decision:
        """``try_start`` without preemption."""
        ...

    def evicted(self, r: Running) -> None:
        """The preemptor evicted ``r`` (already released by its what-if): every ledger and
        the running set record the end."""


class Ledger(Protocol):
    """Counts what running jobs hold. ``started`` and ``ended`` bracket every run (a job
    restored by a rebuilt scheduler starts again); ``suspend`` and ``resume`` are a
    preemptor's what-if eviction and its undo; ``ended`` after ``suspend`` is that eviction
    made real. ``holds``: whether starting ``job_id`` again would count it twice (a ledger
    that never counts a job twice, such as a budget book rebuilt from the metering ledger,
    answers False)."""

    def started(self, job: Job, placement: JobPlacement, at: float) -> None: ...

    def ended(self, job_id: str, at: float) -> None: ...

    def suspend(self, job_id: str) -> None: ...

    def resume(self, job_id: str) -> None: ...

    def holds(self, job_id: str) -> bool: ...


# --------------------------------------------------------------------------------------------
# queue/...
# --------------------------------------------------------------------------------------------


class QueueOrder(Protocol):
    """Orders pending jobs; smaller keys go first. ``bind`` is called once, when the
    scheduler is built: an order whose keys move while jobs wait returns the ``DynamicKeys``
    that keep them (None: its static keys are the order)."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]: ...

    def bind(self, h: Handle) -> DynamicKeys | None: ...


class StaticOrder:
    """Base of the orders whose static key is the whole order."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        raise NotImplementedError

    def bind(self, h: Handle) -> DynamicKeys | None:
        return None


class DynamicKeys(Ledger, Protocol):
    """The state of an order whose keys move while jobs wait (fair sharing's shares): a
    ledger of what each group holds, and the keys it gives a lane's head from it.

    ``group`` partitions the lanes (jobs of two groups never share one). At the start of each
    cycle ``begin`` brings the state to ``now``, after which the scheduler re-keys every lane
    in the active heap with ``head_key``; a lane popped with a key older than its head's key
    now goes back in line. ``decided`` may restate a decision of the cycle (which group went
    first), ``explain`` a waiting job's reason."""

    def group(self, job: Job) -> int: ...

    def begin(self, now: float) -> None: ...

    def head_key(self, lane: Lane, key: tuple[Any, ...]) -> tuple[Any, ...]: ...

    def decided(self, lane: Lane, d: Decision) -> Decision: ...

    def explain(self, lane: Lane, why: NoCapacity, lanes: Lanes) -> Reason: ...


# --------------------------------------------------------------------------------------------
# admission/...
# --------------------------------------------------------------------------------------------


class Admission(Ledger, Protocol):
    """One admission check (quota, budget, per-user limit), with the hooks the cycle needs:

    * ``bind(h, slot)``: once; ``slot`` is its place in ``Lane.keys``;
    * ``arrive(job, at)``: a new job (not a requeued one) is submitted: ``Reject`` it (it is
      not queued), ``Demoted`` (it is queued as ``d.job``) or None;
    * ``lane_key(job)``: jobs with different answers never share a lane (``SpecError`` if the
      check cannot place the job at all, such as no queue serving it);
    * ``begin()``: at the start of a skip-ahead cycle, before anything is tried;
    * ``check(job, lane)``: before placement: a ``Skip`` (after parking the lane with
      ``h.block``, and waking it itself later, from ``ended`` or ``begin``), a boolean mask
      of the nodes the job may use, or None (anywhere);
    * ``no_room(job, lane, why)``: the job fits the cluster, but not on the nodes its mask
      allowed: park the lane (as for a ``Skip``) and return the skip;
    * ``refusal(job, view, ctx)``: why the job could never be admitted, whatever runs (None:
      it could), on an empty ``view``; checked up front, in the simulator and at live
      submission (``suanli.core.builder.refusal``);
    * the ``Ledger`` hooks: what the job holds while it runs.
    """

    def bind(self, h: Handle, slot: int) -> None: ...

    def arrive(self, job: Job, at: float) -> Decision | None: ...

    def lane_key(self, job: Job) -> Hashable: ...

    def begin(self) -> None: ...

    def check(self, job: Job, lane: Lane) -> Skip | np.ndarray | None: ...

    def no_room(self, job: Job, lane: Lane, why: NoCapacity) -> Skip: ...

    def refusal(self, job: Job, view: ClusterView, ctx: OrderContext) -> str | None: ...


# --------------------------------------------------------------------------------------------
# backfill/..., preemption/..., runtime/...
# --------------------------------------------------------------------------------------------


class Held:
    """``Backfill.gate``'s answer for a job it holds back this cycle (told why, if at all,
    by the backfill itself)."""

    def __repr__(self) -> str:
        return "HELD"


HELD = Held()


class Backfill(Protocol):
    """Which jobs may start ahead of one that cannot (skip-ahead cycles only).

    ``needs_running``/``needs_order``: whether it reads the running set and the queue in
    order (the scheduler keeps them only then). Each cycle: ``begin`` (a planning backfill
    starts what its plan starts and tells the others why they wait, in ``out``); then for each
    lane head the cycle takes, ``gate``: a decision of its own, ``HELD`` (not this cycle), or
    None (try it as usual); after the cycle's own try, ``started`` or ``failed``. Between
    cycles: ``submitted``, ``restored`` (a rebuilt scheduler's running job) and ``ended``."""

    needs_running: bool
    needs_order: bool
    gates: bool
    """False for a backfill that takes no part in the cycle (``backfill/none``)."""

    def bind(self, h: Handle) -> None: ...

    def submitted(self, key: Any, job: Job) -> None: ...

    def begin(self, rng: np.random.Generator, out: list[Decision]) -> None: ...

    def gate(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision | Held | None: ...

    def started(self, job: Job) -> None: ...

    def failed(self, job: Job) -> None: ...

    def restored(self, r: Running) -> None: ...

    def ended(self, job_id: str) -> None: ...


class Preemptor(Protocol):
    """Evicts running jobs for a job that cannot start (``why``), by its ``config``'s rules:
    ``preempt`` returns the job's ``Admit`` (its victims' ``Preempt`` decisions appended to
    ``out`` first, each recorded with ``h.evicted``) or None with nothing changed."""

    config: PreemptionConfig

    def bind(self, h: Handle) -> None: ...

    def preempt(
        self, job: Job, lane: Lane, rng: np.random.Generator, why: Reason, out: list[Decision]
    ) -> Decision | None: ...


class RuntimeEstimator(Protocol):
    """How long a job is expected to run, in seconds at effective speed 1 with all its tasks
    (``ClusterView.node_speed``: on the workload's native GPUs, or V100-class under the
    reference basis; ``suanli.core.speed``). Plans do not scale it by the placement's speed.

    ``duration`` is the figure plans use (a predictor's planning quantile, ``PLAN_Q`` unless
    configured). A predictor (``Predictor``) also answers for any quantile and learns from
    jobs as they end."""

    def duration(self, job: Job) -> float: ...


class Predictor(RuntimeEstimator, Protocol):
    """A runtime estimator that learns (``runtime/history``, ``runtime/learned``).

    Honest by construction: it knows a job's runtime only once ``learn`` tells it, which the
    simulator does at the job's end and the control plane when it records the end, so at any
    instant it has seen only jobs that had ended by then. ``quantile(job, q)`` is the
    ``q``-quantile of the job's runtime as predicted from what it has seen, non-decreasing in
    ``q``; ``duration`` is ``quantile(job, plan_q)``."""

    plan_q: float

    def quantile(self, job: Job, q: float) -> float: ...

    def learn(self, job: Job, runtime: float, at: float) -> None:
        """``job`` ended at ``at`` after running ``runtime`` seconds (at effective speed 1)."""


PLAN_Q = 0.9
"""The quantile of a prediction that plans (reservations, backfill windows) use by default:
a backfilled job planned at its P90 rarely delays a reservation, and a reservation planned on
P90 ends of running jobs is rarely early."""


def expected(runtime: RuntimeEstimator, job: Job) -> float:
    """The median runtime of ``job`` where ``runtime`` predicts quantiles, else its
    ``duration``: what an order by predicted length sorts on."""
    q = getattr(runtime, "quantile", None)
    return float(q(job, 0.5)) if q is not None else runtime.duration(job)


# --------------------------------------------------------------------------------------------
# placement/...
# --------------------------------------------------------------------------------------------


class Placement:
    """Base of all placements: node scores plus the choice of GPUs inside a node.

    Subclasses override ``score`` and, where their definition says so, ``pick_gpus``. The
    default GPU choice takes the lowest-index fully free GPUs for whole-GPU tasks and, for a
    fractional task, the fitting GPU with the least free share (ties: lowest index), which
    keeps whole GPUs free for whole-GPU work.
    """

    def score(
        self,
        view: ClusterView,
        task: TaskRequest,
        count: int,
        nodes: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Scores for placing ``count`` copies of ``task`` on each of ``nodes``; lower wins."""
        raise NotImplementedError

    def observe(self, job: Job) -> None:
        """A job was submitted (a placement that learns the workload counts it; default: no-op)."""

    def spread(
        self, view: ClusterView, k: np.ndarray, count: int, score: np.ndarray
    ) -> list[tuple[int, int]]:
        """Nodes and task counts for ``count`` tasks of a gang no single node holds; ``k``:
        the tasks that fit on each node now, ``score``: this placement's score of each node
        with ``k > 0`` for one task. Default: the fewest nodes, then one NVLink domain, then
        one rack (``suanli.core.spread.compact``)."""
        return compact(view, k, count, score)

    def pick_gpus(
        self, view: ClusterView, node: int, task: TaskRequest, rng: np.random.Generator
    ) -> np.ndarray:
        """GPU indices on ``node`` for one ``task``; ``node`` is known to fit it."""
        fit = view.gpus_fitting(node, task)
        if task.gpus == 0:
            return fit[:0]
        if task.gpu_milli >= MILLI:
            return fit[: task.gpus]
        free = view.gpu_free_milli[node, fit]
        return fit[np.argmin(free) : np.argmin(free) + 1]


def remaining_after(
    view: ClusterView, task: TaskRequest, count: int, nodes: np.ndarray
) -> np.ndarray:
    """Free capacity left on each of ``nodes`` after placing ``count`` × ``task``, as one number.

    Lexicographic in effect: milli-GPU left first; the CPU share left (× 0.5) and the memory
    share left (× 0.25) stay below one milli-GPU and only break ties (``view.free_score``).
    """
    base = view.free_score[nodes]
    gpu = count * task.gpu_share_milli
    if view.uniform_caps:
        # Same capacity everywhere: the request costs every node the same.
        return base - (
            gpu + count * (task.cpu_milli * view.w_cpu[0] + task.memory_mib * view.w_mem[0])
        )
    return (
        base
        - gpu
        - (count * task.cpu_milli * FREE_SCORE_CPU) * view.inv_cpu[nodes]
        - (count * task.memory_mib * FREE_SCORE_MEM) * view.inv_mem[nodes]
    )
