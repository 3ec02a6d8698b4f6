"""``suanli bench hardware``: the hardware models, each beside the same run with the model
off, in one run (``suanli.bench.hardware``, ``docs/failures.md``)."""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suanli.bench.defrag import defrag_bench
from suanli.bench.dlrm import dlrm_bench
from suanli.bench.hardware import BenchResult, failure_bench, live_bench
from suanli.bench.pooling import pooling_bench
from suanli.bench.topology import topology_bench
from suanli.cli.errors import fail, user_errors
from suanli.cli.options import TraceDirOption

BENCHES = ("topology", "pooling", "dlrm", "failures", "defrag", "live")
BUDGET_S = 60.0
"""Each bench's time budget on a 2-core machine (flagged when over)."""


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return str(v)


def table(r: BenchResult) -> Table:
    t = Table(title=escape(r.title))
    cols = list(r.rows[0])
    for c in cols:
        t.add_column(
            c,
            justify="left"
            if c in ("run", "model", "policy", "pooling", "workload", "mode", "variant")
            else "right",
        )
    for row in r.rows:
        t.add_row(*(_cell(row[c]) for c in cols))
    return t


def hardware_command(
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help=f"Run only these benches ({', '.join(BENCHES)}); repeat or separate by commas.",
        ),  # fmt: skip
    ] = None,
    trace: Annotated[
        str,
        typer.Option("--trace", help="The failure and defrag benches' trace (a name or a path)."),
    ] = "philly",
    time_scale: Annotated[
        float,
        typer.Option("--time-scale", help="The failure and defrag benches' arrival time scale."),
    ] = 0.19,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds",
            help="The simulated benches' seeds (0-4, or 0,3; default: topology, pooling and "
            "defrag's generated gangs 0-2, failures 0).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", help="Cut the failure and defrag benches' trace to its first N."),
    ] = None,
    trace_dir: TraceDirOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """The hardware models (topology, memory pooling, disaggregated GPUs on the DLRM trace,
    failures and defragmentation in the simulator; live GPU health and node holds), each
    beside the same run with the model off, with each bench's wall time."""
    from suanli.cli.bench import _split, parse_seeds

    with user_errors():
        chosen = _split(only or list(BENCHES))
        unknown = [b for b in chosen if b not in BENCHES]
        if unknown:
            fail(f"--only: unknown bench {unknown[0]!r} (known: {', '.join(BENCHES)})")
        if not (math.isfinite(time_scale) and time_scale > 0):
            fail(f"--time-scale: must be > 0, got {time_scale}")
        if jobs is not None and jobs < 1:
            fail(f"--jobs: must be >= 1 (got {jobs})")
        seed_list = parse_seeds(seeds) if seeds is not None else None
        results: list[BenchResult] = []
        skipped: dict[str, str] = {}
        t0 = time.perf_counter()
        if "topology" in chosen:
            results.append(topology_bench(seeds=tuple(seed_list or (0, 1, 2))))
        if "pooling" in chosen:
            results.append(pooling_bench(seeds=tuple(seed_list or (0, 1, 2))))
        if "dlrm" in chosen:
            try:
                results.append(dlrm_bench(trace_dir))
            except FileNotFoundError as e:
                skipped["dlrm"] = f"the DLRM trace not found ({e})"
        if "failures" in chosen:
            try:
                results.append(failure_bench(trace, time_scale, seed_list or (0,),
                                             trace_dir=trace_dir, first=jobs))  # fmt: skip
            except FileNotFoundError as e:
                skipped["failures"] = f"trace {trace!r} not found ({e})"
        if "defrag" in chosen:
            results.append(defrag_bench(trace, time_scale, tuple(seed_list or (0, 1, 2)),
                                        trace_dir=trace_dir, first=jobs))  # fmt: skip
        if "live" in chosen:
            results.append(live_bench())
        wall = time.perf_counter() - t0
    if json_out:
        out = {
            "benches": [asdict(r) | {"over_budget": r.wall_s > BUDGET_S} for r in results],
            "skipped": skipped,
            "wall_s": wall,
            "budget_s": BUDGET_S,
        }
        sys.stdout.write(json.dumps(clean_nans(out), indent=2, allow_nan=False) + "\n")
        return
    console = Console(width=max(Console().width, 200))
    for r in results:
        console.print(table(r))
        for note in r.notes:
            console.print(f"  {escape(note)}")
        over = f": OVER the {BUDGET_S:.0f} s budget" if r.wall_s > BUDGET_S else ""
        console.print(f"  {r.name}: {r.wall_s:.1f} s wall{over}")
    for name, why in skipped.items():
        console.print(f"{name}: skipped: {why}")
    console.print(f"{len(results)} benches in {wall:.1f} s")


def clean_nans(v: Any) -> Any:
    """``v`` with every NaN (a figure that does not apply) as null."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: clean_nans(x) for k, x in v.items()}
    if isinstance(v, list):
        return [clean_nans(x) for x in v]
    return v
