"""The live scheduler loop over a real store, with the fake backend and a fake clock.

The fake backend (``suanli.backends.fake``) stands in for processes so that time can be
stepped exactly; ``tests/cli/test_serve.py`` runs the same loop with real processes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import sqlalchemy as sa

from fake_clock import Clock
from loop_builders import CLUSTER, make, spec, state, submit, used
from suanli.api.schemas import job_out
from suanli.backends.base import rendezvous_port
from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
from suanli.config.cluster import load_cluster
from suanli.control.loop import Controller
from suanli.control.metering import recomputed_usage
from suanli.control.spec import JobSpec
from suanli.core.decisions import Admit, Decision, Preempt
from suanli.core.preemption import PreemptionConfig
from suanli.core.scheduler import Scheduler
from suanli.core.starts import REFRESH_S
from suanli.sim.engine import PolicySet, simulate
from suanli.store import Store, read_usage
from suanli.store import jobs as js
from suanli.store import predictions as pr


def test_jobs_run_to_the_end_and_are_metered(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    a = submit(store, spec(100, gpus=4), clock.t)
    b = submit(store, spec(50, gpus=0.5), clock.t)
    ctl.step()
    assert state(store, a) == "running" and state(store, b) == "running"
    assert used(store) == 4500
    launched = {(x.job_id, x.gpus, x.gpu_milli) for x in backend.launched}
    assert len(launched) == 2 and any(g == 500 for _, _, g in launched)
    clock.t += 60
    ctl.step()
    assert state(store, b) == "succeeded" and state(store, a) == "running"
    clock.t += 60
    ctl.step()
    assert state(store, a) == "succeeded" and used(store) == 0
    assert js.get_job(store, a).exit_code == 0  # type: ignore[union-attr]
    records = list(read_usage(store))
    assert {r.job_id for r in records} == {a, b}
    assert sorted(r.key for r in records) == sorted(
        r.key for r in recomputed_usage(store, ctl.config)
    )


def test_a_gang_over_two_nodes_is_launched_on_them_and_told_its_rendezvous(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    backend.addresses = {name: f"10.0.0.{i + 1}" for i, name in enumerate(ctl.node_names)}
    ctl.recover()
    job = submit(store, spec(100, gpus=4, tasks=2), clock.t)  # 4 GPUs each: one per node
    ctl.step()
    assert state(store, job) == "running"
    tasks = sorted(backend.launched, key=lambda x: x.task)
    assert {t.node for t in tasks} == set(ctl.node_names)
    first = backend.addresses[tasks[0].node]
    port = rendezvous_port(job, 1)
    assert [t.rendezvous for t in tasks] == [(2, 0, 1, 0, first, port), (2, 1, 1, 0, first, port)]
    # A gang on one node: both tasks are local to it.
    two = submit(store, spec(100, gpus=2, tasks=2), clock.t + 200)
    clock.t += 200  # the first gang has finished by now
    ctl.step()
    ctl.step()
    mine = sorted((x for x in backend.launched if x.job_id == two), key=lambda x: x.task)
    assert len({t.node for t in mine}) == 1
    assert [t.rendezvous[:4] for t in mine if t.rendezvous] == [(2, 0, 2, 0), (2, 1, 2, 1)]


def test_cancel_pending_and_running(store: Store) -> None:
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    run = submit(store, spec(None, gpus=4, tasks=2), clock.t)
    wait = submit(store, spec(10, gpus=4, tasks=2), clock.t)
    ctl.step()
    assert state(store, run) == "running" and state(store, wait) == "pending"
    reason = js.get_job(store, wait).reason  # type: ignore[union-attr]
    assert reason is not None and "no capacity" in reason
    js.request_cancel(store, wait, 0, "ana")
    js.request_cancel(store, run, 0, "ana")
    ctl.step()
    assert state(store, wait) == "cancelled"
    ctl.step()
    assert state(store, run) == "cancelled" and used(store) == 0


def test_a_front_withdraws_only_a_job_that_never_started(store: Store) -> None:
    """``ask_withdraw`` (``POST /v1/jobs/{id}/withdraw``) is answered by the next pass,
    before its cycle: a job still pending and never started is cancelled with the front's
    reason; a running job, a job requeued after a preemption (it resumes here) and a job its
    owner asked to cancel since the last pass are not taken."""
    clock = Clock()
    ctl, _ = make(store, clock, preempt=True)
    ctl.recover()
    ctl.health.state = "running"
    spot = submit(store, spec(100, gpus=4, tasks=2, cls="spot"), clock.t)
    wait = submit(store, spec(10, gpus=4, tasks=2, cls="spot"), clock.t)
    ctl.step()
    assert state(store, spot) == "running" and state(store, wait) == "pending"
    asked = {job: ctl.ask_withdraw(job, "re-routed") for job in (spot, wait)}
    ctl.step()
    assert asked[spot].result(0) == f"job {spot} is running"
    assert asked[wait].result(0) == ""
    rec = js.get_job(store, wait)
    assert rec is not None and (rec.state, rec.reason) == ("cancelled", "re-routed")
    assert [e.kind for e in js.job_history(store, wait)][-1] == "withdrawn"
    # A high job preempts the spot one, which waits again: it resumes here, not elsewhere.
    clock.t += 10
    submit(store, spec(20, gpus=4, tasks=2, cls="high"), clock.t)
    ctl.step()
    assert state(store, spot) == "pending"
    again = ctl.ask_withdraw(spot, "re-routed")
    ctl.step()
    assert again.result(0).startswith(f"job {spot} has run here before (attempt 1)")
    # A cancel its owner asked for after the pass took in the cancels stands.
    late = submit(store, spec(10, gpus=4, tasks=2, cls="spot"), clock.t)
    ctl.step()
    assert state(store, late) == "pending"
    ctl._ingest(clock.t)  # the pass's intake has run ...
    js.request_cancel(store, late, 0, "ana")  # ... and then the owner cancels
    mine = ctl.ask_withdraw(late, "re-routed")
    ctl._withdraw(clock.t)
    assert mine.result(0) == f"job {late} is being cancelled"


def test_a_failing_task_fails_its_gang_and_max_runtime_is_a_failure(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    slow = submit(store, spec(1000, gpus=1, max_runtime=30), clock.t)
    ctl.step()
    clock.t += 31
    ctl.step()
    rec = js.get_job(store, slow)
    assert rec is not None and rec.state == "failed" and "max runtime" in (rec.reason or "")
    assert used(store) == 0


def test_a_high_job_preempts_a_spot_job_which_is_requeued_and_resumes(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock, preempt=True)
    ctl.recover()
    spot = submit(store, spec(100, gpus=4, tasks=2, cls="spot"), clock.t)
    ctl.step()
    assert state(store, spot) == "running"
    clock.t += 10
    high = submit(store, spec(20, gpus=4, tasks=2, cls="high"), clock.t)
    decisions = ctl.step()
    assert [type(d).__name__ for d in decisions] == ["Preempt", "Admit"]
    assert state(store, spot) == "pending" and state(store, high) == "admitted"
    ctl.step()  # the victim's exit is seen; the preemptor starts
    assert state(store, high) == "running"
    clock.t += 20
    ctl.step()
    assert state(store, high) == "succeeded"
    assert state(store, spot) == "running"
    attempts = js.job_attempts(store, spot)
    assert [(x.attempt, x.outcome) for x in attempts] == [(1, "preempted"), (2, None)]
    clock.t += 100
    ctl.step()
    assert state(store, spot) == "succeeded" and used(store) == 0


def test_restart_restores_running_jobs_and_adopts_them(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    a = submit(store, spec(100, gpus=4), clock.t)
    b = submit(store, spec(100, gpus=4), clock.t)
    c = submit(store, spec(10, gpus=4), clock.t)
    ctl.step()
    assert [state(store, j) for j in (a, b, c)] == ["running", "running", "pending"]
    # The control plane dies; a new one starts on the same store and backend world.
    backend.restart()
    ctl2 = Controller(store, ctl.config, backend, clock=clock)
    ctl2.recover()
    ctl2.step()
    assert [state(store, j) for j in (a, b, c)] == ["running", "running", "pending"]
    assert used(store) == 8000
    clock.t += 100
    ctl2.step()
    assert state(store, a) == "succeeded" and state(store, c) == "running"
    clock.t += 10
    ctl2.step()
    assert [state(store, j) for j in (a, b, c)] == ["succeeded"] * 3


class Recording(Scheduler):
    """The simulator's scheduler, recording each cycle's decisions with their time."""

    log: list[tuple[float, Decision]] = []

    def cycle(self, rng: Any, now: float = 0.0) -> list[Decision]:
        out = super().cycle(rng, now)
        Recording.log.extend((now, d) for d in out)
        return out


def _key(t: float, d: Decision) -> tuple[Any, ...]:
    if isinstance(d, Admit):
        return (round(t, 6), "admit", d.job.id, d.placement.tasks)
    if isinstance(d, Preempt):
        return (round(t, 6), "preempt", d.job.id, d.by, d.kind)
    return (round(t, 6), type(d).__name__, d.job.id)


def test_the_control_plane_decides_as_the_simulator_does(store: Store) -> None:
    rnd = random.Random(7)
    specs: list[tuple[float, JobSpec]] = []
    t = 0.0
    for _ in range(40):
        t += rnd.choice([0, 5, 20, 60])
        gpus = rnd.choice([0.25, 0.5, 1, 2, 4])
        tasks = rnd.choice([1, 2]) if gpus >= 1 else 1
        cls = rnd.choice(["spot", "normal", "normal", "high"])
        specs.append((t, spec(rnd.choice([30, 90, 300]), gpus=gpus, cls=cls, tasks=tasks)))
    # The simulator, on the same jobs.
    jobs = [_sim_job(s, str(i + 1), at) for i, (at, s) in enumerate(specs)]
    Recording.log = []
    simulate(
        load_cluster(CLUSTER),
        jobs,
        PolicySet.parse("fifo+best-fit"),
        preemption=PreemptionConfig(min_runtime=0, restart_overhead=0),
        scheduler=Recording,
    )
    expected = [_key(t, d) for t, d in Recording.log if isinstance(d, Admit | Preempt)]
    # The control plane, driven from event to event by a fake clock.
    clock = Clock(0.0)
    ctl, backend = make(store, clock, preempt=True)
    ctl.recover()
    got: list[tuple[Any, ...]] = []
    nxt = 0
    while nxt < len(specs) or ctl.live or ctl.pending:
        times = [specs[nxt][0]] if nxt < len(specs) else []
        end = backend.next_exit_at()
        if end is not None:
            times.append(end)
        if not times:
            break
        clock.t = min(times)
        while nxt < len(specs) and specs[nxt][0] <= clock.t:
            submit(store, specs[nxt][1], specs[nxt][0])
            nxt += 1
        for d in ctl.step():
            if isinstance(d, Admit | Preempt):
                got.append(_key(clock.t, d))
        if ctl.live and backend.next_exit_at() == clock.t:
            continue  # a stop at this instant: its exit is seen in a step at the same time
    assert got == expected
    assert len(expected) > 40  # every job admitted, and some preempted and admitted again
    assert used(store) == 0


def _sim_job(s: JobSpec, job_id: str, at: float) -> Any:
    from dataclasses import replace

    return replace(s.job(job_id, at, "lab", "lab"), runtime=float(s.env[RUNTIME_VARIABLE]))


def test_a_launch_not_recorded_before_a_crash_is_adopted_not_rerun(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    a = submit(store, spec(100, gpus=2, tasks=2), clock.t)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("the control plane dies between launch and record")

    monkeypatch.setattr(js, "attempt_started", crash)
    with pytest.raises(KeyboardInterrupt):
        ctl.step()
    monkeypatch.undo()
    assert state(store, a) == "admitted" and len(backend.launched) == 2
    backend.restart()
    ctl2 = Controller(store, ctl.config, backend, clock=clock)
    ctl2.recover()
    assert state(store, a) == "running" and len(backend.launched) == 2  # nothing rerun
    clock.t += 100
    ctl2.step()
    rec = js.get_job(store, a)
    assert rec is not None and (rec.state, rec.attempts) == ("succeeded", 1)
    assert used(store) == 0


def test_reconciliation_repairs_what_the_store_the_loop_and_the_backend_disagree_on(
    store: Store,
) -> None:
    """Three disagreements, each made past the loop (a crash, a bug, a hand edit), each
    repaired by one reconciliation with a ``reconciled`` event in the job's history."""
    from suanli.store.schema import gpu_claims

    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    done = submit(store, spec(1, gpus=1), clock.t)
    ctl.step()
    clock.t += 1
    ctl.step()
    assert state(store, done) == "succeeded" and used(store) == 0
    # 1. A task the backend no longer knows (its node's agent forgot it, say).
    gone = submit(store, spec(100, gpus=4), clock.t)
    ctl.step()
    assert state(store, gone) == "running"
    # 2. A claim that no live attempt holds, on a free GPU.
    with store.begin() as conn:
        free = next(g for _, gs in js.list_nodes(conn) for g in gs if g.used_milli == 0)
        conn.execute(sa.insert(gpu_claims).values(job_id=done, attempt=1, task=0,
                                                  node=free.node, idx=free.idx, milli=1000))  # fmt: skip
    (live,) = [a for a in ctl.live.values() if a.job.id == gone]
    for h in live.handles.values():
        backend._tracked.pop(h.key)
        backend._world.pop(h.key)
    assert used(store) == 5000
    repaired = ctl.reconcile()
    assert len(repaired) == 2, repaired
    assert used(store) == 0
    kinds = {j: [e.kind for e in js.job_history(store, j)] for j in (done, gone)}
    assert "reconciled" in kinds[done] and "reconciled" in kinds[gone]
    assert state(store, gone) == "pending"  # lost, requeued as any lost attempt is
    # 3. An attempt the store calls live but this loop does not know (a second loop's).
    ctl.step()
    assert state(store, gone) == "running"
    ctl2 = Controller(store, ctl.config, FakeBackend(clock), clock=clock)
    repaired = ctl2.reconcile()
    assert any("attempt 2 ended as lost" in r for r in repaired), repaired
    rec = js.get_job(store, gone)
    assert rec is not None and rec.state == "pending" and gone in ctl2.pending


def test_a_decision_that_raises_fails_its_job_alone(store: Store) -> None:
    """Injected: applying one job's admission raises (a bug, a store error of that row only);
    that job fails with the error as its reason, the others of the same pass are admitted."""
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    jobs = [submit(store, spec(10, gpus=1), clock.t) for _ in range(3)]
    real = ctl.admit

    def admit(d: Any, now: float) -> None:
        if d.job.id == jobs[1]:
            raise ZeroDivisionError("injected")
        real(d, now)

    ctl.admit = admit  # type: ignore[method-assign]
    ctl.step()
    rec = js.get_job(store, jobs[1])
    assert rec is not None and rec.state == "failed"
    assert rec.reason == (
        "failed: internal error while applying its Admit decision: ZeroDivisionError: injected"
    )
    assert [state(store, j) for j in (jobs[0], jobs[2])] == ["running", "running"]
    assert used(store) == 2000  # the failed job holds nothing


def test_a_runtime_predictor_learns_each_ended_job_live(store: Store) -> None:
    # The simulator tells a predictor each job's runtime at its end; the live loop does the
    # same, with the run from launch to the recorded end, and only once the job has ended.
    clock = Clock()
    ctl, backend = make(store, clock, policy="qssf@history+best-fit")
    ctl.recover()
    t0 = clock.t
    learned: list[tuple[float, float]] = []
    real = ctl.sched.runtime.learn  # type: ignore[attr-defined]

    def spy(job: Any, runtime: float, at: float) -> None:
        learned.append((runtime, at))
        real(job, runtime, at)

    ctl.sched._learns = spy
    a = submit(store, spec(40), clock.t)
    b = submit(store, spec(500), clock.t)
    ctl.step()
    clock.t += 60
    ctl.step()
    assert state(store, a) == "succeeded" and state(store, b) == "running"
    assert learned == [(pytest.approx(40, abs=1), pytest.approx(t0 + 40, abs=1))]
    assert ctl.sched.runtime.learned == 1  # type: ignore[attr-defined]


# --- start-time estimates ------------------------------------------------------------------


def record(store: Store, job_id: str) -> js.JobRecord:
    rec = js.get_job(store, job_id)
    assert rec is not None
    return rec


def test_a_waiting_job_is_told_when_it_will_start(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    t0 = clock.t
    busy = [submit(store, spec(100, estimate=100), t0) for _ in range(8)]  # both nodes, 100 s
    big = submit(store, spec(50, gpus=4, estimate=50), t0)
    ctl.step()
    assert all(state(store, j) == "running" for j in busy) and state(store, big) == "pending"
    rec = record(store, big)
    assert rec.start_planned_ms == round(t0 * 1000)
    assert rec.start_p50_ms is not None and rec.start_p90_ms is not None
    # Every running job ends by its estimate, 100 s on: the four GPUs are free then (to within
    # the plan's 10 s buckets); nothing has been learned yet, so the range is the plan.
    assert abs(rec.start_p50_ms / 1000 - (t0 + 100)) <= 15
    assert rec.start_p90_ms == rec.start_p50_ms
    out = job_out(rec).start_estimate
    assert out is not None and out.p50 is not None and out.planned_at
    # Expected within the pre-staging lead: the backend was asked to prepare it, once, and
    # its history says so.
    assert [(p.job_id, p.attempt) for p, _ in backend.prepared] == [(big, 1)]
    assert any(e.kind == "prepared" for e in js.job_history(store, big))
    # With it go the nodes it is expected to land on: those of the attempts expected to end
    # first, until they hold the four GPUs it asks for.
    asked = backend.prepared[0][0]
    held = [tp for a in ctl.live.values() for tp in a.placement.tasks
            if ctl.node_names[tp.node] in asked.nodes]  # fmt: skip
    assert asked.nodes and sum(len(tp.gpus) for tp in held) >= 4
    # Passes within the refresh do not plan again, nor write.
    before = ctl.starts.estimator.plans
    clock.t += 30
    ctl.step()
    assert ctl.starts.estimator.plans == before
    assert record(store, big).start_planned_ms == rec.start_planned_ms
    assert len(backend.prepared) == 1  # never twice
    # It starts when they end; its estimate is no longer shown.
    clock.t = t0 + 101
    ctl.step()
    ctl.step()
    assert state(store, big) == "running"
    assert job_out(record(store, big)).start_estimate is None


def test_the_queue_is_planned_again_only_when_due_and_changed(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    t0 = clock.t
    busy = [submit(store, spec(10_000, estimate=10_000), t0) for _ in range(8)]
    ctl.step()
    assert all(state(store, j) == "running" for j in busy)
    waiting = [submit(store, spec(60, estimate=60), t0) for _ in range(3)]
    ctl.step()
    first = {j: record(store, j).start_p50_ms for j in waiting}
    assert all(v is not None for v in first.values())
    assert backend.prepared == []  # 10,000 s away: too early to prepare
    # Due: the queue changed since the last plan (the jobs were placed after it), so a plan.
    clock.t += REFRESH_S + 1
    ctl.step()
    plans = ctl.starts.estimator.plans
    first = {j: record(store, j).start_p50_ms for j in waiting}
    # Due again, but nothing changed and nothing the plan foresaw has come: it stands.
    clock.t += REFRESH_S + 1
    ctl.step()
    assert ctl.starts.estimator.plans == plans
    assert {j: record(store, j).start_p50_ms for j in waiting} == first
    # A job arrives: it is placed in the plan there is (at submission), after the running
    # jobs it waits for; the next refresh plans the queue again.
    late = submit(store, spec(60, estimate=60), clock.t)
    ctl.step()
    p50 = record(store, late).start_p50_ms
    # (The eight running jobs end 10,000 s on; to within the plan's buckets, 2% that far.)
    assert p50 is not None and abs(p50 / 1000 - (t0 + 10_000)) <= 0.02 * 10_000 + 10
    clock.t += REFRESH_S + 1
    ctl.step()
    assert ctl.starts.estimator.plans == plans + 1


def test_a_restarted_control_plane_learns_from_its_stores_history(store: Store) -> None:
    clock = Clock()
    ctl, _ = make(store, clock, policy="qssf@history+best-fit")
    ctl.recover()
    ran = [submit(store, spec(40 + 10 * i), clock.t) for i in range(5)]
    cancelled = submit(store, spec(1000), clock.t)
    ctl.step()
    js.request_cancel(store, cancelled, round(clock.t * 1000), by="ana")
    clock.t += 200
    ctl.step()
    ctl.step()
    assert all(state(store, j) == "succeeded" for j in ran)
    assert state(store, cancelled) == "cancelled"
    learned_before = ctl.sched.runtime.learned  # type: ignore[attr-defined]
    # A new control plane on the same store learns what the old one did, in end order; a
    # cancelled job taught nothing.
    again, _ = make(store, clock, policy="qssf@history+best-fit")
    again.recover()
    runs = pr.ended_runs(store, 100)
    assert [r.job.id for r in runs] == ran  # the 40..80 s jobs ended in that order
    assert [round(r.runtime_s) for r in runs] == [40, 50, 60, 70, 80]
    assert again.sched.runtime.learned == len(ran) == learned_before  # type: ignore[attr-defined]
    assert again.starts.estimator.calibration.n == len(ran)
    # Only the latest are read: a limit takes the last ones to end.
    assert [r.job.id for r in pr.ended_runs(store, 2)] == ran[-2:]
