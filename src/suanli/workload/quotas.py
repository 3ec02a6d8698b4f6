"""Quotas derived from a workload: each queue guaranteed its share of the GPU-hours it asks.

For a trace such as Philly, whose virtual clusters had quotas that are not published, the
natural stand-in is to guarantee each queue the share of the cluster's GPUs that matches its
share of all GPU-hours asked. A queue's guarantee is raised, where needed, to its largest job
(else that job could never run under a static partition), and the others are scaled down so
that the guarantees still add up to the cluster's GPUs.

``static``: each queue may use its guarantee and nothing more (static partitioning).
``shared``: all queues form one cohort; idle guarantees are lent (Kueue-style borrowing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from suanli.core.model import MILLI, ClusterSpec, Job, SpecError
from suanli.core.tenancy import GPU, QueueSpec, TenancySpec

MODES = ("static", "shared")


def proportional_tenancy(
    jobs: Sequence[Job],
    cluster: ClusterSpec,
    mode: str = "shared",
    cohort: str = "pool",
    borrowing_limit_gpus: int | None = None,
) -> TenancySpec:
    """Queues named after the jobs' ``queue``, each guaranteed its GPU-hour share of GPUs.

    Guarantees are whole GPUs. ``mode`` is ``static`` (no cohort: a queue uses its guarantee
    only) or ``shared`` (one cohort ``cohort``; borrowing limited to ``borrowing_limit_gpus``
    above the guarantee, or unlimited). Each queue's ``org`` is its jobs' tenant when they all
    share one, else empty.
    """
    if mode not in MODES:
        raise SpecError(f"quota mode must be one of {', '.join(MODES)}, got {mode!r}")
    capacity = cluster.total_gpus
    if capacity <= 0:
        raise SpecError(f"cluster {cluster.name} has no GPUs to share out")
    hours: dict[str, float] = {}
    largest: dict[str, int] = {}
    tenants: dict[str, set[str]] = {}
    for j in jobs:
        gpus = j.tasks * j.task.gpu_share_milli / MILLI if j.task.gpus else 0.0
        hours[j.queue] = hours.get(j.queue, 0.0) + gpus * j.runtime
        largest[j.queue] = max(largest.get(j.queue, 0), math.ceil(gpus))
        tenants.setdefault(j.queue, set()).add(j.tenant)
    if not hours:
        raise SpecError("no jobs to derive quotas from")
    total = sum(hours.values()) or 1.0
    names = sorted(hours)
    floor = {q: largest[q] for q in names}
    if sum(floor.values()) > capacity:
        raise SpecError(
            f"the queues' largest jobs alone need {sum(floor.values())} GPUs, more than the "
            f"cluster's {capacity}"
        )
    # Shares of what the floors leave, in proportion to GPU-hours, for queues above their floor.
    share = {q: capacity * hours[q] / total for q in names}
    fixed = {q for q in names if share[q] <= floor[q]}
    while True:
        free = capacity - sum(floor[q] for q in fixed)
        rest = [q for q in names if q not in fixed]
        weight = sum(hours[q] for q in rest) or 1.0
        scaled = {q: free * hours[q] / weight for q in rest}
        newly = {q for q in rest if scaled[q] <= floor[q]}
        if not newly:
            break
        fixed |= newly
    quota = {q: floor[q] for q in fixed}
    quota.update(_round_to_total({q: scaled[q] for q in rest}, capacity - sum(quota.values())))
    queues = []
    for q in names:
        org = next(iter(tenants[q])) if len(tenants[q]) == 1 else ""
        nominal = {GPU: quota[q] * MILLI}
        if mode == "static":
            queues.append(QueueSpec(q, org=org, nominal=nominal))
        else:
            limit = {} if borrowing_limit_gpus is None else {GPU: borrowing_limit_gpus * MILLI}
            queues.append(
                QueueSpec(q, org=org, cohort=cohort, nominal=nominal, borrowing_limit=limit)
            )
    return TenancySpec(tuple(queues))


def _round_to_total(values: dict[str, float], total: int) -> dict[str, int]:
    """Whole numbers summing to ``total``, largest remainders first (ties by name)."""
    base = {k: math.floor(v) for k, v in values.items()}
    left = total - sum(base.values())
    order = sorted(values, key=lambda k: (-(values[k] - base[k]), k))
    for k in order[: max(0, left)]:
        base[k] += 1
    return base
