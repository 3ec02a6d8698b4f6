"""Elastic jobs live: growing them into idle GPUs, shrinking them for jobs that wait
(``Resizer``, a part of ``suanli.control.loop.Controller``).

An elastic job (``JobSpec.elastic``: ``max_workers > min_workers``; a worker is one task)
starts as any job, on as few as ``min_workers`` tasks when no more are free (the core's gang
minimum). While it runs, two phases of each pass resize it, decisions first (the core's pure
plans, ``suanli.core.elastic``), then each applied under the job's guard:

1. **Shrink** (before the cycle, so that a shrink comes before any preemption): a pending job
   the cluster has no room for now (it does not fit the view, and its reason, if any, is a
   lack of capacity) takes workers from running elastic jobs, in ``plan_shrink``'s order
   (lowest priority first, the worker that saves least runtime first): down to their
   ``min_workers`` for a job of a higher priority class, down to their requested ``tasks``
   for any other (workers beyond it were only lent from idle GPUs). Workers are taken one at
   a time on a what-if of the view until the pending job fits; if it never does, nothing is
   taken. The cycle then admits it on the freed GPUs, and its launch waits until the removed
   tasks have exited.
2. **Grow** (after the cycle): when no pending job lacks capacity (every one is held back
   for another reason, or none waits) and no GPU is draining, running elastic jobs grow into
   the idle whole GPUs by ``plan_growth`` (the GPU goes to the job whose remaining runtime it
   shortens most, only when the saving beats ``ControlConfig.resize_cost_s``); the new tasks
   are placed by the scheduler's placement policy.

Applying a resize, store first: one transaction gives back the claims of the tasks removed
or takes those of the tasks added (the database refuses a double claim), rewrites the
attempt's placement (every task it ever ran, with ``from_ms``/``until_ms``, which metering
cuts its segments at) and adds a ``resized`` event (from, to, why). Then the scheduler's
accounting (the attempt's placement released and restored at its new size) and the
backend: a shrink stops the highest ranks first, with the job's stop signal and grace, and
tells the survivors their new layout only once those have exited; a grow starts the new
tasks (the next ranks) with their elastic file written and tells the others at once. To
tell is ``Backend.resize``: the task's elastic file rewritten atomically, then ``SIGUSR1``.
The contract a task keeps is in docs/serve.md ("Elastic jobs").

One resize per job at a time: a job with tasks still stopping from a shrink is not resized
again until they have exited.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from suanli.backends.base import Elastic, Launch, Outcome, rendezvous_port
from suanli.control.attempts import LiveAttempt, one_line, to_ms
from suanli.core.decisions import JobPlacement, NoCapacity
from suanli.core.elastic import ElasticRange, Resizable, parse_speedup, plan_growth, plan_shrink
from suanli.core.gang import place_job
from suanli.core.model import MILLI, Job
from suanli.core.policies.runtime_estimate import DEFAULT_ESTIMATE
from suanli.core.view import TaskPlacement
from suanli.store import jobs as js

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control.resize")

MAX_SHRINK_TRIES = 8
"""Pending jobs a pass tries to make room for by shrinking (the first in queue order that
do not fit): a queue of thousands costs no more than these."""


@dataclass(frozen=True, slots=True)
class Resize:
    """A decision: attempt ``key`` of an elastic job runs on ``workers`` tasks from now, for
    ``why``; a grow's new tasks go on ``add``."""

    key: tuple[str, int]
    workers: int
    why: str
    add: tuple[TaskPlacement, ...] = ()


def remaining_s(live: LiveAttempt, now: float) -> float:
    """The job's remaining work, in seconds at its requested size: its estimate (else its
    maximum runtime, else the core's default estimate, 24 h) minus the time it has run."""
    spec = live.spec
    est = spec.estimate or spec.max_runtime or DEFAULT_ESTIMATE
    return max(0.0, est - (now - (live.started_at if live.started_at is not None else now)))


class Resizer:
    """The resizing half of ``Controller`` (see the module docstring); no state of its own."""

    # ------------------------------------------------------------------ what may resize
    def _resizable(self: Controller, live: LiveAttempt) -> bool:
        """Running, elastic, every task launched, none stopping from an earlier shrink."""
        return (
            live.spec.elastic
            and live.state == "running"
            and not live.retiring
            and all(s in live.handles for s in live.slots)
            and not any(s in live.exits for s in live.slots)
        )

    def _as_resizable(
        self: Controller, live: LiveAttempt, now: float, floor: int | None = None
    ) -> Resizable:
        r = live.spec.workers
        lo = r.min_workers if floor is None else max(r.min_workers, min(floor, r.requested))
        return Resizable(
            live.job.id,
            ElasticRange(lo, r.max_workers, r.requested),
            len(live.slots),
            parse_speedup(live.spec.speedup),
            remaining_s(live, now),
            self.sched.ctx.priority(live.job),
        )

    def _fits(self: Controller, job: Job) -> bool:
        return int(self.view.fit_counts(job.task, job.tasks).sum()) >= job.min_tasks

    # ------------------------------------------------------------------ 1. shrink
    def _shrink_for_waiting(self: Controller, now: float) -> None:
        """Phase 1 (see the module docstring): decide, then apply each under its guard."""
        try:
            decided = self._plan_shrinks(now)
        except Exception:  # noqa: BLE001 - planning must not stop scheduling
            log.exception("elastic: shrink planning failed; scheduling goes on")
            return
        for d in decided:
            live = self.live.get(d.key)
            if live is not None and self._resizable(live):
                with self._guard(live.job.id, "shrinking it"):
                    self._shrink(live, d.workers, d.why, now)

    def _plan_shrinks(self: Controller, now: float) -> list[Resize]:
        elastic = [
            a for a in self.live.values()
            if self._resizable(a) and len(a.slots) > a.spec.workers.min_workers
        ]  # fmt: skip
        if not elastic or not len(self.sched):
            return []
        prio = self.sched.ctx.priority
        lowest = min(prio(a.job) for a in elastic)
        lent = any(len(a.slots) > a.spec.tasks for a in elastic)
        tries = 0
        for job in self.sched.pending_jobs():
            p = prio(job)
            if p <= lowest and not lent:
                continue  # nothing it may take
            why = self.sched.reason(job.id)
            if why is not None and not isinstance(why, NoCapacity):
                continue  # held back by something shrinking cannot change (a quota, say)
            if self._fits(job):
                continue  # the cycle admits it as things are
            tries += 1
            plan = self._room_for(job, p, elastic, now)
            if plan:
                return plan  # one waiting job a pass: the next sees it admitted
            if tries >= MAX_SHRINK_TRIES:
                break
        return []

    def _room_for(
        self: Controller, job: Job, p: int, elastic: list[LiveAttempt], now: float
    ) -> list[Resize]:
        """The shrinks that make ``job`` fit, found on a what-if of the view (given back
        before returning), or none if no shrink within the rules makes it fit."""
        prio = self.sched.ctx.priority
        by_id = {a.job.id: a for a in elastic}
        sizes = {a.job.id: len(a.slots) for a in elastic}
        floors = {
            a.job.id: a.spec.workers.min_workers if p > prio(a.job) else a.spec.tasks
            for a in elastic
        }
        released: list[TaskPlacement] = []
        try:
            while not self._fits(job):
                cands = [
                    replace(self._as_resizable(by_id[j], now, floors[j]), workers=n)
                    for j, n in sizes.items()
                    if n > floors[j]
                ]
                plan, freed = plan_shrink(cands, 1)
                if not freed:
                    return []
                ((jid, n),) = plan.items()
                tp = by_id[jid].placement.tasks[n]  # the highest rank left
                self.view.release(tp)
                released.append(tp)
                sizes[jid] = n
        finally:
            for tp in reversed(released):
                self.view.allocate(tp)
        why = f"for job {job.id} ({job.priority_class}), which waits for GPUs"
        return [
            Resize(by_id[j].key, n, why)
            for j, n in sorted(sizes.items())
            if n != len(by_id[j].slots)
        ]

    # ------------------------------------------------------------------ 2. grow
    def _grow_into_idle(self: Controller, now: float) -> None:
        """Phase 2 (see the module docstring): decide, then apply each under its guard."""
        try:
            decided = self._plan_growth(now)
        except Exception:  # noqa: BLE001 - planning must not stop scheduling
            log.exception("elastic: growth planning failed; scheduling goes on")
            return
        for d in decided:
            live = self.live.get(d.key)
            if live is not None and self._resizable(live):
                with self._guard(live.job.id, "growing it"):
                    self._grow(live, d.add, d.why, now)

    def _plan_growth(self: Controller, now: float) -> list[Resize]:
        if self.draining:
            return []  # freed GPUs are someone's already, once their tasks have exited
        # A job without GPUs has no idle GPUs to grow into.
        growable = [
            a for a in self.live.values()
            if self._resizable(a) and a.job.task.gpus > 0
            and len(a.slots) < a.spec.workers.max_workers
        ]  # fmt: skip
        if not growable:
            return []
        view = self.view
        free = int(((view.gpu_free_milli == MILLI) & view.gpu_exists).sum())
        if free == 0:
            return []
        for job in self.sched.pending_jobs():
            why = self.sched.reason(job.id)
            if why is None or isinstance(why, NoCapacity):
                return []  # it could use them: idle GPUs are not idle for long
        plan = plan_growth(
            [self._as_resizable(a, now) for a in growable], free, self.config.resize_cost_s
        )
        by_id = {a.job.id: a for a in growable}
        out: list[Resize] = []
        mark = view.checkpoint()
        try:
            for jid in sorted(plan):
                a = by_id[jid]
                extra = plan[jid] - len(a.slots)
                more = replace(a.job, id=f"{jid}+", tasks=extra, gang_min=1)
                placed, _, _ = place_job(view, more, self.sched.placement, self.rng)
                if placed is None:
                    continue
                n = len(a.slots) + len(placed.tasks)
                out.append(Resize(a.key, n, f"into {len(placed.tasks)} idle GPU(s)",
                                  placed.tasks))  # fmt: skip
        finally:
            view.rollback(mark)
        return out

    # ------------------------------------------------------------------ applying
    def _entry(self: Controller, live: LiveAttempt, slot: int, tp: TaskPlacement) -> dict[str, Any]:
        e = self._task_json(slot, tp)
        if slot in live.joined_ms:
            e["from_ms"] = live.joined_ms[slot]
        return e

    def _stored_placement(
        self: Controller, live: LiveAttempt, slots: list[int], tasks: tuple[TaskPlacement, ...],
        left: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:  # fmt: skip
        now = [self._entry(live, s, tp) for s, tp in zip(slots, tasks, strict=True)]
        return sorted([*left, *now], key=lambda e: int(e["task"]))

    def _reaccount(self: Controller, live: LiveAttempt, new: JobPlacement, now: float) -> None:
        """The scheduler's view, ledgers and running set: ``live`` runs on ``new`` from now
        (a resize restarts its work from its checkpoint, as the core's elastic model has it)."""
        self.sched.release(live.placement, live.job.id, now)
        job = live.job
        wide = replace(job, tasks=max(job.tasks, len(new.tasks)))
        self.sched.restore(wide, new, now)

    def _shrink(self: Controller, live: LiveAttempt, n: int, why: str, now: float) -> None:
        """Run ``live`` on its first ``n`` ranks: store, scheduler, then stop the others."""
        old = len(live.slots)
        assert live.spec.workers.min_workers <= n < old, (n, old)
        ms = to_ms(now)
        gone = list(zip(live.slots[n:], live.placement.tasks[n:], strict=True))
        left = [*live.left, *({**self._entry(live, s, tp), "until_ms": ms} for s, tp in gone)]
        keep = live.placement.tasks[:n]
        stored = self._stored_placement(live, live.slots[:n], keep, left)
        detail = one_line(f"attempt {live.attempt}: from {old} to {n} workers, {why}")
        with self.store.begin() as conn:
            js.resize_attempt(conn, live.job.id, live.attempt, stored, left=[s for s, _ in gone],
                              joined=[], now_ms=ms, detail=detail)  # fmt: skip
        new = JobPlacement.of(keep)
        self._reaccount(live, new, now)
        live.placement, live.slots, live.left = new, live.slots[:n], left
        live.retiring.update(gone)
        live.generation += 1
        for s, _ in gone:
            for g in _gpus(live, s):
                self.draining.setdefault(g, set()).add(live.key)
        if self.metrics is not None:
            self.metrics.resized(live.job.queue, live.job.tenant, "shrink")
        log.info("job %s: %s", live.job.id, detail)
        for s, _ in reversed(gone):  # the highest ranks first
            h = live.handles.get(s)
            if h is not None:
                self.backend.stop(h, Outcome.PREEMPTED)
            else:
                self._retire(live, s, now)

    def _retire(self: Controller, live: LiveAttempt, slot: int, now: float) -> None:
        """Task ``slot``, removed by a shrink, has exited: its GPUs are free; once the last
        removed task has, the survivors are told their new layout."""
        tp = live.retiring.pop(slot)
        live.handles.pop(slot, None)
        for g in [(tp.node, x) for x in tp.gpus]:
            holders = self.draining.get(g)
            if holders is not None:
                holders.discard(live.key)
                if not holders:
                    del self.draining[g]
        if not live.retiring and live.state == "running":
            self._tell(live, range(len(live.slots)))

    def _grow(
        self: Controller, live: LiveAttempt, add: tuple[TaskPlacement, ...], why: str, now: float
    ) -> None:
        """Add tasks on ``add`` (the next ranks): store, scheduler, launch them, tell the
        others."""
        old = len(live.slots)
        ms = to_ms(now)
        first = live.next_slot
        new_slots = list(range(first, first + len(add)))
        for s in new_slots:
            live.joined_ms[s] = ms
        slots = [*live.slots, *new_slots]
        tasks = (*live.placement.tasks, *add)
        stored = self._stored_placement(live, slots, tasks, live.left)
        n = len(slots)
        detail = one_line(f"attempt {live.attempt}: from {old} to {n} workers, {why}")
        try:
            with self.store.begin() as conn:
                js.resize_attempt(conn, live.job.id, live.attempt, stored, left=[],
                                  joined=new_slots, now_ms=ms, detail=detail)  # fmt: skip
        except sa.exc.IntegrityError as e:
            # The database refused a claim: the view and the store disagree. Do not grow.
            log.error("job %s: growth refused by the database: %s", live.job.id, e.orig)
            for s in new_slots:
                live.joined_ms.pop(s, None)
            return
        new = JobPlacement.of(tasks)
        self._reaccount(live, new, now)
        live.placement, live.slots = new, slots
        live.generation += 1
        if self.metrics is not None:
            self.metrics.resized(live.job.queue, live.job.tenant, "grow")
        log.info("job %s: %s", live.job.id, detail)
        launched = self._launch_tasks(live, new_slots)
        if launched < len(new_slots):
            # A task that could not start is taken out again (and any after it).
            self._shrink(live, old + launched, "its new tasks could not start", now)
            return
        self._tell(live, range(old))
        with self.store.begin() as conn:
            js.attempt_handles(conn, live.job.id, live.attempt,
                               [h.to_json() for h in live.handles.values()])  # fmt: skip

    def _launch_tasks(self: Controller, live: LiveAttempt, slots: list[int]) -> int:
        """Launch the tasks ``slots`` of a running elastic attempt; how many started (in
        order: the first that fails stops the rest)."""
        for i, s in enumerate(slots):
            try:
                live.handles[s] = self.backend.launch(self._launch_spec(live, s))
            except Exception as e:  # noqa: BLE001 - the job goes on with the tasks it has
                log.error("job %s: task %d of a resize failed to launch: %s",
                          live.job.id, s, e)  # fmt: skip
                return i
        return len(slots)

    def _launch_spec(self: Controller, live: LiveAttempt, slot: int) -> Launch:
        """What the backend runs for task ``slot`` of ``live`` (at its rank)."""
        spec, config = live.spec, self.config
        rank = live.slots.index(slot)
        tp = live.placement.tasks[rank]
        fractional = 0 < tp.gpu_milli < 1000
        elastic = (len(live.slots), rank, live.generation) if spec.elastic else None
        rendezvous = self._rendezvous(live, rank) if len(live.slots) > 1 else None
        limit = spec.max_runtime
        if limit is not None and slot in live.joined_ms and live.started_at is not None:
            # A task added later ends with the attempt's limit, not a whole one of its own.
            limit = max(0.001, limit - (self.clock() - live.started_at))
        return Launch(
            job_id=live.job.id,
            attempt=live.attempt,
            task=slot,
            command=tuple(spec.command),
            env=tuple(sorted(spec.env.items())),
            cwd=spec.workdir,
            gpus=tp.gpus,
            gpu_milli=tp.gpu_milli if fractional else 0,
            gpu_memory_mib=tp.gpu_memory_mib if fractional else 0,
            checkpoint_dir=spec.checkpoint_dir,
            max_runtime_s=limit,
            stop_signal=spec.stop_signal,
            grace_s=spec.grace,
            run_as=config.run_as(live.job.tenant),
            allowed_env=config.allowed_env,
            log_max_bytes=config.log_max_bytes,
            log_min_free_bytes=config.log_min_free_bytes,
            elastic=elastic,
            rendezvous=rendezvous,
            node=self.node_names[tp.node],
            cpu_milli=tp.cpu_milli,
            memory_mib=tp.memory_mib,
        )

    def _rendezvous(
        self: Controller, live: LiveAttempt, rank: int
    ) -> tuple[int, int, int, int, str, int]:
        """Task ``rank``'s view of its gang: the world, its rank, the tasks on its node and its
        rank among them, and rank 0's address and port (a stable function of the attempt, so
        a task relaunched after a restart is told the same)."""
        nodes = [tp.node for tp in live.placement.tasks]
        mine = [r for r, n in enumerate(nodes) if n == nodes[rank]]
        master = self.node_names[nodes[0]]
        address = getattr(self.backend, "node_address", None)
        addr = address(master) if address is not None else "127.0.0.1"
        port = rendezvous_port(live.job.id, live.attempt)
        return (len(nodes), rank, len(mine), mine.index(rank), addr, port)

    def _tell(self: Controller, live: LiveAttempt, ranks: range) -> None:
        """Tell the tasks at ``ranks`` the attempt's layout now (its generation is one more
        with each resize)."""
        if live.retiring:
            return  # a shrink's removed tasks first: the survivors are told once they exited
        n = len(live.slots)
        for rank in ranks:
            slot = live.slots[rank]
            h = live.handles.get(slot)
            want = Elastic(n, rank, live.generation)
            if h is not None and slot not in live.exits and self._told(live, slot) != want:
                try:
                    self.backend.resize(h, want)
                except Exception:  # noqa: BLE001 - one task's file must not stop the others
                    log.exception("job %s: could not tell task %d its new layout",
                                  live.job.id, slot)  # fmt: skip

    def _resume_resize(self: Controller, live: LiveAttempt, now: float) -> None:
        """After a restart, a running elastic attempt goes on where a resize left it: the
        tasks a shrink removed are stopped (again: a stop is sent once), the tasks a grow
        added and did not launch are launched, and the generation is the one its tasks'
        files say, one more if any of them is not yet told the layout the store has."""
        for s in sorted(live.retiring, reverse=True):
            h = live.handles.get(s)
            if h is not None:
                self.backend.stop(h, Outcome.PREEMPTED)
        missing = [s for s in live.slots if s not in live.handles]
        for s in missing:
            found = self.backend.find(live.job.id, live.attempt, s)
            if found is not None:
                live.handles[s] = found
                for e in self.backend.adopt([found]):
                    self._task_exited(e, now)
        n = len(live.slots)
        stale = self._restore_generation(live)
        missing = [s for s in live.slots if s not in live.handles]
        if missing and self._launch_tasks(live, missing) < len(missing):
            first = live.slots.index(next(s for s in missing if s not in live.handles))
            self._shrink(live, first, "its new tasks could not start", now)
            return
        if missing:
            with self.store.begin() as conn:
                js.attempt_handles(conn, live.job.id, live.attempt,
                                   [h.to_json() for h in live.handles.values()])  # fmt: skip
        if stale:
            self._tell(live, range(n))

    def _restore_generation(self: Controller, live: LiveAttempt) -> bool:
        """After a restart: the generation its tasks' files say, one more if a resize is not
        done telling (a task not told the layout the store has, or a shrink's tasks still
        stopping); whether a task is not told yet. Called when the attempt is restored
        (before its tasks' ends are read, which may tell the survivors) and again once they
        are (the same answer then)."""
        n = len(live.slots)
        told = [self._told(live, s) for s in live.slots]
        stale = any(t is None or (t.world_size, t.rank) != (n, r) for r, t in enumerate(told))
        g = max((t.generation for t in told if t is not None), default=0)
        live.generation = g + 1 if stale or live.retiring else g
        return stale

    def _told(self: Controller, live: LiveAttempt, slot: int) -> Elastic | None:
        h = live.handles.get(slot)
        if h is None:
            return None
        try:
            return self.backend.elastic(h)
        except Exception:  # noqa: BLE001
            return None


def _gpus(live: LiveAttempt, slot: int) -> list[tuple[int, int]]:
    tp = live.retiring[slot]
    return [(tp.node, g) for g in tp.gpus]
