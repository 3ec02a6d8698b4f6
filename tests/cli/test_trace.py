"""``suanli simulate`` with a trace: ``--trace``, ``--trace-dir``, ``--skip-bad-rows``,
``--time-scale``.

Small CSV files written to a temporary folder stand in for traces; the tests of named traces
(``itp:cluster10``, 260 jobs) skip when the public traces are absent.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openb_tiny import NODES, PODS, pod_csv
from suanli.cli.main import app
from support import trace_dir_or_skip

POLICY = ["-p", "fifo+best-fit"]
ITP_ROWS = [
    ("a", 0, 600, 1),
    ("b", 100, 300, 2),
    ("c", 200, 900, 8),
    ("d", 400, 60, 1),
]


@pytest.fixture()
def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture(scope="module")
def traces() -> Path:
    return trace_dir_or_skip()


def itp_csv(path: Path, bad_row: bool = False) -> Path:
    lines = ["job_id,submission_time,duration,num_gpu"]
    lines += [f"{j},{t},{d},{g}" for j, t, d, g in ITP_ROWS]
    if bad_row:
        lines.insert(3, "x,150,abc,4")  # file line 4
    path.write_text("\n".join(lines) + "\n")
    return path


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["simulate", *args])


def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("suanli: error: ")
    assert "Traceback" not in result.output
    return str(lines[0])


# ------------------------------------------------------------------ named traces


def test_named_trace_json(runner: CliRunner, traces: Path) -> None:
    result = run(runner, "--trace", "itp:cluster10", *POLICY, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = len((traces / "itp" / "cluster10.csv").read_text().splitlines()) - 1
    w = doc["run"]["workload"]
    assert (w["kind"], w["trace"], w["jobs"], w["rows_skipped"]) == (
        "trace",
        "itp:cluster10",
        rows,
        0,
    )
    assert w["files"] == [str(traces / "itp" / "cluster10.csv")]
    assert "ElasticFlow" in w["source"]
    assert doc["run"]["cluster"] == "itp-cluster10"  # the trace's own (derived) cluster
    assert [r["jobs"] for r in doc["results"]] == [rows]


def test_trace_dir_option(runner: CliRunner, traces: Path, tmp_path: Path) -> None:
    result = run(runner, "--trace", "itp:10", "--trace-dir", str(traces), *POLICY, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run"]["workload"]["trace"] == "itp:cluster10"
    line = one_line_error(
        run(runner, "--trace", "itp:cluster10", "--trace-dir", str(tmp_path / "nowhere"), *POLICY)
    )
    assert "public traces not found" in line and str(tmp_path / "nowhere") in line


def test_named_trace_with_another_cluster(runner: CliRunner, traces: Path) -> None:
    result = run(runner, "--trace", "itp:cluster10", "--cluster", "4x8xV100", *POLICY, "--json")
    assert result.exit_code == 0, result.output
    run_meta = json.loads(result.stdout)["run"]
    assert (run_meta["cluster"], run_meta["gpus"]) == ("4x8xV100", 32)


def test_trace_without_times_is_one_line_exit_2(runner: CliRunner, traces: Path) -> None:
    line = one_line_error(run(runner, "--trace", "openb:multigpu20", *POLICY))
    assert "multigpu20" in line


# ------------------------------------------------------------------ CSV files


def test_csv_trace_table(runner: CliRunner, tmp_path: Path) -> None:
    path = itp_csv(tmp_path / "mine.csv")
    result = run(runner, "--trace", str(path), *POLICY)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert f"trace {path}: 4 jobs, seed 0" in first
    assert "arrivals ×" not in first
    assert result.stderr == ""


def test_openb_pod_list_file_uses_the_node_list_beside_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "openb_node_list_all_node.csv").write_text(NODES)
    pods = tmp_path / "pods.csv"
    pods.write_text(pod_csv(PODS))
    result = run(runner, "--trace", str(pods), "-p", "fifo+fgd", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["run"]["nodes"], doc["run"]["gpus"]) == (3, 10)
    assert doc["run"]["workload"]["files"] == [
        str(pods),
        str(tmp_path / "openb_node_list_all_node.csv"),
    ]
    assert doc["results"][0]["finished"] == len(PODS)


def test_bad_row_fails_without_skip(runner: CliRunner, tmp_path: Path) -> None:
    path = itp_csv(tmp_path / "bad.csv", bad_row=True)
    line = one_line_error(run(runner, "--trace", str(path), *POLICY))
    assert "bad.csv:4: column 'duration'" in line and "'abc'" in line


def test_skip_bad_rows(runner: CliRunner, tmp_path: Path) -> None:
    path = itp_csv(tmp_path / "bad.csv", bad_row=True)
    result = run(runner, "--trace", str(path), "--skip-bad-rows", *POLICY, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["run"]["workload"]["rows_skipped"] == 1
    assert doc["run"]["workload"]["jobs"] == 4
    assert [r["jobs"] for r in doc["results"]] == [4]
    assert result.stderr == ""  # JSON mode: nothing but the JSON
    table = run(runner, "--trace", str(path), "--skip-bad-rows", *POLICY)
    assert table.exit_code == 0, table.output
    assert "skipped 1" in table.stderr and "bad.csv:4" in table.stderr


def test_time_scale_scales_arrivals_only(runner: CliRunner, tmp_path: Path) -> None:
    path = itp_csv(tmp_path / "mine.csv")
    out = tmp_path / "out"
    result = run(runner, "--trace", str(path), *POLICY, "--time-scale", "0.5", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "arrivals × 0.5" in result.stdout.splitlines()[0]
    with (out / "fifo_best-fit-jobs.csv").open() as f:
        jobs = {r["id"]: r for r in csv.DictReader(f)}
    assert {j: float(r["submit"]) for j, r in jobs.items()} == {"a": 0, "b": 50, "c": 100, "d": 200}
    # Runtimes are kept: each job runs as long as the trace says (nothing waits here).
    assert {j: float(r["finish"]) - float(r["start"]) for j, r in jobs.items()} == {
        "a": 600,
        "b": 300,
        "c": 900,
        "d": 60,
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["workload"]["time_scale"] == 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--time-scale", "0.5"], "--time-scale: only with --trace", id="no-trace"),
        pytest.param(["--time-scale", "2", "--jobs", "10"], "only with --trace", id="no-trace-2"),
    ],
)
def test_time_scale_needs_a_trace(runner: CliRunner, args: list[str], message: str) -> None:
    line = one_line_error(run(runner, "--cluster", "2x8xV100", *args))
    assert message in line


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_time_scale_must_be_positive(runner: CliRunner, tmp_path: Path, value: str) -> None:
    path = itp_csv(tmp_path / "mine.csv")
    line = one_line_error(run(runner, "--trace", str(path), *POLICY, "--time-scale", value))
    assert "--time-scale: must be a number > 0" in line


def test_unknown_trace_name(runner: CliRunner) -> None:
    line = one_line_error(run(runner, "--trace", "nope", *POLICY))
    assert "unknown trace 'nope'" in line


def test_missing_trace_file(runner: CliRunner, tmp_path: Path) -> None:
    line = one_line_error(run(runner, "--trace", str(tmp_path / "none.csv"), *POLICY))
    assert "none.csv" in line


def test_machine_list_is_not_a_trace(runner: CliRunner, tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES)
    line = one_line_error(run(runner, "--trace", str(nodes), *POLICY))
    assert "machine list" in line


def test_a_csv_trace_replays_with_the_duty_of_its_kind(runner: CliRunner, tmp_path: Path) -> None:
    # An ITP-format file is training: Jeon et al.'s duties; --duty overrides it.
    path = itp_csv(tmp_path / "mine.csv")
    args = ["--trace", str(path), "-c", "4x8xV100", "-p", "fifo+best-fit", "--json"]
    doc = json.loads(run(runner, *args).stdout)
    assert doc["run"]["workload"]["duty"] == "training"
    r = doc["results"][0]
    assert 0 < r["gpu_utilisation"] < r["gpu_allocation"]
    fixed = json.loads(run(runner, *args, "--duty", "constant:0.5").stdout)
    assert fixed["run"]["workload"]["duty"] == "constant:0.5"
    f = fixed["results"][0]
    assert f["gpu_utilisation"] == pytest.approx(0.5 * f["gpu_allocation"])
