"""Small builders shared by the tests: GPU models, nodes, clusters, tasks, jobs, policies.

Defaults are chosen so that a test only states what matters to it: a node has 8 V100 GPUs,
64 cores and 512 GiB unless told otherwise; a job asks for one whole GPU for 100 s.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from suanli.core.backfill import DEFAULT_DEPTH
from suanli.core.budget import BudgetBook
from suanli.core.builder import PolicySet, Setting, build
from suanli.core.model import MILLI, ClusterSpec, GpuModel, Job, NodeSpec, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import create
from suanli.core.scheduler import Scheduler
from suanli.core.seams import OrderContext, Placement, QueueOrder
from suanli.core.tenancy import TenancySpec
from suanli.core.view import ClusterView, TaskPlacement

# Test models with round numbers (not the catalogue's), so expected values are easy to compute.
V100 = GpuModel("V100", 32_768, 1.0)
A100 = GpuModel("A100", 81_920, 2.0)
T4 = GpuModel("T4", 16_384, 0.5)
MODELS = (V100, A100, T4)

CPU = 64_000
MEM = 512_000

QUEUE_ORDERS = (
    "fifo",
    "priority",
    "sjf",
    "smallest-first",
    "drf",
    "fair-share",
    "sjf-gpu",
    "qssf",
    "las",
    "srtf",
)
PLACEMENTS = (
    "first-fit",
    "best-fit",
    "worst-fit",
    "random",
    "dot-product",
    "packing",
    "fgd",
    "fgd-dotprod",
    "fgd-bestfit",
    "fgd-packing",
    "fgd-clustering",
    "frag-balance",
    "topology",
)


def node(
    name: str,
    gpus: int = 8,
    model: GpuModel | None = V100,
    *,
    cpu: int = CPU,
    mem: int = MEM,
    rack: str = "rack-0",
    domain: str = "",
    healthy: bool = True,
) -> NodeSpec:
    return NodeSpec(
        name=name,
        gpus=gpus,
        gpu_model=model if gpus else None,
        cpu_milli=cpu,
        memory_mib=mem,
        rack=rack,
        nvlink_domain=domain,
        healthy=healthy,
    )


def cluster(*nodes: NodeSpec, name: str = "test") -> ClusterSpec:
    return ClusterSpec(name, tuple(nodes))


def gpus_cluster(*gpus: int, model: GpuModel = V100, **kw: object) -> ClusterSpec:
    """Nodes ``n0, n1, ...`` with the given GPU counts (0: a CPU-only node)."""
    return cluster(*(node(f"n{i}", g, model, **kw) for i, g in enumerate(gpus)))  # type: ignore[arg-type]


def task(
    gpus: int = 1,
    milli: int = MILLI,
    gmem: int = 0,
    cpu: int = 0,
    mem: int = 0,
    models: Iterable[str] = (),
) -> TaskRequest:
    return TaskRequest(
        gpus=gpus,
        gpu_milli=milli,
        gpu_memory_mib=gmem,
        cpu_milli=cpu,
        memory_mib=mem,
        gpu_models=frozenset(models),
    )


def frac(milli: int, gmem: int = 0, **kw: object) -> TaskRequest:
    """A fractional share of one GPU."""
    return task(1, milli, gmem, **kw)  # type: ignore[arg-type]


def cpu_only(cpu: int = 1000, mem: int = 0) -> TaskRequest:
    return task(0, MILLI, 0, cpu, mem)


def job(
    id: str,
    submit: float = 0.0,
    runtime: float = 100.0,
    t: TaskRequest | None = None,
    *,
    gpus: int = 1,
    tasks: int = 1,
    gang_min: int = 0,
    **kw: object,
) -> Job:
    return Job(
        id=id,
        submit=submit,
        runtime=runtime,
        task=t if t is not None else task(gpus),
        tasks=tasks,
        gang_min=gang_min,
        **kw,  # type: ignore[arg-type]
    )


def placement(name: str):  # type: ignore[no-untyped-def]
    return create("placement", name)


def order(name: str):  # type: ignore[no-untyped-def]
    return create("queue", name)


def sched(
    view: ClusterView,
    queue_order: QueueOrder,
    place: Placement,
    *,
    strict: bool = False,
    ctx: OrderContext | None = None,
    tenancy: TenancySpec | None = None,
    preemption: PreemptionConfig | None = None,
    backfill: str | None = None,
    depth: int = DEFAULT_DEPTH,
    budgets: BudgetBook | None = None,
    admission: dict[str, object] | None = None,
    cls: type[Scheduler] = Scheduler,
) -> Scheduler:
    """A scheduler with ``queue_order`` and ``place``, and the plugins the builder makes for
    the rest: quotas for ``tenancy``, ``preemption``, a backfill MODE (``easy``,
    ``conservative-oracle``, ...), ``budgets``, configured ``admission`` plugins."""
    policy = PolicySet.parse(f"q/{backfill}+p") if backfill is not None else PolicySet()
    policy = PolicySet(strict=strict, backfill=policy.backfill, runtime=policy.runtime)
    setting = Setting(
        tenancy,
        ctx.priority_classes if ctx is not None else None,
        preemption,
        dict(admission or {}),
        depth,
    )
    return build(
        view, policy, setting, budgets=budgets, scheduler=cls, order=queue_order, placement=place
    )


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def take(view: ClusterView, node: int, gpus: Iterable[int], t: TaskRequest) -> TaskPlacement:
    """Allocate ``t`` on ``node``/``gpus`` directly (setting up a partly used cluster)."""
    tp = view.placement_for(node, gpus, t)
    view.allocate(tp)
    return tp


def states_equal(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def summary(view: ClusterView) -> dict[str, object]:
    """The view's free capacity over real GPUs only, as plain lists (layout-independent).

    Padding slots (past a node's real GPUs) must have zero capacity; that is checked here too.
    """
    spec = view.spec
    pad_ok = all(
        int(view.gpu_free_milli[j, n.gpus :].sum()) == 0
        and int(view.gpu_free_mem[j, n.gpus :].sum()) == 0
        for j, n in enumerate(spec.nodes)
    )
    assert pad_ok, "a padding GPU slot has capacity"
    return {
        "gpu_free_milli": [
            view.gpu_free_milli[j, : n.gpus].tolist() for j, n in enumerate(spec.nodes)
        ],
        "gpu_free_mem": [view.gpu_free_mem[j, : n.gpus].tolist() for j, n in enumerate(spec.nodes)],
        "node_full_free": view.node_full_free.tolist(),
        "node_free_milli": view.node_free_milli.tolist(),
        "free_cpu": view.free_cpu.tolist(),
        "free_mem": view.free_mem.tolist(),
        "allocated_milli": int(view.allocated_milli),
    }


def expected(spec: ClusterSpec, running: Iterable[TaskPlacement]) -> dict[str, object]:
    """``summary(view)`` recomputed from scratch: capacity minus the running placements.

    Independent bookkeeping: plain Python over the spec, no view code involved.
    """
    nodes = spec.nodes
    milli = [[MILLI] * n.gpus for n in nodes]
    gmem = [[n.gpu_model.memory_mib if n.gpu_model else 0] * n.gpus for n in nodes]
    cpu = [n.cpu_milli for n in nodes]
    mem = [n.memory_mib for n in nodes]
    allocated = 0
    for tp in running:
        for gi in tp.gpus:
            milli[tp.node][gi] -= tp.gpu_milli
            gmem[tp.node][gi] -= tp.gpu_memory_mib
        allocated += tp.gpu_milli * len(tp.gpus)
        cpu[tp.node] -= tp.cpu_milli
        mem[tp.node] -= tp.memory_mib
    return {
        "gpu_free_milli": milli,
        "gpu_free_mem": gmem,
        "node_full_free": [sum(1 for x in row if x == MILLI) for row in milli],
        "node_free_milli": [sum(row) for row in milli],
        "free_cpu": cpu,
        "free_mem": mem,
        "allocated_milli": allocated,
    }


class Spy:
    """A job whose true runtime may not be read: every other field is the job's."""

    def __init__(self, job: Job) -> None:
        self._job = job

    def __getattr__(self, name: str) -> object:
        if name == "runtime":
            raise AssertionError("the predictor read job.runtime (the oracle)")
        return getattr(self._job, name)
