"""``suanli bill roi DIR``: capacity cost against delivered work (``suanli.metering.roi``).

Registered on ``suanli bill`` by ``suanli.cli.bill``; formulas in docs/billing.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from suanli.cli.bill import (  # the shared pieces of the bill commands
    DirArg,
    EpochOpt,
    JsonOpt,
    PolicyOpt,
    PricesOpt,
    _console,
    _load_inputs,
    meter_result,
)
from suanli.cli.errors import user_errors
from suanli.config.cluster import load_cluster
from suanli.core.model import SpecError
from suanli.metering.prices import PriceBook
from suanli.metering.report import (
    plain,
    regroup,
    render_json,
)
from suanli.metering.roi import CapacityCosts, Comparison, Roi, compare, load_capacity, roi
from suanli.metering.simout import (
    DEFAULT_EPOCH,
    SimOutput,
    SimResultFiles,
    select_results,
)
from suanli.traces import resolve_cluster


def cluster_inventory(
    output: SimOutput, result: SimResultFiles, spec: str | None
) -> tuple[dict[str, int], str]:
    """GPUs per model of ``result``'s cluster and where that came from: ``--cluster SPEC``,
    else the summary's cluster name as a trace cluster (``suanli.traces.resolve_cluster``) or
    as a cluster spec, else the summary's ``total_gpus`` when the run had one GPU model.
    ``SpecError`` if none works, or if the count disagrees with ``total_gpus``."""
    name = result.cluster
    inventory: dict[str, int] | None = None
    source = ""
    if spec is not None:
        inventory, source = load_cluster(spec).gpus_by_model, f"--cluster {spec}"
    else:
        loaders: tuple[tuple[str, Callable[[str], Any]], ...] = (
            ("trace cluster", resolve_cluster),
            ("cluster spec", load_cluster),
        )
        for what, load in loaders:
            try:
                inventory, source = load(name).gpus_by_model, f"{what} {name!r}"
                break
            except (SpecError, LookupError, ValueError, OSError):
                continue
        if inventory is None:
            models = output.run.get("gpu_models")
            if isinstance(models, list) and len(models) == 1 and result.total_gpus:
                inventory = {str(models[0]): result.total_gpus}
                source = f"summary.json ({result.total_gpus} {models[0]})"
    if inventory is None:
        raise SpecError(
            f"cannot tell the GPUs per model of cluster {name!r}: pass --cluster SPEC "
            "(as for suanli simulate -c)"
        )
    total = sum(inventory.values())
    if result.total_gpus is not None and total != result.total_gpus:
        raise SpecError(
            f"{source} has {total} GPUs but {result.policy!r} ran on {result.total_gpus} "
            "(summary.json): pass the cluster it ran on with --cluster"
        )
    return inventory, source


def result_roi(
    output: SimOutput,
    result: SimResultFiles,
    book: PriceBook,
    epoch_ms: int,
    costs: CapacityCosts,
    cluster: str | None,
) -> tuple[Roi, str]:
    """The ROI figures of ``result`` (rated in memory; the ledger is not used)."""
    bill = meter_result(result, book, epoch_ms)
    inventory, source = cluster_inventory(output, result, cluster)
    per_model = regroup(bill.tally, ("gpu_model",))
    delivered = {g[0]: f.gpu_raw for g, f in per_model.items() if f.gpu_raw}
    wasted = {g[0]: f.idle_raw for g, f in per_model.items() if f.idle_raw}
    end = max((a.end_ms for a in bill.attempts), default=epoch_ms)
    return (
        roi(
            result.policy,
            costs,
            inventory,
            max(0, end - epoch_ms),
            delivered,
            wasted,
            revenue=bill.tally.total().cost,
            revenue_currency=book.currency,
            busy_known=bill.tally.idle_priced,
        ),
        source,
    )


_ROI_ROWS = (
    ("GPUs", "gpus", "count"),
    ("span (h)", "span_hours", "hours"),
    ("capacity GPU-h", "capacity_gpu_hours", "hours"),
    ("delivered GPU-h", "delivered_gpu_hours", "hours"),
    ("allocation %", "allocation", "percent"),
    ("busy GPU-h", "busy_gpu_hours", "hours"),
    ("utilisation %", "utilisation", "percent"),
    ("cluster capacity cost per hour", "hourly_cluster_cost", "money"),
    ("capacity cost", "capacity_cost", "money"),
    ("cost per delivered GPU-h", "cost_per_delivered_gpu_hour", "money4"),
    ("cost per busy GPU-h", "cost_per_busy_gpu_hour", "money4"),
    ("idle capacity GPU-h", "idle_capacity_gpu_hours", "hours"),
    ("idle capacity cost", "idle_capacity_cost", "money"),
    ("allocated idle GPU-h (waste)", "waste_gpu_hours", "hours"),
    ("waste at capacity cost", "waste_cost", "money"),
    ("revenue (chargeback)", "revenue", "money"),
    ("margin", "margin", "money"),
    ("cost recovery %", "cost_recovery", "percent"),
)


def _cell(value: Any, kind: str) -> str:
    """A figure for the table: counts as is, ratios as percentages with one decimal, money
    with four decimals (``money4``) or two, hours with two; ``-`` when undefined."""
    if value is None:
        return "-"
    if kind == "count":
        return f"{value:,}"
    if kind == "percent":
        return f"{value * 100:,.1f}"
    q = Decimal(value).quantize(
        Decimal("0.0001") if kind == "money4" else Decimal("0.01"), rounding=ROUND_HALF_EVEN
    )
    return f"{q.copy_abs() if q.is_zero() else q:,}"


def roi_table(rois: Sequence[Roi], currency: str, revenue_currency: str) -> Table:
    table = Table(
        title=f"Capacity cost and return ({currency}; revenue in {revenue_currency})",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("", style="bold", no_wrap=True)
    for r in rois:
        table.add_column(r.policy.replace("+", "\n+"), justify="right", no_wrap=True)
    figures = [r.figures() for r in rois]
    for label, key, kind in _ROI_ROWS:
        table.add_row(Text(label), *(Text(_cell(f[key], kind)) for f in figures))
    return table


def comparison_table(comparisons: Sequence[Comparison], currency: str) -> Table:
    baseline = comparisons[0].y.policy
    table = Table(
        title=f"Against {baseline} ({currency}; positive: cheaper than {baseline})",
        title_justify="left",
        header_style="bold",
    )
    for name in (
        "policy",
        "Δ delivered GPU-h",
        "Δ span (h)",
        "cost per delivered GPU-h",
        "savings",
        "capacity cost of extra time",
    ):
        table.add_column(name, justify="left" if name == "policy" else "right", no_wrap=True)
    for c in comparisons:
        f = c.figures()
        table.add_row(
            f["policy"],
            _cell(f["delta_delivered_gpu_hours"], "hours"),
            _cell(f["delta_span_hours"], "hours"),
            f"{_cell(f['cost_per_delivered_gpu_hour'], 'money4')} vs "
            f"{_cell(f['baseline_cost_per_delivered_gpu_hour'], 'money4')}",
            _cell(f["savings"], "money"),
            _cell(f["extra_time_cost"], "money"),
        )
    return table


def _jsonable(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: (plain(v) if isinstance(v, Decimal) else v) for k, v in figures.items()}


def roi_command(
    directory: DirArg,
    capacity: Annotated[
        Path,
        typer.Option(
            "--capacity",
            metavar="FILE",
            help="Capacity costs (YAML: purchase price, lifetime, power; docs/billing.md).",
        ),
    ],
    prices: PricesOpt,
    epoch: EpochOpt = DEFAULT_EPOCH,
    policy: PolicyOpt = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="LABEL",
            help="The result the others are compared with (default: the first).",
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            metavar="SPEC",
            help="The cluster the run used (as for suanli simulate -c), when its summary's "
            "cluster name is not a built-in trace cluster or a spec.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Capacity cost, cost per delivered GPU-hour, idle capacity and revenue of each result,
    and what each saves against a baseline."""
    with user_errors():
        output, results, book, epoch_ms = _load_inputs(directory, policy, prices, epoch)
        costs = load_capacity(capacity)
        base = select_results(output, [baseline])[0] if baseline else results[0]
        if base not in results:
            results = [base, *results]
        rois: list[Roi] = []
        sources: list[str] = []
        for r in results:
            figures, source = result_roi(output, r, book, epoch_ms, costs, cluster)
            rois.append(figures)
            sources.append(source)
        y = rois[results.index(base)]
        comparisons = [compare(x, y) for x in rois if x is not y]
    if as_json:
        doc = {
            "directory": str(directory),
            "capacity": str(capacity),
            "prices": str(prices),
            "currency": costs.currency,
            "revenue_currency": book.currency,
            "results": [
                {"policy": r.policy, "cluster_from": s, **_jsonable(r.figures())}
                for r, s in zip(rois, sources, strict=True)
            ],
            "baseline": y.policy,
            "comparisons": [_jsonable(c.figures()) for c in comparisons],
        }
        sys.stdout.write(render_json(doc))
        return
    console = _console()
    console.print(roi_table(rois, costs.currency, book.currency))
    if comparisons:
        console.print(comparison_table(comparisons, costs.currency))
    if costs.currency != book.currency:
        console.print(
            f"revenue is in {book.currency}, capacity cost in {costs.currency}: no margin shown",
            style="dim",
            markup=False,
        )
    console.print(f"cluster: {sources[0]}", style="dim", markup=False)
