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


_NONE = np.zeros(0, np.int64)


def _inv(demand: int) -> float:
    return 1.0 / demand if demand else np.inf


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
        self.ready = np.zeros(cap, bool)  # unblocked by a refresh, not yet tried
        self.n_ready = 0
        self.bound = np.zeros(cap, np.int64)
        self._allowed = np.zeros((cap, view.n_nodes), bool)
        self._k = np.zeros((cap, view.n_nodes), np.int32)
        self._frac = np.zeros(cap, bool)
        # 1 / demand per task (whole GPUs, CPU, memory, a fractional GPU's share and memory);
        # inf where the demand is 0.
        self._inv_g = np.zeros(cap)
        self._inv_c = np.zeros(cap)
        self._inv_m = np.zeros(cap)
        self._ones_gpu = np.ones(view.gpu_slots)
        self._inv_milli = np.zeros(cap)
        self._inv_gmem = np.zeros(cap)
        self._n_constrained = 0
        self._n_frac = 0
        self._gained: list[int] = []  # nodes gained since the last refresh_all
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
        self._n_constrained += bool(task.gpu_models)
        whole = task.gpus if task.gpus and task.gpu_milli >= MILLI else 0
        frac = task.gpus == 1 and task.gpu_milli < MILLI
        self._frac[sid] = frac
        self._n_frac += frac
        self._inv_g[sid] = _inv(whole)
        self._inv_c[sid] = _inv(task.cpu_milli)
        self._inv_m[sid] = _inv(task.memory_mib)
        self._inv_milli[sid] = _inv(task.gpu_milli) if frac else np.inf
        self._inv_gmem[sid] = _inv(task.gpu_memory_mib) if frac else np.inf
        return sid

    def block(self, sid: int, k: np.ndarray) -> None:
        """Record that shape ``sid`` failed with per-node fit counts ``k`` (counted now)."""
        self.blocked[sid] = True
        self._k[sid] = k
        self.bound[sid] = int(np.count_nonzero(k)) if k.dtype == bool else int(k.sum())
        self._synced[sid] = self.epoch

    def gained(self, nodes: list[int]) -> None:
        """``nodes`` may have more free capacity than before (a release, a node back to health)."""
        self.epoch += 1
        self.node_epoch[nodes] = self.epoch
        self._gained.extend(nodes)
        if len(self._gained) > 4 * len(self.node_epoch):  # only strict queues never drain it
            self._gained = list(set(self._gained))

    def refresh_all(self) -> np.ndarray:
        """``refresh`` for every blocked shape, on the nodes that gained since the last call.

        Every blocked shape was counted either at the last ``refresh_all`` or later, when it
        failed (exactly, then), so the nodes gained since the last call are all that can have
        changed in its favour: no scan over all nodes is needed.
        """
        if not self._gained:
            return _NONE
        nodes = np.array(list(dict.fromkeys(self._gained)))
        self._gained.clear()
        sids = self.blocked_ids()
        if not len(sids):
            return sids
        self._synced[sids] = self.epoch
        return self._recount(sids, nodes)

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
        return self._recount(sids, nodes)

    def _recount(self, sids: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        rows = sids[:, None]
        fresh = self._counts(sids, nodes)
        delta = fresh - self._k[rows, nodes]
        self.bound[sids] += delta[:, 0] if len(nodes) == 1 else delta.sum(axis=1)
        self._k[rows, nodes] = fresh
        ready = sids[self.bound[sids] >= self.need[sids]]
        self.blocked[ready] = False
        self.ready[ready] = True  # they were blocked, so none of them was ready before
        self.n_ready += len(ready)
        return ready

    def tried(self, sid: int) -> None:
        """Shape ``sid`` is being tried: it leaves the ready set."""
        if self.ready[sid]:
            self.ready[sid] = False
            self.n_ready -= 1

    def consumed(self, nodes: list[int]) -> None:
        """Capacity was just taken on ``nodes``: re-block ready shapes that no longer fit.

        Without this, one release that makes room for one job readies every shape that fits the
        freed room, and all but the first would be tried and fail, one full attempt each. Their
        counts on ``nodes`` become exact again, so their bounds stay valid.
        """
        sids = self.ready[: len(self.keys)].nonzero()[0]
        if not len(sids):
            return
        nodes_a = np.array(list(dict.fromkeys(nodes)))
        rows = sids[:, None]
        fresh = self._counts(sids, nodes_a)
        delta = fresh - self._k[rows, nodes_a]
        self.bound[sids] += delta[:, 0] if len(nodes_a) == 1 else delta.sum(axis=1)
        self._k[rows, nodes_a] = fresh
        lost = sids[self.bound[sids] < self.need[sids]]
        if len(lost):
            self.blocked[lost] = True
            self.ready[lost] = False
            self.n_ready -= len(lost)

    def _counts(self, sids: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Fit counts of shapes ``sids`` on ``nodes`` now: a (shapes × nodes) int32 array."""
        cols = [self._counts_node(int(n))[sids] for n in nodes]
        return (cols[0][:, None] if len(cols) == 1 else np.stack(cols, axis=1)).astype(np.int32)

    def _counts_node(self, n: int) -> np.ndarray:
        """Fit counts of every shape on node ``n`` now (float array over all shape ids).

        ``floor((free + 0.5) × (1 / demand))`` is ``free // demand`` for integers (the half
        keeps a margin of ``0.5 / demand`` from both neighbouring integers, far above float
        error at these magnitudes) and infinity for a zero demand, so no resource needs a
        special case; the task limit then makes every count finite. Computing all shapes at
        once costs no more than a subset (a few dozen elements) and needs no gathers.
        """
        v = self.view
        S = len(self.keys)
        free_full, free_cpu, free_mem = v.node_free3[n].tolist()
        k = np.minimum(self._inv_g[:S] * (free_full + 0.5), self._inv_c[:S] * (free_cpu + 0.5))
        np.minimum(k, self._inv_m[:S] * (free_mem + 0.5), out=k)
        if self._n_frac:
            fm = np.multiply.outer(self._inv_milli[:S], v.gpu_free_milli[n] + 0.5)
            gm = np.multiply.outer(self._inv_gmem[:S], v.gpu_free_mem[n] + 0.5)
            np.minimum(fm, gm, out=fm)
            np.floor(fm, out=fm)
            np.minimum(k, fm.dot(self._ones_gpu), out=k)
        np.floor(k, out=k)
        np.minimum(k, self._tasks[:S], out=k)
        if self._n_constrained or not v.healthy[n]:
            k *= self._allowed[:S, n] & v.healthy[n]
        return k

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
            "ready",
            "bound",
            "_synced",
            "_frac",
            "_inv_milli",
            "_inv_g",
            "_inv_c",
            "_inv_m",
            "_inv_gmem",
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
