"""Topology in the simulator: a gang forced across racks runs at the fabric's slowdown, one
placed compactly does not, and the GPU-seconds lost to spread are counted; ``placement/topology``
keeps a rack whole for the gang that best-fit spreads; ``suanli simulate --topology``."""

from __future__ import annotations

import json

import pytest

from builders import job, node
from suanli.cli.main import app as cli
from suanli.core.model import ClusterSpec, GpuModel
from suanli.core.topology import Comm, Fabric
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.topology import TopologyModel, spread_line, spread_summary
from support import cli_runner

H100 = GpuModel("H100", 81_920, 1.0)
COMM = Comm(grad_bytes=14e9, compute_s=1.0)  # a 7B model's BF16 gradients, 1 s of compute
FABRIC = Fabric(spine_oversubscription=2.0)


def two_racks() -> ClusterSpec:
    return ClusterSpec("t", tuple(node(f"n{i}", 8, H100, rack=f"r{i % 2}") for i in range(4)))


def gang(id: str, submit: float = 0.0, runtime: float = 1000.0):  # type: ignore[no-untyped-def]
    return job(id, submit, runtime, gpus=8, tasks=2)


def test_a_gang_across_racks_runs_at_the_fabrics_slowdown() -> None:
    # Two one-node jobs take n0 (rack r0) and n1 (r1); the gang must cross the spine.
    jobs = [job("a", 0, 5000, gpus=8), job("b", 0, 5000, gpus=8), gang("g", 1)]
    model = TopologyModel(FABRIC, comm={"g": COMM})
    on = simulate(two_racks(), jobs, PolicySet.parse("fifo+worst-fit"), topology=model)
    off = simulate(two_racks(), jobs, PolicySet.parse("fifo+worst-fit"))
    i = list(on.records.ids).index("g")
    placed = on.records.attempts
    assert placed is not None
    # Step: 1 s + 14 GB / (50 GB/s / 2 x 0.8) x 2 x 15/16 across racks, against 1 s + the
    # same at 50 GB/s x 0.8 in one rack (the best the cluster has for 16 GPUs).
    slow = (1 + 14e9 / 20e9 * 1.875) / (1 + 14e9 / 40e9 * 1.875)
    assert on.records.finish[i] - on.records.start[i] == pytest.approx(1000 * slow)
    assert off.records.finish[i] - off.records.start[i] == pytest.approx(1000)
    assert on.records.spread_gpu_s is not None and off.records.spread_gpu_s is None
    assert on.records.spread_gpu_s[i] == pytest.approx(16 * 1000 * (slow - 1))
    assert on.records.spread_gpu_s.sum() == pytest.approx(on.records.spread_gpu_s[i])
    assert on.records.slowdown is not None and off.records.slowdown is None
    assert on.records.slowdown.tolist() == pytest.approx([1, 1, slow])
    summary = spread_summary(on.records)
    assert summary == pytest.approx(
        {"spread_jobs": 1, "mean_slowdown_of_spread": slow,
         "spread_gpu_hours": 16 * 1000 * (slow - 1) / 3600}
    )  # fmt: skip
    assert spread_line(on.records).startswith("topology: 1 job(s) ran spread")


def test_a_compact_gang_or_a_job_that_does_not_talk_runs_as_recorded() -> None:
    jobs = [gang("g"), gang("quiet", 0)]
    model = TopologyModel(FABRIC, comm={"g": COMM})
    r = simulate(two_racks(), jobs, PolicySet.parse("fifo+best-fit"), topology=model)
    assert list(r.records.finish - r.records.start) == pytest.approx([1000, 1000])
    assert r.records.spread_gpu_s is not None and r.records.spread_gpu_s.sum() == 0


def test_topology_placement_keeps_a_rack_whole_for_the_gang_best_fit_spreads() -> None:
    # Racks alternate (n0, n2 in r0; n1, n3 in r1). Two one-node jobs: best-fit takes n0 and
    # n1 (ties go to the lowest index), leaving the gang n2 + n3 across racks; topology puts
    # the second job beside the first (the rack with less free), leaving r1 whole.
    jobs = [job("a", 0, 5000, gpus=8), job("b", 0, 5000, gpus=8), gang("g", 1)]
    model = TopologyModel(FABRIC, comm={"g": COMM})
    run = {p: simulate(two_racks(), jobs, PolicySet.parse(f"fifo+{p}"), topology=model)
           for p in ("best-fit", "topology")}  # fmt: skip
    took = {p: r.records.finish[2] - r.records.start[2] for p, r in run.items()}
    assert took["topology"] == pytest.approx(1000)
    assert took["best-fit"] > 1000 * 1.2
    assert run["topology"].records.spread_gpu_s.sum() == 0  # type: ignore[union-attr]


def test_simulate_topology_option_and_its_bad_values() -> None:
    args = ["simulate", "-c", "8x8xH100[rack=2]", "-n", "150", "--seed", "3", "-p",
            "fifo+topology", "--json"]  # fmt: skip
    r = cli_runner().invoke(cli, [*args, "--topology", "14:0.8"])
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["results"]
    t = run["topology"]
    assert t["spread_jobs"] >= 0 and t["spread_gpu_hours"] >= 0
    assert t["mean_slowdown_of_spread"] >= 1
    off = cli_runner().invoke(cli, args)
    assert "topology" not in json.loads(off.stdout)["results"][0]
    for bad, why in (("14", "expected GRAD_GB:COMPUTE_S"), ("x:1", "must be numbers"),
                     ("14:0", "compute_s must be > 0"), ("nan:1", "must be finite"),
                     ("-1:1", "grad_bytes must be >= 0")):  # fmt: skip
        b = cli_runner().invoke(cli, [*args, "--topology", bad])
        assert b.exit_code == 2 and why in b.output, (bad, b.output)
