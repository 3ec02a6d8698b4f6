"""The live scheduler loop: the core's cycle over the store's jobs, carried out by a backend.

One ``Controller`` owns a core ``Scheduler`` over a ``ClusterView`` of the inventory, built
by the same builder as the simulator's (``suanli.core.builder``), and applies its decisions
through the same contract (``suanli.core.decisions.Applier``), but durably and for real. A job
that could never start (no node could hold it, its queue could never admit it, it asks more
than a per-user limit) is refused at submission with the reason the simulator gives. Each
``step``:

1. polls the backend: tasks that ended (an attempt is over when all its tasks are);
2. sizes the online services and submits or cancels their replicas
   (``suanli.control.services``); reads new submissions and cancel requests from the store;
3. shrinks elastic jobs for a job that waits for GPUs (``suanli.control.resize``), then
   runs one cycle of the core at the current time and applies its decisions;
4. starts attempts whose GPUs are free (a preemptor waits for its victims' processes;
   launching and ending attempts: ``suanli.control.lifecycle``);
   grows elastic jobs into idle GPUs when no job waits for them;
   with idle detection on, feeds the sampled utilisation to the idle watch and reclaims
   jobs idle past their grace once a job waits (``suanli.control.reclaim``);
5. writes pending reasons, and meters ended attempts into the ledger.

Rules of the applier:

- **Store first, then backend.** A decision is written in its own transaction (an admitted
  attempt claims its GPU shares there, and the database refuses a double claim); backend
  calls (launch, stop) happen after the commit, never inside a transaction.
- **Preemption keeps the simulator's order.** A ``Preempt`` moves the victim's claims to
  nobody, requeues the victim at once (as the simulator does) and sends its stop signal; the
  job admitted in its place is written at once but launched only when every process that
  held its GPUs has exited.
- **Outcomes.** All tasks exit 0: ``succeeded``. A task fails or runs out of time: the other
  tasks of the gang are stopped and the job is ``failed`` (exit code of the first failure).
  Cancelled: ``cancelled``. A task vanishes (``lost``): the attempt is lost and the job is
  requeued, up to ``ControlConfig.max_lost`` times, then it is ``lost``.
- **Restart.** ``recover`` rebuilds the scheduler from the store: running attempts are
  restored into it (``Scheduler.restore``) and their processes adopted from the backend;
  pending jobs are submitted again in submission order.
- **One job cannot stop the loop.** Whatever one job's handling raises (its spec, its
  launch, its end, its metering) fails that job with the error as its reason, gives its
  GPUs back and leaves every other job alone (``_guard``). Recovery runs under the same
  guard, job by job. ``health`` says whether the loop runs and when a pass last completed;
  ``suanli serve`` answers ``/healthz`` from it and exits non-zero if the loop stops.
- **Reconciliation, level-triggered** (``reconcile``, on start and every
  ``ControlConfig.reconcile_interval_s``): the store's GPU claims and live attempts, this
  loop's attempts and the backend's tasks are compared and made to agree; each repair is an
  event in the job's history (``reconciled``).
- **Engine outages.** A backend that drives an engine of its own (Ray) says through
  ``available()`` when that engine does not answer; meanwhile the loop still records the
  ends it can read and takes submissions in, but starts and stops nothing (the cycle does
  not run; pending jobs say why); the backend decides when a silent task is lost
  (``suanli.backends.ray_backend``).
- **Inventory.** Such a backend also says its live nodes (``suanli.control.inventory``):
  nodes that leave are unhealthy, nodes that join rebuild the scheduler.
- **Billing from recorded exits.** An attempt ends when its last task ended, as the task's
  supervisor recorded it, not when the loop noticed (which may be after a restart).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import sqlalchemy as sa

from suanli.backends.base import Backend, Outcome
from suanli.backends.prepare import Prepare
from suanli.config.tenancy import TenancyConfig
from suanli.control.attempts import Health, LiveAttempt, is_interruption, job_of, one_line, to_ms
from suanli.control.crash import crash_point
from suanli.control.hardware import Hardware
from suanli.control.inventory import Inventory
from suanli.control.lifecycle import Lifecycle
from suanli.control.metering import meter_attempt
from suanli.control.metrics import ControlMetrics
from suanli.control.reclaim import IdleReclaim, IdleWatch
from suanli.control.repair import Repair
from suanli.control.resize import Resizer
from suanli.control.services import ServiceKeeper
from suanli.control.spec import JobSpec
from suanli.control.starts import LiveStarts, WhatIf
from suanli.control.withdraw import Withdrawals
from suanli.core.budget import BudgetBook
from suanli.core.builder import PolicySet, Refusals, Setting, build
from suanli.core.decisions import (
    Admit,
    Decision,
    Demoted,
    JobPlacement,
    Preempt,
    Reject,
    Skip,
    apply,
)
from suanli.core.elastic import DEFAULT_RESIZE_COST
from suanli.core.idle import IdlePolicy
from suanli.core.model import ClusterSpec, Job, SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.core.view import ClusterView, TaskPlacement
from suanli.metering.prices import PriceBook
from suanli.store import Store
from suanli.store import jobs as js

log = logging.getLogger("suanli.control")

class Unanswered(RuntimeError):
    """A what-if the loop cannot answer now (``Controller.ask_what_if``)."""


ASKS_PER_PASS = 64
"""The most what-ifs (``POST /v1/what-if``) one pass answers; the rest wait for the next."""

MIN_GAP_S = 0.05
"""The shortest time between two passes of ``Controller.run``, however often it is woken."""
METER_RETRY_S = 60.0
"""How long an attempt whose metering failed waits before it is tried again."""


@dataclass(frozen=True)
class ControlConfig:
    """What the loop schedules with: the same choices ``suanli simulate`` takes."""

    cluster: ClusterSpec
    policy: PolicySet
    tenancy: TenancyConfig | None = None
    preemption: PreemptionConfig | None = None
    budgets: BudgetBook | None = None
    prices: PriceBook | None = None
    """With a price book, each ended attempt's charges go to the ledger with its usage."""
    meter_interval_ms: int = 3_600_000
    """Usage records cut an attempt at multiples of this since the epoch."""
    seed: int = 0
    max_lost: int = 3
    """Lost attempts a job may have before it is ``lost`` itself."""
    reconcile_interval_s: float = 30.0
    """Seconds between two reconciliations of the store, the loop and the backend."""
    run_as: Callable[[str], tuple[int, int] | None] = lambda tenant: None
    """The (uid, gid) a tenant's tasks run as (None: as the control plane's own user)."""
    allowed_env: frozenset[str] = frozenset()
    """Loader variables (``LD_PRELOAD``, ...) an admin lets jobs set."""
    log_max_bytes: int = 64 << 20
    """Per task and stream: the log is rotated past this many bytes (one older file kept)."""
    log_min_free_bytes: int = 1 << 30
    """Task output is dropped while the log's filesystem has less free than this."""
    idle: IdlePolicy | None = None
    """Idle-GPU detection and reclaim (``suanli.control.reclaim``); None: off."""
    service_step_s: float = 10.0
    """The step of each online service's demand history: its autoscaler is asked once a
    step (``suanli.control.services``)."""
    resize_cost_s: float = DEFAULT_RESIZE_COST
    """Seconds an elastic job loses to a resize: it grows only where that saves more."""
    inventory_interval_s: float = 10.0
    """Seconds between two reads of a backend's live nodes (``suanli.control.inventory``;
    only backends on a cluster of their own, such as Ray's, have them)."""
    holds_interval_s: float = 2.0
    """Seconds between two reads of the hardware holds (faulty GPUs, cordoned and drained
    nodes: ``suanli.control.hardware``)."""

    @property
    def setting(self) -> Setting:
        """What the scheduler is built from besides the policy set (as the simulator's)."""
        t = self.tenancy
        if t is None:
            return Setting(preemption=self.preemption)
        return Setting(t.tenancy, t.priority_classes, self.preemption, dict(t.admission))


class Controller(Repair, Resizer, Inventory, Hardware, Lifecycle, IdleReclaim, Withdrawals):
    """See the module docstring. Not thread-safe: one thread calls ``recover`` and ``step``
    (``run`` does both)."""

    def __init__(
        self,
        store: Store,
        config: ControlConfig,
        backend: Backend,
        *,
        clock: Callable[[], float] = time.time,
        metrics: ControlMetrics | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.backend = backend
        self.clock = clock
        self.metrics = metrics
        cluster = config.cluster
        self.view = ClusterView(cluster)
        setting = config.setting
        self.sched = build(self.view, config.policy, setting, budgets=config.budgets)
        self.starts = LiveStarts(store, self.view, self.sched)
        self.refusals = Refusals(cluster, setting)
        self.rng = np.random.default_rng(config.seed)
        self.node_names = [n.name for n in cluster.nodes]
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        self.live: dict[tuple[str, int], LiveAttempt] = {}
        self.pending: dict[str, tuple[js.JobRecord, JobSpec, Job]] = {}
        self.last_seq = 0
        self.cancelling: set[str] = set()
        # (node, GPU) -> attempts still running there although their claims were released
        # (preempted, stopping): what an attempt admitted onto those GPUs waits for.
        self.draining: dict[tuple[int, int], set[tuple[str, int]]] = {}
        self.reasons: dict[str, str] = {}  # job -> the reason this pass skipped it for
        self.written: dict[str, str | None] = {}  # pending job -> the reason in the store
        self.lost: dict[str, int] = {}
        self.health = Health()
        self.reconciled_at = -float("inf")  # the clock's time of the last reconciliation
        self.meter_retry: dict[tuple[str, int], float] = {}  # attempt -> retry metering after
        self.services = ServiceKeeper(store, step_s=config.service_step_s)
        self.idle = IdleWatch(store, config.idle) if config.idle is not None else None
        self.idle_due: dict[tuple[str, int], LiveAttempt] = {}  # idle past grace: reclaim
        self.batch: list[Admit] | None = None  # admissions of a run, written at its end
        self.inventory_at = -float("inf")  # the clock's time of the last inventory read
        self.inventory_source = "declared"  # how stored nodes say they were found
        self.on_cluster: Callable[[ClusterSpec], None] | None = None  # told of a new cluster
        self.gpus_out: dict[tuple[int, int], str] = {}  # (node, GPU) -> fault: out of service
        self.cordoned: dict[int, str] = {}  # node -> an operator's hold (cordon, drain)
        self.holds_at = -float("inf")  # the clock's time of the last read of the holds
        self.health_probe: Callable[[], None] | None = None  # the health watch, at once
        # Jobs asked about from other threads (the API's what-if), answered by the next pass.
        self.asks: queue.SimpleQueue[tuple[Job, Future[WhatIf]]] = queue.SimpleQueue()
        # Jobs a federation front takes back if still pending (``suanli.control.withdraw``).
        self.withdrawals = queue.SimpleQueue()

    def _apply(self, decisions: list[Decision], now: float) -> None:
        """Apply the cycle's decisions in order; one that raises fails its job alone (as
        ``_guard``) and the rest are applied. A pass may hold thousands of skips: the
        guard here (a ``try``) costs nothing until something raises. The admissions of a
        run of them (with the skips among them) are written together at its end
        (``_admit_all``): store first still, since launches come after the cycle."""
        i, n = 0, len(decisions)
        while i < n:
            j = i + 1
            if type(decisions[i]) is Admit:
                while j < n and type(decisions[j]) in (Admit, Skip):
                    j += 1
                self.batch = []
            else:
                while j < n and type(decisions[j]) is not Admit:
                    j += 1
            try:
                for d in decisions[i:j]:
                    try:
                        apply((d,), self, now)
                    except Exception as e:  # noqa: BLE001 - one job's failure must not stop the loop
                        self._failed(d, e)
            finally:
                batch, self.batch = self.batch, None
            if batch:
                self._admit_all(batch, now)
            i = j

    def _failed(self, d: Decision, e: Exception) -> None:
        """Applying ``d`` raised ``e``: its job fails alone (as ``_guard``)."""
        log.exception("job %s: error while applying its decision", d.job.id)
        try:
            self._quarantine(d.job.id, f"applying its {type(d).__name__} decision: "
                                        f"{type(e).__name__}: {e}")  # fmt: skip
        except Exception:  # noqa: BLE001 - the store may be the cause
            log.exception("job %s: could not record the failure", d.job.id)

    def _send_stop(self, live: LiveAttempt) -> None:
        """Send the stop to every task of ``live`` that has not exited."""
        outcome = Outcome.PREEMPTED if live.why_stopping is Outcome.PREEMPTED else Outcome.CANCELLED
        for t, h in live.handles.items():
            if t not in live.exits:
                self.backend.stop(h, outcome)

    # ------------------------------------------------------------------ the step
    def step(self) -> list[Decision]:
        """One pass of the loop (see the module docstring); returns the cycle's decisions."""
        t0 = time.perf_counter()
        now = self.clock()
        ends = list(self.backend.poll())
        lost = any(e.outcome is Outcome.LOST for e in ends)
        # Before the ends are recorded: a task that failed because its GPU did is the
        # hardware's interruption, not its job's failure.
        self._watch_holds(now, at_once=lost or any(e.outcome is Outcome.FAILED for e in ends))
        for e in ends:
            with self._guard(e.handle.job_id, "recording the end of its task"):
                self._task_exited(e, now)
        try:
            self.services.tick(now)  # replicas it submits or cancels are taken in below
        except Exception:  # noqa: BLE001 - sizing services must not stop scheduling
            log.exception("services: sizing pass failed; scheduling goes on")
        self._watch_inventory(now, at_once=lost)  # a lost task may mean a lost node
        self._ingest(now)
        self._withdraw(now)  # after the new jobs, before the cycle could admit them
        decisions: list[Decision] = []
        down = self._engine_down()
        if down is None:
            self._shrink_for_waiting(now)  # before the cycle: a shrink before a preemption
            if len(self.sched):
                decisions = self.sched.cycle(self.rng, now)
                self._apply(decisions, now)
            self._launch_ready(now)
            self._grow_into_idle(now)
            if self.idle is not None:
                self._watch_idle(now)
        else:  # nothing is started or stopped: submissions queue until the engine is back
            self.reasons.update((job_id, f"waiting: {down}") for job_id in self.pending)
        self._write_reasons(now)
        try:
            soon = self.starts.refresh(now, self._running_rows, self.sched.pending_jobs,
                                       self.pending.__contains__)  # fmt: skip
        except Exception:  # noqa: BLE001 - an estimate must not stop scheduling
            log.exception("start-time estimates failed; scheduling goes on")
            soon = []
        self._prestage(soon, now)
        self._answer(now)
        self._meter()
        if now - self.reconciled_at >= self.config.reconcile_interval_s:
            self.reconcile(now)
        if self.metrics is not None:
            self.metrics.observe_cycle(time.perf_counter() - t0)
        return decisions

    def ask_what_if(self, job: Job) -> Future[WhatIf]:
        """When ``job`` would start if it were submitted now, without queueing it: answered
        by the loop's next pass, once its plan is up to date (``LiveStarts.what_if``). Safe
        to call from any thread; an asker that gives up cancels the future. ``Unanswered``
        while the loop does not run passes (recovering, failed, stopped): nothing would
        answer."""
        h = self.health
        if h.state != "running":
            why = f": {h.error}" if h.error and h.state != "starting" else ""
            raise Unanswered(f"the scheduler loop is {h.state}{why}")
        f: Future[WhatIf] = Future()
        self.asks.put((job, f))
        return f

    def _answer(self, now: float) -> None:
        """Answer the what-ifs asked since the last pass, at most ``ASKS_PER_PASS`` (the
        rest wait for the next), all from one plan, made again for the first if the running
        or pending jobs changed since the last: asking costs a pass one plan at most."""
        first = True
        for _ in range(ASKS_PER_PASS):
            try:
                job, f = self.asks.get_nowait()
            except queue.Empty:
                return
            if not f.set_running_or_notify_cancel():
                continue  # its asker gave up
            try:
                f.set_result(self.starts.what_if(now, self._running_rows,
                                                 self.sched.pending_jobs, job, first))  # fmt: skip
                first = False
            except Exception as e:  # noqa: BLE001 - the failure is its asker's answer
                log.exception("what-if for %s failed", job.id)
                f.set_exception(e)

    def _engine_down(self) -> str | None:
        """Why the backend's engine cannot start or stop anything now (None: it can). A
        backend without an engine of its own (local, fake) is always up."""
        available = getattr(self.backend, "available", None)
        return available() if available is not None else None

    def run(
        self,
        stop: threading.Event,
        wake: threading.Event,
        interval: float = 1.0,
        min_gap: float = MIN_GAP_S,
    ) -> None:
        """``recover``, then ``step`` until ``stop`` is set: every ``interval`` seconds, or
        sooner when ``wake`` is set (a submission or cancel arrived), but never less than
        ``min_gap`` after the previous pass, so that a burst of submissions is taken in one
        pass rather than one pass each. A step that fails is logged and retried on the next
        pass; the loop does not die with it. Recovery that fails as a whole (the store
        cannot be read) is retried the same way. ``health`` follows it all; if anything
        escapes (it should not), ``health.state`` is ``failed`` and the error is re-raised
        for ``suanli serve`` to exit on."""
        try:
            self._run(stop, wake, interval, min_gap)
        except BaseException as e:
            self.health.state = "failed"
            self.health.error = f"{type(e).__name__}: {e}"
            raise
        self.health.state = "stopped"

    def _run(
        self, stop: threading.Event, wake: threading.Event, interval: float, min_gap: float
    ) -> None:
        recovered = False
        while not stop.is_set():
            began = time.monotonic()
            try:
                if not recovered:
                    self.recover()
                    recovered = True
                    self.health.state = "running"
                    # Recovery is progress: until the first pass completes, staleness counts
                    # from here (not from the clock's zero, which read as hours stale).
                    self.health.last_pass = time.monotonic()
                self.step()
                self.health.last_pass = time.monotonic()
                self.health.passes += 1
                self.health.failures = 0
            except Exception as e:  # noqa: BLE001 - keep scheduling; the error is logged
                self.health.failures += 1
                self.health.error = f"{type(e).__name__}: {e}"
                log.exception("scheduler %s failed", "pass" if recovered else "recovery")
                if not recovered:
                    self._reset()
            wake.wait(interval)
            wake.clear()
            rest = min_gap - (time.monotonic() - began)
            if rest > 0 and not stop.is_set():
                stop.wait(rest)

    def _reset(self) -> None:
        """Forget what a failed recovery put together, so that the next one starts clean."""
        self.sched = build(self.view_fresh(), self.config.policy, self.config.setting,
                           budgets=self.config.budgets)  # fmt: skip
        self.starts = LiveStarts(self.store, self.view, self.sched)
        self.live.clear()
        self.pending.clear()
        self.draining.clear()
        self.cancelling.clear()
        self.written.clear()
        self.last_seq = 0
        self.gpus_out.clear()  # a new view holds nothing: the holds are read again
        self.cordoned.clear()
        self.holds_at = -float("inf")

    def view_fresh(self) -> ClusterView:
        self.view = ClusterView(self.config.cluster)
        return self.view

    # ------------------------------------------------------------------ intake
    def _ingest(self, now: float) -> None:
        for rec in js.jobs_in(self.store, ["pending"], after=self.last_seq):
            self.last_seq = max(self.last_seq, rec.seq)
            self._submit(rec, now)
        for rec in js.cancel_requests(self.store):
            if rec.id not in self.cancelling:
                with self._guard(rec.id, "cancelling it"):
                    self._cancel(rec, now)
                    crash_point("cancel-sent")

    def _submit(self, rec: js.JobRecord, now: float) -> None:
        if rec.id in self.pending:
            return
        with self._guard(rec.id, "taking it in"):
            self._take_in(rec, now)

    def _take_in(self, rec: js.JobRecord, now: float) -> None:
        try:
            spec, job = job_of(rec)
            self._check_feasible(job)
            told = self.sched.submit(
                job,
                now,
                requeued=rec.attempts > 0,
                preempted_at=self._preempted_at(rec.id) if rec.attempts else (),
            )
        except (SpecError, ValueError) as e:
            js.set_job_state(self.store, rec.id, "failed", to_ms(now), reason=f"refused: {e}")
            return
        if told is not None:
            apply((told,), self, now)
            if isinstance(told, Reject):
                return
            job = told.job  # demoted: it waits (and runs) in its new class
        self.pending[rec.id] = (rec, spec, job)
        self.starts.arrive(job)

    def _cancel(self, rec: js.JobRecord, now: float) -> None:
        self.cancelling.add(rec.id)
        if rec.id in self.pending and self.sched.remove(rec.id):
            self._leave_pending(rec.id)
            js.set_job_state(self.store, rec.id, "cancelled", to_ms(now), reason="cancelled")
            self.cancelling.discard(rec.id)
            return
        for live in self.live.values():
            if live.job.id == rec.id and live.state != "stopping":
                self._stop(live, Outcome.CANCELLED, now, "cancel requested")

    # ------------------------------------------------------------------ decisions
    # The live applier (``suanli.core.decisions.Applier``): store first, then backend.
    def skip(self, d: Skip, now: float) -> None:
        self.reasons[d.job.id] = str(d.reason)

    def reject(self, d: Reject, now: float) -> None:
        js.set_job_state(self.store, d.job.id, "failed", to_ms(now), reason=str(d))

    def demote(self, d: Demoted, now: float) -> None:
        with self.store.begin() as conn:
            conn.execute(
                sa.update(js.jobs)
                .where(js.jobs.c.id == d.job.id)
                .values(priority_class=d.job.priority_class)
            )
            js.add_event(conn, d.job.id, to_ms(now), "demoted", str(d))

    def admit(self, d: Admit, now: float) -> None:
        if self.batch is not None:
            self.batch.append(d)  # written with the others of its run (``_apply``)
            return
        self._admit_one(d, now)

    def _admit_one(self, d: Admit, now: float) -> None:
        rec, spec, _ = self._leave_pending(d.job.id)
        attempt = rec.attempts + 1
        try:
            with self.store.begin() as conn:
                js.admit_attempt(
                    conn, rec.id, attempt, self._placement_json(d.placement), to_ms(now)
                )
        except sa.exc.IntegrityError as e:
            # The database refused a claim: the view and the store disagree. Give the
            # placement back and requeue the job rather than run it on taken GPUs.
            log.error("job %s: claim refused by the database: %s", rec.id, e.orig)
            self.sched.release(d.placement, d.job.id, now)
            self.sched.submit(d.job, now, requeued=True)
            self.pending[rec.id] = (rec, spec, d.job)
            return
        self._admitted(d, rec, spec)

    def _admit_all(self, batch: list[Admit], now: float) -> None:
        """Write the admissions ``batch`` in one transaction, then make them live. If that
        transaction fails (a claim refused, a job gone), nothing was written: each is then
        admitted in a transaction of its own, and the one at fault fails alone."""
        done = False
        if len(batch) > 1:
            try:
                rows = []
                for d in batch:
                    rec = self.pending[d.job.id][0]
                    rows.append((rec.id, rec.attempts + 1, self._placement_json(d.placement)))
                with self.store.begin() as conn:
                    js.admit_attempts(conn, rows, to_ms(now))
                done = True
            except Exception as e:  # noqa: BLE001 - each is tried alone, and fails alone
                log.warning("%d admissions in one transaction failed (%s: %s): writing them "
                            "one by one", len(batch), type(e).__name__, e)  # fmt: skip
        for d in batch:
            try:
                if done:
                    rec, spec, _ = self._leave_pending(d.job.id)
                    self._admitted(d, rec, spec)
                else:
                    self._admit_one(d, now)
            except Exception as e:  # noqa: BLE001 - one job's failure must not stop the loop
                self._failed(d, e)

    def _admitted(self, d: Admit, rec: js.JobRecord, spec: JobSpec) -> None:
        """``d`` is written: its attempt is live (and launched once its GPUs are free)."""
        live = LiveAttempt(d.job, rec, spec, rec.attempts + 1, d.placement, "admitted")
        self.live[live.key] = live
        self.starts.started(rec.id, self.clock())
        self.reasons.pop(rec.id, None)
        if self.metrics is not None:
            self.metrics.admitted(d.job.queue)
        crash_point("admit-written")

    def preempt(self, d: Preempt, now: float) -> None:
        live = self._live_of(d.job.id)
        if live is None:
            return
        why = f"preempted ({d.kind}) by job {d.by}"
        with self.store.begin() as conn:
            js.release_claims(conn, live.job.id, live.attempt)
            js.attempt_stopping(conn, live.job.id, live.attempt, to_ms(now), "preempted")
            js.set_job_state(
                conn, live.job.id, "pending", to_ms(now), reason=why, event="preempted"
            )
        # As the simulator: the victim is requeued at once; its resources were released
        # in the view by the cycle itself. An elastic job is requeued at the size it asked
        # (the core held it at the size it ran on).
        job = replace(d.job, tasks=live.job.tasks, gang_min=live.job.gang_min)
        self.sched.submit(job, now, requeued=True)
        self._requeued(live, job)
        if self.metrics is not None:
            self.metrics.preempted(d.job.queue, d.kind)
        if self._stop_requeued(live, now):
            crash_point("preempt-grace")

    def _stop_requeued(self, live: LiveAttempt, now: float) -> bool:
        """``live``'s job is requeued (its claims went with it): stop its tasks as a
        preemption's. False if it had not started: it is over here, nothing to stop."""
        live.why_stopping = Outcome.PREEMPTED
        self._drain(live)
        if live.state == "admitted" and not live.handles:
            live.state = "stopping"
            self._attempt_over(live, now)
            return False
        live.state = "stopping"
        self._send_stop(live)
        return True

    def _drain(self, live: LiveAttempt) -> None:
        for tp in live.placement.tasks:
            for g in tp.gpus:
                self.draining.setdefault((tp.node, g), set()).add(live.key)

    def _undrain(self, live: LiveAttempt) -> None:
        for tp in (*live.placement.tasks, *live.retiring.values()):
            for g in tp.gpus:
                holders = self.draining.get((tp.node, g))
                if holders is not None:
                    holders.discard(live.key)
                    if not holders:
                        del self.draining[(tp.node, g)]

    def _stop(self, live: LiveAttempt, why: Outcome, now: float, detail: str) -> None:
        live.why_stopping = why
        if live.state == "admitted" and not live.handles:
            live.state = "stopping"
            self._attempt_over(live, now)
            return
        live.state = "stopping"
        with self.store.begin() as conn:
            js.attempt_stopping(conn, live.job.id, live.attempt, to_ms(now), detail)
        self._send_stop(live)

    # ------------------------------------------------------------------ bookkeeping
    def _check_feasible(self, job: Job) -> None:
        """``SpecError`` if no state of the cluster could ever hold ``job``, or its admission
        checks could never let it start (its queue's ceiling, a per-user limit): the same
        reason the simulator gives for a trace (``suanli.core.builder.Refusals``)."""
        refused = self.refusals.why(job)
        if refused is not None:
            raise SpecError(f"job {job.id} {refused}")

    def _preempted_at(self, job_id: str) -> list[float]:
        """When the job's earlier attempts were preempted (the anti-thrash history; an
        attempt the hardware interrupted is not counted)."""
        return [
            a.ended_ms / 1000
            for a in js.job_attempts(self.store, job_id)
            if a.outcome == "preempted"
            and a.ended_ms is not None
            and not is_interruption(a.detail)  # the hardware's, not a preemption
        ]

    def _requeued(self, live: LiveAttempt, job: Job) -> None:
        """``live``'s job is pending again (already in the store and the scheduler); its
        next attempt is the one after ``live``."""
        rec = replace(live.record, state="pending", attempts=live.attempt)
        self.pending[job.id] = (rec, live.spec, job)

    def _leave_pending(self, job_id: str) -> tuple[js.JobRecord, JobSpec, Job]:
        """Take ``job_id`` out of the pending jobs (admitted or cancelled)."""
        self.written.pop(job_id, None)
        self.starts.left(job_id)
        return self.pending.pop(job_id)

    def _prestage(self, soon: list[str], now: float) -> None:
        """Ask the backend to prepare each job expected to start soon (if it can), and note
        it in the job's history; a preparation that fails is logged, never fatal."""
        prepare = getattr(self.backend, "prepare", None)
        if prepare is None:
            return
        entries = [e for e in map(self.pending.get, soon) if e is not None]
        if not entries:
            return
        try:
            where = self.starts.nodes_for([e[2] for e in entries], now, self._running_rows())
        except Exception:  # noqa: BLE001 - pre-staging is an optimisation
            log.exception("expected nodes for pre-staging: not worked out; none named")
            where = [[] for _ in entries]
        for (rec, spec, job), on in zip(entries, where, strict=True):
            job_id = rec.id
            try:
                nodes = tuple(self.node_names[n] for n in on)
                ask = Prepare(job_id, rec.attempts + 1, spec.checkpoint_dir, nodes,
                              self.config.run_as(job.tenant))  # fmt: skip
                note = prepare(ask)
                js.add_event(self.store, job_id, to_ms(now), "prepared",
                             f"expected to start soon; {note}")  # fmt: skip
            except Exception:  # noqa: BLE001 - pre-staging is an optimisation
                log.exception("job %s: preparing it failed; it will start unprepared", job_id)

    def _running_rows(self) -> list[tuple[Job, float, JobPlacement]]:
        """The live attempts as a start-time plan needs them: job, since when, where (one not
        launched yet counts from now)."""
        now = self.clock()
        return [
            (a.job, a.started_at if a.started_at is not None else now, a.placement)
            for a in self.live.values()
            if a.state != "stopping"
        ]

    def _live_of(self, job_id: str) -> LiveAttempt | None:
        found = [a for a in self.live.values() if a.job.id == job_id and a.state != "stopping"]
        return found[-1] if found else None

    def _placement_json(self, p: JobPlacement) -> list[dict[str, Any]]:
        return [self._task_json(i, tp) for i, tp in enumerate(p.tasks)]

    def _task_json(self, task: int, tp: TaskPlacement) -> dict[str, Any]:
        """One task's entry of a stored placement."""
        return {
            "task": task,
            "node": self.node_names[tp.node],
            "gpus": list(tp.gpus),
            "gpu_milli": tp.gpu_milli,
            "gpu_memory_mib": tp.gpu_memory_mib,
            "cpu_milli": tp.cpu_milli,
            "memory_mib": tp.memory_mib,
        }

    def _placement_of(self, tasks: Sequence[dict[str, Any]]) -> JobPlacement:
        return JobPlacement.of(
            tuple(
                TaskPlacement(
                    self.node_index[t["node"]],
                    tuple(t["gpus"]),
                    t["gpu_milli"],
                    t["gpu_memory_mib"],
                    t["cpu_milli"],
                    t["memory_mib"],
                )
                for t in tasks
            )
        )

    def _write_reasons(self, now: float) -> None:
        """The pending reason of each job this pass skipped, where it changed, in one write
        (a job the cycle did not look at keeps the reason it had: the core reports a lane's
        reason on the jobs it tries, so a pass costs no more than the cycle itself)."""
        changed: dict[str, str | None] = {}
        for job_id, text in self.reasons.items():
            if job_id in self.pending and self.written.get(job_id) != text:
                changed[job_id] = self.written[job_id] = text
        self.reasons.clear()
        if changed:
            js.set_reasons(self.store, changed)

    def _meter(self) -> None:
        """Meter ended attempts. One that cannot be metered (its price is missing, say) is
        logged, noted in its job's history and retried after ``METER_RETRY_S``; the others
        go on."""
        now = self.clock()
        for a in js.unmetered_attempts(self.store):
            key = (a.job_id, a.attempt)
            if self.meter_retry.get(key, -float("inf")) > now:
                continue
            try:
                rec = js.get_job(self.store, a.job_id)
                if rec is None or a.started_ms is None:
                    js.mark_metered(self.store, a.job_id, a.attempt)
                    continue
                meter_attempt(self.store, rec, a, self.config, now)
                self.meter_retry.pop(key, None)
            except Exception as e:  # noqa: BLE001 - metering one attempt must not stop the loop
                log.exception("job %s: metering attempt %d failed", a.job_id, a.attempt)
                first = key not in self.meter_retry
                self.meter_retry[key] = now + METER_RETRY_S
                if first:
                    with self._guard(a.job_id, "noting a metering failure"):
                        js.add_event(self.store, a.job_id, to_ms(now), "metering-failed",
                                     one_line(f"attempt {a.attempt}: {type(e).__name__}: {e}"))  # fmt: skip
