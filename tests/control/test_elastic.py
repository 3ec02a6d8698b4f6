"""Elastic jobs in the live loop (``suanli.control.resize``), with the fake backend and a
fake clock: growing into idle GPUs, shrinking for a job that waits (before any preemption),
the layout each task is told, the claims, the history, metering and a restart.
``tests/cli/test_serve_elastic.py`` runs the same through the real server."""

from __future__ import annotations

from typing import Any

import pytest

from declared import declare_inventory
from fake_clock import Clock
from suanli.backends.base import Elastic
from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
from suanli.config.cluster import load_cluster
from suanli.control.loop import ControlConfig, Controller
from suanli.control.metering import recomputed_usage
from suanli.control.metrics import ControlMetrics
from suanli.control.spec import JobSpec
from suanli.core.preemption import PreemptionConfig
from suanli.sim.engine import PolicySet
from suanli.store import Store, read_usage
from suanli.store import jobs as js

CLUSTER = "1x4xTESTGPU[gpumem=80G,speed=1]"


def make(store: Store, clock: Clock, *, preempt: bool = True) -> tuple[Controller, FakeBackend]:
    cluster = load_cluster(CLUSTER)
    declare_inventory(store, cluster)
    backend = FakeBackend(clock)
    config = ControlConfig(
        cluster=cluster,
        policy=PolicySet.parse("fifo+best-fit"),
        preemption=PreemptionConfig(min_runtime=0, restart_overhead=0) if preempt else None,
    )
    ctl = Controller(store, config, backend, clock=clock, metrics=ControlMetrics())
    return ctl, backend


def spec(runtime: float | None = None, cls: str = "normal", **kw: Any) -> JobSpec:
    env = {RUNTIME_VARIABLE: str(runtime)} if runtime is not None else {}
    return JobSpec(
        command=["train"], gpus=1, cpu=0.5, memory="1G", priority_class=cls, env=env, **kw
    )


ELASTIC = {"tasks": 2, "min_workers": 1, "max_workers": 4}


def submit(store: Store, s: JobSpec, at: float) -> str:
    return js.submit_job(
        store, spec=s.model_dump(mode="json"), tenant="lab", user="ana", name="",
        queue="lab", priority_class=s.priority_class, now_ms=round(at * 1000),
    ).id  # fmt: skip


def job(store: Store, job_id: str) -> js.JobRecord:
    rec = js.get_job(store, job_id)
    assert rec is not None
    return rec


def running_tasks(backend: FakeBackend) -> dict[tuple[str, int, int], tuple[int, ...]]:
    by_key = {(x.job_id, x.attempt, x.task): x.gpus for x in backend.launched}
    return {h.key: by_key[h.key] for h in backend.running()}


def check_claims(store: Store, ctl: Controller, backend: FakeBackend) -> None:
    """Claims never pass one GPU; each GPU is claimed by the one task that runs there (a
    task a shrink stops is running, unclaimed, until it exits, and nothing starts there)."""
    claimed = js.claims(store)
    assert all(0 < m <= 1000 for m in claimed.values()), claimed
    on: dict[int, list[tuple[str, int, int]]] = {}
    for key, gpus in running_tasks(backend).items():
        for g in gpus:
            on.setdefault(g, []).append(key)
    assert all(len(v) == 1 for v in on.values()), on  # no GPU runs two tasks
    held = {
        (ctl.node_names[tp.node], g)
        for a in ctl.live.values()
        if a.state != "stopping"
        for tp in a.placement.tasks
        for g in tp.gpus
    }
    assert set(claimed) == held


def events(store: Store, job_id: str, kind: str) -> list[str]:
    return [e.detail for e in js.job_history(store, job_id) if e.kind == kind]


def test_an_elastic_job_grows_into_idle_gpus_then_shrinks_for_an_online_job(
    store: Store,
) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    e = submit(store, spec(**ELASTIC), clock.t)
    ctl.step()
    # Started on its requested 2, then grown into the 2 idle GPUs in the same pass.
    assert job(store, e).state == "running"
    assert len(running_tasks(backend)) == 4
    first = [x for x in backend.launched if x.job_id == e]
    assert [x.elastic for x in first] == [(2, 0, 0), (2, 1, 0), (4, 2, 1), (4, 3, 1)]
    assert backend.files[(e, 1, 0)] == Elastic(4, 0, 1)
    assert backend.files[(e, 1, 1)] == Elastic(4, 1, 1)
    assert events(store, e, "resized") == ["attempt 1: from 2 to 4 workers, into 2 idle GPU(s)"]
    check_claims(store, ctl, backend)

    # An online job needs a GPU: the elastic job gives one (its highest rank), not preempted.
    clock.t += 10
    o = submit(store, spec(cls="online"), clock.t)
    decisions = ctl.step()
    assert [type(d).__name__ for d in decisions] == ["Admit"]  # no Preempt
    assert job(store, o).state == "admitted"  # waits for the removed task to exit
    check_claims(store, ctl, backend)
    ctl.step()
    assert job(store, o).state == "running" and job(store, e).state == "running"
    for rank in range(3):
        assert backend.files[(e, 1, rank)] == Elastic(3, rank, 2)
    assert (e, 1, 3) not in running_tasks(backend)
    assert events(store, e, "resized")[1] == (
        f"attempt 1: from 4 to 3 workers, for job {o} (online), which waits for GPUs"
    )
    check_claims(store, ctl, backend)
    assert ctl.metrics is not None
    body = ctl.metrics.render()[0].decode()
    assert 'suanli_job_resizes_total{direction="grow",queue="lab",tenant="lab"} 1.0' in body
    assert 'suanli_job_resizes_total{direction="shrink",queue="lab",tenant="lab"} 1.0' in body

    # Nothing waits, no GPU is free: it stays at 3 until the online job ends, then grows.
    ctl.step()
    assert len(events(store, e, "resized")) == 2
    clock.t += 3
    js.request_cancel(store, o, 0, "ana")
    ctl.step()
    ctl.step()
    assert job(store, o).state == "cancelled"
    assert len([k for k in running_tasks(backend) if k[0] == e]) == 4
    assert backend.files[(e, 1, 0)] == Elastic(4, 0, 3)
    check_claims(store, ctl, backend)

    # Metered in segments: 4 tasks (grown at once), then 3, then 4 again.
    js.request_cancel(store, e, 0, "ana")
    clock.t += 5
    ctl.step()
    ctl.step()
    assert job(store, e).state == "cancelled"
    usage = [r for r in read_usage(store) if r.job_id == e]
    assert [(r.duration_ms, r.gpu_milli) for r in sorted(usage, key=lambda r: r.start_ms)
            if r.duration_ms] == [(10_000, 4000), (3_000, 3000), (5_000, 4000)]  # fmt: skip
    assert sorted(r.key for r in read_usage(store)) == sorted(
        r.key for r in recomputed_usage(store, ctl.config)
    )
    assert js.claims(store) == {}


def test_a_job_of_the_same_class_takes_back_only_the_lent_workers(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    e = submit(store, spec(**ELASTIC), clock.t)
    ctl.step()
    assert len(running_tasks(backend)) == 4
    a = submit(store, spec(), clock.t)
    b = submit(store, spec(), clock.t)
    c = submit(store, spec(), clock.t)
    for _ in range(4):
        ctl.step()
        check_claims(store, ctl, backend)
    # Two lent workers given back; not below the requested 2 for jobs of its own class.
    assert [job(store, j).state for j in (a, b, c)] == ["running", "running", "pending"]
    assert len([k for k in running_tasks(backend) if k[0] == e]) == 2
    assert job(store, e).attempts == 1


def test_a_preempted_elastic_job_is_requeued_at_its_requested_size(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    e = submit(store, spec(cls="spot", **{**ELASTIC, "min_workers": 2}), clock.t)
    ctl.step()
    assert len(running_tasks(backend)) == 4
    h = submit(store, spec(cls="high", tasks=3), clock.t)
    for _ in range(3):
        ctl.step()
        check_claims(store, ctl, backend)
    # Shrunk to its minimum (2): still no room for 3, so it was preempted instead; it is
    # pending again at the size it asked for.
    assert job(store, h).state == "running"
    assert job(store, e).state == "pending"
    pending = ctl.pending[e][2]
    assert (pending.tasks, pending.gang_min) == (2, 2)


def test_a_restart_finishes_a_shrink_and_tells_the_survivors(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    e = submit(store, spec(**ELASTIC), clock.t)
    ctl.step()
    o = submit(store, spec(cls="online"), clock.t)
    ctl.step()  # shrink decided and written; the removed task is stopping
    backend.restart()
    ctl2 = Controller(store, ctl.config, backend, clock=clock)
    ctl2.recover()
    ctl2.step()
    ctl2.step()
    assert job(store, o).state == "running"
    # Grown (generation 1), shrunk (2): told once, never a generation back.
    for rank in range(3):
        assert backend.files[(e, 1, rank)] == Elastic(3, rank, 2)
    assert [g for _, t in backend.resized for g in [t.generation]] == [1, 1, 2, 2, 2]
    check_claims(store, ctl2, backend)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"tasks": 2, "min_workers": 3}, "min_workers"),
        ({"tasks": 2, "max_workers": 1}, "max_workers"),
        ({"tasks": 2, "min_workers": 2, "max_workers": 1}, "max_workers"),
        ({"tasks": 2, "min_workers": 0}, "min_workers"),
        ({"tasks": 2, "max_workers": 5000}, "max_workers"),
        ({"tasks": 2, "min_workers": True}, "min_workers"),
        ({**ELASTIC, "stop_signal": "SIGUSR1"}, "stop_signal"),
        ({**ELASTIC, "stop_signal": "USR1"}, "stop_signal"),
        ({**ELASTIC, "speedup": "power:2"}, "speedup"),
        ({**ELASTIC, "gang_min": 2}, "min_workers"),
    ],
    ids=[
        "min-above-tasks",
        "max-below-tasks",
        "max-below-min",
        "min-zero",
        "max-huge",
        "boolean",
        "sigusr1",
        "usr1",
        "speedup",
        "gang-min-disagrees",
    ],  # fmt: skip
)
def test_a_bad_elastic_spec_names_its_field(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError) as e:
        JobSpec(command=["x"], **fields)
    assert e.value.errors()[0]["loc"] == (where,)  # type: ignore[attr-defined]


def test_sigusr1_stays_a_stop_signal_for_a_job_that_is_not_elastic() -> None:
    assert JobSpec(command=["x"], tasks=2, stop_signal="SIGUSR1").stop_signal == "SIGUSR1"
    assert not JobSpec(command=["x"], tasks=2, min_workers=2, max_workers=2).elastic


def test_it_starts_on_fewer_tasks_when_only_that_many_gpus_are_free(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    other = submit(store, spec(tasks=3), clock.t)
    e = submit(store, spec(**ELASTIC), clock.t)
    ctl.step()
    assert job(store, other).state == "running" and job(store, e).state == "running"
    assert [x.elastic for x in backend.launched if x.job_id == e] == [(1, 0, 0)]
    check_claims(store, ctl, backend)


def test_a_job_without_gpus_does_not_grow_into_idle_gpus(store: Store) -> None:
    clock = Clock()
    ctl, backend = make(store, clock)
    ctl.recover()
    e = submit(store, spec(**ELASTIC).model_copy(update={"gpus": 0}), clock.t)
    ctl.step()
    ctl.step()
    assert len(running_tasks(backend)) == 2 and events(store, e, "resized") == []
