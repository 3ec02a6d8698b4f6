"""The measurement window and the utilisation figures of a result, on hand-computed runs."""

from __future__ import annotations

import pytest
from rich.console import Console

from builders import cluster, frac, gpus_cluster, job, node
from suanli.cli.table import is_oracle, results_table
from suanli.core.model import GpuModel
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.results import Window

FIFO = PolicySet("fifo", "best-fit")

# One node of 8 GPUs. Arrivals at 0, 100, 200, ..., 900; each job 1 GPU for 200 s at duty 0.5,
# tenant a for the even ones, b for the odd ones.
TEN = [
    job(f"j{i}", 100.0 * i, 200.0, gpus=1, gpu_util=0.5, tenant="a" if i % 2 == 0 else "b")
    for i in range(10)
]


def test_default_window_is_all_the_arrivals() -> None:
    r = simulate(gpus_cluster(8), TEN, FIFO)
    assert r.window == (0.0, 900.0) and r.window_jobs == 10
    # Two jobs run at once from 100 s on (one from 0 to 100): (100 + 2 x 800) / 8 / 900.
    assert r.gpu_allocation == pytest.approx((1 * 100 + 2 * 800) / (8 * 900))
    assert r.gpu_utilisation == pytest.approx(r.gpu_allocation * 0.5)
    assert r.jct.count == 10


def test_warm_up_and_explicit_bounds() -> None:
    r = simulate(gpus_cluster(8), TEN, FIFO, window=Window(warmup=0.2))
    # 20% of the 900 s of arrivals: the window is [180, 900].
    assert r.window == (180.0, 900.0)
    assert r.window_jobs == 8  # arrivals at 200, 300, ..., 900
    assert r.gpu_allocation == pytest.approx(2 / 8)
    assert r.gpu_allocation_run == pytest.approx(2000 / (8 * 1100))  # 10 x 200 GPU-s to 1,100 s
    assert r.gpu_utilisation_run == pytest.approx(r.gpu_allocation_run * 0.5)
    assert r.jct_run is not None and r.jct_run.count == 10
    assert "warm-up" in r.window_rule and "drain" in r.window_rule
    e = simulate(gpus_cluster(8), TEN, FIFO, window=Window(start=300.0, end=500.0))
    assert e.window == (300.0, 500.0) and e.window_jobs == 3
    assert e.window_rule == "as given"


def test_tenants_and_models_carry_their_share_of_the_window() -> None:
    # Two models of the same speed, so that every job runs its runtime wherever it lands.
    two = cluster(node("v", 4), node("m", 4, GpuModel("M2", 32 * 1024, 1.0)))
    jobs = [
        job("x", 0, 1000, gpus=4, gpu_util=0.25, tenant="a"),
        job("y", 0, 1000, gpus=2, gpu_util=1.0, tenant="b"),
        job("z", 1000, 1, gpus=1, tenant="b"),
    ]
    r = simulate(two, jobs, FIFO)
    # Window [0, 1000]: x holds 4 of the 8 GPUs, y 2.
    a, b = r.by_tenant["a"], r.by_tenant["b"]
    assert a.gpu_allocation == pytest.approx(4 / 8) and a.gpu_utilisation == pytest.approx(1 / 8)
    assert b.gpu_allocation == pytest.approx(2 / 8) and b.gpu_utilisation == pytest.approx(2 / 8)
    # Per model: best-fit puts the 4-GPU job on one node, the 2-GPU one on the other.
    models = r.by_model
    assert set(models) == {"V100", "M2"}
    assert sorted(m.gpu_allocation for m in models.values()) == pytest.approx([0.5, 1.0])
    total = sum(m.gpu_utilisation * m.gpus for m in models.values()) / 8
    assert total == pytest.approx(r.gpu_utilisation)


def test_fractional_duties_add_within_one_gpu() -> None:
    # Two half-GPU tasks on one GPU at duty 0.6 each keep it 0.6 busy (0.5 x 0.6 x 2).
    jobs = [job(f"f{i}", 0, 100, frac(500), gpu_util=0.6) for i in range(2)]
    r = simulate(gpus_cluster(1), jobs, FIFO, window=Window(end=100.0))
    assert r.gpu_allocation == pytest.approx(1.0)
    assert r.gpu_utilisation == pytest.approx(0.6)
    assert r.gpu_utilisation <= r.gpu_allocation


@pytest.mark.parametrize("bad", [{"start": -1.0}, {"warmup": 1.0}, {"start": 5.0, "end": 5.0}])
def test_bad_windows(bad: dict) -> None:
    with pytest.raises(ValueError, match="window"):
        Window(**bad)


def test_table_marks_the_best_and_the_oracle_in_plain_text() -> None:
    rs = [
        simulate(gpus_cluster(8), TEN, PolicySet("fifo", "best-fit")),
        simulate(gpus_cluster(2), TEN, PolicySet("sjf", "best-fit")),
    ]
    console = Console(width=160, record=True, color_system=None, force_terminal=False)
    console.print(results_table(rs))
    text = console.export_text()
    assert "(oracle)" in text
    row = next(line for line in text.splitlines() if line.startswith("│ GPU allocation %"))
    assert row.count("*") == 1  # the mark survives without colour
    assert all("(h)" not in line for line in text.splitlines())  # one unit (seconds-scale here)
    units = {
        line.split("(")[1].split(")")[0]
        for line in text.splitlines()
        if "JCT" in line or "makespan" in line
    }
    assert len(units) == 1
    assert is_oracle("fifo/easy-oracle+best-fit") and not is_oracle("fifo+best-fit")


def test_a_gang_across_two_models_is_split_between_them() -> None:
    # Two 4-GPU nodes of two models (same speed); a gang of two 3-GPU tasks must span both,
    # so each model holds 3 of its 4 GPUs for the whole window.
    two = cluster(node("v", 4), node("m", 4, GpuModel("M2", 32 * 1024, 1.0)))
    gang = job("g", 0, 1000, gpus=3, tasks=2, gpu_util=0.5)
    r = simulate(two, [gang, job("z", 1000, 1, gpus=1)], FIFO)
    assert r.records.use is not None and r.records.use.mixed  # really across models
    assert two.gpus_by_model == {"V100": 4, "M2": 4}
    for m in r.by_model.values():
        assert m.gpu_allocation == pytest.approx(3 / 4)
        assert m.gpu_utilisation == pytest.approx(3 / 8)
    assert r.gpu_allocation == pytest.approx(6 / 8)
