"""The FGD replay protocol (Weng et al., USENIX ATC'23) on the openb traces.

Protocol (as the FGD artifact runs it, ``../shared/traces/README.md``):

1. The cluster is openb's GPU node list (1,213 nodes, 6,212 GPUs: the artifact copies
   ``openb_node_list_gpu_node`` next to every pod list, so CPU-only pods share the GPU
   nodes). The pod list is shuffled with the run's seed (``order="shuffle"``: the artifact's
   run script passes ``--shuffle-pod=true``) or read in trace order (``order="trace"``).
2. "Tune 1.3": pods drawn uniformly at random, with replacement, from the original list are
   appended until the next one would take the total GPU request past 1.3 × the cluster's GPU
   capacity.
3. Pods arrive one by one and never leave; each is placed by the policy on the core's
   ``ClusterView`` (``gang.place_job``, the code the simulator runs) or, if no node fits it,
   counted as failed and skipped.
4. At X% arrived load (the moment the GPU requests that have arrived first reach X% of the
   capacity; for 130%, the end of the tuned list, which stops just short of it) it records
   the allocated share of GPU capacity, the unallocated share (100 − allocated) and the
   fragmentation of the cluster with respect to the target workload, as a share of capacity.

The target workload of FGD (and of the fragmentation read-out) is built from the original pod
list, before tuning, as in the paper. Every random choice (shuffle, tuning, policy) comes from
one ``numpy`` generator seeded with the run's seed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suanli.core.frag import TargetWorkload, fragmentation
from suanli.core.gang import place_job
from suanli.core.model import MILLI, ClusterSpec, Job, TaskRequest
from suanli.core.registry import create
from suanli.core.seams import Placement
from suanli.core.view import ClusterView
from suanli.sim.spread import spread_map
from suanli.traces.errors import TraceUseError
from suanli.traces.openb import OpenbPods, load_openb_nodes, load_openb_pods

PAPER_POLICIES: dict[str, str] = {
    "Random": "random",
    "DotProd": "fgd-dotprod",
    "GpuClustering": "fgd-clustering",
    "GpuPacking": "fgd-packing",
    "BestFit": "fgd-bestfit",
    "FGD": "fgd",
}
"""The paper's six policies and the placements that implement them."""

WORKLOADS = ("default", "cpu050", "gpushare40", "multigpu20")
"""The openb pod lists with published results (``openb_pod_list_<name>.csv``)."""

TUNE_RATIO = 1.3
LOAD_POINTS = (1.0, 1.3)
CURVE_GRID = np.round(np.arange(0.0, 1.3001, 0.01), 2)
"""Arrived-load points (share of capacity) at which each run's allocation curve is sampled."""


@dataclass(frozen=True)
class Workload:
    """An openb pod list ready to replay: its tasks, cluster and target workload."""

    name: str
    cluster: ClusterSpec
    tasks: tuple[TaskRequest, ...]
    demand: np.ndarray
    target: TargetWorkload

    @property
    def capacity_milli(self) -> int:
        return self.cluster.total_gpus * MILLI


def pod_tasks(pods: OpenbPods) -> tuple[TaskRequest, ...]:
    """One task request per pod; equal requests are one object (policy caches key on them)."""
    interned: dict[TaskRequest, TaskRequest] = {}
    out = []
    for cpu, mem, n, milli, spec in zip(
        pods.cpu_milli.tolist(),
        pods.memory_mib.tolist(),
        pods.num_gpu.tolist(),
        pods.gpu_milli.tolist(),
        pods.gpu_spec,
        strict=True,
    ):
        if n == 0:
            t = TaskRequest(gpus=0, cpu_milli=cpu, memory_mib=mem, gpu_models=spec)
        else:
            t = TaskRequest(gpus=n, gpu_milli=milli, cpu_milli=cpu, memory_mib=mem, gpu_models=spec)
        out.append(interned.setdefault(t, t))
    return tuple(out)


def pod_list_path(trace_dir: Path, name: str) -> Path:
    """``<trace dir>/openb/openb_pod_list_<name>.csv``, or ``name`` itself if it is a path;
    ``TraceUseError`` (naming the lists there are) if it is not a file."""
    path = Path(name)
    if not path.suffix:
        path = trace_dir / "openb" / f"openb_pod_list_{name}.csv"
    if not path.is_file():
        known = sorted(
            p.stem.removeprefix("openb_pod_list_")
            for p in (trace_dir / "openb").glob("openb_pod_list_*.csv")
        )
        raise TraceUseError(
            f"no pod list {name!r}: {path} is not a file (known: {', '.join(known) or 'none'})"
        )
    return path


def load_workload(trace_dir: Path, name: str, nodes: str = "gpu_node") -> Workload:
    """``openb_pod_list_<name>.csv`` (or a path to any pod list) on the openb node list."""
    path = pod_list_path(trace_dir, name)
    cluster = load_openb_nodes(trace_dir / "openb" / f"openb_node_list_{nodes}.csv")
    pods = load_openb_pods(path)
    return workload_from_pods(path.stem.removeprefix("openb_pod_list_"), cluster, pods)


def workload_from_pods(name: str, cluster: ClusterSpec, pods: OpenbPods) -> Workload:
    """A pod list (read, or made by ``suanli.traces.openb_variants``) ready to replay."""
    tasks = pod_tasks(pods)
    demand = np.where(pods.num_gpu > 0, pods.num_gpu * pods.gpu_milli, 0).astype(np.int64)
    if not demand.any():
        raise TraceUseError(f"{pods.source.name}: no pod asks for a GPU, nothing to replay")
    return Workload(name, cluster, tasks, demand, TargetWorkload.from_tasks(tasks))


def arrival_order(
    demand: np.ndarray, capacity_milli: int, rng: np.random.Generator, order: str = "shuffle"
) -> np.ndarray:
    """Indices of the pods in arrival order: the list (shuffled or not), then the tuned copies."""
    n = len(demand)
    if order == "shuffle":
        base = rng.permutation(n)
    elif order == "trace":
        base = np.arange(n)
    else:
        raise ValueError(f"order must be 'trace' or 'shuffle', got {order!r}")
    total = int(demand.sum())
    limit = TUNE_RATIO * capacity_milli
    if not demand.any():
        raise ValueError(
            "no pod asks for a GPU: the protocol tunes the GPU demand to 1.3 × capacity"
        )
    extra: list[int] = []
    # Draw in blocks (same stream as one draw at a time); stop before passing the limit.
    while True:
        block = rng.integers(0, n, size=1024)
        for i in block.tolist():
            d = int(demand[i])
            if total + d > limit:
                return np.concatenate((base, np.array(extra, dtype=np.int64)))
            total += d
            extra.append(i)


@dataclass(frozen=True)
class RunResult:
    """One replay of one pod list with one policy and seed."""

    workload: str
    policy: str
    seed: int
    pods: int
    failed: int
    alloc_pct: tuple[float, ...]
    """Allocated share of GPU capacity (%) at each of ``LOAD_POINTS``."""
    frag_pct: tuple[float, ...]
    """Fragmentation w.r.t. the target workload (% of capacity) at each of ``LOAD_POINTS``."""
    curve: tuple[float, ...]
    """Allocated share (%) at each point of ``CURVE_GRID`` of arrived load."""
    wall_s: float

    @property
    def unalloc_pct(self) -> tuple[float, ...]:
        return tuple(100.0 - a for a in self.alloc_pct)


def replay(
    work: Workload,
    policy: str,
    seed: int,
    order: str = "shuffle",
    placement: Placement | None = None,
) -> RunResult:
    """Run the protocol once (``policy`` is a paper name or a ``placement`` registry name)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    cap = work.capacity_milli
    seq = arrival_order(work.demand, cap, rng, order)
    view = ClusterView(work.cluster)
    if placement is None:
        placement = create("placement", PAPER_POLICIES.get(policy, policy))
    if hasattr(placement, "set_target"):
        placement.set_target(work.target)
    access = work.target.access(tuple(m.name for m in view.models))
    model_col = view.node_model + 1

    marks = [p * cap for p in LOAD_POINTS]
    grid = CURVE_GRID * cap
    curve = np.zeros(len(grid))
    gi = 0
    alloc: list[float] = []
    frag: list[float] = []
    arrived = 0
    failed = 0
    tasks = work.tasks

    def read_out() -> None:
        alloc.append(view.allocated_milli)
        free = (view.gpu_free_milli, view.free_cpu, view.free_mem)
        frag.append(float(fragmentation(*free, model_col, work.target, access).sum()))

    demand = work.demand.tolist()
    for i in seq.tolist():
        job = Job(str(i), 0.0, 1.0, tasks[i])
        jp, _, _ = place_job(view, job, placement, rng)
        if jp is None:
            failed += 1
        arrived += demand[i]
        while gi < len(grid) and arrived >= grid[gi]:
            curve[gi] = view.allocated_milli
            gi += 1
        while len(alloc) < len(marks) and arrived >= marks[len(alloc)]:
            read_out()
    curve[gi:] = view.allocated_milli
    while len(alloc) < len(marks):  # the tuned list ends just short of its last mark
        read_out()
    return RunResult(
        workload=work.name,
        policy=policy,
        seed=seed,
        pods=len(seq),
        failed=failed,
        alloc_pct=tuple(100.0 * a / cap for a in alloc),
        frag_pct=tuple(100.0 * f / cap for f in frag),
        curve=tuple((100.0 * curve / cap).tolist()),
        wall_s=time.perf_counter() - t0,
    )


def run_one(works: Sequence[Workload], job: tuple[int, str, int, str]) -> RunResult:
    """One replay, wherever ``spread_map`` runs it: (index into ``works``, policy, seed,
    order)."""
    i, policy, seed, order = job
    return replay(works[i], policy, seed, order)


def sweep(
    trace_dir: Path,
    workloads: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    order: str = "shuffle",
    workers: int = 2,
    *,
    ray: str | None = None,
) -> list[RunResult]:
    """Every (workload, policy, seed) run, on ``workers`` processes (1: in this process) or
    on the Ray cluster at ``ray``; the pod lists are read here, in this process."""
    works = [load_workload(trace_dir, w) for w in workloads]
    return sweep_workloads(works, policies, seeds, order, workers, ray=ray)


def sweep_workloads(
    works: Sequence[Workload],
    policies: Sequence[str],
    seeds: Sequence[int],
    order: str = "shuffle",
    workers: int = 2,
    *,
    ray: str | None = None,
) -> list[RunResult]:
    """Every (workload, policy, seed) run of loaded workloads, in that order, spread by
    ``suanli.sim.spread.spread_map``: the workloads travel with the runs (once per process,
    or once through Ray's object store), so only this process reads trace files."""
    works = tuple(works)
    jobs = [(i, p, s, order) for i in range(len(works)) for p in policies for s in seeds]
    return spread_map(run_one, jobs, works, workers=workers, ray=ray)
