"""The pure co-location policies: speedup curves and resize plans, Lyra's reclaim order,
interference and the idle tracker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.elastic import (
    DEFAULT_SPEEDUP,
    ElasticRange,
    Resizable,
    parse_speedup,
    plan_growth,
    plan_shrink,
)
from suanli.core.idle import IdlePolicy, IdleTracker, Verdict
from suanli.core.interference import Interference, busy, fits
from suanli.core.loaning import Victim, reclaim
from suanli.core.model import SpecError

S = parse_speedup(DEFAULT_SPEEDUP)


def test_default_speedup_is_horovods_vgg16_efficiency() -> None:
    # Sergeev and Del Balso (arXiv:1802.05799): 68% scaling efficiency on 512 GPUs.
    assert S(512) / 512 == pytest.approx(0.68, abs=0.002)
    assert parse_speedup("linear")(7) == 7


@pytest.mark.parametrize(
    ("text", "n", "want"),
    [("points:1=1,4=3,8=5", 2, 1 + 2 / 3), ("points:2=2,4=3", 1, 1.0), ("power:0.5", 16, 4.0)],
)
def test_speedup_forms(text: str, n: float, want: float) -> None:
    assert parse_speedup(text)(n) == pytest.approx(want)


@pytest.mark.parametrize("text", ["power:0", "power:1.5", "points:4=1,2=2", "points:1=2,2=1", "x"])
def test_bad_speedups_say_the_forms(text: str) -> None:
    with pytest.raises(SpecError, match="linear, power:ALPHA"):
        parse_speedup(text)


def _jobs(draw: st.DrawFn) -> list[Resizable]:
    out = []
    for k in range(draw(st.integers(1, 6))):
        req = draw(st.integers(1, 16))
        rng = ElasticRange.around(req, 64)
        w = draw(st.integers(rng.min_workers, rng.max_workers))
        out.append(
            Resizable(f"j{k}", rng, w, S, draw(st.floats(10.0, 1e5)), draw(st.integers(0, 2)))
        )
    return out


jobs_st = st.composite(_jobs)()


@settings(max_examples=150, deadline=None)
@given(jobs=jobs_st, free=st.integers(0, 64))
def test_growth_never_over_commits(jobs: list[Resizable], free: int) -> None:
    plan = plan_growth(jobs, free)
    by = {j.job_id: j for j in jobs}
    assert sum(n - by[k].workers for k, n in plan.items()) <= free
    for k, n in plan.items():
        assert by[k].workers < n <= by[k].range.max_workers


@settings(max_examples=150, deadline=None)
@given(jobs=jobs_st, need=st.integers(0, 64))
def test_shrink_never_goes_below_a_minimum(jobs: list[Resizable], need: int) -> None:
    plan, freed = plan_shrink(jobs, need)
    by = {j.job_id: j for j in jobs}
    assert freed == sum(by[k].workers - n for k, n in plan.items()) <= need
    for k, n in plan.items():
        assert by[k].range.min_workers <= n < by[k].workers
    room = sum(j.workers - j.range.min_workers for j in jobs)
    assert freed == min(need, room)


def test_growth_skips_a_job_whose_saving_is_below_the_resize_cost() -> None:
    near_end = Resizable("a", ElasticRange(1, 4, 2), 2, S, remaining=20.0)
    assert plan_growth([near_end], 2, resize_cost=30.0) == {}
    assert plan_growth([near_end], 2, resize_cost=1.0) == {"a": 4}


def test_reclaim_shrinks_before_it_preempts_and_preempts_the_fewest() -> None:
    el = [Resizable("e", ElasticRange(2, 8, 4), 6, S, 1e4)]
    vs = [Victim("a", 1), Victim("b", 1), Victim("c", 4), Victim("d", 8)]
    r = reclaim(10, 2, el, vs)
    assert r.free == 2 and r.shrink == {"e": 2}  # 4 GPUs from the elastic job
    assert r.preempt == ("c",)  # the 4 still needed: one job, not a + b + ...
    assert r.short == 0


def test_reclaim_prefers_lower_priority_and_less_lost_work() -> None:
    vs = [Victim("hi", 4, priority=5), Victim("lo1", 4, 0, lost=900.0), Victim("lo2", 4, 0, 10.0)]
    assert reclaim(4, 0, [], vs).preempt == ("lo2",)


@settings(max_examples=150, deadline=None)
@given(
    need=st.integers(0, 40),
    free=st.integers(0, 10),
    sizes=st.lists(st.integers(1, 8), max_size=10),
)
def test_reclaim_frees_what_is_needed_and_no_victim_is_spare(
    need: int, free: int, sizes: list[int]
) -> None:
    vs = [Victim(f"v{k}", g) for k, g in enumerate(sizes)]
    r = reclaim(need, free, [], vs)
    got = r.free + sum(v.gpus for v in vs if v.job_id in r.preempt)
    assert got >= need - r.short
    assert r.short == max(0, need - free - sum(sizes))
    for v in vs:
        if v.job_id in r.preempt:
            assert got - v.gpus < need  # none could be spared


def test_interference_model() -> None:
    m = Interference()  # kappa 0.3: ~30% slower under MPS memory contention (Villarrubia 2026)
    assert m.rate(0.5, 0.0) == 1.0
    assert m.slowdown(0.5, 1.0) == pytest.approx(1.3 * 1.5)
    assert m.slowdown(0.2, 0.3) == pytest.approx(1.09)
    assert busy(0.7, 0.6) == 1.0
    assert fits(40_000, 40_000, 81_920) and not fits(60_000, 30_000, 81_920)


def test_idle_job_is_warned_then_reclaimed_once() -> None:
    t = IdleTracker(IdlePolicy(threshold=0.05, window=100.0, grace=50.0))
    seen = [t.observe("j", s, 0.01) for s in (0.0, 60.0, 100.0, 120.0, 150.0, 200.0)]
    assert seen == [Verdict.BELOW, Verdict.BELOW, Verdict.WARN, Verdict.IDLE,
                    Verdict.RECLAIM, Verdict.IDLE]  # fmt: skip
    assert t.observe("j", 210.0, 0.5) is Verdict.BUSY
    assert t.observe("j", 220.0, 0.01) is Verdict.BELOW  # the clock starts again


@settings(max_examples=100, deadline=None)
@given(
    duties=st.lists(st.floats(0.0, 0.2), min_size=1, max_size=40),
    online=st.booleans(),
    label=st.sampled_from(["interactive", "debugging"]),
)
def test_reclaim_never_touches_an_online_or_protected_job(
    duties: list[float], online: bool, label: str
) -> None:
    t = IdleTracker(IdlePolicy(window=60.0, grace=60.0))
    for k, d in enumerate(duties):
        v_on = t.observe("svc", k * 60.0, d, online=True)
        v_pr = t.observe("dbg", k * 60.0, d, online=online, labels=(label, "x"))
        assert v_on is not Verdict.RECLAIM and v_pr is not Verdict.RECLAIM
        assert v_on is not Verdict.WARN and v_pr is not Verdict.WARN


def test_idle_policy_refuses_bad_values() -> None:
    with pytest.raises(SpecError, match="idle action"):
        IdlePolicy(action="kill")
    with pytest.raises(SpecError, match="threshold"):
        IdlePolicy(threshold=0.0)
