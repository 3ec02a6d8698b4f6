"""placement/dot-product: align the request with the node's free resources (Tetris).

Grandl et al., "Multi-Resource Packing for Cluster Schedulers" (SIGCOMM'14): score each node
by the dot product of the request vector and the node's free-resource vector, both normalised
by the node's capacity, and pick the largest.
"""

from __future__ import annotations

import numpy as np

from suanli.core.registry import register
from suanli.core.seams import Placement


@register("placement", "dot-product")
class DotProduct(Placement):
    """The node whose free (GPU, CPU, memory), normalised, best aligns with the request (Tetris)."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        gcap = np.maximum(view.node_gpus[nodes] * 1000, 1)
        ccap = np.maximum(view.cap_cpu[nodes], 1)
        mcap = np.maximum(view.cap_mem[nodes], 1)
        dot = (
            (count * task.gpu_share_milli / gcap) * (view.node_free_milli[nodes] / gcap)
            + (count * task.cpu_milli / ccap) * (view.free_cpu[nodes] / ccap)
            + (count * task.memory_mib / mcap) * (view.free_mem[nodes] / mcap)
        )
        return -dot
