"""The cluster view: free capacity of every GPU and node as NumPy arrays.

Layout. Nodes are indexed ``0..N-1`` in the order of the cluster spec. GPUs live in 2-D
arrays of shape ``(N, G)`` where ``G`` is the largest GPU count of any node rounded up to a
multiple of 8 (so a row of booleans reads as whole 64-bit words); the slots past a node's real
GPUs are padding with zero capacity, so no request ever fits them. Per node the
view keeps derived totals (fully free GPUs, free milli-GPU) so that the common questions are
one vectorised expression over all nodes.

Contract. ``allocate`` refuses (``OvercommitError``) anything that would take more than is
free on a GPU or a node; ``release`` is its exact inverse and refuses to free more than was
taken. The ``checkpoint``/``rollback`` pair is the what-if: every allocation after a
checkpoint is undone exactly, in reverse order, leaving every array bit-for-bit as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np

from suanli.core.model import MILLI, ClusterSpec, TaskRequest
from suanli.core.speed import REFERENCE, SpeedBasis

FREE_SCORE_CPU = 0.5
FREE_SCORE_MEM = 0.25


class OvercommitError(ValueError):
    """An allocation that would take more than is free, or a release of more than was taken."""


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """Where one task runs: a node, the GPUs on it, and what it holds of each."""

    node: int
    gpus: tuple[int, ...]
    gpu_milli: int
    gpu_memory_mib: int
    cpu_milli: int
    memory_mib: int


class ClusterView:
    """Free capacity of a cluster, array-backed. See the module docstring for the contract."""

    def __init__(self, spec: ClusterSpec, speed_basis: SpeedBasis = REFERENCE) -> None:
        self.spec = spec
        nodes = spec.nodes
        n = len(nodes)
        g = max((nd.gpus for nd in nodes), default=0)
        self.n_nodes = n
        self.max_gpus = g
        self.models = spec.gpu_models
        self.model_index = {m.name: i for i, m in enumerate(self.models)}

        self.node_gpus = np.array([nd.gpus for nd in nodes], dtype=np.int64)
        self.node_model = np.array(
            [self.model_index[nd.gpu_model.name] if nd.gpu_model else -1 for nd in nodes],
            dtype=np.int64,
        )
        self.speed_basis = speed_basis
        """What job runtimes are measured on (``suanli.core.speed``; default the reference)."""
        self.node_speed = np.array(speed_basis.node_speeds(spec), dtype=np.float64)
        """Each node's effective speed against ``speed_basis``: 1.0 on a native GPU model,
        ``speed / s_native`` on another (the model's speed under the reference basis), 1.0
        without GPUs. The simulator's one speed table: a job runs ``runtime × tasks /
        started tasks / speed`` with the least speed of its placement."""
        self.cap_cpu = np.array([nd.cpu_milli for nd in nodes], dtype=np.int64)
        self.cap_mem = np.array([nd.memory_mib for nd in nodes], dtype=np.int64)
        self.healthy = np.array([nd.healthy for nd in nodes], dtype=bool)
        self.all_healthy = bool(self.healthy.all())
        racks: dict[str, int] = {}
        domains: dict[str, int] = {}
        self.node_rack = np.array([racks.setdefault(nd.rack, len(racks)) for nd in nodes])
        self.node_domain = np.array([domains.setdefault(nd.domain, len(domains)) for nd in nodes])
        self.n_racks = len(racks)
        self.n_domains = len(domains)

        self.gpu_slots = gp = max(8, -(-g // 8) * 8)
        slot = np.arange(gp)[None, :] < self.node_gpus[:, None]
        gpu_mem = np.array(
            [nd.gpu_model.memory_mib if nd.gpu_model else 0 for nd in nodes], dtype=np.int64
        )
        self.node_gpu_mem = gpu_mem
        """Memory of each node's GPUs (0 without GPUs)."""
        self.gpu_exists = slot
        self.gpu_cap_mem = np.where(slot, gpu_mem[:, None], 0).astype(np.int64)
        self.gpu_free_milli = np.where(slot, MILLI, 0).astype(np.int64)
        self.gpu_free_mem = self.gpu_cap_mem.copy()
        self.node_full_free = self.node_gpus.copy()
        self.node_free_milli = self.node_gpus * MILLI
        self.free_cpu = self.cap_cpu.copy()
        self.free_mem = self.cap_mem.copy()

        # Per-node weights that turn free CPU and memory into a share of the node (for scores).
        self.inv_cpu = 1.0 / np.maximum(self.cap_cpu, 1)
        self.inv_mem = 1.0 / np.maximum(self.cap_mem, 1)
        self.uniform_caps = bool((self.cap_cpu == self.cap_cpu[0]).all()) and bool(
            (self.cap_mem == self.cap_mem[0]).all()
        )
        self.w_cpu = (FREE_SCORE_CPU * self.inv_cpu).tolist()
        self.w_mem = (FREE_SCORE_MEM * self.inv_mem).tolist()
        self.node_free3 = np.stack(
            (self.node_full_free, self.free_cpu, self.free_mem), axis=1
        ).astype(np.float64)
        """Per node (fully free GPUs, free CPU, free memory) as floats, for vectorised counts."""
        self.free_score = (
            self.node_free_milli
            + FREE_SCORE_CPU * self.inv_cpu * self.free_cpu
            + FREE_SCORE_MEM * self.inv_mem * self.free_mem
        )
        """Per node: free milli-GPU + 0.5 × free CPU share + 0.25 × free memory share.

        One sortable number for "how much is left" (milli-GPU first; the CPU and memory terms
        stay below one milli-GPU and only break ties). Recomputed, never accumulated, on every
        change of the node, so equal states give bit-equal scores.
        """
        self.total_gpus = int(self.node_gpus.sum())
        self.allocated_milli = 0
        """Milli-GPU allocated over the whole cluster (kept current by allocate/release)."""
        self.listeners: list[Callable[[int], None]] = []
        """Called with a node index after every change of that node's free capacity or health."""
        self.task_listeners: list[Callable[[TaskPlacement, int], None]] = []
        """Called with each placement allocated (+1) or released (-1), after the node listeners."""
        self.health_changes = 0
        """How many times a node's or a GPU's health was set (``set_health``,
        ``set_gpu_health``)."""
        self.gpu_out = np.zeros_like(slot)
        """GPUs out of service (``set_gpu_health``): whatever is free of them is held, so
        that no placement finds it, and what their holders release is held too."""
        self.gpu_held_milli = np.zeros_like(self.gpu_free_milli)
        self.gpu_held_mem = np.zeros_like(self.gpu_free_mem)
        self.any_out = False
        self._undo: list[TaskPlacement] = []
        self._tracking = 0
        self._everywhere = np.ones(n, dtype=bool)  # the mask of "no constraint" (shared)
        self._model_masks: dict[frozenset[str], np.ndarray] = {}
        self._task_masks: dict[tuple[frozenset[str], int], np.ndarray] = {}

    # ---------------------------------------------------------------- feasibility
    def model_ok(self, models: frozenset[str]) -> np.ndarray:
        """Nodes whose GPU model is acceptable, healthy or not (read-only, cached)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if models:
                idx = [self.model_index[m] for m in models if m in self.model_index]
                mask = np.isin(self.node_model, idx)
            else:
                mask = self._everywhere
            mask.flags.writeable = False
            self._model_masks[models] = mask
        return mask

    def task_ok(self, task: TaskRequest) -> np.ndarray:
        """Nodes that could ever hold ``task``, healthy or not (read-only, cached).

        The GPU model must be acceptable, and a whole-GPU task that states ``gpu_memory_mib``
        needs GPUs with at least that much memory.
        """
        min_mem = task.gpu_memory_mib if task.gpus and task.gpu_milli >= MILLI else 0
        if not min_mem:
            return self.model_ok(task.gpu_models)
        key = (task.gpu_models, min_mem)
        mask = self._task_masks.get(key)
        if mask is None:
            mask = self.model_ok(task.gpu_models) & (self.node_gpu_mem >= min_mem)
            mask.flags.writeable = False
            self._task_masks[key] = mask
        return mask

    def task_mask(self, task: TaskRequest) -> np.ndarray:
        """Healthy nodes that could hold ``task`` (see ``task_ok``)."""
        ok = self.task_ok(task)
        return ok if self.all_healthy else ok & self.healthy

    def fit_counts(self, task: TaskRequest, limit: int = 1 << 30) -> np.ndarray:
        """How many copies of ``task`` each node can take now, at most ``limit`` (int64, per node).

        Exact for identical tasks: GPUs are independent, so the count of fractional tasks a
        node holds is the sum over its GPUs, whatever order they are placed in.
        """
        if task.gpus == 0:
            k = np.full(self.n_nodes, limit, dtype=np.int64)
        elif task.gpu_milli < MILLI:
            per_gpu = self.gpu_free_milli // task.gpu_milli
            if task.gpu_memory_mib:
                np.minimum(per_gpu, self.gpu_free_mem // task.gpu_memory_mib, out=per_gpu)
            k = per_gpu.sum(axis=1)
        else:
            k = self.node_full_free // task.gpus
        if task.cpu_milli:
            np.minimum(k, self.free_cpu // task.cpu_milli, out=k)
        if task.memory_mib:
            np.minimum(k, self.free_mem // task.memory_mib, out=k)
        np.minimum(k, limit, out=k)
        k[~self.task_mask(task)] = 0
        return k

    def feasible(self, task: TaskRequest) -> np.ndarray:
        """Boolean mask over nodes: can this node take one more such task now?

        Same answer as ``fit_counts(task) > 0``, with comparisons instead of divisions: this
        is the hot path of single-task jobs.
        """
        if task.gpus == 0:
            m = self.task_mask(task).copy()
        else:
            if task.gpu_milli < MILLI:
                per_gpu = self.gpu_free_milli >= task.gpu_milli
                if task.gpu_memory_mib:
                    per_gpu &= self.gpu_free_mem >= task.gpu_memory_mib
                m = self._any_gpu(per_gpu)
            else:
                m = self.node_full_free >= task.gpus
            ok = self.task_mask(task)
            if ok is not self._everywhere:
                m &= ok
        if task.cpu_milli:
            m &= self.free_cpu >= task.cpu_milli
        if task.memory_mib:
            m &= self.free_mem >= task.memory_mib
        return m

    def _any_gpu(self, per_gpu: np.ndarray) -> np.ndarray:
        """Row-wise any() of a C-contiguous (N, G) bool array, reading 8 GPUs as one word."""
        words = per_gpu.view(np.uint64)
        out = words[:, 0] != 0 if words.shape[1] == 1 else words.any(axis=1)
        return cast(np.ndarray, out)

    def gpus_fitting(self, node: int, task: TaskRequest) -> np.ndarray:
        """Indices of the GPUs of ``node`` that can take one ``task`` now, ascending."""
        free = self.gpu_free_milli[node]
        if task.gpu_milli >= MILLI:
            return (free == MILLI).nonzero()[0]
        ok = free >= task.gpu_milli
        if task.gpu_memory_mib:
            ok &= self.gpu_free_mem[node] >= task.gpu_memory_mib
        return ok.nonzero()[0]

    def placement_for(self, node: int, gpus: Iterable[int], task: TaskRequest) -> TaskPlacement:
        """The TaskPlacement of ``task`` on ``node`` using ``gpus``.

        A whole-GPU task holds each GPU's entire memory; a fractional one its stated memory.
        """
        gpus = tuple(gpus.tolist()) if isinstance(gpus, np.ndarray) else tuple(int(x) for x in gpus)
        if task.gpus and task.gpu_milli >= MILLI:
            mem = int(self.gpu_cap_mem[node, gpus[0]]) if gpus else 0
            return TaskPlacement(node, gpus, MILLI, mem, task.cpu_milli, task.memory_mib)
        return TaskPlacement(
            node, gpus, task.gpu_milli, task.gpu_memory_mib, task.cpu_milli, task.memory_mib
        )

    # ---------------------------------------------------------------- mutation
    def set_health(self, node: int, healthy: bool) -> None:
        """Mark ``node`` (un)healthy. Placement skips unhealthy nodes; allocations stay."""
        self.healthy[node] = healthy
        self.all_healthy = bool(self.healthy.all())
        self.health_changes += 1
        for listener in self.listeners:
            listener(node)

    def set_gpu_health(self, node: int, gpu: int, healthy: bool) -> None:
        """Take GPU ``gpu`` of ``node`` out of service (``healthy`` False) or return it.

        Out of service, what is free of it is held, so no placement ever finds it free, and
        what the allocations still on it release is held as it comes back; returned, all of
        it is free again. Allocations stay, as ``set_health``'s do: taking the work off the
        GPU is the caller's. Not inside a what-if (a ``checkpoint``): a rollback undoes
        allocations, never a change of health."""
        if self._tracking:
            raise RuntimeError("a GPU's health cannot change inside a what-if")
        if not (0 <= node < self.n_nodes and 0 <= gpu < self.node_gpus[node]):
            raise OvercommitError(f"no GPU {gpu} on node index {node}")
        if bool(self.gpu_out[node, gpu]) != healthy:
            return
        fm, gm = self.gpu_free_milli[node], self.gpu_free_mem[node]
        hm, hg = self.gpu_held_milli[node], self.gpu_held_mem[node]
        if not healthy:
            if fm[gpu] == MILLI:
                self.node_full_free[node] -= 1
            self.node_free_milli[node] -= fm[gpu]
            hm[gpu], hg[gpu], fm[gpu], gm[gpu] = fm[gpu], gm[gpu], 0, 0
        else:
            fm[gpu] += hm[gpu]
            gm[gpu] += hg[gpu]
            self.node_free_milli[node] += hm[gpu]
            hm[gpu] = hg[gpu] = 0
            if fm[gpu] == MILLI:
                self.node_full_free[node] += 1
        self.gpu_out[node, gpu] = not healthy
        self.any_out = bool(self.gpu_out.any())
        self.health_changes += 1
        self._node_changed(node)

    def allocate(self, p: TaskPlacement) -> None:
        """Take ``p`` out of the free capacity, or raise ``OvercommitError`` and change nothing."""
        n = p.node
        if not 0 <= n < self.n_nodes:
            raise OvercommitError(f"node index {n} out of range 0..{self.n_nodes - 1}")
        if p.cpu_milli > self.free_cpu[n] or p.memory_mib > self.free_mem[n]:
            raise OvercommitError(
                f"node {self.spec.nodes[n].name}: asks cpu {p.cpu_milli}m / mem {p.memory_mib}MiB,"
                f" free {int(self.free_cpu[n])}m / {int(self.free_mem[n])}MiB"
            )
        gpus = p.gpus
        if gpus:
            if p.gpu_milli <= 0 or p.gpu_memory_mib < 0:
                # A zero share of a GPU would count it as taken while leaving it fully free.
                raise OvercommitError(
                    f"node {self.spec.nodes[n].name}: a GPU claim must hold > 0 milli, got {p.gpu_milli}"
                )
            fm = self.gpu_free_milli[n]
            gm = self.gpu_free_mem[n]
            if len(gpus) > 1 and len(set(gpus)) != len(gpus):
                raise OvercommitError(f"node {self.spec.nodes[n].name}: GPU listed twice in {gpus}")
            for gi in gpus:
                if not (0 <= gi < self.node_gpus[n]):
                    raise OvercommitError(f"node {self.spec.nodes[n].name}: no GPU {gi}")
                if p.gpu_milli > fm[gi] or p.gpu_memory_mib > gm[gi]:
                    raise OvercommitError(
                        f"node {self.spec.nodes[n].name} GPU {gi}: asks {p.gpu_milli} milli / "
                        f"{p.gpu_memory_mib}MiB, free {int(fm[gi])} / {int(gm[gi])}MiB"
                    )
            full = 0
            for gi in gpus:
                if fm[gi] == MILLI:
                    full += 1
                fm[gi] -= p.gpu_milli
                gm[gi] -= p.gpu_memory_mib
            self.node_full_free[n] -= full
            taken = p.gpu_milli * len(gpus)
            self.node_free_milli[n] -= taken
            self.allocated_milli += taken
        self.free_cpu[n] -= p.cpu_milli
        self.free_mem[n] -= p.memory_mib
        self._node_changed(n)
        for task_listener in self.task_listeners:
            task_listener(p, 1)
        if self._tracking:
            self._undo.append(p)

    def release(self, p: TaskPlacement) -> None:
        """Give ``p`` back: the exact inverse of ``allocate``."""
        n = p.node
        if (
            p.cpu_milli + self.free_cpu[n] > self.cap_cpu[n]
            or p.memory_mib + self.free_mem[n] > self.cap_mem[n]
        ):
            raise OvercommitError(
                f"node {self.spec.nodes[n].name}: release of more than was taken: {p}"
            )
        gpus = p.gpus
        if gpus and self.any_out:
            self._release_gpus_held(p)
        elif gpus:
            fm = self.gpu_free_milli[n]
            gm = self.gpu_free_mem[n]
            cap = self.gpu_cap_mem[n]
            for gi in gpus:
                if fm[gi] + p.gpu_milli > MILLI or gm[gi] + p.gpu_memory_mib > cap[gi]:
                    raise OvercommitError(
                        f"node {self.spec.nodes[n].name} GPU {gi}: release of more than was taken: {p}"
                    )
            full = 0
            for gi in gpus:
                fm[gi] += p.gpu_milli
                gm[gi] += p.gpu_memory_mib
                if fm[gi] == MILLI:
                    full += 1
            self.node_full_free[n] += full
            given = p.gpu_milli * len(gpus)
            self.node_free_milli[n] += given
            self.allocated_milli -= given
        self.free_cpu[n] += p.cpu_milli
        self.free_mem[n] += p.memory_mib
        self._node_changed(n)
        for task_listener in self.task_listeners:
            task_listener(p, -1)

    def _release_gpus_held(self, p: TaskPlacement) -> None:
        """``release``'s GPU part while some GPU is out of service: what an out-of-service
        GPU gets back goes to its hold (it has nothing free), the rest as ``release`` does."""
        n, gpus = p.node, p.gpus
        fm, gm, cap = self.gpu_free_milli[n], self.gpu_free_mem[n], self.gpu_cap_mem[n]
        hm, hg, out = self.gpu_held_milli[n], self.gpu_held_mem[n], self.gpu_out[n]
        for gi in gpus:
            to_m, to_g = (hm, hg) if out[gi] else (fm, gm)
            if to_m[gi] + p.gpu_milli > MILLI or to_g[gi] + p.gpu_memory_mib > cap[gi]:
                raise OvercommitError(
                    f"node {self.spec.nodes[n].name} GPU {gi}: release of more than was taken: {p}"
                )
        full = held = 0
        for gi in gpus:
            to_m, to_g = (hm, hg) if out[gi] else (fm, gm)
            to_m[gi] += p.gpu_milli
            to_g[gi] += p.gpu_memory_mib
            if out[gi]:
                held += p.gpu_milli
            elif fm[gi] == MILLI:
                full += 1
        self.node_full_free[n] += full
        given = p.gpu_milli * len(gpus)
        self.node_free_milli[n] += given - held
        self.allocated_milli -= given

    def _node_changed(self, n: int) -> None:
        f3 = self.node_free3
        f3[n, 0] = self.node_full_free[n]
        f3[n, 1] = self.free_cpu[n]
        f3[n, 2] = self.free_mem[n]
        self.free_score[n] = (
            int(self.node_free_milli[n])
            + self.w_cpu[n] * int(self.free_cpu[n])
            + self.w_mem[n] * int(self.free_mem[n])
        )
        for listener in self.listeners:
            listener(n)

    # ---------------------------------------------------------------- what-if
    def checkpoint(self) -> int:
        """Start (or nest) a what-if; returns a mark for ``rollback``/``commit``."""
        self._tracking += 1
        return len(self._undo)

    def rollback(self, mark: int) -> None:
        """Undo every allocation made since ``mark``, newest first, and end that what-if."""
        while len(self._undo) > mark:
            self.release(self._undo.pop())
        self._end(mark)

    def commit(self, mark: int) -> None:
        """Keep the allocations made since ``mark`` and end that what-if."""
        self._end(mark)

    def _end(self, mark: int) -> None:
        # A nested commit keeps its entries: the enclosing what-if may still roll them back.
        self._tracking -= 1
        if self._tracking == 0:
            self._undo.clear()

    # ---------------------------------------------------------------- read-outs
    def state(self) -> tuple[np.ndarray, ...]:
        """Copies of every mutable array, for tests that compare states exactly."""
        return (
            self.gpu_free_milli.copy(),
            self.gpu_free_mem.copy(),
            self.node_full_free.copy(),
            self.node_free_milli.copy(),
            self.free_cpu.copy(),
            self.free_mem.copy(),
            self.free_score.copy(),
            self.node_free3.copy(),
            np.array([self.allocated_milli]),
            self.gpu_held_milli.copy(),
            self.gpu_held_mem.copy(),
        )

    def active(self) -> np.ndarray:
        """Nodes that hold any allocation."""
        free = self.node_free_milli
        if self.any_out:  # a GPU out of service is not an allocation
            free = free + self.gpu_held_milli.sum(axis=1)
        return (
            (self.free_cpu < self.cap_cpu)
            | (self.free_mem < self.cap_mem)
            | (free < self.node_gpus * MILLI)
        )
