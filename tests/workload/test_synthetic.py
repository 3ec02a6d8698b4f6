"""Tests of the built-in synthetic workload (suanli.workload.synthetic)."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np
import pytest

from suanli.core.model import (
    DEFAULT_PRIORITY_CLASSES,
    MILLI,
    ClusterSpec,
    GpuModel,
    Job,
    NodeSpec,
    SpecError,
)
from suanli.workload import (
    PHILLY_RUNTIME,
    QuantileTable,
    WorkloadConfig,
    generate,
    offered_load,
    tenant_paths,
)

GIB = 1024
H100 = GpuModel("H100", 81920, 1.0)
A10 = GpuModel("A10", 24 * GIB, 0.9)
T4 = GpuModel("T4", 16 * GIB, 0.5)


def _nodes(prefix: str, count: int, gpus: int, model: GpuModel | None, cpu: int, mem: int):
    return tuple(NodeSpec(f"{prefix}{i}", gpus, model, cpu, mem) for i in range(count))


CLUSTERS = {
    # The reference cluster: 16 nodes x 8 H100, 96 cores, 1 TiB.
    "h100x16": ClusterSpec("h100x16", _nodes("n", 16, 8, H100, 96000, 1024 * GIB)),
    # Several models, small nodes with little CPU/memory, and CPU-only nodes.
    "mixed": ClusterSpec(
        "mixed",
        _nodes("h", 4, 8, H100, 64000, 256 * GIB)
        + _nodes("a", 6, 2, A10, 16000, 64 * GIB)
        + _nodes("t", 4, 4, T4, 8000, 32 * GIB)
        + _nodes("c", 3, 0, None, 32000, 128 * GIB),
    ),
    # Nothing bigger than 2 GPUs: multi-GPU and gang requests must be re-cut.
    "two_gpu_nodes": ClusterSpec("two_gpu_nodes", _nodes("p", 12, 2, A10, 24000, 96 * GIB)),
    # A single 8-GPU node: no gang can have two 8-GPU tasks.
    "one_node": ClusterSpec("one_node", _nodes("s", 1, 8, H100, 32000, 128 * GIB)),
}
CPU_CLUSTER = ClusterSpec("cpu", _nodes("c", 8, 0, None, 64000, 256 * GIB))
ALL_CLUSTERS = {**CLUSTERS, "cpu_only": CPU_CLUSTER}


def _kind(job: Job) -> str:
    t = job.task
    if t.gpus == 0:
        return "cpu_only"
    if t.fractional:
        return "fractional"
    if job.tasks > 1:
        return "gang"
    return "multi_gpu" if t.gpus > 1 else "one_gpu"


def _slots(job: Job, cluster: ClusterSpec) -> int:
    """How many of ``job``'s tasks the empty cluster holds at once (independent check)."""
    t = job.task
    total = 0
    for n in cluster.nodes:
        if t.gpus > n.gpus:
            continue
        if t.gpu_models and (n.gpu_model is None or n.gpu_model.name not in t.gpu_models):
            continue
        if t.fractional and t.gpu_memory_mib > n.gpu_model.memory_mib:
            continue
        k = n.gpus // t.gpus if t.gpus else 10**9
        if t.cpu_milli:
            k = min(k, n.cpu_milli // t.cpu_milli)
        if t.memory_mib:
            k = min(k, n.memory_mib // t.memory_mib)
        total += k
    return total


# ------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", list(ALL_CLUSTERS))
def test_same_seed_same_jobs_other_seed_other_jobs(name: str) -> None:
    cluster = ALL_CLUSTERS[name]
    a = generate(WorkloadConfig(jobs=3000, seed=7), cluster)
    b = generate(WorkloadConfig(jobs=3000, seed=7), cluster)
    c = generate(WorkloadConfig(jobs=3000, seed=8), cluster)
    assert a == b
    assert a != c


def test_streams_are_independent_per_attribute() -> None:
    # Changing the priority mix must not move anything but the priorities.
    cluster = CLUSTERS["h100x16"]
    a = generate(WorkloadConfig(jobs=2000, seed=3), cluster)
    b = generate(WorkloadConfig(jobs=2000, seed=3, priority_mix={"spot": 1.0}), cluster)
    assert [(j.submit, j.runtime, j.task, j.tasks, j.tenant) for j in a] == [
        (j.submit, j.runtime, j.task, j.tasks, j.tenant) for j in b
    ]
    assert {j.priority_class for j in b} == {"spot"}


def test_zero_jobs_is_empty() -> None:
    assert generate(WorkloadConfig(jobs=0), CLUSTERS["h100x16"]) == []


# ------------------------------------------------------------------------- arrivals and ids


@pytest.mark.parametrize("name", list(ALL_CLUSTERS))
def test_submit_times_sorted_from_zero_and_ids_sorted(name: str) -> None:
    jobs = generate(WorkloadConfig(jobs=5000, seed=1), ALL_CLUSTERS[name])
    submits = [j.submit for j in jobs]
    ids = [j.id for j in jobs]
    assert submits[0] == 0.0
    assert all(s >= 0 for s in submits)
    assert submits == sorted(submits)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert ids[0] == "j000001" and ids[-1] == "j005000"


def test_ids_widen_past_a_million() -> None:
    jobs = generate(WorkloadConfig(jobs=1_000_000, seed=0), CPU_CLUSTER)
    assert jobs[0].id == "j0000001" and jobs[-1].id == "j1000000"


def test_arrival_rate_sets_mean_gap() -> None:
    jobs = generate(
        WorkloadConfig(jobs=20000, target_load=None, arrival_rate=0.1), CLUSTERS["mixed"]
    )
    gaps = np.diff([j.submit for j in jobs])
    assert gaps.mean() == pytest.approx(10.0, rel=0.05)
    # Exponential gaps: the coefficient of variation is about 1.
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.1)


def _achieved_load(jobs: list[Job], capacity: float) -> float:
    gpu_seconds = sum(j.task.gpu_share_milli * j.tasks * j.runtime for j in jobs) / MILLI
    rate = (len(jobs) - 1) / (jobs[-1].submit - jobs[0].submit)
    return gpu_seconds / len(jobs) * rate / capacity


@pytest.mark.parametrize(
    "name,target,seed",
    [
        ("h100x16", 0.9, 0),
        ("h100x16", 0.5, 1),
        ("h100x16", 1.3, 2),
        ("mixed", 0.9, 3),
        ("two_gpu_nodes", 0.7, 4),
        ("one_node", 0.9, 5),
    ],
    ids=lambda v: str(v),
)
def test_offered_load_hits_target(name: str, target: float, seed: int) -> None:
    cluster = CLUSTERS[name]
    # The plain basis: mean GPU-seconds over the whole list against the GPU count.
    config = WorkloadConfig(
        jobs=20000, seed=seed, target_load=target, load_window=False, speed_weighted_load=False
    )
    jobs = generate(config, cluster)
    achieved = _achieved_load(jobs, cluster.total_gpus)
    assert achieved == pytest.approx(target, rel=0.10)
    assert offered_load(jobs, cluster) == pytest.approx(achieved)


def _window_busy(jobs: list[Job], capacity: float) -> float:
    """Busy fraction between first and last arrival if no job waited."""
    end = jobs[-1].submit
    busy = sum(
        j.task.gpu_share_milli / MILLI * j.tasks * min(j.runtime, end - j.submit) for j in jobs
    )
    return busy / (capacity * end)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_load_window_keeps_a_short_list_busy_while_it_arrives(seed: int) -> None:
    cluster = CLUSTERS["h100x16"]
    plain = generate(WorkloadConfig(jobs=2000, seed=seed, load_window=False), cluster)
    window = generate(WorkloadConfig(jobs=2000, seed=seed, load_window=True), cluster)
    # Same jobs, only the arrival clock differs.
    assert [j.runtime for j in plain] == [j.runtime for j in window]
    assert _window_busy(window, cluster.total_gpus) == pytest.approx(0.9, rel=1e-6)
    # Heavy tails: with the plain basis much of the work lands after the last arrival.
    assert _window_busy(plain, cluster.total_gpus) < 0.85
    assert offered_load(window, cluster) > offered_load(plain, cluster)


def test_load_window_out_of_reach_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"WorkloadConfig\.target_load"):
        generate(WorkloadConfig(jobs=3, seed=0, target_load=50.0, load_window=True), CPU_CLUSTER)


def test_speed_weighted_load_counts_gpu_speed() -> None:
    fast = GpuModel("X", 81920, 4.0)
    cluster = ClusterSpec("fast", _nodes("f", 8, 8, fast, 96000, 1024 * GIB))
    config = WorkloadConfig(jobs=20000, seed=9, target_load=0.8, speed_weighted_load=True)
    jobs = generate(config, cluster)
    assert offered_load(jobs, cluster, speed_weighted=True) == pytest.approx(0.8, rel=0.1)
    assert offered_load(jobs, cluster) == pytest.approx(3.2, rel=0.1)


def test_cpu_only_cluster_load_is_against_cores() -> None:
    jobs = generate(WorkloadConfig(jobs=20000, seed=4, target_load=0.6), CPU_CLUSTER)
    cores = sum(n.cpu_milli for n in CPU_CLUSTER.nodes) / 1000
    cpu_seconds = sum(j.task.cpu_milli / 1000 * j.tasks * j.runtime for j in jobs)
    rate = (len(jobs) - 1) / jobs[-1].submit
    assert cpu_seconds / len(jobs) * rate / cores == pytest.approx(0.6, rel=0.1)


# ------------------------------------------------------------------------------- demand mix

SHARE_CASES = {
    "calibrated_defaults": WorkloadConfig(jobs=20000, seed=11),
    "custom": WorkloadConfig(
        jobs=20000,
        seed=12,
        cpu_only_share=0.2,
        fractional_share=0.1,
        multi_gpu_share=0.25,
        gang_share=0.05,
    ),
    "gpu_whole_only": WorkloadConfig(
        jobs=20000,
        seed=13,
        cpu_only_share=0.0,
        fractional_share=0.0,
        multi_gpu_share=0.0,
        gang_share=0.0,
    ),
}


@pytest.mark.parametrize("case", list(SHARE_CASES))
def test_class_shares_match_config(case: str) -> None:
    config = SHARE_CASES[case]
    jobs = generate(config, CLUSTERS["h100x16"])
    counts = collections.Counter(_kind(j) for j in jobs)
    expected = {
        "cpu_only": config.cpu_only_share,
        "fractional": config.fractional_share,
        "multi_gpu": config.multi_gpu_share,
        "gang": config.gang_share,
        "one_gpu": config.one_gpu_share,
    }
    for kind, share in expected.items():
        sigma = math.sqrt(share * (1 - share) / len(jobs))
        assert counts[kind] / len(jobs) == pytest.approx(share, abs=4 * sigma + 0.002), kind


def test_priority_mix_matches_config() -> None:
    mix = {"online": 0.1, "high": 0.2, "normal": 0.3, "spot": 0.4}
    jobs = generate(WorkloadConfig(jobs=20000, seed=5, priority_mix=mix), CLUSTERS["h100x16"])
    counts = collections.Counter(j.priority_class for j in jobs)
    for name, share in mix.items():
        assert counts[name] / len(jobs) == pytest.approx(share, abs=0.015), name
    assert set(counts) <= set(DEFAULT_PRIORITY_CLASSES)


def test_default_priority_mix_uses_all_classes() -> None:
    jobs = generate(WorkloadConfig(jobs=5000, seed=5), CLUSTERS["h100x16"])
    assert {j.priority_class for j in jobs} == set(DEFAULT_PRIORITY_CLASSES)


def test_multi_gpu_and_gang_sizes_on_big_nodes() -> None:
    jobs = generate(
        WorkloadConfig(
            jobs=20000, seed=6, fractional_share=0.1, multi_gpu_share=0.3, gang_share=0.2
        ),
        CLUSTERS["h100x16"],
    )
    multi = {j.task.gpus for j in jobs if _kind(j) == "multi_gpu"}
    gangs = {(j.task.gpus, j.tasks) for j in jobs if _kind(j) == "gang"}
    assert multi == {2, 4, 8}
    assert {g for g, _ in gangs} == {8}
    assert {t for _, t in gangs} == {2, 3, 4, 8, 16}


def test_fractional_requests() -> None:
    cluster = CLUSTERS["mixed"]
    smallest = min(m.memory_mib for m in cluster.gpu_models)
    jobs = generate(WorkloadConfig(jobs=5000, seed=2), cluster)
    frac = [j for j in jobs if j.task.fractional]
    assert frac
    for j in frac:
        assert j.tasks == 1 and 0 < j.task.gpu_milli < MILLI
        assert j.task.gpu_memory_mib == j.task.gpu_milli * smallest // MILLI
    whole = [j for j in jobs if j.task.gpus and not j.task.fractional]
    assert all(j.task.gpu_memory_mib == 0 and j.task.gpu_milli == MILLI for j in whole)


# ---------------------------------------------------------------------------------- fitting


@pytest.mark.parametrize("name", list(ALL_CLUSTERS))
def test_every_job_fits_the_empty_cluster(name: str) -> None:
    cluster = ALL_CLUSTERS[name]
    config = WorkloadConfig(
        jobs=20000, seed=21, multi_gpu_share=0.2, gang_share=0.1, model_constrained_share=0.3
    )
    jobs = generate(config, cluster)
    largest = max(n.gpus for n in cluster.nodes)
    checked: dict[tuple, int] = {}
    for j in jobs:
        key = (j.task, j.tasks)
        if key not in checked:
            checked[key] = _slots(j, cluster)
        assert checked[key] >= j.tasks, j
        assert j.task.gpus <= largest
        assert j.task.gpus * j.tasks <= cluster.total_gpus or j.task.gpus == 0


def test_small_nodes_recut_gangs_and_keep_their_gpus() -> None:
    cluster = CLUSTERS["two_gpu_nodes"]
    jobs = generate(WorkloadConfig(jobs=20000, seed=22, gang_share=0.3), cluster)
    gangs = [j for j in jobs if j.tasks > 1]
    assert gangs and all(j.task.gpus == 2 for j in gangs)
    # 2 x 8 GPUs -> 8 tasks of 2; wider ones are capped at the 24 GPUs there are.
    assert {j.tasks for j in gangs} <= {8, 12}
    assert max(j.task.gpus * j.tasks for j in gangs) == cluster.total_gpus


def test_single_node_cluster_has_no_multi_task_jobs() -> None:
    jobs = generate(WorkloadConfig(jobs=5000, seed=23, gang_share=0.3), CLUSTERS["one_node"])
    assert all(j.tasks == 1 for j in jobs)
    assert all(j.task.cpu_milli <= 32000 and j.task.memory_mib <= 128 * GIB for j in jobs)


def test_cpu_only_cluster_gives_cpu_only_jobs() -> None:
    jobs = generate(WorkloadConfig(jobs=5000, seed=24), CPU_CLUSTER)
    assert all(j.task.gpus == 0 and j.task.gpu_memory_mib == 0 for j in jobs)
    # CPU-only tasks use the TaskRequest default encoding (gpu_milli=1000, no share).
    assert all(j.task.gpu_milli == MILLI and j.task.gpu_share_milli == 0 for j in jobs)
    assert all(j.gpu_util == 1.0 for j in jobs)


@pytest.mark.parametrize("name", list(CLUSTERS))
def test_few_distinct_shapes(name: str) -> None:
    config = WorkloadConfig(jobs=100_000, seed=25, model_constrained_share=0.1)
    jobs = generate(config, CLUSTERS[name])
    assert len({(j.task, j.tasks) for j in jobs}) < 300
    # Jobs of one shape share one TaskRequest object.
    assert len({id(j.task) for j in jobs}) == len({j.task for j in jobs})


# ---------------------------------------------------------------------------- model pinning


def test_model_pins_only_on_multi_model_clusters() -> None:
    config = WorkloadConfig(jobs=20000, seed=26, model_constrained_share=0.3)
    single = generate(config, CLUSTERS["h100x16"])
    assert all(not j.task.gpu_models for j in single)
    mixed = generate(config, CLUSTERS["mixed"])
    gpu_jobs = [j for j in mixed if j.task.gpus]
    pinned = [j for j in gpu_jobs if j.task.gpu_models]
    assert len(pinned) / len(gpu_jobs) == pytest.approx(0.3, abs=0.02)
    assert all(len(j.task.gpu_models) == 1 for j in pinned)
    assert {m for j in pinned for m in j.task.gpu_models} == {"H100", "A10", "T4"}


def test_calibrated_default_pins_nothing() -> None:
    jobs = generate(WorkloadConfig(jobs=5000, seed=27), CLUSTERS["mixed"])
    assert all(not j.task.gpu_models for j in jobs)


# ----------------------------------------------------------------- tenants, runtimes, misc


def test_tenants_are_paths_with_zipf_skew() -> None:
    jobs = generate(WorkloadConfig(jobs=20000, seed=28), CLUSTERS["h100x16"])
    counts = collections.Counter(j.tenant for j in jobs)
    assert len(counts) <= 15
    for j in jobs[:500]:
        assert j.tenant.count("/") == 2
        assert j.tenant.startswith(j.queue + "/")
    ranks = np.arange(1, 16) ** -1.75
    top = ranks[0] / ranks.sum()  # 0.557
    assert counts.most_common(1)[0][1] / len(jobs) == pytest.approx(top, abs=0.02)


def test_tenant_paths_unique_for_many_tenants() -> None:
    paths = tenant_paths(100)
    assert len({t for t, _ in paths}) == 100
    assert all(t.startswith(q + "/") for t, q in paths)


@pytest.mark.parametrize(
    "table,p50,p90,mean",
    [
        # philly_jobs.csv, num_gpus == 1 / == 8 / > 8.
        ("one_gpu", 1117, 8512, 8301),
        ("eight_gpu", 23683, 351982, 129775),
        ("gang", 21137, 247972, 95326),
    ],
)
def test_runtime_tables_match_philly(table: str, p50: float, p90: float, mean: float) -> None:
    t: QuantileTable = getattr(PHILLY_RUNTIME, table)
    assert t.quantile(0.5) == pytest.approx(p50)
    assert t.quantile(0.9) == pytest.approx(p90)
    assert t.mean() == pytest.approx(mean, rel=0.08)


def test_drawn_one_gpu_runtimes_follow_the_table() -> None:
    jobs = generate(WorkloadConfig(jobs=100_000, seed=29), CLUSTERS["h100x16"])
    rt = np.array([j.runtime for j in jobs if _kind(j) == "one_gpu"])
    assert np.percentile(rt, 50) == pytest.approx(1117, rel=0.1)
    assert np.percentile(rt, 90) == pytest.approx(8512, rel=0.1)
    assert rt.min() >= 1


def test_runtime_scale_and_cap() -> None:
    cluster = CLUSTERS["h100x16"]
    base = generate(WorkloadConfig(jobs=3000, seed=30), cluster)
    scaled = generate(WorkloadConfig(jobs=3000, seed=30, runtime_scale=0.5), cluster)
    assert [j.runtime * 0.5 for j in base] == [j.runtime for j in scaled]
    capped = generate(WorkloadConfig(jobs=3000, seed=30, runtime_cap=3600.0), cluster)
    assert max(j.runtime for j in capped) == 3600.0


def test_estimates_are_noisy_mostly_over() -> None:
    jobs = generate(WorkloadConfig(jobs=20000, seed=31), CLUSTERS["h100x16"])
    missing = sum(j.estimate is None for j in jobs) / len(jobs)
    assert missing == pytest.approx(0.2, abs=0.02)
    long = [j.estimate / j.runtime for j in jobs if j.estimate is not None and j.runtime > 3600]
    assert np.median(long) == pytest.approx(2.0, rel=0.1)
    assert 0.08 < np.mean(np.array(long) < 1) < 0.25  # some users under-estimate
    assert all(j.estimate % 60 == 0 for j in jobs if j.estimate is not None)


def test_gpu_util_follows_the_duty_profiles() -> None:
    # Fractional jobs draw from the GenAI serving trace, whole-GPU ones from Jeon et al.
    jobs = generate(WorkloadConfig(jobs=20000, seed=32), CLUSTERS["h100x16"])
    frac = np.array([j.gpu_util for j in jobs if j.task.gpus and j.task.gpu_milli < MILLI])
    whole = np.array(
        [
            j.gpu_util
            for j in jobs
            if j.tasks == 1 and j.task.gpus == 1 and j.task.gpu_milli == MILLI
        ]
    )
    assert 0 <= frac.min() and frac.max() <= 0.2787 + 1e-9
    assert frac.mean() == pytest.approx(0.0645, abs=0.01)
    assert whole.mean() == pytest.approx(0.5238, abs=0.02)
    assert all(j.gpu_util == 1.0 for j in jobs if not j.task.gpus)


def test_config_is_hashable_and_normalises_priority_mix() -> None:
    a = WorkloadConfig(priority_mix={"high": 1.0, "spot": 1.0})
    b = WorkloadConfig(priority_mix=(("high", 1.0), ("spot", 1.0)))
    assert a == b and hash(a) == hash(b)


# ------------------------------------------------------------------------------ validation


@dataclass(frozen=True)
class Bad:
    kwargs: dict
    field: str


BAD_CONFIGS = {
    "negative_jobs": Bad({"jobs": -1}, "jobs"),
    "float_jobs": Bad({"jobs": 2.5}, "jobs"),
    "negative_seed": Bad({"seed": -3}, "seed"),
    "both_load_and_rate": Bad({"target_load": 0.9, "arrival_rate": 1.0}, "target_load"),
    "neither_load_nor_rate": Bad({"target_load": None}, "target_load"),
    "zero_load": Bad({"target_load": 0.0}, "target_load"),
    "negative_load": Bad({"target_load": -0.5}, "target_load"),
    "nan_load": Bad({"target_load": float("nan")}, "target_load"),
    "zero_rate": Bad({"target_load": None, "arrival_rate": 0.0}, "arrival_rate"),
    "share_above_one": Bad({"fractional_share": 1.5}, "fractional_share"),
    "negative_share": Bad({"cpu_only_share": -0.1}, "cpu_only_share"),
    "shares_sum_above_one": Bad(
        {"cpu_only_share": 0.5, "fractional_share": 0.4, "multi_gpu_share": 0.2}, "shares"
    ),
    "bad_gang_share": Bad({"gang_share": 2.0}, "gang_share"),
    "bad_pin_share": Bad({"model_constrained_share": -1.0}, "model_constrained_share"),
    "zero_tenants": Bad({"tenants": 0}, "tenants"),
    "negative_zipf": Bad({"tenant_zipf_s": -1.0}, "tenant_zipf_s"),
    "unknown_priority": Bad({"priority_mix": {"urgent": 1.0}}, "priority_mix"),
    "negative_priority_weight": Bad({"priority_mix": {"high": -1.0}}, "priority_mix"),
    "zero_priority_weights": Bad({"priority_mix": {"high": 0.0}}, "priority_mix"),
    "zero_runtime_scale": Bad({"runtime_scale": 0.0}, "runtime_scale"),
    "zero_runtime_cap": Bad({"runtime_cap": 0.0}, "runtime_cap"),
    "missing_share_above_one": Bad({"estimate_missing_share": 1.2}, "estimate_missing_share"),
    "zero_estimate_median": Bad({"estimate_factor_median": 0.0}, "estimate_factor_median"),
    "negative_estimate_sigma": Bad({"estimate_factor_sigma": -1.0}, "estimate_factor_sigma"),
    "unknown_duty": Bad({"duty": "busy"}, "duty"),
    "declared_duty": Bad({"duty": "declared"}, "duty"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_names_the_field(case: str) -> None:
    bad = BAD_CONFIGS[case]
    with pytest.raises(SpecError, match=rf"WorkloadConfig\.{bad.field}\b"):
        WorkloadConfig(**bad.kwargs)


@pytest.mark.parametrize(
    "probs,seconds",
    [
        ((0.0, 0.5), (1.0, 2.0)),  # does not end at 1
        ((0.0, 0.5, 0.5, 1.0), (1.0, 2.0, 3.0, 4.0)),  # not strictly rising
        ((0.0, 1.0), (0.0, 2.0)),  # zero seconds
        ((0.0, 1.0), (3.0, 2.0)),  # falling
        ((0.0, 1.0), (1.0,)),  # lengths differ
    ],
    ids=["no_end", "flat_probs", "zero_seconds", "falling", "lengths"],
)
def test_bad_quantile_table(probs: tuple, seconds: tuple) -> None:
    with pytest.raises(SpecError, match="QuantileTable"):
        QuantileTable(probs, seconds)
