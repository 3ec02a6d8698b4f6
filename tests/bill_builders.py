"""Builders for the billing tests: a flat price book, simulation outputs written by hand, and
the CLI runner helper (``suanli bill``, ``suanli bill roi``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from suanli.cli.main import app
from suanli.metering.simout import ATTEMPT_COLUMNS

HOUR = 3600

# A flat book: no bands, GPU 2.00 per GPU-hour, idle GPU 1.00, CPU 0.10 per core-hour,
# memory 0.01 per GiB-hour; storage and network free.
FLAT_BOOK = """\
currency: USD
free: [storage, network]
versions:
  - name: v1
    effective: 2026-01-01T00:00:00Z
    rates:
      - {resource: gpu, price: "2.00"}
      - {resource: gpu-idle, price: "1.00"}
      - {resource: cpu, price: "0.10"}
      - {resource: memory, price: "0.01"}
"""
NO_IDLE_BOOK = FLAT_BOOK.replace('      - {resource: gpu-idle, price: "1.00"}\n', "")


# --------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------


def attempt_row(
    job: str,
    start: float | str,
    end: float | str,
    *,
    tenant: str = "ads/ctr/dave",
    gpu: str = "H100=1000",
    cpu_milli: int = 0,
    memory_mib: int = 0,
    gpu_util: float | str = 1.0,
    priority_class: str = "normal",
    attempt: int = 0,
    outcome: str = "finished",
    **cells: Any,
) -> dict[str, Any]:
    """One row of an attempts CSV (``ATTEMPT_COLUMNS``)."""
    milli = sum(int(p.split("=")[1]) for p in gpu.split(";") if p)
    row = {
        "job": job,
        "attempt": attempt,
        "tenant": tenant,
        "queue": "/".join(tenant.split("/")[:2]),
        "priority_class": priority_class,
        "start": start,
        "end": end,
        "outcome": outcome,
        "gpu": gpu,
        "gpu_milli": milli,
        "cpu_milli": cpu_milli,
        "memory_mib": memory_mib,
        "gpu_util": gpu_util,
        "storage_gb": 0.0,
        "network_gb": 0.0,
    }
    row.update(cells)
    return row


def allocated_gpu_hours(rows: Sequence[Mapping[str, Any]]) -> str:
    """What the simulator writes to summary.json for these rows (``sim.export``); rows with
    a cell that is not a number (tests of bad cells) count nothing."""
    total = 0
    for r in rows:
        try:
            ms = int(Decimal(str(r["end"])) * 1000) - int(Decimal(str(r["start"])) * 1000)
            total += int(r["gpu_milli"]) * ms
        except (ArithmeticError, ValueError):
            continue
    return str(Decimal(total) / Decimal(3_600_000_000))


def write_output(
    d: Path,
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    cluster: str = "2x4xH100",
    total_gpus: int = 8,
    gpu_models: Sequence[str] = ("H100",),
) -> Path:
    """A simulation output directory: one attempts CSV per policy label, and summary.json."""
    d.mkdir(parents=True, exist_ok=True)
    entries = []
    for label, rows in results.items():
        stem = label.replace("+", "_").replace("/", "-")
        name = f"{stem}-attempts.csv"
        with (d / name).open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=ATTEMPT_COLUMNS)
            w.writeheader()
            w.writerows(rows)
        entries.append(
            {
                "policy": label,
                "cluster": cluster,
                "total_gpus": total_gpus,
                "makespan_s": max((float(r["end"]) for r in rows), default=0.0),
                "files": {"attempts_csv": name},
                "allocated_gpu_hours": allocated_gpu_hours(rows),
            }
        )
    doc = {
        "run": {"cluster": cluster, "gpus": total_gpus, "gpu_models": list(gpu_models)},
        "results": entries,
    }
    (d / "summary.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return d


def write_book(d: Path, text: str = FLAT_BOOK, name: str = "prices.yaml") -> Path:
    path = d / name
    path.write_text(text, encoding="utf-8")
    return path



def run(runner: CliRunner, *args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args])
