"""``suanli bill slurm --db URL``: the live ledger's usage against Slurm's own accounting
(``sacct``), attempt by attempt (``suanli.metering.slurm_accounting``). Registered on
``suanli bill`` by ``suanli.cli.bill``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import sqlalchemy as sa
import typer
from rich.table import Table

from suanli.backends.base import job_dir_name
from suanli.cli.bill import _console
from suanli.cli.dbtarget import first_line, masked
from suanli.cli.errors import fail, user_errors
from suanli.metering.slurm_accounting import (
    DEFAULT_TOLERANCE_S,
    Reconciliation,
    parse_sacct,
    reconcile,
    sacct_command,
)
from suanli.store import StoreError, open_store
from suanli.store.ledger import read_usage


def slurm_command(
    db: Annotated[
        str,
        typer.Option("--db", metavar="PATH|URL", help="The control plane's store (its ledger)."),
    ],
    partition: Annotated[
        str, typer.Option("--partition", metavar="NAME", help="The partition suanli owns.")
    ] = "suanli",
    shared_dir: Annotated[
        Path | None,
        typer.Option(
            "--shared-dir",
            metavar="DIR",
            help="The control plane's shared path: only its jobs (default: every suanli "
            "job in the partition).",
        ),
    ] = None,
    since: Annotated[
        str,
        typer.Option("--since", metavar="DATE", help="From this day (sacct --starttime)."),
    ] = "now-7days",
    cluster: Annotated[
        str, typer.Option("--cluster", help="The ledger's cluster name of Slurm usage.")
    ] = "slurm",
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            metavar="SECONDS",
            help="An attempt's span may differ by this much (its GPU time by this times its "
            "GPUs) before it is flagged.",
        ),
    ] = DEFAULT_TOLERANCE_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")] = False,
) -> None:
    """Compare the ledger's usage with Slurm's accounting (sacct), attempt by attempt.

    Exit status 0 when every attempt agrees within the tolerance, 1 when one does not (or
    only one side has it)."""
    prefix = "suanli/"
    if shared_dir is not None:
        try:
            prefix = f"suanli/{(shared_dir / 'runs' / '@scratch-id').read_text().strip()}/"
        except OSError as e:
            fail(f"--shared-dir {shared_dir}: no control plane's runs there ({e.strerror})")
    command = sacct_command(partition, since)
    sacct = shutil.which("sacct")
    if sacct is None:
        fail("sacct is not installed (Debian package slurm-client)")
    done = subprocess.run(
        [sacct, *command[1:]], capture_output=True, text=True, check=False,
        env={**os.environ, "TZ": "UTC"}, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        fail(f"sacct: {' '.join(done.stderr.split())}")
    with user_errors():
        tasks = parse_sacct(done.stdout, prefix)
    try:
        store = open_store(db)
    except (StoreError, sa.exc.SQLAlchemyError, OSError) as e:
        fail(f"--db {masked(db)}: cannot open the ledger: {first_line(e)}")
    try:
        usage = [r for r in read_usage(store) if r.cluster == cluster]
    finally:
        store.close()
    shared = {(r.job_id, r.attempt) for r in usage if r.gpu_milli % 1000}
    ran = {(t.job, t.attempt) for t in tasks}
    if shared_dir is not None:  # this control plane's attempts: those its runs hold
        runs = shared_dir / "runs"
        usage = [r for r in usage if (runs / job_dir_name(r.job_id) / str(r.attempt)).is_dir()
                 or (job_dir_name(r.job_id), r.attempt) in ran]  # fmt: skip
    result = reconcile(usage, tasks, tolerance_s=tolerance, fractional=shared)
    if as_json:
        sys.stdout.write(json.dumps(document(result), indent=2) + "\n")
    else:
        show(result)
    if not result.clean:
        raise typer.Exit(1)


def document(r: Reconciliation) -> dict[str, Any]:
    return {
        "tolerance_s": r.tolerance_s,
        "clean": r.clean,
        "totals": r.totals(),
        "attempts": [
            {
                "job_id": c.job_id,
                "attempt": c.attempt,
                "tasks": c.tasks,
                "ledger_gpu_s": c.ledger_gpu_s,
                "slurm_gpu_s": c.slurm_gpu_s,
                "ledger_span_s": c.ledger_span_s,
                "slurm_span_s": c.slurm_span_s,
                "flagged": c in r.differs,
                "note": c.note,
            }
            for c in r.checked
        ],  # fmt: skip
        "only_ledger": [list(k) for k in r.only_ledger],
        "only_slurm": [list(k) for k in r.only_slurm],
    }


def show(r: Reconciliation) -> None:
    console = _console()
    t = r.totals()
    console.print(
        f"{len(r.checked)} attempts in both: ledger {t['ledger_gpu_hours']:.4f} GPU-h, Slurm "
        f"{t['slurm_gpu_hours']:.4f} GPU-h; largest span difference "
        f"{t['max_span_difference_s']:.1f} s (tolerance {r.tolerance_s:g} s)"
    )
    if r.differs:
        table = Table("job", "attempt", "tasks", "ledger GPU-s", "Slurm GPU-s", "ledger span s",
                      "Slurm span s", title="Past the tolerance")  # fmt: skip
        for c in r.differs:
            table.add_row(c.job_id, str(c.attempt), str(c.tasks), f"{c.ledger_gpu_s:.1f}",
                          f"{c.slurm_gpu_s:.1f}", f"{c.ledger_span_s:.1f}",
                          f"{c.slurm_span_s:.1f}")  # fmt: skip
        console.print(table)
    for what, keys in (("only in the ledger", r.only_ledger), ("only in Slurm", r.only_slurm)):
        if keys:
            shown = ", ".join(f"{j} attempt {a}" for j, a in keys[:20])
            console.print(f"{len(keys)} attempts {what}: {shown}")
    console.print("agrees" if r.clean else "differs")
