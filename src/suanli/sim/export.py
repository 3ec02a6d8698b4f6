"""Simulation results out of the process: CSV, JSON and a PNG plot.

``write_results(results, out_dir)`` writes, for each result, ``<stem>-jobs.csv`` (one row per
job) and ``<stem>-series.csv`` (the cluster state after each simulated instant), the same as
JSON (``<stem>-jobs.jsonl``, one object per job and line; ``<stem>-series.json``), plus
``<stem>-attempts.csv`` (every attempt of every job and what it held: metering's input),
``summary.json`` (every result's ``SimResult.summary()``, the files written for it and the
GPU-hours its attempts held) and
``allocation.png`` (GPU allocation and utilisation, and pending jobs, over the measurement
window; one colour per policy set).
``<stem>`` is the policy-set label made filename-safe (``fifo/strict+best-fit`` →
``fifo-strict_best-fit``), unique within one call.

JSON is strict: NaN and infinities (e.g. the JCT of a run where no job finished) become
``null``. In the CSVs an event that never happened (a start, a finish) is an empty cell;
times are seconds with at most three decimals.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from suanli.sim.attempts import ATTEMPT_COLUMNS, OUTCOMES
from suanli.sim.results import SimResult

__all__ = [
    "JOB_COLUMNS",
    "SERIES_COLUMNS",
    "downsample",
    "file_stems",
    "plot_allocation",
    "render_json",
    "results_document",
    "safe_stem",
    "job_columns",
    "series_columns",
    "write_jobs_csv",
    "write_jobs_jsonl",
    "write_results",
    "write_series_csv",
    "write_series_json",
]

JOB_COLUMNS = (
    "id",
    "tenant",
    "priority_class",
    "submit",
    "start",
    "finish",
    "wait",
    "jct",
    "tasks",
    "gpu_milli",
    "nodes",
    "pending_reason",
    "queue",
    "preemptions",
    "waited_for",
    "budget",
    "outcome",
    "predicted_p50",
    "predicted_p90",
    "start_p50",
    "start_p90",
    "start_error",
)

SERIES_COLUMNS = ("t", "gpu_allocation", "gpu_utilisation", "pending_jobs")
SUMMARY_FILE = "summary.json"
PLOT_FILE = "allocation.png"
PLOT_POINTS = 2000
"""Most points per line in the plot; longer series are averaged over time bins."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------


def safe_stem(label: str) -> str:
    """``label`` as a filename stem: ``+`` → ``_``, ``/`` → ``-``, other unsafe characters → ``-``."""
    stem = _UNSAFE.sub("-", label.replace("+", "_").replace("/", "-")).strip(".")
    return stem or "result"


def file_stems(labels: Iterable[str]) -> list[str]:
    """A distinct ``safe_stem`` per label, in order (repeats get ``-2``, ``-3``, ...)."""
    out: list[str] = []
    seen: set[str] = set()
    for label in labels:
        base = stem = safe_stem(label)
        k = 1
        while stem in seen:
            k += 1
            stem = f"{base}-{k}"
        seen.add(stem)
        out.append(stem)
    return out


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """``value`` with NaN/inf floats as ``None`` and NumPy scalars as Python ones."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def results_document(
    results: Sequence[SimResult], meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``{"run": meta, "results": [summary, ...]}``: plain, strict-JSON-ready data.

    ``meta`` describes the run (cluster, workload, seed, ...); results keep their order.
    """
    return _jsonable({"run": dict(meta or {}), "results": [r.summary() for r in results]})


def render_json(results: Sequence[SimResult], meta: Mapping[str, Any] | None = None) -> str:
    """``results_document`` as indented, strict JSON text (no NaN), ending in a newline."""
    return json.dumps(results_document(results, meta), indent=2, allow_nan=False) + "\n"


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------


def _fmt_times(values: np.ndarray) -> list[str]:
    """Seconds with at most three decimals; NaN as an empty cell."""
    return ["" if v != v else (f"{v:.3f}".rstrip("0").rstrip(".") or "0") for v in values.tolist()]


_TIME_COLUMNS = frozenset(
    {"submit", "start", "finish", "wait", "jct", "t", "end", "predicted_p50", "predicted_p90",
     "start_p50", "start_p90", "start_error"}
)  # fmt: skip
_RATIO_COLUMNS = frozenset({"gpu_allocation", "gpu_utilisation"})


def job_columns(result: SimResult) -> dict[str, list[Any]]:
    """Per-job records as columns (``JOB_COLUMNS``), in the simulator's submit order.

    Times are float seconds, NaN where the event never happened; ``pending_reason`` is empty
    for a job that is not left pending. ``outcome`` is how the trace recorded the job ending
    (``Job.outcome``: ``completed``, ``failed``, ``killed``; empty when not recorded), not what
    happened in the simulation (that is ``finish`` and the attempts' ``outcome``).
    ``predicted_p50``/``predicted_p90``: the runtime the policy set's predictor gave the job
    at its submission; ``start_p50``/``start_p90``: its start as estimated at its submission
    (``simulate(start_estimates=True)``), and ``start_error`` the real start minus
    ``start_p50`` (NaN where not estimated).
    """
    rec = result.records
    n = len(rec.ids)
    nan = np.full(n, np.nan)
    p50, p90 = rec.predicted if rec.predicted is not None else (nan, nan)
    s50, s90 = rec.start_estimate if rec.start_estimate is not None else (nan, nan)
    values = (
        rec.ids,
        result.job_tenant,
        result.job_class,
        rec.submit.tolist(),
        rec.start.tolist(),
        rec.finish.tolist(),
        (rec.start - rec.submit).tolist(),
        (rec.finish - rec.submit).tolist(),
        rec.tasks.tolist(),
        rec.gpu_milli.tolist(),
        rec.nodes.tolist(),
        [rec.reason.get(i, "") for i in range(len(rec.ids))],
        result.job_queue or [""] * len(rec.ids),
        rec.preemptions.tolist() if rec.preemptions is not None else [0] * len(rec.ids),
        [str(rec.waited[i]) if i in rec.waited else "" for i in range(len(rec.ids))],
        [rec.budget.get(i, "") for i in range(len(rec.ids))],
        result.job_outcome or [""] * len(rec.ids),
        np.asarray(p50, np.float64).tolist(),
        np.asarray(p90, np.float64).tolist(),
        np.asarray(s50, np.float64).tolist(),
        np.asarray(s90, np.float64).tolist(),
        (rec.start - np.asarray(s50, np.float64)).tolist(),
    )
    return dict(zip(JOB_COLUMNS, values, strict=True))


def attempt_columns(result: SimResult) -> dict[str, list[Any]]:
    """Every attempt of every job (``ATTEMPT_COLUMNS``), by job in record order, then start."""
    rec = result.records
    if rec.attempts is None or rec.use is None:
        return {c: [] for c in ATTEMPT_COLUMNS}
    aj, a_start, a_end = rec.attempts
    use = rec.use
    order = np.lexsort((a_start, aj))
    dur = a_end - a_start
    held = np.bincount(aj, weights=dur, minlength=len(rec.ids))
    n = len(rec.ids)
    util = result.job_gpu_util if result.job_gpu_util is not None else np.ones(n)
    storage = result.job_storage_gb if result.job_storage_gb is not None else np.zeros(n)
    network = result.job_network_gb if result.job_network_gb is not None else np.zeros(n)
    queues = result.job_queue or [""] * n
    cols: dict[str, list[Any]] = {c: [] for c in ATTEMPT_COLUMNS}
    seen = np.zeros(n, dtype=np.int64)
    for a in order.tolist():
        i = int(aj[a])
        cols["job"].append(rec.ids[i])
        cols["attempt"].append(int(seen[i]))
        seen[i] += 1
        cols["tenant"].append(result.job_tenant[i])
        cols["queue"].append(queues[i])
        cols["priority_class"].append(result.job_class[i])
        cols["start"].append(float(a_start[a]))
        cols["end"].append(float(a_end[a]))
        cols["outcome"].append(OUTCOMES[int(use.outcome[a])])
        cols["gpu"].append(";".join(f"{m}={milli}" for m, milli in use.gpu_by_model(a)))
        cols["gpu_milli"].append(int(use.gpu_milli[a]))
        cols["cpu_milli"].append(int(use.cpu_milli[a]))
        cols["memory_mib"].append(int(use.memory_mib[a]))
        cols["gpu_util"].append(float(util[i]))
        cols["storage_gb"].append(float(storage[i]))
        share = float(dur[a] / held[i]) if held[i] > 0 else 0.0
        cols["network_gb"].append(float(network[i]) * share)
    return cols


def allocated_gpu_hours(attempts: Mapping[str, Sequence[Any]]) -> str:
    """GPU-hours held over all attempts, exact to the millisecond times the attempts CSV
    holds (a decimal string): what a bill made from that CSV must add up to."""
    total = 0
    starts = _fmt_times(np.asarray(attempts["start"], dtype=np.float64))
    ends = _fmt_times(np.asarray(attempts["end"], dtype=np.float64))
    for s, e, g in zip(starts, ends, attempts["gpu_milli"], strict=True):
        total += int(g) * (int(Decimal(e) * 1000) - int(Decimal(s) * 1000))
    return str(Decimal(total) / Decimal(3_600_000_000))


def series_columns(result: SimResult) -> dict[str, list[Any]]:
    """The cluster after each simulated instant (``SERIES_COLUMNS``); ratios in [0, 1]."""
    s = result.series
    values = (s.t.tolist(), s.allocation.tolist(), s.utilisation.tolist(), s.pending.tolist())
    return dict(zip(SERIES_COLUMNS, values, strict=True))


def _write_csv(columns: dict[str, list[Any]], path: Path) -> None:
    cells = [
        _fmt_times(np.asarray(v, dtype=np.float64))
        if k in _TIME_COLUMNS
        else ([f"{x:.6f}" for x in v] if k in _RATIO_COLUMNS else v)
        for k, v in columns.items()
    ]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(zip(*cells, strict=True))


def write_jobs_csv(result: SimResult, path: Path) -> None:
    """One row per job (columns ``JOB_COLUMNS``), in the simulator's submit order."""
    _write_csv(job_columns(result), path)


def write_series_csv(result: SimResult, path: Path) -> None:
    """The cluster after each simulated instant (columns ``SERIES_COLUMNS``).

    Allocation and utilisation are shares of the cluster's GPU capacity in [0, 1].
    """
    _write_csv(series_columns(result), path)


def write_jobs_jsonl(result: SimResult, path: Path) -> None:
    """One JSON object per line and job (keys ``JOB_COLUMNS``); an event that never happened is null."""
    columns = job_columns(result)
    with path.open("w", encoding="utf-8") as f:
        for row in zip(*columns.values(), strict=True):
            f.write(json.dumps(_jsonable(dict(zip(columns, row, strict=True))), allow_nan=False))
            f.write("\n")


def write_series_json(result: SimResult, path: Path) -> None:
    """The time series as one JSON object of equal-length arrays (keys ``SERIES_COLUMNS``)."""
    path.write_text(
        json.dumps(_jsonable(series_columns(result)), allow_nan=False) + "\n", encoding="utf-8"
    )


# --------------------------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------------------------


def downsample(
    t: np.ndarray, v: np.ndarray, max_points: int = PLOT_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points of the step function ``v`` (``v[i]`` from ``t[i]`` on).

    Short series come back unchanged. Longer ones are cut into ``max_points`` equal time bins
    over ``[t[0], t[-1]]`` and each bin gets the time-weighted mean of ``v`` in it (so a short
    spike shows as its share of the bin, and the area under the curve is kept).
    """
    n = len(t)
    if n <= max_points:
        return t, v
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    t0, t1 = float(t[0]), float(t[-1])
    if t1 <= t0:
        return t[-1:], v[-1:]
    edges = np.linspace(t0, t1, max_points + 1)
    area = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    j = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, n - 1)
    integral = area[j] + v[j] * (edges - t[j])
    return edges[:-1], np.diff(integral) / np.diff(edges)


def _time_unit(span: float) -> tuple[str, float]:
    for unit, seconds in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if span >= 3 * seconds:
            return unit, seconds
    return "seconds", 1.0


def plot_allocation(results: Sequence[SimResult], path: Path) -> None:
    """PNG of GPU allocation and utilisation (%) and pending jobs over the measurement window,
    one colour per result: allocation solid, utilisation dotted in the same colour.

    The window (``SimResult.window``: warm-up and drain left out) fills the axis; the whole run
    is in the series files. Uses matplotlib's Agg canvas directly (no pyplot, no global backend
    switch).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10, 7), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax_alloc, ax_pending = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    shown = [r for r in results if len(r.series.t)]
    w0 = min((r.window[0] for r in shown), default=0.0)
    w1 = max((r.window[1] for r in shown), default=0.0)
    if w1 <= w0:  # nothing to window: the whole run
        w1 = max((float(r.series.t[-1]) for r in shown), default=w0 + 1.0)
    unit, scale = _time_unit(w1 - w0)
    top = 0.0
    for i, r in enumerate(shown):
        s = r.series
        t_win, alloc, busy, pending = _within(s.t, (s.allocation, s.utilisation, s.pending), w0, w1)
        colour = f"C{i % 10}"
        style = {"drawstyle": "steps-post", "color": colour}
        t, a = downsample(t_win, alloc)
        ax_alloc.plot(t / scale, a * 100, lw=1.2, label=r.label, **style)
        t, b = downsample(t_win, busy)
        ax_alloc.plot(t / scale, b * 100, lw=1.0, ls=":", **style)
        t, p = downsample(t_win, pending)
        ax_pending.plot(t / scale, p, lw=1.0, **style)
        top = max(top, float(p.max()) if len(p) else 0.0)
    first = results[0] if results else None
    title = "GPU allocation (solid) and utilisation (dotted)"
    if first is not None:
        title += f": {first.cluster}, {first.total_gpus:,} GPUs, {first.jobs:,} jobs"
    ax_alloc.set_title(title)
    ax_alloc.set_ylabel("share of GPU capacity (%)")
    ax_alloc.set_ylim(0, 105)
    ax_alloc.set_xlim(w0 / scale, w1 / scale)
    ax_alloc.grid(True, alpha=0.3)
    if shown:
        key = [
            Line2D([], [], color="0.3", lw=1.2, label="allocated: GPUs held by jobs"),
            Line2D([], [], color="0.3", lw=1.0, ls=":", label="utilised: GPUs kept busy"),
        ]
        handles, _ = ax_alloc.get_legend_handles_labels()
        ax_alloc.legend(handles=handles + key, loc="lower right", fontsize="small", ncol=2)
    ax_pending.set_ylabel("pending jobs")
    ax_pending.set_xlabel(
        f"simulated time ({unit}) over the measurement window: warm-up and drain left out "
        "(the whole run is in the series files)"
    )
    ax_pending.set_ylim(0, max(1.0, top * 1.05))
    ax_pending.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_pending.grid(True, alpha=0.3)
    fig.savefig(path, format="png")


def _within(
    t: np.ndarray, values: tuple[np.ndarray, ...], w0: float, w1: float
) -> tuple[np.ndarray, ...]:
    """The step series clipped to [w0, w1]: the value in force at ``w0`` starts it."""
    lo = max(int(np.searchsorted(t, w0, side="right")) - 1, 0)
    hi = int(np.searchsorted(t, w1, side="right"))
    tt = t[lo:hi].copy()
    if len(tt):
        tt[0] = max(tt[0], w0)
    return (tt, *(v[lo:hi] for v in values))


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


def write_results(
    results: Sequence[SimResult],
    out_dir: Path | str,
    meta: Mapping[str, Any] | None = None,
    *,
    plot: bool = True,
) -> list[Path]:
    """Write every file described in the module docstring into ``out_dir`` (created if needed).

    Returns the paths written, in order. Existing files of the same names are replaced.
    Raises ``OSError`` when the directory cannot be created or written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    files: list[dict[str, str]] = []
    gpu_hours: list[str] = []
    for result, stem in zip(results, file_stems(r.label for r in results), strict=True):
        names = {
            "jobs_csv": f"{stem}-jobs.csv",
            "series_csv": f"{stem}-series.csv",
            "jobs_jsonl": f"{stem}-jobs.jsonl",
            "series_json": f"{stem}-series.json",
            "attempts_csv": f"{stem}-attempts.csv",
        }
        write_jobs_csv(result, out / names["jobs_csv"])
        write_series_csv(result, out / names["series_csv"])
        write_jobs_jsonl(result, out / names["jobs_jsonl"])
        write_series_json(result, out / names["series_json"])
        attempts = attempt_columns(result)
        _write_csv(attempts, out / names["attempts_csv"])
        gpu_hours.append(allocated_gpu_hours(attempts))
        written += [out / n for n in names.values()]
        files.append(names)
    doc = results_document(results, meta)
    for entry, names, gh in zip(doc["results"], files, gpu_hours, strict=True):
        entry["files"] = names
        entry["allocated_gpu_hours"] = gh
    summary_path = out / SUMMARY_FILE
    summary_path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    written.append(summary_path)
    if plot:
        plot_path = out / PLOT_FILE
        plot_allocation(results, plot_path)
        written.append(plot_path)
    return written
