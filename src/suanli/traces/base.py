"""What the readers return, and the mappings several readers share.

- :class:`TraceJobs` is a ``list[Job]`` that also carries its :class:`SkipReport`.
- :class:`TraceCluster` is a :class:`ClusterSpec` that also carries its :class:`SkipReport`.
- :func:`gang_split` turns a job's GPU count into identical tasks (Philly and ITP).
- :func:`resolve_gpu_model` looks a model up by name or takes a :class:`GpuModel` as given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from suanli.core.model import KNOWN_GPU_MODELS, ClusterSpec, GpuModel, Job, SpecError
from suanli.traces.errors import SkipReport

GIB = 1024
"""MiB per GiB."""

# Job requests per GPU for the training traces (Philly, ITP), which record GPUs only.
# ASSUMPTION: 4 cores and 32 GiB of host memory per GPU, half of what the node assumption
# below gives each GPU, so that GPUs, not CPU or memory, decide where a training job fits.
JOB_CPU_MILLI_PER_GPU = 4000
JOB_MEMORY_MIB_PER_GPU = 32 * GIB

# Node capacity per GPU where a machine list gives GPUs only (Philly, ITP).
# ASSUMPTION: 8 cores and 64 GiB per GPU, the proportions of an 8-GPU V100 server
# (64 cores, 512 GiB).
NODE_CPU_MILLI_PER_GPU = 8000
NODE_MEMORY_MIB_PER_GPU = 64 * GIB

GPUS_PER_TASK = 8
"""The most GPUs one task of a split training job takes (one 8-GPU server)."""


class TraceJobs(list[Job]):
    """The jobs read from a trace, in submission order, with the report of skipped rows.

    ``skipped`` is None when the reader ran with ``skip_bad_rows=False`` (then every row was
    read, or it raised); otherwise the :class:`SkipReport`, possibly of zero rows.
    """

    def __init__(self, jobs: Iterable[Job] = (), skipped: SkipReport | None = None) -> None:
        super().__init__(jobs)
        self.skipped = skipped


@dataclass(frozen=True, slots=True)
class TraceCluster(ClusterSpec):
    """A :class:`ClusterSpec` read from a trace, with the report of skipped rows.

    ``skipped`` takes no part in equality or hashing; as for :class:`TraceJobs` it is None
    unless the reader ran with ``skip_bad_rows=True``.
    """

    skipped: SkipReport | None = field(default=None, compare=False, repr=False)


def gang_split(num_gpus: int, gpus_per_task: int = GPUS_PER_TASK) -> tuple[int, int]:
    """``(tasks, gpus_per_task)`` for a job of ``num_gpus`` GPUs.

    Up to ``gpus_per_task`` GPUs: one task of all of them. More: the fewest identical tasks of
    at most ``gpus_per_task`` GPUs each that together hold exactly ``num_gpus`` (16 -> 2 x 8,
    12 -> 2 x 6, 24 -> 3 x 8; a prime count above the limit, e.g. 11, becomes 11 x 1). The
    GPU count, and so the GPU-seconds, of the trace are kept exactly.
    """
    if num_gpus < 1:
        raise SpecError(f"a job needs at least one GPU to split, got {num_gpus}")
    if gpus_per_task < 1:
        raise SpecError(f"gpus_per_task must be >= 1, got {gpus_per_task}")
    if num_gpus <= gpus_per_task:
        return 1, num_gpus
    tasks = math.ceil(num_gpus / gpus_per_task)
    while num_gpus % tasks:
        tasks += 1
    return tasks, num_gpus // tasks


def resolve_gpu_model(
    model: str | GpuModel, models: Mapping[str, GpuModel] = KNOWN_GPU_MODELS
) -> GpuModel:
    """``model`` itself, or the model of that name in ``models`` (error listing the names)."""
    if isinstance(model, GpuModel):
        return model
    try:
        return models[model]
    except KeyError:
        raise SpecError(
            f"unknown GPU model {model!r}; known: {', '.join(sorted(models))} (or pass a GpuModel)"
        ) from None


def check_positive(name: str, value: float) -> None:
    """Raise SpecError unless ``value`` > 0 (for the numeric assumptions readers take)."""
    if not value > 0:
        raise SpecError(f"{name} must be > 0, got {value}")


def check_non_negative(name: str, value: float) -> None:
    """Raise SpecError unless ``value`` >= 0."""
    if not value >= 0:
        raise SpecError(f"{name} must be >= 0, got {value}")
