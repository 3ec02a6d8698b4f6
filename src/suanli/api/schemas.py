"""The API's JSON: response models (for the OpenAPI document) and their builders.

Times are ISO 8601 UTC strings with milliseconds (``2025-11-24T16:00:00.000Z``); the store
keeps epoch milliseconds. Money and priced quantities are decimal strings (exact).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from suanli.metering.usage import GPU_HOUR
from suanli.store.jobs import AttemptRecord, GpuRow, JobEvent, JobRecord, NodeRow
from suanli.store.ledger import Total
from suanli.store.tokens import Principal, TokenInfo
from suanli.store.utilisation import GpuTime, GpuTimeReport, Utilisation, unmeasured_by_attempt

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@/-]{0,199}$"
"""Names of tokens, users and tenants (as ``suanli.store.tokens`` checks them)."""


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (None stays None)."""
    if ms is None:
        return None
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ErrorField(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every error's body: one line, and for invalid input the fields at fault."""

    error: str
    fields: list[ErrorField] = Field(default_factory=list)


class StartEstimateOut(BaseModel):
    """When a pending job is expected to start (``suanli.core.starts``): as likely before
    ``p50`` as after, nine in ten by ``p90`` (both null for a job no healthy node could ever
    hold); ``planned_at``: when the plan was made (refreshed as the queue moves, at most every
    few minutes)."""

    p50: str | None
    p90: str | None
    planned_at: str


class WhatIfOut(BaseModel):
    """When a job would start if it were submitted now (``POST /v1/what-if``, as Slurm's
    ``sbatch --test-only``): nothing was queued. ``start_estimate`` is the scheduler's plan
    with the job placed after the jobs the plan holds; ``room_now``: its gang minimum fits
    the free GPUs now (it may still wait behind queued jobs); ``load``: GPUs held and GPUs
    the pending jobs ask for, over the cluster's GPUs."""

    tenant: str
    queue: str
    room_now: bool
    start_estimate: StartEstimateOut
    load: float
    pending_jobs: int


class JobOut(BaseModel):
    id: str
    name: str
    tenant: str
    user: str
    queue: str
    priority_class: str
    state: str
    reason: str | None
    attempts: int
    cancel_requested: bool
    exit_code: int | None
    submitted_at: str
    updated_at: str
    spec: dict[str, Any]
    start_estimate: StartEstimateOut | None = None
    """Set while the job is pending and the scheduler has estimated its start."""


class GpuUtilOut(BaseModel):
    """An attempt's sampled GPU utilisation (raw and folded samples together)."""

    samples: int
    mean_pct: float
    """Time-weighted mean utilisation of what the attempt holds, over its GPUs, 0 to 100."""
    peak_memory_mib: int
    """The most GPU memory it used on any one of its GPUs."""
    sampled_s: float
    """The time its samples stand for, in seconds (summed over its GPUs)."""
    first_at: str
    last_at: str


class AttemptOut(BaseModel):
    attempt: int
    state: str
    placement: list[dict[str, Any]]
    admitted_at: str
    started_at: str | None
    ended_at: str | None
    outcome: str | None
    exit_code: int | None
    detail: str | None
    gpu_utilization: GpuUtilOut | None = None
    """None: no utilisation sample (see ``JobDetail.gpu_sampling``)."""


class EventOut(BaseModel):
    at: str
    kind: str
    detail: str


class JobDetail(BaseModel):
    """``GET /v1/jobs/{id}``: the job, its attempts and its history."""

    job: JobOut
    attempts: list[AttemptOut]
    history: list[EventOut]
    gpu_sampling: str
    """How the server samples GPU utilisation: ``nvml`` (or the name of another reader),
    or ``off: <why>`` (``off: NVML not present``, ``off: --util-interval 0``)."""


class JobPage(BaseModel):
    jobs: list[JobOut]
    next: str | None
    """The cursor of the next page (pass as ``after``), or null on the last page."""


class GpuOut(BaseModel):
    idx: int
    model: str
    uuid: str
    memory_mib: int
    used_milli: int
    healthy: bool = True
    """False while its health watch finds a fault (``fault``): out of service."""
    fault: str | None = None


class WithdrawIn(BaseModel):
    """Why a federation front takes a job back (kept as the cancelled job's reason)."""

    model_config = ConfigDict(extra="forbid")

    reason: Annotated[str, Field(max_length=500, pattern=r"^[^\x00-\x1f]*$")] = ""


class NodeOut(BaseModel):
    name: str
    gpu_count: int
    gpu_model: str | None
    gpu_memory_mib: int
    cpu_milli: int
    memory_mib: int
    healthy: bool
    source: str
    gpus: list[GpuOut]
    state: str = "up"
    """``up``; ``down`` (the inventory lost it); ``cordoned`` (an operator's hold: nothing
    new lands, what runs runs on); ``draining`` (drained, attempts still stopping) or
    ``drained``."""
    cordon_reason: str | None = None


class NodeList(BaseModel):
    nodes: list[NodeOut]


class NodeHold(BaseModel):
    """``POST /v1/nodes/{name}/cordon`` and ``/drain``: why (shown with the node); the body
    may be left out."""

    model_config = ConfigDict(extra="forbid")

    reason: Annotated[str, Field(max_length=500)] = ""


class QueueList(BaseModel):
    queues: list[dict[str, Any]]


class UsageRow(BaseModel):
    group: dict[str, str]
    currency: str
    amount: str
    quantity: str
    raw: int
    entries: int


class GpuUseRow(BaseModel):
    """GPU time of one group: allocated, and of it used (allocated x the attempt's sampled
    mean utilisation), idle (allocated - used) and unmeasured (attempts without samples:
    neither used nor idle). Hours as exact decimal strings (9 places); ``*_milli_ms`` are
    the exact figures in milli-GPU x ms."""

    group: dict[str, str]
    allocated_gpu_hours: str
    used_gpu_hours: str
    idle_gpu_hours: str
    unmeasured_gpu_hours: str
    allocated_milli_ms: int
    used_milli_ms: int
    idle_milli_ms: int
    unmeasured_milli_ms: int


class UnmeasuredAttempt(BaseModel):
    job_id: str
    attempt: int
    gpu_hours: str


class GpuUseOut(BaseModel):
    """The bill's GPU time from the usage records, grouped by those of ``by`` that usage
    records have (``resource``, ``band``, ``book_version`` and ``batch`` are left out)."""

    by: list[str]
    rows: list[GpuUseRow]
    unmeasured: list[UnmeasuredAttempt]
    """Attempts without utilisation samples, in job order (at most ``MAX_UNMEASURED``)."""
    unmeasured_attempts: int
    """How many attempts had no samples (all of them, listed or not)."""


class UsageOut(BaseModel):
    by: list[str]
    totals: list[UsageRow]
    gpu: GpuUseOut


class WhoAmI(BaseModel):
    token_id: int
    name: str
    role: str
    tenant: str | None
    user: str


class TokenCreate(BaseModel):
    """``POST /v1/tokens``: the token to make (``tenant`` defaults to the caller's)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    role: Literal["admin", "tenant-admin", "user", "metrics"] = "user"
    tenant: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    user: Annotated[str, Field(pattern=NAME_PATTERN)]


class TokenOut(BaseModel):
    id: int
    name: str
    role: str
    tenant: str | None
    user: str
    created_at: str
    revoked_at: str | None


class TokenCreated(TokenOut):
    token: str
    """The secret, shown this once."""


class TokenList(BaseModel):
    tokens: list[TokenOut]


class Health(BaseModel):
    status: str


# --- builders ------------------------------------------------------------------------------


def job_out(j: JobRecord) -> JobOut:
    return JobOut(
        id=j.id,
        name=j.name,
        tenant=j.tenant,
        user=j.user,
        queue=j.queue,
        priority_class=j.priority_class,
        state=j.state,
        reason=j.reason,
        attempts=j.attempts,
        cancel_requested=j.cancel_requested,
        exit_code=j.exit_code,
        submitted_at=iso(j.submitted_ms) or "",
        updated_at=iso(j.updated_ms) or "",
        spec=j.spec,
        start_estimate=(
            StartEstimateOut(
                p50=iso(j.start_p50_ms),
                p90=iso(j.start_p90_ms),
                planned_at=iso(j.start_planned_ms) or "",
            )
            if j.state == "pending" and j.start_planned_ms is not None
            else None
        ),  # fmt: skip
    )


def attempt_out(a: AttemptRecord, u: Utilisation | None = None) -> AttemptOut:
    return AttemptOut(
        gpu_utilization=None if u is None else gpu_util_out(u),
        attempt=a.attempt,
        state=a.state,
        placement=a.placement,
        admitted_at=iso(a.admitted_ms) or "",
        started_at=iso(a.started_ms),
        ended_at=iso(a.ended_ms),
        outcome=a.outcome,
        exit_code=a.exit_code,
        detail=a.detail,
    )


def event_out(e: JobEvent) -> EventOut:
    return EventOut(at=iso(e.at_ms) or "", kind=e.kind, detail=e.detail)


def node_out(n: NodeRow, gpus: list[GpuRow]) -> NodeOut:
    return NodeOut(
        name=n.name,
        gpu_count=n.gpus,
        gpu_model=n.gpu_model,
        gpu_memory_mib=n.gpu_memory_mib,
        cpu_milli=n.cpu_milli,
        memory_mib=n.memory_mib,
        healthy=n.healthy,
        source=n.source,
        gpus=[GpuOut(idx=g.idx, model=g.model, uuid=g.uuid, memory_mib=g.memory_mib,
                     used_milli=g.used_milli, healthy=g.healthy, fault=g.fault)
              for g in gpus],
        state=node_state(n, gpus),
        cordon_reason=n.cordon_reason,
    )  # fmt: skip


def node_state(n: NodeRow, gpus: list[GpuRow]) -> str:
    """What ``NodeOut.state`` says of a stored node."""
    if not n.healthy:
        return "down"
    if n.cordon == "drain":
        return "draining" if any(g.used_milli for g in gpus) else "drained"
    return "cordoned" if n.cordon == "cordon" else "up"


def token_out(t: TokenInfo) -> TokenOut:
    return TokenOut(
        id=t.id,
        name=t.name,
        role=t.role,
        tenant=t.tenant,
        user=t.user,
        created_at=iso(t.created_ms) or "",
        revoked_at=iso(t.revoked_ms),
    )


def usage_row(by: list[str], t: Total) -> UsageRow:
    return UsageRow(
        group=dict(zip(by, t.group, strict=True)),
        currency=t.currency,
        amount=str(t.amount),
        quantity=str(t.quantity),
        raw=t.raw,
        entries=t.entries,
    )


def gpu_util_out(u: Utilisation) -> GpuUtilOut:
    return GpuUtilOut(
        samples=u.samples,
        mean_pct=u.util_bp_ms / u.span_ms / 100,
        peak_memory_mib=u.memory_max_mib,
        sampled_s=u.span_ms / 1000,
        first_at=iso(u.first_ms) or "",
        last_at=iso(u.last_ms) or "",
    )


MAX_UNMEASURED = 1000
"""Attempts without samples listed by ``GET /v1/usage`` (all are counted)."""
_HOURS = Decimal("0.000000001")


def gpu_hours(milli_ms: int) -> str:
    """Milli-GPU x ms as GPU-hours, a decimal string of 9 places (half-even)."""
    return f"{(Decimal(milli_ms) / GPU_HOUR).quantize(_HOURS, ROUND_HALF_EVEN):f}"


def gpu_use_out(report: GpuTimeReport) -> GpuUseOut:
    def row(group: tuple[str, ...], f: GpuTime) -> GpuUseRow:
        return GpuUseRow(
            group=dict(zip(report.by, group, strict=True)),
            allocated_gpu_hours=gpu_hours(f.allocated),
            used_gpu_hours=gpu_hours(f.used),
            idle_gpu_hours=gpu_hours(f.idle),
            unmeasured_gpu_hours=gpu_hours(f.unmeasured),
            allocated_milli_ms=f.allocated,
            used_milli_ms=f.used,
            idle_milli_ms=f.idle,
            unmeasured_milli_ms=f.unmeasured,
        )

    missing = unmeasured_by_attempt(report)
    return GpuUseOut(
        by=report.by,
        rows=[row(g, f) for g, f in sorted(report.groups.items())],
        unmeasured=[
            UnmeasuredAttempt(job_id=j, attempt=a, gpu_hours=gpu_hours(raw))
            for j, a, raw in missing[:MAX_UNMEASURED]
        ],
        unmeasured_attempts=len(missing),
    )


def whoami(p: Principal) -> WhoAmI:
    return WhoAmI(token_id=p.token_id, name=p.name, role=p.role, tenant=p.tenant, user=p.user)
