"""The stored inventory: nodes and their GPUs, as the control plane last found them.

``sync_inventory`` makes the store say what a backend's inventory says (new rows added,
changed ones updated, missing ones marked unhealthy, never deleted: GPUs may hold claims);
``list_nodes`` reads it back. Split from ``suanli.store.jobs``, which re-exports both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from suanli.store.db import Target, reading, writing
from suanli.store.schema import gpus, nodes


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    gpus: int
    gpu_model: str | None
    gpu_memory_mib: int
    cpu_milli: int
    memory_mib: int
    healthy: bool
    source: str


@dataclass(frozen=True, slots=True)
class GpuRow:
    node: str
    idx: int
    model: str
    uuid: str
    memory_mib: int
    used_milli: int = 0


def sync_inventory(
    target: Target, node_rows: Sequence[NodeRow], gpu_rows: Sequence[GpuRow], now_ms: int
) -> None:
    """Make the stored inventory say ``node_rows`` and ``gpu_rows``: new nodes and GPUs are
    added, known ones updated; a stored node or GPU missing from them is marked unhealthy
    (a GPU cannot be deleted while the database may hold claims on it).
    ``JobStoreError`` if a GPU with claims changed model (nothing written). Only rows that
    changed are written (``updated_ms``: when a row last changed), each kind in one
    statement, so a large engine's inventory is cheap to sync again."""
    with writing(target) as conn:
        stored = {r.name: r for r in conn.execute(sa.select(nodes))}
        fields = ("gpus", "gpu_model", "gpu_memory_mib", "cpu_milli", "memory_mib", "healthy",
                  "source")  # fmt: skip
        new_nodes, changed = [], []
        for n in node_rows:
            values = {f: getattr(n, f) for f in fields}
            old = stored.get(n.name)
            if old is None:
                new_nodes.append({"name": n.name, **values, "updated_ms": now_ms})
            elif any(_differs(getattr(old, f), v) for f, v in values.items()):
                changed.append({"b_name": n.name, **values, "updated_ms": now_ms})
        given = {n.name for n in node_rows}
        for name, old in stored.items():
            if name not in given and old.healthy:
                values = {f: getattr(old, f) for f in fields}
                changed.append({"b_name": name, **values, "healthy": False, "updated_ms": now_ms})
        if new_nodes:
            conn.execute(sa.insert(nodes), new_nodes)
        if changed:
            cols = (*fields, "updated_ms")
            conn.execute(
                sa.update(nodes)
                .where(nodes.c.name == sa.bindparam("b_name"))
                .values({c: sa.bindparam(c) for c in cols}),
                changed,
            )
        known = {(r.node, r.idx): r for r in conn.execute(sa.select(gpus))}
        new_gpus, moved = [], []
        for g in gpu_rows:
            old = known.get((g.node, g.idx))
            if old is None:
                new_gpus.append({"node": g.node, "idx": g.idx, "model": g.model, "uuid": g.uuid,
                                 "memory_mib": g.memory_mib, "used_milli": 0})  # fmt: skip
            elif (old.model, old.uuid, old.memory_mib) != (g.model, g.uuid, g.memory_mib):
                if old.used_milli:
                    from suanli.store.jobs import JobStoreError

                    raise JobStoreError(
                        f"GPU {g.idx} of node {g.node} is claimed ({old.used_milli} milli) "
                        f"but is now {g.model} {g.uuid}, was {old.model} {old.uuid}"
                    )
                moved.append({"b_node": g.node, "b_idx": g.idx, "model": g.model,
                              "uuid": g.uuid, "memory_mib": g.memory_mib})  # fmt: skip
        if new_gpus:
            conn.execute(sa.insert(gpus), new_gpus)
        if moved:
            conn.execute(
                sa.update(gpus)
                .where(gpus.c.node == sa.bindparam("b_node"), gpus.c.idx == sa.bindparam("b_idx"))
                .values(
                    model=sa.bindparam("model"),
                    uuid=sa.bindparam("uuid"),
                    memory_mib=sa.bindparam("memory_mib"),
                ),  # fmt: skip
                moved,
            )


def _differs(stored: Any, given: Any) -> bool:
    if isinstance(given, bool):
        return bool(stored) != given
    return bool(stored != given)


def list_nodes(target: Target) -> list[tuple[NodeRow, list[GpuRow]]]:
    """The stored nodes, by name, each with its GPUs by index."""
    with reading(target) as conn:
        node_rows = list(conn.execute(sa.select(nodes).order_by(nodes.c.name)))
        by_node: dict[str, list[GpuRow]] = {}
        for r in conn.execute(sa.select(gpus).order_by(gpus.c.node, gpus.c.idx)):
            by_node.setdefault(r.node, []).append(
                GpuRow(r.node, r.idx, r.model, r.uuid, r.memory_mib, r.used_milli)
            )
    return [
        (
            NodeRow(
                r.name,
                r.gpus,
                r.gpu_model,
                r.gpu_memory_mib,
                r.cpu_milli,
                r.memory_mib,
                bool(r.healthy),
                r.source,
            ),
            by_node.get(r.name, []),
        )
        for r in node_rows
    ]
