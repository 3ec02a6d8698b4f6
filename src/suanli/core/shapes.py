"""Request shapes, and how many tasks of each waiting shape every node can take, kept exact.

A *shape* is everything about a job that decides whether it fits: its task request, its task
count and its gang minimum. Jobs of one shape fit or fail together.

For every *tracked* shape (one whose job failed to fit since the queue was last empty) the
table keeps how many of its tasks each node can take now (``counts``) and their sum over the
cluster (``total``). A count on a node depends only on that node, so the table listens to the
cluster view and recounts a changed node for all tracked shapes at once (an allocation, a
release, a change of health; recounts wait for the next look, so each changed node is
recounted once). A shape fits exactly when ``total >= need``, so the scheduler never tries a
job that cannot fit, never rescans waiting jobs, and reads a job's per-node counts instead of
computing them. The cost moves to the node changes: one small vectorised expression each, and
nothing at all while no shape is tracked (an empty queue).

Counting uses ``floor((free + 0.5) × (1 / demand))``: equal to ``free // demand`` for integers
(the half keeps a margin of ``0.5 / demand`` from both neighbouring integers, far above float
error at these magnitudes) and infinite for a zero demand, so no resource needs a special case;
the task limit then makes every count finite. ``ClusterView.fit_counts`` is the reference the
tests hold this to.
"""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI, TaskRequest
from suanli.core.view import ClusterView

ShapeKey = tuple[TaskRequest, int, int]
"""(task request, tasks, fewest tasks to start with)."""


def _inv(demand: int) -> float:
    return 1.0 / demand if demand else np.inf


class ShapeTable:
    """Per-shape demands and exact per-node fit counts of the tracked shapes."""

    def __init__(self, view: ClusterView, capacity: int = 64) -> None:
        self.view = view
        self.keys: list[ShapeKey] = []
        self.ids: dict[ShapeKey, int] = {}
        cap = capacity
        self.need = np.zeros(cap, np.int64)
        self._tasks = np.zeros(cap)
        # 1 / demand per task (whole GPUs, CPU, memory, a fractional GPU's share and memory);
        # inf where the demand is 0.
        self._inv_g = np.zeros(cap)
        self._inv_c = np.zeros(cap)
        self._inv_m = np.zeros(cap)
        self._inv_milli = np.zeros(cap)
        self._inv_gmem = np.zeros(cap)
        self._gpu_slots = view.gpu_slots
        self._ones_gpu = np.ones(view.gpu_slots)
        self._constrained = np.zeros(cap, bool)  # some node can never hold the shape
        self._pos: dict[int, int] = {}
        self._cKT = np.zeros((view.n_nodes, 16))
        self._ctotal = np.zeros(16)
        self._dirty: dict[int, None] = {}  # nodes changed since the last flush, in order
        self.began_to_fit: list[int] = []
        """Tracked shapes that went from not fitting to fitting (filled by ``flush``; the
        scheduler drains it)."""
        self._set_columns(np.zeros(0, np.int64))
        view.listeners.append(self.node_changed)

    def __len__(self) -> int:
        return len(self.keys)

    def id_of(self, key: ShapeKey) -> int:
        """The shape id of ``key``, adding it on first sight."""
        sid = self.ids.get(key)
        if sid is not None:
            return sid
        sid = len(self.keys)
        if sid == len(self.need):
            self._grow()
        task, tasks, need = key
        self.keys.append(key)
        self.ids[key] = sid
        self._tasks[sid] = tasks
        self.need[sid] = need
        self._constrained[sid] = not self.view.task_ok(task).all()
        whole = task.gpus if task.gpus and task.gpu_milli >= MILLI else 0
        frac = task.gpus == 1 and task.gpu_milli < MILLI
        self._inv_g[sid] = _inv(whole)
        self._inv_c[sid] = _inv(task.cpu_milli)
        self._inv_m[sid] = _inv(task.memory_mib)
        self._inv_milli[sid] = _inv(task.gpu_milli) if frac else np.inf
        self._inv_gmem[sid] = _inv(task.gpu_memory_mib) if frac else np.inf
        return sid

    # ---------------------------------------------------------------- tracking
    # Tracked shapes live in columns 0..T-1 of node-major arrays: ``_cKT[node, column]`` is a
    # count, ``_ctotal[column]`` a shape's total. A node's recount then reads and writes one
    # contiguous row, with no gathers. ``_pos`` maps a shape id to its column.

    def track(self, sid: int, k: np.ndarray) -> None:
        """Start keeping shape ``sid``'s counts exact, from ``k``, its per-node counts now."""
        pos = self._pos.get(sid)
        if pos is None:
            pos = len(self._ids)
            if pos == self._cKT.shape[1]:
                grown = np.zeros((self._cKT.shape[0], 2 * pos))
                grown[:, :pos] = self._cKT
                self._cKT = grown
                self._ctotal = np.concatenate((self._ctotal, np.zeros(pos)))
            self._pos[sid] = pos
            self._set_columns(np.append(self._ids, sid), np.append(self._c_idle, False))
        self._cKT[:, pos] = k
        self._ctotal[pos] = np.count_nonzero(k) if k.dtype == bool else k.sum()

    def untrack_all(self) -> None:
        """Stop keeping any counts (nothing waits any more)."""
        self._pos.clear()
        self._dirty.clear()
        self._set_columns(np.zeros(0, np.int64))

    def set_idle(self, sid: int, idle: bool) -> None:
        """Shape ``sid`` has no job waiting (``idle``) or has one again.

        Idle shapes are dropped from tracking in batches, once they are half of the tracked
        ones: a shape empties and refills often on a busy queue, and rebuilding the columns
        each time would cost more than counting an idle shape for a while.
        """
        pos = self._pos.get(sid)
        if pos is None or self._c_idle[pos] == idle:
            return
        self._c_idle[pos] = idle
        self._n_idle += 1 if idle else -1
        if idle and 2 * self._n_idle > len(self._ids):
            # Pending recounts stay pending: they apply to the kept columns as they are.
            keep = (~self._c_idle).nonzero()[0]
            self._cKT[:, : len(keep)] = self._cKT[:, keep]
            self._ctotal[: len(keep)] = self._ctotal[keep]
            ids = self._ids[keep]
            self._pos = {int(s): i for i, s in enumerate(ids)}
            self._set_columns(ids)

    def is_tracked(self, sid: int) -> bool:
        return sid in self._pos

    def waiting_tracked(self) -> bool:
        """Is any tracked shape waiting (not idle)? Only those can be woken by a recount."""
        return len(self._ids) > self._n_idle

    def fits(self, sid: int) -> bool:
        """Can the cluster take the gang minimum of a tracked shape now?"""
        if self._dirty:
            self.flush()
        pos = self._pos[sid]
        return bool(self._ctotal[pos] >= self._c_need[pos])

    def counts(self, sid: int) -> np.ndarray:
        """Per-node counts of a tracked shape (int64, a copy), exact after ``fits``."""
        return self._cKT[:, self._pos[sid]].astype(np.int64)

    def largest(self, sid: int) -> int:
        """The most tasks of a tracked shape any one node can take, exact after ``fits``."""
        return int(self._cKT[:, self._pos[sid]].max(initial=0))

    def total(self, sid: int) -> int:
        """Tasks of a tracked shape the whole cluster can take, exact after ``fits``."""
        return int(self._ctotal[self._pos[sid]])

    def node_changed(self, n: int) -> None:
        """The view's listener: node ``n`` changed; it is recounted at the next ``flush``.

        Deferring coalesces the changes of one node between two looks (the tasks of a gang,
        a release followed by an admission) into one recount. Nothing is tracked: nothing to do
        (``track`` takes a shape's whole row afresh).
        """
        if self._pos:
            self._dirty[n] = None

    def flush(self) -> None:
        """Recount the changed nodes for the tracked shapes; note those that began to fit."""
        t = len(self._ids)
        total = self._ctotal[:t]
        need = self._c_need
        for n in self._dirty:
            col = self._counts_nodes(slice(n, n + 1))[0]
            row = self._cKT[n, :t]
            after = total + (col - row)
            row[:] = col
            self._note_rises(total, after, need)
        self._dirty.clear()

    def _note_rises(self, total: np.ndarray, after: np.ndarray, need: np.ndarray) -> None:
        rose = (after >= need) & (total < need)
        total[:] = after
        if np.count_nonzero(rose):
            self.began_to_fit.extend(self._ids[rose].tolist())

    def _set_columns(self, ids: np.ndarray, idle: np.ndarray | None = None) -> None:
        """Make ``ids`` the tracked shapes, in column order, and gather their demands."""
        self._ids = ids
        self._c_idle = np.zeros(len(ids), bool) if idle is None else idle
        self._n_idle = int(np.count_nonzero(self._c_idle))
        self._c_need = self.need[ids].astype(np.float64)
        self._c_tasks = self._tasks[ids]
        g = self._gpu_slots
        inv = np.empty((len(ids), 3 + 2 * g))
        inv[:, 0] = self._inv_g[ids]
        inv[:, 1] = self._inv_c[ids]
        inv[:, 2] = self._inv_m[ids]
        inv[:, 3 : 3 + g] = self._inv_milli[ids][:, None]
        inv[:, 3 + g :] = self._inv_gmem[ids][:, None]
        self._c_inv = inv
        self._c_inv3 = inv[:, :3].copy()
        self._c_frac = bool(np.isfinite(self._inv_milli[ids]).any())
        self._c_allowed = (
            np.stack([self.view.task_ok(self.keys[s][0]) for s in ids], axis=1)
            if self._constrained[ids].any()
            else None
        )

    def _counts_nodes(self, nodes: slice | np.ndarray) -> np.ndarray:
        """Fit counts of the tracked shapes on ``nodes`` now: (nodes × tracked shapes), floats.

        One product of the nodes' free capacity (whole GPUs, CPU, memory, then each GPU's free
        share and memory) with the tracked shapes' inverse demands (``_c_inv``), then the
        minimum over the node-level columns and, per GPU, over share and memory, summed over
        GPUs. Without a fractional shape tracked, the node-level columns are all it takes. A
        slice of one node reads the arrays without copying them: the recount's common case.
        """
        v = self.view
        if self._c_frac:
            free = 0.5 + np.concatenate(
                (v.node_free3[nodes], v.gpu_free_milli[nodes], v.gpu_free_mem[nodes]), axis=1
            )
            prod = free[:, None, :] * self._c_inv
        else:
            prod = (v.node_free3[nodes] + 0.5)[:, None, :] * self._c_inv3
        k = np.minimum(prod[..., 0], prod[..., 1])
        np.minimum(k, prod[..., 2], out=k)
        if self._c_frac:
            g = self._gpu_slots
            per_gpu = np.minimum(prod[..., 3 : 3 + g], prod[..., 3 + g :])
            np.floor(per_gpu, out=per_gpu)
            np.minimum(k, per_gpu @ self._ones_gpu, out=k)
        np.minimum(k, self._c_tasks, out=k)
        np.floor(k, out=k)
        if self._c_allowed is not None:
            k *= self._c_allowed[nodes]
        if not v.all_healthy:
            k *= v.healthy[nodes][:, None]
        return k

    def _grow(self) -> None:
        for name in (
            "need",
            "_tasks",
            "_inv_g",
            "_inv_c",
            "_inv_m",
            "_inv_milli",
            "_inv_gmem",
            "_constrained",
        ):
            a = getattr(self, name)
            b = np.zeros(len(a) * 2, a.dtype)
            b[: len(a)] = a
            setattr(self, name, b)
