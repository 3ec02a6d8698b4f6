"""Chargeback and showback: rated charges added up per owner, as a table, CSV, JSON and PNG.

``tally(charges, records, book)`` adds the charges of one bill up once, per fine group (org,
queue, priority class, cluster, GPU model, UTC day); ``chargeback(tally, by)`` then groups that
by any of ``DIMENSIONS`` without touching the charges again, so a report, its subtotals and
the charts all come from one pass.

Figures of a group (``Figures``), all exact:

- **GPU-hours**: allocated GPU time, used and idle (milli-GPU × ms, ``raw`` of the ``gpu``
  charges, waste included), in GPU-hours.
- **Idle GPU-hours** (waste): the allocated GPU time the job left idle, where its utilisation
  is known. Where the price book split it off (a ``gpu-idle`` rate matched, see
  ``suanli.metering.rating``) it is the ``raw`` of the ``waste`` charges, and its cost their
  amount; elsewhere it is computed by rating's rule, ``raw − round_half_even(raw × util)`` per
  charge, and shown in hours only (no money: the book has no price for it).
- **CPU core-hours**, **memory GiB-hours**: ``raw`` of the ``cpu`` and ``memory`` charges.
- **Cost**: the sum of the amounts of all charges of the group (GPU, idle GPU, CPU, memory,
  storage, network); **idle cost** the part of it charged at the ``gpu-idle`` rate.

Hours are exact quotients of integers, shown rounded (two decimals in the table,
``QUANTITY_QUANTUM`` in CSV and JSON, beside the exact integer ``raw``); money is exact to
``MONEY_QUANTUM`` in CSV and JSON and rounded to cents in the table only.

Layering: this module reads charges, usage records and a price book (``metering``) and
writes files; the ledger (``store``) sits above it and is not imported here.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from suanli.metering.charges import MONEY_QUANTUM, QUANTITY_QUANTUM, Charge
from suanli.metering.prices import GPU_IDLE, PriceBook
from suanli.metering.usage import CPU_HOUR, GPU_HOUR, MEMORY_GIB_HOUR, UsageRecord

__all__ = [
    "CHART_GROUPS",
    "COLUMNS",
    "DIMENSIONS",
    "Chargeback",
    "Figures",
    "Line",
    "Tally",
    "book_prices_idle",
    "chargeback",
    "chargeback_csv",
    "chargeback_json",
    "chargeback_table",
    "gpu_hours",
    "line_values",
    "plain",
    "plot_gpu_hours",
    "plot_spend",
    "regroup",
    "render_json",
    "tally",
]

DIMENSIONS = (
    "department",
    "project",
    "user",
    "org",
    "queue",
    "priority_class",
    "gpu_model",
    "day",
    "cluster",
)
"""What a chargeback groups by: ``department`` (first component of the org path),
``project`` (first two), ``user`` or ``org`` (the whole path), ``queue``, ``priority_class``,
``gpu_model`` (``""`` for CPU, memory, storage and network), ``day`` (UTC date of a charge's
start, ``YYYY-MM-DD``, as the ledger's totals) and ``cluster``."""

_ORG_DEPTH = {"department": 1, "project": 2, "user": None, "org": None}
_DAY_MS = 86_400_000
_EPOCH_DAY = date(1970, 1, 1)
_CENT = Decimal("0.01")
_NO_MODEL = "-"  # how an empty GPU model shows in the table

# The fine group of a charge: (org, queue, priority class, cluster, GPU model, UTC day number).
_Fine = tuple[str, str, str, str, str, int]


def gpu_hours(raw: int) -> Decimal:
    """Milli-GPU × ms as GPU-hours: the exact quotient to the context's precision (the same
    expression the simulator uses for ``allocated_gpu_hours``)."""
    return Decimal(raw) / GPU_HOUR


@dataclass(slots=True)
class Figures:
    """What one group used and owes (see the module docstring). ``raw`` figures are exact
    integers in the usage units: milli-GPU × ms, milli-core × ms, MiB × ms."""

    gpu_raw: int = 0
    known_raw: int = 0
    """Allocated GPU time whose utilisation is known (the rest cannot be split into used
    and idle)."""
    idle_raw: int = 0
    cpu_raw: int = 0
    memory_raw: int = 0
    cost: Decimal = Decimal(0)
    idle_cost: Decimal = Decimal(0)
    charges: int = 0

    def add(self, other: Figures) -> None:
        self.gpu_raw += other.gpu_raw
        self.known_raw += other.known_raw
        self.idle_raw += other.idle_raw
        self.cpu_raw += other.cpu_raw
        self.memory_raw += other.memory_raw
        self.cost += other.cost
        self.idle_cost += other.idle_cost
        self.charges += other.charges

    @property
    def used_raw(self) -> int:
        """Allocated GPU time kept busy: known-utilisation time less its idle part."""
        return self.known_raw - self.idle_raw

    @property
    def gpu_hours(self) -> Decimal:
        return gpu_hours(self.gpu_raw)

    @property
    def idle_gpu_hours(self) -> Decimal:
        return gpu_hours(self.idle_raw)

    @property
    def used_gpu_hours(self) -> Decimal:
        return gpu_hours(self.used_raw)

    @property
    def cpu_core_hours(self) -> Decimal:
        return Decimal(self.cpu_raw) / CPU_HOUR

    @property
    def memory_gib_hours(self) -> Decimal:
        return Decimal(self.memory_raw) / MEMORY_GIB_HOUR


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a chargeback: a group (one value per dimension), a subtotal of the groups
    sharing a first value (the other values ``""``), or the total (all ``""``)."""

    kind: str
    """``group``, ``subtotal`` or ``total``."""
    group: tuple[str, ...]
    figures: Figures


@dataclass(frozen=True, slots=True)
class Chargeback:
    """A chargeback by ``by``: groups sorted by their values, subtotals (with more than one
    dimension, for each first value held by more than one group) and the total."""

    by: tuple[str, ...]
    currency: str
    idle_priced: bool
    """Whether the book prices idle GPU time (else idle cost is not shown)."""
    groups: tuple[Line, ...]
    subtotals: tuple[Line, ...]
    total: Line

    def lines(self) -> list[Line]:
        """Groups, each first-level block followed by its subtotal, then the total."""
        out: list[Line] = []
        subs = {s.group[0]: s for s in self.subtotals}
        for i, g in enumerate(self.groups):
            out.append(g)
            last = i + 1 == len(self.groups) or self.groups[i + 1].group[0] != g.group[0]
            if last and g.group[0] in subs:
                out.append(subs[g.group[0]])
        out.append(self.total)
        return out


# --------------------------------------------------------------------------------------------
# Adding up
# --------------------------------------------------------------------------------------------


def _half_even(num: int, den: int) -> int:
    q, r = divmod(num, den)
    twice = 2 * r
    if twice > den or (twice == den and q & 1):
        q += 1
    return q


def _util_ratio(util: float | None) -> tuple[int, int] | None:
    """Rating's reading of a utilisation: its shortest decimal form, clamped into [0, 1], as
    an exact fraction; ``None`` when unknown (or NaN)."""
    if util is None or util != util:
        return None
    return Decimal(repr(min(max(util, 0.0), 1.0))).as_integer_ratio()


class _IdleSplit:
    """Whether rating split a GPU charge's usage into used and idle: exactly when a
    ``gpu-idle`` rate matches it in its version, or ``gpu-idle`` is free (rating's rule)."""

    def __init__(self, book: PriceBook) -> None:
        self.versions = {v.name: v for v in book.versions}
        self.free = GPU_IDLE in book.free
        self.cache: dict[tuple[str, str, str, str, str], bool] = {}

    def __call__(self, c: Charge) -> bool:
        key = (c.book_version, c.gpu_model, c.priority_class, c.band, c.cluster)
        hit = self.cache.get(key)
        if hit is None:
            version = self.versions.get(c.book_version)
            hit = self.free or (
                version is not None
                and version.price(GPU_IDLE, c.gpu_model, c.priority_class, c.band, c.cluster)
                is not None
            )
            self.cache[key] = hit
        return hit


@dataclass(slots=True)
class Tally:
    """Charges of one bill added up per fine group (see the module docstring)."""

    currency: str
    idle_priced: bool
    fine: dict[_Fine, Figures] = field(default_factory=dict)

    def total(self) -> Figures:
        out = Figures()
        for f in self.fine.values():
            out.add(f)
        return out


def book_prices_idle(book: PriceBook) -> bool:
    """Whether any version of ``book`` has a ``gpu-idle`` rate (or lists it as free)."""
    return GPU_IDLE in book.free or any(
        r.resource == GPU_IDLE for v in book.versions for r in v.rates
    )


def tally(charges: Iterable[Charge], records: Iterable[UsageRecord], book: PriceBook) -> Tally:
    """Add ``charges`` up per fine group. ``records`` are the usage records they were rated
    from (for utilisation), ``book`` the book they were rated with (for the idle rule).
    Charges in another currency than the book's are a ``ValueError`` (a bill has one)."""
    utils: dict[str, tuple[int, int]] = {}
    for r in records:
        ratio = _util_ratio(r.gpu_util)
        if ratio is not None:
            utils[r.key] = ratio
    split = _IdleSplit(book)
    currency = book.currency
    out = Tally(currency=currency, idle_priced=book_prices_idle(book))
    fine = out.fine
    for c in charges:
        if c.currency != currency:
            raise ValueError(f"charge {c.key!r}: currency {c.currency}, the bill's is {currency}")
        k = (c.org, c.queue, c.priority_class, c.cluster, c.gpu_model, c.start_ms // _DAY_MS)
        f = fine.get(k)
        if f is None:
            f = fine[k] = Figures()
        f.charges += 1
        f.cost += c.amount
        res = c.resource
        raw = c.raw
        if res == "gpu":
            f.gpu_raw += raw
            if c.waste:
                f.known_raw += raw
                f.idle_raw += raw
                f.idle_cost += c.amount
            else:
                ratio = utils.get(c.record_key)
                if ratio is not None:
                    f.known_raw += raw
                    # A utilisation of 1 leaves nothing idle, split or not.
                    if ratio[0] != ratio[1] and not split(c):
                        f.idle_raw += raw - _half_even(raw * ratio[0], ratio[1])
        elif res == "cpu":
            f.cpu_raw += raw
        elif res == "memory":
            f.memory_raw += raw
    return out


def _value(dimension: str, k: _Fine) -> str:
    org, queue, cls, cluster, model, day = k
    if dimension in _ORG_DEPTH:
        depth = _ORG_DEPTH[dimension]
        return org if depth is None else "/".join(org.split("/")[:depth])
    if dimension == "queue":
        return queue
    if dimension == "priority_class":
        return cls
    if dimension == "cluster":
        return cluster
    if dimension == "gpu_model":
        return model
    if dimension == "day":
        return (_EPOCH_DAY + timedelta(days=day)).isoformat()
    raise ValueError(f"unknown dimension {dimension!r}: choose from {', '.join(DIMENSIONS)}")


def regroup(t: Tally, by: Sequence[str]) -> dict[tuple[str, ...], Figures]:
    """The fine groups of ``t`` added up by ``by`` (unsorted)."""
    unknown = [d for d in by if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown dimension(s) {unknown}: choose from {', '.join(DIMENSIONS)}")
    out: dict[tuple[str, ...], Figures] = defaultdict(Figures)
    for k, f in t.fine.items():
        out[tuple(_value(d, k) for d in by)].add(f)
    return dict(out)


def chargeback(t: Tally, by: Sequence[str] = ("department",)) -> Chargeback:
    """The chargeback of ``t`` by ``by`` (at least one of ``DIMENSIONS``, each at most once)."""
    if not by:
        raise ValueError("a chargeback needs at least one dimension")
    if len(set(by)) != len(by):
        raise ValueError(f"dimension repeated in {list(by)}")
    grouped = regroup(t, by)
    groups = tuple(Line("group", g, grouped[g]) for g in sorted(grouped))
    subtotals: list[Line] = []
    if len(by) > 1:
        firsts: dict[str, list[Figures]] = defaultdict(list)
        for g in groups:
            firsts[g.group[0]].append(g.figures)
        for first in sorted(firsts):
            parts = firsts[first]
            if len(parts) > 1:
                sub = Figures()
                for p in parts:
                    sub.add(p)
                subtotals.append(Line("subtotal", (first, *[""] * (len(by) - 1)), sub))
    total = Figures()
    for g in groups:
        total.add(g.figures)
    return Chargeback(
        by=tuple(by),
        currency=t.currency,
        idle_priced=t.idle_priced,
        groups=groups,
        subtotals=tuple(subtotals),
        total=Line("total", ("",) * len(by), total),
    )


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

COLUMNS = (
    "gpu_hours",
    "used_gpu_hours",
    "idle_gpu_hours",
    "cpu_core_hours",
    "memory_gib_hours",
    "idle_cost",
    "cost",
)
"""The figures of a line in CSV and JSON, after the dimensions."""


def _q(value: Decimal, quantum: Decimal) -> Decimal:
    return value.quantize(quantum, rounding=ROUND_HALF_EVEN)


def plain(value: Decimal) -> str:
    """``value`` as a plain decimal string, never in exponent form (``0E-9`` is ``0.000000000``)."""
    return f"{value:f}"


def _hours(value: Decimal) -> str:
    return plain(_q(value, QUANTITY_QUANTUM))


def line_values(line: Line, idle_priced: bool) -> dict[str, str | None]:
    """A line's figures as exact or ``QUANTITY_QUANTUM``-rounded decimal strings (``idle_cost``
    is ``None`` when the book does not price idle time)."""
    f = line.figures
    return {
        "gpu_hours": _hours(f.gpu_hours),
        "used_gpu_hours": _hours(f.used_gpu_hours),
        "idle_gpu_hours": _hours(f.idle_gpu_hours),
        "cpu_core_hours": _hours(f.cpu_core_hours),
        "memory_gib_hours": _hours(f.memory_gib_hours),
        "idle_cost": plain(_q(f.idle_cost, MONEY_QUANTUM)) if idle_priced else None,
        "cost": plain(_q(f.cost, MONEY_QUANTUM)),
    }


def _line_doc(cb: Chargeback, line: Line) -> dict[str, Any]:
    f = line.figures
    doc: dict[str, Any] = dict(zip(cb.by, line.group, strict=True))
    doc.update(line_values(line, cb.idle_priced))
    doc["raw"] = {
        "gpu_milli_ms": f.gpu_raw,
        "used_gpu_milli_ms": f.used_raw,
        "idle_gpu_milli_ms": f.idle_raw,
        "cpu_milli_ms": f.cpu_raw,
        "memory_mib_ms": f.memory_raw,
    }
    return doc


def chargeback_json(cb: Chargeback) -> dict[str, Any]:
    """Plain, strict-JSON-ready data: ``by``, ``currency``, ``groups``, ``subtotals`` and
    ``total``, each line with its dimension values, figures (strings) and ``raw`` integers."""
    return {
        "by": list(cb.by),
        "currency": cb.currency,
        "idle_priced": cb.idle_priced,
        "groups": [_line_doc(cb, g) for g in cb.groups],
        "subtotals": [_line_doc(cb, s) for s in cb.subtotals],
        "total": _line_doc(cb, cb.total),
    }


def chargeback_csv(reports: Sequence[tuple[str, Chargeback]]) -> str:
    """``(policy, chargeback)`` pairs as CSV text: columns ``policy``, ``row`` (``group``,
    ``subtotal`` or ``total``), the dimensions, ``COLUMNS`` and ``currency``; one row per line
    of each chargeback. All chargebacks must group by the same dimensions."""
    if not reports:
        return ""
    by = reports[0][1].by
    if any(cb.by != by for _, cb in reports):
        raise ValueError("chargebacks grouped differently cannot share one CSV")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["policy", "row", *by, *COLUMNS, "currency"])
    for policy, cb in reports:
        for line in cb.lines():
            values = line_values(line, cb.idle_priced)
            w.writerow(
                [
                    policy,
                    line.kind,
                    *line.group,
                    *("" if values[c] is None else values[c] for c in COLUMNS),
                    cb.currency,
                ]
            )
    return buf.getvalue()


def _fmt(value: Decimal, quantum: Decimal = _CENT) -> str:
    return f"{_q(value, quantum):,}"


def chargeback_table(cb: Chargeback, *, title: str | None = None) -> Table:
    """A rich table: one row per group (repeated leading values left blank), subtotals and a
    total line; figures rounded to two decimals."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for d in cb.by:
        table.add_column(d, no_wrap=True)
    for name in ("GPU-h", "idle GPU-h", "CPU core-h", "memory GiB-h"):
        table.add_column(name, justify="right", no_wrap=True)
    if cb.idle_priced:
        table.add_column(f"idle cost ({cb.currency})", justify="right", no_wrap=True)
    table.add_column(f"cost ({cb.currency})", justify="right", no_wrap=True)
    prev: tuple[str, ...] = ()
    lines = cb.lines()
    for i, line in enumerate(lines):
        f = line.figures
        if line.kind == "total":
            table.add_section()
            names = ["total", *[""] * (len(cb.by) - 1)]
            style = "bold"
        elif line.kind == "subtotal":
            names = ["", *[""] * (len(cb.by) - 2), f"{line.group[0]} total"]
            style = "italic"
        else:
            names = [
                "" if j < len(prev) and prev[: j + 1] == line.group[: j + 1] else v or _NO_MODEL
                for j, v in enumerate(line.group)
            ]
            prev = line.group
            style = ""
            if len(cb.by) > 1 and i and lines[i - 1].kind == "subtotal":
                table.add_section()
        cells = [
            _fmt(f.gpu_hours),
            _fmt(f.idle_gpu_hours),
            _fmt(f.cpu_core_hours),
            _fmt(f.memory_gib_hours),
        ]
        if cb.idle_priced:
            cells.append(_fmt(f.idle_cost))
        cells.append(_fmt(f.cost))
        table.add_row(*(Text(c, style=style) for c in [*names, *cells]))
    return table


def render_json(doc: Mapping[str, Any]) -> str:
    """``doc`` as indented, strict JSON text, ending in a newline."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


# --------------------------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------------------------

CHART_GROUPS = 9
"""Groups shown by name in a chart; the rest are added up as ``other``."""


def _top_groups(totals: Mapping[str, Decimal | int], n: int = CHART_GROUPS) -> list[str]:
    """The ``n`` largest groups (ties by name); all of them when at most ``n + 1``."""
    ranked = sorted(totals, key=lambda g: (-totals[g], g))
    return ranked if len(ranked) <= n + 1 else ranked[:n]


def plot_spend(t: Tally, dimension: str, path: Path, *, title: str = "") -> None:
    """PNG: cost per day (UTC, of each charge's start) as bars stacked by ``dimension``
    (the largest ``CHART_GROUPS`` groups by name, the rest as ``other``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure

    by_day: dict[tuple[str, int], Decimal] = defaultdict(Decimal)
    totals: dict[str, Decimal] = defaultdict(Decimal)
    days: set[int] = set()
    for k, f in t.fine.items():
        g = _value(dimension, k) or _NO_MODEL
        by_day[(g, k[5])] += f.cost
        totals[g] += f.cost
        days.add(k[5])
    shown = _top_groups(totals)
    order = sorted(days)
    x = date2num([_EPOCH_DAY + timedelta(days=d) for d in order])
    series: dict[str, list[float]] = {}
    for g in [*shown, "other"]:
        series[g] = [0.0] * len(order)
    pos = {d: i for i, d in enumerate(order)}
    for (g, d), v in by_day.items():
        series[g if g in shown else "other"][pos[d]] += float(v)
    if not any(series["other"]):
        del series["other"]

    fig = Figure(figsize=(11, 5.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    bottom = [0.0] * len(order)
    for g, values in series.items():
        ax.bar(x, values, bottom=bottom, width=0.9, label=g)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_title(title or f"Spend per {dimension} per day")
    ax.set_ylabel(f"cost ({t.currency})")
    ax.set_xlabel("day (UTC)")
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.grid(True, axis="y", alpha=0.3)
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", title=dimension)
    fig.savefig(path, format="png")


def plot_gpu_hours(t: Tally, dimension: str, path: Path, *, title: str = "") -> None:
    """PNG: per group of ``dimension``, allocated GPU-hours as a bar split into used
    (allocated × utilisation), idle (the waste) and, where utilisation is unknown, unknown."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    grouped = regroup(t, (dimension,))
    totals = {g[0] or _NO_MODEL: f.gpu_raw for g, f in grouped.items()}
    shown = _top_groups(totals)
    figs: dict[str, Figures] = {g: Figures() for g in shown}
    for g, f in grouped.items():
        name = g[0] or _NO_MODEL
        figs.setdefault(name if name in shown else "other", Figures()).add(f)
    names = sorted(figs, key=lambda g: (g == "other", -figs[g].gpu_raw, g))
    used = [float(figs[g].used_gpu_hours) for g in names]
    idle = [float(figs[g].idle_gpu_hours) for g in names]
    unknown = [float(gpu_hours(figs[g].gpu_raw - figs[g].known_raw)) for g in names]

    fig = Figure(figsize=(10, 1.5 + 0.45 * max(len(names), 1)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    y = list(range(len(names)))
    ax.barh(y, used, label="used (allocated × utilisation)", color="tab:green")
    ax.barh(y, idle, left=used, label="idle (waste)", color="tab:red", hatch="//", alpha=0.8)
    if any(unknown):
        left = [u + i for u, i in zip(used, idle, strict=True)]
        ax.barh(y, unknown, left=left, label="utilisation unknown", color="tab:gray")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours allocated")
    ax.set_title(title or f"Allocated versus used GPU-hours per {dimension}")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.savefig(path, format="png")
