"""placement/best-fit: the node left with the least free capacity."""

from __future__ import annotations

from suanli.core.registry import register
from suanli.core.seams import Placement, remaining_after


@register("placement", "best-fit")
class BestFit(Placement):
    """The node with the least GPU share (then CPU, memory) left after placing; tightest GPU."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        return remaining_after(view, task, count, nodes)
