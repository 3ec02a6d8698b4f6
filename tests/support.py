"""Small helpers several test modules share: the public traces (or a skip saying where they
were looked for) and a command-line runner that keeps stderr apart where click can."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from suanli.traces import TraceNotFoundError, find_trace_dir


def trace_dir_or_skip() -> Path:
    """The public trace directory, or skip the test, naming every place looked at."""
    try:
        return find_trace_dir()
    except TraceNotFoundError as e:
        places = ", ".join(str(p) for _, p in e.places)
        pytest.skip(f"public traces not found in {places}: set SUANLI_TRACE_DIR")


def cli_runner() -> CliRunner:
    """A ``CliRunner`` with stdout and stderr apart (click < 8.2 needs ``mix_stderr=False``)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@functools.cache
def philly_billed(traces: Path) -> tuple[Path, dict[str, Any]]:
    """Philly simulated on its own machines with fifo+best-fit, then billed with the example
    price book by queue (``suanli bill --by queue --json``): the output directory (its
    ledger in it) and the bill. Made once a session for the tests that read it (a Philly
    replay and its bill take about a minute); they must not write there."""
    from suanli.cli.main import app

    out = Path(tempfile.mkdtemp(prefix="suanli-philly-")) / "philly"
    atexit.register(shutil.rmtree, out.parent, True)
    runner = cli_runner()
    sim = runner.invoke(app, ["simulate", "--trace", "philly", "--trace-dir", str(traces),
                              "-p", "fifo+best-fit", "-o", str(out), "--quiet"])  # fmt: skip
    assert sim.exit_code == 0, sim.output
    prices = Path(__file__).resolve().parents[1] / "examples" / "prices.yaml"
    bill = runner.invoke(app, ["bill", str(out), "--prices", str(prices), "--by", "queue",
                               "--json"])  # fmt: skip
    assert bill.exit_code == 0, bill.output
    return out, json.loads(bill.stdout)


GPW_HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status"


def write_gpw(folder: Path, jobs: int = 240, seed: int = 7) -> Path:
    """A Gen-Parallel-Workloads training CSV of ``jobs`` jobs of six users (their runtimes
    differ by user, so that history predicts something) and the 32-GPU Philly machine list
    beside it (read from there rather than the trace directory)."""
    rng = np.random.default_rng(seed)
    rows = [GPW_HEADER]
    for i in range(jobs):
        gpus = int(rng.choice([1, 1, 1, 2, 4, 8, 16]))
        user = int(rng.integers(0, 6))
        run = int(max(30, rng.lognormal(7 + 0.4 * user, 1.0)))
        gap = int(rng.exponential(400)) if i else 0
        rows.append(f"{i},{user},{gpus},0,{2 if gpus == 16 else 1},{gap},{run},0,Pass")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "training.csv"
    path.write_text("\n".join(rows) + "\n")
    machines = ["machineId, number of GPUs, single GPU mem"] + [f"m{i},8, 24GB" for i in range(4)]
    (folder / "cluster_machine_list.csv").write_text("\n".join(machines) + "\n")
    return path
