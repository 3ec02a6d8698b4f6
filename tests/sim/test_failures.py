"""Hardware failures in the simulator (``suanli.sim.failures``): GPUs, nodes and racks fail
from per-component rates, are found after a delay and repaired; the attempts they take down
keep what their checkpoints saved before the failure and are queued again."""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders import V100, cluster, job, node
from suanli.core.model import GpuModel, SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.sim.attempts import FAILED, OUTCOMES
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.failures import GPU_PER_DAY, NODE_PER_DAY, FailureModel

FIFO = PolicySet.parse("fifo+best-fit")
DAY = 86_400.0


def workload(n: int = 120, seed: int = 1) -> list:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    return [
        job(f"j{k:03d}", 1800.0 * k, float(rng.uniform(3_600, 40_000)),
            gpus=int(rng.choice([1, 2, 4, 8])), checkpoint_interval=1800.0)
        for k in range(n)
    ]  # fmt: skip


def busy_cluster():  # type: ignore[no-untyped-def]
    return cluster(*(node(f"n{i}", 8, rack=f"r{i // 2}") for i in range(4)))


def often(seed: int = 0, **kw: float) -> FailureModel:
    """Failures a thousand times as often as the defaults: several in a short replay."""
    args = {"gpu_per_day": GPU_PER_DAY * 1e3, "node_per_day": NODE_PER_DAY * 1e3,
            "rack_per_day": 0.05, "repair_s": 3_600.0, "seed": seed, **kw}  # fmt: skip
    return FailureModel(**args)  # type: ignore[arg-type]


def test_every_job_still_finishes_and_the_log_adds_up() -> None:
    """With failures at every level the replay loses no job: each finishes, each lost
    attempt is logged as failed and counted against a failure, and the job's work done
    over its attempts is at least its runtime."""
    jobs = workload()
    r = simulate(busy_cluster(), jobs, FIFO, failures=often())
    rec = r.records
    log = rec.failures
    assert log is not None and rec.interruptions is not None
    assert bool(np.isfinite(rec.finish).all())
    levels = log.by_level()
    assert levels["gpu"] > 0 and levels["node"] > 0 and levels["rack"] > 0, levels
    assert log.interrupted == int(rec.interruptions.sum()) > 0
    assert rec.use is not None
    failed = rec.use.outcome == FAILED
    assert int(failed.sum()) == log.interrupted and OUTCOMES[FAILED] == "failed"
    for f in log.failures:
        assert f.found == pytest.approx(f.at + 30.0) and f.repaired == f.found + 3_600.0
    assert log.lost_gpu_s > 0 and log.down_gpu_s > 0
    # A job hit by failures holds its GPUs for longer than its runtime (work redone).
    hit = rec.interruptions > 0
    runtime = np.array([j.runtime for j in sorted(jobs, key=lambda j: (j.submit, j.id))])
    assert bool((rec.held_s[hit] > runtime[hit]).all())
    assert bool(rec.held_s[~hit] == pytest.approx(runtime[~hit]))


def test_deterministic_for_a_seed() -> None:
    jobs = workload(60)
    a = simulate(busy_cluster(), jobs, FIFO, failures=often(seed=3))
    b = simulate(busy_cluster(), jobs, FIFO, failures=often(seed=3))
    c = simulate(busy_cluster(), jobs, FIFO, failures=often(seed=4))
    assert a.records.failures == b.records.failures
    np.testing.assert_array_equal(a.records.finish, b.records.finish)
    assert a.records.failures != c.records.failures


def test_one_job_resumes_from_its_last_checkpoint_before_the_failure() -> None:
    """One 8-GPU job on one node: the first failure at ``at`` is found 30 s later; the job
    keeps the whole checkpoint intervals it worked before ``at``, waits for the repair, and
    runs the rest. Its finish is that arithmetic, to the second (no restart overhead without
    a preemption configuration)."""
    one = cluster(node("n0", 8))
    j = job("long", 0.0, 200_000.0, gpus=8, checkpoint_interval=3_000.0)
    model = FailureModel(repair_s=7_200.0, gpu_per_day=0.0, node_per_day=1.0, seed=5)
    r = simulate(one, [j], FIFO, failures=model)
    log = r.records.failures
    assert log is not None and log.failures
    first = log.failures[0]
    assert 0 < first.at < 200_000.0 and first.interrupted == 1
    kept = math.floor(first.at / 3_000.0) * 3_000.0
    later = [f for f in log.failures[1:] if f.at < r.records.finish[0]]
    assert not later, "the seed gives the run exactly one failure"
    assert r.records.finish[0] == pytest.approx(first.repaired + 200_000.0 - kept)
    # Lost: the 8 GPUs held from the last checkpoint to the failure's detection.
    assert log.lost_gpu_s == pytest.approx(8 * (first.found - kept))
    assert r.records.interruptions is not None and r.records.interruptions[0] == 1
    assert log.down_gpu_s == pytest.approx(8 * 7_200.0)


def test_nothing_starts_on_a_node_while_it_is_out() -> None:
    """Two nodes told apart by their GPU model: while a failure holds node 0 out (found to
    repaired), no attempt starts there; after the repair, work lands there again."""
    other = GpuModel("V100-b", V100.memory_mib, V100.speed)
    c = cluster(node("n0", 8), node("n1", 8, other))
    jobs = workload(150, seed=2)
    model = FailureModel(repair_s=20_000.0, gpu_per_day=0.0, node_per_day=0.3, seed=1)
    r = simulate(c, jobs, FIFO, failures=model)
    log, rec = r.records.failures, r.records
    assert log is not None and rec.use is not None
    (idx, start, _end) = rec.attempts
    on_n0 = np.array([rec.use.models[m] == "V100" for m in rec.use.model])
    out0 = [(f.found, f.repaired) for f in log.failures if f.nodes == (0,)]
    assert out0, "the seed gives node 0 a failure"
    for lo, hi in out0:
        assert not bool((on_n0 & (start >= lo) & (start < hi)).any())
    last_repair = max(hi for _, hi in out0)
    assert bool((on_n0 & (start >= last_repair)).any()) or last_repair > float(start.max())


def test_preemptive_policies_carry_attained_service_over_a_failure() -> None:
    """LAS (preemptive, by attained service) with failures: every job finishes, and the
    thrash cap is not spent by failures (they are not preemptions)."""
    las = PolicySet.parse("las+best-fit")
    from suanli.bench.predict import preemption_for

    cfg = preemption_for(las)
    assert isinstance(cfg, PreemptionConfig)
    r = simulate(busy_cluster(), workload(80), las, preemption=cfg, failures=often(seed=2))
    assert bool(np.isfinite(r.records.finish).all())
    assert r.records.interruptions is not None and int(r.records.interruptions.sum()) > 0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"repair_s": 0.0}, "repair_s must be a number of seconds > 0"),
        ({"repair_s": 60.0, "gpu_per_day": -1.0}, "gpu_per_day must be a number >= 0"),
        ({"repair_s": 60.0, "detect_s": math.inf}, "detect_s must be a number >= 0"),
        ({"repair_s": True}, "repair_s must be a number"),
    ],
)
def test_bad_models_are_refused(kw: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError, match=match):
        FailureModel(**kw)


def test_no_rates_no_failures() -> None:
    jobs = workload(30)
    plain = simulate(busy_cluster(), jobs, FIFO)
    none = simulate(busy_cluster(), jobs, FIFO,
                    failures=FailureModel(repair_s=60.0, gpu_per_day=0.0, node_per_day=0.0))  # fmt: skip
    np.testing.assert_array_equal(plain.records.finish, none.records.finish)
    assert none.records.failures is not None and not none.records.failures.failures


def test_on_a_cluster_that_never_queues_failures_only_delay() -> None:
    """Jobs far apart on a cluster with room for all: without failures none waits, so with
    them each job can only end later (its work redone, or a wait for a drained node), never
    sooner, and the ones never interrupted that waited for nothing end at the same time."""
    rng = np.random.default_rng(9)
    jobs = [job(f"s{k:03d}", 20_000.0 * k, float(rng.uniform(600, 15_000)), gpus=2,
                checkpoint_interval=900.0) for k in range(150)]  # fmt: skip
    c = busy_cluster()
    plain = simulate(c, jobs, FIFO)
    hit = simulate(c, jobs, FIFO, failures=often(seed=6, repair_s=7_200.0))
    assert bool((plain.records.start == plain.records.submit).all())
    assert hit.records.interruptions is not None and int(hit.records.interruptions.sum()) > 0
    assert bool((hit.records.finish >= plain.records.finish - 1e-6).all())
    untouched = (hit.records.interruptions == 0) & (hit.records.start == hit.records.submit)
    np.testing.assert_allclose(hit.records.finish[untouched], plain.records.finish[untouched])


def test_failure_counts_follow_the_stated_rates() -> None:
    """Against the rates given (Llama 3's per-GPU and per-node figures, a rack rate): over
    many simulated years of a 4-node cluster, each level's count is its rate × components ×
    days within four Poisson standard deviations."""
    from suanli.sim.failures import FailureClock, Found

    c = busy_cluster()  # 32 GPUs, 4 nodes, 2 racks
    model = FailureModel(repair_s=1.0, gpu_per_day=0.01, node_per_day=0.02, rack_per_day=0.005)
    clock = FailureClock(model, c)
    counts = {"gpu": 0, "node": 0, "rack": 0}
    days = 20_000.0
    while clock.next_at < days * DAY:
        what = clock.pop()
        if isinstance(what, Found):
            counts[what.level] += 1
    for level, expected in (("gpu", 0.01 * 32 * days), ("node", 0.02 * 4 * days),
                            ("rack", 0.005 * 2 * days)):  # fmt: skip
        assert abs(counts[level] - expected) < 4 * math.sqrt(expected), (level, counts)
