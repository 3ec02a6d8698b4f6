"""The loop's inventory watch: nodes that join and leave an engine's cluster (``Inventory``,
a part of ``suanli.control.loop.Controller``).

A backend that runs on a cluster whose nodes come and go (the Ray backend) offers
``inventory()``: its live nodes now. Every ``ControlConfig.inventory_interval_s`` the loop
reads it and makes the scheduler agree:

- a node that left is marked unhealthy (read at once when a task was lost, since a lost
  task may be the first sign of a lost node; the backend may report a node it suspects as
  absent before its engine has declared it dead): nothing new is placed there; what ran there ends as
  its backend reports it (a lost task, requeued from its checkpoint), never because the
  inventory said so. A node that returns is healthy again, and in service unless an
  operator holds it (``suanli.control.hardware``).
- a node that joined (or whose size changed) rebuilds the scheduler over the new cluster, as
  a restart does (``recover``): running attempts are restored where they run, pending jobs
  resubmitted in order. The intake takes the new cluster too (``on_cluster``), so jobs that
  only the new node can hold are accepted from then on.
- the stored inventory (``nodes``, ``gpus``: what ``suanli nodes`` and the API show) follows.

A backend that cannot be asked (its engine is down) keeps the inventory as it was: an
outage is not a loss of nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from suanli.core.builder import Refusals
from suanli.core.model import ClusterSpec, NodeSpec
from suanli.store import jobs as js

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control")


def _size(n: NodeSpec) -> tuple[object, ...]:
    model = n.gpu_model.name if n.gpu_model is not None else None
    return (n.gpus, model, n.cpu_milli, n.memory_mib)


def node_rows(nodes: Sequence[NodeSpec], source: str) -> tuple[list[js.NodeRow], list[js.GpuRow]]:
    """The store's rows for ``nodes`` (GPUs by index, no UUIDs: an engine does not say)."""
    rows: list[js.NodeRow] = []
    gpus: list[js.GpuRow] = []
    for n in nodes:
        m = n.gpu_model
        rows.append(js.NodeRow(n.name, n.gpus, m.name if m else None, m.memory_mib if m else 0,
                               n.cpu_milli, n.memory_mib, n.healthy, source))  # fmt: skip
        if m is not None:
            gpus.extend(js.GpuRow(n.name, i, m.name, "", m.memory_mib) for i in range(n.gpus))
    return rows, gpus


def merged_cluster(name: str, live: Sequence[NodeSpec], known: Sequence[NodeSpec]) -> ClusterSpec:
    """``live`` nodes (healthy), then ``known`` ones no longer live (unhealthy, so that what
    still ran there can be restored and found lost), each name once."""
    seen = {n.name for n in live}
    gone = [replace(n, healthy=False) for n in known if n.name not in seen]
    return ClusterSpec(name, (*(replace(n, healthy=True) for n in live), *gone))


class Inventory:
    """The inventory-watching part of ``Controller`` (see the module docstring)."""

    def _watch_inventory(self: Controller, now: float, at_once: bool = False) -> None:
        """Read the backend's nodes if the interval has passed, or ``at_once`` (a task was
        just lost: its node may be gone, and the job must not be placed there again)."""
        read = getattr(self.backend, "inventory", None)
        if read is None:
            return
        if not at_once and now - self.inventory_at < self.config.inventory_interval_s:
            return
        self.inventory_at = now
        try:
            live = list(read())
        except Exception as e:  # noqa: BLE001 - an engine outage is not a loss of nodes
            log.warning("inventory: the backend could not say its nodes (%s); kept as was", e)
            return
        self.apply_inventory(live, now)

    def apply_inventory(self: Controller, live: Sequence[NodeSpec], now: float) -> bool:
        """Make the scheduler agree with ``live`` (the engine's nodes now); True if the
        scheduler was rebuilt (a node joined or changed size)."""
        cluster = self.config.cluster
        by_name = {n.name: n for n in live}
        known = {n.name: n for n in cluster.nodes}
        grown = [n for n in live if n.name not in known or _size(known[n.name]) != _size(n)]
        if grown:
            new = merged_cluster(cluster.name, live, cluster.nodes)
            log.info("inventory: %s joined or changed: the scheduler is rebuilt over %d nodes",
                     ", ".join(n.name for n in grown), len(new.nodes))  # fmt: skip
            self._store_inventory(new.nodes, now)
            self.set_cluster(new)
            return True
        changed = [f"{n.name} {'returned' if n.name in by_name else 'left'}"
                   for n in cluster.nodes if n.healthy != (n.name in by_name)]  # fmt: skip
        if changed:
            log.info("inventory: %s", "; ".join(changed))
            nodes = tuple(replace(n, healthy=n.name in by_name) for n in cluster.nodes)
            self.config = replace(self.config, cluster=ClusterSpec(cluster.name, nodes))
            for i in range(len(nodes)):
                self._set_usable(i)  # in service if up and no operator holds it
            self._store_inventory(nodes, now)
        return False

    def set_cluster(self: Controller, cluster: ClusterSpec) -> None:
        """Schedule over ``cluster`` from now on: the scheduler rebuilt as on a restart."""
        self.config = replace(self.config, cluster=cluster)
        self.refusals = Refusals(cluster, self.config.setting)
        self.node_names = [n.name for n in cluster.nodes]
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        self._reset()
        self.recover()
        if self.on_cluster is not None:
            self.on_cluster(cluster)

    def _store_inventory(self: Controller, nodes: Sequence[NodeSpec], now: float) -> None:
        rows, gpus = node_rows(nodes, self.inventory_source)
        js.sync_inventory(self.store, rows, gpus, round(now * 1000))
