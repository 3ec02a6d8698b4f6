"""The FGD replay on workload variants: placements measured on pod lists nobody tuned them on.

``suanli bench fgd --variants grid`` builds each cell of ``GRID`` from a base openb pod list
(``suanli.traces.openb_variants``), a fresh variant for each seed (the seed that also
shuffles and tunes its replay), and replays it under the FGD protocol (``suanli.bench.fgd``)
with every policy asked. The grid moves one dimension at a time over its real range (the FGD
artifact's own lists span it: ``gpushare40`` to ``gpushare100``, ``multigpu20`` to
``multigpu50``, ``gpuspec10`` to ``gpuspec33``, ``cpu050`` to ``cpu250``), then takes the four
corners of (share constrained to GPU models × CPU per pod).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from suanli.bench.fgd import RunResult, Workload, pod_list_path, replay, workload_from_pods
from suanli.core.model import ClusterSpec
from suanli.sim.spread import spread_map
from suanli.traces.openb import OpenbPods, load_openb_nodes, load_openb_pods
from suanli.traces.openb_variants import Variant, make_variant, write_openb_pods

GRID_AXES: dict[str, tuple[float, ...]] = {
    "share": (0.1, 0.2, 0.4, 0.6, 0.8, 1.0),
    "multi": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "spec": (0.05, 0.1, 0.2, 0.25, 0.33),
    "cpu_only": (0.0, 0.05, 0.1, 0.2, 0.25),
    "cpu": (0.5, 0.75, 0.9, 1.1, 1.2),
}
"""Each dimension's values (``Variant``'s fields), over the range of the artifact's own lists
(its plot scripts' axes, ``experiments/plot/plot_openb_*_alloc_bar.py``): ``gpushare``
20-100% and ``multigpu`` 20-50% of the GPU request, ``gpuspec`` 5-33% of it constrained to
GPU models, ``cpu`` 0-25% of the tasks CPU-only (``cpu0`` to ``cpu250``; at 25% the list
asks about all the cluster's CPU), each down to none or 10%. ``cpu`` (CPU per GPU pod, not
an axis of the artifact's) runs from half to the most that keeps the list's CPU within the
cluster's: the default list asks 80% of it, × 1.2 96%.
"""
CORNERS: tuple[tuple[str, str], ...] = (("spec", "cpu"), ("spec", "cpu_only"))
"""Pairs of dimensions whose four corners (each at its lowest and highest value) are cells."""


def grid() -> list[Variant]:
    """The grid's cells: one dimension at a time, then the corners."""
    cells = [Variant(**{dim: v}) for dim, values in GRID_AXES.items() for v in values]  # type: ignore[arg-type]
    for a, b in CORNERS:
        for va in (min(GRID_AXES[a]), max(GRID_AXES[a])):
            for vb in (min(GRID_AXES[b]), max(GRID_AXES[b])):
                cells.append(Variant(**{a: va, b: vb}))  # type: ignore[arg-type]
    return cells


@dataclass(frozen=True)
class VariantBase:
    """The pod list and node list the variants are made from, read once on the driver and
    sent with the replays (``spread_map``'s shared argument). Equal and hashed by ``key``
    alone, so that a worker's cache of built variants knows one base from another."""

    key: str
    """The list's resolved path, size and modification time: one key per base list."""
    pods: OpenbPods = field(compare=False)
    cluster: ClusterSpec = field(compare=False)


def load_base(trace_dir: Path, base: str) -> VariantBase:
    """``base`` (a name or a path, as ``--pods``) on openb's GPU node list."""
    path = pod_list_path(trace_dir, base)
    nodes = trace_dir / "openb" / "openb_node_list_gpu_node.csv"
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    return VariantBase(key, load_openb_pods(path), load_openb_nodes(nodes))


@functools.lru_cache(maxsize=2)
def _variant_workload(base: VariantBase, label: str, seed: int) -> Workload:
    return workload_from_pods(
        label, base.cluster, make_variant(base.pods, base.cluster, Variant.parse(label), seed)
    )


def write_variant_lists(
    trace_dir: Path, base: str, variants: Sequence[Variant], seed: int, folder: Path
) -> list[Path]:
    """Each variant of ``base`` made with ``seed``, written in openb's format to
    ``folder/openb_pod_list_<base>_<cell>_s<seed>.csv`` (``=`` and ``,`` of the cell's label
    become ``-`` and ``_``)."""
    b = load_base(trace_dir, base)
    pods, cluster = b.pods, b.cluster
    folder.mkdir(parents=True, exist_ok=True)
    stem = Path(base).stem.removeprefix("openb_pod_list_")
    out = []
    for v in variants:
        tag = v.label.replace("=", "-").replace(",", "_")
        path = folder / f"openb_pod_list_{stem}_{tag}_s{seed}.csv"
        out.append(write_openb_pods(make_variant(pods, cluster, v, seed), path))
    return out


def run_variant(base: VariantBase, job: tuple[str, str, int]) -> RunResult:
    """One replay, wherever ``spread_map`` runs it: (variant label, policy, seed) of ``base``."""
    label, policy, seed = job
    return replay(_variant_workload(base, label, seed), policy, seed)


def variant_sweep(
    trace_dir: Path,
    base: str,
    variants: Sequence[Variant],
    policies: Sequence[str],
    seeds: Sequence[int],
    workers: int = 2,
    *,
    ray: str | None = None,
) -> list[RunResult]:
    """Every (variant, seed, policy) replay, on ``workers`` processes (1: in this one) or on
    the Ray cluster at ``ray``. The base list is read here and travels with the replays, so
    only this process reads trace files; a (variant, seed)'s replays go together (one
    process, one Ray task), so each variant is built once."""
    jobs = [(v.label, p, s) for v in variants for s in seeds for p in policies]
    return spread_map(
        run_variant,
        jobs,
        load_base(trace_dir, base),
        workers=workers,
        ray=ray,
        chunksize=max(1, len(policies)),
    )


@dataclass(frozen=True)
class CellRow:
    """One cell and policy: medians over seeds and their range (unallocated GPU %)."""

    cell: str
    policy: str
    seeds: int
    unalloc100: float
    unalloc130: float
    min100: float
    max100: float
    min130: float
    max130: float


def cell_rows(runs: Sequence[RunResult]) -> list[CellRow]:
    """One row per (cell, policy), in the order they first appear in ``runs``."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in runs:
        groups.setdefault((r.workload, r.policy), []).append(r)
    out = []
    for (cell, policy), rs in groups.items():
        u100 = [r.unalloc_pct[0] for r in rs]
        u130 = [r.unalloc_pct[1] for r in rs]
        out.append(
            CellRow(
                cell,
                policy,
                len(rs),
                statistics.median(u100),
                statistics.median(u130),
                min(u100),
                max(u100),
                min(u130),
                max(u130),
            )  # fmt: skip
        )
    return out


@dataclass(frozen=True)
class Verdict:
    """How ``policy`` did against ``baseline`` over the cells (medians of unallocated %)."""

    policy: str
    baseline: str
    cells: int
    at_most_100: int
    """Cells where the policy left at most the baseline's share at 100% load."""
    at_most_130: int
    mean_ratio_100: float
    """Mean over cells of policy / baseline at 100% load."""
    mean_ratio_130: float
    worst_100: tuple[str, float]
    """The cell with the highest ratio at 100% load, and that ratio."""
    worst_130: tuple[str, float]


def _ratio(ours: float, theirs: float) -> float:
    """``ours / theirs``; where the baseline left nothing, 1 if we did too, else infinity."""
    if theirs > 0:
        return ours / theirs
    return 1.0 if ours <= 0 else float("inf")


def verdict(rows: Sequence[CellRow], policy: str, baseline: str = "FGD") -> Verdict:
    """``policy`` against ``baseline`` on every cell both ran."""
    by = {(r.cell, r.policy): r for r in rows}
    cells = [
        c for c in dict.fromkeys(r.cell for r in rows) if (c, policy) in by and (c, baseline) in by
    ]
    if not cells:
        raise ValueError(f"no cell has both {policy} and {baseline}")
    r100 = {c: _ratio(by[(c, policy)].unalloc100, by[(c, baseline)].unalloc100) for c in cells}
    r130 = {c: _ratio(by[(c, policy)].unalloc130, by[(c, baseline)].unalloc130) for c in cells}
    w100 = max(r100.items(), key=lambda kv: kv[1])
    w130 = max(r130.items(), key=lambda kv: kv[1])
    return Verdict(
        policy,
        baseline,
        len(cells),
        sum(1 for c in cells if by[(c, policy)].unalloc100 <= by[(c, baseline)].unalloc100),
        sum(1 for c in cells if by[(c, policy)].unalloc130 <= by[(c, baseline)].unalloc130),
        statistics.fmean(r100.values()),
        statistics.fmean(r130.values()),
        w100,
        w130,
    )
