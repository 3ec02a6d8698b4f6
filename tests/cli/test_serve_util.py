"""GPU utilisation sampling through the real server (``suanli serve`` as ``build_server``
builds it, real processes), on SQLite and PostgreSQL.

This machine has no GPU and no NVML: the server is given a stand-in for the hardware
(``gpu_standin.StandIn``, through ``build_server(util_reader=...)``, which no command-line
option or API request can reach) that reports a fixed utilisation and memory per GPU. So
what a job's view, ``suanli show``, ``suanli usage`` and ``/metrics`` say can be checked
against figures computed from the stand-in's readings and the attempt's own times.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_standin import StandIn, constant
from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, run_cli, start, submit, tenant_token, wait_for, wait_state
from suanli.backends.gpu_util import nvml_present
from suanli.cli.main import app as cli

READINGS = {0: (30.0, 2000), 1: (70.0, 6000)}
"""What the stand-in says each GPU is doing: (utilisation %, memory MiB)."""
SLEEP = [PY, "-c", "import time; time.sleep(3)"]

db_location = location_fixture()


def ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def test_samples_reach_the_job_view_show_usage_and_metrics_of_their_own_tenant_only(
    tmp_path: Path, db_location: str
) -> None:
    srv = start(
        tmp_path / "state", db_location, util_reader=StandIn(constant(READINGS)), util_interval=0.1
    )
    try:
        vision, nlp = tenant_token(srv, "vision"), tenant_token(srv, "nlp")
        with srv.client(vision) as c, srv.client(nlp) as other:
            job = submit(c, command=SLEEP, gpus=1)
            assert wait_state(c, job, "succeeded", "failed")["state"] == "succeeded"
            detail = c.get(f"/v1/jobs/{job}").json()
            assert detail["gpu_sampling"] == "stand-in"
            (a,) = detail["attempts"]
            (gpu,) = a["placement"][0]["gpus"]
            pct, mib = READINGS[gpu]
            u = a["gpu_utilization"]
            assert u["mean_pct"] == pytest.approx(pct) and u["peak_memory_mib"] == mib
            assert u["samples"] >= 5  # 3 s at 0.1 s: margin for a sampler starved on a loaded host
            assert u["sampled_s"] == pytest.approx(u["samples"] * 0.1, abs=0.5)

            # suanli show, with the tenant's own token.
            shown = run_cli(srv, vision, "show", job)
            assert (
                f"attempt 1: mean {pct:.1f}%, peak memory {mib:,} MiB, {u['samples']} samples"
                in shown
            )

            # The bill: allocated GPU time from the attempt's own times, used = x 30 or 70 %.
            allocated = 1000 * (ms(a["ended_at"]) - ms(a["started_at"]))
            gpu_rows = wait_for(
                "the attempt's usage", lambda: c.get("/v1/usage").json()["gpu"]["rows"]
            )
            (row,) = gpu_rows
            assert row["group"] == {"queue": "vision"}
            assert row["allocated_milli_ms"] == allocated
            assert abs(row["used_milli_ms"] - allocated * Fraction(round(pct * 100), 10_000)) <= 1
            assert row["idle_milli_ms"] == allocated - row["used_milli_ms"]
            assert row["unmeasured_milli_ms"] == 0
            assert c.get("/v1/usage").json()["gpu"]["unmeasured_attempts"] == 0
            bill = run_cli(srv, vision, "usage").splitlines()
            header = next(i for i, line in enumerate(bill) if "ALLOCATED GPU-h" in line)
            assert bill[header].split() == ["QUEUE", "ALLOCATED", "GPU-h", "USED", "GPU-h",
                                            "IDLE", "GPU-h", "UNMEASURED", "GPU-h"]  # fmt: skip
            assert bill[header + 1].split() == [
                "vision", row["allocated_gpu_hours"], row["used_gpu_hours"],
                row["idle_gpu_hours"], "0.000000000",
            ]  # fmt: skip

            # Another tenant reads none of it: not the job (404), not its usage.
            assert other.get(f"/v1/jobs/{job}").status_code == 404
            theirs = other.get("/v1/usage").json()["gpu"]
            assert theirs["rows"] == [] and theirs["unmeasured"] == []

            # A running job's latest sample is a gauge; only its own tenant sees its series.
            long = submit(c, command=[PY, "-c", "import time; time.sleep(60)"], gpus=1, grace=1)
            wait_state(c, long, "running")
            series = (
                f'suanli_job_gpu_utilization_ratio{{job="{long}",queue="vision",tenant="vision"}}'
            )
            with srv.client() as admin:
                body = wait_for("the job's gauge", lambda: series in admin.get("/metrics").text
                                and admin.get("/metrics").text)  # fmt: skip
            assert series in c.get("/metrics").text
            assert f'job="{long}"' not in other.get("/metrics").text
            promtool = shutil.which("promtool")
            if promtool is not None:
                check = subprocess.run([promtool, "check", "metrics"], input=body,
                                       capture_output=True, text=True, timeout=60)  # fmt: skip
                assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
            c.post(f"/v1/jobs/{long}/cancel")
            wait_state(c, long, "cancelled")
            with srv.client() as admin:
                wait_for(
                    "the gauge to go", lambda: f'job="{long}"' not in admin.get("/metrics").text
                )
    finally:
        srv.stop()


def test_without_nvml_show_and_usage_say_there_are_no_samples(tmp_path: Path) -> None:
    srv = start(tmp_path / "state", str(tmp_path / "s.db"))  # declared GPUs, no reader
    try:
        assert srv.server.sampler is None
        token = tenant_token(srv, "vision")
        with srv.client(token) as c:
            job = submit(c, command=[PY, "-c", "pass"], gpus=1)
            cpu = submit(c, command=[PY, "-c", "pass"], gpus=0)
            wait_state(c, job, "succeeded")
            wait_state(c, cpu, "succeeded")
            detail = c.get(f"/v1/jobs/{job}").json()
            assert detail["attempts"][0]["gpu_utilization"] is None
            why = detail["gpu_sampling"].removeprefix("off: ")
            if not nvml_present():
                assert why == "NVML not present"
            assert f"attempt 1: no utilisation samples ({why})" in run_cli(srv, token, "show", job)
            assert "attempt 1: no GPUs" in run_cli(srv, token, "show", cpu)
            gpu = wait_for("the usage", lambda: c.get("/v1/usage").json()["gpu"]["rows"] and
                           c.get("/v1/usage").json()["gpu"])  # fmt: skip
            assert [(u["job_id"], u["attempt"]) for u in gpu["unmeasured"]] == [(job, 1)]
            (row,) = gpu["rows"]
            assert row["used_milli_ms"] == row["idle_milli_ms"] == 0
            assert row["unmeasured_milli_ms"] == row["allocated_milli_ms"] > 0
            bill = run_cli(srv, token, "usage")
            assert "unmeasured (1 attempt without utilisation samples" in bill
            assert f"job {job} attempt 1 (" in bill
            header = next(line for line in bill.splitlines() if "ALLOCATED GPU-h" in line)
            assert bill.splitlines()[bill.splitlines().index(header) + 1].split()[2:4] == ["-", "-"]
    finally:
        srv.stop()


def test_a_reader_that_raises_or_hangs_never_stops_the_scheduler(tmp_path: Path) -> None:
    reader = StandIn(constant(READINGS), fail=RuntimeError("NVML: Unknown Error"))
    srv = start(tmp_path / "state", str(tmp_path / "s.db"), util_reader=reader, util_interval=0.05)
    try:
        with srv.client() as c:
            job = submit(c, command=[PY, "-c", "pass"], gpus=1, tenant="lab")
            assert wait_state(c, job, "succeeded", "failed")["state"] == "succeeded"
            assert c.get(f"/v1/jobs/{job}").json()["attempts"][0]["gpu_utilization"] is None
            errors = wait_for("errors", lambda: [
                line for line in c.get("/metrics").text.splitlines()
                if line.startswith('suanli_gpu_sampling_errors_total{stage="read"}')
            ])  # fmt: skip
            assert float(errors[0].split()[-1]) >= 1
            assert c.get("/healthz").status_code == 200
            # Now the driver hangs: the sampler waits, the scheduler does not.
            reader.fail = None
            reader.hold = threading.Event()
            hung = submit(c, command=[PY, "-c", "pass"], gpus=2, tenant="lab")
            assert wait_state(c, hung, "succeeded", "failed")["state"] == "succeeded"
            assert c.get("/healthz").status_code == 200
            reader.hold.set()
    finally:
        if reader.hold is not None:
            reader.hold.set()
        srv.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--util-interval", "-1"], "--util-interval: must be 0 (off) or at least 0.1 seconds"),
        (["--util-interval", "nan"], "--util-interval: must be 0 (off) or at least 0.1 seconds"),
        (["--util-interval", "0.01"], "--util-interval: must be 0 (off) or at least 0.1 seconds"),
        (["--util-retention", "soon"], "--util-retention: must be a duration such as 24h"),
        (["--util-retention", "0"], "--util-retention: must be a duration > 0"),
        (["--util-max-samples", "-5"], "--util-max-samples: must be >= 0"),
    ],
)
def test_bad_sampling_options_are_one_line_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(cli, ["serve", "--state-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"suanli: error: {message}"), result.stderr
    assert not (tmp_path / "suanli.db").exists()  # refused before anything was opened


def test_the_stand_in_is_no_api_input(tmp_path: Path) -> None:
    """Nothing a client sends selects a reader: a submission naming one is refused as an
    unknown field, and the server's own stays what it was built with."""
    srv = start(tmp_path / "state", str(tmp_path / "s.db"))
    try:
        with srv.client() as c:
            r = c.post("/v1/jobs", json={"command": ["true"], "tenant": "lab",
                                         "util_reader": "gpu_standin:StandIn"})  # fmt: skip
            assert r.status_code == 422, r.text
        assert srv.server.sampler is None
    finally:
        srv.stop()


def test_util_interval_0_switches_sampling_off_even_with_a_reader(tmp_path: Path) -> None:
    srv = start(
        tmp_path / "state", str(tmp_path / "s.db"), util_reader=StandIn(constant(READINGS)),
        util_interval=0,
    )  # fmt: skip
    try:
        assert srv.server.sampler is None
        with srv.client() as c:
            job = submit(c, command=[PY, "-c", "pass"], gpus=1, tenant="lab")
            wait_state(c, job, "succeeded")
            detail = c.get(f"/v1/jobs/{job}").json()
            assert detail["gpu_sampling"] == "off: --util-interval 0"
            assert detail["attempts"][0]["gpu_utilization"] is None
    finally:
        srv.stop()
