"""Spreading a gang that no single node can hold: which nodes, how many tasks on each.

Two rules, each a ``Placement.spread`` (``suanli.core.seams``):

- ``compact`` (every placement's default): the fewest nodes; among layouts with that many
  nodes, one NVLink domain, else one rack. Nodes are taken most-capacity first, policy
  score next, node index last.
- ``by_level`` (``placement/topology``): the lowest level of the fabric that can hold the
  gang, as Slurm's ``topology/tree`` picks the lowest switch: one NVLink domain, else one
  rack, else the fewest racks. Among the domains (or racks) that can hold it, the one left
  with the least spare room (best fit: whole domains stay free for the next large gang), then
  the one that needs the fewest nodes. Across racks, the racks with the most room first
(as much room on fewer nodes next).

``k`` is the per-node count of the gang's tasks that fit now; ``score`` the placement's
score of each node with ``k > 0`` for one task (lower wins), in node order.
"""

from __future__ import annotations

import numpy as np

from suanli.core.view import ClusterView

__all__ = ["by_level", "compact"]


def _take(
    nodes: np.ndarray, kk: np.ndarray, order: np.ndarray, count: int
) -> list[tuple[int, int]]:
    chosen: list[tuple[int, int]] = []
    left = count
    for i in order:
        take = int(min(kk[i], left))
        chosen.append((int(nodes[i]), take))
        left -= take
        if left == 0:
            break
    return chosen


def _need(kk: np.ndarray, sel: np.ndarray, count: int) -> int:
    """Nodes it takes to hold ``count`` tasks from ``sel`` (in that order)."""
    return int(np.searchsorted(np.cumsum(kk[sel]), count) + 1)


def _candidates(k: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nodes that fit a task, their task counts, and their order: most capacity first,
    then policy score, then node index (lexsort: the last key is primary)."""
    nodes = k.nonzero()[0]
    kk = k[nodes]
    return nodes, kk, np.lexsort((nodes, score, -kk))


def compact(
    view: ClusterView, k: np.ndarray, count: int, score: np.ndarray
) -> list[tuple[int, int]]:
    """The fewest nodes, then one domain, then one rack (module docstring)."""
    nodes, kk, order = _candidates(k, score)
    need_global = _need(kk, order, count)

    for groups in (view.node_domain[nodes], view.node_rack[nodes]):
        best_group, best_need = -1, need_global + 1
        totals = np.bincount(groups, weights=kk)
        for grp in (totals >= count).nonzero()[0]:
            need = _need(kk, order[groups[order] == grp], count)
            if need < best_need:
                best_group, best_need = int(grp), need
        if best_group >= 0 and best_need == need_global:
            order = order[groups[order] == best_group]
            break
    return _take(nodes, kk, order, count)


def by_level(
    view: ClusterView, k: np.ndarray, count: int, score: np.ndarray
) -> list[tuple[int, int]]:
    """The lowest level that holds the gang, best fit among its groups (module docstring)."""
    nodes, kk, order = _candidates(k, score)
    for groups in (view.node_domain[nodes], view.node_rack[nodes]):
        totals = np.bincount(groups, weights=kk)
        fits = (totals >= count).nonzero()[0]
        if not len(fits):
            continue
        # Least spare room, then fewest nodes, then group index.
        best = min(
            fits, key=lambda g: (totals[g] - count, _need(kk, order[groups[order] == g], count), g)
        )
        return _take(nodes, kk, order[groups[order] == best], count)
    racks = view.node_rack[nodes]
    room = np.bincount(racks, weights=kk)[racks]
    size = np.bincount(racks)[racks]
    # The racks with the most room first (the fewest racks), as much room on fewer nodes
    # next, each rack's nodes together.
    order = np.lexsort((nodes, score, -kk, racks, size, -room))
    return _take(nodes, kk, order, count)
