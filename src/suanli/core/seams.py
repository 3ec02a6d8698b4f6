"""The policy seams of the scheduling cycle: ``QueueOrder`` and ``Placement``.

A queue order gives each job a *static* sort key (it never changes while the job waits, so
the pending queue can keep jobs in heaps). Keys end with the job id: every order is total.

A placement scores candidate nodes (lower is better; ties go to the lowest node index) and
picks the GPUs inside the chosen node. Gang mechanics (how many tasks fit where, fewest nodes,
one NVLink domain, one rack) are shared by all placements in ``suanli.core.gang``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from suanli.core.model import DEFAULT_PRIORITY_CLASSES, MILLI, Job, PriorityClass, TaskRequest
from suanli.core.view import FREE_SCORE_CPU, FREE_SCORE_MEM, ClusterView


@dataclass(frozen=True, slots=True)
class OrderContext:
    """What a queue order may know beyond the job itself."""

    priority_classes: Mapping[str, PriorityClass] = field(
        default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES)
    )

    def priority(self, job: Job) -> int:
        pc = self.priority_classes.get(job.priority_class)
        return pc.value if pc is not None else 0


class QueueOrder(Protocol):
    """Orders pending jobs; smaller keys go first."""

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]: ...


class Placement:
    """Base of all placements: node scores plus the choice of GPUs inside a node.

    Subclasses override ``score`` and, where their definition says so, ``pick_gpus``. The
    default GPU choice takes the lowest-index fully free GPUs for whole-GPU tasks and, for a
    fractional task, the fitting GPU with the least free share (ties: lowest index), which
    keeps whole GPUs free for whole-GPU work.
    """

    def score(
        self,
        view: ClusterView,
        task: TaskRequest,
        count: int,
        nodes: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Scores for placing ``count`` copies of ``task`` on each of ``nodes``; lower wins."""
        raise NotImplementedError

    def observe(self, job: Job) -> None:
        """A job was submitted (a placement that learns the workload counts it; default: no-op)."""

    def pick_gpus(
        self, view: ClusterView, node: int, task: TaskRequest, rng: np.random.Generator
    ) -> np.ndarray:
        """GPU indices on ``node`` for one ``task``; ``node`` is known to fit it."""
        fit = view.gpus_fitting(node, task)
        if task.gpus == 0:
            return fit[:0]
        if task.gpu_milli >= MILLI:
            return fit[: task.gpus]
        free = view.gpu_free_milli[node, fit]
        return fit[np.argmin(free) : np.argmin(free) + 1]


def remaining_after(
    view: ClusterView, task: TaskRequest, count: int, nodes: np.ndarray
) -> np.ndarray:
    """Free capacity left on each of ``nodes`` after placing ``count`` × ``task``, as one number.

    Lexicographic in effect: milli-GPU left first; the CPU share left (× 0.5) and the memory
    share left (× 0.25) stay below one milli-GPU and only break ties (``view.free_score``).
    """
    base = view.free_score[nodes]
    gpu = count * task.gpu_share_milli
    if view.uniform_caps:
        # Same capacity everywhere: the request costs every node the same.
        return base - (
            gpu + count * (task.cpu_milli * view.w_cpu[0] + task.memory_mib * view.w_mem[0])
        )
    return (
        base
        - gpu
        - (count * task.cpu_milli * FREE_SCORE_CPU) * view.inv_cpu[nodes]
        - (count * task.memory_mib * FREE_SCORE_MEM) * view.inv_mem[nodes]
    )
