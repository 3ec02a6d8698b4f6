"""``suanli bench predict`` through Typer's test runner: JSON, tables, targets and one-line
errors, on a synthetic Gen-Parallel-Workloads CSV given by path (no public trace needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suanli.cli.main import app
from support import cli_runner, write_gpw

SOME = "fifo+best-fit,qssf@history+best-fit,las+best-fit,sjf-gpu@oracle+best-fit"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gpw(tmp_path_factory.mktemp("gpw"), jobs=200, seed=3)


def test_json(trace: Path, tmp_path: Path) -> None:
    saved = tmp_path / "out.json"
    res = cli_runner().invoke(
        app,
        ["bench", "predict", "--trace", str(trace), "--trace", str(trace), "--json",
         "--policies", SOME, "--jobs", "150", "--workers", "2", "--json-file", str(saved)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert json.loads(saved.read_text()) == out
    assert out["policies"] == SOME.split(",") and out["cut_to_first_jobs"] == 150
    assert len(out["traces"]) == 1  # the same trace twice is one trace
    (t,) = out["traces"]
    assert t["trace"] == str(trace) and t["jobs"] == 150 and t["gpus"] == 32
    ts = t["time_scale"]
    assert ts["converged"] and 0.9 <= ts["ratio"] <= 1.1 and len(ts["fifo_runs"]) <= 10
    assert [r["policy"] for r in t["rows"]] == SOME.split(",")
    fifo = t["rows"][0]
    assert fifo["scale"] == ts["scale"]
    assert fifo["wait_mean"] / ts["mean_runtime_s"] == pytest.approx(ts["ratio"])
    assert fifo["mae_s"] is None and t["rows"][1]["mae_s"] > 0  # only history predicts here
    assert t["verdict"]["best"] == "qssf@history+best-fit"
    assert [x["reference"] for x in t["verdict"]["targets"]] == [
        "sjf-gpu@oracle+best-fit", "las+best-fit", "fifo+best-fit", "the real waits"]  # fmt: skip
    assert t["rows"][1]["start_error"] >= 0 and 0 <= t["rows"][1]["start_cover_p90"] <= 1
    assert t["wall_s"] > 0 and t["within_budget"]
    assert out["pooled"] == {}
    assert "wall" in res.stderr  # progress goes to stderr beside --json


def test_tables_and_fifo_added(trace: Path) -> None:
    res = cli_runner().invoke(
        app, ["bench", "predict", "--trace", str(trace), "--policies", "qssf@history+best-fit",
              "--workers", "1"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert "time scale" in text and "FIFO mean wait / mean runtime" in text
    assert "fifo+best-fit" in text  # the load rule's reference is always run
    assert "targets on" in text and "not judged" in text  # no SJF or LAS row here
    assert "wall time per trace" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "--jobs"),
        (["--workers", "-1"], "--workers"),
        (["--policies", "nope+best-fit"], "--policies"),
        (["--policies", "fifo+best-fit/x"], "--policies"),
        (["--trace", "no-such-trace"], "unknown trace"),
        (["--json-file", "/no/such/dir/x.json"], "--json-file"),
    ],
)
def test_one_line_errors(trace: Path, args: list[str], message: str) -> None:
    base = ["bench", "predict", "--trace", str(trace)]
    if args[0] == "--trace":
        base = ["bench", "predict"]
    res = cli_runner().invoke(app, [*base, *args])
    assert res.exit_code == 2, res.output
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
