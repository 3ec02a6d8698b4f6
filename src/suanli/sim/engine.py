"""The trace-driven, event-driven simulator: the policy core on a simulated clock.

Events are arrivals (from the submit-sorted job list), finishes (a heap keyed
``(time, sequence)``) and, with a cycle interval, scheduler ticks. All events at one
instant are applied (finishes before arrivals), then one scheduling cycle runs and its
decisions are applied: an ``Admit`` starts the job now and schedules its finish. The same
seed gives the same decisions, event for event.

A job's duration: ``runtime × tasks / started_tasks / speed``, where ``speed`` is the least
effective speed of its placement (``ClusterView.node_speed``; 1.0 for CPU-only tasks). The
effective speed is taken against the replay's ``speed_basis`` (``suanli.core.speed``): under
the default reference basis a GPU's own speed (V100 = 1.0); under a trace's native basis 1.0
on the GPU models the trace was recorded on (its durations as recorded) and ``speed /
s_native`` on any other.

``PolicySet``, ``check_feasible`` and ``ImpossibleJobError`` live in ``suanli.core.builder``
(the live control plane builds its scheduler there too) and are named here for callers of the
simulator.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from suanli.core.backfill import DEFAULT_DEPTH
from suanli.core.budget import BudgetBook
from suanli.core.builder import (
    ImpossibleJobError,
    PolicySet,
    Setting,
    build,
    check_admissible,
    check_feasible,
)
from suanli.core.decisions import (
    Admit,
    Demoted,
    JobPlacement,
    Preempt,
    Reason,
    Reject,
    Skip,
    apply,
)
from suanli.core.model import ClusterSpec, Job, SpecError
from suanli.core.pooling import MemoryPool
from suanli.core.preemption import PreemptionConfig
from suanli.core.scheduler import Scheduler
from suanli.core.seams import OrderContext
from suanli.core.speed import REFERENCE, SpeedBasis
from suanli.core.starts import RunningRow, for_runtime
from suanli.core.tenancy import TenancySpec
from suanli.core.view import ClusterView
from suanli.sim.attempts import FAILED, FINISHED, PREEMPTED, RUNNING, AttemptLog
from suanli.sim.explain import Explainer
from suanli.sim.failures import FailureClock, FailureModel
from suanli.sim.results import JobRecords, SimResult, Window, summarise
from suanli.sim.topology import BoundTopology, TopologyModel

PRESTAGE_STEP_S = 60.0
"""How often a replay with pre-staging asks which waiting jobs will start soon (seconds)."""

GC_FREEZE_JOBS = 20_000
"""Replays of at least this many jobs freeze the garbage collector's view of the heap."""


def simulate(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    policy: PolicySet,
    *,
    seed: int = 0,
    tenancy: TenancySpec | None = None,
    preemption: PreemptionConfig | None = None,
    cycle_interval: float = 0.0,
    until: float | None = None,
    ctx: OrderContext | None = None,
    progress: Callable[[int], None] | None = None,
    scheduler: type[Scheduler] = Scheduler,
    explain: Collection[str] = (),
    budgets: BudgetBook | None = None,
    admission: Mapping[str, Any] | None = None,
    backfill_depth: int = DEFAULT_DEPTH,
    speed_basis: SpeedBasis = REFERENCE,
    window: Window | None = None,
    start_estimates: bool = False,
    startup_s: float = 0.0,
    prestage: bool = False,
    failures: FailureModel | None = None,
    topology: TopologyModel | None = None,
    memory_pool: MemoryPool | None = None,
) -> SimResult:
    """Replay ``jobs`` on ``cluster`` under ``policy``; see the module docstring.

    ``cycle_interval`` 0 runs a cycle after every instant with an event; a positive value runs
    cycles only on multiples of it (arrivals and finishes wait for the next tick). ``until``
    stops the clock early; jobs not finished by then are reported as unfinished.
    ``progress`` is called now and then with the number of jobs that have arrived.
    ``scheduler`` is the scheduler class (a subclass may change the cycle, e.g. a baseline).
    ``tenancy`` puts every job under its queue's quota (``suanli.core.tenancy``);
    ``preemption`` lets the scheduler evict running jobs (``suanli.core.preemption``): a
    victim is requeued and resumes from its last checkpoint after the restart overhead.
    ``explain`` names jobs whose timelines to keep (``SimResult.explain``). ``budgets``
    (a fresh ``BudgetBook`` per run: it keeps the accounts) applies budgets' hard actions:
    refused jobs never run, demoted ones run in their new class (``SimResult.budget``).
    ``admission``: configured admission plugins, name -> configuration (the quota file's
    ``admission:`` section, e.g. ``user-limit``). The scheduler is built by
    ``suanli.core.builder.build``, as the live control plane's is. ``backfill_depth``: the
    pending jobs conservative backfill reserves for. ``speed_basis``: what the jobs'
    runtimes were measured on (``suanli.core.speed``): the reference basis (V100 = 1.0) by
    default; a trace's ``LoadedTrace.basis`` replays it at its recorded durations on its own
    GPU models and scales them on others. ``window``: what the summary measures
    (``suanli.sim.results.Window``; default: first to last arrival, all jobs).
    ``start_estimates``: estimate each job's start at its submission (``suanli.core.starts``,
    with the policy set's runtime estimator), kept in ``records.start_estimate``.
    ``startup_s``: seconds every attempt spends starting (pulling its image, staging its
    data) on the GPUs it was given, before its work begins. ``prestage``: prepare a job
    before its GPUs are free: every ``PRESTAGE_STEP_S`` the start-time plan is asked which
    pending jobs are expected to start within ``startup_s`` (plus a step), and each is staged
    from then on; a staged job starts with its start-up cut by the time it was staged (none
    left once it had ``startup_s``). ``records.startup_paid`` and ``records.startup_saved``
    say, per job, what its attempts spent and saved. ``failures``: GPUs, nodes and racks
    fail, are found and are repaired (``suanli.sim.failures``); the attempts they take down
    keep what their checkpoints saved before the failure and are queued again
    (``records.interruptions`` per job, ``records.failures`` the log and its cost).
    ``topology``: multi-GPU attempts run slower the farther apart their GPUs are
    (``suanli.sim.topology``; ``records.spread_gpu_s`` the GPU-seconds lost to it).
    ``memory_pool``: a whole-GPU job that asks for more memory than any GPU it may use has
    runs with its overflow on NVLink peers or in host memory, slower (``suanli.core.pooling``;
    ``records.pooled`` how each is served).
    """
    if not startup_s >= 0:
        raise SpecError(f"startup_s must be >= 0 seconds, got {startup_s}")
    if prestage and startup_s == 0:
        raise SpecError("prestage needs a start-up delay to save (startup_s > 0)")
    if cycle_interval < 0:
        raise SpecError(f"cycle_interval must be >= 0, got {cycle_interval}")
    setting = Setting(
        tenancy,
        ctx.priority_classes if ctx is not None else None,
        preemption,
        dict(admission or {}),
        backfill_depth,
    )
    pooled = None
    if memory_pool is not None:
        jobs, pooled = memory_pool.apply(jobs, cluster)
    check_feasible(cluster, jobs)
    check_admissible(cluster, jobs, setting)
    # A million-job replay holds millions of long-lived objects; without this, the cyclic
    # garbage collector re-traverses all of them again and again. Restored on the way out.
    # Not for small replays: the full collection before the freeze costs as much as the
    # process's whole heap (0.17 s in a process holding 400,000 objects), which a small
    # replay would pay on every call.
    freeze = len(jobs) >= GC_FREEZE_JOBS
    if freeze:
        gc.collect()
        gc.freeze()
    try:
        res = _run(
            cluster,
            jobs,
            policy,
            setting,
            seed,
            cycle_interval,
            until,
            progress,
            scheduler,
            explain,
            budgets,
            speed_basis,
            window,
            start_estimates,
            startup_s,
            prestage,
            failures,
            topology,
        )
    finally:
        if freeze:
            gc.unfreeze()
    res.records.pooled = pooled
    return res


__all__ = [
    "ImpossibleJobError",
    "PolicySet",
    "Replay",
    "check_admissible",
    "check_feasible",
    "simulate",
]


class Replay:
    """The simulator's applier (``suanli.core.decisions.Applier``): an ``Admit`` starts the
    job and schedules its finish, a ``Preempt`` stops it, keeps the work its checkpoints
    saved (``Preempt.kept_s``), counts what it lost (``Preempt.lost_gpu_s``) and requeues it,
    a ``Skip`` records the reason, a ``Reject`` or ``Demoted`` notes the budget's verdict."""

    def __init__(
        self,
        sched: Scheduler,
        cluster: ClusterSpec,
        jobs: list[Job],
        view: ClusterView,
        notes: Explainer,
        overhead: float,
        startup_s: float = 0.0,
    ) -> None:
        n = len(jobs)
        self.sched = sched
        self.cluster = cluster
        self.jobs = jobs
        self.index = {job.id: i for i, job in enumerate(jobs)}
        if len(self.index) != n:
            raise SpecError("job ids must be unique")
        self.util = [j.gpu_util for j in jobs]
        self.start = [math.nan] * n
        self.finish = [math.nan] * n
        self.placed_tasks = [0] * n
        self.held_milli = [0] * n
        self.used_nodes = [0] * n
        self.running: dict[int, JobPlacement] = {}
        self.finish_heap: list[tuple[float, int, int]] = []  # (time, sequence, job index)
        self.attempt_seq: dict[int, int] = {}  # running job index -> its finish event's sequence
        # Work left (seconds at effective speed 1 with all tasks), this attempt's start and rate,
        # preemptions and lost GPU-seconds per job.
        self.remaining = [j.runtime for j in jobs]
        self.attempt_start = [0.0] * n
        self.attempt_rate = [1.0] * n  # runtime seconds done per wall second in this attempt
        self.preempted = [0] * n
        self.lost_gpu_s = [0.0] * n
        self.interrupted = [0] * n  # attempts lost to hardware failures
        self.attempt_extra = [0.0] * n  # this attempt's restart and start-up seconds
        self.held_s = [0.0] * n  # seconds holding resources, over all attempts
        self.log = AttemptLog(view.node_model.tolist(), [m.name for m in view.models])
        self.waited: dict[int, Reason] = {}  # job index -> the last reason it was given
        self.budget_notes: dict[int, str] = {}  # job index -> refused or demoted, and why
        self.notes = notes
        self.explaining = bool(notes)  # a plain bool: tested at every decision
        self.overhead = overhead
        self.startup = startup_s
        self.staged: dict[int, float] = {}  # pending job index -> staged since
        self.startup_paid = [0.0] * n  # start-up seconds its attempts spent on their GPUs
        self.startup_saved = [0.0] * n  # start-up seconds staging saved them
        self.speeds = view.node_speed.tolist()
        self.topology: BoundTopology | None = None  # None: off
        self.slow = [1.0] * n  # this attempt's slowdown from its placement's spread
        self.spread_gpu_s = [0.0] * n  # GPU-seconds run slower than on the best placement
        self.seq = 0
        self.busy_milli = 0.0

    def add(self, job: Job) -> int:
        """Take ``job`` in after the replay began (a federation routes jobs to a member as
        they come): its index."""
        if job.id in self.index:
            raise SpecError(f"job {job.id} is in the replay already")
        i = self.index[job.id] = len(self.jobs)
        self.jobs.append(job)
        self.util.append(job.gpu_util)
        self.remaining.append(job.runtime)
        for arr, v in ((self.start, math.nan), (self.finish, math.nan), (self.placed_tasks, 0),
                       (self.held_milli, 0), (self.used_nodes, 0), (self.attempt_start, 0.0),
                       (self.attempt_rate, 1.0), (self.preempted, 0), (self.lost_gpu_s, 0.0),
                       (self.interrupted, 0), (self.attempt_extra, 0.0), (self.held_s, 0.0),
                       (self.startup_paid, 0.0), (self.startup_saved, 0.0), (self.slow, 1.0),
                       (self.spread_gpu_s, 0.0)):  # fmt: skip
            arr.append(v)  # type: ignore[attr-defined]
        return i

    def finished(self, i: int, t: float) -> None:
        """Job ``i``'s attempt ended at ``t`` (its finish event)."""
        p = self.running.pop(i)
        del self.attempt_seq[i]
        job = self.jobs[i]
        self.sched.release(p, job.id, t)
        # Its runtime is known now, and only now: a runtime predictor learns it at its end.
        self.sched.learn(job, job.runtime, t)
        self.finish[i] = t
        if self.topology is not None:
            self._spread(i, t, p)
        self.held_s[i] += t - self.attempt_start[i]
        self.log.add(i, self.attempt_start[i], t, p, FINISHED)
        if self.explaining:
            self.notes.note(job.id, t, "finished")
        self.busy_milli -= p.gpu_milli * self.util[i]

    def admit(self, d: Admit, t: float) -> None:
        job = d.job
        i = self.index[job.id]
        p = d.placement
        self.running[i] = p
        tasks = p.tasks
        placed = len(tasks)
        speeds = self.speeds
        if job.task.gpus == 0:
            speed = 1.0
        elif placed == 1:
            speed = speeds[tasks[0].node]
        else:
            speed = min([speeds[tp.node] for tp in tasks])
        if self.start[i] != self.start[i]:  # NaN: the first attempt
            self.start[i] = t
        self.placed_tasks[i] = placed
        self.held_milli[i] = p.gpu_milli
        self.used_nodes[i] = 1 if placed == 1 else len(p.nodes)
        self.busy_milli += p.gpu_milli * self.util[i]
        self.seq += 1
        rate = placed * speed / job.tasks
        if self.topology is not None:
            self.slow[i] = slow = self.topology.slowdown(job, p)
            rate /= slow
        extra = self.overhead if self.preempted[i] or self.interrupted[i] else 0.0
        if self.startup:
            since = self.staged.pop(i, None)
            saved = min(self.startup, t - since) if since is not None else 0.0
            extra += self.startup - saved
            self.startup_paid[i] += self.startup - saved
            self.startup_saved[i] += saved
        self.attempt_start[i] = t
        self.attempt_extra[i] = extra
        self.attempt_rate[i] = rate
        self.attempt_seq[i] = self.seq
        duration = self.remaining[i] / rate + extra
        heapq.heappush(self.finish_heap, (t + duration, self.seq, i))
        if self.explaining:
            self.notes.started(d, t, self.cluster)

    def preempt(self, d: Preempt, t: float) -> None:
        i = self.index[d.job.id]
        p = self.running.pop(i)
        del self.attempt_seq[i]
        self.busy_milli -= p.gpu_milli * self.util[i]
        # Work since the last checkpoint is lost; the rest is done for good.
        self.remaining[i] = max(0.0, self.remaining[i] - d.kept_s * self.attempt_rate[i])
        self.preempted[i] += 1
        self.lost_gpu_s[i] += d.lost_gpu_s
        if self.topology is not None:
            self._spread(i, t, p)
        self.held_s[i] += t - self.attempt_start[i]
        self.log.add(i, self.attempt_start[i], t, p, PREEMPTED)
        self.sched.submit(d.job, t, requeued=True)
        if self.explaining:
            self.notes.preempted(d, t)

    def _spread(self, i: int, t: float, p: JobPlacement) -> None:
        """The GPU-seconds attempt ``i`` (ending at ``t``) ran slower than it would have on
        the best placement."""
        worked = max(0.0, t - self.attempt_start[i] - self.attempt_extra[i])
        self.spread_gpu_s[i] += p.gpu_milli / 1000.0 * worked * (1.0 - 1.0 / self.slow[i])

    def interrupt(self, i: int, t: float, failed_at: float) -> float:
        """Job ``i``'s attempt is lost to a failure at ``failed_at``, found at ``t``: it
        keeps the work its checkpoints saved before ``failed_at`` and is queued again. The
        GPU-seconds it held that no checkpoint saved."""
        p = self.running.pop(i)
        del self.attempt_seq[i]
        job = self.jobs[i]
        start = self.attempt_start[i]
        self.busy_milli -= p.gpu_milli * self.util[i]
        worked = max(0.0, failed_at - start - self.attempt_extra[i])
        ci = job.checkpoint_interval
        kept = math.floor(worked / ci) * ci if ci else 0.0
        self.remaining[i] = max(0.0, self.remaining[i] - kept * self.attempt_rate[i])
        self.interrupted[i] += 1
        if self.topology is not None:
            self._spread(i, t, p)
        lost = p.gpu_milli / 1000.0 * max(0.0, t - start - kept)
        self.held_s[i] += t - start
        self.log.add(i, start, t, p, FAILED)
        self.sched.interrupted(job, p, t, failed_at)
        if self.explaining:
            self.notes.note(job.id, t, "interrupted: the hardware under it failed; requeued")
        return lost

    def skip(self, d: Skip, t: float) -> None:
        self.waited[self.index[d.job.id]] = d.reason
        if self.explaining:
            self.notes.pending(d.job.id, t, d.reason)

    def reject(self, d: Reject, t: float) -> None:
        self.budget_notes[self.index[d.job.id]] = str(d)
        if self.explaining:
            self.notes.note(d.job.id, t, str(d))
            self.notes.waiting.discard(d.job.id)

    def demote(self, d: Demoted, t: float) -> None:
        i = self.index[d.job.id]
        self.budget_notes[i] = str(d)
        self.jobs[i] = d.job  # it runs (and is reported) in its new class


def _hardware(clock: FailureClock, rep: Replay, view: ClusterView, t: float) -> None:
    """The failure clock's next event, at ``t``: a failure found (its attempts interrupted,
    its nodes out of service) or a repair (its nodes back)."""
    what = clock.pop()
    if isinstance(what, int):  # a repair
        for node in clock.back(what):
            view.set_health(node, True)
        return
    hit, gpu = set(what.nodes), what.gpu
    victims = [
        i for i, p in rep.running.items()
        if any(tp.node in hit and (gpu < 0 or gpu in tp.gpus) for tp in p.tasks)
    ]  # fmt: skip
    clock.taken_out(what, t, len(victims))
    for i in sorted(victims):
        clock.log.lost_gpu_s += rep.interrupt(i, t, what.at)
    for node in what.nodes:
        view.set_health(node, False)


def _run(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    policy: PolicySet,
    setting: Setting,
    seed: int,
    cycle_interval: float,
    until: float | None,
    progress: Callable[[int], None] | None,
    scheduler: type[Scheduler],
    explain: Collection[str] = (),
    budgets: BudgetBook | None = None,
    speed_basis: SpeedBasis = REFERENCE,
    window: Window | None = None,
    start_estimates: bool = False,
    startup_s: float = 0.0,
    prestage: bool = False,
    failures: FailureModel | None = None,
    topology: TopologyModel | None = None,
) -> SimResult:
    wall0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    view = ClusterView(cluster, speed_basis)
    sched = build(view, policy, setting, budgets=budgets, scheduler=scheduler)
    preemption = setting.preemption
    n = len(jobs)
    times = np.fromiter((j.submit for j in jobs), dtype=np.float64, count=n)
    if not bool((np.diff(times) > 0).all()):  # already in (submit, id) order when strictly rising
        jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
    # The replay's own list: demotions change it.
    jobs = list(jobs) if budgets is not None or not isinstance(jobs, list) else jobs
    notes = Explainer(explain)
    rep = Replay(
        sched,
        cluster,
        jobs,
        view,
        notes,
        preemption.restart_overhead if preemption is not None else 0.0,
        startup_s,
    )
    if topology is not None:
        rep.topology = topology.bind(cluster)
    submit = [j.submit for j in jobs]
    quantile = getattr(sched.runtime, "quantile", None)
    p50 = np.full(n, np.nan)
    p90 = np.full(n, np.nan)
    starts, teach = (
        for_runtime(view, sched.runtime) if start_estimates or prestage else (None, None)
    )
    next_stage = -math.inf
    lead = startup_s + PRESTAGE_STEP_S
    staged = rep.staged
    est_early = np.full(n, np.nan)
    est_late = np.full(n, np.nan)
    arrived: list[int] = []  # jobs submitted at this instant (when estimating starts)
    start = rep.start
    pending = sched.lanes.pending

    def running_rows() -> list[RunningRow]:
        return [(jobs[i], rep.attempt_start[i], p) for i, p in rep.running.items()]

    explaining = rep.explaining
    clock = FailureClock(failures, cluster) if failures is not None else None
    finish_heap = rep.finish_heap
    attempt_seq = rep.attempt_seq

    s_t: list[float] = []
    s_alloc: list[int] = []
    s_busy: list[float] = []
    s_pending: list[int] = []
    cycles = decisions = 0
    nxt = 0
    end = math.inf if until is None else until
    last_report = 0
    inf = math.inf

    while True:
        t_arr = submit[nxt] if nxt < n else inf
        t_fin = finish_heap[0][0] if finish_heap else inf
        t = t_arr if t_arr < t_fin else t_fin
        # Failures matter while there is work: one to come, running or waiting.
        t_hw = (
            clock.next_at if clock is not None and (nxt < n or rep.running or len(sched)) else inf
        )
        if t_hw < t:
            t = t_hw
        if cycle_interval == 0 and len(sched):
            t = min(t, sched.wake_at)  # e.g. a protection that kept a job from evicting ends
        t_tick = inf
        if cycle_interval > 0 and len(sched):
            t_tick = (math.floor(s_t[-1] / cycle_interval) + 1) * cycle_interval if s_t else 0.0
            t = min(t, t_tick)
        if t == inf or t > end:
            break
        # Finishes first, then failures and repairs, then arrivals: capacity freed at t is
        # visible to jobs arriving at t.
        while finish_heap and finish_heap[0][0] == t:
            _, fseq, i = heapq.heappop(finish_heap)
            if attempt_seq.get(i) != fseq:
                continue  # the attempt this event was for was preempted or interrupted
            rep.finished(i, t)
            if starts is not None:
                job = jobs[i]
                starts.learn(job, job.runtime)
                if teach is not None:
                    teach(job, job.runtime, t)
        if t_hw == t:
            assert clock is not None
            while clock.next_at == t:
                _hardware(clock, rep, view, t)
        while nxt < n and submit[nxt] == t:
            told = sched.submit(jobs[nxt], t)
            if quantile is not None:
                # What the predictor says at submission: it has learned only jobs ended by t.
                p50[nxt] = quantile(jobs[nxt], 0.5)
                p90[nxt] = quantile(jobs[nxt], 0.9)
            if explaining:
                notes.submitted(jobs[nxt].id, t)
            if told is not None:
                apply((told,), rep, t)
            if start_estimates:
                arrived.append(nxt)
            nxt += 1
        if cycle_interval > 0 and t != t_tick:
            # An instant that lands exactly on a tick is that tick (the queue may have been
            # empty when the next tick was worked out).
            t_tick = math.floor(t / cycle_interval) * cycle_interval
        # A cycle with nothing pending has nothing to decide: it is not run.
        if len(sched) and (cycle_interval == 0 or t == t_tick):
            cycles += 1
            out = sched.cycle(rng, t)
            decisions += len(out)
            apply(out, rep, t)
            if starts is not None:
                for d in out:
                    if type(d) is Admit:
                        starts.started(d.job.id, t)
        if arrived:
            # Each job's start as estimated when it came (after this instant's cycle: one
            # that started at once has its start).
            waiting = []
            for i in arrived:
                if start[i] == start[i]:
                    est_early[i] = est_late[i] = start[i]
                elif jobs[i].id in pending:
                    waiting.append(jobs[i])
            if waiting:
                assert starts is not None
                got = starts.estimate(t, running_rows, sched.pending_jobs, waiting)
                index = rep.index
                for jid, e in got.items():
                    est_early[index[jid]] = e.p50
                    est_late[index[jid]] = e.p90
            arrived.clear()
        if prestage and t >= next_stage and len(sched):
            # Which waiting jobs will start soon, by the plan (made again as it is due): each
            # is staged from now until it starts.
            assert starts is not None
            next_stage = t + PRESTAGE_STEP_S
            index = rep.index
            for jid, e in starts.estimate(t, running_rows, sched.pending_jobs).items():
                if e.p50 <= t + lead:
                    staged.setdefault(index[jid], t)
        if explaining:
            notes.after_cycle(t, sched.reason)
        s_t.append(t)
        s_alloc.append(view.allocated_milli)
        s_busy.append(rep.busy_milli)
        s_pending.append(len(sched))
        if progress is not None and nxt - last_report >= 5000:
            last_report = nxt
            progress(nxt)

    rec = JobRecords.empty(jobs)
    finish, running, log = rep.finish, rep.running, rep.log
    index = rep.index
    rec.start = np.array(start)
    rec.finish = np.array(finish)
    rec.tasks = np.array(rep.placed_tasks, dtype=np.int64)
    rec.gpu_milli = np.array(rep.held_milli, dtype=np.int64)
    rec.nodes = np.array(rep.used_nodes, dtype=np.int64)
    rec.held_s = np.array(rep.held_s)
    # Attempts still running when the clock stopped end there (what they held is metered).
    stop = end if until is not None else (s_t[-1] if s_t else 0.0)
    for i, p in running.items():
        log.add(i, rep.attempt_start[i], max(stop, rep.attempt_start[i]), p, RUNNING)
    rec.attempts, rec.use = log.arrays()
    rec.waited = rep.waited
    if quantile is not None:
        rec.predicted = (p50, p90)
    rec.train_s = float(getattr(sched.runtime, "train_seconds", 0.0))
    rec.fits = int(getattr(sched.runtime, "fits", 0))
    if start_estimates:
        rec.start_estimate = (est_early, est_late)
    if startup_s:
        rec.startup_paid = np.array(rep.startup_paid)
        rec.startup_saved = np.array(rep.startup_saved)
    rec.budget = rep.budget_notes
    if preemption is not None:
        rec.preemptions = np.array(rep.preempted, dtype=np.int64)
        rec.lost_gpu_s = np.array(rep.lost_gpu_s)
    if topology is not None:
        rec.spread_gpu_s = np.array(rep.spread_gpu_s)
        rec.slowdown = np.array(rep.slow)
    if clock is not None:
        clock.close(stop)
        rec.interruptions = np.array(rep.interrupted, dtype=np.int64)
        rec.failures = clock.log
    for job in sched.pending_jobs():
        r = sched.reason(job.id)
        if r is not None:
            rec.reason[index[job.id]] = str(r)
        if explaining:
            notes.note(job.id, stop, f"still pending: {r}" if r is not None else "still pending")
    if progress is not None:
        progress(nxt)
    wall = time.perf_counter() - wall0
    return summarise(
        label=policy.label,
        cluster=cluster,
        jobs=jobs,
        rec=rec,
        series=(np.array(s_t), np.array(s_alloc), np.array(s_busy), np.array(s_pending)),
        end=None if until is None else until,
        cycles=cycles,
        decisions=decisions,
        wall_s=wall,
        explain=notes.events,
        budget_alerts=[str(a) for a in budgets.alerts] if budgets is not None else [],
        window=window,
    )
