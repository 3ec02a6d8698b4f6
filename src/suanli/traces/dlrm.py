"""Alibaba GPU-disaggregated DLRM serving 2025 (Yang et al., NSDI 2025): the instances.

File ``disaggregated_DLRM_trace.csv`` (``alibaba/clusterdata``, ``cluster-trace-gpu-v2025/``):
one row per instance of a recommendation-model service, on a CPU node (``role`` ``CN``:
embedding and feature work) or a GPU node (``HN``: the dense model on a GPU), with its CPU,
GPU, RDMA (% of a NIC), memory and disk requests and limits, the most instances of its
service one node may hold (``max_instance_per_node``, -1: no limit) and when it was created,
scheduled and deleted (seconds from the trace start; empty: outside the trace) ->
:func:`load_dlrm_instances`.

Checks, each a bad row naming its line and column: a role other than CN or HN; a negative
request or one above its limit; a CN instance with a GPU, an HN one without; an RDMA share
outside 0-100%; a density limit of 0 or below -1; a negative time; a scheduling before its
creation; a deletion before its creation or scheduling; an instance number seen twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from suanli.traces.errors import SkipReport
from suanli.traces.table import (
    Header,
    RowError,
    RowParser,
    parse_float,
    parse_int,
    parse_name,
    read_rows,
)

__all__ = ["ROLES", "DlrmInstance", "DlrmInstances", "load_dlrm_instances"]

ROLES = ("CN", "HN")
COLUMNS = (
    "instance_sn", "role", "app_name", "cpu_request", "cpu_limit", "gpu_request", "gpu_limit",
    "rdma_request", "rdma_limit", "memory_request", "memory_limit", "disk_request", "disk_limit",
    "max_instance_per_node", "creation_time", "scheduled_time", "deletion_time",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class DlrmInstance:
    """One instance: its service (``app``), role, requests (cores, GPUs, % of a NIC, GiB of
    memory and disk), its service's density limit on a node (None: none) and its times
    (None: outside the trace: created before it began, or not deleted before it ended)."""

    sn: str
    role: str
    app: str
    cpu: float
    gpus: int
    rdma_pct: float
    memory_gib: float
    disk_gib: float
    max_per_node: int | None
    created: float | None
    scheduled: float | None
    deleted: float | None


@dataclass(frozen=True)
class DlrmInstances:
    """The trace's instances in file order, and what was skipped (None: nothing asked)."""

    instances: tuple[DlrmInstance, ...]
    skipped: SkipReport | None = None

    def of(self, role: str) -> list[DlrmInstance]:
        return [i for i in self.instances if i.role == role]

    def summary(self) -> dict[str, object]:
        """Counts and totals by role, the services, and the RDMA shares asked."""
        out: dict[str, object] = {"instances": len(self.instances),
                                  "apps": len({i.app for i in self.instances})}  # fmt: skip
        for role in ROLES:
            xs = self.of(role)
            out[role] = {
                "instances": len(xs),
                "apps": len({i.app for i in xs}),
                "cpu": sum(i.cpu for i in xs),
                "gpus": sum(i.gpus for i in xs),
                "rdma_pct": sum(i.rdma_pct for i in xs),
                "memory_gib": sum(i.memory_gib for i in xs),
                "rdma_shares": dict(Counter(i.rdma_pct for i in xs).most_common(5)),
            }
        return out


def load_dlrm_instances(path: str | Path, *, skip_bad_rows: bool = False) -> DlrmInstances:
    """The instances of ``path`` (module docstring)."""
    seen: set[str] = set()

    def make(h: Header) -> RowParser[DlrmInstance]:
        ix = {c: h.index[c] for c in COLUMNS}

        def request(row: list[str], name: str) -> float:
            req = parse_float(row[ix[f"{name}_request"]], f"{name}_request")
            lim = parse_float(row[ix[f"{name}_limit"]], f"{name}_limit")
            if req > lim:
                raise RowError(f"{name}_request {req:g} is above its limit {lim:g}",
                               f"{name}_request", "request above its limit")  # fmt: skip
            return req

        def time(row: list[str], name: str) -> float | None:
            text = row[ix[name]].strip()
            return parse_float(text, name) if text else None

        def parse(row: list[str], line: int) -> DlrmInstance:
            sn = parse_name(row[ix["instance_sn"]], "instance_sn").strip()
            if sn in seen:
                raise RowError(
                    f"instance {sn!r} appears twice", "instance_sn", "duplicate instance"
                )
            role = row[ix["role"]].strip()
            if role not in ROLES:
                raise RowError(f"expected a role of CN or HN, got {role!r}", "role", "unknown role")
            cpu = request(row, "cpu")
            gpus = request(row, "gpu")
            if gpus != int(gpus):
                raise RowError(f"expected a whole number of GPUs, got {gpus:g}", "gpu_request",
                               "fractional GPUs")  # fmt: skip
            if (role == "CN") != (gpus == 0):
                raise RowError(f"a {role} instance with {gpus:g} GPUs (CN: none; HN: some)",
                               "gpu_request", "GPUs do not match the role")  # fmt: skip
            rdma = request(row, "rdma")
            if rdma > 100:
                raise RowError(f"expected an RDMA share of 0-100% of a NIC, got {rdma:g}",
                               "rdma_request", "RDMA share above 100%")  # fmt: skip
            density = parse_int(row[ix["max_instance_per_node"]], "max_instance_per_node", lo=-1)
            if density == 0:
                raise RowError("expected -1 (no limit) or at least 1 instance a node, got 0",
                               "max_instance_per_node", "a density limit of 0")  # fmt: skip
            created, scheduled, deleted = (time(row, c) for c in
                                           ("creation_time", "scheduled_time", "deletion_time"))  # fmt: skip
            if created is not None and scheduled is not None and scheduled < created:
                raise RowError(f"scheduled at {scheduled:g} s, before its creation at {created:g} s",
                               "scheduled_time", "scheduled before created")  # fmt: skip
            start = scheduled if scheduled is not None else created
            if deleted is not None and start is not None and deleted < start:
                raise RowError(f"deleted at {deleted:g} s, before it started at {start:g} s",
                               "deletion_time", "deleted before started")  # fmt: skip
            seen.add(sn)
            return DlrmInstance(
                sn, role, parse_name(row[ix["app_name"]], "app_name").strip(), cpu, int(gpus),
                rdma, request(row, "memory"), request(row, "disk"),
                None if density == -1 else density, created, scheduled, deleted,
            )  # fmt: skip

        return parse

    rows, skipped, _ = read_rows(path, COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
    return DlrmInstances(tuple(rows), skipped)
