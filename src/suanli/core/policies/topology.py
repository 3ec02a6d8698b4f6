"""placement/topology: best fit at every level of the fabric, so that gangs stay inside one
NVLink domain or rack (``suanli.core.topology``: a gang across racks steps over the network).

A job on one node goes to the node left with the least free capacity (as ``best-fit``); among
equally good nodes, to the one whose NVLink domain, then rack, has the least free GPU share,
so that small jobs fill the domains already in use and whole domains stay free. A gang that
no node holds takes the lowest level that can hold it (``suanli.core.spread.by_level``).
"""

from __future__ import annotations

import numpy as np

from suanli.core.registry import register
from suanli.core.seams import Placement, remaining_after
from suanli.core.spread import by_level


@register("placement", "topology")
class TopologyFit(Placement):
    """Best fit on the node, then the fullest domain, then the fullest rack; gangs at the
    lowest level that holds them."""

    def score(self, view, task, count, nodes, rng):  # type: ignore[no-untyped-def]
        free = view.node_free_milli
        domain = np.bincount(view.node_domain, weights=free)[view.node_domain[nodes]]
        rack = np.bincount(view.node_rack, weights=free)[view.node_rack[nodes]]
        order = np.lexsort((nodes, rack, domain, remaining_after(view, task, count, nodes)))
        ranks = np.empty(len(nodes), dtype=np.float64)
        ranks[order] = np.arange(len(nodes))
        return ranks

    def spread(self, view, k, count, score):  # type: ignore[no-untyped-def]
        return by_level(view, k, count, score)
