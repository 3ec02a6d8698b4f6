"""placement/worst-fit: spread, the node left with the most free capacity."""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI, TaskRequest
from suanli.core.registry import register
from suanli.core.seams import Placement, remaining_after
from suanli.core.view import ClusterView


@register("placement", "worst-fit")
class WorstFit(Placement):
    """Spread: the node with the most GPU share (then CPU, memory) left; the freest GPU."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        return -remaining_after(view, task, count, nodes)

    def pick_gpus(
        self, view: ClusterView, node: int, task: TaskRequest, rng: np.random.Generator
    ) -> np.ndarray:
        fit = view.gpus_fitting(node, task)
        if task.gpu_milli >= MILLI or task.gpus == 0:
            return fit[: task.gpus]
        i = int(np.argmax(view.gpu_free_milli[node, fit]))
        return fit[i : i + 1]
