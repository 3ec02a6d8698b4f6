"""Speed bases: the hardware a workload's runtimes were measured on, and each node's pace.

A job's ``runtime`` is seconds of work on its workload's *basis*:

* the reference basis (:data:`REFERENCE`: no native models, speed 1.0): seconds on a GPU of
  speed 1.0 (V100 = 1.0, ``KNOWN_GPU_MODELS``). A GPU of speed ``s`` runs them in
  ``runtime / s``. Synthetic workloads, and any job list given without a basis, use it.
* a trace's native basis (:func:`native_basis`): the GPU models the trace was recorded on
  (``native``) and ``speed``, ``s_native``, their GPU-weighted mean speed on the trace's own
  machines. **Rule**: a native model runs a job in its recorded ``runtime``, whatever its
  own speed (a Philly job measured on a K80 or a P40 takes its recorded time on either); any
  other model of speed ``s`` runs it in ``runtime × s_native / s``.

Both are one formula: a node's *effective speed* is 1.0 on a native model and ``s /
s_native`` on any other (``s`` itself under the reference basis, bit for bit), and 1.0
without GPUs. A job runs ``runtime × tasks / started tasks / e`` with ``e`` the least
effective speed of its placement. The table is made once per replay
(``ClusterView.node_speed``), so no job carries a field for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from suanli.core.model import ClusterSpec, GpuModel, SpecError


@dataclass(frozen=True, slots=True)
class SpeedBasis:
    """What runtimes are measured on: the ``native`` GPU model names and ``speed``, the
    GPU-weighted mean speed of those models (``s_native``). No native models and speed 1.0
    is the reference basis. See the module docstring for the rule."""

    native: tuple[str, ...] = ()
    speed: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speed) and self.speed > 0):
            raise SpecError(f"speed basis: speed must be a number > 0, got {self.speed}")
        for name in self.native:
            if not isinstance(name, str) or not name:
                raise SpecError(f"speed basis: native GPU model names must be names, got {name!r}")
        if len(set(self.native)) != len(self.native):
            raise SpecError(f"speed basis: a native GPU model is named twice in {self.native}")

    @property
    def is_reference(self) -> bool:
        """True for the reference basis (V100 = 1.0, nothing native)."""
        return not self.native and self.speed == 1.0

    def effective(self, model: GpuModel | None) -> float:
        """The effective speed of a GPU of ``model`` (None: no GPUs, 1.0)."""
        if model is None or model.name in self.native:
            return 1.0
        return model.speed / self.speed

    def node_speeds(self, cluster: ClusterSpec) -> list[float]:
        """The effective speed of every node of ``cluster``, in node order."""
        cache: dict[GpuModel | None, float] = {}
        out = []
        for nd in cluster.nodes:
            m = nd.gpu_model
            e = cache.get(m)
            if e is None:
                e = cache[m] = self.effective(m)
            out.append(e)
        return out

    def scaled(self, cluster: ClusterSpec) -> dict[str, float]:
        """The models of ``cluster`` that are not native, with their duration factor
        ``s_native / s`` (the reciprocal of their effective speed)."""
        return {
            m.name: self.speed / m.speed for m in cluster.gpu_models if m.name not in self.native
        }

    def describe(self, cluster: ClusterSpec) -> str:
        """One line: the native models and, for the others on ``cluster``, the scaling."""
        if not self.native:
            head = f"runtimes at speed {self.speed:g} (V100 = 1.0), no native GPU models"
        else:
            head = (
                f"native GPU models: {', '.join(self.native)} (GPU-weighted speed {self.speed:.4g})"
            )
        here = [m.name for m in cluster.gpu_models if m.name in self.native]
        other = [m for m in cluster.gpu_models if m.name not in self.native]
        if not other:
            return f"{head}; every GPU here is native: durations as recorded"
        scaled = ", ".join(
            f"{m.name} (speed {m.speed:g}) duration × {self.speed / m.speed:.4g}" for m in other
        )
        as_recorded = f"{', '.join(here)} as recorded, " if here else ""
        return f"{head}; on this cluster: {as_recorded}{scaled}"

    def as_dict(self, cluster: ClusterSpec) -> dict[str, Any]:
        """JSON-ready: ``native``, ``native_speed`` and, per non-native model of ``cluster``,
        its duration factor."""
        return {
            "native": list(self.native),
            "native_speed": self.speed,
            "duration_factor": self.scaled(cluster),
        }


REFERENCE = SpeedBasis()
"""The reference basis: runtimes in seconds at speed 1.0 (V100-class)."""


def gpu_weighted_speed(gpus_by_model: Mapping[GpuModel, int]) -> float:
    """The mean speed of ``gpus_by_model``'s GPUs, each model weighted by its GPU count."""
    total = sum(gpus_by_model.values())
    if total <= 0:
        raise SpecError("a speed basis needs at least one GPU")
    return math.fsum(m.speed * n for m, n in gpus_by_model.items()) / total


def native_basis(cluster: ClusterSpec, models: Iterable[str] | None = None) -> SpeedBasis:
    """The basis of a trace recorded on ``cluster``: ``models`` native (default: every GPU
    model of ``cluster``, in its order), ``speed`` their GPU-weighted mean speed on
    ``cluster``. ``SpecError`` for a name that is not a GPU model of ``cluster`` (naming
    those that are), for none, and for a cluster without GPUs."""
    counts: dict[str, int] = {}
    by_name: dict[str, GpuModel] = {}
    for nd in cluster.nodes:
        if nd.gpu_model is not None and nd.gpus:
            by_name.setdefault(nd.gpu_model.name, nd.gpu_model)
            counts[nd.gpu_model.name] = counts.get(nd.gpu_model.name, 0) + nd.gpus
    if not counts:
        raise SpecError(f"cluster {cluster.name} has no GPUs to be a trace's native hardware")
    names = list(by_name) if models is None else list(dict.fromkeys(models))
    if not names:
        raise SpecError("a trace's native GPU models: name at least one")
    for name in names:
        if name not in by_name:
            raise SpecError(
                f"unknown native GPU model {name!r}: cluster {cluster.name} has "
                f"{', '.join(by_name)}"
            )
    speed = gpu_weighted_speed({by_name[n]: counts[n] for n in names})
    return SpeedBasis(tuple(names), speed)
