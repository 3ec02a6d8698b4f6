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
computing them. The cost moves to the node changes: a compiled loop (Numba) over the changed
nodes and the tracked shapes, a few hundred floating-point operations per node, and nothing at
all while no shape is tracked (an empty queue).

Counting uses ``floor((free + 0.5) × (1 / demand))``: equal to ``free // demand`` for integers
(the half keeps a margin of ``0.5 / demand`` from both neighbouring integers, far above float
error at these magnitudes) and infinite for a zero demand, so no resource needs a special case;
the task limit then makes every count finite. ``ClusterView.fit_counts`` is the reference the
tests hold this to.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from suanli.core.model import MILLI, TaskRequest
from suanli.core.view import ClusterView

ShapeKey = tuple[TaskRequest, int, int]
"""(task request, tasks, fewest tasks to start with)."""


def _inv(demand: int) -> float:
    return 1.0 / demand if demand else np.inf


_NO_MASK = np.ones((1, 1), dtype=np.bool_)


@njit(cache=True, nogil=True)
def _recount(  # type: ignore[no-untyped-def]
    dirty, free3, free_milli, free_gmem, healthy, all_healthy,
    inv, frac, tasks, allowed, constrained, counts, total, need, t,
):  # fmt: skip
    """Recount ``dirty`` nodes (in order) for tracked columns ``0..t-1``, in place.

    A count is the minimum over the node-level demands (whole GPUs, CPU, memory: columns 0–2 of
    ``inv``) and, with a fractional shape tracked (``frac``), the sum over GPUs of each GPU's
    own count (share and memory: columns ``3..3+G`` and ``3+G..``), capped at the shape's task
    count and floored; zero where the shape may never run or the node is unhealthy. Updates
    ``counts`` rows and ``total`` node by node and returns, in that order, the columns whose
    total went from below ``need`` to at least it.
    """
    g_slots = free_milli.shape[1]
    rose = np.empty(dirty.shape[0] * t, dtype=np.int64)
    n_rose = 0
    for i in range(dirty.shape[0]):
        n = dirty[i]
        f0 = free3[n, 0] + 0.5
        f1 = free3[n, 1] + 0.5
        f2 = free3[n, 2] + 0.5
        ok = all_healthy or healthy[n]
        for c in range(t):
            k = min(f0 * inv[c, 0], f1 * inv[c, 1], f2 * inv[c, 2])
            if frac:
                s = 0.0
                for g in range(g_slots):
                    s += np.floor(
                        min((free_milli[n, g] + 0.5) * inv[c, 3 + g],
                            (free_gmem[n, g] + 0.5) * inv[c, 3 + g_slots + g])
                    )  # fmt: skip
                k = min(k, s)
            k = np.floor(min(k, tasks[c]))
            if (constrained and not allowed[n, c]) or not ok:
                k = 0.0
            before = total[c]
            after = before + (k - counts[n, c])
            counts[n, c] = k
            total[c] = after
            if after >= need[c] and before < need[c]:
                rose[n_rose] = c
                n_rose += 1
    return rose[:n_rose]


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
        if t and self._dirty:
            v = self.view
            allowed = self._c_allowed
            rose = _recount(
                np.fromiter(self._dirty, np.int64, len(self._dirty)),
                v.node_free3, v.gpu_free_milli, v.gpu_free_mem, v.healthy, v.all_healthy,
                self._c_inv, self._c_frac, self._c_tasks,
                _NO_MASK if allowed is None else allowed, allowed is not None,
                self._cKT, self._ctotal, self._c_need, t,
            )  # fmt: skip
            if len(rose):
                self.began_to_fit.extend(self._ids[rose].tolist())
        self._dirty.clear()

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
        self._c_frac = bool(np.isfinite(self._inv_milli[ids]).any())
        self._c_allowed = (
            np.stack([self.view.task_ok(self.keys[s][0]) for s in ids], axis=1)
            if self._constrained[ids].any()
            else None
        )

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
