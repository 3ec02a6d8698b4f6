"""``suanli bench network``: the compute network's week under four routers, side by side, every
cost from the ledger (``suanli.bench.network``, ``docs/network.md``)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suanli.cli.bench_hardware import clean_nans
from suanli.cli.errors import fail, user_errors
from suanli.cli.options import TraceDirOption

BUDGET_S = 60.0
COLUMNS = (
    ("seed", "seed"), ("router", "router"), ("jct_h", "JCT h"), ("jct_p99_h", "P99 JCT h"),
    ("wait_h", "wait h"), ("span_days", "span d"), ("cost_usd", "cost $"),
    ("moved_tb", "moved TB"), ("moved_usd", "moved $"), ("util", "utilisation by region"),
    ("jobs_by_region", "jobs by region"), ("explained", "explained"), ("settled", "settled"),
    ("wall_s", "wall s"), ("wall_ratio", "x first-admit"),
)  # fmt: skip


def _cell(v: Any) -> str:
    if isinstance(v, dict):
        return " ".join(f"{k} {_cell(x)}" for k, x in v.items())
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def comparison(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per seed: suanli's mean JCT and cost against the baseline with the best mean JCT and
    against the one with the lowest cost, and whether either target holds (30% lower JCT at
    no more cost than the best-JCT baseline; 20% lower cost at no worse JCT than the
    cheapest-run baseline)."""
    out = []
    for seed in sorted({r["seed"] for r in rows}):
        mine = next(r for r in rows if r["seed"] == seed and r["router"] == "suanli")
        base = [r for r in rows if r["seed"] == seed and r["router"] != "suanli"]
        fast = min(base, key=lambda r: r["jct_h"])
        cheap = min(base, key=lambda r: r["cost_usd"])
        jct = mine["jct_h"] / fast["jct_h"]
        cost_vs_fast = mine["cost_usd"] / fast["cost_usd"]
        cost = mine["cost_usd"] / cheap["cost_usd"]
        jct_vs_cheap = mine["jct_h"] / cheap["jct_h"]
        out.append({
            "seed": seed, "best_jct_baseline": fast["router"], "jct_ratio": jct,
            "cost_ratio_to_it": cost_vs_fast, "cheapest_baseline": cheap["router"],
            "cost_ratio": cost, "jct_ratio_to_it": jct_vs_cheap,
            "jct_target": jct <= 0.7 and cost_vs_fast <= 1.0,
            "cost_target": cost <= 0.8 and jct_vs_cheap <= 1.0,
        })  # fmt: skip
    return out


def network_command(
    seeds: Annotated[
        str, typer.Option("--seeds", help="The scenario's seeds (0-2, or 0,3).")
    ] = "0-2",
    workers: Annotated[int, typer.Option("--workers", help="Processes to run on.")] = 2,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--out", help="Write each run's per-job CSV (with every routing "
                     "decision's explanation) to this directory."),  # fmt: skip
    ] = None,
    trace_dir: TraceDirOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """One simulated week of four regions built from the shared inventories under four
    routers (first-admit, least-loaded, cheapest, suanli), with every cost from a ledger."""
    from suanli.bench.network import network_bench
    from suanli.cli.bench import parse_seeds
    from suanli.traces.errors import TraceNotFoundError

    with user_errors():
        seed_list = parse_seeds(seeds)
        if workers < 1:
            fail(f"--workers: must be >= 1 (got {workers})")
        try:
            r = network_bench(tuple(seed_list), trace_dir=trace_dir, workers=workers,
                              out_dir=out)  # fmt: skip
        except TraceNotFoundError as e:
            fail(f"the network bench needs the shared traces: {e}")
    cmp = comparison(r.rows)
    if json_out:
        doc = asdict(r) | {"comparison": cmp, "over_budget": r.wall_s > BUDGET_S,
                           "budget_s": BUDGET_S}  # fmt: skip
        sys.stdout.write(json.dumps(clean_nans(doc), indent=2, allow_nan=False) + "\n")
        return
    console = Console(width=max(Console().width, 220))
    t = Table(title=escape(r.title))
    for _, head in COLUMNS:
        t.add_column(head, justify="left" if head in ("router",) else "right")
    for row in r.rows:
        t.add_row(*(_cell(row[k]) for k, _ in COLUMNS))
    console.print(t)
    for note in r.notes:
        console.print(f"  {escape(note)}")
    for c in cmp:
        console.print(
            f"  seed {c['seed']}: suanli's mean JCT {c['jct_ratio']:.3f}x {c['best_jct_baseline']}'s "
            f"(the best baseline's) at {c['cost_ratio_to_it']:.3f}x its cost; cost "
            f"{c['cost_ratio']:.3f}x {c['cheapest_baseline']}'s (the cheapest run) at "
            f"{c['jct_ratio_to_it']:.3f}x its JCT; targets: JCT "
            f"{'met' if c['jct_target'] else 'not met'}, cost {'met' if c['cost_target'] else 'not met'}"
        )  # fmt: skip
    over = f": OVER the {BUDGET_S:.0f} s budget" if r.wall_s > BUDGET_S else ""
    console.print(f"network: {r.wall_s:.1f} s wall{over}")
