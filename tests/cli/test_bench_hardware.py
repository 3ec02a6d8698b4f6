"""``suanli bench hardware``: each bench beside its model switched off, in one run.

The live bench's GPU health comes from a scripted stand-in for NVML (there is no GPU here);
the failure bench runs on a small Gen-Parallel-Workloads CSV written by the test, or skips
with its reason when the trace it names is not found; the topology bench on its generated
workload.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suanli.bench.hardware import LiveScenario, live_bench
from suanli.bench.topology import TopologyScenario, topology_workload
from suanli.cli.main import app as cli
from suanli.config.cluster import load_cluster
from suanli.core.topology import Fabric, GpuSlot
from support import cli_runner, write_gpw


def test_live_bench_keeps_work_off_held_hardware_and_off_does_not() -> None:
    r = cli_runner().invoke(cli, ["bench", "hardware", "--only", "live", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (live,) = out["benches"]
    off, on = live["rows"]
    assert (off["run"], on["run"]) == ("off", "on")
    # With the holds off, work stays on (and lands on) the faulty GPU and the drained node.
    assert off["ran_through_fault"] + off["started_on_faulty_gpu"] >= 1
    assert off["started_on_drained_node"] >= 1 and off["interrupted"] == 0
    assert off["moved_within_s"] is None  # nothing moved: not a number
    # With them on: nothing lands there, the work is moved within the holds' interval (2 s).
    assert on["started_on_faulty_gpu"] == on["started_on_drained_node"] == 0
    assert on["ran_through_fault"] == 0 and on["interrupted"] >= 2
    assert 0 <= on["moved_within_s"] <= 2.0
    assert on["lost_gpu_s"] > 0
    assert on["succeeded"] == off["succeeded"] == 52  # no job is lost either way
    assert on["wall_ratio"] > 0 and "stand-in" in live["notes"][0]
    assert out["skipped"] == {}


@pytest.mark.parametrize(
    "scenario",
    [
        # Variants of the bench's script: other mixes, GPUs and overlapping fault and drain.
        LiveScenario(small_jobs=20, gangs=6, faulty_gpu=5, fault_at=300, healthy_at=900,
                     drain_at=400, uncordon_at=1300),
        LiveScenario(small_jobs=60, small_runtime_s=200, gangs=2, gang_runtime_s=3000,
                     faulty_gpu=0, fault_at=50, healthy_at=2500, drain_at=60, uncordon_at=120),
    ],
)  # fmt: skip
def test_holds_keep_every_variant_off_held_hardware(scenario: LiveScenario) -> None:
    r = live_bench(scenario)
    off, on = r.rows
    assert on["started_on_faulty_gpu"] == on["started_on_drained_node"] == 0
    assert on["ran_through_fault"] == 0 and 0 <= on["moved_within_s"] <= 2.0
    assert on["succeeded"] == off["succeeded"] == scenario.small_jobs + scenario.gangs


def test_topology_bench_rows_beside_the_model_off() -> None:
    r = cli_runner().invoke(cli, ["bench", "hardware", "--only", "topology", "--seeds", "0",
                                  "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["benches"]
    assert "72x8xGB200[nvlink=72,rack=18]" in bench["title"]
    rows = bench["rows"]
    runs = (("off", "best-fit"), ("on", "best-fit"), ("on", "topology"),
            ("on", "topology+wait 300s"), ("on", "topology+wait 3600s"))  # fmt: skip
    assert [(x["load"], x["model"], x["policy"]) for x in rows] == [
        (load, model, policy) for load in (0.6, 0.8) for model, policy in runs
    ]  # fmt: skip
    for off, *on in (rows[:5], rows[5:]):
        assert off["spread_gpu_h"] == 0 and off["gang_slowdown"] == 1 and off["jct_ratio"] == 1
        for x in on:
            assert 0 <= x["spread_gangs"] <= 1 and x["gang_slowdown"] >= 1
            # Spread gangs run slower: GPU-hours lost, and JCT no better than with no model.
            assert x["spread_gpu_h"] > 0 and x["jct_ratio"] >= 1
            assert x["jct_ratio"] == pytest.approx(x["jct_h"] / off["jct_h"])


def test_topology_workload_is_seeded_at_its_load_with_gangs_of_whole_nodes() -> None:
    sc = TopologyScenario(jobs=400)
    jobs, comm = topology_workload(sc, 3, 0.7)
    again, _ = topology_workload(sc, 3, 0.7)
    assert jobs == again and jobs != topology_workload(sc, 4, 0.7)[0]
    sizes = {j.task.gpus * j.tasks for j in jobs}
    assert sizes <= set(sc.gpus) and {16, 32, 64} <= sizes
    assert all(j.task.gpus == 8 for j in jobs if j.tasks > 1)
    gpus = load_cluster(sc.cluster).total_gpus
    offered = sum(j.task.gpus * j.tasks * j.runtime for j in jobs)
    assert offered / (gpus * jobs[-1].submit) == pytest.approx(0.7, rel=0.05)
    # A 64-GPU gang on one NVL72 domain steps at NVLink 5; over two racks, at InfiniBand.
    c = comm[next(j.id for j in jobs if j.tasks == 8)]
    one = [GpuSlot(f"n{k // 8}", k % 8, "d", "r", "GB200") for k in range(64)]
    two = [GpuSlot(f"n{k // 8}", k % 8, f"d{k // 32}", f"r{k // 32}", "GB200") for k in range(64)]
    f = Fabric()
    ring = 2 * c.grad_bytes * 63 / 64 / (0.8 * 1e9)
    assert f.step_s(c, one) == pytest.approx(c.compute_s + ring / 900)
    assert f.step_s(c, two) == pytest.approx(c.compute_s + ring / 50)


def test_failure_bench_on_a_csv_and_its_skip(tmp_path: Path) -> None:
    csv = write_gpw(tmp_path / "gpw", jobs=300)
    r = cli_runner().invoke(
        cli,
        [
            "bench",
            "hardware",
            "--only",
            "failures",
            "--trace",
            str(csv),
            "--time-scale",
            "0.5",
            "--seeds",
            "0-1",
            "--json",
        ],  # fmt: skip
    )
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["benches"]
    off, *seeds = bench["rows"]
    assert off["run"] == "off" and off["failures"] == 0 and off["jct_ratio"] == 1.0
    assert [s["run"] for s in seeds] == ["seed 0", "seed 1"]
    for s in seeds:
        assert s["interrupted"] <= s["failures"] * 8  # at most a node's jobs each
        assert s["lost_gpu_h"] >= 0 and s["down_gpu_h"] >= 0
    missing = cli_runner().invoke(
        cli,
        [
            "bench",
            "hardware",
            "--only",
            "failures",
            "--trace-dir",
            str(tmp_path / "none"),
            "--json",
        ],  # fmt: skip
    )
    assert missing.exit_code == 0, missing.output
    out = json.loads(missing.stdout)
    assert out["benches"] == [] and "not found" in out["skipped"]["failures"]


def test_defrag_bench_on_a_csv_and_the_generated_gangs(tmp_path: Path) -> None:
    csv = write_gpw(tmp_path / "gpw", jobs=300)
    r = cli_runner().invoke(cli, ["bench", "hardware", "--only", "defrag", "--trace", str(csv),
                                  "--time-scale", "0.5", "--seeds", "0", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["benches"]
    rows = bench["rows"]
    assert [(x["workload"].split(" ")[0], x["defrag"]) for x in rows] == [
        (str(csv), False),
        (str(csv), True),
        ("gangs", False),
        ("gangs", True),
    ]
    for off, on in (rows[:2], rows[2:]):
        assert off["moves"] == 0 and off["move_gpu_h"] == 0 and on["moves"] >= 0
        assert on["jct_ratio"] == pytest.approx(on["jct_h"] / off["jct_h"])
    gangs = rows[3]
    # The generated gangs wait for scattered room: moves happen, cost GPU-hours, and help.
    assert gangs["moves"] > 0 and gangs["move_gpu_h"] > 0 and gangs["gang_wait_ratio"] < 1


def test_bad_options_are_refused() -> None:
    bad = cli_runner().invoke(cli, ["bench", "hardware", "--only", "gpus"])
    assert bad.exit_code == 2 and "unknown bench 'gpus'" in bad.output
    scale = cli_runner().invoke(cli, ["bench", "hardware", "--time-scale", "0"])
    assert scale.exit_code == 2 and "--time-scale" in scale.output
