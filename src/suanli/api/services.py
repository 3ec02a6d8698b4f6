"""The API's online services: ``/v1/services`` (create, list, show, report demand, delete).

A service belongs to a tenant; a token sees only its own tenant's (an admin every tenant's,
naming one with ``?tenant=`` where two tenants have a service of the same name). Another
tenant's service is answered as one that does not exist (404, the same body). Any token of
the tenant may report demand; deleting is for its creator, a tenant admin or an admin.

A created service is checked as a submission of one replica would be (``Intake``: tenant,
queue, environment, directories, capacity) and against its own model: a ``slo`` no number
of replicas meets (below the service time's own quantile), ``min_replicas`` above
``max_replicas``, an unknown ``autoscaler`` or options it does not take are 422 naming the
field. The scheduler loop sizes and runs it (``suanli.control.services``).
"""

import math
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from suanli.api import schemas as s
from suanli.api.errors import ApiError, invalid
from suanli.control.intake import Accepted, Intake, Refused, spec_data
from suanli.control.services import MAX_RATE, ServiceRequest, problems, replica_spec
from suanli.store import Store
from suanli.store import services as ss
from suanli.store.tokens import Principal

ServiceName = Annotated[str, PathParam(max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
TenantQuery = Annotated[str | None, Query(max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")]


class DemandIn(BaseModel):
    """A request rate seen now (requests a second, the mean over the reporter's window)."""

    rate: Annotated[float, Field(ge=0, le=MAX_RATE, allow_inf_nan=False)]


class ReplicaOut(BaseModel):
    job: str
    state: str


class ServiceOut(BaseModel):
    name: str
    tenant: str
    user: str
    autoscaler: str
    min_replicas: int
    max_replicas: int
    desired: int | None
    """The replicas its autoscaler last asked for (null: not sized yet)."""
    running: int
    """Replicas whose task runs."""
    starting: int
    """Replicas pending or admitted (waiting for GPUs, or being started)."""
    demand: float | None
    """The latest reported request rate (per second; null: none yet)."""
    demand_at: str | None
    created_at: str
    updated_at: str
    replicas: list[ReplicaOut]
    """The live replicas (pending, admitted or running, not being cancelled)."""
    spec: dict[str, Any]


class ServiceList(BaseModel):
    services: list[ServiceOut]


def install_services(
    app: FastAPI,
    store: Store,
    *,
    who: Any,
    intake: Intake | None,
    clock_ms: Callable[[], int],
    wake: Callable[[], None],
    bad_strings: Callable[[Any, str], Iterable[s.ErrorField]],
) -> None:
    """Add the ``/v1/services`` routes to ``app`` (``who``: the dependency that gives the
    request's principal, as the other routes use; ``bad_strings``: the fields of a body
    holding text the database cannot store, as the job routes check them)."""
    Who = Annotated[Principal, Depends(who)]

    def out(rec: ss.ServiceRecord) -> ServiceOut:
        return many([rec])[0]

    def many(recs: list[ss.ServiceRecord]) -> list[ServiceOut]:
        ids = [r.id for r in recs]
        with store.read() as conn:
            live = ss.replicas(conn, ids)
            latest = ss.latest_demand(conn, ids)
        by: dict[int, list[ReplicaOut]] = {}
        for j in live:
            if j.service_id is not None:
                by.setdefault(j.service_id, []).append(ReplicaOut(job=j.id, state=j.state))
        result = []
        for r in recs:
            req = r.spec["request"]
            reps = by.get(r.id, [])
            d = latest.get(r.id)
            result.append(
                ServiceOut(
                    name=r.name,
                    tenant=r.tenant,
                    user=r.user,
                    autoscaler=req["autoscaler"],
                    min_replicas=req["min_replicas"],
                    max_replicas=req["max_replicas"],
                    desired=r.desired,
                    running=sum(1 for x in reps if x.state == "running"),
                    starting=sum(1 for x in reps if x.state != "running"),
                    demand=None if d is None else d.rate,
                    demand_at=None if d is None else s.iso(d.at_ms),
                    created_at=s.iso(r.created_ms) or "",
                    updated_at=s.iso(r.updated_ms) or "",
                    replicas=reps,
                    spec=r.spec,
                )
            )
        return result

    def refusal(e: Refused, field: str | None) -> ApiError:
        fields = [s.ErrorField(field=field, problem=e.message)] if field else []
        headers = (
            {"Retry-After": str(max(1, math.ceil(e.retry_after)))} if e.status == 429 else None
        )
        return ApiError(e.status, e.message, fields=fields, headers=headers)

    def visible(who: Principal, name: str, tenant: str | None) -> ss.ServiceRecord:
        """The service, if ``who`` may see it; else 404, the same as for no such service."""
        if not who.admin:
            tenant = who.tenant
        rec = ss.get_service(store, name, tenant=tenant)
        if rec is None:
            raise ApiError(404, f"no service {name!r}")
        return rec

    @app.post("/v1/services", status_code=201, tags=["services"])
    def create_service(body: ServiceRequest, who: Who) -> ServiceOut:
        """Create an online service: replicas of ``replica`` (one task each, class
        ``online``), sized by ``autoscaler`` from the demand reported for it so that the
        ``slo_quantile`` of latency stays within ``slo`` (M/M/c, ``mu`` requests a second per
        replica), between ``min_replicas`` and ``max_replicas``."""
        bad = list(bad_strings(body.model_dump(mode="json"), ""))
        bad += [s.ErrorField(field=f, problem=p) for f, p in problems(body)]
        if bad:
            raise ApiError(422, invalid(bad), fields=bad)
        replica = body.replica.model_copy(
            update={"tenant": body.tenant or body.replica.tenant, "priority_class": "online"}
        )
        try:
            if intake is not None:
                ok = intake.check(replica, who)
            else:  # no control plane behind the API (tests of the API alone)
                tenant = replica.tenant or who.tenant or "default"
                if not who.sees(tenant):
                    raise Refused(403, f"this token may not act for tenant {tenant!r}", "tenant")
                ok = Accepted(tenant, replica.queue or tenant)
        except Refused as e:
            field = e.field if e.field in (None, "tenant") else f"replica.{e.field}"
            raise refusal(e, field) from None
        spec = replica_spec(body, ok.tenant, ok.queue)
        data = {
            "request": body.model_dump(mode="json"),
            "replica": spec_data(spec, ok),
        }
        try:
            rec = ss.create_service(
                store, tenant=ok.tenant, name=body.name, user=who.user, spec=data,
                now_ms=clock_ms(),
            )  # fmt: skip
        except ss.ServiceStoreError as e:
            raise ApiError(
                409, str(e), fields=[s.ErrorField(field="name", problem=str(e))]
            ) from None
        wake()
        return out(rec)

    @app.get("/v1/services", tags=["services"])
    def list_services(who: Who, tenant: TenantQuery = None) -> ServiceList:
        """The services (its tenant's for a non-admin), desired and running replicas and
        the latest demand of each."""
        if not who.admin:
            tenant = who.tenant
        return ServiceList(services=many(ss.list_services(store, tenant=tenant)))

    @app.get("/v1/services/{name}", tags=["services"])
    def get_service(name: ServiceName, who: Who, tenant: TenantQuery = None) -> ServiceOut:
        """One service: its spec, desired and running replicas, its live replica jobs and
        its latest demand."""
        return out(visible(who, name, tenant))

    @app.post("/v1/services/{name}/demand", status_code=202, tags=["services"])
    def report_demand(
        name: ServiceName, body: DemandIn, who: Who, tenant: TenantQuery = None
    ) -> ServiceOut:
        """Report the request rate the service sees now; the scheduler loop folds reports
        into the service's demand history and resizes it at the end of each step. A
        tenant's reports are limited as its submissions are (``--submit-rate``,
        ``--submit-burst``; a bucket of their own): 429 with ``Retry-After`` past it."""
        rec = visible(who, name, tenant)
        if intake is not None:
            try:
                intake.check_report(rec.tenant, who)
            except Refused as e:
                raise refusal(e, None) from None
        ss.add_demand(store, rec.id, body.rate, clock_ms())
        wake()
        return out(rec)

    @app.delete("/v1/services/{name}", tags=["services"])
    def delete_service(name: ServiceName, who: Who, tenant: TenantQuery = None) -> ServiceOut:
        """Delete the service: its live replicas are cancelled (their jobs and history
        stay). Its creator, a tenant admin of its tenant, or an admin."""
        rec = visible(who, name, tenant)
        if not who.may_cancel(rec.tenant, rec.user):
            raise ApiError(403, f"service {rec.name} is {rec.user}'s: this token may not delete it")
        shown = out(rec)
        try:
            ss.delete_service(store, rec.id, clock_ms(), who.user)
        except ss.ServiceStoreError:
            raise ApiError(404, f"no service {name!r}") from None
        wake()
        return shown
