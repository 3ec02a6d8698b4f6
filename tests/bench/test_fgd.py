"""The FGD replay protocol (``suanli.bench.fgd``) and its reports (``suanli.bench.report``).

Most tests run on a tiny openb-shaped trace directory written to a temporary folder
(``openb_tiny``); the few that read the public traces skip when they are absent.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openb_tiny import TINY_DEMAND, TINY_GPUS, write_tiny_traces
from suanli.bench.fgd import (
    CURVE_GRID,
    LOAD_POINTS,
    PAPER_POLICIES,
    TUNE_RATIO,
    RunResult,
    Workload,
    arrival_order,
    load_workload,
    pod_tasks,
    replay,
    sweep,
)
from suanli.bench.report import (
    load_published,
    plot_allocation,
    summarise,
    to_json,
    write_outputs,
)
from suanli.core.frag import fragmentation
from suanli.core.gang import place_job
from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.registry import create
from suanli.core.view import ClusterView
from suanli.traces import load_openb_pods
from support import trace_dir_or_skip

FAST = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

I100 = LOAD_POINTS.index(1.0)
I130 = LOAD_POINTS.index(1.3)
GRID_100 = int(np.flatnonzero(CURVE_GRID == 1.0)[0])


@pytest.fixture()
def tiny_dir(tmp_path: Path) -> Path:
    return write_tiny_traces(tmp_path / "traces")


@pytest.fixture()
def tiny(tiny_dir: Path) -> Workload:
    return load_workload(tiny_dir, "tiny")


@pytest.fixture(scope="module")
def traces() -> Path:
    return trace_dir_or_skip()


def same_run(a: RunResult, b: RunResult) -> bool:
    return dataclasses.replace(a, wall_s=0.0) == dataclasses.replace(b, wall_s=0.0)


# ------------------------------------------------------------------ the pod list


def test_pod_tasks_one_object_per_request(tiny_dir: Path) -> None:
    pods = load_openb_pods(tiny_dir / "openb" / "openb_pod_list_tiny.csv")
    tasks = pod_tasks(pods)
    assert len(tasks) == 9
    assert tasks[0] == TaskRequest(gpus=1, gpu_milli=500, cpu_milli=4000, memory_mib=8192)
    assert tasks[2] == TaskRequest(gpus=0, cpu_milli=2000, memory_mib=4096)
    assert tasks[3] == TaskRequest(gpus=2, gpu_milli=MILLI, cpu_milli=6000, memory_mib=8192)
    assert tasks[4].gpu_models == frozenset({"T4", "P100"})
    assert tasks[6].gpu_models == frozenset({"G2"})
    doubled = pod_tasks(pods.select(np.array([0, 1, 0, 1, 2])))
    assert doubled[0] is doubled[2] and doubled[1] is doubled[3]


def test_load_workload(tiny_dir: Path, tiny: Workload) -> None:
    assert tiny.name == "tiny"
    assert tiny.cluster.total_gpus == TINY_GPUS
    assert tiny.capacity_milli == TINY_GPUS * MILLI
    assert tiny.demand.tolist() == [500, 1000, 0, 2000, 250, 300, 1000, 700, 0]
    assert int(tiny.demand.sum()) == TINY_DEMAND
    assert len(tiny.tasks) == 9
    assert len(tiny.target) >= 1 and float(tiny.target.weight.sum()) == pytest.approx(1.0)
    # A path to a pod list works as well as a name; its label drops the openb prefix.
    by_path = load_workload(tiny_dir, str(tiny_dir / "openb" / "openb_pod_list_tiny.csv"))
    assert by_path.name == "tiny" and by_path.tasks == tiny.tasks


def test_load_workload_default_pod_list(traces: Path) -> None:
    work = load_workload(traces, "default")
    assert (work.name, len(work.tasks)) == ("default", 8152)
    assert (len(work.cluster.nodes), work.cluster.total_gpus) == (1213, 6212)
    assert len({id(t) for t in work.tasks}) == len(set(work.tasks))  # equal requests interned
    assert int((work.demand == 0).sum()) == 1088  # CPU-only pods


# ------------------------------------------------------------------ tune 1.3


def reference_order(demand: np.ndarray, capacity: int, seed: int, order: str) -> list[int]:
    """The protocol one pod at a time: the list, then copies until the next would pass 1.3x."""
    r = np.random.default_rng(seed)
    n = len(demand)
    out = r.permutation(n).tolist() if order == "shuffle" else list(range(n))
    total = int(demand.sum())
    while True:
        i = int(r.integers(0, n))
        if total + int(demand[i]) > TUNE_RATIO * capacity:
            return out
        total += int(demand[i])
        out.append(i)


@FAST
@given(
    demand=st.lists(
        st.sampled_from([0, 250, 500, 1000, 2000, 8000]), min_size=1, max_size=30
    ).filter(lambda d: any(d)),
    capacity=st.integers(1, 40).map(lambda g: g * MILLI),
    seed=st.integers(0, 2**32 - 1),
    order=st.sampled_from(["shuffle", "trace"]),
)
def test_arrival_order_tunes_to_1_3_capacity(demand, capacity, seed, order) -> None:  # type: ignore[no-untyped-def]
    d = np.array(demand, dtype=np.int64)
    n = len(d)
    seq = arrival_order(d, capacity, np.random.default_rng(seed), order)
    # The original pods first, each once, in the chosen order.
    head = seq[:n].tolist()
    if order == "trace":
        assert head == list(range(n))
    else:
        assert head == np.random.default_rng(seed).permutation(n).tolist()
    # Then copies drawn from the list, while the total stays within 1.3 x capacity.
    assert all(0 <= i < n for i in seq[n:].tolist())
    total = int(d[seq].sum())
    assert len(seq) == n or total <= TUNE_RATIO * capacity
    # Exactly the draws of one pod at a time, stopping at the first that would pass the limit.
    assert seq.tolist() == reference_order(d, capacity, seed, order)


def test_arrival_order_stops_at_the_limit_not_before() -> None:
    # 2 pods of one GPU, capacity 10 GPUs: 11 copies reach exactly 13 GPUs, the 12th would pass.
    seq = arrival_order(np.array([1000, 1000]), 10 * MILLI, np.random.default_rng(0), "trace")
    assert len(seq) == 13
    assert sorted(set(seq[2:].tolist())) == [0, 1]  # with replacement: both drawn again


def test_arrival_order_over_the_limit_already_adds_nothing() -> None:
    seq = arrival_order(np.array([5000, 6000, 3000]), 10 * MILLI, np.random.default_rng(0), "trace")
    assert seq.tolist() == [0, 1, 2]


def test_arrival_order_rejects_an_unknown_order() -> None:
    with pytest.raises(ValueError, match="order must be 'trace' or 'shuffle'"):
        arrival_order(np.array([1000]), MILLI, np.random.default_rng(0), "random")


class BoundedDraws:
    """A generator that refuses to draw more than ``limit`` numbers (to catch endless loops)."""

    def __init__(self, seed: int, limit: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.left = limit

    def permutation(self, n: int) -> np.ndarray:
        return self.rng.permutation(n)

    def integers(self, low: int, high: int, size: int | None = None) -> np.ndarray:
        self.left -= 1 if size is None else size
        if self.left < 0:
            raise AssertionError("arrival_order kept drawing copies that can never reach 1.3x")
        return self.rng.integers(low, high, size=size)


def test_arrival_order_ends_when_no_pod_asks_for_gpus() -> None:
    # CPU-only pods can never bring the GPU request to 1.3 x capacity.
    demand = np.zeros(4, dtype=np.int64)
    try:
        seq = arrival_order(demand, 10 * MILLI, BoundedDraws(0, 50_000), "trace")  # type: ignore[arg-type]
    except ValueError:
        return  # refusing the list is as good as ending
    assert seq[:4].tolist() == [0, 1, 2, 3]


# ------------------------------------------------------------------ replay


@pytest.mark.parametrize("policy", [*PAPER_POLICIES, "frag-balance"])
def test_replay_same_seed_same_result(tiny: Workload, policy: str) -> None:
    a = replay(tiny, policy, 7)
    b = replay(tiny, policy, 7)
    assert same_run(a, b)
    assert (a.workload, a.policy, a.seed) == ("tiny", policy, 7)
    for alloc, unalloc in zip(a.alloc_pct, a.unalloc_pct, strict=True):
        assert alloc + unalloc == pytest.approx(100.0)
        assert 0.0 <= alloc <= 100.0
    for frag, unalloc in zip(a.frag_pct, a.unalloc_pct, strict=True):
        assert -1e-9 <= frag <= unalloc + 1e-9  # the fragment is part of the free capacity
    assert len(a.curve) == len(CURVE_GRID)
    assert list(a.curve) == sorted(a.curve)  # pods never leave
    assert a.curve[GRID_100] == a.alloc_pct[I100]
    assert a.curve[-1] == a.alloc_pct[I130]
    seq = arrival_order(tiny.demand, tiny.capacity_milli, np.random.default_rng(7), "shuffle")
    assert a.pods == len(seq)
    assert 0 <= a.failed <= a.pods


def test_replay_paper_name_is_its_placement(tiny: Workload) -> None:
    for paper, name in PAPER_POLICIES.items():
        a, b = replay(tiny, paper, 3), replay(tiny, name, 3)
        assert dataclasses.replace(a, policy=name, wall_s=0.0) == dataclasses.replace(b, wall_s=0.0)


def test_replay_with_a_placement_object(tiny: Workload) -> None:
    a = replay(tiny, "FGD", 5)
    b = replay(tiny, "FGD", 5, placement=create("placement", "fgd"))
    assert same_run(a, b)


@pytest.mark.parametrize("order", ["shuffle", "trace"])
@pytest.mark.parametrize("policy", ["BestFit", "FGD"])
def test_replay_measures_at_the_load_points(tiny: Workload, policy: str, order: str) -> None:
    # The protocol again, step by step: the allocation when the arrived GPU request first
    # reaches 100% of capacity, and at the end (just short of 130%).
    seed = 11
    r = np.random.default_rng(seed)
    cap = tiny.capacity_milli
    seq = arrival_order(tiny.demand, cap, r, order)
    view = ClusterView(tiny.cluster)
    pol = create("placement", PAPER_POLICIES[policy])
    if hasattr(pol, "set_target"):
        pol.set_target(tiny.target)
    arrived = 0
    at_100 = None
    failed = 0
    for i in seq.tolist():
        jp, _, _ = place_job(view, Job(str(i), 0.0, 1.0, tiny.tasks[i]), pol, r)
        failed += jp is None
        arrived += int(tiny.demand[i])
        if at_100 is None and arrived >= cap:
            at_100 = view.allocated_milli
    assert at_100 is not None  # the tiny list is tuned past 100%
    frag_end = fragmentation(
        view.gpu_free_milli,
        view.free_cpu,
        view.free_mem,
        view.node_model + 1,
        tiny.target,
        tiny.target.access(tuple(m.name for m in view.models)),
    ).sum()
    got = replay(tiny, policy, seed, order)
    assert got.failed == failed and got.pods == len(seq)
    assert got.alloc_pct[I100] == pytest.approx(100.0 * at_100 / cap)
    assert got.alloc_pct[I130] == pytest.approx(100.0 * view.allocated_milli / cap)
    assert got.frag_pct[I130] == pytest.approx(100.0 * frag_end / cap)


def test_sweep_in_order_and_same_on_processes(tiny_dir: Path, tiny: Workload) -> None:
    runs = sweep(tiny_dir, ["tiny"], ["FGD", "BestFit"], [1, 2], workers=1)
    assert [(r.workload, r.policy, r.seed) for r in runs] == [
        ("tiny", "FGD", 1),
        ("tiny", "FGD", 2),
        ("tiny", "BestFit", 1),
        ("tiny", "BestFit", 2),
    ]
    assert all(same_run(r, replay(tiny, r.policy, r.seed)) for r in runs)
    parallel = sweep(tiny_dir, ["tiny"], ["FGD", "BestFit"], [1, 2], workers=2)
    assert all(same_run(a, b) for a, b in zip(runs, parallel, strict=True))


# ------------------------------------------------------------------ reports

PUBLISHED_HEADER = (
    "workload,sc_policy,n_seeds,alloc_pct@100_median,unalloc_gpu_pct@100_median,"
    "alloc_pct@130_median,unalloc_gpu_pct@130_median,frag_over_total_pct@100_median,"
    "frag_over_total_pct@130_median\n"
)


def test_load_published(tmp_path: Path) -> None:
    path = tmp_path / "published.csv"
    path.write_text(
        PUBLISHED_HEADER
        + "openb_pod_list_default,06-FGD,10,95.23,4.77,95.40,4.60,4.73,4.56\n"
        + "openb_pod_list_cpu050,01-Random,10,88.98,11.02,91.16,8.84,10.52,8.73\n"
    )
    pub = load_published(path)
    assert set(pub) == {("default", "FGD"), ("cpu050", "Random")}
    assert pub[("default", "FGD")] == {
        "alloc100": 95.23,
        "unalloc100": 4.77,
        "alloc130": 95.40,
        "unalloc130": 4.60,
        "frag100": 4.73,
        "frag130": 4.56,
    }


def test_load_published_policy_without_number_keeps_its_name(tmp_path: Path) -> None:
    # Only a leading "NN-" is a prefix: our own policies have hyphens in their names.
    path = tmp_path / "published.csv"
    path.write_text(
        PUBLISHED_HEADER
        + "openb_pod_list_default,FGD,10,95.23,4.77,95.40,4.60,4.73,4.56\n"
        + "openb_pod_list_default,frag-balance,3,95.7,4.3,95.9,4.1,4.2,4.0\n"
        + "default,07-frag-balance,3,95.7,4.3,95.9,4.1,4.2,4.0\n"
    )
    assert set(load_published(path)) == {("default", "FGD"), ("default", "frag-balance")}


def test_load_published_missing_columns_named(tmp_path: Path) -> None:
    path = tmp_path / "published.csv"
    path.write_text("workload,sc_policy,alloc_pct@100_median\nx,01-Random,1\n")
    with pytest.raises(ValueError) as err:
        load_published(path)
    message = str(err.value)
    assert message.startswith(f"{path}: missing columns ")
    listed = message.split("missing columns ", 1)[1].split(", ")
    assert listed == [
        "unalloc_gpu_pct@100_median",
        "alloc_pct@130_median",
        "unalloc_gpu_pct@130_median",
        "frag_over_total_pct@100_median",
        "frag_over_total_pct@130_median",
    ]


def test_load_published_bad_value_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "published.csv"
    path.write_text(
        PUBLISHED_HEADER
        + "openb_pod_list_default,06-FGD,10,95.23,4.77,95.40,4.60,4.73,4.56\n"
        + "openb_pod_list_default,05-BestFit,10,92.91,n/a,93.11,6.89,7.02,6.82\n"
    )
    with pytest.raises(ValueError, match=rf"^{path}:3: .*'n/a'"):
        load_published(path)


def test_load_published_real_file(traces: Path) -> None:
    pub = load_published(traces / "openb" / "fgd_published_median_10_seeds.csv")
    assert len(pub) == 24
    assert {w for w, _ in pub} == {"default", "cpu050", "gpushare40", "multigpu20"}
    assert {p for _, p in pub} == set(PAPER_POLICIES)
    assert pub[("default", "FGD")]["unalloc100"] == 4.77
    assert pub[("default", "BestFit")]["unalloc100"] == 7.09


def result(workload: str, policy: str, seed: int, alloc100: float, alloc130: float) -> RunResult:
    curve = tuple(min(float(x), alloc130) for x in CURVE_GRID * 100)
    return RunResult(
        workload=workload,
        policy=policy,
        seed=seed,
        pods=100 + seed,
        failed=seed % 3,
        alloc_pct=(alloc100, alloc130),
        frag_pct=((100 - alloc100) / 2, (100 - alloc130) / 2),
        curve=curve,
        wall_s=0.5 + seed,
    )


RUNS = [
    result("default", "FGD", 1, 95.0, 96.0),
    result("default", "FGD", 2, 94.0, 95.5),
    result("default", "FGD", 3, 96.0, 97.0),
    result("default", "BestFit", 1, 92.0, 93.0),
    result("cpu050", "FGD", 1, 90.0, 91.0),
    result("default", "BestFit", 2, 93.0, 94.0),
]


def test_summarise_medians_in_order_of_appearance() -> None:
    pub = {("default", "FGD"): {"unalloc100": 4.77}}
    rows = summarise(RUNS, pub)  # type: ignore[arg-type]
    assert [(r.workload, r.policy, r.seeds) for r in rows] == [
        ("default", "FGD", 3),
        ("default", "BestFit", 2),
        ("cpu050", "FGD", 1),
    ]
    fgd, best, cpu = rows
    assert (fgd.alloc100, fgd.unalloc100, fgd.alloc130) == (95.0, 5.0, 96.0)
    assert fgd.unalloc130 == pytest.approx(4.0)
    assert fgd.frag100 == pytest.approx(2.5) and fgd.wall_s == 2.5
    assert (best.alloc100, best.unalloc100) == (92.5, 7.5)  # median of two: their mean
    assert fgd.published == {"unalloc100": 4.77}
    assert best.published is None and cpu.published is None
    assert all(r.published is None for r in summarise(RUNS))


def test_write_outputs_four_files(tmp_path: Path) -> None:
    pub = {("default", "FGD"): {k: 1.5 for k in ("alloc100", "unalloc100", "alloc130",
                                                  "unalloc130", "frag100", "frag130")}}  # fmt: skip
    rows = summarise(RUNS, pub)
    out = tmp_path / "a" / "b"
    written = write_outputs(out, RUNS, rows)
    assert [p.name for p in written] == [
        "runs.csv",
        "summary.csv",
        "summary.json",
        "allocation.png",
    ]
    assert all(p.parent == out and p.stat().st_size > 0 for p in written)
    with (out / "runs.csv").open() as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == len(RUNS)
    assert runs[0]["workload"] == "default" and runs[0]["policy"] == "FGD"
    assert float(runs[0]["alloc100"]) == 95.0 and float(runs[0]["unalloc130"]) == 4.0
    assert runs[0]["seed"] == "1" and runs[0]["pods"] == "101" and runs[0]["failed"] == "1"
    with (out / "summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    assert [(r["workload"], r["policy"]) for r in summary] == [
        ("default", "FGD"),
        ("default", "BestFit"),
        ("cpu050", "FGD"),
    ]
    assert float(summary[0]["published_unalloc100"]) == 1.5
    assert summary[1]["published_unalloc100"] == ""
    doc = json.loads((out / "summary.json").read_text())
    assert [d["policy"] for d in doc] == ["FGD", "BestFit", "FGD"]
    assert doc[0]["unalloc100"] == 5.0 and doc[0]["published"]["frag130"] == 1.5
    assert (out / "allocation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_allocation_one_panel_per_pod_list(tmp_path: Path) -> None:
    path = plot_allocation(tmp_path / "alloc.png", RUNS)
    assert path == tmp_path / "alloc.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_to_json_round_trips() -> None:
    rows = summarise(RUNS)
    doc = json.loads(to_json(rows))
    assert [d["seeds"] for d in doc] == [3, 2, 1]
    assert doc == [dataclasses.asdict(r) for r in rows]
