"""Builders for the live loop's tests: a controller over a real store with the fake backend
and a fake clock, job specs, submissions and what the store says of them."""

from __future__ import annotations

from typing import Any

from declared import declare_inventory
from fake_clock import Clock
from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
from suanli.config.cluster import load_cluster
from suanli.control.loop import ControlConfig, Controller
from suanli.control.spec import JobSpec
from suanli.core.preemption import PreemptionConfig
from suanli.sim.engine import PolicySet
from suanli.store import Store
from suanli.store import jobs as js

CLUSTER = "2x4xTESTGPU[gpumem=80G,speed=1]"


def make(
    store: Store,
    clock: Clock,
    *,
    preempt: bool = False,
    policy: str = "fifo+best-fit",
    preemption: str = "checkpoint-aware",
) -> tuple[Controller, FakeBackend]:
    cluster = load_cluster(CLUSTER)
    declare_inventory(store, cluster)
    backend = FakeBackend(clock)
    config = ControlConfig(
        cluster=cluster,
        policy=PolicySet.parse(policy),
        preemption=PreemptionConfig(min_runtime=0, restart_overhead=0, policy=preemption)
        if preempt
        else None,
    )
    return Controller(store, config, backend, clock=clock), backend


def spec(runtime: float | None, gpus: float = 1, cls: str = "normal", **kw: Any) -> JobSpec:
    env = {RUNTIME_VARIABLE: str(runtime)} if runtime is not None else {}
    return JobSpec(
        command=["train"], gpus=gpus, cpu=1, memory="1G", priority_class=cls, env=env, **kw
    )


def submit(store: Store, s: JobSpec, at: float, tenant: str = "lab") -> str:
    rec = js.submit_job(
        store,
        spec=s.model_dump(mode="json"),
        tenant=tenant,
        user="ana",
        name="",
        queue=tenant,
        priority_class=s.priority_class,
        now_ms=round(at * 1000),
    )
    return rec.id


def state(store: Store, job_id: str) -> str:
    rec = js.get_job(store, job_id)
    assert rec is not None
    return rec.state


def used(store: Store) -> int:
    return sum(g.used_milli for _, gs in js.list_nodes(store) for g in gs)
