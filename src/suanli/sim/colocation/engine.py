"""The co-location simulator: one service and the training jobs on one GPU pool, step by step.

Each step of ``scenario.step`` seconds, in this order:

1. training jobs submitted by now join the queue (first come, first served);
2. the service: the autoscaler (which sees the demand of the steps before this one, never
   this step's) sets the replicas; new replicas take free GPUs, then (``sharing``) GPUs of
   low-duty training workers, then GPUs taken back from training (``preempt``: the newest
   jobs, or Lyra's order: shrink elastic jobs, then preempt the fewest); a new replica serves
   after the service's cold start; a scale-down drops starting replicas first, then shared
   ones, then exclusive ones;
3. waiting jobs start in queue order, any that fits passing one that does not (an elastic
   job may start on as few as its minimum workers); if the first still waits, elastic jobs
   grown past their request give the extra back for it;
4. (``elastic``) idle GPUs go to the running elastic jobs that gain most from them
   (``suanli.core.elastic.plan_growth``), every ``grow_every`` steps;
5. (``idle``) every ``idle_every`` steps, jobs under the duty threshold are tracked
   (``suanli.core.idle``); a reclaimed one is shrunk to its minimum (elastic) and offered
   to the service as a host (both);
6. training progresses over the step on what is held now: a job on ``n`` workers at
   ``S(n) / S(requested)`` of its stated rate, slowed by interference where its workers
   host replicas, and not at all while it pays a resize or restart; it checkpoints every
   ``scenario.checkpoint`` seconds of running; a job that finishes frees its GPUs for the
   next step.

Step 6's accounting: a GPU is allocated if a replica or a training worker holds it; it is
busy for a replica's duty (``rho = lam / (c mu)``, its busy share under M/M/c) plus a
training worker's duty while the worker makes progress (at most 1 on a shared GPU). A
paused (resizing, restarting) worker holds its GPU idle. A starting replica holds its GPU
idle. Useful training work is progress kept: what a preemption loses since the last
checkpoint is subtracted, and redone.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from suanli.core.elastic import ElasticRange, Resizable, plan_growth, plan_shrink
from suanli.core.idle import IdleTracker, Verdict
from suanli.core.loaning import Victim, reclaim
from suanli.core.registry import create
from suanli.core.serving.queueing import Capacity, latency_tail
from suanli.core.serving.service import Demand
from suanli.sim.colocation.model import PREEMPT_LYRA, Levers, Scenario
from suanli.sim.colocation.nodes import Nodes

FUTURE, WAITING, RUNNING, DONE = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Trace:
    """What a run recorded: per step (``alloc``, ``busy`` in GPUs; the service's ``ready``
    replicas, its demand ``lam`` and slowest replica rate ``mu_eff``, whether it met its
    SLO; training's GPUs), and per job (first start, finish, total wait, preemptions,
    resizes, work kept and lost in GPU-seconds at the requested size)."""

    alloc: np.ndarray
    busy: np.ndarray
    train_gpus: np.ndarray
    replicas: np.ndarray
    lam: np.ndarray
    mu_eff: np.ndarray
    slo_met: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    wait: np.ndarray
    waiting_since: np.ndarray
    preemptions: np.ndarray
    resizes: np.ndarray
    useful: np.ndarray
    lost_work: np.ndarray
    paused_gpu_seconds: float
    idle_flagged_gpu_seconds: float
    reclaimed: int
    warned: int
    shared_gpu_seconds: float
    short_steps: int


class Run:
    """One run of ``scenario`` with ``levers`` (``run()`` once)."""

    def __init__(self, scenario: Scenario, levers: Levers, *, check: bool = False) -> None:
        self.sc, self.lv = scenario, levers
        self.check = check
        tr = scenario.training
        n = len(tr)
        self.n = n
        svc = scenario.service
        limit = scenario.gpus + 1
        self.cap = Capacity(svc.mu, svc.slo, limit, svc.slo_quantile)
        # A shared replica serves at most this much slower while the two duties fit the GPU
        # (its host's duty is capped); the autoscaler sizes a sharing service for that rate.
        d = scenario.share_max_duty
        self.share_slow = scenario.interference.slowdown(1.0 - d, d)
        self.cap_shared = Capacity(svc.mu / self.share_slow, svc.slo, limit, svc.slo_quantile)
        self.scaler = create("autoscaler", levers.autoscaler, **dict(levers.options))
        self.scaler.reset()
        self.elastic_on = levers.elastic and not levers.partition
        self.elastic = tr.elastic & self.elastic_on
        self.min_start = np.where(self.elastic, tr.min_w, tr.gpus)
        self.s_req = np.array([scenario.speedup(float(g)) for g in tr.gpus])
        # job state
        self.status = np.zeros(n, np.int8)
        self.workers = np.zeros(n, np.int64)
        self.hosted = np.zeros(n, np.int64)
        self.remaining = tr.runtime.astype(float).copy()
        self.rate = np.zeros(n)
        self.pause_until = np.zeros(n)
        self.run_clock = np.zeros(n)
        self.next_ckpt = np.zeros(n)
        self.unsaved = np.zeros(n)
        self.start = np.full(n, np.nan)
        self.last_start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.wait = np.zeros(n)
        self.queued_at = np.full(n, np.nan)
        self.restart = np.zeros(n, bool)
        self.preemptions = np.zeros(n, np.int64)
        self.resizes = np.zeros(n, np.int64)
        self.useful = np.zeros(n)
        self.lost = np.zeros(n)
        self.host_ok = (tr.duty <= scenario.share_max_duty) & (
            tr.memory_mib + svc.gpu_memory_mib <= scenario.gpu_memory_mib
        )
        self.idle_host = np.zeros(n, bool)
        self.flagged = np.zeros(n, bool)
        self.waiting: list[int] = []
        self.next_arrival = 0
        # service state: replicas as [ready_at, host] (host -1: a GPU of its own)
        self.reps: list[list[float]] = []
        self.excl = 0  # GPUs held by replicas alone
        self.train_held = 0
        self.paused_gpu_s = 0.0
        self.idle_gpu_s = 0.0
        self.shared_gpu_s = 0.0
        self.reclaimed = 0
        self.warned = 0
        self.short_steps = 0
        self.idle = IdleTracker(levers.idle) if levers.idle is not None else None
        self._now = 0.0
        self._seen = np.concatenate([scenario.history, scenario.demand])
        self.nodes = Nodes(scenario.gpus // scenario.gpus_per_node, scenario.gpus_per_node)
        self.spread = np.asarray(tr.spread, bool)

    # ---------------------------------------------------------------------------------------
    # GPUs
    # ---------------------------------------------------------------------------------------

    @property
    def free(self) -> int:
        return self.nodes.total

    def _room(self, j: int) -> int:
        """The most workers job ``j`` could start on now."""
        return self.nodes.room(bool(self.spread[j]))

    def _set_workers(self, j: int, w: int) -> int:
        """Job ``j`` (running) to ``w`` workers, or as near as its nodes allow when growing;
        replicas whose host worker leaves keep their GPUs. Returns the workers it has."""
        old = int(self.workers[j])
        if w > old:
            w = old + self.nodes.grow(j, w - old, bool(self.spread[j]))
        elif w < old:
            self._alone(j, self.nodes.shrink(j, old - w))
        self.workers[j] = w
        self.train_held += w - old
        self.rate[j] = self.sc.speedup(float(w)) / self.s_req[j] if w else 0.0
        return w

    def _alone(self, j: int, moved: list[tuple[int, int]]) -> None:
        """Replicas that job ``j``'s workers hosted on these nodes now hold their GPUs alone."""
        for n, k in moved:
            left = k
            for r in self.reps:
                if left and r[1] == j and r[2] == n:
                    r[1] = -1
                    left -= 1
            assert left == 0, "a hosted replica not found"
            self.excl += k
            self.hosted[j] -= k

    def _release(self, j: int) -> None:
        """Job ``j`` stops holding GPUs (its hosted replicas stay, on GPUs of their own)."""
        self._alone(j, self.nodes.release(j))
        self.train_held -= int(self.workers[j])
        self.workers[j] = 0
        self.rate[j] = 0.0

    def _start(self, j: int, w: int, t: float) -> None:
        self.status[j] = RUNNING
        self.nodes.place(j, w, bool(self.spread[j]))
        self.workers[j] = w
        self.train_held += w
        self.rate[j] = self.sc.speedup(float(w)) / self.s_req[j]
        self.pause_until[j] = t + self.sc.resize_cost if self.restart[j] else t
        self.restart[j] = False
        self.wait[j] += t - self.queued_at[j]
        self.queued_at[j] = np.nan
        if np.isnan(self.start[j]):
            self.start[j] = t
        self.last_start[j] = t
        self.next_ckpt[j] = self.run_clock[j] + self.sc.checkpoint

    def _resize(self, j: int, w: int, t: float) -> None:
        """A resize saves a checkpoint and restarts on ``w`` workers (or as many as its nodes
        allow when growing; nothing happens if that is none): no work is lost, none is made
        for the resize cost."""
        old = int(self.workers[j])
        if self._set_workers(j, w) == old:
            return
        self.pause_until[j] = max(self.pause_until[j], t) + self.sc.resize_cost
        self.unsaved[j] = 0.0
        self.next_ckpt[j] = self.run_clock[j] + self.sc.checkpoint
        self.resizes[j] += 1

    def _preempt(self, j: int, t: float) -> None:
        self._release(j)
        lost = self.unsaved[j]
        self.remaining[j] += lost
        self.useful[j] -= lost
        self.lost[j] += lost
        self.unsaved[j] = 0.0
        self.status[j] = WAITING
        self.queued_at[j] = t
        self.restart[j] = True
        self.preemptions[j] += 1
        self.idle_host[j] = False
        if self.idle is not None:
            self.idle.forget(self.sc.training.ids[j])
        bisect.insort(self.waiting, j)

    # ---------------------------------------------------------------------------------------
    # The service
    # ---------------------------------------------------------------------------------------

    def _service(self, i: int, t: float) -> None:
        sc, lv, svc = self.sc, self.lv, self.sc.service
        if lv.partition:
            if not self.reps:
                self.reps = [[0.0, -1, n] for n in self.nodes.reserve(sc.pool)]
                self.excl = sc.pool
            return
        h = len(sc.history)
        demand = Demand(self._seen[: h + i], sc.step, -h * sc.step)
        cap = self.cap_shared if lv.sharing else self.cap
        want = svc.clamp(self.scaler.replicas(svc, cap, demand, len(self.reps)))
        have = len(self.reps)
        if want > have:
            # The service ran before the run: its first replicas are warm.
            self._scale_up(want - have, t, warm=i == 0)
        elif want < have:
            self._scale_down(have - want)

    def _scale_up(self, add: int, t: float, warm: bool = False) -> None:
        ready_at = t if warm else t + self.sc.service.cold_start
        add -= self._own_gpus(add, ready_at)
        if add and self.lv.sharing:
            add = self._share(add, ready_at)
        if add:
            self._take_back(add, t)
            add -= self._own_gpus(add, ready_at)
            if add:
                self.short_steps += 1

    def _own_gpus(self, add: int, ready_at: float) -> int:
        """Up to ``add`` new replicas on free GPUs of their own; returns how many."""
        k = min(add, self.free)
        for _ in range(k):
            n = self.nodes.take_replica()
            self.nodes.free[n] -= 1
            self.reps.append([ready_at, -1, n])
        self.excl += k
        return k

    def _share(self, add: int, ready_at: float) -> int:
        """Put up to ``add`` new replicas on GPUs of low-duty training workers (reclaimed
        idle jobs first, then the lowest duties); returns how many are still to place."""
        tr = self.sc.training
        run = np.flatnonzero((self.status == RUNNING) & self.host_ok & (self.workers > self.hosted))
        if not len(run):
            return add
        order = run[np.lexsort((run, tr.duty[run], ~self.idle_host[run]))]
        for j in order:
            for n, room in self.nodes.host_room(int(j)):
                for _ in range(min(room, add)):
                    self.nodes.host(int(j), n)
                    self.hosted[j] += 1
                    self.reps.append([ready_at, int(j), n])
                    add -= 1
                if not add:
                    return 0
        return add

    def _take_back(self, need: int, t: float) -> int:
        """Free ``need`` GPUs from training for the service; returns how many were freed.
        A plan can free fewer than it counted (a shrunk worker that hosts a replica frees
        no GPU): a few more rounds cover the rest."""
        before = self.free
        for _ in range(4):
            left = need - (self.free - before)
            if left <= 0 or self.train_held == 0:
                break
            self._take_back_once(left, t)
        return self.free - before

    def _take_back_once(self, need: int, t: float) -> None:
        before = self.free
        run = np.flatnonzero(self.status == RUNNING)
        if self.lv.preempt == PREEMPT_LYRA:
            tr = self.sc.training
            elastic = [
                self._resizable(j) for j in run if self.elastic[j] and self.workers[j] > tr.min_w[j]
            ]
            victims = [
                Victim(str(j), int(self.workers[j] - self.hosted[j]), 0, float(self.unsaved[j]))
                for j in run
            ]
            plan = reclaim(need, 0, elastic, victims)
            for jid, w in plan.shrink.items():
                self._resize(int(jid), w, t)
            for jid in plan.preempt:
                self._preempt(int(jid), t)
        else:  # priority preemption: the most recently (re)started training jobs first
            order = run[np.lexsort((-run, -self.last_start[run]))]
            for j in order:
                if self.free - before >= need:
                    break
                self._preempt(int(j), t)

    def _scale_down(self, drop: int) -> None:
        # Starting replicas first (newest), then shared ones, then those of their own on the
        # emptiest nodes (so that whole nodes come free for training).
        free = self.nodes.free
        starting = sorted((r for r in self.reps if r[0] > self._now), key=lambda r: -r[0])
        ready_shared = [r for r in self.reps if r[0] <= self._now and r[1] >= 0]
        ready_excl = sorted(
            (r for r in self.reps if r[0] <= self._now and r[1] < 0),
            key=lambda r: (-free[int(r[2])], int(r[2])),
        )
        order = starting + ready_shared + ready_excl
        gone, keep = order[:drop], order[drop:]
        for r in gone:
            if r[1] >= 0:
                self.hosted[int(r[1])] -= 1
                self.nodes.unhost(int(r[1]), int(r[2]))
            else:
                self.excl -= 1
                self.nodes.drop_replica(int(r[2]))
        self.reps = keep

    # ---------------------------------------------------------------------------------------
    # The run
    # ---------------------------------------------------------------------------------------

    def run(self) -> Trace:
        sc, tr = self.sc, self.sc.training
        steps = len(sc.demand)
        dt = sc.step
        series = {k: np.zeros(steps) for k in ("alloc", "busy", "tg", "rep", "mu")}
        met = np.zeros(steps, bool)
        svc = sc.service
        mu = svc.mu
        for i in range(steps):
            t = i * dt
            self._now = t
            # 1. arrivals
            while self.next_arrival < self.n and tr.submit[self.next_arrival] <= t:
                j = self.next_arrival
                self.status[j] = WAITING
                self.queued_at[j] = tr.submit[j]
                self.waiting.append(j)
                self.next_arrival += 1
            # 2. the service
            self._service(i, t)
            lam = float(sc.demand[i])
            ready = [r for r in self.reps if r[0] <= t]
            c = len(ready)
            hosts = [int(r[1]) for r in ready if r[1] >= 0]
            rho_nom = min(1.0, lam / (c * mu)) if c else 1.0
            slow = max((sc.interference.slowdown(rho_nom, tr.duty[h]) for h in hosts), default=1.0)
            mu_eff = mu / slow
            rho = min(1.0, lam / (c * mu_eff)) if c else (1.0 if lam > 0 else 0.0)
            met[i] = (
                latency_tail(svc.slo, lam, mu_eff, c) <= 1.0 - svc.slo_quantile
                if hosts
                else self.cap.meets(lam, c)
            )
            # 3. starts (before progress: a job started at t runs from t)
            self._starts(t)
            # 4. growth
            if self.elastic_on and i % sc.grow_every == 0:
                self._grow(t)
            # 5. idle reclaim
            if self.idle is not None and i % sc.idle_every == 0:
                self._idle(t)
            held = self.excl + self.train_held
            # 6. training progress over [t, t + dt), on what is held now
            run = np.flatnonzero(self.status == RUNNING)
            busy_train = 0.0
            busy_shared = 0.0
            if len(run):
                p0 = np.maximum(self.pause_until[run], t)
                prod = np.clip(t + dt - p0, 0.0, dt)
                rate = self.rate[run].copy()
                h = self.hosted[run] > 0
                if h.any():
                    rate[h] /= [sc.interference.slowdown(tr.duty[j], rho) for j in run[h]]
                work = rate * prod
                rem = self.remaining[run]
                done = work >= rem
                with np.errstate(divide="ignore", invalid="ignore"):
                    t_done = np.where(done, rem / np.where(rate > 0, rate, 1.0), prod)
                prod = np.minimum(prod, t_done)
                work = np.minimum(work, rem)
                self.remaining[run] -= work
                self.useful[run] += work
                self.unsaved[run] += work
                self.run_clock[run] += prod
                ck = self.run_clock[run] >= self.next_ckpt[run]
                if ck.any():
                    js = run[ck]
                    self.unsaved[js] = 0.0
                    self.next_ckpt[js] += sc.checkpoint
                w = self.workers[run]
                hw = self.hosted[run]
                d = tr.duty[run]
                busy_train = float(((w - hw) * d * prod).sum())
                busy_shared = float(
                    (hw * (prod * np.minimum(1.0, d + rho) + (dt - prod) * rho)).sum()
                )
                self.paused_gpu_s += float((w * (dt - np.clip(t + dt - p0, 0.0, dt))).sum())
                self.shared_gpu_s += float(hw.sum()) * dt
                for j, td in zip(run[done], (p0 + t_done)[done], strict=True):
                    self.finish[j] = td
                    self.status[j] = DONE
                    self._release(int(j))
                    if self.idle is not None:
                        self.idle.forget(tr.ids[j])
            excl_ready = c - len(hosts)
            busy = busy_train + busy_shared + excl_ready * rho * dt
            if self.idle is not None:
                self.idle_gpu_s += float(self.workers[self.flagged].sum()) * dt
            if self.check:
                self._invariants()
            series["alloc"][i] = held
            series["busy"][i] = busy / dt
            series["tg"][i] = self.train_held
            series["rep"][i] = c
            series["mu"][i] = mu_eff
        wait_now = np.where(self.status == WAITING, steps * dt - self.queued_at, 0.0)
        return Trace(
            alloc=series["alloc"],
            busy=series["busy"],
            train_gpus=series["tg"],
            replicas=series["rep"],
            lam=np.asarray(sc.demand, float),
            mu_eff=series["mu"],
            slo_met=met,
            start=self.start,
            finish=self.finish,
            wait=self.wait + np.nan_to_num(wait_now),
            waiting_since=np.where(self.status == WAITING, self.queued_at, np.nan),
            preemptions=self.preemptions,
            resizes=self.resizes,
            useful=self.useful * tr.gpus,
            lost_work=self.lost * tr.gpus,
            paused_gpu_seconds=self.paused_gpu_s,
            idle_flagged_gpu_seconds=self.idle_gpu_s,
            reclaimed=self.reclaimed,
            warned=self.warned,
            shared_gpu_seconds=self.shared_gpu_s,
            short_steps=self.short_steps,
        )

    def _resizable(self, j: int, floor: int | None = None, cap: int | None = None) -> Resizable:
        """Job ``j`` as a resize plan sees it (``floor``, ``cap``: a minimum, a maximum other
        than its own)."""
        tr = self.sc.training
        lo = int(tr.min_w[j]) if floor is None else floor
        hi = int(tr.max_w[j]) if cap is None else max(int(tr.gpus[j]), min(int(tr.max_w[j]), cap))
        return Resizable(
            str(j),
            ElasticRange(lo, hi, int(tr.gpus[j])),
            int(self.workers[j]),
            self.sc.speedup,
            float(self.remaining[j]),
        )

    def _invariants(self) -> None:
        """What every step must leave true (checked when the run was made with ``check``)."""
        sc, tr = self.sc, self.sc.training
        run = self.status == RUNNING
        assert self.free >= 0, f"GPUs over-committed: {self.free} free"
        assert self.train_held == int(self.workers.sum())
        assert self.excl == sum(1 for r in self.reps if r[1] < 0)
        nodes = self.nodes
        assert (nodes.free >= 0).all() and (nodes.free <= nodes.per_node).all()
        assert nodes.total == sc.gpus - self.excl - self.train_held
        for j in np.flatnonzero(run):
            at, host = nodes.job[int(j)], nodes.hosted[int(j)]
            assert sum(at.values()) == self.workers[j]
            assert self.spread[j] or len(at) == 1, "a one-node job on several nodes"
            assert all(host[n] <= at.get(n, 0) for n in host)
            assert sum(host.values()) == self.hosted[j]
        assert (self.hosted <= self.workers).all() and (self.hosted >= 0).all()
        assert int(self.hosted.sum()) == sum(1 for r in self.reps if r[1] >= 0)
        assert (self.hosted[~self.host_ok] == 0).all(), "a replica beside a worker it may not"
        w = self.workers[run]
        assert ((w >= tr.min_w[run]) & (w <= tr.max_w[run])).all(), "a job outside its range"
        assert (self.workers[~run] == 0).all()
        if not self.lv.partition:
            assert len(self.reps) >= sc.service.min_replicas or self.short_steps

    def _starts(self, t: float) -> None:
        if not self.waiting:
            return
        need = int(self.min_start[self.waiting].min())
        if self.free < need:
            return
        started: list[int] = []
        one, total = int(self.nodes.free.max()), self.free  # the rooms, kept between starts
        for j in self.waiting:
            room = total if self.spread[j] else one
            if room < self.min_start[j]:
                continue
            self._start(j, self._size(j, room), t)
            started.append(j)
            one, total = int(self.nodes.free.max()), self.free
            if total < need:
                break
        if started:
            gone = set(started)
            self.waiting = [j for j in self.waiting if j not in gone]
        if self.elastic_on and self.waiting:
            self._make_room(self.waiting[0], t)

    def _size(self, j: int, room: int) -> int:
        """The workers job ``j`` starts on, given ``room``: its request, or as many as fit
        down to its minimum for an elastic job."""
        req = int(self.sc.training.gpus[j])
        return min(req, room) if self.elastic[j] else req

    def _make_room(self, head: int, t: float) -> None:
        """The first waiting job does not fit: elastic jobs grown past their request give
        the extra back (never below their request, so growth only ever lends GPUs that
        nobody waits for), if that is enough for it to start: on one node for a job that
        may not spread, from the grown jobs on that node."""
        tr = self.sc.training
        m = int(self.min_start[head])
        grown = np.flatnonzero((self.status == RUNNING) & (self.workers > tr.gpus))
        if not len(grown):
            return
        free = self.nodes.free
        if self.spread[head]:
            plans = [(grown, m - self.free)]
        else:  # the node whose own free GPUs and grown one-node jobs give most
            plans = []
            for n in np.argsort(-free, kind="stable"):
                on = [j for j in grown if not self.spread[j] and int(n) in self.nodes.job[j]]
                if on:
                    plans.append((np.array(on), m - int(free[n])))
        for jobs, need in plans:
            if need <= 0 or int((self.workers[jobs] - tr.gpus[jobs]).sum()) < need:
                continue
            plan, _ = plan_shrink([self._resizable(j, floor=int(tr.gpus[j])) for j in jobs], need)
            for jid, w in plan.items():
                self._resize(int(jid), w, t)
            room = self._room(head)
            if room >= m:
                self._start(head, self._size(head, room), t)
                self.waiting.pop(0)
            return

    def _grow(self, t: float) -> None:
        free = self.free
        if free <= 0:
            return
        if self.waiting and free >= self.min_start[self.waiting].min():
            return  # waiting jobs come first
        tr = self.sc.training
        run = np.flatnonzero(
            (self.status == RUNNING) & self.elastic & (self.workers < tr.max_w) & ~self.idle_host
        )
        if not len(run):
            return
        jobs = [self._resizable(j, cap=self._growth_room(j)) for j in run]
        jobs = [r for r in jobs if r.range.max_workers > r.workers]
        for jid, w in plan_growth(jobs, free, self.sc.resize_cost).items():
            self._resize(int(jid), w, t)

    def _growth_room(self, j: int) -> int:
        """The most workers running job ``j`` could have now: its own node's free GPUs for a
        job on one node."""
        if self.spread[j]:
            return int(self.workers[j]) + self.free
        (n,) = self.nodes.job[j]
        return int(self.workers[j]) + int(self.nodes.free[n])

    def _idle(self, t: float) -> None:
        assert self.idle is not None
        tr = self.sc.training
        low = np.flatnonzero((self.status == RUNNING) & (tr.duty < self.idle.policy.threshold))
        for j in low:
            labels = tr.labels[j] if tr.labels else ()
            v = self.idle.observe(tr.ids[j], t, float(tr.duty[j]), labels=labels)
            if v in (Verdict.WARN, Verdict.IDLE, Verdict.RECLAIM, Verdict.EXEMPT):
                self.flagged[j] = True
            if v is Verdict.WARN:
                self.warned += 1
            elif v is Verdict.RECLAIM:
                self.reclaimed += 1
                self.idle_host[j] = True
                if self.elastic[j] and self.workers[j] > tr.min_w[j]:
                    self._resize(int(j), int(tr.min_w[j]), t)
        self.flagged &= self.status == RUNNING


def run(scenario: Scenario, levers: Levers, *, check: bool = False) -> Trace:
    """Run ``scenario`` with ``levers`` (``check``: assert the invariants every step)."""
    return Run(scenario, levers, check=check).run()
