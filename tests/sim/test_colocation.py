"""The co-location simulator on small scenarios built here: its invariants every step
(nothing over-committed, jobs within their ranges, replicas only beside workers they may
share with, never below the service's minimum) and what each lever does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.idle import IdlePolicy
from suanli.core.serving.service import ServiceSpec
from suanli.sim.colocation.engine import Run, run
from suanli.sim.colocation.model import PREEMPT_LYRA, Levers, Scenario, Training
from suanli.sim.colocation.outcome import bound, summarise

STEP = 60.0


def scenario(seed: int, gpus: int = 32, days: float = 1.0, jobs: int = 120) -> Scenario:
    rng = np.random.default_rng(seed)
    steps = int(days * 86400 / STEP)
    t = np.arange(steps) * STEP
    demand = 4.0 + 3.5 * np.sin(2 * np.pi * t / 86400) + rng.uniform(0, 0.5, steps)
    g = rng.choice([1, 2, 4, 8], jobs)
    elastic = g > 1
    training = Training(
        ids=tuple(f"j{k}" for k in range(jobs)),
        submit=np.sort(rng.uniform(0, days * 86400 * 0.8, jobs)),
        runtime=rng.exponential(3600.0, jobs) + 60.0,
        gpus=g,
        min_w=np.where(elastic, g // 2, g),
        max_w=np.where(elastic, np.minimum(2 * g, 8), g),
        duty=rng.uniform(0.0, 0.9, jobs),
        memory_mib=rng.integers(8_000, 80_000, jobs),
        labels=tuple(frozenset({"debugging"}) if k % 7 == 0 else frozenset() for k in range(jobs)),
    )
    svc = ServiceSpec("s", mu=0.5, slo=10.0, cold_start=120.0, min_replicas=2,
                      max_replicas=gpus, headroom=0.1, gpu_memory_mib=20_000)  # fmt: skip
    return Scenario(gpus=gpus, gpu_memory_mib=81_920, step=STEP, service=svc, demand=demand,
                    training=training, pool=12, history=demand[: steps // 2])  # fmt: skip


SETUPS = (
    Levers("static", partition=True, autoscaler="fixed", options=(("replicas", 12),)),
    Levers("shared", autoscaler="reactive"),
    Levers("suanli", autoscaler="predictive", preempt=PREEMPT_LYRA, elastic=True, sharing=True,
           idle=IdlePolicy(threshold=0.1, window=600.0, grace=300.0, action="shrink")),
)  # fmt: skip


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), which=st.sampled_from(range(len(SETUPS))))
def test_invariants_hold_every_step(seed: int, which: int) -> None:
    sc = scenario(seed, days=0.5, jobs=60)
    tr = run(sc, SETUPS[which], check=True)  # asserts the invariants after every step
    assert (tr.alloc <= sc.gpus).all()
    assert (tr.busy <= tr.alloc + 1e-9).all()
    if not SETUPS[which].partition:
        assert (tr.replicas[10:] >= sc.service.min_replicas).all()


def test_every_job_finishes_or_is_accounted_for() -> None:
    sc = scenario(3)
    for lv in SETUPS:
        tr = run(sc, lv)
        fin = ~np.isnan(tr.finish)
        assert (tr.finish[fin] >= sc.training.submit[fin]).all()
        assert (tr.start[fin] <= tr.finish[fin]).all()
        s = summarise(lv.name, sc, tr)
        assert s.utilisation <= bound(sc).utilisation + 1e-9
        assert 0 <= s.slo_attainment <= 1


def test_useful_work_is_what_the_jobs_needed() -> None:
    """A job that finishes did exactly its work: its runtime at its requested size, whatever
    it was resized to, slowed by or preempted on the way."""
    sc = scenario(5)
    tr = run(sc, SETUPS[2])
    fin = ~np.isnan(tr.finish)
    want = (sc.training.runtime * sc.training.gpus)[fin]
    assert tr.useful[fin] == pytest.approx(want, rel=1e-9)


def test_protected_and_online_work_is_never_reclaimed() -> None:
    sc = scenario(11)
    r = Run(sc, SETUPS[2])
    r.run()
    protected = np.array(["debugging" in lab for lab in sc.training.labels])
    assert not r.idle_host[protected].any()
    assert r.reclaimed > 0  # the others were


def test_sharing_puts_replicas_only_beside_low_duty_workers_that_fit() -> None:
    sc = scenario(2, gpus=16)
    r = Run(sc, SETUPS[2], check=True)
    tr = r.run()
    assert tr.shared_gpu_seconds > 0  # it shared, so check=True checked each placement
    ok = (sc.training.duty <= sc.share_max_duty) & (
        sc.training.memory_mib + sc.service.gpu_memory_mib <= sc.gpu_memory_mib
    )
    assert (r.hosted[~ok] == 0).all()


@pytest.mark.parametrize("seed", [1, 2, 3, 8])
def test_elastic_jobs_wait_less_than_rigid_ones_on_the_same_pool(seed: int) -> None:
    """On a pool that can carry the load (48 GPUs; on 24 the queue grows without bound
    either way, and elasticity does not shorten it)."""
    sc = scenario(seed, gpus=48, jobs=150)
    rigid = summarise("r", sc, run(sc, Levers("r", autoscaler="predictive", preempt=PREEMPT_LYRA)))
    elastic = summarise(
        "e", sc, run(sc, Levers("e", autoscaler="predictive", preempt=PREEMPT_LYRA, elastic=True))
    )
    assert elastic.queue_mean < rigid.queue_mean
    assert elastic.resizes > 0 and rigid.resizes == 0
