"""placement/first-fit: the lowest-index node and GPU that fit."""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI, TaskRequest
from suanli.core.registry import register
from suanli.core.seams import Placement
from suanli.core.view import ClusterView


@register("placement", "first-fit")
class FirstFit(Placement):
    """The first node (by index) that fits, and its first GPUs that fit."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        return np.zeros(len(nodes))

    def pick_gpus(
        self, view: ClusterView, node: int, task: TaskRequest, rng: np.random.Generator
    ) -> np.ndarray:
        fit = view.gpus_fitting(node, task)
        return fit[: task.gpus if task.gpu_milli >= MILLI else 1]
