"""Conservative backfill: a reservation for every pending job up to a depth.

Mu'alem and Feitelson's "conservative" backfilling (IEEE TPDS 2001), bounded the way Slurm's
backfill plugin bounds it (``bf_max_job_test``, 100 jobs by default). The plan is made on a
*profile* of the cluster's future free capacity: the view now, then running jobs ending at
their estimates (``Job.estimate``, else ``DEFAULT_ESTIMATE``; a job past its estimate is
expected to end at once; with ``runtime/oracle``, ``Job.runtime``, a reference only). The
first ``depth``
pending jobs (the *window*) are taken in queue order (the static order of
``QueueOrder.key``):

* a job whose whole expected run fits on the profile from now on starts now. What earlier
  reservations hold before its run would end is taken off the view for its placement (a
  what-if, undone at once), so the placement policy picks nodes and GPUs among the rest and
  no earlier reservation moves;
* any other gets a reservation at the earliest time its whole run fits on the profile, on
  nodes (and tasks per node) counted with the view's fit rules: one node if one can hold
  every task (the least roomy such node, ties to the lowest index), else the roomiest first;
  GPUs as the default ``Placement.pick_gpus`` takes them (whole GPUs lowest index first, a
  share on the fullest GPU it fits). It holds them for its expected run.

A window is judged on the element-wise minimum of the free capacity over its time, per GPU:
a job fits if the same GPUs (and CPU and memory) are free throughout, which is what running
there needs. A job may start ahead of an earlier job of its own lane (same shape and queue;
elsewhere in the scheduler a lane starts in queue order), as conservative backfill lets a
short job pass a long one. Jobs whose queue's quota holds them back get no reservation (they
wait for quota, not capacity). Beyond the window a job (the head of its lane) may start only
if its whole expected run fits around every reservation; it gets none of its own. A job that
fits now but would touch a reservation is skipped with ``BehindReservation(job, until)``
naming the reservation that starts first among those it would touch; a lane's first waiting
job says why, once per change of reason.

What holds: with true runtimes (``runtime/oracle``) no reserved job starts later than its first
reservation, when jobs start with all their tasks on GPUs of effective speed 1
(``ClusterView.node_speed``: a trace's native GPUs, or speed-1.0 GPUs under the reference
basis; ``suanli.core.speed``) and the placement takes GPUs inside a node as the plan does
(best-fit; first-fit for whole GPUs). A placement that
picks other GPUs (random, worst-fit, FGD) may take GPUs a later job's reservation counted on;
that reservation then moves when the plan is made again. With preemption, a job that evicts
others is placed without regard to reservations.

When it is planned: afresh at a cycle after capacity changed on the view (a job ended or
started), running jobs were evicted, a job joined or left the window other than at its end,
or time passed a moment the plan counted on (a running job past its expected end is
counted on to end at once: any later cycle plans again); a job that joins at the end is
planned for on top of the plan as it is. Otherwise the plan stands: nothing it rests on moved (a property
test holds the two to the same decisions, with true runtimes).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from suanli.core.backfill import DEFAULT_DEPTH, RunningByEnd, estimated_end, task_params
from suanli.core.conservative_plan import (
    _DONE,
    _GROW_EVENTS,
    _GROW_PIECES,
    _HELD_BACK,
    _NO_STATUS,
    _START,
    _build_all,
    _build_node,
    _holder,
    _link,
    _plan,
    _running_events,
    _shadow,
    _start_now,
)
from suanli.core.decisions import Admit, BehindReservation, Decision, Skip
from suanli.core.lanes import Lane
from suanli.core.model import Job, TaskRequest
from suanli.core.policies.runtime_estimate import UserEstimate
from suanli.core.registry import register
from suanli.core.running import Running
from suanli.core.seams import HELD, Handle, Held, RuntimeEstimator
from suanli.core.view import ClusterView, TaskPlacement


class _Profile:
    """The profile's arrays (see the comment above ``_link``), grown as needed."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.n = view.n_nodes
        self.g = view.gpu_slots
        self.now = 0.0
        self._pieces(16)
        self._events(1024)
        self.counters = np.zeros(2, np.int64)  # events, reservations
        self.r_until = np.zeros(128, np.float64)
        self.r_win = np.zeros(128, np.int64)
        self.ic = np.zeros((1, self.n, 16), np.int32)
        self.ic_ok = np.zeros((1, self.n), np.bool_)
        self.runs = np.zeros((1, self.n, 16, 2), np.int32)
        self.n_runs = np.zeros((1, self.n), np.int32)

    @property
    def V(self) -> tuple[np.ndarray, ...]:  # noqa: N802 (the compiled code's names)
        v = self.view
        return (v.gpu_free_milli, v.gpu_free_mem, v.free_cpu, v.free_mem, v.gpu_cap_mem, v.healthy)

    @property
    def P(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (
            self.p_n, self.p_time, self.p_fm, self.p_gm, self.p_cpu, self.p_mem, self.p_full,
            self.p_mask,
        )  # fmt: skip

    @property
    def E(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (
            self.e_time, self.e_node, self.e_sign, self.e_fm, self.e_gm, self.e_cpu, self.e_mem,
            self.e_res, self.e_next, self.n_first,
        )  # fmt: skip

    @property
    def C(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (self.ic, self.ic_ok, self.runs, self.n_runs)

    def _pieces(self, k: int) -> None:
        n, g = self.n, self.g
        self.p_n = np.ones(n, np.int64)
        self.p_time = np.zeros((n, k), np.float64)
        self.p_fm = np.zeros((n, k, g), np.int64)
        self.p_gm = np.zeros((n, k, g), np.int64)
        self.p_cpu = np.zeros((n, k), np.int64)
        self.p_mem = np.zeros((n, k), np.int64)
        self.p_full = np.zeros((n, k), np.int64)
        self.p_mask = np.zeros((n, k), np.int64)

    def _events(self, e: int) -> None:
        g = self.g
        self.e_time = np.zeros(e, np.float64)
        self.e_node = np.zeros(e, np.int64)
        self.e_sign = np.zeros(e, np.int64)
        self.e_fm = np.zeros((e, g), np.int64)
        self.e_gm = np.zeros((e, g), np.int64)
        self.e_cpu = np.zeros(e, np.int64)
        self.e_mem = np.zeros(e, np.int64)
        self.e_res = np.zeros(e, np.int64)
        self.e_next = np.zeros(e, np.int64)
        self.n_first = np.full(self.n, -1, np.int64)

    def shapes(self, count: int) -> None:
        """Room in the piece-count cache for ``count`` shapes, all stale."""
        k = self.p_time.shape[1]
        if self.ic.shape[0] < count or self.ic.shape[2] != k:
            rows = max(count + 16, self.ic.shape[0])  # piece counts fit int32 easily
            self.ic = np.zeros((rows, self.n, k), np.int32)
            self.ic_ok = np.zeros((rows, self.n), np.bool_)
            self.runs = np.zeros((rows, self.n, k, 2), np.int32)
            self.n_runs = np.zeros((rows, self.n), np.int32)
        else:
            self.ic_ok[:] = False

    def grow(self, code: int) -> None:
        if code == _GROW_PIECES:
            self._pieces(2 * self.p_time.shape[1])
            self.build_all()
        elif code == _GROW_EVENTS:
            self.ensure_events(2 * len(self.e_time))
        else:
            for name in ("r_until", "r_win"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros_like(a))))

    def ensure_events(self, size: int) -> None:
        if size <= len(self.e_time):
            return
        names = ("e_time", "e_node", "e_sign", "e_fm", "e_gm", "e_cpu", "e_mem", "e_res")
        old = {k: getattr(self, k) for k in names}
        ne = int(self.counters[0])
        self._events(max(size, 2 * len(self.e_time)))
        for k, a in old.items():
            getattr(self, k)[:ne] = a[:ne]
        _link(ne, self.E)

    def reset(self, now: float, by_end: RunningByEnd, keep_holds: bool) -> None:
        """Rebuild from the view and the running jobs, keeping the reservations' holds (or
        dropping every reservation)."""
        self.now = now
        ne = int(self.counters[0])
        if keep_holds:
            held = np.flatnonzero(self.e_res[:ne] >= 0)
            for k in ("e_time", "e_node", "e_sign", "e_fm", "e_gm", "e_cpu", "e_mem", "e_res"):
                a = getattr(self, k)
                a[: len(held)] = a[held]
            ne = len(held)
        else:
            ne = 0
            self.counters[1] = 0
        self.counters[0] = ne
        self.ensure_events(ne + by_end.n_tasks)
        self.counters[0] = _running_events(
            by_end.order, len(by_end), by_end.j_t0, by_end.j_t1, by_end.j_end, by_end.t_node,
            by_end.t_milli, by_end.t_gmem, by_end.t_cpu, by_end.t_mem, by_end.t_gpus, now, ne,
            self.E,
        )  # fmt: skip
        self.build_all()

    def build_all(self) -> None:
        while not _build_all(self.now, int(self.counters[0]), self.V, self.E, self.P):
            self._pieces(2 * self.p_time.shape[1])
        self.shapes(self.ic.shape[0])

    def add_running(self, r: Running, end: float) -> None:
        """``r`` started now (it is on the view): its tasks come back at ``end``."""
        tasks = r.placement.tasks
        ne = int(self.counters[0])
        self.ensure_events(ne + len(tasks))
        t = max(end, self.now)
        for tp in tasks:
            e = ne
            ne += 1
            self.e_time[e] = t
            self.e_node[e] = tp.node
            self.e_sign[e] = 1
            self.e_fm[e] = 0
            self.e_gm[e] = 0
            for gi in tp.gpus:
                self.e_fm[e, gi] = tp.gpu_milli
                self.e_gm[e, gi] = tp.gpu_memory_mib
            self.e_cpu[e] = tp.cpu_milli
            self.e_mem[e] = tp.memory_mib
            self.e_res[e] = -1
            self.e_next[e] = self.n_first[tp.node]
            self.n_first[tp.node] = e
        self.counters[0] = ne
        V, E, P = self.V, self.E, self.P  # noqa: N806
        for x in dict.fromkeys(tp.node for tp in tasks):
            if not _build_node(x, self.now, V, E, P):
                self._pieces(2 * self.p_time.shape[1])
                self.build_all()
                return
            self.ic_ok[:, x] = False

    def next_change(self) -> float:
        """The earliest event still ahead of the profile's now (inf if none); just after now
        while a running job is past its expected end: the plan counts on it ending at once,
        a moment that moves with the clock, so any later cycle must plan again."""
        ne = int(self.counters[0])
        t = self.e_time[:ne]
        if bool(((t <= self.now) & (self.e_res[:ne] < 0)).any()):
            return float(np.nextafter(self.now, np.inf))
        ahead = t[t > self.now]
        return float(ahead.min()) if len(ahead) else float("inf")


@register("backfill", "conservative")
class Conservative:
    """Conservative: a reservation for each of the first 100 pending jobs (Slurm's bf_max_job_test)."""

    needs_running = True
    needs_order = False
    gates = True

    def __init__(self, runtime: RuntimeEstimator | None = None, depth: int = DEFAULT_DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"backfill depth must be >= 1, got {depth}")
        self.runtime = runtime if runtime is not None else UserEstimate()
        self.depth = depth

    def bind(self, h: Handle) -> None:
        """State between cycles: the queue in order, the profile, and the plan over the
        window of the first ``depth`` pending jobs (see the module docstring)."""
        self.h = h
        view = h.view
        self.view = view
        self.by_end = RunningByEnd(view, self.runtime)
        self.profile = _Profile(view)
        view.listeners.append(self._node_changed)
        self._changes = 0  # node changes on the view so far
        # The queue: pending (key, job id), sorted; entries of jobs gone are pruned lazily.
        self._queue: list[tuple[Any, str]] = []
        self._jobs: dict[str, Job] = {}
        # Per pending job, a row ("handle") of: its shape, expected run, and the reason to
        # wait it was last told (status, and the handle of the job holding it back).
        self._handle: dict[str, int] = {}
        self._free_handles: list[int] = []
        self.h_shape = np.zeros(256, np.int64)
        self.h_dur = np.zeros(256, np.float64)
        self.h_code = np.zeros(256, np.int64)
        self.h_hold = np.full(256, -1, np.int64)
        # Shapes: (request, tasks, fewest tasks) -> row of s_tp (task_params), s_min, s_ok.
        self._shape_ix: dict[tuple[TaskRequest, int, int], int] = {}
        self.s_tp = np.zeros((16, 6), np.int64)
        self.s_min = np.zeros(16, np.int64)
        self.s_ok = np.zeros((16, view.n_nodes), np.bool_)
        # The plan's shapes: shape -> row of u_* (and of the profile's piece-count cache).
        self.s_local = np.full(16, -1, np.int64)
        self.u_tp = np.zeros((16, 6), np.int64)
        self.u_min = np.zeros(16, np.int64)
        self.u_ok = np.zeros((16, view.n_nodes), np.bool_)
        self.n_local = 0
        # The plan's window: jobs in queue order (started ones included) and, per position,
        # handle, shape (a row of u_*), lane, expected run, and the outcome (``_plan``'s W).
        self.window: list[Job] = []
        self.window_ids: set[str] = set()  # the window's jobs still pending
        self._last_entry: tuple[Any, str] | None = None
        self._w_h = np.zeros(128, np.int64)
        self._W = tuple(
            np.zeros(128, dt) for dt in (np.int64, np.int64, np.float64) + (np.int64,) * 3
        )
        self._lanes: tuple[np.ndarray, ...] = (np.zeros(0, np.bool_), np.zeros(0, np.bool_))
        self._held: set[int] = set()  # lanes beyond the window held back by a reservation
        self._limit = np.zeros(view.n_nodes, np.int64)
        self._c0 = np.zeros(view.n_nodes, np.int64)
        self._scratch = (np.zeros(view.gpu_slots, np.int64), np.zeros(view.gpu_slots, np.int64))
        shape2 = (view.n_nodes, view.gpu_slots)
        self._shadow_arrays = (
            np.zeros(shape2, np.int64),
            np.zeros(shape2, np.int64),
            np.zeros(view.n_nodes, np.int64),
            np.zeros(view.n_nodes, np.int64),
        )
        self._planned_at = -1  # view changes the plan accounts for (-1: plan afresh)
        self._queue_version = 0  # bumped when a job joins inside the window
        self._planned_queue = 0
        self._next_change = float("inf")
        self._ended_seen = 0
        self._stale = False  # running jobs were evicted since the profile was built

    def _node_changed(self, n: int) -> None:
        self._changes += 1

    @property
    def reservations(self) -> list[tuple[str, float]]:
        """The plan's reservations, (job id, until), in queue order."""
        prof = self.profile
        nr = int(prof.counters[1])
        return [
            (self.window[int(i)].id, float(t))
            for i, t in zip(prof.r_win[:nr], prof.r_until[:nr], strict=True)
        ]

    # ---------------------------------------------------------------- the queue
    def submitted(self, key: Any, job: Job) -> None:
        entry = (key, job.id)
        q = self._queue
        i = bisect.bisect_left(q, entry)
        if i == len(q) or q[i] != entry:
            q.insert(i, entry)
        self._jobs[job.id] = job
        if self._last_entry is not None and entry < self._last_entry:
            self._queue_version += 1  # it joins inside the window: plan afresh
        h = self._handle.get(job.id)
        if h is None:
            h = self._free_handles.pop() if self._free_handles else len(self._handle)
            if h >= len(self.h_shape):
                for name in ("h_shape", "h_dur", "h_code", "h_hold"):
                    a = getattr(self, name)
                    setattr(self, name, np.concatenate((a, np.zeros_like(a))))
            self._handle[job.id] = h
        self.h_shape[h] = self._shape(job)
        self.h_dur[h] = self.runtime.duration(job)
        self.h_code[h] = _NO_STATUS
        self.h_hold[h] = -1

    def _shape(self, job: Job) -> int:
        key = (job.task, job.tasks, job.min_tasks)
        s = self._shape_ix.get(key)
        if s is None:
            s = len(self._shape_ix)
            if s == len(self.s_min):
                self.s_tp = np.concatenate((self.s_tp, np.zeros_like(self.s_tp)))
                self.s_min = np.concatenate((self.s_min, np.zeros_like(self.s_min)))
                self.s_ok = np.concatenate((self.s_ok, np.zeros_like(self.s_ok)))
                self.s_local = np.concatenate((self.s_local, np.full(s, -1, np.int64)))
            self.s_tp[s] = task_params(job.task, job.tasks)
            self.s_min[s] = job.min_tasks
            self.s_ok[s] = self.view.task_ok(job.task)
            self._shape_ix[key] = s
        return s

    def _local_rows(self, shapes: np.ndarray) -> np.ndarray:
        """The plan's rows for ``shapes`` (added on first sight)."""
        rows = self.s_local[shapes]
        for s in np.unique(shapes[rows < 0]).tolist():
            u = self.n_local
            self.n_local += 1
            if u == len(self.u_min):
                self.u_tp = np.concatenate((self.u_tp, np.zeros_like(self.u_tp)))
                self.u_min = np.concatenate((self.u_min, np.zeros_like(self.u_min)))
                self.u_ok = np.concatenate((self.u_ok, np.zeros_like(self.u_ok)))
            self.u_tp[u] = self.s_tp[s]
            self.u_min[u] = self.s_min[s]
            self.u_ok[u] = self.s_ok[s]
            self.s_local[s] = u
            if u >= self.profile.ic.shape[0]:
                self.profile.shapes(u + 1)
            rows = self.s_local[shapes]
        return rows

    def _forget(self, jid: str) -> None:
        self._jobs.pop(jid, None)
        h = self._handle.pop(jid, None)
        if h is not None:
            self._free_handles.append(h)

    def _extend_window(self) -> None:
        """Add pending jobs after the window's last, in queue order, until ``depth`` of its
        jobs are pending (entries of jobs gone are pruned on the way)."""
        pending = self.h.lanes.pending
        q = self._queue
        lo = 0 if self._last_entry is None else bisect.bisect_right(q, self._last_entry)
        i = lo
        kept: list[tuple[Any, str]] = []
        added: list[Job] = []
        lanes: list[int] = []
        room = self.depth - len(self.window_ids)
        while i < len(q) and len(added) < room:
            entry = q[i]
            i += 1
            e = pending.get(entry[1])
            if e is None or e[0] != entry[0]:
                if e is None:
                    self._forget(entry[1])
                continue
            kept.append(entry)
            added.append(self._jobs[entry[1]])
            lanes.append(e[1])
        q[lo:i] = kept
        if not added:
            return
        self._last_entry = kept[-1]
        n0 = len(self.window)
        n1 = n0 + len(added)
        if n1 > len(self._w_h):
            grow = max(n1, len(self._w_h))
            self._w_h = np.concatenate((self._w_h, np.zeros(grow, np.int64)))
            self._W = tuple(np.concatenate((a, np.zeros(grow, a.dtype))) for a in self._W)
        w_s, w_lane, w_dur = self._W[:3]
        hs = np.array([self._handle[j.id] for j in added], dtype=np.int64)
        self._w_h[n0:n1] = hs
        w_s[n0:n1] = self._local_rows(self.h_shape[hs])
        w_lane[n0:n1] = lanes
        w_dur[n0:n1] = self.h_dur[hs]
        self.window.extend(added)
        self.window_ids.update(j.id for j in added)
        n_lanes = len(self.h.lanes.lanes)
        if n_lanes > len(self._lanes[0]):
            more = n_lanes - len(self._lanes[0])
            self._lanes = tuple(
                np.concatenate((a, np.full(more, v, a.dtype)))
                for a, v in zip(self._lanes, (True, False), strict=True)
            )

    # ---------------------------------------------------------------- the cycle
    def begin(self, rng: np.random.Generator, out: list[Decision]) -> None:
        """Plan afresh if anything the plan rests on changed (starting the jobs it starts now
        and telling the others why they wait, once per change of reason); else plan for jobs
        that joined at the window's end, if any."""
        h = self.h
        if (
            self._planned_at == self._changes
            and self._planned_queue == self._queue_version
            and h.now < self._next_change
            and self.window_ids <= h.lanes.pending.keys()
        ):
            if len(self.window_ids) < self.depth and (
                self._last_entry is None
                or bisect.bisect_right(self._queue, self._last_entry) < len(self._queue)
            ):
                n0 = len(self.window)
                self._extend_window()
                if len(self.window) > n0 and self._run(rng, out, n0):
                    self._plan_again(rng, out)
            return
        self._plan_again(rng, out)

    def gate(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision | Held | None:
        """A job within the plan's window is the plan's to start (held here); one beyond it
        starts only around every reservation (``attempt``)."""
        if job.id in self.window_ids:
            return HELD  # within the plan's depth: its pass decided this job
        decision = self.attempt(job, lane, rng, out)
        return HELD if decision is None else decision

    def failed(self, job: Job) -> None:
        """A job beyond the window that could not start gets no reservation of its own."""

    def restored(self, r: Running) -> None:
        self.by_end.add(r)

    def _plan_again(self, rng: np.random.Generator, out: list[Decision]) -> None:
        h = self.h
        while True:
            now = h.now
            self.by_end.sync(h.running.records, h.running.ended)
            self._ended_seen = h.running.ended
            self.profile.reset(now, self.by_end, keep_holds=False)
            self._stale = False
            pending = h.lanes.pending
            if (
                self._planned_queue == self._queue_version
                and self.window_ids <= pending.keys()
                and self.n_local <= 4 * self.depth
            ):
                # The same jobs in the same order, less those that started: keep the window.
                keep = np.fromiter((j.id in self.window_ids for j in self.window), np.bool_)
                n = int(keep.sum())
                self.window = [j for j in self.window if j.id in self.window_ids]
                self._w_h[:n] = self._w_h[: len(keep)][keep]
                for a in self._W[:3]:
                    a[:n] = a[: len(keep)][keep]
            else:
                old = self.window_ids
                self.window, self.window_ids, self._last_entry = [], set(), None
                self.s_local[:] = -1
                self.n_local = 0
                self._extend_window()
                # A job pushed out of the window goes back to the skip-ahead queue.
                for jid in old - self.window_ids:
                    e = pending.get(jid)
                    if e is not None:
                        h.activate(h.lanes.lanes[e[1]])
            n_lanes = len(h.lanes.lanes)
            self._lanes = (np.ones(n_lanes, np.bool_), np.zeros(n_lanes, np.bool_))
            self._extend_window()
            self._planned_queue = self._queue_version
            # Reservations may move: jobs held back beyond the window are worth another look.
            self._wake_held()
            if not self._run(rng, out, 0):
                return  # else an eviction changed the running jobs: plan again

    def _run(self, rng: np.random.Generator, out: list[Decision], j: int) -> bool:
        """Plan window jobs ``j`` on; True if it must start over (running jobs were evicted)."""
        h = self.h
        now = h.now
        prof = self.profile
        lo = j
        nw = len(self.window)
        lane_open, lane_dead = self._lanes
        while True:
            j, code = _plan(
                j, nw, now, self.view.all_healthy, prof.V, prof.P, prof.E, prof.C, self._W,
                (self.u_tp, self.u_min, self.u_ok), self._lanes, prof.counters, prof.r_until,
                prof.r_win, self._limit, self._c0,
            )  # fmt: skip
            if code == _DONE:
                break
            if code != _START:
                prof.grow(code)
                continue
            job = self.window[j]
            li = int(self._W[1][j])
            lane = h.lanes.lanes[li]
            j += 1
            if lane.blocked is not None:
                lane_open[li], lane_dead[li] = False, True  # it waits for its quota
                continue
            decision = self._start(job, lane, rng, float(self._W[2][j - 1]), out)
            out.append(decision)
            if type(decision) is Admit:
                h.activate(lane)
                self.started(job)
                if self._stale:
                    return True
            else:
                lane.skipped = job.id
                lane_open[li], lane_dead[li] = False, True
        self._planned_at = self._changes
        self._next_change = prof.next_change()
        return self._tell(rng, out, lo, nw)

    def _tell(self, rng: np.random.Generator, out: list[Decision], lo: int, hi: int) -> bool:
        """Skip decisions for the lane heads among window jobs ``lo..hi-1`` whose reason to
        wait changed since last told; True if telling one evicted running jobs."""
        w_stat, w_hold = self._W[3], self._W[4]
        heads = np.flatnonzero(w_stat[lo:hi]) + lo
        if not len(heads):
            return False
        r_win = self.profile.r_win
        w_h = self._w_h
        hh = w_h[heads]
        st = w_stat[heads]
        rid = w_hold[heads]
        holder = np.where((st == _HELD_BACK) & (rid >= 0), w_h[r_win[np.maximum(rid, 0)]], -1)
        changed = heads[(self.h_code[hh] != st) | (self.h_hold[hh] != holder)]
        self.h_code[hh] = st
        self.h_hold[hh] = holder
        h = self.h
        table = h.table
        for j in changed.tolist():
            job = self.window[j]
            lane = h.lanes.lane_of(job.id)
            if w_stat[j] == _HELD_BACK:
                r = int(w_hold[j])
                if r >= 0:
                    out.append(Skip(job, self._behind(r)))
                continue
            if lane.skipped == job.id and (
                lane.blocked is not None
                or (table.is_tracked(lane.shape) and not table.fits(lane.shape))
            ):
                continue  # already told why
            decision = h.try_start(job, lane, rng, out)
            out.append(decision)
            if type(decision) is Admit:  # by evicting: the running jobs changed
                h.activate(lane)
                self.started(job)
                return True
            lane.skipped = job.id
        return False

    def _behind(self, rid: int) -> BehindReservation:
        prof = self.profile
        return BehindReservation(self.window[int(prof.r_win[rid])].id, float(prof.r_until[rid]))

    def _wake_held(self) -> None:
        """The plan changed: lanes it held back are worth another look."""
        h = self.h
        for i in self._held:
            h.activate(h.lanes.lanes[i])
        self._held.clear()

    def attempt(
        self, job: Job, lane: Lane, rng: np.random.Generator, out: list[Decision]
    ) -> Decision | None:
        """Try to start ``job``, a job beyond the window: if its whole expected run fits
        around every reservation, as ``_start`` does; if it does not fit now at all, as the
        scheduler tries any job (its Skip says why). None if it fits now but would touch a
        reservation: it waits, out of the queue until the plan changes, told so (in ``out``)
        when that reason is new."""
        if self._stale:
            self._refresh()
        h = self._handle[job.id]
        u = int(self.s_local[self.h_shape[h]])
        if u < 0:
            u = int(self._local_rows(self.h_shape[h : h + 1])[0])
        d = float(self.h_dur[h])
        t_end = self.h.now + d
        prof = self.profile
        v = self.view
        c0 = self._c0
        v_total, s_total = _start_now(
            u, self.u_tp[u], int(self.u_min[u]), t_end, self.u_ok[u], v.healthy, v.all_healthy,
            prof.P, prof.C, c0, self._limit, *self._scratch,
        )  # fmt: skip
        need = job.min_tasks
        if s_total >= need:
            return self._start(job, lane, rng, d, out)
        r = _holder(t_end, c0, prof.E) if v_total >= need else -1
        if r < 0:
            return self.h.try_start(job, lane, rng, out)
        holder = int(self._w_h[int(prof.r_win[r])])
        if self.h_code[h] != _HELD_BACK or self.h_hold[h] != holder:
            self.h_code[h], self.h_hold[h] = _HELD_BACK, holder
            out.append(Skip(job, self._behind(r)))
        self._held.add(lane.index)
        return None

    def _start(
        self, job: Job, lane: Lane, rng: np.random.Generator, d: float, out: list[Decision]
    ) -> Decision:
        """Start ``job`` now on what stays free throughout its expected run ``d``: on every
        node it fits now (``self._c0``), what reservations hold before its run ends is taken
        off the view for the placement (a what-if, undone at once), so the placement policy
        chooses nodes and GPUs among the rest and no reservation moves."""
        prof = self.profile
        sfm, sgm, scpu, smem = self._shadow_arrays
        _shadow(self.h.now + d, self._c0, prof.P, sfm, sgm, scpu, smem, *self._scratch)
        view = self.view
        held: list[TaskPlacement] = []
        for x in np.flatnonzero(sfm.any(axis=1) | (scpu > 0) | (smem > 0)).tolist():
            # One claim per (share, memory) held on the node's GPUs; CPU and memory on the first.
            by_amount: dict[tuple[int, int], list[int]] = {}
            for g in np.flatnonzero(sfm[x]).tolist():
                by_amount.setdefault((int(sfm[x, g]), int(sgm[x, g])), []).append(g)
            cpu, mem = int(scpu[x]), int(smem[x])
            for (milli, gmem), gpus in by_amount.items():
                held.append(TaskPlacement(x, tuple(gpus), milli, gmem, cpu, mem))
                cpu = mem = 0
            if cpu or mem:
                held.append(TaskPlacement(x, (), 0, 0, cpu, mem))
        changes = self._changes
        for tp in held:
            view.allocate(tp)
        try:
            decision = self.h.try_start(job, lane, rng, out)
        finally:
            for tp in reversed(held):
                view.release(tp)
        if type(decision) is not Admit:
            self._changes = changes  # the view is as it was
        return decision

    def started(self, job: Job) -> None:
        """``job`` was admitted: it joins the profile as a running job (or, if running jobs
        were evicted for it, the profile is rebuilt around the reservations as they are and
        the next cycle plans afresh)."""
        r = self.h.running.records[job.id]
        self.by_end.add(r)
        self.window_ids.discard(job.id)
        self._forget(job.id)
        if self.h.running.ended != self._ended_seen:
            self._stale = True
            self._planned_at = -1
        elif not self._stale:
            self.profile.add_running(r, estimated_end(r, self.runtime))
            self._next_change = min(self._next_change, self.profile.next_change())
            if self._planned_at >= 0:
                self._planned_at = self._changes
        # A job that starts takes capacity: no job held back can start because of it.

    def ended(self, job_id: str) -> None:
        """A running job ended (the next cycle plans afresh: the view changed)."""
        self.by_end.ended(job_id)

    def _refresh(self) -> None:
        h = self.h
        self.by_end.sync(h.running.records, h.running.ended)
        self._ended_seen = h.running.ended
        self.profile.reset(h.now, self.by_end, keep_holds=True)
        self._stale = False
        self._wake_held()
