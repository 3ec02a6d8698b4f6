"""What a submission must pass before the store accepts it (``POST /v1/jobs``).

The spec itself is already valid (``suanli.control.spec.JobSpec``: every number bounded,
every path absolute). ``Intake.check`` then decides, against this control plane's
configuration, in this order:

1. **tenant**: the spec's, else the token's (an admin's default: ``default``); a token
   submits for its own tenant only (403);
2. **queue**: with a quota file, a named queue must exist and serve the tenant (its
   organisation path is the tenant's or above it): a tenant never spends another's quota
   (403); with none named, the deepest queue serving the tenant. Without a quota file the
   queue is the tenant's name; an admin may name any;
3. **environment**: no loader variable (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ...) unless the
   admin allowed it (``--allow-env``);
4. **directories**: ``workdir`` and ``checkpoint_dir`` never inside the state directory (the
   database, tokens and other jobs' files); ``workdir`` must be a directory the tenant's
   tasks can enter and list as the uid they run as (``suanli.control.identity``);
5. **capacity**: a job no state of the cluster could hold, or that its queue or a per-user
   limit could never admit, is refused with the simulator's reason
   (``suanli.core.builder.Refusals``);
6. **fair use** (not for admins): at most ``rate`` submissions a second per tenant (a token
   bucket of ``burst``), and at most ``max_pending`` pending jobs per tenant: 429 with
   ``Retry-After``. Demand reports for a tenant's services (``check_report``) have a bucket
   of the same size of their own.

A refusal is ``Refused`` (status, one line, the field at fault, ``Retry-After``); nothing is
stored for it. The first five checks are pure; the last keeps counters, so one ``Intake``
serves one process (the API's event loop calls it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suanli.backends.base import loader_variables
from suanli.config.tenancy import TenancyConfig
from suanli.control.identity import RunAs, inside
from suanli.control.spec import JobSpec
from suanli.core.builder import Refusals, Setting
from suanli.core.model import ClusterSpec, SpecError
from suanli.store.tokens import Principal

DEFAULT_TENANT = "default"
"""The tenant of an admin's submission that names none."""
PENDING_REFRESH_S = 1.0
"""How stale the per-tenant pending counts may be (they are read from the store)."""


class Refused(Exception):
    """A submission refused: ``status`` (403, 422, 429), the message, the field at fault
    (None: the request as a whole) and, for 429, the seconds to wait."""

    def __init__(
        self, status: int, message: str, field: str | None = None, retry_after: float = 0
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.retry_after = retry_after


@dataclass(frozen=True)
class Accepted:
    tenant: str
    queue: str


@dataclass(frozen=True)
class Limits:
    """Fair use per tenant (``None``: no limit)."""

    rate: float | None = 50.0
    """Submissions a second, sustained."""
    burst: int = 200
    """Submissions at once, before the rate applies."""
    max_pending: int | None = 10_000
    """Pending jobs a tenant may have."""


class _Bucket:
    __slots__ = ("level", "at")

    def __init__(self, level: float, at: float) -> None:
        self.level = level
        self.at = at


class Intake:
    """See the module docstring."""

    def __init__(
        self,
        cluster: ClusterSpec,
        setting: Setting,
        *,
        tenancy: TenancyConfig | None = None,
        state_dir: Path | None = None,
        shared_dir: Path | None = None,
        run_as: RunAs | None = None,
        allowed_env: frozenset[str] = frozenset(),
        limits: Limits | None = None,
        pending_counts: Callable[[], Mapping[str, int]] = dict,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.refusals = Refusals(cluster, setting)
        self.tenancy = tenancy.tenancy if tenancy is not None else None
        self.state_dir = state_dir
        self.shared_dir = shared_dir
        self.run_as = run_as or RunAs()
        self.allowed_env = allowed_env
        self.limits = limits or Limits()
        self.pending_counts = pending_counts
        self.clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._pending: dict[str, int] = {}
        self._pending_at = -math.inf

    def check(self, spec: JobSpec, who: Principal) -> Accepted:
        ok = self._admissible(spec, who)
        if not who.admin:
            self._fair_use(ok.tenant)
        return ok

    def check_what_if(self, spec: JobSpec, who: Principal) -> Accepted:
        """A submission's checks for a job asked about but not submitted (``POST
        /v1/what-if``): its fair use is counted apart, at most ``rate`` a second (a token
        bucket of ``burst``) per tenant, and not against its pending jobs (it queues
        nothing); 429 with ``Retry-After`` past it."""
        ok = self._admissible(spec, who)
        if not who.admin:
            self._take(ok.tenant, "asks when a job would start", "what-ifs/s")
        return ok

    def _admissible(self, spec: JobSpec, who: Principal) -> Accepted:
        tenant = spec.tenant or who.tenant or DEFAULT_TENANT
        if not who.sees(tenant):
            raise Refused(403, f"this token may not submit for tenant {tenant!r}", "tenant")
        unmapped = self.run_as.refusal(tenant)
        if unmapped is not None:
            raise Refused(403, unmapped, "tenant")
        queue = self._queue(spec, who, tenant)
        self._environment(spec)
        self._directories(spec, tenant)
        self._capacity(spec, tenant, queue, who.user)
        return Accepted(tenant, queue)

    def accepted(self, tenant: str) -> None:
        """Count a stored submission towards ``tenant``'s pending jobs."""
        self._pending[tenant] = self._pending.get(tenant, 0) + 1

    # --- the checks ---------------------------------------------------------------------

    def _queue(self, spec: JobSpec, who: Principal, tenant: str) -> str:
        t = self.tenancy
        if t is None:
            if spec.queue is None:
                return tenant
            if not who.admin and spec.queue != tenant:
                raise Refused(
                    403,
                    f"queue {spec.queue!r} is not tenant {tenant!r}'s: without a quota file "
                    "a tenant's queue is its own name",
                    "queue",
                )
            return spec.queue
        if spec.queue is not None:
            names = [q.name for q in t.queues]
            if spec.queue not in names:
                raise Refused(422, f"no queue {spec.queue!r} (known: {', '.join(names)})", "queue")
            if not who.admin and not t.serves(spec.queue, tenant):
                raise Refused(
                    403, f"queue {spec.queue!r} does not serve tenant {tenant!r}", "queue"
                )
            return spec.queue
        serving = [q for q in t.queues if t.serves(q.name, tenant)]
        if not serving:
            raise Refused(422, f"no queue serves tenant {tenant!r}", "tenant")
        return max(
            serving, key=lambda q: len(q.org.strip("/").split("/")) if q.org.strip("/") else 0
        ).name

    def _environment(self, spec: JobSpec) -> None:
        for name in loader_variables(spec.env):
            if name not in self.allowed_env:
                raise Refused(
                    422,
                    f"env.{name}: a loader variable, not allowed in jobs (an admin may allow "
                    "it with suanli serve --allow-env)",
                    f"env.{name}",
                )

    def _directories(self, spec: JobSpec, tenant: str) -> None:
        for name in ("workdir", "checkpoint_dir"):
            path = getattr(spec, name)
            if path is not None and self.state_dir is not None and inside(path, self.state_dir):
                raise Refused(422, f"{name}: {path} is inside the control plane's state "
                                   "directory", name)  # fmt: skip
        shared = self.shared_dir
        if (
            spec.checkpoint_dir is not None
            and shared is not None
            and not inside(spec.checkpoint_dir, shared)
        ):
            raise Refused(
                422,
                f"checkpoint_dir: {spec.checkpoint_dir} is not on the shared path {shared} "
                "that every node sees (suanli serve --shared-dir): an attempt requeued after "
                "a node's loss may start on another node",
                "checkpoint_dir",
            )
        if (
            spec.checkpoint_dir is not None
            and shared is not None
            and inside(spec.checkpoint_dir, shared / "runs")
        ):
            raise Refused(422, f"checkpoint_dir: {spec.checkpoint_dir} is inside the control "
                               "plane's run directories on the shared path", "checkpoint_dir")  # fmt: skip
        if spec.workdir is not None:
            why = self.run_as.usable(spec.workdir, tenant)
            if why is not None:
                raise Refused(422, f"workdir: {why}", "workdir")

    def _capacity(self, spec: JobSpec, tenant: str, queue: str, user: str) -> None:
        try:
            job = spec.job("new", 0.0, tenant, queue, None, user)
            why = self.refusals.why(job)
        except (SpecError, ValueError) as e:
            raise Refused(422, f"refused: {e}") from None
        if why is not None:
            raise Refused(422, f"refused: the job {why}")

    def _fair_use(self, tenant: str) -> None:
        limits, now = self.limits, self.clock()
        if limits.max_pending is not None:
            if now - self._pending_at >= PENDING_REFRESH_S:
                self._pending = dict(self.pending_counts())
                self._pending_at = now
            have = self._pending.get(tenant, 0)
            if have >= limits.max_pending:
                raise Refused(
                    429,
                    f"tenant {tenant!r} has {have} pending jobs, the most it may have is "
                    f"{limits.max_pending}: wait for some to start",
                    retry_after=max(PENDING_REFRESH_S, 5.0),
                )
        self._take(tenant, "submits", "jobs/s")

    def check_report(self, tenant: str, who: Principal) -> None:
        """Fair use of the demand reports of ``tenant``'s services (not for admins): at most
        ``rate`` a second (a token bucket of ``burst``), counted apart from the tenant's
        submissions, so that its reporters never use up its submissions; 429 with
        ``Retry-After`` past it."""
        if not who.admin:
            self._take(tenant, "reports demand", "reports/s")

    def _take(self, tenant: str, what: str, unit: str) -> None:
        """One token from ``tenant``'s bucket for ``what`` (429 where it is empty)."""
        limits, now = self.limits, self.clock()
        if limits.rate is None:
            return
        key = (tenant, what)
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = _Bucket(float(limits.burst), now)
        b.level = min(float(limits.burst), b.level + (now - b.at) * limits.rate)
        b.at = now
        if b.level < 1.0:
            wait = (1.0 - b.level) / limits.rate
            raise Refused(
                429,
                f"tenant {tenant!r} {what} faster than {limits.rate:g} {unit} "
                f"(burst {limits.burst})",
                retry_after=wait,
            )
        b.level -= 1.0


def spec_data(spec: JobSpec, accepted: Accepted) -> dict[str, Any]:
    """The spec as stored: its JSON, with the tenant and queue it was accepted for."""
    data = spec.model_dump(mode="json")
    data.update(tenant=accepted.tenant, queue=accepted.queue)
    return data
