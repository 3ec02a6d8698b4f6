"""placement/packing: fill GPUs and nodes already in use before touching idle ones."""

from __future__ import annotations

import numpy as np

from suanli.core.model import MILLI
from suanli.core.registry import register
from suanli.core.seams import Placement, remaining_after


@register("placement", "packing")
class Packing(Placement):
    """Prefer partly used GPUs (fractional tasks), then active nodes, then idle ones; best-fit within."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        idle = view.node_free_milli[nodes] == view.node_gpus[nodes] * MILLI
        idle &= view.free_cpu[nodes] == view.cap_cpu[nodes]
        tier = idle.astype(np.float64)  # 0: active node, 1: idle node
        if task.gpus == 1 and task.gpu_milli < MILLI:
            fm = view.gpu_free_milli[nodes]
            shared_fit = (fm >= task.gpu_milli) & (fm < MILLI)
            if task.gpu_memory_mib:
                shared_fit &= view.gpu_free_mem[nodes] >= task.gpu_memory_mib
            tier = tier + (~shared_fit.any(axis=1))  # 0: a partly used GPU fits it
        # Tiers dominate: remaining_after is at most a few 100k milli-GPU.
        return tier * 1e9 + remaining_after(view, task, count, nodes)
