"""A serving fleet's replay: long-running instances arrive and leave, each is placed on a node
of its pool, and the fleet grows by one node whenever nothing in service holds an arrival.

This answers "what fleet does this serving workload need, and how much of it does it use?"
rather than "how long does a job wait": serving instances do not queue. It is the replay of
``suanli bench hardware --only dlrm`` (``docs/disaggregation.md``).

Protocol:

1. Every node type (``NodeType``: GPUs, cores, memory, NICs) is a pool. The view is built
   with as many nodes of each type as the most instances of that pool ever alive at once
   (enough for one instance a node), all out of service.
2. Events in time order, departures before arrivals at the same instant, then in the given
   order. An instance no empty node of its pool could hold (CPU, memory, GPUs, NIC share)
   is refused and counted, never placed.
3. An arrival takes a node in service that has room for its task (the core's
   ``ClusterView``), for its NIC share (``Instance.nic_pct``, % of one NIC; a node has
   ``nics × 100``) and under its density limit (the node holds fewer than
   ``max_per_node`` instances of its ``app``, whatever their own limits), chosen by a core
   placement plugin (``place_job``, the simulator's code).
   If none has, the next node of its pool enters service (a cluster autoscaler's scale-out)
   and takes it. Nodes never leave: the fleet at the end is the fleet the workload needed.
4. A departure gives everything back.

Read-outs are exact over time (the integral of allocated over in-service capacity, event to
event, from 0 to ``horizon``), except stranded GPUs, sampled every ``sample_s``: free GPUs
on in-service nodes where ``probe`` (a task of the workload's commonest GPU shape) does not
fit, because the node's CPU, memory or NICs are spent.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.core.gang import place_job
from suanli.core.model import MILLI, ClusterSpec, GpuModel, Job, NodeSpec, SpecError, TaskRequest
from suanli.core.registry import create
from suanli.core.view import ClusterView, TaskPlacement

__all__ = ["FleetResult", "Instance", "NodeType", "replay_fleet"]

RESOURCES = ("gpu", "cpu", "memory", "nic")


@dataclass(frozen=True, slots=True)
class NodeType:
    """One kind of node a pool is made of."""

    name: str
    gpus: int
    cpu: int
    """Cores (the unit the workload's requests use)."""
    memory_gib: int
    nics: int
    gpu_model: GpuModel | None = None

    def __post_init__(self) -> None:
        if self.gpus < 0 or self.cpu < 0 or self.memory_gib < 0 or self.nics < 0:
            raise SpecError(f"node type {self.name}: counts must be >= 0")
        if self.gpus and self.gpu_model is None:
            raise SpecError(f"node type {self.name}: has {self.gpus} GPUs but no GPU model")

    def node(self, name: str) -> NodeSpec:
        """One node of this type, out of service (it enters service when the fleet grows)."""
        return NodeSpec(name, self.gpus, self.gpu_model if self.gpus else None,
                        self.cpu * MILLI, self.memory_gib * 1024, healthy=False)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Instance:
    """One serving instance: its pool (a node type's name), task, NIC share (% of one NIC),
    service and density limit (None: none), and life (``end`` None: to the horizon)."""

    id: str
    pool: str
    task: TaskRequest
    nic_pct: float
    app: str
    max_per_node: int | None
    start: float
    end: float | None


@dataclass(frozen=True)
class FleetResult:
    """What one replay needed and used."""

    nodes: dict[str, int]
    """Nodes in service at the end, by type (the fleet the workload needed)."""
    bound: dict[str, int]
    """The fewest nodes of each type that could hold the peak demand of its pool, any
    resource, if instances could be split across nodes (a lower bound)."""
    placed: int
    refused: int
    """Instances no empty node of their pool holds (never placed)."""
    capacity: dict[str, float]
    """GPUs, cores, GiB and NICs of the fleet at the end."""
    allocation: dict[str, float]
    """Time-averaged share of in-service capacity allocated, by resource."""
    peak: dict[str, float]
    """Most of each resource allocated at once (GPUs, cores, GiB, NICs)."""
    stranded_gpus: float
    """Time-averaged share of in-service GPUs that were free but stranded (see module)."""
    where: dict[str, str]
    """The node each placed instance ran on, by instance id."""
    wall_s: float


def _task_fits(t: NodeType, task: TaskRequest, nic_pct: float) -> bool:
    return (task.gpus <= t.gpus and task.cpu_milli <= t.cpu * MILLI
            and task.memory_mib <= t.memory_gib * 1024 and nic_pct <= t.nics * 100)  # fmt: skip


def _peak_alive(
    instances: Sequence[Instance], horizon: float
) -> dict[str, tuple[int, list[float]]]:
    """Per pool: the most instances alive at once, and the peak of each resource's sum, in the
    replay's order of events (an instance that ends as it starts is alive for that instant)."""
    events: dict[str, list[tuple[float, int, int, int]]] = {}
    for i, inst in enumerate(instances):
        ev = events.setdefault(inst.pool, [])
        end = inst.end if inst.end is not None else horizon
        ev.append((inst.start, 1, i, 0))
        ev.append((end, 1, i, 1) if end == inst.start else (end, 0, i, 0))
    out: dict[str, tuple[int, list[float]]] = {}
    for pool, ev in events.items():
        ev.sort()
        n = best = 0
        now = [0.0] * 4
        top = [0.0] * 4
        for _, kind, i, sub in ev:
            d = 1 if kind == 1 and sub == 0 else -1
            inst = instances[i]
            t = inst.task
            n += d
            best = max(best, n)
            for r, v in enumerate((t.gpus, t.cpu_milli / MILLI, t.memory_mib / 1024,
                                   inst.nic_pct / 100)):  # fmt: skip
                now[r] += d * v
                top[r] = max(top[r], now[r])
        out[pool] = (best, top)
    return out


def replay_fleet(
    instances: Sequence[Instance],
    types: Sequence[NodeType],
    *,
    horizon: float,
    placement: str = "best-fit",
    seed: int = 0,
    probe: TaskRequest | None = None,
    probe_nic_pct: float = 0.0,
    sample_s: float = 3600.0,
) -> FleetResult:
    """Replay ``instances`` on a fleet of ``types`` (module docstring)."""
    t0 = time.perf_counter()
    by_name = {t.name: t for t in types}
    if len(by_name) != len(types):
        raise SpecError("fleet: node type names must be unique")
    for inst in instances:
        if inst.pool not in by_name:
            raise SpecError(f"fleet: instance {inst.id} asks for pool {inst.pool!r}, "
                            f"not a node type ({', '.join(by_name)})")  # fmt: skip
        if inst.end is not None and inst.end < inst.start:
            raise SpecError(f"fleet: instance {inst.id} ends before it starts")
    if not horizon >= max((i.end or i.start for i in instances), default=0.0):
        raise SpecError("fleet: horizon must be at or after every instance's start and end")
    # An instance no empty node of its pool holds is refused up front.
    held = [i for i in instances if _task_fits(by_name[i.pool], i.task, i.nic_pct)]
    refused = len(instances) - len(held)
    instances = held
    peaks = _peak_alive(instances, horizon)

    # 1. The view: as many out-of-service nodes a pool as its most instances alive at once.
    nodes: list[NodeSpec] = []
    first: dict[str, int] = {}
    size: dict[str, int] = {}
    for t in types:
        first[t.name] = len(nodes)
        size[t.name] = max(1, peaks.get(t.name, (0, []))[0])
        nodes.extend(t.node(f"{t.name}-{k}") for k in range(size[t.name]))
    view = ClusterView(ClusterSpec("fleet", tuple(nodes)))
    n_nodes = len(nodes)
    pool_of = np.empty(n_nodes, dtype=np.int64)
    pool_index = {t.name: k for k, t in enumerate(types)}
    for t in types:
        pool_of[first[t.name] : first[t.name] + size[t.name]] = pool_index[t.name]
    pool_mask = {t.name: pool_of == pool_index[t.name] for t in types}
    nic_free = np.array([types[p].nics * 100.0 for p in pool_of.tolist()])
    in_service = {t.name: 0 for t in types}
    density: dict[str, np.ndarray] = {}
    policy = create("placement", placement)
    rng = np.random.default_rng(seed)

    # 2. Events: (time, 0 departure / 1 arrival, order).
    heap: list[tuple[float, int, int]] = [(inst.start, 1, i) for i, inst in enumerate(instances)]
    heapq.heapify(heap)
    where: dict[int, TaskPlacement] = {}
    ran: dict[str, str] = {}
    placed = 0
    alloc = [0.0] * 4  # GPUs, cores, GiB, NICs
    peak = [0.0] * 4
    area = [0.0] * 4
    cap_area = [0.0] * 4
    cap_now = [0.0] * 4
    last = 0.0
    stranded_area = gpu_samples = 0.0
    next_sample = 0.0

    def sample() -> tuple[float, float]:
        """Free GPUs stranded and GPUs in service now."""
        on = view.healthy
        total = float(view.node_gpus[on].sum())
        if probe is None or not total:
            return 0.0, total
        free = view.node_full_free
        ok = view.feasible(probe) & (nic_free >= probe_nic_pct)
        return float(free[on & ~ok].sum()), total

    def advance(to: float) -> None:
        nonlocal last, stranded_area, gpu_samples, next_sample
        dt = to - last
        if dt > 0:
            for r in range(4):
                area[r] += alloc[r] * dt
                cap_area[r] += cap_now[r] * dt
        while next_sample <= to and next_sample <= horizon:
            s, g = sample()
            stranded_area += s
            gpu_samples += g
            next_sample += sample_s
        last = max(last, to)

    def room(inst: Instance, counts: np.ndarray) -> np.ndarray:
        """Nodes in service with room for ``inst`` (its pool, task, NIC share and density)."""
        k = view.feasible(inst.task) & pool_mask[inst.pool] & (nic_free >= inst.nic_pct)
        if inst.max_per_node is not None:
            k &= counts < inst.max_per_node
        return k

    def account(inst: Instance, sign: int) -> None:
        t = inst.task
        for r, v in enumerate((t.gpus, t.cpu_milli / MILLI, t.memory_mib / 1024,
                               inst.nic_pct / 100)):  # fmt: skip
            alloc[r] += sign * v
            peak[r] = max(peak[r], alloc[r])

    while heap:
        now, kind, i = heapq.heappop(heap)
        advance(now)
        inst = instances[i]
        if kind == 0:
            p = where.pop(i)
            view.release(p)
            nic_free[p.node] += inst.nic_pct
            density[inst.app][p.node] -= 1
            account(inst, -1)
            continue
        counts = density.get(inst.app)
        if counts is None:
            counts = density[inst.app] = np.zeros(n_nodes, dtype=np.int32)
        k = room(inst, counts)
        if not k.any():
            # 3. Scale out: the next node of the pool enters service.
            t = by_name[inst.pool]
            n = first[inst.pool] + in_service[inst.pool]
            assert in_service[inst.pool] < size[inst.pool], "the pool's bound was passed"
            in_service[inst.pool] += 1
            view.set_health(n, True)
            for r, v in enumerate((t.gpus, t.cpu, t.memory_gib, t.nics)):
                cap_now[r] += v
            k = room(inst, counts)
        job = Job(inst.id, now, 1.0, inst.task)
        jp, why, _ = place_job(view, job, policy, rng, k=k)
        assert jp is not None, f"an empty node of {inst.pool} holds {inst.id}: {why}"
        (p,) = jp.tasks
        where[i] = p
        ran[inst.id] = nodes[p.node].name
        nic_free[p.node] -= inst.nic_pct
        counts[p.node] += 1
        account(inst, 1)
        placed += 1
        if inst.end is not None:
            heapq.heappush(heap, (inst.end, 0, i))
    advance(horizon)

    bound: dict[str, int] = {}
    for t in types:
        top = peaks.get(t.name, (0, [0.0] * 4))[1]
        # A resource the type has none of is asked by none of its (held) instances.
        need = [math.ceil(v / c - 1e-9) if c else 0
                for v, c in zip(top, (t.gpus, t.cpu, t.memory_gib, t.nics), strict=True)]  # fmt: skip
        bound[t.name] = max(need)
    return FleetResult(
        nodes=dict(in_service),
        bound=bound,
        placed=placed,
        refused=refused,
        capacity=dict(zip(RESOURCES, cap_now, strict=True)),
        allocation={
            r: (area[k] / cap_area[k] if cap_area[k] else float("nan"))
            for k, r in enumerate(RESOURCES)
        },
        peak=dict(zip(RESOURCES, peak, strict=True)),
        stranded_gpus=stranded_area / gpu_samples if gpu_samples else float("nan"),
        where=ran,
        wall_s=time.perf_counter() - t0,
    )
