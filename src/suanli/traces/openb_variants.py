"""Workload variants of an openb pod list, along the dimensions the FGD artifact varies.

The FGD paper (Weng et al., USENIX ATC'23) measures its placements on openb pod lists that
differ from the default list in one make-up at a time: the share of GPU-sharing pods
(``gpushare*``), of multi-GPU pods (``multigpu*``), of pods constrained to GPU models
(``gpuspec*``) and the CPU that pods ask (``cpu*``). ``make_variant`` builds such a list from
any openb pod list, seeded, so that a placement can be measured on workloads nobody tuned it
on; ``write_openb_pods`` writes it in openb's format, which every reader of ``openb_pod_list``
files takes (``suanli bench fgd --pods FILE``, ``--variants``).

A ``Variant`` names the make-up it wants; each dimension left at ``None`` (or 1.0) stays as the
source list has it, and a variant that changes nothing is the source list itself. Dimensions:

- ``share``: the GPU-sharing pods' share of the list's GPU request (1 GPU, ``gpu_milli`` <
  1000; openb's default list: 28.5%, its ``gpushare40``: 40.1%);
- ``multi``: the multi-GPU pods' share of the GPU request (default 7.3%, ``multigpu20``
  20.4%). The kinds of GPU pod not asked for (sharing, multi-GPU, one whole GPU) share what
  is left in the proportions the source has between them, as the artifact's lists do
  (``multigpu20``'s sharing pods: 28.5% × 79.6 / 92.7 = 24.4%); ``share + multi <= 1``;
- ``spec``: the share of the GPU request held by pods constrained to GPU models (the
  artifact's ``gpuspec*`` axis: "in terms of GPU requests"). Constraints are drawn from
  ``CONSTRAINT_MIX``, the mix a real constrained openb list shows, kept to the models the node
  list has and to constraints some node of those models can hold the pod on;
- ``cpu``: every GPU pod's CPU × this factor (at most the CPU of the largest node that could
  hold the pod, so that no pod becomes impossible); not an axis of the artifact's;
- ``cpu_only``: the CPU-only pods' share of the pods (the artifact's ``cpu*`` axis, "in terms
  of task number": ``cpu050`` 5%, ``cpu250`` 25%; the default list 13.3%).

How a share is reached: the pods of that kind are the source's, with copies of pods of the
same kind drawn uniformly at random (with replacement) appended while the kind's total is
below its target, or pods of the kind removed at random while it is above; the GPU request of
the whole list stays the source's (so the FGD protocol's tuning to 1.3 × capacity works as on
the source). Constraints are then set or lifted on GPU pods chosen at random, and CPU scaled.
Copies are named ``<name>-v<k>``; every other column is copied as it stands.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from suanli.core.model import MILLI, ClusterSpec
from suanli.traces.openb import POD_COLUMNS, POD_OPTIONAL, OpenbPods

CONSTRAINT_MIX: Mapping[frozenset[str], int] = {
    frozenset({"T4"}): 72,
    frozenset({"P100"}): 17,
    frozenset({"V100M16", "V100M32"}): 17,
    frozenset({"G2"}): 16,
    frozenset({"G2", "P100", "T4", "V100M16", "V100M32"}): 5,
    frozenset({"P100", "V100M16", "V100M32"}): 5,
    frozenset({"G3"}): 4,
    frozenset({"P100", "T4", "V100M16", "V100M32"}): 2,
    frozenset({"V100M32"}): 1,
    frozenset({"A10", "G2", "T4", "V100M16", "V100M32"}): 1,
}
"""Counts of the constraints among the 140 constrained pods of two samples (rows 0-219 and
3456-3676) of the FGD artifact's ``openb_pod_list_gpuspec33`` (hkust-adsl/
kubernetes-scheduler-simulator, ``data/csv/``): a real constrained list asks for T4 far more
than its share of GPUs (51% of constraints, 14% of GPUs)."""


class VariantError(ValueError):
    """A variant that cannot be built from this pod list (what and why)."""


@dataclass(frozen=True)
class Variant:
    """The make-up a variant asks for (None, or 1.0 for ``cpu``: as the source list)."""

    share: float | None = None
    multi: float | None = None
    spec: float | None = None
    cpu: float = 1.0
    cpu_only: float | None = None

    def __post_init__(self) -> None:
        for f in ("share", "multi", "spec", "cpu_only"):
            v = getattr(self, f)
            if v is not None and not 0.0 <= v <= 1.0:
                raise VariantError(f"{f} must be a share in 0..1, got {v}")
        if self.cpu_only is not None and self.cpu_only >= 1.0:
            raise VariantError(f"cpu_only must be below 1, got {self.cpu_only}")
        if not (self.cpu > 0 and math.isfinite(self.cpu)):
            raise VariantError(f"cpu must be a factor > 0, got {self.cpu}")
        if (self.share or 0.0) + (self.multi or 0.0) > 1.0 + 1e-9:
            raise VariantError(
                f"share ({self.share}) + multi ({self.multi}) is more than the whole GPU request"
            )

    @property
    def label(self) -> str:
        """``share=0.4,cpu=2`` (``source`` for a variant that changes nothing)."""
        parts = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or (f.name == "cpu" and v == 1.0):
                continue
            parts.append(f"{f.name}={v:g}")
        return ",".join(parts) or "source"

    @classmethod
    def parse(cls, text: str) -> Variant:
        """``share=0.4,cpu=2`` (``source``: none changed) as a Variant."""
        text = text.strip()
        if text in ("", "source"):
            return cls()
        known = {f.name for f in fields(cls)}
        values: dict[str, float] = {}
        for part in text.split(","):
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or name not in known:
                raise VariantError(
                    f"{part!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}"
                )
            try:
                values[name] = float(value)
            except ValueError:
                raise VariantError(f"{part!r}: {value!r} is not a number") from None
        return cls(**values)  # type: ignore[arg-type]


def _kinds(pods: OpenbPods) -> dict[str, np.ndarray]:
    n, milli = pods.num_gpu, pods.gpu_milli
    return {
        "share": (n == 1) & (milli < MILLI),
        "single": (n == 1) & (milli >= MILLI),
        "multi": n > 1,
        "cpu_only": n == 0,
    }


def _adjust(
    idx: np.ndarray, size: np.ndarray, target: float, rng: np.random.Generator, kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(kept, copies)``: indices of the pods of one kind (``idx``, each of ``size``) kept,
    and of those copied, so that their sizes sum to about ``target``: random copies while
    below, random removals while above (each step keeps the sum as near the target as one
    pod allows)."""
    none = np.zeros(0, dtype=np.int64)
    total = float(size[idx].sum())
    if target <= 0:
        return none, none
    if not len(idx):
        raise VariantError(f"the list has no {kind} pods to make {target:g} of them from")
    if total < target:
        extra: list[int] = []
        while total < target:
            i = int(idx[rng.integers(len(idx))])
            if total + size[i] - target > target - total:  # the copy overshoots by more
                break
            extra.append(i)
            total += float(size[i])
        return idx, np.array(extra, dtype=np.int64)
    keep = np.ones(len(idx), dtype=bool)
    for j in rng.permutation(len(idx)).tolist():
        if total <= target:
            break
        s = float(size[idx[j]])
        if target - (total - s) > total - target:  # removing it undershoots by more
            continue
        keep[j] = False
        total -= s
    return idx[keep], none


def _constraints(
    cluster: ClusterSpec, mix: Mapping[frozenset[str], int]
) -> list[tuple[frozenset[str], float]]:
    have = {n.gpu_model.name for n in cluster.nodes if n.gpu_model is not None}
    usable = [(m & have, w) for m, w in mix.items() if m & have]
    merged: dict[frozenset[str], float] = {}
    for m, w in usable:
        merged[m] = merged.get(m, 0.0) + w
    if not merged:  # none of the mix's models: constrain to one model, by its GPUs
        gpus: dict[str, int] = {}
        for n in cluster.nodes:
            if n.gpu_model is not None:
                gpus[n.gpu_model.name] = gpus.get(n.gpu_model.name, 0) + n.gpus
        merged = {frozenset({m}): float(g) for m, g in gpus.items()}
    return sorted(merged.items(), key=lambda kv: (-kv[1], sorted(kv[0])))


class _Nodes:
    """The node list's largest CPU by (GPUs a pod asks, acceptable models), cached."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.nodes = [(n.gpus, n.gpu_model.name, n.cpu_milli) for n in cluster.nodes if n.gpu_model]
        self._cache: dict[tuple[int, frozenset[str]], int] = {}

    def largest_cpu(self, gpus: int, models: frozenset[str]) -> int:
        """The most CPU of a node with at least ``gpus`` GPUs (of ``models``; any if empty)."""
        key = (gpus, models)
        got = self._cache.get(key)
        if got is None:
            got = max(
                (c for g, m, c in self.nodes if g >= gpus and (not models or m in models)),
                default=0,
            )
            self._cache[key] = got
        return got


def make_variant(
    pods: OpenbPods,
    cluster: ClusterSpec,
    variant: Variant,
    seed: int,
    *,
    mix: Mapping[frozenset[str], int] = CONSTRAINT_MIX,
) -> OpenbPods:
    """The variant of ``pods`` (on ``cluster``'s node list) that ``variant`` asks for."""
    rng = np.random.default_rng(seed)
    kinds = _kinds(pods)
    demand = np.where(pods.num_gpu > 0, pods.num_gpu * pods.gpu_milli, 0).astype(np.float64)
    total_gpu = float(demand.sum())
    if total_gpu <= 0:
        raise VariantError(f"{pods.source.name}: no pod asks for a GPU")
    source = {k: float(demand[kinds[k]].sum()) / total_gpu for k in ("share", "multi", "single")}
    asked = {k: v for k, v in (("share", variant.share), ("multi", variant.multi)) if v is not None}
    # The kinds not asked for share what is left in the source's proportions between them.
    rest = {k: f for k, f in source.items() if k not in asked}
    left, weight = 1.0 - sum(asked.values()), sum(rest.values())
    if left > 1e-9 and weight <= 0:
        raise VariantError(
            f"{pods.source.name}: no {' or '.join(rest)} pods to make the rest of the GPU request"
        )
    fracs = {**asked, **{k: (f / weight * left if weight else 0.0) for k, f in rest.items()}}
    kept: list[np.ndarray] = []
    copies: list[np.ndarray] = []
    changed = variant.share is not None or variant.multi is not None
    for kind in ("share", "multi", "single"):
        frac = fracs[kind]
        idx = np.flatnonzero(kinds[kind])
        k, c = _adjust(idx, demand, frac * total_gpu, rng, kind) if changed else (idx, idx[:0])
        kept.append(k)
        copies.append(c)
    # The GPU pods: the source's kept ones in their order, then the copies.
    gpu_rows = np.concatenate((np.sort(np.concatenate(kept)), np.concatenate(copies)))
    specs = [pods.gpu_spec[i] for i in gpu_rows.tolist()]
    ngpu = pods.num_gpu[gpu_rows]
    if variant.spec is not None:
        _constrain(specs, demand[gpu_rows], ngpu, pods.cpu_milli[gpu_rows] * variant.cpu,
                   variant.spec, cluster, mix, rng)  # fmt: skip
    gpu_cpu = pods.cpu_milli[gpu_rows].copy()
    if variant.cpu != 1.0:
        nodes = _Nodes(cluster)
        for j in range(len(gpu_rows)):
            was = int(gpu_cpu[j])
            cap = max(nodes.largest_cpu(int(ngpu[j]), specs[j]), was)
            gpu_cpu[j] = max(1, min(int(round(was * variant.cpu)), cap))
    # CPU-only pods: their share of the pods as asked (default: the source's share).
    cpu_idx = np.flatnonzero(kinds["cpu_only"])
    cpu_copies = cpu_idx[:0]
    if variant.cpu_only is not None or changed:
        if variant.cpu_only is not None:
            cpu_share = float(variant.cpu_only)
        else:
            cpu_share = len(cpu_idx) / len(pods)
        target = cpu_share / (1.0 - cpu_share) * len(gpu_rows)
        cpu_idx, cpu_copies = _adjust(cpu_idx, np.ones(len(pods)), target, rng, "CPU-only")
    # The variant: the source's pods in their order, then the copies in the order made.
    n_gpu_kept = sum(len(k) for k in kept)
    rows = np.concatenate((gpu_rows[:n_gpu_kept], cpu_idx))
    order = np.argsort(rows, kind="stable")
    rows = np.concatenate((rows[order], gpu_rows[n_gpu_kept:], cpu_copies)).astype(np.int64)
    spec_of = specs[:n_gpu_kept] + [frozenset()] * len(cpu_idx)
    cpu_of = np.concatenate((gpu_cpu[:n_gpu_kept], pods.cpu_milli[cpu_idx]))
    spec_all = [spec_of[i] for i in order.tolist()] + specs[n_gpu_kept:]
    spec_all += [frozenset()] * len(cpu_copies)
    cpu_all = np.concatenate(
        (cpu_of[order], gpu_cpu[n_gpu_kept:], pods.cpu_milli[cpu_copies])
    ).astype(np.int64)
    out = pods.select(rows)
    n_kept = n_gpu_kept + len(cpu_idx)
    names = list(out.names)
    for j in range(n_kept, len(names)):
        names[j] = f"{names[j]}-v{j - n_kept}"
    return OpenbPods(
        source=pods.source,
        names=tuple(names),
        cpu_milli=cpu_all,
        memory_mib=out.memory_mib,
        num_gpu=out.num_gpu,
        gpu_milli=out.gpu_milli,
        gpu_spec=tuple(spec_all),
        qos=out.qos,
        pod_phase=out.pod_phase,
        creation_time=out.creation_time,
        deletion_time=out.deletion_time,
        scheduled_time=out.scheduled_time,
    )


def _constrain(
    specs: list[frozenset[str]],
    demand: np.ndarray,
    ngpu: np.ndarray,
    cpu: np.ndarray,
    share: float,
    cluster: ClusterSpec,
    mix: Mapping[frozenset[str], int],
    rng: np.random.Generator,
) -> None:
    """Set or lift constraints on GPU pods chosen at random (``specs`` in place) until the
    constrained pods hold about ``share`` of the GPU request (``demand``)."""
    total = float(demand.sum())
    want = share * total
    have = float(sum(demand[j] for j, s in enumerate(specs) if s))
    if want > have:
        nodes, choices = _Nodes(cluster), _constraints(cluster, mix)
        free = [j for j, s in enumerate(specs) if not s]
        rng.shuffle(free)
        for j in free:
            if have >= want:
                break
            d = float(demand[j])
            if have + d - want > want - have:  # constraining it overshoots by more
                continue
            s = _draw(choices, nodes, int(ngpu[j]), int(cpu[j]), rng)
            if s:
                specs[j] = s
                have += d
    elif want < have:
        constrained = [j for j, s in enumerate(specs) if s]
        rng.shuffle(constrained)
        for j in constrained:
            if have <= want:
                break
            d = float(demand[j])
            if want - (have - d) > have - want:  # lifting it undershoots by more
                continue
            specs[j] = frozenset()
            have -= d


def _draw(
    choices: Sequence[tuple[frozenset[str], float]],
    nodes: _Nodes,
    gpus: int,
    cpu: int,
    rng: np.random.Generator,
) -> frozenset[str]:
    """A constraint from ``choices`` by weight, among those a node can hold the pod on."""
    fit = [(m, w) for m, w in choices if nodes.largest_cpu(gpus, m) >= cpu]
    if not fit:
        return frozenset()
    w = np.array([x for _, x in fit])
    return fit[int(rng.choice(len(fit), p=w / w.sum()))][0]


def write_openb_pods(pods: OpenbPods, path: str | Path) -> Path:
    """Write ``pods`` as an openb pod list (the columns the source had, and ``gpu_spec``)."""
    path = Path(path)
    cols = list(POD_COLUMNS) + ["gpu_spec"]
    extra = {
        "qos": pods.qos,
        "pod_phase": pods.pod_phase,
        "creation_time": pods.creation_time,
        "deletion_time": pods.deletion_time,
        "scheduled_time": pods.scheduled_time,
    }
    cols += [c for c in POD_OPTIONAL if c in extra and extra[c] is not None]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for i in range(len(pods)):
            row: list[object] = [
                pods.names[i],
                int(pods.cpu_milli[i]),
                int(pods.memory_mib[i]),
                int(pods.num_gpu[i]),
                int(pods.gpu_milli[i]),
                "|".join(sorted(pods.gpu_spec[i])),
            ]
            for c in cols[6:]:
                v = extra[c]
                assert v is not None
                x = v[i]
                if c == "scheduled_time":
                    row.append("" if int(x) < 0 else int(x))
                else:
                    row.append(x if isinstance(x, str) else int(x))
            w.writerow(row)
    return path
