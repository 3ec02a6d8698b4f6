"""Two tasks on one GPU (MPS or time-slicing): how much each slows the other.

A task of duty ``d`` alone keeps the GPU busy ``d`` of the time and progresses at rate 1.
Sharing a GPU with a task of duty ``d_o``, its kernels contend for memory bandwidth, caches
and schedulers: each runs ``1 + kappa d_o`` times longer, so the task progresses at
``1 / (1 + kappa d_o)`` and stays busy ``d`` of the time (fewer kernels per second, each
longer). If the two duties add past 1 the GPU is saturated and both stretch further by
``d + d_o``. The GPU is busy ``min(1, d + d_o)``.

Default ``kappa = 0.3``: Villarrubia et al., "A comprehensive evaluation of spatial
co-execution on GPUs using MPS and MIG technologies" (arXiv:2604.22430, 2026) measure MPS
co-execution worsening performance by about 30% under memory contention (and improving it
by up to 30% where kernels complement each other): the model takes the contended case, so
a co-location is never assumed to be free.

Memory is never shared: the two tasks' GPU memory must fit the GPU (``fits``), checked
before any co-location.
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.core.model import SpecError

DEFAULT_KAPPA = 0.3


@dataclass(frozen=True, slots=True)
class Interference:
    """The slowdown model of the module docstring."""

    kappa: float = DEFAULT_KAPPA

    def __post_init__(self) -> None:
        if not 0 <= self.kappa <= 10:
            raise SpecError(f"interference kappa must be in [0, 10], got {self.kappa}")

    def slowdown(self, duty: float, other: float) -> float:
        """How many times longer a task of ``duty`` takes beside one of duty ``other``."""
        return (1.0 + self.kappa * other) * max(1.0, duty + other)

    def rate(self, duty: float, other: float) -> float:
        """Progress of a task of ``duty`` beside one of duty ``other`` (1.0: alone)."""
        return 1.0 / self.slowdown(duty, other)


def busy(duty: float, other: float) -> float:
    """The share of time a GPU shared by tasks of these duties is busy."""
    return min(1.0, duty + other)


def fits(memory_mib: int, other_mib: int, gpu_memory_mib: int) -> bool:
    """Whether two tasks' GPU memory fits one GPU of ``gpu_memory_mib``."""
    return memory_mib + other_mib <= gpu_memory_mib
