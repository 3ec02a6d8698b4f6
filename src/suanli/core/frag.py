"""GPU fragmentation with respect to a target workload (FGD, USENIX ATC'23).

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", define how much of a node's free GPU capacity is *unusable* for the
workload the cluster expects. For one task shape ``m`` of the target workload:

* if ``m`` asks for no GPU, or cannot use this node's GPU model, every free milli-GPU of the
  node counts as fragment (``m`` can never use it);
* if the node can take ``m`` now (``m.gpus`` GPUs with at least ``m.gpu_milli`` free each, and
  enough free CPU), only the free share of GPUs too small for ``m`` is fragment;
* otherwise (too few fitting GPUs, or too little CPU) all of it is.

The node's fragmentation is the expectation over the target workload's shapes, weighted by
their popularity: ``F(node) = sum_m w_m * frag_m(node)``, in milli-GPU. The cluster's is the
sum over nodes. FGD places each task where ``F`` grows least.

The target workload is the set of the most popular task shapes that together make up a given
share of all tasks (95%, as in the paper), their weights renormalised to sum to one. A shape
is (CPU, milli-GPU per GPU, GPUs, acceptable models); memory plays no part, as in the paper.

Everything here is pure: the kernels read arrays and return numbers. ``fragmentation`` works
over any set of nodes at once (NumPy); ``frag_deltas`` is the per-task scoring kernel, compiled
with Numba, that the FGD-family placements cache per task shape and node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from suanli.core.model import MILLI, TaskRequest

TARGET_COVERAGE = 0.95
"""Share of all tasks the target workload's shapes cover (the paper's popularity threshold)."""

ShapeKey = tuple[int, int, int, frozenset[str]]
"""(CPU milli, milli-GPU per GPU (0: no GPU), GPUs, acceptable models)."""


def shape_key(task: TaskRequest) -> ShapeKey:
    """The fragmentation-relevant part of a task request (memory is not part of it)."""
    if task.gpus == 0:
        return (task.cpu_milli, 0, 0, task.gpu_models)
    return (task.cpu_milli, task.gpu_milli, task.gpus, task.gpu_models)


@dataclass(frozen=True, eq=False)
class TargetWorkload:
    """The task shapes a cluster expects, with their weights (summing to one).

    ``memory_mib`` is the mean memory of the tasks of each shape. The paper's fit test leaves
    memory out; ``fit_memory`` puts it in (a shape then also needs that much free memory).
    """

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    gpus: np.ndarray
    models: tuple[frozenset[str], ...]
    weight: np.ndarray
    memory_mib: np.ndarray
    fit_memory: bool = False
    _access: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.weight)

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[ShapeKey, float],
        coverage: float = TARGET_COVERAGE,
        memory: Mapping[ShapeKey, float] | None = None,
        fit_memory: bool = False,
    ) -> TargetWorkload:
        """The most popular shapes covering ``coverage`` of the count, renormalised.

        Shapes are ranked by count, ties by the larger shape first (CPU, then milli-GPU, then
        GPUs, then models), so the choice is deterministic. ``memory`` holds each shape's total
        memory (MiB over its tasks), for the mean.
        """
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage must be in (0, 1], got {coverage}")
        items = [(k, float(c)) for k, c in counts.items() if c > 0]
        if not items:
            raise ValueError("a target workload needs at least one task")
        items.sort(key=lambda kc: (kc[1], kc[0][:3], sorted(kc[0][3])), reverse=True)
        total = sum(c for _, c in items)
        chosen: list[tuple[ShapeKey, float]] = []
        cum = 0.0
        for k, c in items:
            if cum >= coverage * total:
                break
            chosen.append((k, c))
            cum += c
        w = np.array([c for _, c in chosen]) / cum
        mem = memory or {}
        return cls(
            cpu_milli=np.array([k[0] for k, _ in chosen], dtype=np.int64),
            gpu_milli=np.array([k[1] for k, _ in chosen], dtype=np.int64),
            gpus=np.array([k[2] for k, _ in chosen], dtype=np.int64),
            models=tuple(k[3] for k, _ in chosen),
            weight=w,
            memory_mib=np.array([mem.get(k, 0.0) / c for k, c in chosen], dtype=np.int64),
            fit_memory=fit_memory,
        )

    @classmethod
    def from_tasks(
        cls,
        tasks: Iterable[TaskRequest],
        coverage: float = TARGET_COVERAGE,
        fit_memory: bool = False,
    ) -> TargetWorkload:
        """The target workload of a list of tasks (each counted once)."""
        counts: Counter[ShapeKey] = Counter()
        memory: Counter[ShapeKey] = Counter()
        for t in tasks:
            k = shape_key(t)
            counts[k] += 1
            memory[k] += t.memory_mib
        return cls.from_counts(counts, coverage, memory, fit_memory)

    @property
    def fit_memory_mib(self) -> np.ndarray:
        """Memory each shape needs to fit (zeros unless ``fit_memory``)."""
        return self.memory_mib if self.fit_memory else np.zeros_like(self.memory_mib)

    def gpu_ratios(self) -> tuple[float, float]:
        """Mean CPU (milli) and memory (MiB) per milli-GPU over the GPU shapes, by weight."""
        g = (self.gpu_milli * self.gpus).astype(np.float64)
        has = g > 0
        if not has.any():
            return 0.0, 0.0
        wg = float((self.weight * g).sum())
        cpu = float((self.weight * self.cpu_milli * has).sum()) / wg
        mem = float((self.weight * self.memory_mib * has).sum()) / wg
        return cpu, mem

    def access(self, model_names: tuple[str, ...]) -> np.ndarray:
        """(shapes × (1 + models)) bool: can shape m use a GPU of model column c?

        Column 0 stands for "no GPU" (never usable by a GPU shape); column ``i + 1`` for
        ``model_names[i]``, the view's model order.
        """
        acc = self._access.get(model_names)
        if acc is None:
            acc = np.zeros((len(self), 1 + len(model_names)), dtype=np.bool_)
            for m, allowed in enumerate(self.models):
                for i, name in enumerate(model_names):
                    acc[m, i + 1] = not allowed or name in allowed
            self._access[model_names] = acc
        return acc


def fragmentation(
    free_milli: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    model_col: np.ndarray,
    target: TargetWorkload,
    access: np.ndarray,
) -> np.ndarray:
    """Fragmentation (milli-GPU) of each node, vectorised over nodes.

    ``free_milli`` (nodes × GPU slots; absent GPUs read 0), ``free_cpu`` and ``free_mem``
    (nodes), ``model_col`` (nodes; 0 for no GPU, else 1 + the model's index in ``access``'s
    columns).
    """
    total = free_milli.sum(axis=1).astype(np.float64)
    out = np.zeros(len(total))
    for m in range(len(target)):
        w = target.weight[m]
        milli = int(target.gpu_milli[m])
        if milli == 0:
            out += w * total
            continue
        fits_gpu = free_milli >= milli
        cnt = fits_gpu.sum(axis=1)
        small = np.where(fits_gpu, 0, free_milli).sum(axis=1)
        ok = (cnt >= target.gpus[m]) & (free_cpu >= target.cpu_milli[m]) & access[m][model_col]
        ok &= free_mem >= target.fit_memory_mib[m]
        out += w * np.where(ok, small, total)
    return out


@njit(cache=True, nogil=True)
def _frag(cpu, mem, left, model_col, t_cpu, t_mem, t_milli, t_num, t_access, t_w):  # type: ignore[no-untyped-def]
    """Fragmentation of one node state (see the module docstring)."""
    total = 0
    for g in range(left.shape[0]):
        total += left[g]
    if total == 0:
        return 0.0
    f = 0.0
    for m in range(t_w.shape[0]):
        milli = t_milli[m]
        if milli == 0 or not t_access[m, model_col]:
            f += t_w[m] * total
            continue
        cnt = 0
        small = 0
        for g in range(left.shape[0]):
            x = left[g]
            if x >= milli:
                cnt += 1
            else:
                small += x
        if cnt >= t_num[m] and cpu >= t_cpu[m] and mem >= t_mem[m]:
            f += t_w[m] * small
        else:
            f += t_w[m] * total
    return f


def hole_values(target: TargetWorkload) -> np.ndarray:
    """Expected milli-GPU eventually wasted on a GPU with ``h`` milli free (index ``h``).

    A hole no GPU shape of the target fits is wasted whole; otherwise it is filled by one of
    the shapes that fit, chosen by popularity (weighted by GPUs per task), and what that leaves
    is valued the same way: ``V(h) = sum_m p_m V(h - milli_m) / sum_m p_m`` over the fitting
    shapes. ``V(0) = 0`` and, for a whole-GPU-heavy workload, ``V(1000)`` is small.
    """
    g = target.gpu_milli > 0
    milli = target.gpu_milli[g]
    p = (target.weight * target.gpus)[g]
    v = np.zeros(MILLI + 1)
    for h in range(1, MILLI + 1):
        fit = milli <= h
        if fit.any():
            v[h] = float((p[fit] * v[h - milli[fit]]).sum() / p[fit].sum())
        else:
            v[h] = h
    return v


@njit(cache=True, nogil=True)
def _quantised(delta):  # type: ignore[no-untyped-def]
    # The paper's scheduler score: int(sigmoid(-delta / 1000) * 100), higher is better.
    x = -delta / 1000.0
    return np.int64((1.0 / (1.0 + np.exp(-x))) * 100.0)


@njit(cache=True, nogil=True)
def frag_deltas(  # type: ignore[no-untyped-def]
    nodes,
    free_milli,
    free_gmem,
    free_cpu,
    free_mem,
    model_col,
    task_cpu,
    task_mem,
    task_milli,
    task_gmem,
    task_gpus,
    t_cpu,
    t_mem,
    t_milli,
    t_num,
    t_access,
    t_w,
    hole_value,
    hole_weight,
    quantised,
    out_delta,
    out_gpu,
):
    """Fragmentation growth of placing one task on each of ``nodes``, and the GPU it takes.

    Whole-GPU tasks take the lowest-index fully free GPUs (every choice leaves the same state);
    a fractional task tries each GPU with enough free share and memory (``free_gmem``,
    ``task_gmem``; one GPU per distinct free share) and keeps the one
    whose growth is least, ties to the lowest index; ``hole_weight`` × the change in
    ``hole_value`` of that GPU's free share (``hole_values``) is added to a fractional task's
    growth (0: FGD as published). With ``quantised`` the comparison uses the
    paper scheduler's integer score and ``out_delta`` holds minus that score (lower is better
    either way). A node that cannot take the task gets +inf and GPU -1.
    """
    g_slots = free_milli.shape[1]
    buf = np.empty(g_slots, dtype=free_milli.dtype)
    for i in range(nodes.shape[0]):
        n = nodes[i]
        left = free_milli[n]
        cpu = free_cpu[n]
        mem = free_mem[n]
        col = model_col[n]
        before = _frag(cpu, mem, left, col, t_cpu, t_mem, t_milli, t_num, t_access, t_w)
        best = np.inf
        best_gpu = -1
        if task_gpus == 1 and task_milli < MILLI:
            for g in range(g_slots):
                x = left[g]
                if x < task_milli or free_gmem[n, g] < task_gmem:
                    continue
                seen = False
                for h in range(g):
                    if left[h] == x and free_gmem[n, h] >= task_gmem:
                        seen = True
                        break
                if seen:
                    continue
                for h in range(g_slots):
                    buf[h] = left[h]
                buf[g] = x - task_milli
                d = (
                    _frag(
                        cpu - task_cpu,
                        mem - task_mem,
                        buf,
                        col,
                        t_cpu,
                        t_mem,
                        t_milli,
                        t_num,
                        t_access,
                        t_w,
                    )
                    - before
                )
                if hole_weight != 0.0:
                    d += hole_weight * (hole_value[x - task_milli] - hole_value[x])
                if quantised:
                    d = -np.float64(_quantised(d))
                if d < best:
                    best = d
                    best_gpu = g
        else:
            need = task_gpus
            for h in range(g_slots):
                buf[h] = left[h]
                if need > 0 and left[h] == MILLI:
                    buf[h] = 0
                    need -= 1
                    if best_gpu < 0:
                        best_gpu = h
            if need > 0:
                best_gpu = -1
            else:
                d = (
                    _frag(
                        cpu - task_cpu,
                        mem - task_mem,
                        buf,
                        col,
                        t_cpu,
                        t_mem,
                        t_milli,
                        t_num,
                        t_access,
                        t_w,
                    )
                    - before
                )
                best = -np.float64(_quantised(d)) if quantised else d
        out_delta[i] = best
        out_gpu[i] = best_gpu
