"""GPU memory pooling in the simulator: a job no GPU holds runs pooled, at its slowdown,
and what pooling cost is counted; ``suanli simulate --memory-pool`` and the pooling bench of
``suanli bench hardware``."""

from __future__ import annotations

import json

import pytest

from suanli.cli.main import app as cli
from suanli.config.cluster import load_cluster
from suanli.core.builder import ImpossibleJobError
from suanli.core.model import Job, TaskRequest
from suanli.core.pooling import MemoryPool
from suanli.core.speed import native_basis
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.pooling import pool_line, pool_summary
from support import cli_runner

GIB = 1024
CLUSTER = load_cluster("1x8xH100")


def jobs() -> list[Job]:
    return [
        Job("fits", 0, 1000, TaskRequest(gpus=4, gpu_memory_mib=60 * GIB)),
        Job("big", 0, 1000, TaskRequest(gpus=2, gpu_memory_mib=90 * GIB)),
    ]


def test_a_pooled_job_runs_at_its_slowdown_beside_one_that_fits() -> None:
    with pytest.raises(ImpossibleJobError, match="GPU memory: 92160 MiB a GPU"):
        simulate(CLUSTER, jobs(), PolicySet(), speed_basis=native_basis(CLUSTER))
    r = simulate(CLUSTER, jobs(), PolicySet(), speed_basis=native_basis(CLUSTER),
                 memory_pool=MemoryPool())  # fmt: skip
    rec = r.records
    assert rec.pooled is not None and set(rec.pooled) == {"big"}
    s = rec.pooled["big"].slowdown
    took = dict(zip(rec.ids, rec.finish - rec.start, strict=True))
    assert took == pytest.approx({"fits": 1000, "big": 1000 * s})  # 4 + 4 GPUs: both at once
    summary = pool_summary(rec)
    held = 4 * 1000 * s / 3600  # two GPUs and two lenders
    assert summary.pop("by_source") == {"peer": 1, "host": 0}
    assert summary == pytest.approx({
        "pooled_jobs": 1, "mean_slowdown": s, "held_gpu_hours": held,
        "pooling_cost_gpu_hours": held * (1 - 1 / (2 * s)),
    })  # fmt: skip
    assert pool_line(rec).startswith("memory pool: 1 job(s) pooled (peer 1, host 0)")
    assert r.summary()["memory_pool"]["pooled_jobs"] == 1  # type: ignore[index]


def test_simulate_memory_pool_option_and_its_bad_values() -> None:
    args = ["simulate", "-c", "2x8xH100", "-n", "60", "-p", "fifo+best-fit", "--json"]
    ok = cli_runner().invoke(cli, [*args, "--memory-pool", "peer,host", "--pool-overlap", "0.5"])
    assert ok.exit_code == 0, ok.output
    (run,) = json.loads(ok.stdout)["results"]
    assert run["memory_pool"]["pooled_jobs"] == 0  # the synthetic jobs all fit their GPUs
    for extra, says in (
        (["--memory-pool", "peer,disk"], "sources must be some of peer, host"),
        (["--memory-pool", "host", "--pool-overlap", "1"], "overlap must be in [0, 1)"),
        (["--pool-overlap", "0.5"], "--pool-overlap: only with --memory-pool"),
    ):
        bad = cli_runner().invoke(cli, [*args, *extra])
        assert bad.exit_code == 2 and says in bad.output, bad.output


def test_pooling_bench_rows_beside_pooling_off() -> None:
    r = cli_runner().invoke(cli, ["bench", "hardware", "--only", "pooling", "--seeds", "0",
                                  "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["benches"]
    rows = {x["pooling"]: x for x in bench["rows"]}
    assert list(rows) == ["off", "peer,host", "host", "peer,host at most 2x",
                          "peer,host overlap 0.9"]  # fmt: skip
    off = rows["off"]
    assert off["never_ran"] > 0 and off["big_jct_h"] is None and off["pool_cost_gpu_h"] == 0
    total = off["ran"] + off["never_ran"]
    for name in ("peer,host", "host", "peer,host overlap 0.9"):
        x = rows[name]
        assert x["never_ran"] == 0 and x["ran"] == total and x["big_slowdown"] > 1
        assert x["utilisation"] <= x["allocation"]  # idle lenders and memory stalls
    capped = rows["peer,host at most 2x"]
    assert 0 < capped["never_ran"] < off["never_ran"] and 1 < capped["big_slowdown"] <= 2
    # The bound from host memory costs the most; hiding the traffic costs the least.
    assert rows["host"]["big_slowdown"] > rows["peer,host"]["big_slowdown"]
    assert rows["peer,host overlap 0.9"]["big_slowdown"] < rows["peer,host"]["big_slowdown"]
