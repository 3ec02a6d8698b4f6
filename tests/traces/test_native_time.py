"""Trace time on its own hardware: a trace's durations are the ones recorded on its native GPU
models, and are scaled only on other hardware (``suanli.core.speed``, docs/traces.md).

A tiny Philly-format trace of two models (K80 and P40) written here, replayed on its own
machines, on foreign ones and on a mix; then the public traces, whose tests skip with a
message when they are absent: Philly billed end to end against the GPU-hours its file
records, openb and ITP replayed on their own machines.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.cli.main import app
from suanli.config.cluster import load_cluster
from suanli.core.model import SpecError
from suanli.core.speed import REFERENCE
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.results import SimResult
from suanli.traces import resolve_trace
from support import cli_runner, philly_billed, trace_dir_or_skip

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "examples" / "prices.yaml"
FIFO = PolicySet("fifo", "best-fit")

# Two machines of the two Philly models: 2 K80 (12 GB, speed 0.3) and 8 P40 (24 GB, 0.5).
MACHINES = "machineId, number of GPUs, single GPU mem\nm0, 2, 12GB\nm1, 8, 24GB\n"
S_NATIVE = (2 * 0.3 + 8 * 0.5) / 10  # 0.46: the GPU-weighted speed of the native models
# timestamp, duration (s), GPUs: each fits one machine of the two.
JOBS = [
    ("2017-10-01 00:00:00", 1000.0, 1),
    ("2017-10-01 00:00:10", 600.0, 2),
    ("2017-10-01 00:00:20", 300.0, 8),
    ("2017-10-01 00:01:00", 450.5, 4),
]


def write_trace(root: Path, jobs: list[tuple[str, float, int]] = JOBS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cluster_machine_list.csv").write_text(MACHINES)
    path = root / "philly_jobs.csv"
    rows = [f"{t},{d},{g},{d * g},vc1" for t, d, g in jobs]
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(rows) + "\n")
    return path


def held(res: SimResult) -> dict[str, float]:
    """Seconds each job held its GPUs (one attempt each here)."""
    r = res.records
    return {jid: float(r.held_s[i]) for i, jid in enumerate(r.ids)}


def gpu_hours(res: SimResult) -> float:
    r = res.records
    return float((r.gpu_milli * r.held_s).sum()) / 1000 / 3600


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "tiny")


# ------------------------------------------------------------------ the tiny two-model trace


def test_the_trace_declares_its_machines_models_native(tiny: Path) -> None:
    t = resolve_trace(str(tiny))
    assert t.basis.native == ("K80", "P40")
    assert t.basis.speed == pytest.approx(S_NATIVE, rel=1e-15)


def test_on_its_own_machines_every_job_takes_its_recorded_duration(tiny: Path) -> None:
    t = resolve_trace(str(tiny))
    res = simulate(t.cluster, t.jobs, FIFO, speed_basis=t.basis)
    assert held(res) == {f"philly-{i:05d}": d for i, (_, d, _) in enumerate(JOBS, 1)}
    assert gpu_hours(res) == sum(d * g for _, d, g in JOBS) / 3600
    # The jobs ran on both models (so both were taken as recorded, not just one).
    use = res.records.use
    assert {use.models[int(m)] for m in use.model} == {"K80", "P40"}


def test_the_reference_basis_would_slow_the_trace_down_on_its_own_machines(tiny: Path) -> None:
    t = resolve_trace(str(tiny))
    res = simulate(t.cluster, t.jobs, FIFO)  # V100 = 1.0, as before native time
    assert gpu_hours(res) > 2 * sum(d * g for _, d, g in JOBS) / 3600


def test_on_foreign_hardware_durations_are_scaled_by_s_native_over_s(tiny: Path) -> None:
    t = resolve_trace(str(tiny))
    for spec, speed in (("2x8xV100", 1.0), ("2x8xH100", 5.0), ("2x8xT4", 0.5)):
        res = simulate(load_cluster(spec), t.jobs, FIFO, speed_basis=t.basis)
        want = {f"philly-{i:05d}": d * S_NATIVE / speed for i, (_, d, _) in enumerate(JOBS, 1)}
        got = held(res)
        assert got == pytest.approx(want, rel=1e-12), spec


def test_on_a_mix_native_models_keep_the_recorded_time(tiny: Path) -> None:
    from dataclasses import replace

    t = resolve_trace(str(tiny))
    pins = {"philly-00001": "K80", "philly-00002": "K80", "philly-00003": "H100"}
    jobs = [
        replace(j, task=replace(j.task, gpu_models=frozenset({pins[j.id]}))) if j.id in pins else j
        for j in t.jobs[:3]
    ]
    res = simulate(load_cluster("1x2xK80+1x8xH100"), jobs, FIFO, speed_basis=t.basis)
    assert held(res) == pytest.approx(
        {"philly-00001": 1000.0, "philly-00002": 600.0, "philly-00003": 300.0 * S_NATIVE / 5.0},
        rel=1e-12,
    )


def test_a_gang_over_native_and_foreign_gpus_runs_at_the_native_pace(tmp_path: Path) -> None:
    t = resolve_trace(str(write_trace(tmp_path, [("2017-10-01 00:00:00", 900.0, 16)])))
    assert (t.jobs[0].tasks, t.jobs[0].task.gpus) == (2, 8)
    c = load_cluster("1x8xP40[gpumem=24G,speed=0.5]+1x8xV100")
    res = simulate(c, t.jobs, FIFO, speed_basis=t.basis)
    # One task on the P40 (native: 1.0), one on the V100 (1 / 0.46): the slower sets the pace.
    assert held(res) == {"philly-00001": 900.0}


def test_declaring_other_native_models(tiny: Path) -> None:
    t = resolve_trace(str(tiny), native=["P40"])
    assert (t.basis.native, t.basis.speed) == (("P40",), 0.5)
    res = simulate(t.cluster, t.jobs[:1], FIFO, speed_basis=t.basis)  # best-fit: the K80 box
    assert held(res) == {"philly-00001": pytest.approx(1000.0 * 0.5 / 0.3, rel=1e-12)}
    with pytest.raises(
        SpecError, match="unknown native GPU model 'V100': cluster philly has K80, P40"
    ):
        resolve_trace(str(tiny), native=["V100"])


@pytest.fixture()
def runner() -> CliRunner:
    return cli_runner()


def trace_time(stdout: str) -> str:
    """The one ``trace time:`` line of ``suanli simulate``'s output."""
    (line,) = [x for x in stdout.splitlines() if x.startswith("trace time:")]
    return line


def test_simulate_says_which_models_are_native_and_the_scaling(
    runner: CliRunner, tiny: Path
) -> None:
    own = runner.invoke(app, ["simulate", "--trace", str(tiny), "-p", "fifo+best-fit", "-q"])
    assert own.exit_code == 0, own.output
    assert trace_time(own.stdout) == (
        "trace time: native GPU models: K80, P40 (GPU-weighted speed 0.46); "
        "every GPU here is native: durations as recorded"
    )
    args = ["simulate", "--trace", str(tiny), "-c", "1x2xK80+2x8xV100", "-p", "fifo+best-fit"]
    foreign = runner.invoke(app, [*args, "-q"])
    assert foreign.exit_code == 0, foreign.output
    assert trace_time(foreign.stdout) == (
        "trace time: native GPU models: K80, P40 (GPU-weighted speed 0.46); "
        "on this cluster: K80 as recorded, V100 (speed 1) duration × 0.46"
    )
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert doc["run"]["workload"]["speed_basis"] == {
        "native": ["K80", "P40"],
        "native_speed": pytest.approx(S_NATIVE),
        "duration_factor": {"V100": pytest.approx(S_NATIVE)},
    }


# ------------------------------------------------------------------ the public traces


@pytest.fixture(scope="module")
def traces() -> Path:
    return trace_dir_or_skip()


def test_philly_on_its_own_machines_bills_the_gpu_hours_its_file_records(traces: Path) -> None:
    # The outside truth: sum of num_gpus x duration, read with the csv module alone.
    recorded_s = 0.0
    with (traces / "philly" / "philly_jobs.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            recorded_s += int(row["num_gpus"]) * float(row["duration"])
    recorded_h = recorded_s / 3600
    assert recorded_h == pytest.approx(978_078.47, abs=0.01)
    _, bill = philly_billed(traces)  # simulate --trace philly, then bill it
    (result,) = bill["results"]
    billed = float(Decimal(result["gpu_hours_check"]["bill_gpu_hours"]))
    assert billed == pytest.approx(recorded_h, rel=1e-4)  # ± 0.01 %


def test_openb_on_its_own_machines_uses_the_gpu_time_its_file_records(traces: Path) -> None:
    t = resolve_trace("openb:default", traces)
    assert set(t.basis.native) == {"G2", "G3", "T4", "P100", "V100M16", "V100M32", "A10"}
    recorded = 0.0  # GPU-seconds: GPUs x share x (deletion - creation), at least 1 s a pod
    with (traces / "openb" / "openb_pod_list_default.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            span = max(int(row["deletion_time"]) - int(row["creation_time"]), 1)
            recorded += int(row["num_gpu"]) * int(row["gpu_milli"]) / 1000 * span
    res = simulate(t.cluster, t.jobs, FIFO, speed_basis=t.basis)
    assert res.finished == len(t.jobs)
    assert gpu_hours(res) == pytest.approx(recorded / 3600, rel=1e-12)
    # At V100 = 1.0 the T4s, P100s and A10s stretched it (70,496 GPU-hours for 51,600).
    assert gpu_hours(simulate(t.cluster, t.jobs, FIFO, speed_basis=REFERENCE)) > 1.3 * (
        recorded / 3600
    )


def test_itp_on_its_derived_cluster_uses_the_gpu_time_its_file_records(traces: Path) -> None:
    t = resolve_trace("itp:cluster10", traces)
    assert (t.basis.native, t.basis.speed) == (("V100",), 1.0)
    with (traces / "itp" / "cluster10.csv").open(newline="") as f:
        recorded = sum(int(r["num_gpu"]) * float(r["duration"]) for r in csv.DictReader(f))
    res = simulate(t.cluster, t.jobs, FIFO, speed_basis=t.basis)
    assert gpu_hours(res) == pytest.approx(recorded / 3600, rel=1e-12)


def test_azure_llm_runtimes_are_stated_for_a_v100(traces: Path) -> None:
    t = resolve_trace("azure-llm:code", traces)
    assert (t.basis.native, t.basis.speed) == (("V100",), 1.0)
    assert t.basis.node_speeds(t.cluster) == [5.0]  # the H100 server: runtime / 5, as before
