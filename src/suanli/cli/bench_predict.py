"""``suanli bench predict``: runtime-predictive queue orders (``suanli.bench.predict``) on
Philly and the ITP clusters, each trace at the load where FIFO's mean wait is its mean
runtime, with the issue's targets on Philly's traces (``docs/predict.md``)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from suanli.bench.predict import (
    DEFAULT_TRACES,
    FIFO,
    POLICIES,
    TRACE_BUDGET_S,
    Row,
    TraceResult,
    Verdict,
    load,
    parse_policies,
    pooled,
    run_trace,
)
from suanli.cli.errors import fail, user_errors
from suanli.cli.options import TraceDirOption, WorkersOption
from suanli.cli.table import hours
from suanli.core.model import SpecError
from suanli.core.registry import UnknownPolicyError
from suanli.sim.spread import where


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1%}"[:-1]


def table(title: str, rows: list[Row]) -> Table:
    t = Table(title=title)
    cols = ("policy", "JCT h", "JCT P99 h", "queue h", "queue P99 h", "wait h", "alloc %",
            "preempt", "P50 MAE h", "P50 rel err", "P90 cover %", "start err",
            "start P90 cover %", "train s", "s/replay")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c == "policy" else "right")
    for r in rows:
        t.add_row(
            r.policy, hours(r.jct_mean), hours(r.jct_p99), hours(r.queue_mean), hours(r.queue_p99),
            hours(r.wait_mean), _pct(r.allocation), str(r.preemptions), hours(r.mae_s),
            "-" if math.isnan(r.median_rel_error) else f"{r.median_rel_error:.2f}",
            _pct(r.coverage_p90),
            "-" if math.isnan(r.start_error) else f"{r.start_error:.2f}",
            _pct(r.start_cover_p90), f"{r.train_s:.1f}" if r.fits else "-", f"{r.wall_s:.1f}",
        )  # fmt: skip
    return t


def verdict_lines(spec: str, v: Verdict) -> list[str]:
    setting = "no backfill" if v.backfill == "none" else f"{v.backfill} backfill"
    out = [f"targets on {spec}: best non-preemptive predictive row {v.best} ({setting}): "
           f"{'PASS' if v.met else 'FAIL'}"]  # fmt: skip
    for t in v.targets:
        out.append(
            f"  {t.what} ({t.reference}): {t.ratio:.3f} (target <= {t.limit:g}): "
            f"{'PASS' if t.met else 'FAIL'}"
        )
    for m in v.missing:
        out.append(f"  not judged: the sweep has no {m} row")
    return out


def wall_line(r: TraceResult) -> str:
    replays = sum(x.wall_s for x in r.rows)
    line = (
        f"{r.spec}: {r.wall_s:.1f} s wall (search {r.search_s:.1f} s; {len(r.rows)} replays, "
        f"{replays:.1f} s of replay on {where(r.workers, None)})"
    )
    if r.over_budget:
        line += f": OVER the {TRACE_BUDGET_S:.0f} s budget"
    return line


def predict_command(
    traces: Annotated[
        list[str] | None,
        typer.Option(
            "--trace",
            help="A trace name (philly, philly-users, itp:cluster01, ...) or the path of a "
            "CSV any `suanli simulate --trace` reads; repeat or separate by commas. Default: "
            "philly, philly-users and the ten ITP clusters.",
        ),
    ] = None,
    policies: Annotated[
        list[str] | None,
        typer.Option(
            "--policies",
            help="Policy sets (QUEUE[@RUNTIME][/MODE]+PLACEMENT), repeat or separate by "
            "commas; default: the sweep's twelve (docs/predict.md).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", help="Cut each trace to its first N jobs (tests, quick looks)."),
    ] = None,
    workers: WorkersOption = 0,
    trace_dir: TraceDirOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--json-file",
            metavar="FILE",
            help="Also write the results as JSON (what --json prints) to FILE.",
        ),
    ] = None,
) -> None:
    """Predictive queue orders (QSSF on history and learned runtimes) against FIFO, LAS and
    the oracles, each at the load where FIFO's mean wait is about the mean runtime."""
    from suanli.cli.bench import _split

    with user_errors():
        if workers < 0:
            fail(f"--workers: must be >= 0 (got {workers})")
        if jobs is not None and jobs < 1:
            fail(f"--jobs: must be >= 1 (got {jobs})")
        specs = _split(traces or list(DEFAULT_TRACES))
        policy_list = _split(policies or list(POLICIES))
        try:
            parsed = parse_policies(policy_list)
        except (SpecError, UnknownPolicyError) as e:
            fail(f"--policies: {e}")
        by_label = dict(zip((p.label for p in parsed), policy_list, strict=True))
        by_label.setdefault(FIFO, FIFO)  # the load rule's reference, and its row
        policy_list = [by_label[FIFO], *(v for k, v in by_label.items() if k != FIFO)]
        if json_file is not None and not json_file.parent.is_dir():
            fail(f"--json-file {json_file}: no such directory {json_file.parent}")
        loaded = {s: load(s, trace_dir, jobs) for s in specs}  # fails fast on files
        n = workers or os.cpu_count() or 1
        console = Console(width=None if sys.stdout.isatty() else 170, stderr=json_out)
        t0 = time.perf_counter()
        results: list[TraceResult] = []
        for spec in specs:
            r = run_trace(spec, policy_list, workers=n, loaded=loaded.pop(spec), first=jobs)
            results.append(r)
            if not json_out:
                _print_trace(console, r)
            else:
                console.print(wall_line(r), highlight=False)
        itp = [r for r in results if r.kind == "itp"]
        pools = {}
        if len(itp) > 1:
            pools[f"itp ({len(itp)} clusters)"] = pooled(itp, f"itp ({len(itp)} clusters)")
        wall = time.perf_counter() - t0
        out = json.dumps(
            {
                "policies": [FIFO, *(k for k in by_label if k != FIFO)],
                "workers": n,
                "cut_to_first_jobs": jobs,
                "traces": [r.to_json() for r in results],
                "pooled": {k: [row.to_json() for row in v] for k, v in pools.items()},
                "wall_s": wall,
            },
            indent=2,
            allow_nan=False,
        )
        if json_file is not None:
            try:
                json_file.write_text(out + "\n")
            except OSError as e:
                fail(f"--json-file {json_file}: cannot write: {e.strerror or e}")
        if json_out:
            typer.echo(out)
            return
        for name, rows in pools.items():
            console.print(
                table(f"{name}: job-weighted, each cluster at its own time scale "
                      f"({', '.join(f'{r.time_scale.scale:.3g}' for r in itp)})", rows)
            )  # fmt: skip
        console.print("wall time per trace:", highlight=False)
        for r in results:
            console.print("  " + wall_line(r), highlight=False)
        over = [r.spec for r in results if r.over_budget]
        if over:
            console.print(
                f"  over the {TRACE_BUDGET_S:.0f} s budget: {', '.join(over)}", highlight=False
            )
        console.print(f"all traces: {wall:.1f} s", highlight=False)


def _print_trace(console: Console, r: TraceResult) -> None:
    cut = f", first {r.cut:,} jobs" if r.cut else ""
    console.print(f"{r.spec}: {r.jobs:,} jobs{cut}, {r.gpus:,} GPUs", highlight=False)
    ts = r.time_scale
    console.print("  " + ts.line(), highlight=False)
    console.print(
        "  FIFO runs (scale -> ratio): " + ", ".join(f"{s:.4g} -> {x:.3f}" for s, x in ts.tried),
        highlight=False,
    )
    console.print(table(f"{r.spec} at time scale {ts.scale:.4g}", r.rows))
    if r.verdict is not None:
        for line in verdict_lines(r.spec, r.verdict):
            console.print(line, highlight=False)
    console.print(wall_line(r), highlight=False)
