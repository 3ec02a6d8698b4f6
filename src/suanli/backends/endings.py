"""How a task ended, read from what its supervisor (the shim) wrote in its run directory:
``exit.json`` and ``stop.json``. Every backend that runs tasks under the shim (local, Ray,
Slurm) reports ends with these.

Standard-library only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from suanli.backends.base import STOP_OUTCOMES, Exit, Handle, Outcome, signal_name
from suanli.backends.shim import SPEC_FILE, STOP_FILE, read_json


def _seconds(value: float) -> str:
    return f"{value:g}"


def exit_from_record(handle: Handle, record: dict[str, Any]) -> Exit:
    """The Exit a task's ``exit.json`` (``record``) and ``stop.json`` tell, read from its run
    directory: what a backend reports for a task whose supervisor wrote its end."""
    run_dir = Path(handle.run_dir)
    exit_code = record.get("exit_code")
    sig = record.get("signal")
    finished_at = float(record.get("finished_at") or time.time())
    error = record.get("error")
    if error:
        how = str(error)
    elif exit_code is not None:
        how = f"exit code {exit_code}"
    elif sig is not None:
        how = f"killed by {signal_name(int(sig))}"
    else:
        how = "ended"
    stop = read_json(run_dir / STOP_FILE)
    timed_out_at = record.get("timed_out_at")
    stop_outcome = _stop_outcome(stop)
    if stop is not None and stop_outcome is not None:
        requested_at = float(stop.get("requested_at", 0.0))
        if requested_at > finished_at:
            stop_outcome = None  # the stop came after the task had ended by itself
        elif timed_out_at is not None and float(timed_out_at) <= requested_at:
            stop_outcome = None  # the runtime limit fired first
    if stop_outcome is not None:
        outcome = stop_outcome
        grace = " after the grace period" if record.get("killed") else ""
        sent = stop.get("signal_name", "the stop signal") if stop is not None else ""
        detail = f"{outcome.value} with {sent}: {how}{grace}"
    elif record.get("tether_lost"):
        outcome = Outcome.LOST
        detail = f"ended with the process that owned it (its node or its actor died): {how}"
    elif record.get("timed_out"):
        outcome = Outcome.TIMED_OUT
        spec = read_json(run_dir / SPEC_FILE) or {}
        limit = spec.get("max_runtime_s")
        limit_text = f" {_seconds(float(limit))} s" if limit is not None else ""
        killed = " (SIGKILL after the grace period)" if record.get("killed") else ""
        detail = f"stopped after max runtime{limit_text}: {how}{killed}"
    elif exit_code == 0 and not error:
        outcome = Outcome.SUCCEEDED
        detail = how
    else:
        outcome = Outcome.FAILED
        detail = how
    dropped = _dropped_output(record)
    if dropped:
        detail = f"{detail}; {dropped}"
    return Exit(
        handle=handle,
        outcome=outcome,
        exit_code=int(exit_code) if exit_code is not None else None,
        signal=int(sig) if sig is not None else None,
        finished_at=finished_at,
        detail=detail,
    )


def gone_without_record(handle: Handle, sig: int | None, status: int | None) -> Exit:
    """The shim ended without an exit file: a requested stop, or else LOST."""
    stop = read_json(Path(handle.run_dir) / STOP_FILE)
    outcome = _stop_outcome(stop)
    if status is None:
        how = "supervisor gone without an exit file"
    elif sig is not None:
        how = f"supervisor killed by {signal_name(sig)} without an exit file"
    else:
        how = f"supervisor exited with status {status} without an exit file"
    if outcome is not None:
        return Exit(handle, outcome, None, sig, time.time(), f"{outcome.value}: {how}")
    return Exit(handle, Outcome.LOST, None, None, time.time(), how)


def _dropped_output(record: dict[str, Any]) -> str:
    """A note on output the shim could not keep (low disk, failed writes, open pipes)."""
    logs = record.get("logs")
    notes = []
    if isinstance(logs, dict):
        for name in ("stdout", "stderr"):
            stats = logs.get(name)
            if isinstance(stats, dict) and stats.get("dropped"):
                notes.append(f"{stats['dropped']} bytes of {name}")
    text = f"output dropped: {', '.join(notes)} (low disk space or failed writes)" if notes else ""
    if record.get("logs_drain_timed_out"):
        tail = "output after the task's end not read (a process that left it holds its pipes)"
        text = f"{text}; {tail}" if text else tail
    return text


def _stop_outcome(stop: dict[str, Any] | None) -> Outcome | None:
    if stop is None:
        return None
    try:
        outcome = Outcome(str(stop.get("outcome")))
    except ValueError:
        return None
    return outcome if outcome in STOP_OUTCOMES else None
