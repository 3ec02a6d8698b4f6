"""The simulator on small, hand-computed workloads."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from builders import A100, T4, cluster, cpu_only, frac, gpus_cluster, job, node, task
from suanli.core.builder import build
from suanli.core.model import SpecError, TaskRequest
from suanli.core.registry import UnknownPolicyError, names
from suanli.core.view import ClusterView
from suanli.sim.engine import ImpossibleJobError, PolicySet, Replay, check_feasible, simulate
from suanli.sim.explain import Explainer


def times(res) -> dict[str, tuple[float, float]]:  # type: ignore[no-untyped-def]
    """job id -> (start, finish); NaN where it never happened."""
    r = res.records
    return {i: (float(s), float(f)) for i, s, f in zip(r.ids, r.start, r.finish, strict=True)}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        all((x == y) or (math.isnan(x) and math.isnan(y)) for x, y in zip(a[k], b[k], strict=True))
        for k in a
    )


# One node of 8 GPUs: A (4 GPUs, 0..100), B (8 GPUs, arrives at 10), C (2 GPUs, arrives at 20).
THREE = [
    job("A", 0, 100, gpus=4),
    job("B", 10, 50, gpus=8),
    job("C", 20, 30, gpus=2),
]


def test_three_jobs_skip_ahead() -> None:
    res = simulate(gpus_cluster(8), THREE, PolicySet("fifo", "best-fit"))
    # C backfills next to A while B waits for the whole node.
    assert times(res) == {"A": (0, 100), "B": (100, 150), "C": (20, 50)}
    assert (res.jobs, res.started, res.finished, res.unfinished) == (3, 3, 3, 0)
    assert res.makespan == 150
    assert res.jct.count == 3
    assert res.jct.mean == pytest.approx((100 + 140 + 30) / 3)
    assert res.jct.p50 == 100
    assert res.wait.mean == pytest.approx(30)
    assert res.wait.p50 == 0
    # Whole run: 4 GPUs for 20 s, 6 for 30 s, 4 for 50 s, 8 for 50 s, over 150 s of 8 GPUs.
    assert res.gpu_allocation_run == pytest.approx((4 * 20 + 6 * 30 + 4 * 50 + 8 * 50) / (8 * 150))
    # Arrival window (0 to the last arrival at 20): 4 of 8 GPUs throughout.
    assert res.gpu_allocation == pytest.approx(0.5)
    assert res.gpu_utilisation == pytest.approx(res.gpu_allocation)
    assert res.series.t.tolist() == [0, 10, 20, 50, 100, 150]
    assert res.series.allocation.tolist() == [0.5, 0.5, 0.75, 0.5, 1.0, 0.0]
    assert res.series.pending.tolist() == [0, 1, 1, 1, 0, 0]
    assert res.records.tasks.tolist() == [1, 1, 1]
    assert res.records.gpu_milli.tolist() == [4000, 8000, 2000]
    assert res.label == "fifo+best-fit" and res.total_gpus == 8


def test_three_jobs_strict() -> None:
    res = simulate(gpus_cluster(8), THREE, PolicySet("fifo", "best-fit", strict=True))
    # C waits behind the blocked head B, then behind B itself.
    assert times(res) == {"A": (0, 100), "B": (100, 150), "C": (150, 180)}
    assert res.jct.mean == pytest.approx((100 + 140 + 160) / 3)
    assert res.wait.mean == pytest.approx((0 + 90 + 130) / 3)
    assert res.gpu_allocation_run == pytest.approx((4 * 100 + 8 * 50 + 2 * 30) / (8 * 180))
    assert res.gpu_allocation == pytest.approx(0.5)
    assert res.makespan == 180
    assert res.label == "fifo/strict+best-fit"


def test_gpu_util_scales_utilisation_not_allocation() -> None:
    # A single arrival: the arrival window falls back to the whole run.
    res = simulate(gpus_cluster(2), [job("a", 0, 10, gpus=2, gpu_util=0.25)], PolicySet())
    assert res.gpu_allocation == pytest.approx(1.0)
    assert res.gpu_allocation_run == pytest.approx(1.0)
    assert res.gpu_utilisation == pytest.approx(0.25)


def test_allocation_window_is_the_arrivals() -> None:
    # One GPU of two from 0 to 10 (arrivals at 0 and 10), then both GPUs from 10 to 30.
    jobs = [job("a", 0, 30), job("b", 10, 20)]
    res = simulate(gpus_cluster(2), jobs, PolicySet())
    assert res.gpu_allocation == pytest.approx(0.5)
    assert res.gpu_allocation_run == pytest.approx((1 * 10 + 2 * 20) / (2 * 30))


# (id, cluster, job, expected duration)
# fmt: off
SPEED = [
    ("reference", cluster(node("v", 1)), job("j", 0, 100), 100),
    ("fast-gpu", cluster(node("a", 1, A100)), job("j", 0, 100), 50),
    ("slow-gpu", cluster(node("t", 1, T4)), job("j", 0, 100), 200),
    ("gang-goes-at-the-slowest", cluster(node("a", 1, A100), node("t", 1, T4)), job("j", 0, 100, tasks=2), 200),
    ("cpu-only-ignores-gpu-speed", cluster(node("t", 1, T4)), job("j", 0, 100, t=cpu_only(1)), 100),
    ("partial-gang-scales-work", gpus_cluster(3), job("j", 0, 90, tasks=4, gang_min=2), 120),
    ("partial-gang-on-fast-gpus", cluster(node("a", 3, A100)), job("j", 0, 90, tasks=4, gang_min=2), 60),
    ("zero-runtime", gpus_cluster(1), job("j", 5, 0), 0),
]
# fmt: on


@pytest.mark.parametrize("spec, j, duration", [s[1:] for s in SPEED], ids=[s[0] for s in SPEED])
def test_duration(spec, j, duration) -> None:
    res = simulate(spec, [j], PolicySet("fifo", "first-fit"))
    start, finish = times(res)[j.id]
    assert start == j.submit
    assert finish - start == pytest.approx(duration)


def test_partial_gang_records_its_tasks() -> None:
    res = simulate(gpus_cluster(3), [job("j", 0, 90, tasks=4, gang_min=2)], PolicySet())
    assert res.records.tasks.tolist() == [3]
    assert res.records.gpu_milli.tolist() == [3000]


def test_finishes_free_capacity_for_arrivals_at_the_same_instant() -> None:
    res = simulate(gpus_cluster(1), [job("a", 0, 10), job("b", 10, 5)], PolicySet())
    assert times(res) == {"a": (0, 10), "b": (10, 15)}


# ------------------------------------------------------------------ cycle interval


def test_cycle_interval_delays_starts_to_ticks() -> None:
    jobs = [job("a", 3, 5), job("b", 4, 5)]
    assert times(simulate(gpus_cluster(1), jobs, PolicySet())) == {"a": (3, 8), "b": (8, 13)}
    res = simulate(gpus_cluster(1), jobs, PolicySet(), cycle_interval=10)
    # a waits for the tick at 10; b waits for a's GPU (free at 15), then for the tick at 20.
    assert times(res) == {"a": (10, 15), "b": (20, 25)}


def test_cycle_interval_on_a_tick_with_another_job_pending() -> None:
    # w pending since 3 makes the tick at 10 run: x, arriving at 10, starts at 10.
    jobs = [job("w", 3, 100, gpus=1), job("x", 10, 5)]
    res = simulate(gpus_cluster(2), jobs, PolicySet(), cycle_interval=10)
    assert times(res) == {"w": (10, 110), "x": (10, 15)}


@pytest.mark.parametrize("submit", [0.0, 10.0])
def test_arrival_exactly_on_a_tick_starts_on_that_tick(submit: float) -> None:
    # Was a bug: with the queue empty before the instant, no cycle ran on the tick and the
    # job waited a whole interval (submitted at 0 or 10 with interval 10: started at 10 or 20).
    res = simulate(gpus_cluster(1), [job("x", submit, 5)], PolicySet(), cycle_interval=10)
    assert times(res)["x"] == (submit, submit + 5)


def test_negative_cycle_interval_is_refused() -> None:
    with pytest.raises(SpecError, match="cycle_interval"):
        simulate(gpus_cluster(1), [job("a")], PolicySet(), cycle_interval=-1)


# ------------------------------------------------------------------ until


def test_until_leaves_unfinished_jobs() -> None:
    jobs = [job("a", 0, 100), job("b", 0, 100), job("c", 0, 100), job("late", 200, 10)]
    res = simulate(gpus_cluster(1), jobs, PolicySet(), until=150)
    t = times(res)
    assert t["a"] == (0, 100)
    assert t["b"][0] == 100 and math.isnan(t["b"][1])
    assert all(math.isnan(x) for x in t["c"] + t["late"])
    assert (res.jobs, res.started, res.finished, res.unfinished) == (4, 2, 1, 3)
    assert res.gpu_allocation == pytest.approx(1.0)  # one GPU busy from 0 to until=150
    assert res.jct.count == 1 and res.wait.count == 2
    # The job still pending at the end says why.
    c = res.records.ids.index("c")
    assert res.records.reason[c].startswith("no capacity")


def test_until_includes_events_at_that_instant() -> None:
    res = simulate(gpus_cluster(1), [job("a", 0, 100)], PolicySet(), until=100)
    assert times(res)["a"] == (0, 100) and res.finished == 1


# ------------------------------------------------------------------ feasibility

# (id, cluster, job)
# fmt: off
IMPOSSIBLE = [
    ("too-many-gpus", gpus_cluster(8, 8), job("x", gpus=9)),
    ("gang-too-big", gpus_cluster(8, 8), job("x", gpus=8, tasks=3)),
    ("gang-min-too-big", gpus_cluster(2), job("x", tasks=5, gang_min=3)),
    ("gpu-memory", gpus_cluster(8), job("x", t=frac(100, 40_000))),
    ("model-absent", gpus_cluster(8), job("x", t=task(1, models={"B200"}))),
    ("model-only-on-unhealthy-node", cluster(node("t", 1, T4), node("a", 8, A100, healthy=False)), job("x", t=task(1, models={"A100"}))),
    ("cpu", gpus_cluster(8), job("x", t=cpu_only(100_000))),
]
# fmt: on


SAYS = {  # what the refusal says no node has enough of (None: the gang's size, or unhealthy)
    "too-many-gpus": "GPUs: 9 on one node, the largest has 8",
    "gang-too-big": None,
    "gang-min-too-big": None,
    "gpu-memory": "GPU memory: 40000 MiB a GPU, the largest GPU has 32768",
    "model-absent": "no node has the GPU model it asks for",
    "model-only-on-unhealthy-node": None,
    "cpu": "CPU: 100000 mCPU, the largest node has 64000",
}


@pytest.mark.parametrize("name, spec, j", IMPOSSIBLE, ids=[i[0] for i in IMPOSSIBLE])
def test_an_impossible_jobs_refusal_names_what_no_node_has(name, spec, j) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ImpossibleJobError) as e:
        check_feasible(spec, [j])
    says = SAYS[name]
    if says is None:
        assert "no node has" not in str(e.value)
    else:
        assert says in str(e.value)
    if name != "cpu":
        assert "mCPU" not in str(e.value).split("fits")[1]  # never blames what it has enough of


def test_a_whole_gpu_task_over_its_gpus_memory_is_refused_for_gpu_memory() -> None:
    with pytest.raises(
        ImpossibleJobError, match="GPU memory: 50000 MiB a GPU, the largest GPU has 32768"
    ):
        check_feasible(gpus_cluster(8), [job("x", t=TaskRequest(gpus=2, gpu_memory_mib=50_000))])


@pytest.mark.parametrize("spec, j", [i[1:] for i in IMPOSSIBLE], ids=[i[0] for i in IMPOSSIBLE])
def test_impossible_job(spec, j) -> None:
    jobs = [job("ok", 0, 1), j]
    with pytest.raises(ImpossibleJobError, match="job x can never run"):
        check_feasible(spec, jobs)
    with pytest.raises(ImpossibleJobError):
        simulate(spec, jobs, PolicySet())
    assert issubclass(ImpossibleJobError, SpecError)


def test_gang_min_that_fits_is_feasible() -> None:
    check_feasible(gpus_cluster(3), [job("x", tasks=5, gang_min=3)])


def test_duplicate_job_ids_are_refused() -> None:
    with pytest.raises(SpecError, match="unique"):
        simulate(gpus_cluster(1), [job("a"), job("a", 5)], PolicySet())


def test_unknown_policy_name() -> None:
    with pytest.raises(UnknownPolicyError):
        simulate(gpus_cluster(1), [job("a")], PolicySet("fifo", "no-such-fit"))


# ------------------------------------------------------------------ policy sets

# (text, queue, placement, strict, label)
# fmt: off
PARSE_GOOD = [
    ("fifo+best-fit", "fifo", "best-fit", False, "fifo+best-fit"),
    ("fifo/strict+first-fit", "fifo", "first-fit", True, "fifo/strict+first-fit"),
    ("priority/skip+packing", "priority", "packing", False, "priority+packing"),
    ("smallest-first+dot-product", "smallest-first", "dot-product", False, "smallest-first+dot-product"),
]
# fmt: on


@pytest.mark.parametrize(
    "text, queue, place, strict, label", PARSE_GOOD, ids=[p[0] for p in PARSE_GOOD]
)
def test_policy_set_parse(text, queue, place, strict, label) -> None:
    ps = PolicySet.parse(text)
    assert (ps.queue, ps.placement, ps.strict) == (queue, place, strict)
    assert ps.label == label
    assert PolicySet.parse(ps.label) == ps


PARSE_BAD = ["fifo", "fifo+", "+best-fit", "fifo+best-fit+x", "fifo/none+best-fit", ""]


@pytest.mark.parametrize("text", PARSE_BAD, ids=[t or "empty" for t in PARSE_BAD])
def test_policy_set_parse_bad(text: str) -> None:
    with pytest.raises(SpecError, match="policy set"):
        PolicySet.parse(text)


def test_an_unknown_backfill_is_refused_with_the_registered_ones() -> None:
    ps = PolicySet.parse("fifo/lenient+best-fit")  # a mode names a backfill plugin
    with pytest.raises(UnknownPolicyError, match="unknown backfill policy 'lenient'") as e:
        ps.check()
    assert ", ".join(names("backfill")) in str(e.value)


def test_policy_set_defaults() -> None:
    assert PolicySet() == PolicySet("fifo", "best-fit", False)


# ------------------------------------------------------------------ results


def test_same_seed_same_result_and_seed_matters_for_random() -> None:
    spec = gpus_cluster(4, 4, 4, 4)
    jobs = [job(f"j{i}", i * 3.0, 50 + 7 * i, gpus=1 + i % 3) for i in range(20)]
    ps = PolicySet("fifo", "random")
    a = simulate(spec, jobs, ps, seed=3)
    b = simulate(spec, jobs, ps, seed=3)
    assert same(times(a), times(b))
    assert a.records.nodes.tolist() == b.records.nodes.tolist()
    assert a.summary()["jct_s"] == b.summary()["jct_s"]


def test_groups_by_class_and_tenant() -> None:
    jobs = [
        job("a", 0, 10, tenant="t1", priority_class="high"),
        job("b", 0, 20, tenant="t1"),
        job("c", 0, 30, tenant="t2"),
    ]
    res = simulate(gpus_cluster(8), jobs, PolicySet())
    assert {k: g.jobs for k, g in res.by_tenant.items()} == {"t1": 2, "t2": 1}
    assert {k: g.jobs for k, g in res.by_class.items()} == {"high": 1, "normal": 2}
    assert res.by_tenant["t1"].jct.mean == pytest.approx(15)
    assert res.by_class["normal"].wait.mean == 0


def test_records_are_in_submit_order() -> None:
    res = simulate(gpus_cluster(8), [job("z", 5), job("y", 1), job("x", 5)], PolicySet())
    assert res.records.ids == ["y", "x", "z"]
    assert res.records.submit.tolist() == [1, 5, 5]


def test_summary_is_json_ready_and_progress_is_reported() -> None:
    seen: list[int] = []
    res = simulate(gpus_cluster(8), THREE, PolicySet(), progress=seen.append)
    s = res.summary()
    json.dumps(s)
    assert s["jobs"] == 3 and s["finished"] == 3 and s["policy"] == "fifo+best-fit"
    assert seen and seen[-1] == 3
    assert res.cycles >= 1 and res.decisions >= 3


def test_series_allocation_never_exceeds_capacity() -> None:
    jobs = [job(f"j{i}", i, 30, gpus=1 + i % 4) for i in range(30)]
    res = simulate(gpus_cluster(4, 4), jobs, PolicySet("sjf", "packing"))
    assert np.all(res.series.allocation <= 1.0) and np.all(res.series.allocation >= 0)
    assert res.finished == 30


def test_the_simulator_takes_lost_and_kept_work_from_the_preempt_decision() -> None:
    """The applier's contract (``core.decisions.Applier``): the work a preemption loses and
    keeps are the decision's own figures; the simulator does not work them out again."""
    from suanli.core.decisions import Admit, Decision, JobPlacement, Preempt
    from suanli.core.preemption import PreemptionConfig
    from suanli.core.scheduler import Scheduler

    victim = job("V", 0, 500, gpus=1)

    class EvictsAt100(Scheduler):
        """Evicts V when X arrives, saying that V loses 123 GPU-s and keeps 40 s of work."""

        placed: dict[str, JobPlacement] = {}

        def cycle(self, rng: np.random.Generator, now: float = 0.0) -> list[Decision]:
            out: list[Decision] = []
            if now == 100.0:
                p = self.placed["V"]
                self.release(p, "V", now)
                out.append(Preempt(victim, p, "X", "priority", 123.0, 40.0))
            for d in super().cycle(rng, now):
                out.append(d)
                if isinstance(d, Admit):
                    self.placed[d.job.id] = d.placement
            return out

    jobs = [victim, job("X", 100, 10, gpus=1)]
    res = simulate(
        gpus_cluster(1),
        jobs,
        PolicySet("fifo", "first-fit"),
        scheduler=EvictsAt100,
        preemption=PreemptionConfig(restart_overhead=5.0),
    )
    r = res.records
    assert r.lost_gpu_s is not None and r.preemptions is not None
    assert list(r.lost_gpu_s) == [123.0, 0.0]  # V held 100 s of work and had no checkpoint
    assert list(r.preemptions) == [1, 0]
    # X runs 100..110; V resumes at 110 with 500 - 40 s of work left, after 5 s of restart.
    t = times(res)
    assert t["X"] == (100.0, 110.0)
    assert t["V"] == (0.0, 110.0 + 5.0 + 460.0)


def test_only_large_replays_collect_and_freeze_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection costs as much as the process's heap: a small replay, which tests and
    what-if callers run by the hundred in a big process, must not pay it on every call; a
    replay of GC_FREEZE_JOBS jobs or more still freezes (its own objects would otherwise be
    traversed again and again)."""
    import gc

    from suanli.sim import engine

    calls: list[str] = []
    monkeypatch.setattr(engine.gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(engine.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(engine.gc, "unfreeze", lambda: calls.append("unfreeze"))
    simulate(gpus_cluster(8), THREE, PolicySet("fifo", "best-fit"))
    assert calls == []
    monkeypatch.setattr(engine, "GC_FREEZE_JOBS", 3)
    res = simulate(gpus_cluster(8), THREE, PolicySet("fifo", "best-fit"))
    assert calls == ["collect", "freeze", "unfreeze"] and res.finished == 3
    assert gc.isenabled()


def test_a_job_added_to_a_replay_gets_what_one_given_at_the_start_gets() -> None:
    # Replay.add (a federation member takes jobs as they are routed) must extend every
    # per-job list as the constructor fills it: compared with a replay given all the jobs.
    spec = gpus_cluster(2)
    jobs = [job("a", 0, 100), job("b", 5, 200), job("c", 9, 300, gpus=2)]

    def replay(given: list) -> Replay:  # type: ignore[type-arg]
        view = ClusterView(spec)
        return Replay(build(view, PolicySet()), spec, given, view, Explainer(()), 0.0)

    grown, whole = replay(jobs[:2]), replay(list(jobs))
    per_job = [k for k, v in vars(grown).items() if isinstance(v, list) and len(v) == 2]
    assert {"start", "finish", "remaining", "held_s", "slow"} <= set(per_job)
    assert grown.add(jobs[2]) == 2 and grown.index == whole.index
    for k in per_job:
        a, b = getattr(grown, k), getattr(whole, k)
        assert len(a) == 3 and (a[2] == b[2] or (a[2] != a[2] and b[2] != b[2])), k
    with pytest.raises(SpecError, match="job c is in the replay already"):
        grown.add(jobs[2])
