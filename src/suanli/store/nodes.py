"""The stored inventory: nodes and their GPUs, as the control plane last found them.

``sync_inventory`` makes the store say what a backend's inventory says (new rows added,
changed ones updated, missing ones marked unhealthy, never deleted: GPUs may hold claims);
``list_nodes`` reads it back. Split from ``suanli.store.jobs``, which re-exports both.

Hardware holds (migration 0008), what the scheduler loop keeps out of service
(``suanli.control.hardware``): ``set_gpu_faults`` is the GPU health watch's write (a GPU with
a fault is unhealthy until the fault clears), ``set_cordon`` an operator's (``cordon``,
``drain`` or back in service), and ``holds`` reads both back, level-triggered: the loop
compares what it reads with what it holds.
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
    cordon: str | None = None
    """``cordon``, ``drain`` or None (in service); an operator's, never the inventory's."""
    cordon_reason: str | None = None


@dataclass(frozen=True, slots=True)
class GpuRow:
    node: str
    idx: int
    model: str
    uuid: str
    memory_mib: int
    used_milli: int = 0
    healthy: bool = True
    """False while the GPU's health watch finds a fault (``fault``); the inventory never
    writes it."""
    fault: str | None = None


CORDONS = ("cordon", "drain")
"""An operator's holds on a node: ``cordon`` (nothing new lands there, what runs there runs
on, as Slurm's DRAIN) and ``drain`` (and what runs there is requeued from its checkpoint, as
``kubectl drain``)."""


class NodeNotFound(LookupError):
    """No stored node has that name."""


@dataclass(frozen=True, slots=True)
class Holds:
    """What is held out of service now: GPUs with a fault, by (node, index): (fault, since
    ms); nodes an operator holds, by name: (``cordon``/``drain``, reason, since ms)."""

    faults: dict[tuple[str, int], tuple[str, int]]
    cordons: dict[str, tuple[str, str, int]]


def set_gpu_faults(
    target: Target, node: str, faults: dict[int, str | None], now_ms: int
) -> list[tuple[int, str | None]]:
    """Write what node ``node``'s health watch found: each listed GPU's fault (None:
    healthy). Only GPUs whose health or fault changed are written (a fault keeps the time it
    was first found); returns them, as (index, fault). A GPU the store does not know is
    passed over."""
    with writing(target) as conn:
        rows = conn.execute(
            sa.select(gpus.c.idx, gpus.c.healthy, gpus.c.fault).where(gpus.c.node == node)
        )
        known = {r.idx: (bool(r.healthy), r.fault) for r in rows}
        changed: list[tuple[int, str | None]] = []
        for idx, fault in sorted(faults.items()):
            old = known.get(idx)
            if old is None or old == (fault is None, fault):
                continue
            values: dict[str, Any] = {"healthy": fault is None, "fault": fault}
            if old[0] or fault is None:  # newly faulty, or clear: since now
                values["fault_ms"] = None if fault is None else now_ms
            conn.execute(
                sa.update(gpus).where(gpus.c.node == node, gpus.c.idx == idx).values(values)
            )
            changed.append((idx, fault))
    return changed


def set_cordon(
    target: Target, node: str, mode: str | None, reason: str | None, now_ms: int
) -> NodeRow:
    """Hold node ``node`` (``mode`` ``cordon`` or ``drain``, with ``reason``) or put it back
    in service (``mode`` None); the node as stored after. ``NodeNotFound`` if no such node,
    ``ValueError`` for another mode (nothing written). Setting the hold it has already
    changes only the reason."""
    if mode is not None and mode not in CORDONS:
        raise ValueError(f"node hold must be one of {', '.join(CORDONS)} or none, got {mode!r}")
    with writing(target) as conn:
        old = conn.execute(sa.select(nodes).where(nodes.c.name == node)).first()
        if old is None:
            raise NodeNotFound(f"no node {node!r}")
        since = old.cordon_ms if old.cordon == mode and mode is not None else now_ms
        conn.execute(
            sa.update(nodes)
            .where(nodes.c.name == node)
            .values(
                cordon=mode,
                cordon_reason=reason if mode is not None else None,
                cordon_ms=since if mode is not None else None,
            )
        )
        row = conn.execute(sa.select(nodes).where(nodes.c.name == node)).one()
    return _node_row(row)


def holds(target: Target) -> Holds:
    """What is held out of service now (see ``Holds``): two small reads, of only the rows
    that hold something."""
    with reading(target) as conn:
        faults = {
            (r.node, r.idx): (r.fault or "unhealthy", r.fault_ms or 0)
            for r in conn.execute(
                sa.select(gpus.c.node, gpus.c.idx, gpus.c.fault, gpus.c.fault_ms).where(
                    gpus.c.healthy.is_(False)
                )
            )
        }
        cordons = {
            r.name: (r.cordon, r.cordon_reason or "", r.cordon_ms or 0)
            for r in conn.execute(
                sa.select(
                    nodes.c.name, nodes.c.cordon, nodes.c.cordon_reason, nodes.c.cordon_ms
                ).where(nodes.c.cordon.is_not(None))
            )
        }
    return Holds(faults, cordons)


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


def list_nodes(target: Target, name: str | None = None) -> list[tuple[NodeRow, list[GpuRow]]]:
    """The stored nodes (only node ``name`` if given), by name, each with its GPUs by index."""
    nq, gq = sa.select(nodes), sa.select(gpus)
    if name is not None:
        nq, gq = nq.where(nodes.c.name == name), gq.where(gpus.c.node == name)
    with reading(target) as conn:
        node_rows = list(conn.execute(nq.order_by(nodes.c.name)))
        by_node: dict[str, list[GpuRow]] = {}
        for r in conn.execute(gq.order_by(gpus.c.node, gpus.c.idx)):
            by_node.setdefault(r.node, []).append(
                GpuRow(
                    r.node,
                    r.idx,
                    r.model,
                    r.uuid,
                    r.memory_mib,
                    r.used_milli,
                    bool(r.healthy),
                    r.fault,
                )  # fmt: skip
            )
    return [(_node_row(r), by_node.get(r.name, [])) for r in node_rows]


def _node_row(r: Any) -> NodeRow:
    return NodeRow(
        r.name,
        r.gpus,
        r.gpu_model,
        r.gpu_memory_mib,
        r.cpu_milli,
        r.memory_mib,
        bool(r.healthy),
        r.source,
        r.cordon,
        r.cordon_reason,
    )
