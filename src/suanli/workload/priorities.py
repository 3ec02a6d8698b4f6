"""Priority classes and checkpoints for traces that record neither.

Training traces such as Philly give every job the same (``normal``) priority and no
checkpoint interval, yet multi-tenant policies (priority order, preemption) only differ when
jobs have classes and evictions cost something finite. ``assign_priorities`` draws a class per
job from a *mix* (class name → weight) with a seeded generator; ``with_checkpoints`` gives
jobs a checkpoint interval.

Defaults:

* ``TRAINING_PRIORITY_MIX``: the openb-calibrated ``PRIORITY_MIX`` of
  ``suanli.workload.calibration`` (openb_pod_list_default.csv qos: non-BE pods -> online +
  high, BE pods -> normal + spot, BE split evenly between normal and spot) without ``online``
  (training jobs are not online services), renormalised: high 0.49 / 0.91 = 0.538, normal and
  spot 0.21 / 0.91 = 0.231 each.
* ``DEFAULT_CHECKPOINT_INTERVAL`` = 1,800 s: ASSUMPTION, no trace here records how often
  training jobs save their progress; half an hour is a common setting for jobs that run for
  hours, and it bounds the work an eviction destroys to 30 minutes per attempt.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from suanli.core.model import DEFAULT_PRIORITY_CLASSES, Job, PriorityClass, SpecError
from suanli.workload.calibration import PRIORITY_MIX

Mix = Mapping[str, float] | Iterable[tuple[str, float]]
"""A priority mix: class name → weight (weights need not sum to 1; they are normalised)."""


def _training_mix() -> tuple[tuple[str, float], ...]:
    kept = [(name, w) for name, w in PRIORITY_MIX if name != "online"]
    total = sum(w for _, w in kept)
    return tuple((name, w / total) for name, w in kept)


TRAINING_PRIORITY_MIX: tuple[tuple[str, float], ...] = _training_mix()
"""Default mix for training traces without priorities: ``PRIORITY_MIX`` without ``online``,
renormalised (high ≈ 0.538, normal ≈ 0.231, spot ≈ 0.231)."""

DEFAULT_CHECKPOINT_INTERVAL = 1_800.0
"""Seconds of running between checkpoints: ASSUMPTION (see the module docstring)."""


def normalise_mix(
    mix: Mix, classes: Mapping[str, PriorityClass] | None = DEFAULT_PRIORITY_CLASSES
) -> tuple[tuple[str, float], ...]:
    """``mix`` as (class, share) pairs whose shares sum to 1, in the given order.

    ``SpecError`` if the mix is empty, names a class twice (or an empty name), has a weight
    that is negative or not finite, has no positive weight, or (with ``classes``) names a
    class that ``classes`` does not define. ``classes=None`` accepts any name.
    """
    items = list(mix.items()) if isinstance(mix, Mapping) else list(mix)
    if not items:
        raise SpecError("priority mix: at least one class is required")
    seen: set[str] = set()
    weights: list[float] = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise SpecError(f"priority mix: expected (class, weight) pairs, got {item!r}")
        name, weight = item
        if not isinstance(name, str) or not name:
            raise SpecError(f"priority mix: class names must be non-empty strings, got {name!r}")
        if name in seen:
            raise SpecError(f"priority mix: class {name!r} is given twice")
        seen.add(name)
        if classes is not None and name not in classes:
            raise SpecError(
                f"priority mix: unknown priority class {name!r} (classes: {', '.join(classes)})"
            )
        try:
            w = float(weight)
        except (TypeError, ValueError):
            w = math.nan
        if isinstance(weight, bool) or not (math.isfinite(w) and w >= 0):
            raise SpecError(f"priority mix: weight of {name!r} must be >= 0, got {weight!r}")
        weights.append(w)
    total = sum(weights)
    if total <= 0:
        raise SpecError("priority mix: at least one weight must be > 0")
    return tuple((item[0], w / total) for item, w in zip(items, weights, strict=True))


def assign_priorities(
    jobs: Sequence[Job],
    mix: Mix = TRAINING_PRIORITY_MIX,
    seed: int = 0,
    *,
    classes: Mapping[str, PriorityClass] | None = DEFAULT_PRIORITY_CLASSES,
) -> list[Job]:
    """``jobs`` (same order) with ``priority_class`` drawn independently per job from ``mix``.

    The draw uses ``numpy.random.default_rng(seed)``: one uniform per job, in the order given,
    mapped to a class by the mix's cumulative shares. The same jobs, mix and seed give the
    same classes. ``classes`` checks the mix's names (see ``normalise_mix``).
    """
    if seed < 0:
        raise SpecError(f"priority seed must be >= 0, got {seed}")
    shares = normalise_mix(mix, classes)
    names = [name for name, _ in shares]
    cum = np.cumsum([s for _, s in shares])
    cum[-1] = 1.0  # the last class takes any rounding shortfall
    u = np.random.default_rng(seed).random(len(jobs))
    picks = np.searchsorted(cum, u, side="right").tolist()
    return [
        j if j.priority_class == names[k] else dataclasses.replace(j, priority_class=names[k])
        for j, k in zip(jobs, picks, strict=True)
    ]


def with_checkpoints(
    jobs: Sequence[Job], interval: float = DEFAULT_CHECKPOINT_INTERVAL
) -> list[Job]:
    """``jobs`` (same order) with ``checkpoint_interval = interval`` where they have none.

    A job that already records its own interval keeps it (a trace's figure beats the
    assumption). ``SpecError`` unless ``interval`` is a finite number > 0.
    """
    if not (math.isfinite(interval) and interval > 0):
        raise SpecError(f"checkpoint interval must be > 0 seconds, got {interval}")
    return [
        dataclasses.replace(j, checkpoint_interval=interval) if j.checkpoint_interval is None else j
        for j in jobs
    ]
