"""The trace-driven, event-driven simulator: the policy core on a simulated clock.

Events are arrivals (from the submit-sorted job list), finishes (a heap keyed
``(time, sequence)``) and, with a cycle interval, scheduler ticks. All events at one
instant are applied (finishes before arrivals), then one scheduling cycle runs and its
decisions are applied: an ``Admit`` starts the job now and schedules its finish. The same
seed gives the same decisions, event for event.

A job's duration: ``runtime × tasks / started_tasks / speed``, where ``speed`` is the slowest
GPU model of its placement (1.0 for CPU-only tasks).
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from suanli.core.decisions import Admit, JobPlacement
from suanli.core.model import ClusterSpec, Job, SpecError
from suanli.core.registry import create
from suanli.core.scheduler import Scheduler
from suanli.core.seams import OrderContext
from suanli.core.view import ClusterView
from suanli.sim.results import JobRecords, SimResult, summarise


class ImpossibleJobError(SpecError):
    """A job that could not run even on the empty cluster."""


@dataclass(frozen=True, slots=True)
class PolicySet:
    """One combination of policies to simulate, by registry name."""

    queue: str = "fifo"
    placement: str = "best-fit"
    strict: bool = False

    @property
    def label(self) -> str:
        return f"{self.queue}{'/strict' if self.strict else ''}+{self.placement}"

    @classmethod
    def parse(cls, text: str) -> PolicySet:
        """``QUEUE[/strict]+PLACEMENT``, e.g. ``fifo/strict+first-fit`` or ``priority+best-fit``."""
        parts = [p.strip() for p in text.split("+")]
        if len(parts) != 2 or not all(parts):
            raise SpecError(f"policy set {text!r}: expected QUEUE[/strict]+PLACEMENT")
        queue, _, mode = (p.strip() for p in parts[0].partition("/"))
        if mode not in ("", "strict", "skip"):
            raise SpecError(f"policy set {text!r}: mode must be 'strict' or 'skip', got {mode!r}")
        return cls(queue=queue, placement=parts[1], strict=mode == "strict")


def check_feasible(cluster: ClusterSpec, jobs: Sequence[Job]) -> None:
    """Raise ``ImpossibleJobError`` for the first job that cannot fit the empty cluster."""
    view = ClusterView(cluster)
    seen: set[tuple[object, int]] = set()
    for job in jobs:
        key = (job.task, job.min_tasks)
        if key in seen:
            continue
        seen.add(key)
        k = view.fit_counts(job.task, job.min_tasks)
        if int(k.sum()) < job.min_tasks:
            t = job.task
            models = "|".join(sorted(t.gpu_models)) or "any"
            raise ImpossibleJobError(
                f"job {job.id} can never run on cluster {cluster.name}: {job.min_tasks} task(s) of "
                f"{t.gpus} GPU(s) × {t.gpu_milli} milli ({models}), {t.cpu_milli} mCPU, "
                f"{t.memory_mib} MiB; the empty cluster fits {int(k.sum())}"
            )


def simulate(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    policy: PolicySet,
    *,
    seed: int = 0,
    cycle_interval: float = 0.0,
    until: float | None = None,
    ctx: OrderContext | None = None,
    progress: Callable[[int], None] | None = None,
    scheduler: type[Scheduler] = Scheduler,
) -> SimResult:
    """Replay ``jobs`` on ``cluster`` under ``policy``; see the module docstring.

    ``cycle_interval`` 0 runs a cycle after every instant with an event; a positive value runs
    cycles only on multiples of it (arrivals and finishes wait for the next tick). ``until``
    stops the clock early; jobs not finished by then are reported as unfinished.
    ``progress`` is called now and then with the number of jobs that have arrived.
    ``scheduler`` is the scheduler class (a subclass may change the cycle, e.g. a baseline).
    """
    if cycle_interval < 0:
        raise SpecError(f"cycle_interval must be >= 0, got {cycle_interval}")
    check_feasible(cluster, jobs)
    # A million-job replay holds millions of long-lived objects; without this, the cyclic
    # garbage collector re-traverses all of them again and again. Restored on the way out.
    gc.collect()
    gc.freeze()
    try:
        return _run(cluster, jobs, policy, seed, cycle_interval, until, ctx, progress, scheduler)
    finally:
        gc.unfreeze()


def _run(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    policy: PolicySet,
    seed: int,
    cycle_interval: float,
    until: float | None,
    ctx: OrderContext | None,
    progress: Callable[[int], None] | None,
    scheduler: type[Scheduler],
) -> SimResult:
    wall0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    view = ClusterView(cluster)
    sched = scheduler(
        view,
        create("queue", policy.queue),
        create("placement", policy.placement),
        strict=policy.strict,
        ctx=ctx,
    )
    n = len(jobs)
    times = np.fromiter((j.submit for j in jobs), dtype=np.float64, count=n)
    if not bool((np.diff(times) > 0).all()):  # already in (submit, id) order when strictly rising
        jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
    index = {job.id: i for i, job in enumerate(jobs)}
    if len(index) != n:
        raise SpecError("job ids must be unique")
    submit = [j.submit for j in jobs]
    util = [j.gpu_util for j in jobs]
    rec = JobRecords.empty(jobs)
    start = [math.nan] * n
    finish = [math.nan] * n
    placed_tasks = [0] * n
    held_milli = [0] * n
    used_nodes = [0] * n
    running: dict[int, JobPlacement] = {}
    finish_heap: list[tuple[float, int, int]] = []  # (time, sequence, job index)
    seq = 0
    busy_milli = 0.0

    s_t: list[float] = []
    s_alloc: list[int] = []
    s_busy: list[float] = []
    s_pending: list[int] = []
    cycles = decisions = 0
    nxt = 0
    end = math.inf if until is None else until
    last_report = 0
    speeds = view.node_speed.tolist()
    inf = math.inf

    while True:
        t_arr = submit[nxt] if nxt < n else inf
        t_fin = finish_heap[0][0] if finish_heap else inf
        t = t_arr if t_arr < t_fin else t_fin
        t_tick = inf
        if cycle_interval > 0 and len(sched):
            t_tick = (math.floor(s_t[-1] / cycle_interval) + 1) * cycle_interval if s_t else 0.0
            t = min(t, t_tick)
        if t == inf or t > end:
            break
        # Finishes first, then arrivals: capacity freed at t is visible to jobs arriving at t.
        while finish_heap and finish_heap[0][0] == t:
            i = heapq.heappop(finish_heap)[2]
            p = running.pop(i)
            sched.release(p)
            finish[i] = t
            busy_milli -= p.gpu_milli * util[i]
        while nxt < n and submit[nxt] == t:
            sched.submit(jobs[nxt])
            nxt += 1
        if cycle_interval > 0 and t != t_tick:
            # An instant that lands exactly on a tick is that tick (the queue may have been
            # empty when the next tick was worked out).
            t_tick = math.floor(t / cycle_interval) * cycle_interval
        # A cycle with nothing pending has nothing to decide: it is not run.
        if len(sched) and (cycle_interval == 0 or t == t_tick):
            cycles += 1
            for d in sched.cycle(rng):
                decisions += 1
                if type(d) is Admit:
                    job = d.job
                    i = index[job.id]
                    p = d.placement
                    running[i] = p
                    tasks = p.tasks
                    placed = len(tasks)
                    if job.task.gpus == 0:
                        speed = 1.0
                    elif placed == 1:
                        speed = speeds[tasks[0].node]
                    else:
                        speed = min([speeds[tp.node] for tp in tasks])
                    start[i] = t
                    placed_tasks[i] = placed
                    held_milli[i] = p.gpu_milli
                    used_nodes[i] = 1 if placed == 1 else len(p.nodes)
                    busy_milli += p.gpu_milli * util[i]
                    seq += 1
                    duration = job.runtime * job.tasks / placed / speed
                    heapq.heappush(finish_heap, (t + duration, seq, i))
        s_t.append(t)
        s_alloc.append(view.allocated_milli)
        s_busy.append(busy_milli)
        s_pending.append(len(sched))
        if progress is not None and nxt - last_report >= 5000:
            last_report = nxt
            progress(nxt)

    rec.start = np.array(start)
    rec.finish = np.array(finish)
    rec.tasks = np.array(placed_tasks, dtype=np.int64)
    rec.gpu_milli = np.array(held_milli, dtype=np.int64)
    rec.nodes = np.array(used_nodes, dtype=np.int64)
    for job in sched.pending_jobs():
        r = sched.reason(job.id)
        if r is not None:
            rec.reason[index[job.id]] = str(r)
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
    )
