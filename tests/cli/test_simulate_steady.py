"""``suanli simulate``'s steady-state workload, measurement window and utilisation, through the
command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from suanli.cli.main import app
from support import cli_runner


@pytest.fixture()
def runner() -> CliRunner:
    return cli_runner()


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_the_default_run_is_in_steady_state(runner: CliRunner) -> None:
    # The default workload (21 days of arrivals on 64 x 8 H100) with one policy set: the
    # window and the whole run agree within 5 points, and utilisation sits below allocation.
    result = run(runner, "simulate", "-p", "fifo+best-fit", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    workload = doc["run"]["workload"]
    assert workload["derived"] == "jobs" and workload["horizon_s"] == 21 * 86400
    assert workload["jobs"] > 200_000
    (r,) = doc["results"]
    assert r["gpu_allocation"] - r["whole_run"]["gpu_allocation"] < 0.05
    assert r["gpu_allocation"] > 0.75
    assert 0 < r["gpu_utilisation"] < r["gpu_allocation"]
    assert r["window"]["start_s"] > 0 and r["window"]["jobs"] < r["jobs"]


def test_three_hundred_jobs_work_and_say_what_was_derived(runner: CliRunner) -> None:
    result = run(runner, "simulate", "-n", "300", "-p", "fifo+best-fit")
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    assert "300 synthetic jobs" in out and "derived from the job count" in out
    assert "measurement window:" in out and "GPU duty:" in out
    assert "GPU utilisation %" in out and "never reaches a steady state" in out


def test_jobs_and_horizon_derive_the_rate(runner: CliRunner) -> None:
    result = run(runner, "simulate", "-c", "2x8xV100", "-n", "400", "--horizon", "2d",
                 "-p", "fifo+best-fit", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    w = json.loads(result.stdout)["run"]["workload"]
    assert w["derived"] == "arrival rate" and w["arrival_span_s"] == pytest.approx(2 * 86400)


def test_window_option_sets_the_measured_span(runner: CliRunner) -> None:
    result = run(runner, "simulate", "-c", "2x8xV100", "-n", "400", "--window", "1h:5h",
                 "-p", "fifo+best-fit", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)["results"][0]
    assert (r["window"]["start_s"], r["window"]["end_s"]) == (3600.0, 5 * 3600.0)


def test_duty_option_changes_utilisation_not_allocation(runner: CliRunner) -> None:
    base = ["simulate", "-c", "2x8xV100", "-n", "400", "-p", "fifo+best-fit", "--json"]
    full = json.loads(run(runner, *base, "--duty", "constant:1").stdout)["results"][0]
    low = json.loads(run(runner, *base, "--duty", "constant:0.25").stdout)["results"][0]
    assert full["gpu_allocation"] == low["gpu_allocation"]
    assert full["gpu_utilisation"] == pytest.approx(full["gpu_allocation"])
    assert low["gpu_utilisation"] == pytest.approx(0.25 * low["gpu_allocation"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-n", "10", "--horizon", "1d", "--load", "0.5"],
            "--load: with both --jobs and --horizon",
        ),
        (["--horizon", "soon"], "--horizon: must be a duration"),
        (["--time-limit", "-3h"], "--time-limit:"),
        (["--window", "5h"], "--window: must be START:END"),
        (["--window", "5h:2h"], "--window: window end"),
        (["--duty", "busy"], "--duty: duty profile 'busy': known profiles are"),
        (["--duty", "declared"], "--duty: 'declared' keeps a trace's own duties"),
        (["-n", "0"], "--jobs: must be >= 1"),
        (["--load", "0"], "--load: must be a number > 0"),
        (["--trace", "philly", "-n", "10"], "--jobs: only for a synthetic workload"),
    ],
)
def test_bad_workload_options(runner: CliRunner, args: list[str], message: str) -> None:
    result = run(runner, "simulate", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
