"""Online services in the store: their specs, the demand reported for them, their replicas.

Tables of migration ``0006``. Contracts:

- **A service is its tenant's.** Names are unique within a tenant (``UNIQUE (tenant,
  name)``); every read here takes the tenant, and a caller that gives one never sees another
  tenant's service (the API answers it as one that does not exist).
- **Demand is appended, in arrival order.** ``add_demand`` writes one row per report; the
  scheduler loop reads those after the last id it saw (``demand_after``) and folds them into
  its fixed-step history, so a report is never lost between two passes; then
  ``prune_demand`` deletes what it folded but each service's latest report, so the table
  holds about one row per service however often its demand is reported.
- **Replicas are jobs.** A replica is an ordinary job whose ``service_id`` names its
  service; it is submitted, scheduled, stopped and metered as any other.
- **Deleting a service** asks each of its live replicas to be cancelled, detaches its
  replicas (their ``service_id`` back to NULL: a later service never counts them, even one
  given the same row id) and removes the service and its demand, in one transaction; the
  replicas' jobs and history stay. ``submit_replicas`` locks the service's row first, so a
  replica is never added to a service being deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from suanli.store import jobs as js
from suanli.store.db import Target, reading, writing
from suanli.store.schema import jobs, service_demand, services

LIVE_JOB_STATES = ("pending", "admitted", "running")
"""A replica in one of these states, not asked to be cancelled, is one the service runs."""


class ServiceStoreError(ValueError):
    """A store call on services that cannot be carried out as asked (nothing was written)."""


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """A service as stored."""

    id: int
    tenant: str
    name: str
    user: str
    spec: dict[str, Any]
    """The validated spec (``suanli.control.services.ServiceRequest``), as JSON data."""
    desired: int | None
    """The replicas its autoscaler last asked for (None: not sized yet)."""
    created_ms: int
    updated_ms: int


@dataclass(frozen=True, slots=True)
class DemandReport:
    """One reported request rate of a service."""

    id: int
    service_id: int
    at_ms: int
    rate: float


def _service(row: Any) -> ServiceRecord:
    return ServiceRecord(
        id=row.id,
        tenant=row.tenant,
        name=row.name,
        user=row.user_name,
        spec=json.loads(row.spec),
        desired=row.desired,
        created_ms=row.created_ms,
        updated_ms=row.updated_ms,
    )


def create_service(
    target: Target, *, tenant: str, name: str, user: str, spec: dict[str, Any], now_ms: int
) -> ServiceRecord:
    """Store a new service; ``ServiceStoreError`` if the tenant has one of that name."""
    with writing(target) as conn:
        taken = conn.execute(
            sa.select(services.c.id).where(services.c.tenant == tenant, services.c.name == name)
        ).first()
        if taken is not None:
            raise ServiceStoreError(f"tenant {tenant!r} already has a service {name!r}")
        sid = conn.execute(
            sa.insert(services)
            .values(
                tenant=tenant,
                name=name,
                user_name=user,
                spec=json.dumps(spec, sort_keys=True, separators=(",", ":")),
                desired=None,
                created_ms=now_ms,
                updated_ms=now_ms,
            )
            .returning(services.c.id)
        ).scalar_one()
    return ServiceRecord(int(sid), tenant, name, user, spec, None, now_ms, now_ms)


def get_service(target: Target, name: str, *, tenant: str | None) -> ServiceRecord | None:
    """The service ``name`` of ``tenant`` (None: of any tenant, if exactly one has it), or
    None if there is none."""
    q = sa.select(services).where(services.c.name == name).order_by(services.c.id)
    if tenant is not None:
        q = q.where(services.c.tenant == tenant)
    with reading(target) as conn:
        rows = conn.execute(q.limit(2)).all()
    return _service(rows[0]) if len(rows) == 1 else None


def list_services(target: Target, *, tenant: str | None = None) -> list[ServiceRecord]:
    """Services in creation order (of ``tenant`` only, if given)."""
    q = sa.select(services).order_by(services.c.id)
    if tenant is not None:
        q = q.where(services.c.tenant == tenant)
    with reading(target) as conn:
        return [_service(r) for r in conn.execute(q)]


def set_desired(target: Target, desired: dict[int, int], now_ms: int) -> None:
    """Record the replica counts the autoscalers asked for (service id -> replicas)."""
    if not desired:
        return
    with writing(target) as conn:
        for sid, n in desired.items():
            conn.execute(
                sa.update(services).where(services.c.id == sid).values(desired=n, updated_ms=now_ms)
            )


def add_demand(target: Target, service_id: int, rate: float, now_ms: int) -> DemandReport:
    """Append a reported request rate (per second, >= 0) of a service."""
    if not rate >= 0 or rate == float("inf"):
        raise ServiceStoreError(f"a request rate must be a finite number >= 0, got {rate}")
    with writing(target) as conn:
        rid = conn.execute(
            sa.insert(service_demand)
            .values(service_id=service_id, at_ms=now_ms, rate=rate)
            .returning(service_demand.c.id)
        ).scalar_one()
    return DemandReport(int(rid), service_id, now_ms, rate)


def demand_after(target: Target, after: int, limit: int = 10_000) -> list[DemandReport]:
    """Demand reports after id ``after``, in arrival order (at most ``limit``)."""
    q = (
        sa.select(service_demand)
        .where(service_demand.c.id > after)
        .order_by(service_demand.c.id)
        .limit(limit)
    )
    with reading(target) as conn:
        return [DemandReport(r.id, r.service_id, r.at_ms, r.rate) for r in conn.execute(q)]


def prune_demand(target: Target, upto: int) -> int:
    """Delete the demand reports up to id ``upto`` (those the loop has folded) but each
    service's latest, which the API shows and a restarted loop starts from; returns how
    many it deleted."""
    latest = sa.select(sa.func.max(service_demand.c.id)).group_by(service_demand.c.service_id)
    with writing(target) as conn:
        done = conn.execute(
            sa.delete(service_demand)
            .where(service_demand.c.id <= upto)
            .where(service_demand.c.id.not_in(latest))
        )
    return int(done.rowcount or 0)


def last_demand_id(target: Target) -> int:
    """The id of the latest demand report (0: none)."""
    with reading(target) as conn:
        return int(conn.execute(sa.select(sa.func.max(service_demand.c.id))).scalar() or 0)


def latest_demand(target: Target, service_ids: Sequence[int]) -> dict[int, DemandReport]:
    """Each service's latest demand report (services without one are left out)."""
    if not service_ids:
        return {}
    last = (
        sa.select(sa.func.max(service_demand.c.id))
        .where(service_demand.c.service_id.in_(list(service_ids)))
        .group_by(service_demand.c.service_id)
    )
    q = sa.select(service_demand).where(service_demand.c.id.in_(last))
    with reading(target) as conn:
        return {
            r.service_id: DemandReport(r.id, r.service_id, r.at_ms, r.rate) for r in conn.execute(q)
        }


def replicas(
    target: Target, service_ids: Iterable[int] | None = None, *, live: bool = True
) -> list[js.JobRecord]:
    """Replica jobs (of ``service_ids``, else of every service), in submission order;
    ``live``: only those the service runs (pending, admitted or running, and not asked to
    be cancelled)."""
    q = sa.select(jobs).where(jobs.c.service_id.is_not(None)).order_by(jobs.c.seq)
    if service_ids is not None:
        q = q.where(jobs.c.service_id.in_(list(service_ids)))
    if live:
        q = q.where(jobs.c.state.in_(LIVE_JOB_STATES), jobs.c.cancel_requested.is_(False))
    with reading(target) as conn:
        return [js.job_record(r) for r in conn.execute(q)]


def delete_service(target: Target, service_id: int, now_ms: int, by: str) -> list[str]:
    """Ask every live replica of the service to be cancelled, and remove the service and its
    demand; returns the replicas asked. ``ServiceStoreError`` if there is no such service."""
    with writing(target) as conn:
        q = sa.select(services.c.id).where(services.c.id == service_id).with_for_update()
        if conn.execute(q).first() is None:
            raise ServiceStoreError(f"no service {service_id}")
        asked = [j.id for j in replicas(conn, [service_id])]
        for job_id in asked:
            js.request_cancel(conn, job_id, now_ms, by)
        conn.execute(sa.update(jobs).where(jobs.c.service_id == service_id).values(service_id=None))
        conn.execute(sa.delete(service_demand).where(service_demand.c.service_id == service_id))
        conn.execute(sa.delete(services).where(services.c.id == service_id))
    return asked


def submit_replicas(
    target: Target, service_id: int, new: Sequence[js.NewJob], now_ms: int
) -> list[js.JobRecord]:
    """Submit replica jobs of a service, unless it is gone (then nothing is written and the
    answer is empty); each ``NewJob`` carries ``service_id``."""
    with writing(target) as conn:
        q = sa.select(services.c.id).where(services.c.id == service_id).with_for_update()
        if conn.execute(q).first() is None:
            return []
        return js.submit_jobs(conn, new, now_ms)
