"""Topology in the simulator: a multi-GPU attempt runs slower the farther apart its GPUs are
(``suanli.core.topology``: the slowest link, the ring all-reduce over it).

``TopologyModel`` gives each job's step (``Comm``: compute seconds and gradient bytes per
step; by job id, or ``default`` for the rest, or none: the job does not communicate) and
the fabric. At an attempt's start the engine divides its rate by the placement's slowdown:
its step time on its GPUs over the step time on the best placement the cluster has for as
many GPUs of its model. That placement is one node if a node has that many GPUs, else one
NVLink domain, else one rack, else several racks. A job's recorded runtime is taken as
its runtime on that best placement. The GPU-seconds an attempt spends slower than that are
its time lost to spread (``records.spread_gpu_s``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from suanli.core.decisions import JobPlacement
from suanli.core.model import ClusterSpec, Job, SpecError
from suanli.core.topology import Comm, Fabric, GpuSlot

if TYPE_CHECKING:
    from suanli.sim.results import JobRecords

__all__ = ["BoundTopology", "TopologyModel", "parse_step", "spread_line", "spread_summary"]


@dataclass(frozen=True)
class TopologyModel:
    """See the module docstring. ``interconnect``: each GPU model's node interconnect
    (``suanli.core.topology.INTERCONNECTS``; default ``nvswitch``)."""

    fabric: Fabric = field(default_factory=Fabric)
    comm: Mapping[str, Comm] = field(default_factory=dict)
    default: Comm | None = None
    interconnect: Mapping[str, str] = field(default_factory=dict)

    def comm_of(self, job: Job) -> Comm | None:
        return self.comm.get(job.id, self.default)

    def bind(self, cluster: ClusterSpec) -> BoundTopology:
        return BoundTopology(self, cluster)


class BoundTopology:
    """A model bound to a cluster: each node's place, and the best layout per size."""

    def __init__(self, model: TopologyModel, cluster: ClusterSpec) -> None:
        self.model = model
        self.nodes = cluster.nodes
        self.ic = {n.name: model.interconnect.get(n.gpu_model.name, "nvswitch")
                   for n in cluster.nodes if n.gpu_model is not None}  # fmt: skip
        self.best = cache(self._best)

    def slowdown(self, job: Job, p: JobPlacement) -> float:
        """The slowdown of ``job`` on ``p`` (1.0 when it does not communicate)."""
        comm = self.model.comm_of(job)
        if comm is None or job.task.gpus == 0:
            return 1.0
        slots: list[GpuSlot] = []
        for tp in p.tasks:
            n = self.nodes[tp.node]
            assert n.gpu_model is not None
            slots.extend(GpuSlot(n.name, g, n.domain, n.rack, n.gpu_model.name, self.ic[n.name])
                         for g in tp.gpus)  # fmt: skip
        if len(slots) <= 1:
            return 1.0
        return self.model.fabric.slowdown(comm, slots, self.best(len(slots), slots[0].model))

    def _best(self, count: int, model: str) -> tuple[GpuSlot, ...]:
        """``count`` GPUs of ``model`` laid out as compactly as the cluster allows."""
        mine = [n for n in self.nodes if n.gpu_model is not None and n.gpu_model.name == model]
        ic = self.model.interconnect.get(model, "nvswitch")
        biggest = max(n.gpus for n in mine)
        per_domain: dict[str, int] = {}
        per_rack: dict[str, int] = {}
        for n in mine:
            per_domain[n.domain] = per_domain.get(n.domain, 0) + n.gpus
            per_rack[n.rack] = per_rack.get(n.rack, 0) + n.gpus
        if count <= biggest:
            return tuple(GpuSlot("n", g, "n", "r", model, ic) for g in range(count))
        nodes = -(-count // biggest)
        domain = "d" if count <= max(per_domain.values()) else None
        rack = count <= max(per_rack.values())
        return tuple(
            GpuSlot(f"n{k // biggest}", k % biggest, domain or f"n{k // biggest}",
                    "r" if rack else f"r{k // biggest}", model, ic)
            for k in range(nodes * biggest)
        )[:count]  # fmt: skip


def parse_step(text: str) -> Comm:
    """``GRAD_GB:COMPUTE_S`` (``14:0.8``: every step computes for 0.8 s, then all-reduces
    14 GB) as a ``Comm``; a ``SpecError`` that says what is wrong otherwise."""
    parts = text.split(":")
    if len(parts) != 2:
        raise SpecError(f"topology step {text!r}: expected GRAD_GB:COMPUTE_S, e.g. 14:0.8")
    try:
        grad, compute = float(parts[0]), float(parts[1])
    except ValueError:
        raise SpecError(f"topology step {text!r}: GRAD_GB and COMPUTE_S must be numbers") from None
    if not (np.isfinite(grad) and np.isfinite(compute)):
        raise SpecError(f"topology step {text!r}: GRAD_GB and COMPUTE_S must be finite")
    try:
        return Comm(grad_bytes=grad * 1e9, compute_s=compute)
    except SpecError as e:
        raise SpecError(f"topology step {text!r}: {e}") from None


def spread_summary(rec: JobRecords) -> dict[str, float | int]:
    """Plain data: jobs whose last attempt ran slower than on the best placement, their mean
    slowdown, and the GPU-hours lost to spread (``records.spread_gpu_s``)."""
    assert rec.spread_gpu_s is not None and rec.slowdown is not None
    spread = rec.slowdown > 1.0 + 1e-9
    return {
        "spread_jobs": int(spread.sum()),
        "mean_slowdown_of_spread": float(rec.slowdown[spread].mean()) if spread.any() else 1.0,
        "spread_gpu_hours": float(rec.spread_gpu_s.sum()) / 3600.0,
    }


def spread_line(rec: JobRecords) -> str:
    """One line for a report."""
    s = spread_summary(rec)
    return (f"topology: {s['spread_jobs']:,} job(s) ran spread, {s['mean_slowdown_of_spread']:.3f}x "
            f"slower on average; {s['spread_gpu_hours']:,.1f} GPU-h lost to spread")  # fmt: skip
