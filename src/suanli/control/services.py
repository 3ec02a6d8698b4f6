"""Online services in the live control plane: sized by the simulator's autoscalers, run as
replica jobs.

A tenant creates a service (``POST /v1/services``: ``ServiceRequest``) and reports its
demand (``POST /v1/services/{name}/demand``: a request rate). ``ServiceKeeper.tick``, called
by the scheduler loop at the start of each pass:

1. folds the demand reports that arrived since the last pass into each service's history at
   a fixed step (``step_s``): a step's rate is the mean of the reports that arrived in it,
   else the rate before it (a reported rate holds until the next report). That history is a
   core ``Demand``: what has been seen, never the future;
2. at the end of each step asks the service's autoscaler (the ``autoscaler`` seam: the same
   plugins as ``suanli simulate``) for a replica count, clamped to the service's bounds
   (never below ``min_replicas``), and records it;
3. makes the live replicas match it: submits replica jobs (class ``online``: never
   preempted, never reclaimed as idle; labelled ``service=<name>``) or asks the newest to be
   cancelled. A live replica is one pending, admitted or running and not being cancelled.

A replica that fails (its command exits non-zero, say) is replaced, but after a back-off
that doubles with each failure in a row (``RESTART_BACKOFF_S``, at most
``MAX_BACKOFF_S``), so that a service whose replicas cannot start does not flood the queue.
The history and the autoscalers' own state are the loop's, in memory: after a restart each
service starts again from its latest reported rate.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from suanli.control.spec import JobSpec
from suanli.core import registry
from suanli.core.model import SpecError
from suanli.core.serving.autoscaler import Autoscaler
from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import Demand, ServiceSpec
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import services as ss

log = logging.getLogger("suanli.control.services")

MAX_REPLICAS = 256
"""The most replicas a service may ask for (its capacity table is computed up to it)."""
MAX_RATE = 1e9
"""The largest request rate (per second) a service's ``mu`` or a demand report may give."""
MAX_HISTORY_S = 2 * 86_400.0
"""How much demand history a service keeps (two days: the predictive autoscaler's
default period is one)."""
MAX_HISTORY_STEPS = 100_000
RESTART_BACKOFF_S = 5.0
MAX_BACKOFF_S = 300.0
SERVICE_LABEL = "service"
"""Replicas carry the label ``service=<name>``."""
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
_Seconds = Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)]


class ServiceRequest(BaseModel):
    """A service as created (the body of ``POST /v1/services``; docs/serve.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=_NAME)]
    replica: JobSpec
    """What one replica runs and needs (a job spec of one task; its class is ``online``)."""
    mu: Annotated[float, Field(gt=0, le=MAX_RATE, allow_inf_nan=False)]
    """Requests a second one replica serves."""
    slo: _Seconds
    """The latency target (seconds) at ``slo_quantile``."""
    slo_quantile: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.99
    cold_start: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 60.0
    min_replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)] = 1
    max_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 16
    headroom: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] = 0.0
    autoscaler: Annotated[str, Field(max_length=64)] = "reactive"
    autoscaler_options: Annotated[
        dict[
            Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")],
            Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)],
        ],
        Field(max_length=16),
    ] = Field(default_factory=dict)
    """Numbers the autoscaler takes (``stabilise``, ``period``, ``replicas``, ...)."""
    tenant: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")] | None = None


def problems(req: ServiceRequest) -> list[tuple[str, str]]:
    """What is wrong with a service beyond each field's own bounds: ``(field, why)``."""
    out: list[tuple[str, str]] = []
    if req.min_replicas > req.max_replicas:
        out.append(("min_replicas", f"must be at most max_replicas ({req.max_replicas})"))
    r = req.replica
    if r.tasks != 1 or r.gang_min not in (0, 1):
        out.append(("replica.tasks", "a replica is one task (run more replicas instead)"))
    if r.elastic:
        out.append(("replica.max_workers", "a replica is one task, never elastic (the service "
                                            "scales by replicas)"))  # fmt: skip
    if r.gpus > 1:
        out.append(("replica.gpus", "a replica holds at most one GPU (or a share of one)"))
    try:
        Capacity(req.mu, req.slo, 1, req.slo_quantile)
    except ValueError as e:
        out.append(("slo", str(e)))
    try:
        scaler(req)
    except registry.UnknownPolicyError as e:
        out.append(("autoscaler", str(e).strip("'\"")))
    except (SpecError, TypeError, ValueError) as e:
        out.append(("autoscaler_options", str(e)))
    return out


def scaler(req: ServiceRequest) -> Autoscaler:
    """A new instance of the service's autoscaler (``autoscaler/<name>``)."""
    opts: dict[str, Any] = dict(req.autoscaler_options)
    if req.autoscaler == "fixed" and "replicas" in opts:
        opts["replicas"] = int(opts["replicas"])
    return registry.create("autoscaler", req.autoscaler, **opts)  # type: ignore[no-any-return]


def service_spec(req: ServiceRequest, tenant: str) -> ServiceSpec:
    """The core's service for a request."""
    task = req.replica.task_request()
    return ServiceSpec(
        name=req.name,
        mu=req.mu,
        slo=req.slo,
        cold_start=req.cold_start,
        min_replicas=req.min_replicas,
        max_replicas=req.max_replicas,
        headroom=req.headroom,
        slo_quantile=req.slo_quantile,
        gpu_milli=task.gpu_milli if task.gpus else 1000,
        gpu_memory_mib=task.gpu_memory_mib,
        tenant=tenant,
    )


def replica_spec(req: ServiceRequest, tenant: str, queue: str) -> JobSpec:
    """The job spec of one replica: the request's, one task, class ``online``, labelled."""
    label = f"{SERVICE_LABEL}={req.name}"
    labels = [x for x in req.replica.labels if x != label] + [label]
    return req.replica.model_copy(
        update={
            "tasks": 1,
            "gang_min": 0,
            "priority_class": "online",
            "labels": labels,
            "tenant": tenant,
            "queue": queue,
            "name": req.replica.name or req.name,
        }
    )


@dataclass
class _Tracked:
    """What the keeper holds of one service."""

    record: ss.ServiceRecord
    request: ServiceRequest
    spec: ServiceSpec
    capacity: Capacity
    autoscaler: Autoscaler
    start: float
    rates: list[float] = field(default_factory=list)
    bucket: list[float] = field(default_factory=list)
    rate: float = 0.0
    """The rate of the latest step (what holds until the next report)."""
    desired: int | None = None
    seen: set[str] = field(default_factory=set)
    """The live replicas of the last pass."""
    failures: int = 0
    hold_until: float = -math.inf

    def demand(self, step: float) -> Demand:
        return Demand(np.asarray(self.rates, dtype=float), step, self.start)


class ServiceKeeper:
    """See the module docstring. One thread (the scheduler loop's) calls ``tick``."""

    def __init__(
        self,
        store: Store,
        *,
        step_s: float = 10.0,
    ) -> None:
        if not step_s > 0:
            raise ValueError(f"step_s must be > 0, got {step_s}")
        self.store = store
        self.step = step_s
        self.max_steps = max(1, min(MAX_HISTORY_STEPS, int(MAX_HISTORY_S / step_s)))
        self.tracked: dict[int, _Tracked] = {}
        self.last_report: int | None = None

    def tick(self, now: float) -> int:
        """One pass (see the module docstring); returns how many replicas it submitted or
        asked to be cancelled."""
        if self.last_report is None:
            self.last_report = ss.last_demand_id(self.store)
            ss.prune_demand(self.store, self.last_report)
        reports = ss.demand_after(self.store, self.last_report)
        if reports:
            self.last_report = reports[-1].id
        records = ss.list_services(self.store)
        if not records and not self.tracked:
            if reports:
                ss.prune_demand(self.store, self.last_report)
            return 0
        ids = {r.id for r in records}
        for sid in [s for s in self.tracked if s not in ids]:
            del self.tracked[sid]
        for rec in records:
            t = self.tracked.get(rec.id)
            if t is None or t.record.spec != rec.spec:
                t = self._track(rec, now)
                if t is None:
                    continue
        for rep in reports:
            t = self.tracked.get(rep.service_id)
            if t is not None:
                t.bucket.append(rep.rate)
        if reports:
            ss.prune_demand(self.store, self.last_report)
        live: dict[int, list[js.JobRecord]] = {}
        for j in ss.replicas(self.store, list(self.tracked)):
            if j.service_id is not None:
                live.setdefault(j.service_id, []).append(j)
        changed: dict[int, int] = {}
        acted = 0
        for sid, t in self.tracked.items():
            mine = live.get(sid, [])
            if self._advance(t, now) or t.desired is None:
                want = t.spec.clamp(
                    int(t.autoscaler.replicas(t.spec, t.capacity, t.demand(self.step), len(mine)))
                )
                if want != t.desired or t.record.desired != want:
                    changed[sid] = want
                t.desired = want
            acted += self._match(t, mine, now)
        if changed:
            ss.set_desired(self.store, changed, round(now * 1000))
            for sid, n in changed.items():
                t = self.tracked[sid]
                t.record = replace(t.record, desired=n)
        return acted

    # ------------------------------------------------------------------ history
    def _track(self, rec: ss.ServiceRecord, now: float) -> _Tracked | None:
        try:
            req = ServiceRequest.model_validate(rec.spec["request"])
            spec = service_spec(req, rec.tenant)
            capacity = Capacity(req.mu, req.slo, req.max_replicas, req.slo_quantile)
            auto = scaler(req)
        except Exception:  # noqa: BLE001 - a service stored by another version: skip it
            log.exception("service %s/%s: cannot be sized; left alone", rec.tenant, rec.name)
            self.tracked.pop(rec.id, None)
            return None
        last = ss.latest_demand(self.store, [rec.id]).get(rec.id)
        t = _Tracked(rec, req, spec, capacity, auto, start=now, desired=rec.desired)
        t.rate = last.rate if last is not None else 0.0
        old = self.tracked.get(rec.id)
        if old is not None:
            t.seen = old.seen
        self.tracked[rec.id] = t
        return t

    def _advance(self, t: _Tracked, now: float) -> bool:
        """Close the steps that ended by ``now``; True if any did."""
        end = t.start + len(t.rates) * self.step
        n = int((now - end) // self.step)
        if n <= 0:
            return False
        if t.bucket:
            t.rate = float(np.mean(t.bucket))
            t.bucket.clear()
        # The first step closed has the reports' mean; those after it (the loop was away
        # longer than a step) hold that rate.
        if n > self.max_steps:  # away longer than the whole history: it is that rate
            t.rates = [t.rate] * self.max_steps
            t.start = end + (n - self.max_steps) * self.step
        else:
            t.rates.extend([t.rate] * n)
            over = len(t.rates) - self.max_steps
            if over > 0:
                del t.rates[:over]
                t.start += over * self.step
        return True

    # ------------------------------------------------------------------ replicas
    def _match(self, t: _Tracked, mine: list[js.JobRecord], now: float) -> int:
        ids = {j.id for j in mine}
        gone = t.seen - ids
        t.seen = ids
        if gone:
            ended = [js.get_job(self.store, i) for i in sorted(gone)]
            failed = [j for j in ended if j is not None and j.state in ("failed", "lost")]
            if failed:
                t.failures += len(failed)
                wait = min(MAX_BACKOFF_S, RESTART_BACKOFF_S * 2 ** (t.failures - 1))
                t.hold_until = now + wait
                log.warning("service %s/%s: replica %s ended %s; replacing it in %.0f s",
                            t.record.tenant, t.record.name, failed[0].id, failed[0].state, wait)  # fmt: skip
        if mine and all(j.state == "running" for j in mine) and now >= t.hold_until:
            t.failures = 0
        want = t.desired or 0
        have = len(mine)
        if have > want:
            # The newest first: they have served least (and may not have started yet).
            for j in sorted(mine, key=lambda j: j.seq, reverse=True)[: have - want]:
                js.request_cancel(self.store, j.id, round(now * 1000), f"service {t.record.name}")
                t.seen.discard(j.id)
            return have - want
        if have < want and now >= t.hold_until:
            rec = t.record
            spec = rec.spec["replica"]
            new = [
                js.NewJob(
                    spec,
                    rec.tenant,
                    rec.user,
                    spec.get("name") or rec.name,
                    spec["queue"],
                    "online",
                    rec.id,
                )  # fmt: skip
                for _ in range(want - have)
            ]
            made = ss.submit_replicas(self.store, rec.id, new, round(now * 1000))
            t.seen.update(j.id for j in made)
            return len(made)
        return 0
