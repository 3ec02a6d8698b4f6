"""The control plane's HTTP API (``suanli serve``): jobs, services, queues, nodes, usage and
tokens (the services' routes are in ``suanli.api.services``, the data sets held here in
``suanli.api.datasets``).

``create_app`` builds a FastAPI app over an open store. Every endpoint but ``/healthz`` (and
``/metrics`` when ``metrics_public``) needs ``Authorization: Bearer <token>``; a missing,
unknown or revoked token is 401 with ``WWW-Authenticate: Bearer``.

Tenant isolation: a job of another tenant is answered exactly as a job that does not exist
(404, same body) by get, cancel and logs, and lists never show it. Store calls are
synchronous, so the endpoints are plain functions (FastAPI runs them in its threadpool).
Errors have one JSON shape (``suanli.api.errors``); the body limit and request counting are
in ``suanli.api.middleware``.
"""

import asyncio
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import sqlalchemy as sa
from fastapi import Depends, FastAPI, Query, Response, Security
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

import suanli
from suanli.api import schemas as s
from suanli.api.batch import SubmitBatcher
from suanli.api.datasets import install_datasets
from suanli.api.errors import ApiError, install, invalid
from suanli.api.logs import read_range, tail_offset
from suanli.api.middleware import Guard
from suanli.api.services import install_services
from suanli.control.intake import Accepted, Intake, Refused, spec_data
from suanli.control.metrics import ControlMetrics, GpuReading
from suanli.control.spec import JobSpec
from suanli.control.starts import WhatIf
from suanli.core.model import Job, SpecError
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import nodes as sn
from suanli.store import tokens as tk
from suanli.store.ledger import DIMENSIONS, totals
from suanli.store.schema import JOB_STATES
from suanli.store.utilisation import gpu_time, job_utilisation

_T = TypeVar("_T")

LogFile = Callable[[str, int, int, str], Path | None]
"""``log_file(job_id, attempt, task, stream)``: where that log is, or None."""

MAX_ID = 2**63 - 1
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_LOG_LINES = 1_000_000
WHAT_IF_WAIT_S = 10.0
"""How long ``POST /v1/what-if`` waits for the scheduler's pass to answer (503 past it)."""
LIVE_STATES = ("pending", "admitted", "running")
LOG_SIZE_HEADER = "X-Suanli-Log-Size"
"""The log response's end offset in the file: the ``offset`` to ask for next (``--follow``)."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorBody, "description": what}
    for code, what in (
        (400, "Unreadable request (a body that is not JSON text), or the store refused it"),
        (401, "No valid token"),
        (403, "Not allowed to this token"),
        (404, "Not found (or another tenant's)"),
        (413, "Request body too large"),
        (422, "Invalid input"),
        (429, "Too many submissions or pending jobs for the tenant (see Retry-After)"),
    )
}


def _serves(org: str, tenant: str) -> bool:
    """Whether a queue of organisation path ``org`` serves ``tenant`` (as
    ``core.tenancy.TenancySpec.serves``)."""
    org = org.strip("/")
    return not org or tenant == org or tenant.startswith(org + "/")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


def _text_ok(value: str) -> bool:
    """Whether the database can store ``value``: no NUL and valid UTF-8 (no lone
    surrogates), which PostgreSQL and the drivers refuse."""
    if "\0" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bad_strings(value: Any, path: str) -> Iterable[s.ErrorField]:
    """The fields of a spec (as JSON data) holding text the database cannot store."""
    if isinstance(value, str):
        if not _text_ok(value):
            yield s.ErrorField(field=path, problem="must not contain NUL or invalid characters")
    elif isinstance(value, dict):
        for k, v in value.items():
            key = f"{path}.{k}" if path else str(k)
            if not _text_ok(str(k)):
                yield s.ErrorField(field=path or "body", problem="invalid key")
            else:
                yield from _bad_strings(v, key)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _bad_strings(v, f"{path}.{i}")


async def _loop_answer(ask: Callable[[], Future[_T]], wake: Callable[[], None], after: str) -> _T:
    """The scheduler loop's answer to ``ask()``, a request its next pass answers (a what-if,
    a withdrawal): 503 where the loop runs no passes, or where it has not begun to answer
    within ``WHAT_IF_WAIT_S`` (the request is then given up: ``after`` says what that
    means); an answer the loop has begun is awaited, so what it does is what is said."""
    try:
        asked = ask()
    except RuntimeError as e:  # the loop runs no passes: nothing would answer
        raise ApiError(503, f"the scheduler cannot answer: {e}") from None
    wake()
    try:
        return await asyncio.wait_for(asyncio.wrap_future(asked), WHAT_IF_WAIT_S)
    except TimeoutError:
        if asked.cancel():
            raise ApiError(503, f"the scheduler did not answer within {WHAT_IF_WAIT_S:g} s; "
                           f"{after}") from None  # fmt: skip
        return await asyncio.wrap_future(asked)


def _parse_time(name: str, value: str | None) -> int | None:
    """``since``/``until``: epoch milliseconds, or an ISO 8601 date or time (UTC unless it
    says otherwise)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit() and len(text) <= 15:
        ms = int(text)
    else:
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            t = None
        if t is None:
            raise ApiError(
                422,
                f"invalid request: {name}: epoch milliseconds or an ISO 8601 date/time",
                fields=[s.ErrorField(field=name, problem="epoch ms or ISO 8601 date/time")],
            )
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        ms = int(t.timestamp() * 1000)
    if not 0 <= ms <= MAX_MS:
        raise ApiError(
            422,
            f"invalid request: {name}: out of range",
            fields=[s.ErrorField(field=name, problem="out of range")],
        )
    return ms


def create_app(
    store: Store,
    *,
    metrics: ControlMetrics,
    log_file: LogFile,
    wake: Callable[[], None] = lambda: None,
    queues: Callable[[], list[dict[str, Any]]] = lambda: [],
    clock_ms: Callable[[], int] = now_ms,
    max_body_bytes: int = 1_048_576,
    metrics_public: bool = False,
    telemetry: Callable[[], Mapping[tuple[str, int], GpuReading]] = dict,
    intake: Intake | None = None,
    health: Callable[[], str | None] = lambda: None,
    gpus: Callable[[], tuple[Mapping[str, float], Mapping[str, float]]] | None = None,
    gpu_sampling: str = "off: no sampler",
    what_if: Callable[[Job], Future[WhatIf]] | None = None,
    withdraw: Callable[[str, str], Future[str]] | None = None,
) -> FastAPI:
    """The API over ``store`` (see the module docstring and ``docs`` for the endpoints).

    ``intake`` checks each submission before it is stored (``suanli.control.intake``);
    ``health`` says why the scheduler is unwell (None: it is well) for ``/healthz``;
    ``gpus`` gives the GPUs per model (total, claimed) for the metrics, read at each scrape;
    ``gpu_sampling`` says how GPU utilisation is sampled (``nvml``, ``off: <why>``), for the
    job view; ``what_if`` asks the scheduler when a job would start if submitted now
    (``Controller.ask_what_if``); ``withdraw`` asks it to take a job back if still pending
    (``Controller.ask_withdraw``)."""
    app = FastAPI(
        title="suanli",
        version=suanli.__version__,
        description="The suanli control plane: submit, watch and cancel GPU jobs.",
        responses=_ERRORS,
    )
    install(app)
    submissions = SubmitBatcher(store, clock_ms)
    app.state.submissions = submissions  # closed with the server (see cli.serve)
    bearer = HTTPBearer(auto_error=False, description="An API token (suanli token create)")
    known_tokens = tk.TokenCache(store)

    async def principal(
        creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> tk.Principal:
        # Asynchronous, so that a known token costs no hop to a worker thread; an unknown
        # one is looked up in the store on a worker thread.
        if creds is None:
            raise _unauthorized("missing token: send Authorization: Bearer <token>")
        who = known_tokens.cached(creds.credentials)
        if who is None:
            who = await run_in_threadpool(known_tokens.authenticate, creds.credentials)
        if who is None:
            raise _unauthorized("invalid or revoked token")
        return who

    async def acting(who: Annotated[tk.Principal, Depends(principal)]) -> tk.Principal:
        """A principal that may use the API beyond ``/metrics`` (not a scraper's token)."""
        if who.scraper:
            raise ApiError(403, "a metrics token reads /metrics only")
        return who

    Who = Annotated[tk.Principal, Depends(acting)]
    Scraper = Annotated[tk.Principal, Depends(principal)]
    JobId = Annotated[str, PathParam(max_length=200)]

    def visible_job(who: tk.Principal, job_id: str) -> js.JobRecord:
        """The job, if ``who`` may see it; else 404, the same as for no such job."""
        job = None
        if _text_ok(job_id):
            job = js.get_job(store, job_id, tenant=None if who.admin else who.tenant)
        if job is None:
            raise ApiError(404, f"no job {job_id!r}")
        return job

    # --- jobs ------------------------------------------------------------------------------

    def accept(spec: JobSpec, who: tk.Principal, asking: bool = False) -> Accepted:
        """A submission's checks (``asking``: a what-if's, ``Intake.check_what_if``): the
        tenant and queue it is accepted for, or the ``ApiError`` that refuses it."""
        if spec.routing is not None and not who.admin:
            raise ApiError(403, "only a federation front (an admin token) attaches a routing "
                           "decision to a job")  # fmt: skip
        bad = list(_bad_strings(spec.model_dump(mode="json"), ""))
        if bad:
            raise ApiError(422, invalid(bad), fields=bad)
        try:
            spec.task_request()
        except ValueError as e:
            raise ApiError(422, f"invalid request: {e}") from None
        try:
            if intake is not None:
                return intake.check_what_if(spec, who) if asking else intake.check(spec, who)
            # no control plane behind the API (tests of the API alone)
            tenant = spec.tenant or who.tenant or "default"
            if not who.sees(tenant):
                raise Refused(403, f"this token may not submit for tenant {tenant!r}")
            return Accepted(tenant, spec.queue or tenant)
        except Refused as e:
            fields = [s.ErrorField(field=e.field, problem=e.message)] if e.field else []
            headers = (
                {"Retry-After": str(max(1, math.ceil(e.retry_after)))} if e.status == 429 else None
            )
            raise ApiError(e.status, e.message, fields=fields, headers=headers) from None

    @app.post("/v1/jobs", status_code=201, tags=["jobs"])
    async def submit(spec: JobSpec, who: Who) -> s.JobOut:
        """Submit a job. ``tenant`` defaults to the token's (an admin must give it);
        ``queue`` to the tenant."""
        ok = accept(spec, who)
        data = spec_data(spec, ok)
        name = spec.name or os.path.basename(spec.command[0])[:200] or "job"
        # Checked in the event loop (no I/O above but the intake's pending counts, read at
        # most once a second); the write waits for its batch without holding a worker thread.
        job = await asyncio.wrap_future(
            submissions.enqueue(
                js.NewJob(data, ok.tenant, who.user, name, ok.queue, spec.priority_class)
            )
        )
        if intake is not None:
            intake.accepted(ok.tenant)
        wake()
        return s.job_out(job)

    if what_if is not None:  # the route needs a scheduler behind the API to answer it
        ask = what_if

        @app.post("/v1/what-if", tags=["jobs"])
        async def what_if_start(spec: JobSpec, who: Who) -> s.WhatIfOut:
            """When the job would start if it were submitted now, as Slurm's ``sbatch
            --test-only`` says: checked as a submission is (a job that could never run is 422),
            then placed in the scheduler's plan after the jobs it holds. Nothing is queued. A
            tenant's what-ifs are limited apart from its submissions (429 past the rate)."""
            ok = accept(spec, who, asking=True)
            try:
                job = spec.job(f"what-if/{os.urandom(6).hex()}", clock_ms() / 1000, ok.tenant,
                               ok.queue, None, who.user)  # fmt: skip
            except (SpecError, ValueError) as e:
                raise ApiError(422, f"refused: {e}") from None
            got = await _loop_answer(lambda: ask(job), wake, "ask again")
            est = got.estimate

            def at(t: float) -> str | None:
                return s.iso(round(t * 1000)) if math.isfinite(t) else None

            return s.WhatIfOut(
                tenant=ok.tenant, queue=ok.queue, room_now=got.room_now,
                start_estimate=s.StartEstimateOut(p50=at(est.p50), p90=at(est.p90),
                                                  planned_at=at(est.planned_at) or ""),
                load=round(got.load, 6), pending_jobs=got.pending,
            )  # fmt: skip

    @app.get("/v1/jobs", tags=["jobs"])
    def list_jobs(
        who: Who,
        state: Annotated[list[str] | None, Query(description="state(s), repeated or a,b")] = None,
        queue: Annotated[str | None, Query(max_length=200)] = None,
        user: Annotated[str | None, Query(max_length=200)] = None,
        tenant: Annotated[str | None, Query(max_length=200)] = None,
        after: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$")] = None,
        limit: Annotated[int, Query(ge=1, le=js.MAX_PAGE)] = 100,
    ) -> s.JobPage:
        """Jobs in submission order, a page at a time (``next``: the ``after`` of the next
        page, null on the last). Non-admins see their tenant's jobs only."""
        states = [x.strip() for v in state or () for x in v.split(",") if x.strip()]
        unknown = sorted({x for x in states if x not in JOB_STATES})
        if unknown:
            field = s.ErrorField(field="state", problem=f"choose from {', '.join(JOB_STATES)}")
            raise ApiError(
                422, f"invalid request: state: unknown state(s) {', '.join(map(repr, unknown))}:"
                f" choose from {', '.join(JOB_STATES)}", fields=[field],
            )  # fmt: skip
        for name, value in (("queue", queue), ("user", user), ("tenant", tenant)):
            if value is not None and not _text_ok(value):
                field = s.ErrorField(field=name, problem="must not contain NUL characters")
                raise ApiError(422, invalid([field]), fields=[field])
        if not who.admin:
            if tenant is not None and tenant != who.tenant:
                return s.JobPage(jobs=[], next=None)
            tenant = who.tenant
        page = js.list_jobs(
            store,
            tenant=tenant,
            states=states,
            queue=queue,
            user=user,
            after=None if after is None else int(after),
            limit=limit,
        )
        nxt = str(page[-1].seq) if len(page) == limit else None
        return s.JobPage(jobs=[s.job_out(j) for j in page], next=nxt)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"])
    def get_job(job_id: JobId, who: Who) -> s.JobDetail:
        """The job, its attempts and its history."""
        job = visible_job(who, job_id)  # another tenant's job, and its samples: 404
        with store.read() as conn:
            sampled = job_utilisation(conn, job.id)
            attempts = [
                s.attempt_out(a, sampled.get(a.attempt)) for a in js.job_attempts(conn, job.id)
            ]
            history = [s.event_out(e) for e in js.job_history(conn, job.id)]
        return s.JobDetail(
            job=s.job_out(job), attempts=attempts, history=history, gpu_sampling=gpu_sampling
        )

    @app.post("/v1/jobs/{job_id}/cancel", status_code=202, tags=["jobs"])
    def cancel(job_id: JobId, who: Who) -> s.JobOut:
        """Ask for the job to be cancelled (the scheduler carries it out). A user cancels
        its own jobs, a tenant admin its tenant's."""
        job = visible_job(who, job_id)
        if not who.may_cancel(job.tenant, job.user):
            raise ApiError(403, f"job {job.id} is {job.user}'s: this token may not cancel it")
        try:
            job = js.request_cancel(store, job.id, clock_ms(), who.user)
        except js.JobStoreError:
            raise ApiError(404, f"no job {job_id!r}") from None
        wake()
        return s.job_out(job)

    if withdraw is not None:  # the route needs a scheduler behind the API to answer it
        take_back = withdraw

        @app.post("/v1/jobs/{job_id}/withdraw", tags=["jobs"])
        async def withdraw_job(
            job_id: JobId, who: Who, body: s.WithdrawIn | None = None
        ) -> s.JobOut:
            """Take the job back if it has not started: the scheduler's next pass cancels it
            if it is still pending, before anything could admit it, else it runs on and this
            is 409 saying why. For a federation front re-routing a job (admins only)."""
            if not who.admin:
                raise ApiError(403, "only a federation front (an admin token) withdraws a job; "
                               "cancel it instead")  # fmt: skip
            if body is not None:
                bad = list(_bad_strings(body.model_dump(mode="json"), ""))
                if bad:
                    raise ApiError(422, invalid(bad), fields=bad)
            job = visible_job(who, job_id)
            why = body.reason if body is not None and body.reason else f"withdrawn by {who.user}"
            refused = await _loop_answer(lambda: take_back(job.id, why), wake,
                                         "the job was not withdrawn")  # fmt: skip
            if refused:
                raise ApiError(409, f"not withdrawn: {refused}")
            return s.job_out(visible_job(who, job_id))

    @app.get(
        "/v1/jobs/{job_id}/logs",
        tags=["jobs"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def logs(
        job_id: JobId,
        who: Who,
        attempt: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
        task: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
        stream: Literal["stdout", "stderr"] = "stdout",
        tail: Annotated[int | None, Query(ge=0, le=MAX_LOG_LINES)] = None,
        offset: Annotated[int | None, Query(ge=0, le=MAX_ID)] = None,
    ) -> Response:
        """A task's log (default: task 0 of the latest attempt, stdout): all of it, its
        last ``tail`` lines, or from byte ``offset`` on. The ``X-Suanli-Log-Size`` header
        is where the text sent ends: the ``offset`` to ask for next."""
        job = visible_job(who, job_id)
        if tail is not None and offset is not None:
            raise ApiError(400, "give tail or offset, not both")
        n = attempt if attempt is not None else job.attempts
        if n < 1 or n > job.attempts:
            raise ApiError(404, f"job {job.id} has no attempt {n}")
        path = log_file(job.id, n, task, stream)
        try:
            size = path.stat().st_size if path is not None else -1
        except OSError:
            size = -1
        if path is None or size < 0:
            raise ApiError(404, f"no {stream} log for task {task} of attempt {n} of job {job.id}")
        if offset is not None:
            # Past the end of a log that was rotated (it starts afresh past its size cap):
            # the new file from its start; past the end of one never rotated: nothing.
            rotated = offset > size and path.with_name(path.name + ".1").exists()
            start = 0 if rotated else min(offset, size)
        elif tail is not None:
            start = tail_offset(path, tail, size)
        else:
            start = 0
        return StreamingResponse(
            read_range(path, start, size),
            media_type="text/plain; charset=utf-8",
            headers={LOG_SIZE_HEADER: str(size)},
        )

    install_services(
        app, store, who=acting, intake=intake, clock_ms=clock_ms, wake=wake,
        bad_strings=_bad_strings,
    )  # fmt: skip
    install_datasets(app, store, who=acting, clock_ms=clock_ms)

    # --- cluster ---------------------------------------------------------------------------

    @app.get("/v1/queues", tags=["cluster"])
    def list_queues(who: Who) -> s.QueueList:
        """The queues (quotas and usage), each with its pending and running jobs (running:
        admitted or running). Non-admins see the queues that serve their tenant."""
        counts = js.job_counts(store)
        out = []
        for q in queues():
            if not who.admin and not _serves(str(q.get("org", "")), who.tenant or ""):
                continue
            name = str(q.get("name"))
            pending = counts.get(("pending", name), 0)
            running = sum(counts.get((st, name), 0) for st in ("admitted", "running"))
            out.append({**q, "jobs": {"pending": pending, "running": running}})
        return s.QueueList(queues=out)

    @app.get("/v1/nodes", tags=["cluster"])
    def list_nodes(who: Who) -> s.NodeList:
        """The nodes and their GPUs (``used_milli``: thousandths of each GPU claimed)."""
        return s.NodeList(nodes=[s.node_out(n, g) for n, g in js.list_nodes(store)])

    def hold_node(who: tk.Principal, name: str, mode: str | None, reason: str) -> s.NodeOut:
        """An admin's hold on node ``name`` (``cordon``, ``drain``, None: none)."""
        if not who.admin:
            raise ApiError(403, "only admins cordon, drain or uncordon nodes")
        if not _text_ok(name) or not _text_ok(reason):
            raise ApiError(422, "node name and reason must be valid text without NUL")
        try:
            sn.set_cordon(store, name, mode, reason or None, clock_ms())
        except sn.NodeNotFound:
            raise ApiError(404, f"no node {name!r}") from None
        wake()
        ((node, its_gpus),) = js.list_nodes(store, name)
        return s.node_out(node, its_gpus)

    NodeName = Annotated[str, PathParam(max_length=200)]

    @app.post("/v1/nodes/{name}/cordon", tags=["cluster"])
    def cordon_node(name: NodeName, who: Who, body: s.NodeHold | None = None) -> s.NodeOut:
        """Cordon the node (admins): nothing new is placed there; what runs there runs on."""
        return hold_node(who, name, "cordon", body.reason if body is not None else "")

    @app.post("/v1/nodes/{name}/drain", tags=["cluster"])
    def drain_node(name: NodeName, who: Who, body: s.NodeHold | None = None) -> s.NodeOut:
        """Drain the node (admins): cordoned, and every attempt on it requeued from its
        checkpoint (stopped as a preemption is: its stop signal, then the kill)."""
        return hold_node(who, name, "drain", body.reason if body is not None else "")

    @app.post("/v1/nodes/{name}/uncordon", tags=["cluster"])
    def uncordon_node(name: NodeName, who: Who) -> s.NodeOut:
        """Put the node back in service (admins)."""
        return hold_node(who, name, None, "")

    @app.get("/v1/usage", tags=["cluster"])
    def usage(
        who: Who,
        by: Annotated[list[str] | None, Query(description=f"of {', '.join(DIMENSIONS)}")] = None,
        since: Annotated[str | None, Query(max_length=64)] = None,
        until: Annotated[str | None, Query(max_length=64)] = None,
    ) -> s.UsageOut:
        """Ledger totals grouped ``by`` (default: queue and resource, so that quantities are
        in one unit: GPU-hours, core-hours, GiB-hours) over charges starting in
        ``[since, until)`` (epoch ms or ISO 8601); and ``gpu``: the GPU time of the usage
        records starting then, allocated, used and idle by sampled utilisation, and the
        attempts without samples (unmeasured). Non-admins see their tenant's only."""
        chosen = by or ["queue", "resource"]
        dims = list(dict.fromkeys(x.strip() for v in chosen for x in v.split(",")))
        unknown = [d for d in dims if d not in DIMENSIONS]
        if unknown:
            field = s.ErrorField(field="by", problem=f"choose from {', '.join(DIMENSIONS)}")
            raise ApiError(422, invalid([field]), fields=[field])
        since_ms, until_ms = _parse_time("since", since), _parse_time("until", until)
        gpu = s.gpu_use_out(
            gpu_time(
                store,
                dims,
                since_ms=since_ms,
                until_ms=until_ms,
                tenant=None if who.admin else who.tenant or "",
            )
        )
        if who.admin:
            rows = totals(store, dims, since_ms=since_ms, until_ms=until_ms)
            return s.UsageOut(by=dims, totals=[s.usage_row(dims, t) for t in rows], gpu=gpu)
        asked = "department" in dims
        query = dims if asked else ["department", *dims]
        at = query.index("department")
        rows = [
            t
            for t in totals(store, query, since_ms=since_ms, until_ms=until_ms)
            if t.group[at] == who.tenant
        ]
        if not asked:
            rows = [
                type(t)(t.group[1:], t.currency, t.amount, t.quantity, t.raw, t.entries)
                for t in rows
            ]
        return s.UsageOut(by=dims, totals=[s.usage_row(dims, t) for t in rows], gpu=gpu)

    @app.get("/v1/whoami", tags=["tokens"])
    def whoami(who: Who) -> s.WhoAmI:
        """The token's name, role, tenant and user."""
        return s.whoami(who)

    # --- tokens ----------------------------------------------------------------------------

    @app.post("/v1/tokens", status_code=201, tags=["tokens"])
    def create_token(body: s.TokenCreate, who: Who) -> s.TokenCreated:
        """Make a token (its secret is in this answer only). An admin makes any; a tenant
        admin makes user and tenant-admin tokens of its own tenant; a user none."""
        tenant = body.tenant
        if body.role in ("admin", "metrics") and tenant is not None:
            field = s.ErrorField(field="tenant", problem=f"an {body.role} token has no tenant")
            raise ApiError(422, invalid([field]), fields=[field])
        if not who.admin:
            if who.role != "tenant-admin":
                raise ApiError(403, "only admins and tenant admins make tokens")
            if body.role in ("admin", "metrics"):
                raise ApiError(403, f"a tenant admin may not make {body.role} tokens")
            if tenant is not None and tenant != who.tenant:
                raise ApiError(403, "a tenant admin makes tokens of its own tenant only")
            tenant = who.tenant
        secret, info = tk.create_token(
            store, name=body.name, role=body.role, tenant=tenant, user=body.user,
            now_ms=clock_ms(),
        )  # fmt: skip
        return s.TokenCreated(token=secret, **s.token_out(info).model_dump())

    def _tokens_of(who: tk.Principal, doing: str = "list") -> list[tk.TokenInfo]:
        if who.admin:
            return tk.list_tokens(store)
        if who.role == "tenant-admin":
            return tk.list_tokens(store, who.tenant)
        if doing == "list":
            raise ApiError(403, "only admins and tenant admins list tokens")
        raise ApiError(403, f"only admins and tenant admins {doing} other tokens than their own")

    @app.get("/v1/tokens", tags=["tokens"])
    def list_tokens(who: Who) -> s.TokenList:
        """Tokens (never their secrets): all for an admin, its tenant's for a tenant admin."""
        return s.TokenList(tokens=[s.token_out(t) for t in _tokens_of(who)])

    @app.delete("/v1/tokens/{token_id}", tags=["tokens"])
    def revoke_token(token_id: Annotated[int, PathParam(ge=1, le=MAX_ID)], who: Who) -> s.TokenOut:
        """Revoke a token (again: no change). Admins any, tenant admins their tenant's,
        anyone its own."""
        if who.token_id == token_id:
            mine = [t for t in tk.list_tokens(store, who.tenant) if t.id == token_id]
        else:
            mine = [t for t in _tokens_of(who, "revoke") if t.id == token_id]
        if not mine:
            raise ApiError(404, f"no token {token_id}")
        tk.revoke_token(store, token_id, clock_ms())
        known_tokens.forget_all()
        info = next(t for t in tk.list_tokens(store, mine[0].tenant) if t.id == token_id)
        return s.token_out(info)

    # --- operations ------------------------------------------------------------------------

    def scrape(who: tk.Principal | None) -> Response:
        """Every tenant's metrics for an admin, a scraper's token or a public endpoint; a
        tenant's token sees its own queues' series only."""
        metrics.set_jobs(js.job_counts(store))
        metrics.set_gpu_samples(telemetry())  # read now: each scrape sees current readings
        if gpus is not None:
            metrics.set_gpus(*gpus())  # from the store's claims, as `suanli nodes` shows them
        held = sn.holds(store)
        metrics.set_holds(
            Counter(node for node, _ in held.faults),
            Counter(mode for mode, _, _ in held.cordons.values()),
        )
        scope, tenant = None, None
        if who is not None and not (who.admin or who.scraper):
            tenant = who.tenant
            scope = {q for (_, q), _n in js.job_counts(store, tenant=who.tenant).items()}
            scope |= {
                str(q["name"]) for q in queues() if _serves(str(q.get("org", "")), who.tenant or "")
            }
        body, content_type = metrics.render(scope, tenant)
        return Response(body, media_type=content_type)

    text_200: dict[int | str, dict[str, Any]] = {
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}}
    }
    if metrics_public:

        @app.get("/metrics", tags=["operations"], response_class=Response, responses=text_200)
        def metrics_open() -> Response:
            """Prometheus metrics (every tenant's)."""
            return scrape(None)

    else:

        @app.get("/metrics", tags=["operations"], response_class=Response, responses=text_200)
        def metrics_private(who: Scraper) -> Response:
            """Prometheus metrics: every tenant's for an admin or a ``metrics`` token, its
            own queues' for a tenant's token."""
            return scrape(who)

    @app.get("/healthz", tags=["operations"])
    def healthz() -> s.Health:
        """Whether the API, its store and the scheduler loop work (no token needed): 503
        with the reason otherwise (the loop stopped, or has not completed a pass lately)."""
        try:
            with store.read() as conn:
                conn.execute(sa.text("SELECT 1"))
        except sa.exc.SQLAlchemyError as e:
            raise ApiError(503, f"store unavailable: {type(e).__name__}") from None
        unwell = health()
        if unwell is not None:
            raise ApiError(503, f"scheduler: {unwell}")
        return s.Health(status="ok")

    app.add_middleware(
        Guard, metrics=metrics, routes=app.router.routes, max_body_bytes=max_body_bytes
    )
    return app
