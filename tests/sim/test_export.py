"""Exporting results: file names, CSV contents, strict JSON, the plot and its downsampling."""

from __future__ import annotations

import csv
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from builders import cluster, job, node
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.export import (
    ATTEMPT_COLUMNS,
    JOB_COLUMNS,
    SERIES_COLUMNS,
    downsample,
    file_stems,
    render_json,
    results_document,
    safe_stem,
    write_results,
)
from suanli.sim.results import SimResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def results(until: float | None = 150.0) -> list[SimResult]:
    """One 8-GPU node, three jobs: j1 runs 0-100, j2 waits for it, j3 cannot start by 150.

    With ``until=150``: j1 finishes, j2 is still running, j3 still pending.
    """
    c = cluster(node("n0", 8))
    jobs = [job("j1", 0, 100, gpus=8), job("j2", 1, 100, gpus=8), job("j3", 2, 50, gpus=8)]
    labels = ("fifo+best-fit", "fifo/strict+first-fit")
    return [simulate(c, jobs, PolicySet.parse(p), until=until) for p in labels]


def strict_json(text: str) -> object:
    def no_constants(name: str) -> object:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constants)


def read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize(
    ("label", "stem"),
    [
        pytest.param("fifo+best-fit", "fifo_best-fit", id="plus"),
        pytest.param("fifo/strict+best-fit", "fifo-strict_best-fit", id="slash"),
        pytest.param("a b:c*d", "a-b-c-d", id="other-unsafe"),
        pytest.param("../x", "-x", id="no-parent-dir"),
        pytest.param("..", "result", id="only-dots"),
    ],
)
def test_safe_stem(label: str, stem: str) -> None:
    assert safe_stem(label) == stem
    assert "/" not in safe_stem(label)


def test_file_stems_are_unique() -> None:
    assert file_stems(["a+b", "a+b", "a/b", "a+b"]) == ["a_b", "a_b-2", "a-b", "a_b-3"]


def test_write_results_files(tmp_path: Path) -> None:
    res = results()
    out = tmp_path / "out" / "nested"
    written = write_results(res, out, {"cluster": "test", "seed": 0})
    names = sorted(p.name for p in written)
    assert names == sorted(
        [
            "fifo_best-fit-jobs.csv",
            "fifo_best-fit-series.csv",
            "fifo_best-fit-jobs.jsonl",
            "fifo_best-fit-series.json",
            "fifo_best-fit-attempts.csv",
            "fifo-strict_first-fit-jobs.csv",
            "fifo-strict_first-fit-series.csv",
            "fifo-strict_first-fit-jobs.jsonl",
            "fifo-strict_first-fit-series.json",
            "fifo-strict_first-fit-attempts.csv",
            "summary.json",
            "allocation.png",
        ]
    )
    assert all(p.parent == out and p.stat().st_size > 0 for p in written)

    rows = read_csv(out / "fifo_best-fit-jobs.csv")
    assert tuple(rows[0]) == JOB_COLUMNS and len(rows) == 1 + 3
    by_id = {r[0]: dict(zip(JOB_COLUMNS, r, strict=True)) for r in rows[1:]}
    assert by_id["j1"]["finish"] == "100" and by_id["j1"]["jct"] == "100"
    assert by_id["j2"]["start"] == "100" and by_id["j2"]["wait"] == "99"
    assert by_id["j2"]["finish"] == "" and by_id["j2"]["pending_reason"] == ""  # running
    assert by_id["j3"]["start"] == "" and by_id["j3"]["pending_reason"].startswith("no capacity")
    assert by_id["j1"]["priority_class"] == "normal" and by_id["j1"]["tenant"] == "default"
    assert {r["outcome"] for r in by_id.values()} == {""}  # no outcome recorded
    assert (by_id["j1"]["tasks"], by_id["j1"]["gpu_milli"], by_id["j1"]["nodes"]) == (
        "1",
        "8000",
        "1",
    )

    # The same records as JSON Lines: numbers as numbers, events that never happened as null.
    lines = (out / "fifo_best-fit-jobs.jsonl").read_text().splitlines()
    jobs = {d["id"]: d for d in map(json.loads, lines)}
    assert len(jobs) == 3 and list(jobs["j1"]) == list(JOB_COLUMNS)
    assert jobs["j1"]["finish"] == 100 and jobs["j2"]["wait"] == 99
    assert jobs["j2"]["finish"] is None and jobs["j3"]["start"] is None
    assert jobs["j3"]["pending_reason"].startswith("no capacity")
    series = json.loads((out / "fifo_best-fit-series.json").read_text())
    assert list(series) == list(SERIES_COLUMNS)
    assert len({len(v) for v in series.values()}) == 1
    assert len(series["t"]) == len(read_csv(out / "fifo_best-fit-series.csv")) - 1

    series = read_csv(out / "fifo_best-fit-series.csv")
    assert tuple(series[0]) == SERIES_COLUMNS
    assert len(series) == 1 + len(res[0].series.t)
    assert all(0.0 <= float(r[1]) <= 1.0 for r in series[1:])

    summary = strict_json((out / "summary.json").read_text())
    assert isinstance(summary, dict) and set(summary) == {"run", "results"}
    assert summary["run"] == {"cluster": "test", "seed": 0}
    assert [r["policy"] for r in summary["results"]] == ["fifo+best-fit", "fifo/strict+first-fit"]
    first = summary["results"][0]
    assert first["files"] == {
        "jobs_csv": "fifo_best-fit-jobs.csv",
        "series_csv": "fifo_best-fit-series.csv",
        "jobs_jsonl": "fifo_best-fit-jobs.jsonl",
        "series_json": "fifo_best-fit-series.json",
        "attempts_csv": "fifo_best-fit-attempts.csv",
    }
    # j1 held 8 GPUs for 100 s, j2 for the 50 s before the clock stopped: 1,200 GPU-seconds.
    assert Decimal(first["allocated_gpu_hours"]) * 3600 == pytest.approx(1200)

    attempts = read_csv(out / "fifo_best-fit-attempts.csv")
    assert tuple(attempts[0]) == ATTEMPT_COLUMNS
    rows = [dict(zip(ATTEMPT_COLUMNS, r, strict=True)) for r in attempts[1:]]
    assert [(r["job"], r["attempt"], r["start"], r["end"], r["outcome"]) for r in rows] == [
        ("j1", "0", "0", "100", "finished"),
        ("j2", "0", "100", "150", "running"),
    ]
    assert rows[0]["gpu"] == "V100=8000" and rows[0]["gpu_milli"] == "8000"
    assert {"gpu_allocation", "jct_s", "queueing_delay_s", "by_priority_class"} <= set(first)

    png = (out / "allocation.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 1000


def test_jobs_csv_outcome_column(tmp_path: Path) -> None:
    """The recorded outcome comes after the columns there before it, then the predictions;
    a failed or killed job still runs its recorded runtime."""
    assert JOB_COLUMNS == (
        "id", "tenant", "priority_class", "submit", "start", "finish", "wait", "jct", "tasks",
        "gpu_milli", "nodes", "pending_reason", "queue", "preemptions", "waited_for", "budget",
        "outcome", "predicted_p50", "predicted_p90", "start_p50", "start_p90", "start_error",
    )  # fmt: skip
    c = cluster(node("n0", 8))
    jobs = [
        job("ok", 0, 100, outcome="completed"),
        job("bad", 1, 40, outcome="failed"),
        job("cut", 2, 70, outcome="killed"),
        job("new", 3, 10),
    ]
    res = simulate(c, jobs, PolicySet.parse("fifo+best-fit"))
    assert res.job_outcome == ["completed", "failed", "killed", ""]  # record (submit) order
    write_results([res], tmp_path, plot=False)
    rows = read_csv(tmp_path / "fifo_best-fit-jobs.csv")
    assert tuple(rows[0]) == JOB_COLUMNS
    by_id = {r[0]: dict(zip(JOB_COLUMNS, r, strict=True)) for r in rows[1:]}
    assert {i: (r["outcome"], r["jct"]) for i, r in by_id.items()} == {
        "ok": ("completed", "100"),
        "bad": ("failed", "40"),
        "cut": ("killed", "70"),
        "new": ("", "10"),
    }
    lines = (tmp_path / "fifo_best-fit-jobs.jsonl").read_text().splitlines()
    assert {d["id"]: d["outcome"] for d in map(json.loads, lines)} == {
        "ok": "completed",
        "bad": "failed",
        "cut": "killed",
        "new": "",
    }


def test_write_results_without_plot(tmp_path: Path) -> None:
    written = write_results(results(), tmp_path, plot=False)
    assert "allocation.png" not in {p.name for p in written}
    assert not (tmp_path / "allocation.png").exists()


def test_json_has_null_for_nan() -> None:
    res = results(until=50.0)  # nothing finishes: JCT statistics are NaN
    assert math.isnan(res[0].jct.mean)
    doc = strict_json(render_json(res, {"jobs": 3}))
    assert isinstance(doc, dict)
    assert doc["results"][0]["jct_s"]["mean"] is None
    assert doc["results"][0]["jct_s"]["count"] == 0
    assert doc == results_document(res, {"jobs": 3})


@pytest.mark.parametrize(
    ("n", "max_points"),
    [
        pytest.param(10, 100, id="short-unchanged"),
        pytest.param(10_000, 100, id="long-binned"),
        pytest.param(1_001, 1_000, id="just-over"),
    ],
)
def test_downsample_keeps_area(n: int, max_points: int) -> None:
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.exponential(1.0, n))
    v = rng.random(n)
    t2, v2 = downsample(t, v, max_points)
    assert len(t2) == min(n, max_points) and len(v2) == len(t2)
    # Area of the step function over [t[0], t[-1]] is kept.
    area = float((v[:-1] * np.diff(t)).sum())
    area2 = float((v2 * np.diff(np.append(t2, t[-1]))).sum())
    assert area2 == pytest.approx(area, rel=1e-9)
