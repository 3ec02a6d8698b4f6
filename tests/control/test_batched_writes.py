"""The loop's writes of one pass, batched: the admissions of a run of decisions in one
transaction, the launches of a pass recorded in one, and recovery's and reconciliation's
reads of the pending jobs. The store must end up as it does with one transaction per
decision, and a write that fails must still fail only its own job."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import sqlalchemy as sa

from declared import declare_inventory
from fake_clock import Clock
from loop_builders import CLUSTER, make, spec, state, submit
from pg import postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.config.cluster import load_cluster
from suanli.control.loop import Controller
from suanli.control.spec import JobSpec
from suanli.core.decisions import Admit, Preempt
from suanli.store import Store, open_store
from suanli.store import jobs as js
from suanli.store.schema import attempts, gpu_claims, gpus, job_events, jobs

store = store_fixture()  # each test on SQLite and on PostgreSQL


def dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the loop writes, in the order it wrote them."""
    with store.read() as conn:
        return {
            t.name: [tuple(r) for r in conn.execute(sa.select(t).order_by(*t.primary_key))]
            for t in (jobs, attempts, gpu_claims, job_events, gpus)
        }


def drive(store: Store) -> list[tuple[Any, ...]]:
    """A mixed workload (gangs, shares, preemptions) from event to event to its end; the
    admissions and preemptions in order."""
    rnd = random.Random(11)
    specs: list[tuple[float, JobSpec]] = []
    t = 0.0
    for _ in range(60):
        t += rnd.choice([0, 0, 0, 5, 30])
        gpus = rnd.choice([0.5, 1, 1, 2, 4])
        tasks = rnd.choice([1, 2]) if gpus >= 1 else 1
        cls = rnd.choice(["spot", "normal", "normal", "high"])
        specs.append((t, spec(rnd.choice([20, 60, 200]), gpus=gpus, cls=cls, tasks=tasks)))
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
                got.append((clock.t, type(d).__name__, d.job.id, d.placement))
    return got


def test_batched_writes_leave_the_store_as_one_transaction_per_decision_does(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    batched = open_store(tmp_path / "batched.db")
    single = open_store(tmp_path / "single.db")
    try:
        got = drive(batched)
        assert sum(1 for d in got if d[1] == "Admit") > 60  # runs of several, and preemptions
        assert any(d[1] == "Preempt" for d in got)

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise sa.exc.OperationalError("batch", {}, Exception("refused"))

        # Every batch refused: each decision and each launch is written on its own, as
        # before batching.
        monkeypatch.setattr(js, "admit_attempts", refuse)
        monkeypatch.setattr(js, "attempts_started", refuse)
        assert drive(single) == got
        assert dump(single) == dump(batched)
    finally:
        batched.close()
        single.close()


def test_a_claim_refused_in_a_batch_requeues_that_job_alone(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    # Another writer claims a GPU behind the loop's back (the view believes it free).
    other = submit(store, spec(None), clock.t)
    node = ctl.node_names[0]
    with store.begin() as conn:
        conn.execute(sa.update(jobs).where(jobs.c.id == other).values(state="failed"))
        js.admit_attempt(conn, other, 1, [{"task": 0, "node": node, "gpus": [0],
                                           "gpu_milli": 1000, "gpu_memory_mib": 0,
                                           "cpu_milli": 0, "memory_mib": 0}], 0)  # fmt: skip
    ids = [submit(store, spec(None, gpus=1), clock.t) for _ in range(8)]
    with caplog.at_level(logging.WARNING, "suanli.control"):
        ctl.step()
    assert "8 admissions in one transaction failed (IntegrityError" in caplog.text
    states = [state(store, j) for j in ids]
    assert states.count("pending") == 1 and states.count("running") == 7, states
    (waiting,) = [j for j, s in zip(ids, states, strict=True) if s == "pending"]
    assert waiting in ctl.pending and ctl.sched.pending_jobs()[0].id == waiting
    assert not any(a.job.id == waiting for a in ctl.live.values())


def test_launches_that_cannot_be_recorded_together_are_recorded_one_by_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    ids = [submit(store, spec(100, gpus=1), clock.t) for _ in range(4)]
    real = js.attempt_started

    def together(*args: Any, **kwargs: Any) -> None:
        raise sa.exc.OperationalError("batch", {}, Exception("refused"))

    def alone(target: Any, job_id: str, *args: Any) -> None:
        if job_id == ids[2]:
            raise js.JobStoreError("injected")
        real(target, job_id, *args)

    monkeypatch.setattr(js, "attempts_started", together)
    monkeypatch.setattr(js, "attempt_started", alone)
    ctl.step()
    assert [state(store, j) for j in ids] == ["running", "running", "failed", "running"]
    rec = js.get_job(store, ids[2])
    assert rec is not None and rec.reason == (
        "failed: internal error while recording its launch: JobStoreError: injected"
    )
    ctl.step()  # the failed job's task was stopped: its end is seen here
    assert {h.job_id for h in backend.running()} == {ids[0], ids[1], ids[3]}
    assert sum(g.used_milli for _, gs in js.list_nodes(store) for g in gs) == 3000


def test_the_batched_store_calls_refuse_a_job_that_is_not_there(store: Store) -> None:
    declare_inventory(store, load_cluster(CLUSTER))
    a = submit(store, spec(None), 0)
    node = js.list_nodes(store)[0][0].name
    place = [{"task": 0, "node": node, "gpus": [0], "gpu_milli": 1000, "gpu_memory_mib": 0,
              "cpu_milli": 0, "memory_mib": 0}]  # fmt: skip
    with pytest.raises(js.JobStoreError), store.begin() as conn:
        js.attempts_started(conn, [(a, 1, []), ("no-such-job", 1, [])], 0)
    with store.begin() as conn:
        js.admit_attempts(conn, [(a, 1, place)], 5)
        js.attempts_started(conn, [(a, 1, [{"pid": 1}])], 6)
    rec = js.get_job(store, a)
    assert rec is not None and (rec.state, rec.attempts, rec.reason) == ("running", 1, None)
    assert [e.kind for e in js.job_history(store, a)] == ["submitted", "admitted", "running"]
    assert js.job_ids_in(store, ["running"]) == [(rec.seq, a)]


def test_recovery_takes_in_jobs_submitted_while_it_runs_and_each_job_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    lost = submit(store, spec(100, gpus=4), clock.t)
    ctl.step()
    waiting = [submit(store, spec(100, gpus=4), clock.t) for _ in range(3)]
    ctl.step()
    assert state(store, lost) == "running" and [state(store, j) for j in waiting] == [
        "running", "pending", "pending"
    ]  # fmt: skip
    # A restart whose backend has forgotten the first job's task: the job is requeued
    # during recovery; meanwhile a job is submitted.
    (gone,) = [a for a in ctl.live.values() if a.job.id == lost]
    for h in gone.handles.values():
        backend._world.pop(h.key)
    backend.restart()
    late: list[str] = []
    real = js.live_attempts

    def live_attempts(target: Any) -> list[js.AttemptRecord]:
        if not late:  # after recovery's first read of the jobs
            late.append(submit(store, spec(100, gpus=1), clock.t))
        return real(target)

    monkeypatch.setattr(js, "live_attempts", live_attempts)
    ctl2 = Controller(store, ctl.config, backend, clock=clock)
    ctl2.recover()
    monkeypatch.undo()
    pending = [j.id for j in ctl2.sched.pending_jobs()]
    assert sorted(pending) == sorted([lost, *waiting[1:], late[0]])
    assert len(pending) == len(set(pending))
    assert set(ctl2.pending) == set(pending)


def test_reconciliation_takes_in_a_pending_job_the_loop_does_not_hold(store: Store) -> None:
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    held = [submit(store, spec(100, gpus=4), clock.t) for _ in range(3)]
    ctl.step()
    forgotten = held[2]
    assert state(store, forgotten) == "pending"
    ctl.sched.remove(forgotten)
    del ctl.pending[forgotten]
    repaired = ctl.reconcile()
    assert repaired == [f"job {forgotten}: taken in: pending in the store but not in the scheduler"]
    assert forgotten in ctl.pending and [j.id for j in ctl.sched.pending_jobs()] == [forgotten]
    assert ctl.reconcile() == []
