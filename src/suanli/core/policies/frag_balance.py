"""placement/frag-balance: fragmentation growth plus GPU stranded by CPU and memory.

suanli's own placement for GPU-sharing clusters (docs/fgd.md explains and measures it).

FGD (``placement/fgd``) asks, one task ahead, whether the node could still take each shape of
the expected workload. What it cannot see is the slow drain that strands GPUs several tasks
later: a node whose free GPUs outlast its free CPU or memory. On the openb traces that is
where most of FGD's unallocated capacity sits at full load (GPUs free on nodes with no CPU or
memory left), so this policy adds a second, balance term:

    stranded(node) = free_gpu - min(free_gpu, free_cpu / cpu_per_gpu, free_mem / mem_per_gpu)

where ``cpu_per_gpu`` and ``mem_per_gpu`` are the target workload's own mean CPU and memory per
milli-GPU (over its GPU shapes, weighted by popularity). A task goes where

    growth = (fragmentation growth) + balance × (stranded growth)

is least, plus a third term where some shapes of the workload may use only some GPU models:

    contention(node) = take × pressure(model of the node)

``pressure(M)`` (``model_pressure``) is the share of model ``M``'s GPUs that the target
workload's constrained shapes would want if its GPU demand filled the cluster, each shape's
demand spread over the models it accepts in proportion to their GPUs, at most 1. A task that
takes milli-GPU from a contended model takes it from pods that can go nowhere else; a task
that may run anywhere is steered to the models nobody else needs. For a task constrained to
one model the term is the same on every node it fits, so it changes nothing; without
constrained shapes it is zero everywhere.

Growths are compared on the paper scheduler's integer scale
(``int(sigmoid(-growth / 1000) * 100)``: about 40 milli-GPU per point near zero), and among
near-equal choices the tightest node wins (least free capacity left, as ``best-fit``): a
deliberate consolidation that keeps other nodes whole. Nothing here depends on a trace: the
ratios come from the target workload, which is learned from submitted jobs unless given.
"""

from __future__ import annotations

import numpy as np

from suanli.core.frag import TargetWorkload
from suanli.core.policies.fgd import FragmentationGrowth
from suanli.core.registry import register
from suanli.core.seams import remaining_after
from suanli.core.view import ClusterView

BALANCE = 1.0
"""Weight of the stranded-GPU growth against the fragmentation growth (both milli-GPU)."""
SCALE = 500.0
"""Growths are compared as ``int(100 * sigmoid(-growth / SCALE))`` points."""
HOLES = 1.0
"""Weight of the growth of expected waste in shared GPUs' leftover shares (milli-GPU)."""


def model_pressure(
    target: TargetWorkload, model_names: tuple[str, ...], gpus: np.ndarray
) -> np.ndarray:
    """Per model column (0: no GPU, then ``model_names``), the share of that model's GPUs
    the target's constrained GPU shapes would want (see the module docstring), in 0..1.

    ``gpus`` holds the cluster's GPUs of each model (``model_names``' order)."""
    acc = target.access(model_names)[:, 1:].astype(np.float64)
    cap = gpus.astype(np.float64)
    demand = (target.weight * target.gpu_milli * target.gpus).astype(np.float64)
    has = demand > 0
    out = np.zeros(len(model_names) + 1)
    total, cap_total = float(demand[has].sum()), float(cap.sum())
    if total <= 0 or cap_total <= 0:
        return out
    restricted = has & (acc < 1).any(axis=1)
    reach = acc @ cap  # GPUs each shape may use
    for m in np.flatnonzero(restricted & (reach > 0)):
        out[1:] += (demand[m] / total) * acc[m] * cap_total / reach[m]
    return np.minimum(out, 1.0)


def stranded(
    free_gpu: np.ndarray, free_cpu: np.ndarray, free_mem: np.ndarray, cpu_per: float, mem_per: float
) -> np.ndarray:
    """Free milli-GPU a node cannot use for want of CPU or memory, at the given ratios."""
    usable = free_gpu
    if cpu_per > 0:
        usable = np.minimum(usable, free_cpu / cpu_per)
    if mem_per > 0:
        usable = np.minimum(usable, free_mem / mem_per)
    return free_gpu - np.maximum(usable, 0.0)


@register("placement", "frag-balance")
class FragBalance(FragmentationGrowth):
    """suanli (default for GPU-sharing clusters): least growth of fragmentation, stranded GPUs and contended models; tightest node among near-equals."""

    def __init__(
        self, target: TargetWorkload | None = None, balance: float = BALANCE, holes: float = HOLES
    ) -> None:
        super().__init__(target)
        self.balance = balance
        self.hole_weight = holes
        self._ratios: tuple[float, float] | None = None
        self._pressure: tuple[ClusterView, np.ndarray] | None = None

    def _target_changed(self) -> None:
        super()._target_changed()
        self._ratios = None
        self._pressure = None

    def _model_pressure(self, view: ClusterView) -> np.ndarray:
        if self._pressure is None or self._pressure[0] is not view:
            assert self.target is not None  # set by growth()
            gpus = np.zeros(len(view.models), dtype=np.int64)
            has = view.node_model >= 0
            np.add.at(gpus, view.node_model[has], view.node_gpus[has])
            names = tuple(m.name for m in view.models)
            self._pressure = (view, model_pressure(self.target, names, gpus))
        return self._pressure[1]

    def score(self, view: ClusterView, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        growth = self.growth(view, task).delta[nodes]
        if self._ratios is None:
            assert self.target is not None  # set by growth()
            self._ratios = self.target.gpu_ratios()
        cpu_per, mem_per = self._ratios
        gpu = view.node_free_milli[nodes].astype(np.float64)
        cpu = view.free_cpu[nodes].astype(np.float64)
        mem = view.free_mem[nodes].astype(np.float64)
        before = stranded(gpu, cpu, mem, cpu_per, mem_per)
        take = count * (task.gpu_share_milli if task.gpus else 0)
        after = stranded(
            gpu - take,
            cpu - count * task.cpu_milli,
            mem - count * task.memory_mib,
            cpu_per,
            mem_per,
        )
        x = growth + self.balance * (after - before)
        if take:
            x = x + take * self._model_pressure(view)[view.node_model[nodes] + 1]
        points = np.trunc(100.0 / (1.0 + np.exp(x / SCALE)))
        # Points first; among equal points the node left with the least free capacity.
        left = remaining_after(view, task, count, nodes)
        return -points * 1e9 + left
