"""Summaries, published comparisons and files for the FGD replay (``suanli bench fgd``)."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suanli.bench.fgd import CURVE_GRID, LOAD_POINTS, RunResult

PUBLISHED_FILE = "fgd_published_median_10_seeds.csv"
"""The FGD authors' published medians, in ``<trace dir>/openb/``."""

_PUBLISHED_COLUMNS = {
    "alloc100": "alloc_pct@100_median",
    "unalloc100": "unalloc_gpu_pct@100_median",
    "alloc130": "alloc_pct@130_median",
    "unalloc130": "unalloc_gpu_pct@130_median",
    "frag100": "frag_over_total_pct@100_median",
    "frag130": "frag_over_total_pct@130_median",
}


@dataclass(frozen=True)
class SummaryRow:
    """Medians over seeds of one (workload, policy)."""

    workload: str
    policy: str
    seeds: int
    alloc100: float
    unalloc100: float
    alloc130: float
    unalloc130: float
    frag100: float
    frag130: float
    wall_s: float
    """Median seconds per replay."""
    published: dict[str, float] | None = None
    """The published medians (same keys), when known."""


def load_published(path: Path) -> dict[tuple[str, str], dict[str, float]]:
    """``(workload, policy) -> {alloc100, unalloc100, ...}`` from the published CSV.

    Workload names lose their ``openb_pod_list_`` prefix and policies their ``NN-`` prefix
    (``openb_pod_list_default``, ``06-FGD`` -> ``default``, ``FGD``).
    """
    out: dict[tuple[str, str], dict[str, float]] = {}
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("workload", "sc_policy", *_PUBLISHED_COLUMNS.values())
                   if c not in (reader.fieldnames or [])]  # fmt: skip
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            try:
                values = {k: float(row[c]) for k, c in _PUBLISHED_COLUMNS.items()}
            except ValueError as e:
                raise ValueError(f"{path}:{line}: {e}") from None
            workload = row["workload"].removeprefix("openb_pod_list_")
            policy = re.sub(r"^\d+-", "", row["sc_policy"])
            out[(workload, policy)] = values
    return out


def summarise(
    runs: Sequence[RunResult], published: dict[tuple[str, str], dict[str, float]] | None = None
) -> list[SummaryRow]:
    """One row per (workload, policy), in the order they first appear in ``runs``."""
    groups: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
    for r in runs:
        groups[(r.workload, r.policy)].append(r)
    i100, i130 = LOAD_POINTS.index(1.0), LOAD_POINTS.index(1.3)
    rows = []
    for (w, p), rs in groups.items():

        def med(values: list[float]) -> float:
            return float(np.median(values))

        rows.append(
            SummaryRow(
                workload=w,
                policy=p,
                seeds=len(rs),
                alloc100=med([r.alloc_pct[i100] for r in rs]),
                unalloc100=med([r.unalloc_pct[i100] for r in rs]),
                alloc130=med([r.alloc_pct[i130] for r in rs]),
                unalloc130=med([r.unalloc_pct[i130] for r in rs]),
                frag100=med([r.frag_pct[i100] for r in rs]),
                frag130=med([r.frag_pct[i130] for r in rs]),
                wall_s=med([r.wall_s for r in rs]),
                published=(published or {}).get((w, p)),
            )
        )
    return rows


def write_outputs(out: Path, runs: Sequence[RunResult], rows: Sequence[SummaryRow]) -> list[Path]:
    """``runs.csv`` (one line per replay), ``summary.csv``, ``summary.json`` and
    ``allocation.png`` (allocation against arrived load, median over seeds)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "runs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["workload", "policy", "seed", "pods", "failed", "alloc100", "alloc130",
             "unalloc100", "unalloc130", "frag100", "frag130", "wall_s"]
        )  # fmt: skip
        for r in runs:
            w.writerow(
                [r.workload, r.policy, r.seed, r.pods, r.failed, *_r(r.alloc_pct),
                 *_r(r.unalloc_pct), *_r(r.frag_pct), round(r.wall_s, 3)]
            )  # fmt: skip
    written.append(path)
    path = out / "summary.csv"
    keys = list(_PUBLISHED_COLUMNS)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "policy", "seeds", *keys, *[f"published_{k}" for k in keys]])
        for row in rows:
            pub = row.published or {}
            w.writerow(
                [row.workload, row.policy, row.seeds, *[round(getattr(row, k), 3) for k in keys],
                 *[pub.get(k, "") for k in keys]]
            )  # fmt: skip
    written.append(path)
    path = out / "summary.json"
    path.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    written.append(path)
    written.append(plot_allocation(out / "allocation.png", runs))
    return written


def _r(values: tuple[float, ...]) -> list[float]:
    return [round(v, 3) for v in values]


def plot_allocation(path: Path, runs: Sequence[RunResult]) -> Path:
    """Allocated share of GPU capacity against arrived load, one panel per pod list."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r.workload for r in runs))
    fig, axes = plt.subplots(
        1, len(workloads), figsize=(4.2 * len(workloads), 3.8), squeeze=False, sharey=True
    )
    grid = CURVE_GRID * 100
    for ax, w in zip(axes[0], workloads, strict=True):
        by_policy: dict[str, list[tuple[float, ...]]] = defaultdict(list)
        for r in runs:
            if r.workload == w:
                by_policy[r.policy].append(r.curve)
        for policy, curves in by_policy.items():
            ax.plot(grid, np.median(np.array(curves), axis=0), label=policy, linewidth=1.2)
        ax.plot(grid, grid, color="0.6", linestyle=":", linewidth=0.8)
        ax.set_xlim(60, 130)
        ax.set_ylim(60, 100)
        ax.set_title(w)
        ax.set_xlabel("arrived GPU load (% of capacity)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("GPUs allocated (% of capacity)")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def to_json(rows: Sequence[SummaryRow]) -> str:
    """The summary as JSON (``--json``)."""
    data: list[dict[str, Any]] = [asdict(r) for r in rows]
    return json.dumps(data, indent=2)
