"""Live jobs in the store: submissions, their states and history, attempts and GPU claims.

The control plane's durable state (tables of migration ``0003``). Contracts:

- **A submission is durable before it is acknowledged.** ``submit_job`` commits the job
  (state ``pending``) and its ``submitted`` event in one transaction; the API answers only
  after it returns. The job's id is its submission number, as text (``"42"``).
- **GPU shares are claimed in the database.** ``admit_attempt`` writes the attempt and one
  ``gpu_claims`` row per (task, GPU) in the caller's transaction; triggers add each claim to
  its GPU's ``used_milli``, whose CHECK refuses more than a whole GPU, so a double
  allocation fails (``sa.exc.IntegrityError``) and rolls the transaction back, whoever
  attempts it. ``end_attempt`` deletes the claims, which gives the shares back.
- **History is append-only.** Every change of state adds a ``job_events`` row.

Functions take a *target* like the ledger's (``suanli.store.db.Target``): a ``Store`` (one
transaction per call) or a connection inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from suanli.store.db import Target, reading, writing
from suanli.store.schema import JOB_STATES, attempts, gpu_claims, gpus, job_events, jobs

FINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "preempted", "lost"})
"""States a job never leaves."""
LIVE_ATTEMPT_STATES = ("admitted", "running", "stopping")
MAX_PAGE = 1000


class JobStoreError(ValueError):
    """A store call on jobs that cannot be carried out as asked (nothing was written)."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as stored."""

    seq: int
    id: str
    tenant: str
    user: str
    name: str
    queue: str
    priority_class: str
    spec: dict[str, Any]
    """The validated spec (``suanli.control.spec.JobSpec``), as JSON data."""
    state: str
    reason: str | None
    attempts: int
    cancel_requested: bool
    exit_code: int | None
    submitted_ms: int
    updated_ms: int
    service_id: int | None = None
    """The service this job is a replica of (``suanli.store.services``), else None."""
    start_p50_ms: int | None = None
    """When it is expected to start, P50 (``suanli.core.starts``; None: no estimate made,
    or none possible)."""
    start_p90_ms: int | None = None
    """When it is expected to start, P90."""
    start_planned_ms: int | None = None
    """When the plan the estimate came from was made."""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


@dataclass(frozen=True, slots=True)
class JobEvent:
    at_ms: int
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class Claim:
    """One task's share of one GPU."""

    task: int
    node: str
    gpu: int
    milli: int


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a job: where it runs and how it ended."""

    job_id: str
    attempt: int
    state: str
    placement: list[dict[str, Any]]
    """Per task: ``{"task", "node", "gpus", "gpu_milli", "gpu_memory_mib", "cpu_milli",
    "memory_mib"}`` (node by name, GPUs by index on it)."""
    handles: list[dict[str, Any]] | None
    admitted_ms: int
    started_ms: int | None
    ended_ms: int | None
    outcome: str | None
    exit_code: int | None
    detail: str | None
    metered: bool


def _job(row: Any) -> JobRecord:
    return JobRecord(
        seq=row.seq,
        id=row.id,
        tenant=row.tenant,
        user=row.user_name,
        name=row.name,
        queue=row.queue,
        priority_class=row.priority_class,
        spec=json.loads(row.spec),
        state=row.state,
        reason=row.reason,
        attempts=row.attempts,
        cancel_requested=bool(row.cancel_requested),
        exit_code=row.exit_code,
        submitted_ms=row.submitted_ms,
        updated_ms=row.updated_ms,
        service_id=row.service_id,
        start_p50_ms=row.start_p50_ms,
        start_p90_ms=row.start_p90_ms,
        start_planned_ms=row.start_planned_ms,
    )


job_record = _job
"""A ``jobs`` row as a ``JobRecord`` (for the other modules of the store)."""


def _attempt(row: Any) -> AttemptRecord:
    return AttemptRecord(
        job_id=row.job_id,
        attempt=row.attempt,
        state=row.state,
        placement=json.loads(row.placement),
        handles=None if row.handles is None else json.loads(row.handles),
        admitted_ms=row.admitted_ms,
        started_ms=row.started_ms,
        ended_ms=row.ended_ms,
        outcome=row.outcome,
        exit_code=row.exit_code,
        detail=row.detail,
        metered=bool(row.metered),
    )


# --- submissions and states ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewJob:
    """A submission, as validated by the API: what ``submit_jobs`` stores."""

    spec: dict[str, Any]
    tenant: str
    user: str
    name: str
    queue: str
    priority_class: str
    service_id: int | None = None
    """For a service's replica: the service (``suanli.store.services``)."""


def submit_job(
    target: Target,
    *,
    spec: dict[str, Any],
    tenant: str,
    user: str,
    name: str,
    queue: str,
    priority_class: str,
    now_ms: int,
) -> JobRecord:
    """Store a new pending job and its ``submitted`` event; returns it (with its id)."""
    new = NewJob(spec, tenant, user, name, queue, priority_class)
    return submit_jobs(target, [new], now_ms)[0]


def submit_jobs(target: Target, new: Sequence[NewJob], now_ms: int) -> list[JobRecord]:
    """Store new pending jobs, each with its ``submitted`` event, in one transaction (two
    statements, whatever their number); returns them in order, with their ids. Ids are
    submission numbers: taken from the table's sequence on PostgreSQL, and after the
    largest one on SQLite (inside the write transaction, which excludes other writers)."""
    if not new:
        return []
    with writing(target) as conn:
        seqs = _next_seqs(conn, len(new))
        rows = [
            {
                "seq": seq,
                "id": str(seq),
                "tenant": n.tenant,
                "user_name": n.user,
                "name": n.name,
                "queue": n.queue,
                "priority_class": n.priority_class,
                "spec": json.dumps(n.spec, sort_keys=True, separators=(",", ":")),
                "state": "pending",
                "attempts": 0,
                "cancel_requested": False,
                "submitted_ms": now_ms,
                "updated_ms": now_ms,
                "service_id": n.service_id,
            }
            for seq, n in zip(seqs, new, strict=True)
        ]
        conn.execute(sa.insert(jobs), rows)
        conn.execute(
            sa.insert(job_events),
            [
                {
                    "job_id": r["id"],
                    "at_ms": now_ms,
                    "kind": "submitted",
                    "detail": f"by {r['user_name']} to queue {r['queue']}",
                }
                for r in rows
            ],
        )
    return [
        JobRecord(
            seq=seq,
            id=str(seq),
            tenant=n.tenant,
            user=n.user,
            name=n.name,
            queue=n.queue,
            priority_class=n.priority_class,
            spec=n.spec,
            state="pending",
            reason=None,
            attempts=0,
            cancel_requested=False,
            exit_code=None,
            submitted_ms=now_ms,
            updated_ms=now_ms,
            service_id=n.service_id,
        )
        for seq, n in zip(seqs, new, strict=True)
    ]


def _next_seqs(conn: Any, n: int) -> list[int]:
    if conn.dialect.name == "postgresql":
        q = sa.text(
            "SELECT nextval(pg_get_serial_sequence('jobs', 'seq')) FROM generate_series(1, :n)"
        )
        return sorted(int(v) for v in conn.execute(q, {"n": n}).scalars())
    last = conn.execute(sa.select(sa.func.max(jobs.c.seq))).scalar() or 0
    return list(range(int(last) + 1, int(last) + 1 + n))


def get_job(target: Target, job_id: str, *, tenant: str | None = None) -> JobRecord | None:
    """Job ``job_id``, or None if there is none (or, with ``tenant``, it is another
    tenant's: the caller cannot tell the two apart)."""
    q = sa.select(jobs).where(jobs.c.id == job_id)
    if tenant is not None:
        q = q.where(jobs.c.tenant == tenant)
    with reading(target) as conn:
        row = conn.execute(q).first()
    return None if row is None else _job(row)


def list_jobs(
    target: Target,
    *,
    tenant: str | None = None,
    states: Sequence[str] = (),
    queue: str | None = None,
    user: str | None = None,
    after: int | None = None,
    limit: int = 100,
) -> list[JobRecord]:
    """Jobs in submission order, filtered; ``after`` is the ``seq`` of the last job of the
    previous page (keyset pagination: stable while jobs arrive)."""
    unknown = [s for s in states if s not in JOB_STATES]
    if unknown:
        raise JobStoreError(f"unknown state(s) {unknown}: choose from {', '.join(JOB_STATES)}")
    if not 1 <= limit <= MAX_PAGE:
        raise JobStoreError(f"limit must be in 1..{MAX_PAGE}, got {limit}")
    q = sa.select(jobs).order_by(jobs.c.seq).limit(limit)
    if tenant is not None:
        q = q.where(jobs.c.tenant == tenant)
    if states:
        q = q.where(jobs.c.state.in_(list(states)))
    if queue is not None:
        q = q.where(jobs.c.queue == queue)
    if user is not None:
        q = q.where(jobs.c.user_name == user)
    if after is not None:
        q = q.where(jobs.c.seq > after)
    with reading(target) as conn:
        return [_job(r) for r in conn.execute(q)]


def job_counts(target: Target, *, tenant: str | None = None) -> dict[tuple[str, str], int]:
    """How many jobs per (state, queue) (of ``tenant`` only, if given)."""
    q = sa.select(jobs.c.state, jobs.c.queue, sa.func.count()).group_by(jobs.c.state, jobs.c.queue)
    if tenant is not None:
        q = q.where(jobs.c.tenant == tenant)
    with reading(target) as conn:
        return {(state, queue): int(n) for state, queue, n in conn.execute(q)}


def request_cancel(target: Target, job_id: str, now_ms: int, by: str) -> JobRecord:
    """Ask for job ``job_id`` to be cancelled (the scheduler loop carries it out); a no-op
    for a job already ended or already asked. ``JobStoreError`` if there is no such job."""
    with writing(target) as conn:
        row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise JobStoreError(f"no job {job_id!r}")
        if row.state not in FINAL_STATES and not row.cancel_requested:
            conn.execute(
                sa.update(jobs)
                .where(jobs.c.id == job_id)
                .values(cancel_requested=True, updated_ms=now_ms)
            )
            add_event(conn, job_id, now_ms, "cancel-requested", f"by {by}")
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).one()
    return _job(row)


def set_job_state(
    conn: Target,
    job_id: str,
    state: str,
    now_ms: int,
    *,
    reason: str | None = None,
    exit_code: int | None = None,
    attempts: int | None = None,
    event: str | None = None,
) -> None:
    """Move job ``job_id`` to ``state`` (with the reason shown to users) and record the
    change as an event (``event`` names it; default: the state)."""
    if state not in JOB_STATES:
        raise JobStoreError(f"unknown job state {state!r}")
    values: dict[str, Any] = {"state": state, "reason": reason, "updated_ms": now_ms}
    if exit_code is not None:
        values["exit_code"] = exit_code
    if attempts is not None:
        values["attempts"] = attempts
    with writing(conn) as c:
        n = c.execute(sa.update(jobs).where(jobs.c.id == job_id).values(**values)).rowcount
        if n != 1:
            raise JobStoreError(f"no job {job_id!r}")
        add_event(c, job_id, now_ms, event or state, reason or "")


def set_reasons(target: Target, reasons: dict[str, str | None]) -> None:
    """Update the pending reason of jobs still pending (no event: reasons change often)."""
    if not reasons:
        return
    with writing(target) as conn:
        for job_id, reason in reasons.items():
            conn.execute(
                sa.update(jobs)
                .where(jobs.c.id == job_id, jobs.c.state == "pending")
                .values(reason=reason)
            )


def add_event(target: Target, job_id: str, at_ms: int, kind: str, detail: str) -> None:
    with writing(target) as conn:
        conn.execute(
            sa.insert(job_events).values(job_id=job_id, at_ms=at_ms, kind=kind, detail=detail)
        )


def job_history(target: Target, job_id: str) -> list[JobEvent]:
    q = sa.select(job_events).where(job_events.c.job_id == job_id).order_by(job_events.c.id)
    with reading(target) as conn:
        return [JobEvent(r.at_ms, r.kind, r.detail) for r in conn.execute(q)]


def jobs_in(target: Target, states: Iterable[str], *, after: int | None = None) -> list[JobRecord]:
    """Every job in one of ``states`` (and after ``seq`` ``after``), in submission order."""
    q = sa.select(jobs).where(jobs.c.state.in_(list(states))).order_by(jobs.c.seq)
    if after is not None:
        q = q.where(jobs.c.seq > after)
    with reading(target) as conn:
        return [_job(r) for r in conn.execute(q)]


def job_ids_in(target: Target, states: Iterable[str]) -> list[tuple[int, str]]:
    """The (``seq``, id) of every job in one of ``states``, in submission order: which jobs
    they are, without reading each one (``jobs_in`` for the records)."""
    q = sa.select(jobs.c.seq, jobs.c.id).where(jobs.c.state.in_(list(states))).order_by(jobs.c.seq)
    with reading(target) as conn:
        return [(int(seq), job_id) for seq, job_id in conn.execute(q)]


def cancel_requests(target: Target) -> list[JobRecord]:
    """Jobs asked to be cancelled that have not ended yet."""
    q = (
        sa.select(jobs)
        .where(jobs.c.cancel_requested.is_(True), jobs.c.state.not_in(list(FINAL_STATES)))
        .order_by(jobs.c.seq)
    )
    with reading(target) as conn:
        return [_job(r) for r in conn.execute(q)]


# --- attempts and claims ------------------------------------------------------------------


def admit_attempt(
    conn: Target,
    job_id: str,
    attempt: int,
    placement: list[dict[str, Any]],
    now_ms: int,
) -> None:
    """Record attempt ``attempt`` of ``job_id`` as admitted on ``placement`` and claim its
    GPU shares (see the module docstring); the job becomes ``admitted``."""
    claims = [
        Claim(t["task"], t["node"], gpu, t["gpu_milli"])
        for t in placement
        for gpu in t["gpus"]
        if t["gpu_milli"] > 0
    ]
    with writing(conn) as c:
        c.execute(
            sa.insert(attempts).values(
                job_id=job_id,
                attempt=attempt,
                state="admitted",
                placement=json.dumps(placement, separators=(",", ":")),
                admitted_ms=now_ms,
                metered=False,
            )
        )
        if claims:
            c.execute(
                sa.insert(gpu_claims),
                [
                    {
                        "job_id": job_id,
                        "attempt": attempt,
                        "task": k.task,
                        "node": k.node,
                        "idx": k.gpu,
                        "milli": k.milli,
                    }
                    for k in claims
                ],
            )
        where = ", ".join(sorted({t["node"] for t in placement}))
        set_job_state(c, job_id, "admitted", now_ms, attempts=attempt, reason=f"on {where}")


def admit_attempts(
    conn: Target, admitted: Sequence[tuple[str, int, list[dict[str, Any]]]], now_ms: int
) -> None:
    """``admit_attempt`` for each (job, attempt, placement) of ``admitted``, in order, in one
    transaction of a few statements whatever their number (the loop's admissions of one
    pass). One double claim or one job that is not there refuses them all
    (``sa.exc.IntegrityError``, ``JobStoreError``): the caller's transaction is then to be
    rolled back, and the attempts may be admitted one by one to find the one at fault."""
    if not admitted:
        return
    attempt_rows: list[dict[str, Any]] = []
    claim_rows: list[dict[str, Any]] = []
    reasons: dict[str, str | None] = {}
    tried: dict[str, int] = {}
    for job_id, attempt, placement in admitted:
        attempt_rows.append(
            {
                "job_id": job_id,
                "attempt": attempt,
                "state": "admitted",
                "placement": json.dumps(placement, separators=(",", ":")),
                "admitted_ms": now_ms,
                "metered": False,
            }
        )
        claim_rows.extend(
            {"job_id": job_id, "attempt": attempt, "task": t["task"], "node": t["node"],
             "idx": gpu, "milli": t["gpu_milli"]}
            for t in placement
            if t["gpu_milli"] > 0
            for gpu in t["gpus"]
        )  # fmt: skip
        where = ", ".join(sorted({t["node"] for t in placement}))
        reasons[job_id], tried[job_id] = f"on {where}", attempt
    if len(reasons) != len(admitted):
        raise JobStoreError("admit_attempts: a job is admitted twice")
    with writing(conn) as c:
        c.execute(sa.insert(attempts), attempt_rows)
        if claim_rows:
            c.execute(sa.insert(gpu_claims), claim_rows)
        _set_states(c, "admitted", reasons, now_ms, attempts=tried)


def attempts_started(
    conn: Target, started: Sequence[tuple[str, int, list[dict[str, Any]]]], now_ms: int
) -> None:
    """``attempt_started`` for each (job, attempt, handles) of ``started``, in order, in one
    transaction of a few statements whatever their number (the loop's launches of one
    pass). A job that is not there refuses them all (``JobStoreError``: the caller's
    transaction is then to be rolled back)."""
    if not started:
        return
    running: dict[str, str | None] = {job_id: None for job_id, _, _ in started}
    if len(running) != len(started):
        raise JobStoreError("attempts_started: a job is started twice")
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == sa.bindparam("b_job"),
                   attempts.c.attempt == sa.bindparam("b_attempt"))
            .values(state="running", handles=sa.bindparam("b_handles"), started_ms=now_ms),
            [{"b_job": job_id, "b_attempt": attempt, "b_handles": json.dumps(handles)}
             for job_id, attempt, handles in started],
        )  # fmt: skip
        _set_states(c, "running", running, now_ms)


def _set_states(
    conn: Any,
    state: str,
    reasons: dict[str, str | None],
    now_ms: int,
    *,
    attempts: dict[str, int] | None = None,
) -> None:
    """``set_job_state`` to ``state`` for each job of ``reasons`` (job -> its reason; with
    ``attempts``, job -> its attempts), in two statements; ``JobStoreError`` if a job is
    not there."""
    values: dict[str, Any] = {"state": state, "reason": sa.bindparam("b_reason"),
                              "updated_ms": now_ms}  # fmt: skip
    if attempts is not None:
        values["attempts"] = sa.bindparam("b_attempts")
    params = [
        {"b_id": job_id, "b_reason": reason}
        | ({"b_attempts": attempts[job_id]} if attempts is not None else {})
        for job_id, reason in reasons.items()
    ]
    n = conn.execute(
        sa.update(jobs).where(jobs.c.id == sa.bindparam("b_id")).values(**values), params
    ).rowcount
    if not conn.dialect.supports_sane_multi_rowcount:
        q = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.id.in_(list(reasons)))
        n = int(conn.execute(q).scalar() or 0)
    if n != len(reasons):
        raise JobStoreError(f"{len(reasons) - n} of {len(reasons)} jobs are not there")
    conn.execute(
        sa.insert(job_events),
        [{"job_id": job_id, "at_ms": now_ms, "kind": state, "detail": reason or ""}
         for job_id, reason in reasons.items()],
    )  # fmt: skip


def attempt_started(
    conn: Target, job_id: str, attempt: int, handles: list[dict[str, Any]], now_ms: int
) -> None:
    """Attempt ``attempt`` of ``job_id`` has its tasks running: keep their handles; the job
    becomes ``running``."""
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(state="running", handles=json.dumps(handles), started_ms=now_ms)
        )
        set_job_state(c, job_id, "running", now_ms, reason=None)


def attempt_handles(conn: Target, job_id: str, attempt: int, handles: list[dict[str, Any]]) -> None:
    """The backend's handles of a running attempt's tasks, after a resize launched more."""
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(handles=json.dumps(handles))
        )


def resize_attempt(
    conn: Target,
    job_id: str,
    attempt: int,
    placement: list[dict[str, Any]],
    *,
    left: Sequence[int],
    joined: Sequence[int],
    now_ms: int,
    detail: str,
) -> None:
    """Attempt ``attempt`` of ``job_id`` (an elastic job's) runs on another number of tasks:
    ``placement`` is its whole stored placement (every task it ever ran, a task removed
    with its ``until_ms``, one added with its ``from_ms``); the claims of tasks ``left`` are
    given back and those of tasks ``joined`` taken (the database refuses a double claim, and
    then nothing is written); a ``resized`` event says ``detail``."""
    by_task = {int(t["task"]): t for t in placement}
    claims = [
        {"job_id": job_id, "attempt": attempt, "task": task, "node": t["node"], "idx": gpu,
         "milli": t["gpu_milli"]}
        for task in joined
        if (t := by_task[task])["gpu_milli"] > 0
        for gpu in t["gpus"]
    ]  # fmt: skip
    with writing(conn) as c:
        if left:
            c.execute(
                sa.delete(gpu_claims).where(
                    gpu_claims.c.job_id == job_id,
                    gpu_claims.c.attempt == attempt,
                    gpu_claims.c.task.in_(list(left)),
                )
            )
        if claims:
            c.execute(sa.insert(gpu_claims), claims)
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(placement=json.dumps(placement, separators=(",", ":")))
        )
        add_event(c, job_id, now_ms, "resized", detail)


def attempt_stopping(conn: Target, job_id: str, attempt: int, now_ms: int, why: str) -> None:
    """Attempt ``attempt`` of ``job_id`` is being stopped (preempted or cancelled)."""
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(state="stopping", detail=why)
        )
        add_event(c, job_id, now_ms, "stopping", why)


def end_attempt(
    conn: Target,
    job_id: str,
    attempt: int,
    now_ms: int,
    *,
    outcome: str,
    exit_code: int | None,
    detail: str,
) -> None:
    """Attempt ``attempt`` of ``job_id`` has ended: record how, and give its GPU shares
    back. The job's own next state is the caller's to set."""
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(
                state="ended",
                ended_ms=now_ms,
                outcome=outcome,
                exit_code=exit_code,
                detail=detail,
            )
        )
        release_claims(c, job_id, attempt)


def release_claims(conn: Target, job_id: str, attempt: int) -> None:
    """Give back the GPU shares of attempt ``attempt`` of ``job_id`` while its processes
    may still be stopping (a preemption hands them to another job at once)."""
    with writing(conn) as c:
        c.execute(
            sa.delete(gpu_claims).where(
                gpu_claims.c.job_id == job_id, gpu_claims.c.attempt == attempt
            )
        )


def live_attempts(target: Target) -> list[AttemptRecord]:
    """Attempts admitted, running or stopping, in admission order."""
    q = sa.select(attempts).where(attempts.c.state.in_(LIVE_ATTEMPT_STATES)).order_by(attempts.c.id)
    with reading(target) as conn:
        return [_attempt(r) for r in conn.execute(q)]


def job_attempts(target: Target, job_id: str) -> list[AttemptRecord]:
    q = sa.select(attempts).where(attempts.c.job_id == job_id).order_by(attempts.c.attempt)
    with reading(target) as conn:
        return [_attempt(r) for r in conn.execute(q)]


def unmetered_attempts(target: Target) -> list[AttemptRecord]:
    """Ended attempts whose usage is not in the ledger yet."""
    q = (
        sa.select(attempts)
        .where(attempts.c.state == "ended", attempts.c.metered.is_(False))
        .order_by(attempts.c.id)
    )
    with reading(target) as conn:
        return [_attempt(r) for r in conn.execute(q)]


def mark_metered(conn: Target, job_id: str, attempt: int) -> None:
    with writing(conn) as c:
        c.execute(
            sa.update(attempts)
            .where(attempts.c.job_id == job_id, attempts.c.attempt == attempt)
            .values(metered=True)
        )


def pending_by_tenant(target: Target) -> dict[str, int]:
    """How many jobs each tenant has pending."""
    q = (
        sa.select(jobs.c.tenant, sa.func.count())
        .where(jobs.c.state == "pending")
        .group_by(jobs.c.tenant)
    )
    with reading(target) as conn:
        return {tenant: int(n) for tenant, n in conn.execute(q)}


def claimed_milli(target: Target) -> dict[str, int]:
    """Milli-GPU claimed per GPU model (the GPU rows' models)."""
    q = (
        sa.select(gpus.c.model, sa.func.sum(gpu_claims.c.milli))
        .select_from(gpu_claims.join(gpus, sa.and_(gpus.c.node == gpu_claims.c.node,
                                                    gpus.c.idx == gpu_claims.c.idx)))
        .group_by(gpus.c.model)
    )  # fmt: skip
    with reading(target) as conn:
        return {model: int(m) for model, m in conn.execute(q)}


def claimed_attempts(target: Target) -> set[tuple[str, int]]:
    """The (job, attempt) pairs that hold a GPU claim."""
    q = sa.select(gpu_claims.c.job_id, gpu_claims.c.attempt).distinct()
    with reading(target) as conn:
        return {(job_id, int(attempt)) for job_id, attempt in conn.execute(q)}


def claims(target: Target) -> dict[tuple[str, int], int]:
    """Milli-GPU claimed per (node, GPU index), from the claims themselves."""
    q = sa.select(gpu_claims.c.node, gpu_claims.c.idx, sa.func.sum(gpu_claims.c.milli)).group_by(
        gpu_claims.c.node, gpu_claims.c.idx
    )
    with reading(target) as conn:
        return {(node, idx): int(m) for node, idx, m in conn.execute(q)}


# The inventory (nodes and GPUs) lives in ``suanli.store.nodes``; its names stay here too.
from suanli.store.nodes import GpuRow, NodeRow, list_nodes, sync_inventory  # noqa: E402, F401
