"""Request shapes and what the scheduler remembers about blocked ones.

A *shape* is everything about a job that decides whether it fits: its task request, its task
count and its gang minimum. Two jobs of one shape fit or fail together, and free capacity only
shrinks between releases, so once a shape fails it stays failed until something is released.
That is what lets a cycle on a saturated queue cost O(shapes tried), not O(pending jobs).

For each blocked shape the table keeps, per node, an upper bound on how many of its tasks the
node could take (exact when the shape failed; capacity elsewhere only shrinks afterwards). Each
capacity gain stamps its nodes with a new epoch; refreshing a shape recounts only the nodes
stamped since the shape was last counted (one vectorised expression over those shapes × those
nodes), and a shape is worth retrying once its bound reaches its need.
"""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI, TaskRequest
from suanli.core.view import ClusterView

ShapeKey = tuple[TaskRequest, int, int]
"""(task request, tasks, fewest tasks to start with)."""


class ShapeTable:
    """Dense per-shape arrays (grown by doubling) plus the blocked-shape bounds."""

    def __init__(self, view: ClusterView, capacity: int = 64) -> None:
        self.view = view
        self.keys: list[ShapeKey] = []
        self.ids: dict[ShapeKey, int] = {}
        cap = capacity
        self._gpus = np.zeros(cap, np.int64)
        self._milli = np.zeros(cap, np.int64)
        self._gmem = np.zeros(cap, np.int64)
        self._cpu = np.zeros(cap, np.int64)
        self._mem = np.zeros(cap, np.int64)
        self._tasks = np.zeros(cap, np.int64)
        self.need = np.zeros(cap, np.int64)
        self.blocked = np.zeros(cap, bool)
        self.bound = np.zeros(cap, np.int64)
        self._allowed = np.zeros((cap, view.n_nodes), bool)
        self._k = np.zeros((cap, view.n_nodes), np.int32)
        self._synced = np.zeros(cap, np.int64)  # epoch at which each shape was last counted
        self.epoch = 0
        self.node_epoch = np.zeros(view.n_nodes, np.int64)  # epoch of each node's last gain

    def __len__(self) -> int:
        return len(self.keys)

    def id_of(self, key: ShapeKey) -> int:
        """The shape id of ``key``, adding it on first sight."""
        sid = self.ids.get(key)
        if sid is not None:
            return sid
        sid = len(self.keys)
        if sid == len(self._gpus):
            self._grow()
        task, tasks, need = key
        self.keys.append(key)
        self.ids[key] = sid
        self._gpus[sid] = task.gpus
        self._milli[sid] = task.gpu_milli if task.gpus else MILLI
        self._gmem[sid] = task.gpu_memory_mib
        self._cpu[sid] = task.cpu_milli
        self._mem[sid] = task.memory_mib
        self._tasks[sid] = tasks
        self.need[sid] = need
        self._allowed[sid] = self.view.model_ok(task.gpu_models)
        return sid

    def block(self, sid: int, k: np.ndarray) -> None:
        """Record that shape ``sid`` failed with per-node fit counts ``k`` (counted now)."""
        self.blocked[sid] = True
        self._k[sid] = k
        self.bound[sid] = int(k.sum())
        self._synced[sid] = self.epoch

    def gained(self, nodes: list[int]) -> None:
        """``nodes`` may have more free capacity than before (a release, a node back to health)."""
        self.epoch += 1
        self.node_epoch[nodes] = self.epoch

    def blocked_ids(self) -> np.ndarray:
        return self.blocked[: len(self.keys)].nonzero()[0]

    def refresh(self, sids: np.ndarray) -> np.ndarray:
        """Recount blocked shapes ``sids`` on the nodes that gained since; return those now worth retrying.

        Recounting a node gives its exact count now, which is always a valid bound, so one set
        of nodes (those newer than the oldest of the shapes' counts) serves all of them.
        """
        if not len(sids):
            return sids
        since = self._synced[sids].min()
        self._synced[sids] = self.epoch
        nodes = (self.node_epoch > since).nonzero()[0]
        if not len(nodes):
            return sids[:0]
        rows = sids[:, None]
        fresh = self._counts(sids, nodes)
        old = self._k[rows, nodes]
        self.bound[sids] += (fresh - old).sum(axis=1)
        self._k[rows, nodes] = fresh
        ready = sids[self.bound[sids] >= self.need[sids]]
        self.blocked[ready] = False
        return ready

    def _counts(self, sids: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Fit counts of shapes ``sids`` on ``nodes`` now: a (shapes × nodes) array."""
        v = self.view
        g = self._gpus[sids][:, None]
        milli = self._milli[sids]
        gmem = self._gmem[sids]
        limit = self._tasks[sids][:, None]
        whole = v.node_full_free[nodes][None, :] // np.maximum(g, 1)
        k = np.where(g == 0, limit, whole)
        frac = (milli < MILLI) & (self._gpus[sids] == 1)
        if frac.any():
            fs = frac.nonzero()[0]
            fm = v.gpu_free_milli[nodes][None, :, :] // milli[fs][:, None, None]
            gm = v.gpu_free_mem[nodes][None, :, :] // np.maximum(gmem[fs], 1)[:, None, None]
            per_gpu = np.where(gmem[fs][:, None, None] > 0, np.minimum(fm, gm), fm)
            k[fs] = per_gpu.sum(axis=2)
        cpu = self._cpu[sids][:, None]
        mem = self._mem[sids][:, None]
        k = np.where(cpu > 0, np.minimum(k, v.free_cpu[nodes][None, :] // np.maximum(cpu, 1)), k)
        k = np.where(mem > 0, np.minimum(k, v.free_mem[nodes][None, :] // np.maximum(mem, 1)), k)
        k = np.minimum(k, limit)
        ok = self._allowed[sids[:, None], nodes] & v.healthy[nodes][None, :]
        return np.where(ok, k, 0).astype(np.int32)

    def _grow(self) -> None:
        for name in (
            "_gpus",
            "_milli",
            "_gmem",
            "_cpu",
            "_mem",
            "_tasks",
            "need",
            "blocked",
            "bound",
            "_synced",
        ):
            a = getattr(self, name)
            b = np.zeros(len(a) * 2, a.dtype)
            b[: len(a)] = a
            setattr(self, name, b)
        for name in ("_allowed", "_k"):
            a = getattr(self, name)
            b = np.zeros((a.shape[0] * 2, a.shape[1]), a.dtype)
            b[: a.shape[0]] = a
            setattr(self, name, b)
