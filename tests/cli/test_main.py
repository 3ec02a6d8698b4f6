"""The command line through Typer's test runner: output, JSON, files and one-line errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import suanli.cli.simulate as simulate_cli
from builders import job
from suanli.cli.main import app
from suanli.workload.info import WorkloadInfo

SMALL = ["--cluster", "2x8xV100", "--jobs", "300"]
DEFAULT_LABELS = [*simulate_cli.DEFAULT_POLICIES, simulate_cli.SHARING_DEFAULT_POLICY]
"""The synthetic workload has jobs on shares of GPUs: the sharing default joins the six."""


@pytest.fixture()
def runner() -> CliRunner:
    # Keep stderr apart from stdout: the default since Click 8.2 (and Typer's vendored Click),
    # an option before that.
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_policies_lists_the_registry(runner: CliRunner) -> None:
    result = run(runner, "policies")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert "placement/best-fit" in names and "queue/fifo" in names
    seams = [n.split("/")[0] for n in names]
    # Every seam has plugins, listed seam by seam, each seam's in name order.
    assert list(dict.fromkeys(seams)) == [
        "queue", "placement", "admission", "backfill", "preemption", "runtime", "autoscaler",
        "router",
    ]  # fmt: skip
    assert seams == sorted(seams, key=list(dict.fromkeys(seams)).index)
    for seam in set(seams):
        mine = [n for n in names if n.startswith(seam + "/")]
        assert mine == sorted(mine)
    for entry in ("admission/quota", "admission/budget", "admission/user-limit",
                  "backfill/none", "backfill/easy", "backfill/conservative",
                  "preemption/checkpoint-aware", "runtime/estimate", "runtime/oracle"):  # fmt: skip
        assert entry in names
    best_fit = next(line for line in lines if line.startswith("placement/best-fit"))
    assert len(best_fit.split(maxsplit=1)) == 2  # a description follows the name


def test_policies_json(runner: CliRunner) -> None:
    result = run(runner, "policies", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert {"policy": "queue/fifo"}.items() <= next(
        d for d in doc if d["policy"] == "queue/fifo"
    ).items()


def test_simulate_json_one_entry_per_policy(runner: CliRunner) -> None:
    result = run(runner, "simulate", *SMALL, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout holds the JSON and nothing else
    assert [r["policy"] for r in doc["results"]] == DEFAULT_LABELS
    assert all(r["jobs"] == 300 and r["total_gpus"] == 16 for r in doc["results"])
    assert doc["run"]["cluster"] == "2x8xV100" and doc["run"]["workload"]["jobs"] == 300


def test_simulate_policies_in_order_without_duplicates(runner: CliRunner) -> None:
    result = run(
        runner, "simulate", *SMALL, "--json", "-p", "sjf+best-fit", "-p", "fifo/strict+first-fit",
        "-p", "sjf+best-fit",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    labels = [r["policy"] for r in json.loads(result.stdout)["results"]]
    assert labels == ["sjf+best-fit", "fifo/strict+first-fit"]


def test_simulate_same_seed_same_results(runner: CliRunner) -> None:
    def outcome(seed: str) -> list[object]:
        result = run(runner, "simulate", *SMALL, "--json", "-p", "fifo+best-fit", "--seed", seed)
        return [(r["jct_s"], r["queueing_delay_s"]) for r in json.loads(result.stdout)["results"]]

    assert outcome("3") == outcome("3")
    assert outcome("3") != outcome("4")


def test_simulate_table(runner: CliRunner) -> None:
    result = run(runner, "simulate", *SMALL, "-p", "fifo+best-fit", "-p", "priority+packing")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("2x8xV100: 2 nodes, 16 GPUs (V100)")
    for row in ("GPU allocation %", "GPU utilisation %", "GPU allocation, whole run %",
                "JCT P99", "queueing delay P95",
                "makespan", "finished", "unfinished", "cycles", "decisions/s", "wall (s)",
                "JCT mean [high]", "wait P99 [spot]"):  # fmt: skip
        assert row in out, row
    assert "+best-fit" in out and "+packing" in out  # column headers split at '+'
    assert "Traceback" not in result.output


def test_simulate_out_writes_files(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run(runner, "simulate", *SMALL, "-p", "fifo+best-fit", "-p", "fifo/strict+best-fit",
                 "--out", str(out), "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert names == {
        "fifo_best-fit-jobs.csv",
        "fifo_best-fit-series.csv",
        "fifo_best-fit-jobs.jsonl",
        "fifo_best-fit-series.json",
        "fifo_best-fit-attempts.csv",
        "fifo-strict_best-fit-jobs.csv",
        "fifo-strict_best-fit-series.csv",
        "fifo-strict_best-fit-jobs.jsonl",
        "fifo-strict_best-fit-series.json",
        "fifo-strict_best-fit-attempts.csv",
        "summary.json",
        "allocation.png",
    }
    assert len((out / "fifo_best-fit-jobs.csv").read_text().splitlines()) == 1 + 300
    summary = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in summary["results"]] == ["fifo+best-fit", "fifo/strict+best-fit"]
    assert (out / "allocation.png").stat().st_size > 0


def test_simulate_start_estimates_fill_the_per_job_columns(
    runner: CliRunner, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = run(runner, "simulate", *SMALL, "-p", "qssf@history+best-fit", "--start-estimates",
                 "--out", str(out), "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    with (out / "qssf-history_best-fit-jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 300 and all(r["start_p50"] != "" for r in rows)
    waited = [r for r in rows if float(r["wait"]) > 0]
    assert waited and all(float(r["start_p90"]) >= float(r["start_p50"]) for r in waited)
    r = waited[0]
    assert float(r["start_error"]) == pytest.approx(
        float(r["start"]) - float(r["start_p50"]), abs=2e-3
    )
    # Without the option, the columns are there and empty.
    plain = tmp_path / "plain"
    assert run(runner, "simulate", *SMALL, "-p", "fifo+best-fit", "--out", str(plain),
               "--quiet").exit_code == 0  # fmt: skip
    with (plain / "fifo_best-fit-jobs.csv").open() as f:
        assert {r["start_p50"] for r in csv.DictReader(f)} == {""}


def test_simulate_prestage_saves_start_up_delay(runner: CliRunner, tmp_path: Path) -> None:
    got = {}
    for flags in ((), ("--prestage",)):
        result = run(runner, "simulate", *SMALL, "-p", "fifo+best-fit", "--startup-delay", "300",
                     *flags, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        got[flags] = json.loads(result.stdout)["results"][0]["jct_s"]["mean"]
    assert got[("--prestage",)] < got[()]
    refused = run(runner, "simulate", *SMALL, "--prestage")
    assert refused.exit_code == 2 and "--prestage: only with a --startup-delay" in refused.output


def test_simulate_with_failures(runner: CliRunner, tmp_path: Path) -> None:
    """``--failures``: the JSON summary and the table say what failed and what it cost; the
    attempts CSV marks the lost attempts; a bad rate is refused, named."""
    args = ["simulate", *SMALL, "-p", "fifo+best-fit", "--failures", "3600",
            "--node-failures-per-day", "2", "--gpu-failures-per-day", "0.2"]  # fmt: skip
    result = run(runner, *args, "--json", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    f = json.loads(result.stdout)["results"][0]["failures"]
    assert f["count"] > 0 and f["by_level"]["node"] > 0 and f["interrupted_attempts"] > 0
    assert f["down_gpu_hours"] > 0 and len(f["failures"]) == f["count"]
    with (tmp_path / "fifo_best-fit-attempts.csv").open() as fh:
        outcomes = [r["outcome"] for r in csv.DictReader(fh)]
    assert outcomes.count("failed") == f["interrupted_attempts"]
    table = run(runner, *args, "--quiet")
    assert table.exit_code == 0 and "[fifo+best-fit] failures:" in table.output
    bad = run(runner, "simulate", *SMALL, "--failures", "0")
    assert bad.exit_code != 0 and "repair_s must be a number of seconds > 0" in bad.output


def test_simulate_json_with_out_keeps_stdout_pure(runner: CliRunner, tmp_path: Path) -> None:
    result = run(
        runner, "simulate", *SMALL, "-p", "fifo+best-fit", "--json", "--out", str(tmp_path)
    )
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert "wrote 7 files" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["-p", "fifo+nope"],
            "unknown placement policy 'nope' (known: best-fit",
            id="unknown-placement",
        ),
        pytest.param(["-p", "lifo+best-fit"], "unknown queue policy 'lifo'", id="unknown-queue"),
        pytest.param(
            ["-p", "fifo"],
            "policy set 'fifo': expected QUEUE[/MODE]+PLACEMENT",
            id="policy-syntax",
        ),
        pytest.param(
            ["-p", "fifo/lax+best-fit"],
            "unknown backfill policy 'lax' (known: conservative, easy",
            id="policy-mode",
        ),
        pytest.param(["--cluster", "0x8xH100"], "node count: must be >= 1", id="zero-nodes"),
        pytest.param(["--cluster", "4x8xFOO"], "unknown GPU model 'FOO'", id="unknown-model"),
        pytest.param(
            ["--cluster", "4x8xH100[nvlink=12]"],
            "must be a multiple of the 8 GPUs",
            id="bad-nvlink",
        ),
        pytest.param(
            ["--cluster", "nope.yaml"], "cluster file 'nope.yaml' not found", id="missing-yaml"
        ),
        pytest.param(["--jobs", "-5"], "--jobs: must be >= 1 (got -5)", id="negative-jobs"),
        pytest.param(["--jobs", "0"], "--jobs: must be >= 1 (got 0)", id="zero-jobs"),
        pytest.param(["--load", "-0.5"], "--load: must be a number > 0", id="negative-load"),
        pytest.param(["--load", "nan"], "--load: must be a number > 0", id="nan-load"),
        pytest.param(["--seed", "-1"], "--seed: must be >= 0", id="negative-seed"),
        pytest.param(
            ["--cycle-interval", "-1"],
            "--cycle-interval: must be a number >= 0",
            id="negative-cycle",
        ),
        pytest.param(["--until", "0"], "--until: must be a number > 0", id="zero-until"),
        pytest.param(["--jobs", "many"], "Invalid value for '--jobs'", id="jobs-not-a-number"),
        pytest.param(["--frobnicate"], "No such option: --frobnicate", id="unknown-option"),
    ],
)
def test_simulate_bad_input_is_one_line_exit_2(
    runner: CliRunner, args: list[str], message: str
) -> None:
    result = run(runner, "simulate", "--cluster", "2x8xH100", "--jobs", "20", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("suanli: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output


def test_job_larger_than_any_node_is_one_line_exit_2(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The synthetic generator only draws jobs that fit; a trace may not. Stand in for one.
    info = WorkloadInfo(1, 0.0, 0.0, 0.0, "horizon")
    monkeypatch.setattr(
        simulate_cli, "generate_with_info", lambda config, cluster: ([job("big", gpus=16)], info)
    )
    result = run(runner, "simulate", "--cluster", "2x8xH100", "--jobs", "1")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("suanli: error: job big can never run on cluster 2x8xH100")
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.output


def test_out_that_cannot_be_created_fails_before_simulating(
    runner: CliRunner, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run(runner, "simulate", *SMALL, "--out", str(blocker / "sub"))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"suanli: error: --out {blocker / 'sub'}: cannot create")


def test_unknown_command_is_one_line_exit_2(runner: CliRunner) -> None:
    result = run(runner, "frobnicate")
    assert result.exit_code == 2
    assert result.stderr.startswith("suanli: error: No such command 'frobnicate'")
    assert len(result.stderr.splitlines()) == 1


def test_help_and_version(runner: CliRunner) -> None:
    assert "--cycle-interval" in run(runner, "simulate", "--help").stdout
    version = run(runner, "--version")
    assert version.exit_code == 0 and version.stdout.startswith("suanli ")


def test_simulate_explain_tells_a_jobs_story(runner: CliRunner) -> None:
    # At three times the cluster's capacity the queues contend for their quotas.
    args = ["--cluster", "8x8xV100", "--jobs", "400", "--load", "3", "--seed", "1",
            "-p", "fair-share+best-fit"]  # fmt: skip
    result = run(runner, "simulate", *args, "--quotas", "shared", "--preempt", "--quiet",
                 "--explain", "j000300")  # fmt: skip
    assert result.exit_code == 0, result.output
    story = result.output[result.output.index("job j000300:") :].splitlines()
    assert "submitted" in story[1]
    # It waited with a typed reason and its numbers: its class may not borrow quota.
    assert any("pending: over quota: queue" in line and "not preemptible" in line for line in story)


def test_simulate_explain_unknown_job_is_a_clear_error(runner: CliRunner) -> None:
    result = run(runner, "simulate", *SMALL, "--explain", "nope")
    assert result.exit_code != 0
    assert "--explain: no job 'nope' in the workload" in result.output


def test_simulate_with_budgets_refuses_and_reports(runner: CliRunner, tmp_path: Path) -> None:
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text(
        "currency: USD\nbudgets:\n"
        "  - {org: ai-lab, period: monthly, limit: '500', action: refuse}\n"
    )
    prices = Path(__file__).resolve().parents[2] / "examples" / "prices.yaml"
    result = run(runner, "simulate", "-c", "8x8xH100", "-n", "2000", "--seed", "1",
                 "-p", "fifo+best-fit", "--budgets", str(budgets), "--prices", str(prices),
                 "--out", str(tmp_path / "out"))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "budget ai-lab (monthly 2026-01) reached 100% of 500.00 USD" in result.output
    assert "job(s) refused" in result.output
    rows = (tmp_path / "out" / "fifo_best-fit-jobs.csv").read_text().splitlines()
    assert any("refused: budget ai-lab" in r for r in rows)


def test_simulate_budgets_need_prices(runner: CliRunner, tmp_path: Path) -> None:
    budgets = tmp_path / "b.yaml"
    budgets.write_text("currency: USD\nbudgets: []\n")
    result = run(runner, "simulate", *SMALL, "--budgets", str(budgets))
    assert result.exit_code != 0 and "--budgets: needs --prices FILE" in result.output


def test_simulate_preemptive_las_and_srtf_by_their_order(runner: CliRunner) -> None:
    args = ["--cluster", "2x8xV100", "--jobs", "300", "--load", "2", "--seed", "3", "--json"]
    result = run(runner, "simulate", *args, "-p", "las+best-fit", "-p", "srtf+best-fit",
                 "--preempt", "--preemption-policy", "by-order")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = {r["policy"]: r for r in json.loads(result.stdout)["results"]}
    assert set(out) == {"las+best-fit", "srtf+best-fit"}
    assert all(r["preemptions"] > 0 for r in out.values())
    # An order that does not rank running jobs cannot preempt by its order: said, not ignored.
    result = run(runner, "simulate", *args, "-p", "qssf@history+best-fit", "--preempt",
                 "--preemption-policy", "by-order")  # fmt: skip
    assert result.exit_code != 0 and "does not rank running jobs" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preempt", "--preemption-policy", "nope"], "unknown preemption policy 'nope'"),
        (["--preemption-policy", "by-order"], "--preemption-policy: only with --preempt"),
    ],
)
def test_simulate_preemption_policy_is_checked(
    runner: CliRunner, args: list[str], message: str
) -> None:
    result = run(runner, "simulate", *SMALL, *args)
    assert result.exit_code != 0 and message in result.output
