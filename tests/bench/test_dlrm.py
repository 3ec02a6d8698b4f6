"""The DLRM replay (``suanli.bench.dlrm``): each instance in its mode's pool, the fleet each
mode needed, and, on the real trace (skipped with a message when the traces are absent),
the GPUs in use checked against the trace's own instances, read apart with the csv module."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from suanli.bench.dlrm import DlrmScenario, dlrm_fleet, rows_for, trace_path, workload
from suanli.cli.main import app as cli
from suanli.traces.dlrm import COLUMNS, load_dlrm_instances
from support import cli_runner, trace_dir_or_skip

# Two services: app_0 with two GPU instances and a CPU instance of 200 cores (a whole GPU
# server's cores but 24), app_1 with one of each. Times: "" is outside the trace.
ROWS = (
    "h0,HN,app_0,8,8,1,1,25,25,40,40,100,100,4,,,",
    "h1,HN,app_0,8,8,1,1,25,25,40,40,100,100,4,10,10,500",
    "c0,CN,app_0,200,200,0,0,1,1,900,900,255,255,-1,,,",
    "h2,HN,app_1,12,12,1,1,50,50,120,120,100,100,2,0,100,",
    "c1,CN,app_1,64,64,0,0,100,100,320,320,255,255,2,0,100,1000",
)


def write_trace(root: Path, *rows: str) -> Path:
    p = root / "dlrm-2025" / "disaggregated_DLRM_trace.csv"
    p.parent.mkdir(parents=True)
    p.write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return root


def test_pools_times_and_the_fleet_of_each_mode(tmp_path: Path) -> None:
    trace = load_dlrm_instances(trace_path(write_trace(tmp_path, *ROWS)))
    sc = DlrmScenario()
    co, horizon = workload(trace, sc, "co-located")
    dis, _ = workload(trace, sc, "disaggregated")
    assert horizon == 1000.0
    assert {x.pool for x in co} == {"gpu"}
    assert [(x.id, x.pool) for x in dis] == [("h0", "gpu"), ("h1", "gpu"), ("c0", "cpu"),
                                             ("h2", "gpu"), ("c1", "cpu")]  # fmt: skip
    h1 = next(x for x in dis if x.id == "h1")
    assert (h1.start, h1.end, h1.app, h1.max_per_node) == (10.0, 500.0, "app_0/HN", 4)
    assert next(x for x in dis if x.id == "h0").start == 0.0  # there before the trace began
    assert next(x for x in dis if x.id == "h2").end is None  # outlives it
    r_co, _ = dlrm_fleet(trace, sc, "co-located")
    r_dis, _ = dlrm_fleet(trace, sc, "disaggregated")
    # Co-located, the 200-core CPU instance leaves 24 cores on its server: with the 64-core
    # one, the GPU instances need a second server. Disaggregated, one GPU node holds them.
    assert r_co.nodes == {"gpu": 2} and r_dis.nodes == {"gpu": 1, "cpu": 2}
    assert r_co.peak["gpu"] == r_dis.peak["gpu"] == 3
    # The CPU instances' density limit (2 a node) and NICs (2 a CPU node) never bind here.
    rows = rows_for(trace, sc)
    assert [x["mode"] for x in rows] == ["co-located", "disaggregated"]
    assert rows[0]["gpus"] == 16 and rows[1]["gpus"] == 8
    # The disaggregated GPU instances get their NIC share of 50 GB/s: 25%, 25%, 50%.
    assert rows[1]["attach_gbs"] == pytest.approx(50 * (0.25 + 0.25 + 0.5) / 3)
    assert rows[1]["attach_vs_local"] == pytest.approx(50 * (0.25 + 0.25 + 0.5) / 3 / 63)


def test_windows_and_shares_of_the_services(tmp_path: Path) -> None:
    trace = load_dlrm_instances(trace_path(write_trace(tmp_path, *ROWS)))
    xs, horizon = workload(trace, DlrmScenario(window=(50.0, 600.0)), "disaggregated")
    assert horizon == 550.0
    # h1 (10-500) is cut to 0-450; c1 (100-1000) starts at 50 and outlives the window.
    got = {x.id: (x.start, x.end) for x in xs}
    assert got["h1"] == (0.0, 450.0) and got["c1"] == (50.0, None)
    half, _ = workload(trace, DlrmScenario(apps_share=0.5), "disaggregated", seed=3)
    assert len({x.app.split("/")[0] for x in half}) == 1
    with pytest.raises(ValueError, match="mode must be one of"):
        workload(trace, DlrmScenario(), "split")


def test_the_cli_runs_it_and_says_when_the_trace_is_absent(tmp_path: Path) -> None:
    root = write_trace(tmp_path / "traces", *ROWS)
    r = cli_runner().invoke(cli, ["bench", "hardware", "--only", "dlrm", "--trace-dir",
                                  str(root), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["benches"]
    assert [x["gpus"] for x in bench["rows"]] == [16, 8]
    (tmp_path / "empty").mkdir()
    missing = cli_runner().invoke(cli, ["bench", "hardware", "--only", "dlrm", "--trace-dir",
                                        str(tmp_path / "empty"), "--json"])  # fmt: skip
    assert missing.exit_code == 0, missing.output
    assert "not found" in json.loads(missing.stdout)["skipped"]["dlrm"]


def test_the_real_trace_against_its_own_instances() -> None:
    path = trace_path(trace_dir_or_skip())
    # The trace's own figures, read apart: the most GPU instances running at once.
    events: list[tuple[float, int]] = []
    end_of_trace = 0.0
    with path.open() as f:
        for row in csv.DictReader(f):
            times = [float(row[c]) for c in ("creation_time", "scheduled_time", "deletion_time")
                     if row[c]]  # fmt: skip
            end_of_trace = max([end_of_trace, *times])
            if row["role"] == "HN":
                events.append((float(row["scheduled_time"] or 0.0), 1))
                if row["deletion_time"]:
                    events.append((float(row["deletion_time"]), -1))
    events.sort(key=lambda e: (e[0], e[1]))
    alive = most = 0
    for _, d in events:
        alive += d
        most = max(most, alive)
    rows = rows_for(load_dlrm_instances(path), DlrmScenario())
    co, dis = rows
    for r in rows:
        assert r["instances"] == 23871 and r["refused"] == 0
        assert r["gpus_used_peak"] == most  # every GPU instance ran when the trace says
    # Disaggregated, the GPU servers are the GPU instances' peak, near the bound; co-located,
    # the CPU parts take the GPU servers' cores: about 4.5 times the GPUs, most never used.
    assert dis["gpu_nodes_bound"] == -(-most // 8)
    assert dis["gpu_nodes"] <= 1.05 * dis["gpu_nodes_bound"]
    assert co["gpus"] > 4 * dis["gpus"]
    assert co["gpu_alloc"] < 0.3 < 0.9 < dis["gpu_alloc"]
    assert co["stranded_gpus"] > 0.3 and dis["stranded_gpus"] == 0.0
