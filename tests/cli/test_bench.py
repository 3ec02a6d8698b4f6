"""``suanli bench fgd`` through Typer's test runner: JSON, tables, files and one-line errors.

Most tests replay a tiny openb-shaped trace directory (``openb_tiny``); one replays openb's
default pod list and skips when the public traces are absent.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openb_tiny import PUBLISHED_HEADER, write_tiny_traces
from suanli.bench.variants import grid
from suanli.cli.main import app
from support import trace_dir_or_skip

SUMMARY_KEYS = ("alloc100", "unalloc100", "alloc130", "unalloc130", "frag100", "frag130")


@pytest.fixture()
def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture()
def tiny_dir(tmp_path: Path) -> Path:
    return write_tiny_traces(tmp_path / "traces")


@pytest.fixture(scope="module")
def traces() -> Path:
    return trace_dir_or_skip()


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["bench", "fgd", *args])


def tiny_args(tiny_dir: Path, *more: str) -> list[str]:
    return ["--trace-dir", str(tiny_dir), "--pods", "tiny", "--workers", "1", *more]


def test_default_pod_list_json(runner: CliRunner, traces: Path) -> None:
    result = run(
        runner, "--pods", "default", "--policies", "FGD,BestFit", "--seeds", "42",
        "--workers", "1", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(d["workload"], d["policy"], d["seeds"]) for d in doc] == [
        ("default", "FGD", 1),
        ("default", "BestFit", 1),
    ]
    for d in doc:
        assert set(SUMMARY_KEYS) <= set(d)
        assert d["alloc100"] + d["unalloc100"] == pytest.approx(100.0)
        assert set(d["published"]) == set(SUMMARY_KEYS)
    assert doc[0]["published"]["unalloc100"] == 4.77
    assert doc[1]["published"]["unalloc100"] == 7.09


def test_json_rows_and_published(runner: CliRunner, tiny_dir: Path) -> None:
    result = run(
        runner, *tiny_args(tiny_dir, "--policies", "FGD,BestFit", "--policies", "frag-balance,FGD",
                           "--seeds", "1,3-4", "--json"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(d["workload"], d["policy"], d["seeds"]) for d in doc] == [
        ("tiny", "FGD", 3),
        ("tiny", "BestFit", 3),
        ("tiny", "frag-balance", 3),
    ]
    assert doc[0]["published"] == {
        "alloc100": 90.0,
        "unalloc100": 10.0,
        "alloc130": 92.5,
        "unalloc130": 7.5,
        "frag100": 5.0,
        "frag130": 4.0,
    }
    assert doc[1]["published"]["unalloc100"] == 20.0
    assert doc[2]["published"] is None


def test_out_writes_four_files(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = run(
        runner,
        *tiny_args(tiny_dir, "--policies", "Random,FGD", "--seeds", "5-6", "--out", str(out)),
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "allocation.png",
        "runs.csv",
        "summary.csv",
        "summary.json",
    ]
    with (out / "runs.csv").open() as f:
        runs = list(csv.DictReader(f))
    assert [(r["policy"], r["seed"]) for r in runs] == [
        ("Random", "5"),
        ("Random", "6"),
        ("FGD", "5"),
        ("FGD", "6"),
    ]
    assert [d["policy"] for d in json.loads((out / "summary.json").read_text())] == [
        "Random",
        "FGD",
    ]
    # The table goes to stdout, with the published column, then one line per file written.
    assert "FGD replay: medians over seeds" in result.stdout
    assert "published" in result.stdout
    assert "4 replays (tiny × 2 policies × 2 seeds, order shuffle)" in result.stdout
    assert result.stdout.count("wrote ") == 4


def test_json_with_out_keeps_stdout_pure(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = run(
        runner,
        *tiny_args(tiny_dir, "--policies", "FGD", "--seeds", "1", "--json", "--out", str(out)),
    )
    assert result.exit_code == 0, result.output
    assert [d["policy"] for d in json.loads(result.stdout)] == ["FGD"]
    assert result.stderr.count("wrote ") == 4


def test_trace_order_on_all_cores(runner: CliRunner, tiny_dir: Path) -> None:
    args = ("--policies", "BestFit", "--seeds", "1-2", "--order", "trace", "--json")
    one = run(runner, *tiny_args(tiny_dir, *args))
    every = run(runner, "--trace-dir", str(tiny_dir), "--pods", "tiny", "--workers", "0", *args)
    assert one.exit_code == 0 and every.exit_code == 0, one.output + every.output
    strip = [{k: d[k] for k in SUMMARY_KEYS} for d in json.loads(one.stdout)]
    assert strip == [{k: d[k] for k in SUMMARY_KEYS} for d in json.loads(every.stdout)]


def test_explicit_published_file(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    pub = tmp_path / "mine.csv"
    pub.write_text(PUBLISHED_HEADER + "openb_pod_list_tiny,01-Random,3,1,2,3,4,5,6\n")
    result = run(
        runner, *tiny_args(tiny_dir, "--policies", "Random,FGD", "--seeds", "1", "--json",
                           "--published", str(pub)),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc[0]["published"]["unalloc100"] == 2.0
    assert doc[1]["published"] is None  # FGD is in the trace dir's file, not in this one


def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("suanli: error: ")
    assert "Traceback" not in result.output
    return str(lines[0])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--seeds", "abc"], "--seeds: expected numbers or ranges", id="seeds-word"),
        pytest.param(["--seeds", "44-42"], "got '44-42'", id="seeds-backwards"),
        pytest.param(["--seeds", "42-x"], "got '42-x'", id="seeds-half-range"),
        pytest.param(["--seeds", ","], "--seeds: need at least one seed", id="seeds-empty"),
        pytest.param(
            ["--policies", "FGD,Nope"], "unknown placement policy 'Nope'", id="unknown-policy"
        ),
        pytest.param(["--order", "random"], "--order: expected shuffle or trace", id="bad-order"),
        pytest.param(["--workers", "-1"], "--workers: must be >= 0", id="negative-workers"),
        pytest.param(["--workers", "two"], "Invalid value for '--workers'", id="workers-word"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    runner: CliRunner, tiny_dir: Path, args: list[str], message: str
) -> None:
    line = one_line_error(run(runner, *tiny_args(tiny_dir, *args)))
    assert message in line


def test_missing_trace_dir(runner: CliRunner, tmp_path: Path) -> None:
    line = one_line_error(run(runner, "--trace-dir", str(tmp_path / "nowhere"), "--seeds", "42"))
    assert "public traces not found" in line and str(tmp_path / "nowhere") in line


def test_missing_trace_dir_from_environment(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUANLI_TRACE_DIR", str(tmp_path / "nowhere"))
    line = one_line_error(run(runner, "--seeds", "42"))
    assert "SUANLI_TRACE_DIR" in line


def test_missing_published_file(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    line = one_line_error(
        run(runner, *tiny_args(tiny_dir, "--seeds", "1", "--published", str(tmp_path / "no.csv")))
    )
    assert "--published: no such file" in line


def test_unknown_pod_list(runner: CliRunner, tiny_dir: Path) -> None:
    line = one_line_error(
        run(runner, "--trace-dir", str(tiny_dir), "--pods", "nope", "--seeds", "1")
    )
    assert "openb_pod_list_nope.csv" in line


def test_malformed_published_file(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    pub = tmp_path / "bad.csv"
    pub.write_text("workload,sc_policy\nopenb_pod_list_tiny,06-FGD\n")
    line = one_line_error(
        run(
            runner,
            *tiny_args(tiny_dir, "--seeds", "1", "--policies", "FGD", "--published", str(pub)),
        )
    )
    assert str(pub) in line and "missing columns" in line


def test_out_that_cannot_be_created(runner: CliRunner, tiny_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_line_error(
        run(
            runner,
            *tiny_args(
                tiny_dir, "--seeds", "1", "--policies", "FGD", "--out", str(blocker / "sub")
            ),
        )
    )
    assert str(blocker / "sub") in line


# ------------------------------------------------------------------ --variants


def test_variants_json_cells_and_verdicts(
    runner: CliRunner, tiny_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "v"
    result = run(
        runner, *tiny_args(tiny_dir, "--variants", "share=0.6;spec=0.5", "--variants", "source",
                           "--seeds", "1-2", "--json", "--out", str(out)),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    cells = [(c["cell"], c["policy"], c["seeds"]) for c in doc["cells"]]
    assert cells == [
        (cell, p, 2)
        for cell in ("share=0.6", "spec=0.5", "source")
        for p in ("FGD", "BestFit", "frag-balance")
    ]
    for c in doc["cells"]:
        assert c["min100"] <= c["unalloc100"] <= c["max100"]
    assert [(v["policy"], v["baseline"], v["cells"]) for v in doc["verdicts"]] == [
        ("BestFit", "FGD", 3),
        ("frag-balance", "FGD", 3),
    ]
    with (out / "variants.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 9
    assert "wrote" in result.stderr


def test_variants_grid_has_every_cell(runner: CliRunner, tiny_dir: Path) -> None:
    result = run(
        runner, *tiny_args(tiny_dir, "--variants", "grid", "--policies", "FGD,frag-balance",
                           "--seeds", "1"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{len(grid())} variants of tiny × 2 policies × 1 seeds" in result.stdout
    assert "frag-balance vs FGD: at most FGD on" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variants", "share=2"], "--variants: share must be a share in 0..1"),
        (["--variants", "gpus=2"], "--variants: 'gpus=2': expected NAME=VALUE"),
        (["--variants", "multi=0.9,share=0.5"], "more than the whole GPU request"),
    ],
)
def test_bad_variants_are_one_line_exit_2(
    runner: CliRunner, tiny_dir: Path, args: list[str], message: str
) -> None:
    assert message in one_line_error(run(runner, *tiny_args(tiny_dir, "--seeds", "1", *args)))


def test_variants_take_one_base_list(runner: CliRunner, tiny_dir: Path) -> None:
    line = one_line_error(
        run(runner, "--trace-dir", str(tiny_dir), "--pods", "tiny,default", "--variants", "source")
    )
    assert "--variants: give one base pod list with --pods" in line


def test_written_variant_lists_replay_with_pods_file(
    runner: CliRunner, tiny_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "v"
    result = run(
        runner, *tiny_args(tiny_dir, "--variants", "share=0.6;spec=0.5", "--policies", "FGD",
                           "--seeds", "3-4", "--out", str(out), "--write-lists"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lists = sorted(p.name for p in (out / "lists").iterdir())
    assert lists == ["openb_pod_list_tiny_share-0.6_s3.csv", "openb_pod_list_tiny_spec-0.5_s3.csv"]
    again = run(
        runner, "--trace-dir", str(tiny_dir), "--pods", str(out / "lists" / lists[1]),
        "--policies", "FGD", "--seeds", "3", "--workers", "1", "--json",
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    (row,) = json.loads(again.stdout)
    assert row["workload"] == "tiny_spec-0.5_s3" and row["seeds"] == 1


def test_write_lists_needs_variants_and_out(runner: CliRunner, tiny_dir: Path) -> None:
    line = one_line_error(run(runner, *tiny_args(tiny_dir, "--seeds", "1", "--write-lists")))
    assert "--write-lists: needs --variants and --out" in line
