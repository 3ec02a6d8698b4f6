"""The network bench's scenario on the shared traces (skipped, saying so, when they are
absent): the stated load rule, and a week's bill in a real ledger checked against the
traces' own recorded GPU-time, read apart with the csv module."""

from __future__ import annotations

import csv
import json
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from suanli.bench.network import ledger
from suanli.cli.main import app as cli
from suanli.federation.engine import federate
from suanli.federation.scenario import NetworkScenario, build, thin
from suanli.federation.settle import bill
from suanli.traces.catalogue import resolve_trace
from support import cli_runner, trace_dir_or_skip


@pytest.fixture(scope="module")
def week():  # type: ignore[no-untyped-def]
    root = trace_dir_or_skip()
    return root, *build(NetworkScenario(), 0, root)


def test_the_scenario_is_as_stated(week) -> None:  # type: ignore[no-untyped-def]
    root, fed, jobs, info = week
    assert [r.name for r in fed.regions] == ["us-east", "us-west", "eu-west", "ap-northeast"]
    assert [r.jurisdiction for r in fed.regions] == ["us", "us", "eu", "jp"]
    k = info["k"]
    # The load rule: the smallest k at which the offered load reaches 0.8.
    assert info["offered_load"] >= 0.8 and k > 1
    assert {n.gpu_model.name for n in fed.regions[1].cluster.nodes} == {"V100"}  # ITP, whole
    for r in fed.regions:
        assert set(r.prices) >= {n.gpu_model.name for n in r.cluster.nodes if n.gpu_model}
    assert fed.reservations[0].org == "itp/cluster04" and fed.reservations[0].region == "us-east"
    assert fed.outages[0].region == "ap-northeast"
    kinds = defaultdict(int)
    for fj in jobs:
        kinds[fj.job.tenant.split("/")[0]] += 1
        assert all(fed.datasets[d].home == fj.home for d in fj.data)
    assert kinds["itp"] > 5000 and kinds["philly"] > 5000 and kinds["online"] == 3


def test_thinning_keeps_every_node_type() -> None:
    from suanli.config.cluster import load_cluster

    c = load_cluster("10x8xV100+3x4xA100")
    t = thin(c, 4, "x")
    assert sorted((n.gpu_model.name, n.gpus) for n in t.nodes) == [("A100", 4)] + [("V100", 8)] * 3


def test_the_ledger_holds_the_traces_own_gpu_time(week) -> None:  # type: ignore[no-untyped-def]
    root, fed, jobs, info = week
    res = federate(fed, jobs, "cheapest")
    b = bill(res, fed, info["homes"])
    with tempfile.TemporaryDirectory() as d:
        led = ledger(b, Path(d) / "ledger.db")
    # Every cross-region use has its settlement, and every job ended.
    assert led["entries"]["settlement"] == len(b.settlements) > 0
    assert all(o.finish == o.finish for o in res.outcomes)
    # GPU-hours in the usage records the ledger holds, at the pace each attempt ran (its
    # slowest GPU's speed: a gang runs at its slowest GPU's pace), against the traces'
    # recorded figures: Philly's gpu_time column and ITP's duration x GPUs.
    speed = {n.gpu_model.name: n.gpu_model.speed for r in fed.regions for n in r.cluster.nodes
             if n.gpu_model}  # fmt: skip
    ref: dict[str, float] = defaultdict(float)
    for rec in b.records:
        if rec.gpu:
            pace = min(speed[m] for m, _ in rec.gpu)
            ref[rec.org.split("/")[0]] += rec.duration_ms / 3.6e6 * rec.gpu_milli / 1000 * pace
    rows = list(csv.DictReader((root / "philly" / "philly_jobs.csv").open()))
    week_ids = {fj.id for fj in jobs if fj.job.tenant.startswith("philly/")}
    # (a Philly job is named by its row, counted from 1)
    recorded = sum(float(rows[int(i.split("-")[1]) - 1]["gpu_time"]) for i in week_ids)
    basis = resolve_trace("philly", root).basis.speed
    assert ref["philly"] == pytest.approx(recorded * basis / 3600, rel=1e-6)
    ids = {fj.id for fj in jobs}
    itp = 0.0
    for c in range(1, 11):
        for r in csv.DictReader((root / "itp" / f"cluster{c:02d}.csv").open()):
            if f"itp{c:02d}-{r['job_id']}" in ids:
                itp += float(r["duration"]) * int(r["num_gpu"])
    assert ref["itp"] == pytest.approx(itp / 3600, rel=1e-6)


def test_the_cli_runs_the_bench_and_writes_each_decision(tmp_path: Path) -> None:
    root = trace_dir_or_skip()
    r = cli_runner().invoke(cli, ["bench", "network", "--seeds", "0", "--json", "-o",
                                  str(tmp_path), "--trace-dir", str(root)])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = doc["rows"]
    assert [x["router"] for x in rows] == ["first-admit", "least-loaded", "cheapest", "suanli"]
    for x in rows:
        assert x["explained"] and x["settled"] and x["unrouted"] == 0
        assert x["cost_usd"] > 0 and sum(x["jobs_by_region"].values()) >= x["jobs"] - 10
        assert x["span_days"] >= 7.0  # the online services run the whole week
    (cmp,) = doc["comparison"]
    assert cmp["best_jct_baseline"] in ("first-admit", "least-loaded", "cheapest")
    with (tmp_path / "seed0-suanli-jobs.csv").open() as f:
        first = next(csv.DictReader(f))
    route = json.loads(first["explanation"])
    assert route["router"] == "suanli" and route["member"] and route["scores"]
