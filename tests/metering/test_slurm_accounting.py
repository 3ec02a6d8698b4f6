"""The ledger-against-sacct comparison on hand-made rows (the real one runs in
tests/cli/test_serve_slurm.py against a real Slurm's accounting)."""

from __future__ import annotations

import pytest

from suanli.core.model import SpecError
from suanli.metering.slurm_accounting import parse_sacct, reconcile
from suanli.metering.usage import UsageRecord

SACCT = (
    "7|suanli/abc/j1/1/0|COMPLETED|2026-12-02T06:00:00|2026-12-02T06:01:40|100|"
    "billing=1,cpu=1,gres/gpu=4,mem=100M,node=1|n1|nobody\n"
    "8|suanli/abc/j1/1/1|COMPLETED|2026-12-02T06:00:01|2026-12-02T06:01:40|99|"
    "cpu=1,gres/gpu=4,mem=100M,node=1|n2|nobody\n"
    "9|someone-else|COMPLETED|2026-12-02T06:00:00|2026-12-02T06:00:10|10|cpu=1|n1|bob\n"
    "10|suanli/abc/j2/1/0|CANCELLED by 0|None|2026-12-02T06:00:05|0|cpu=1|None assigned|nobody\n"
    "11|suanli/abc/j3/2/0|COMPLETED|2026-12-02T06:00:00|2026-12-02T06:00:30|30|"
    "cpu=1,gres/gpu=1|n1|nobody\n"
)


def usage(job: str, attempt: int, start_s: float, end_s: float, milli: int) -> UsageRecord:
    return UsageRecord(
        key=f"{job}/{attempt}/{start_s}", job_id=job, attempt=attempt,
        start_ms=round(start_s * 1000), end_ms=round(end_s * 1000), org="lab/alice",
        queue="default", priority_class="normal", cluster="slurm",
        gpu=(("H100", milli),), cpu_milli=1000, memory_mib=100, storage_mb=0, network_mb=0,
    )  # fmt: skip


def test_sacct_rows_are_read_and_others_jobs_skipped() -> None:
    tasks = parse_sacct(SACCT)
    assert [(t.job, t.attempt, t.task, t.gpus) for t in tasks] == [
        ("j1", 1, 0, 4), ("j1", 1, 1, 4), ("j2", 1, 0, 0), ("j3", 2, 0, 1),
    ]  # fmt: skip
    assert tasks[2].state == "CANCELLED" and tasks[2].start_s is None
    assert parse_sacct(SACCT, prefix="suanli/other/") == []
    with pytest.raises(SpecError, match="sacct line 1: expected 9 fields"):
        parse_sacct("1|suanli/a/j/1/0|COMPLETED\n")
    with pytest.raises(SpecError, match="sacct line 1: cannot read"):
        parse_sacct("1|suanli/a/j/x/0|COMPLETED|None|None|0|cpu=1|n1|u\n")


def test_agreeing_attempts_are_clean_and_a_difference_is_flagged() -> None:
    t0 = parse_sacct(SACCT)[0].start_s
    assert t0 is not None
    ledger = [
        usage("j1", 1, t0, t0 + 60, 8000),  # two records: cut at a metering interval
        usage("j1", 1, t0 + 60, t0 + 101, 8000),
        usage("j3", 2, t0, t0 + 45, 1000),  # 15 s longer than Slurm ran it
    ]
    r = reconcile(ledger, parse_sacct(SACCT), tolerance_s=5)
    checks = {c.job_id: c for c in r.checked}
    assert checks["j1"].ledger_gpu_s == pytest.approx(808.0)
    assert checks["j1"].slurm_gpu_s == 4 * 100 + 4 * 99
    assert checks["j1"].slurm_span_s == pytest.approx(100.0)
    assert [c.job_id for c in r.differs] == ["j3"]
    assert r.only_slurm == [] and r.only_ledger == [] and not r.clean
    # The job Slurm never started is no usage; an attempt only the ledger has is reported.
    r = reconcile([*ledger[:2], usage("j4", 1, t0, t0 + 5, 1000)], parse_sacct(SACCT))
    assert r.only_ledger == [("j4", 1)] and r.only_slurm == [("j3", 2)]


def test_shared_gpus_are_compared_on_time_only() -> None:
    t0 = parse_sacct(SACCT)[3].start_s
    assert t0 is not None
    r = reconcile([usage("j3", 2, t0, t0 + 30, 500)], parse_sacct(SACCT),
                  fractional=[("j3", 2)])  # fmt: skip
    assert r.differs == [] and r.checked[0].note.startswith("GPU shares")
