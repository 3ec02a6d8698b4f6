"""placement/random: a uniformly random fitting node and GPU (from the seeded RNG)."""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI, TaskRequest
from suanli.core.registry import register
from suanli.core.seams import Placement
from suanli.core.view import ClusterView


@register("placement", "random")
class RandomFit(Placement):
    """A uniformly random node among those that fit, and random fitting GPUs on it."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        return rng.random(len(nodes))

    def pick_gpus(
        self, view: ClusterView, node: int, task: TaskRequest, rng: np.random.Generator
    ) -> np.ndarray:
        fit = view.gpus_fitting(node, task)
        want = task.gpus if task.gpu_milli >= MILLI else min(task.gpus, 1)
        if want == 0:
            return fit[:0]
        return np.sort(rng.choice(fit, size=want, replace=False))
