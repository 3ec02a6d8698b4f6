"""The side-by-side results table of ``suanli simulate``: one column per policy set.

All durations of the table share one unit, picked from its job-level rows (JCT and queueing
delay) and shown in each row name (``JCT mean (h)``), so the cells are bare numbers that line
up and compare across rows. The best value of a row is marked ``*`` (and bold green on a
terminal) when the policy sets differ (higher is better for allocation, utilisation and
finished jobs; lower for times and unfinished jobs). Policy sets that plan with the true
runtimes (``sjf``, ``…-oracle``) say so in their header: no real scheduler knows them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from rich.table import Table
from rich.text import Text

from suanli.core.model import DEFAULT_PRIORITY_CLASSES
from suanli.sim.results import GroupStats, SimResult

Better = Literal["min", "max", None]

_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0))


def hours(seconds: float) -> str:
    """Seconds as hours to two decimals (``-`` for NaN): the bench tables' one unit."""
    return "-" if math.isnan(seconds) else f"{seconds / 3600:.2f}"


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    values: list[float]
    kind: Literal["duration", "percent", "count", "rate", "seconds"]
    better: Better = None


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _decimals(values: Sequence[float]) -> int:
    """Decimals for a row: enough for its smallest non-zero value to keep 2-3 digits."""
    low = min((abs(v) for v in _finite(values) if v), default=0.0)
    if low == 0.0:
        return 0
    return 2 if low < 10 else 1 if low < 100 else 0


def _cells(row: _Row, unit: tuple[str, float]) -> tuple[str, list[str]]:
    """The row's display name and its formatted cells ('-' for a value that does not exist);
    durations in ``unit``, the table's."""
    name, values = row.name, row.values
    if row.kind == "duration":
        label, scale = unit
        name, values = f"{name} ({label})", [v / scale for v in values]
        digits = _decimals(values)
    elif row.kind == "percent":
        name, values, digits = f"{name} %", [v * 100 for v in values], 1
    elif row.kind == "seconds":
        name, digits = f"{name} (s)", 2
    else:
        digits = 0
    cells = ["-" if not math.isfinite(v) else f"{v:,.{digits}f}" for v in values]
    return name, cells


def _best(row: _Row) -> int | None:
    """Index of the best value, or None when there is nothing to choose between."""
    vals = row.values
    if row.better is None or len(vals) < 2 or len(_finite(vals)) < 2:
        return None
    finite = _finite(vals)
    if max(finite) - min(finite) <= 1e-9 * max(1.0, abs(max(finite))):
        return None
    pick = min if row.better == "min" else max
    target = pick(finite)
    return vals.index(target)


def _class_order(results: Sequence[SimResult]) -> list[str]:
    names = {c for r in results for c in r.by_class}
    known = [c for c in DEFAULT_PRIORITY_CLASSES if c in names]  # highest priority first
    return known + sorted(names - set(known))


def _group(r: SimResult, cls: str, pick: Callable[[GroupStats], float]) -> float:
    g = r.by_class.get(cls)
    return pick(g) if g is not None else float("nan")


def results_rows(results: Sequence[SimResult]) -> list[list[_Row]]:
    """The table's rows, in sections."""

    def row(name: str, get: Callable[[SimResult], float], kind: str, better: Better) -> _Row:
        return _Row(name, [float(get(r)) for r in results], kind, better)  # type: ignore[arg-type]

    sections = [
        [
            row("GPU allocation", lambda r: r.gpu_allocation, "percent", "max"),
            row("GPU utilisation", lambda r: r.gpu_utilisation, "percent", "max"),
            row("GPU allocation, whole run", lambda r: r.gpu_allocation_run, "percent", "max"),
            row("GPU utilisation, whole run", lambda r: r.gpu_utilisation_run, "percent", "max"),
            *_model_rows(results),
        ],
        [
            row("JCT mean", lambda r: r.jct.mean, "duration", "min"),
            row("JCT P50", lambda r: r.jct.p50, "duration", "min"),
            row("JCT P95", lambda r: r.jct.p95, "duration", "min"),
            row("JCT P99", lambda r: r.jct.p99, "duration", "min"),
        ],
        [
            row("queueing delay mean", lambda r: r.wait.mean, "duration", "min"),
            row("queueing delay P50", lambda r: r.wait.p50, "duration", "min"),
            row("queueing delay P95", lambda r: r.wait.p95, "duration", "min"),
            row("queueing delay P99", lambda r: r.wait.p99, "duration", "min"),
        ],
        [
            row("makespan", lambda r: r.makespan, "duration", "min"),
            row("finished", lambda r: r.finished, "count", "max"),
            row("unfinished", lambda r: r.unfinished, "count", "min"),
            *(
                [
                    row("preemptions", lambda r: r.preemptions, "count", "min"),
                    row("GPU-hours lost to preemption", lambda r: r.lost_gpu_hours, "rate", "min"),
                ]
                if any(r.preemptions for r in results)
                else []
            ),
            row("cycles", lambda r: r.cycles, "count", None),
            # Speed is not marked: on a shared machine its differences are mostly noise.
            row("decisions/s", lambda r: r.decisions_per_s, "rate", None),
            row("wall", lambda r: r.wall_s, "seconds", None),
        ],
    ]
    per_class: list[_Row] = []
    for cls in _class_order(results):
        jct = [_group(r, cls, lambda g: g.jct.mean) for r in results]
        wait = [_group(r, cls, lambda g: g.wait.p99) for r in results]
        per_class.append(_Row(f"JCT mean [{cls}]", jct, "duration", "min"))
        per_class.append(_Row(f"wait P99 [{cls}]", wait, "duration", "min"))
    if per_class:
        sections.append(per_class)
    return sections


def _model_rows(results: Sequence[SimResult]) -> list[_Row]:
    """Allocation and utilisation of each GPU model's own GPUs, when there are several."""
    models = list(dict.fromkeys(m for r in results for m in r.by_model))
    if len(models) < 2:
        return []
    nan = float("nan")
    rows = []
    for m in models:
        for what, get in (
            ("allocation", lambda u: u.gpu_allocation),
            ("utilisation", lambda u: u.gpu_utilisation),
        ):
            values = [get(r.by_model[m]) if m in r.by_model else nan for r in results]
            rows.append(_Row(f"GPU {what} [{m}]", values, "percent", "max"))
    return rows


def is_oracle(label: str) -> bool:
    """Whether a policy set plans with the true runtimes: queue ``sjf`` or an ``-oracle``
    (``@oracle``) runtime estimator."""
    queue = label.split("+", 1)[0].split("/", 1)[0]
    return queue == "sjf" or "-oracle" in label or "@oracle" in label


def _table_unit(sections: list[list[_Row]]) -> tuple[str, float]:
    """One unit for every duration of the table: the largest in which the median non-zero
    job-level value (JCT and queueing delay) is at least a tenth of a unit, and the largest
    value under 10,000 units. Job figures are what the table compares; the makespan follows."""
    rows = [r for sec in sections for r in sec if r.kind == "duration"]
    jobs = [v for r in rows if r.name != "makespan" for v in _finite(r.values) if v > 0]
    values = jobs or [v for r in rows for v in _finite(r.values) if v > 0]
    if not values:
        return "s", 1.0
    median, top = float(np.median(values)), max(values)
    for unit, seconds in (*_UNITS, ("s", 1.0)):
        if median >= 0.1 * seconds and top < 10_000 * seconds:
            return unit, seconds
    return "s", 1.0


def results_table(results: Sequence[SimResult], *, title: str | None = None) -> Table:
    """A rich table: metrics down, one column per result (header: its label, split at ``+``,
    with ``(oracle)`` under a policy set that knows true runtimes)."""
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("", style="bold", no_wrap=True)
    for r in results:
        head = r.label.replace("+", "\n+") + ("\n(oracle)" if is_oracle(r.label) else "")
        table.add_column(head, justify="right", no_wrap=True)
    sections = results_rows(results)
    unit = _table_unit(sections)
    for i, section in enumerate(sections):
        if i:
            table.add_section()
        for row in section:
            name, cells = _cells(row, unit)
            best = _best(row)
            styled = [
                Text(c + "*", style="bold green") if j == best else Text(c + " ")
                for j, c in enumerate(cells)
            ]
            table.add_row(Text(name), *styled)
    return table
