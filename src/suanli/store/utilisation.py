"""GPU utilisation samples in the store: recording, retention, and reading them back.

Tables of migration ``0005`` (``schema.gpu_samples``, ``schema.gpu_util_summaries``).
Contracts:

- **Only live attempts get samples.** ``record_samples`` stores the samples of attempts
  that are running or stopping *when it commits*: it locks their rows first (PostgreSQL:
  ``FOR UPDATE SKIP LOCKED``, so it never waits on the scheduler; SQLite: its one writer),
  so no sample lands after an attempt's end is written, and the utilisation its bill was
  metered with never changes afterwards.
- **Retention without loss for the bill.** ``fold`` turns the raw samples older than a
  cut-off, and the oldest beyond a row cap, into per-attempt summaries (count, time
  covered, sum of utilisation x time, peak memory) and deletes them, in one transaction.
  The sums are integers, so an attempt's mean and peak read the same before and after.
- **Exact means.** Utilisation is stored in basis points (10000 = 100 %) and weighted by
  the milliseconds each sample stands for; ``Utilisation.ratio`` is the time-weighted mean.

``gpu_time`` is the bill's side: GPU time allocated, used and idle from the usage records
(whose ``gpu_util`` metering set from these samples), and the attempts without samples.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sqlalchemy as sa

from suanli.store.db import Store, Target, reading
from suanli.store.ledger import DIMENSIONS, dimension_value
from suanli.store.rows import chunks
from suanli.store.schema import (
    attempts,
    gpu_samples,
    gpu_util_summaries,
    jobs,
    usage_gpus,
    usage_records,
)

SAMPLED_STATES = ("running", "stopping")
"""Attempt states whose GPUs are sampled: their tasks have started and not all ended."""
MS_PER_DAY = 86_400_000
KEY_CHUNK = 400
"""(job, attempt) pairs per ``IN`` list."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of one GPU an attempt holds (see ``schema.gpu_samples``)."""

    job_id: str
    attempt: int
    node: str
    gpu: int
    at_ms: int
    span_ms: int
    util_bp: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class Utilisation:
    """An attempt's samples, raw and folded together: how many, the time they stand for,
    the sum of utilisation (basis points) x milliseconds, the peak GPU memory on any one of
    its GPUs, and the first and last reading's time."""

    samples: int
    span_ms: int
    util_bp_ms: int
    memory_max_mib: int
    first_ms: int
    last_ms: int

    @property
    def ratio(self) -> float:
        """Time-weighted mean utilisation, 0 to 1."""
        return self.util_bp_ms / self.span_ms / 10_000 if self.span_ms else 0.0

    @property
    def exact(self) -> Fraction:
        """``ratio`` as an exact fraction."""
        return Fraction(self.util_bp_ms, self.span_ms * 10_000) if self.span_ms else Fraction(0)

    def merged(self, other: Utilisation | None) -> Utilisation:
        if other is None:
            return self
        return Utilisation(
            self.samples + other.samples,
            self.span_ms + other.span_ms,
            self.util_bp_ms + other.util_bp_ms,
            max(self.memory_max_mib, other.memory_max_mib),
            min(self.first_ms, other.first_ms),
            max(self.last_ms, other.last_ms),
        )


@dataclass(frozen=True, slots=True)
class SampledAttempt:
    """A running or stopping attempt, with what the sampler needs of it and its job."""

    job_id: str
    attempt: int
    tenant: str
    queue: str
    started_ms: int
    placement: list[dict[str, Any]]
    handles: list[dict[str, Any]]


def _key_in(table: sa.Table, keys: Sequence[tuple[str, int]]) -> sa.ColumnElement[bool]:
    return sa.tuple_(table.c.job_id, table.c.attempt).in_(keys)


def sampled_attempts(target: Target) -> list[SampledAttempt]:
    """Attempts whose tasks run (``running``, ``stopping`` after a start), in admission
    order."""
    q = (
        sa.select(
            attempts.c.job_id,
            attempts.c.attempt,
            jobs.c.tenant,
            jobs.c.queue,
            attempts.c.started_ms,
            attempts.c.placement,
            attempts.c.handles,
        )
        .join(jobs, jobs.c.id == attempts.c.job_id)
        .where(attempts.c.state.in_(SAMPLED_STATES), attempts.c.started_ms.is_not(None))
        .order_by(attempts.c.id)
    )
    with reading(target) as conn:
        return [
            SampledAttempt(
                r.job_id,
                r.attempt,
                r.tenant,
                r.queue,
                r.started_ms,
                json.loads(r.placement),
                json.loads(r.handles) if r.handles else [],
            )
            for r in conn.execute(q)
        ]


def record_samples(store: Store, samples: Sequence[Sample]) -> set[tuple[str, int]]:
    """Store ``samples`` of the attempts still running or stopping, in one transaction;
    returns the (job, attempt) pairs whose samples were stored (the others ended meanwhile,
    or, on PostgreSQL, were being changed by the scheduler at that moment: their samples
    are dropped, never written after an end)."""
    for s in samples:
        if not (0 <= s.util_bp <= 10_000 and s.span_ms > 0 and s.memory_mib >= 0):
            raise ValueError(f"not a valid sample: {s}")
    keys = sorted({(s.job_id, s.attempt) for s in samples})
    if not keys:
        return set()
    live: set[tuple[str, int]] = set()
    with store.begin() as conn:
        for chunk in chunks(keys, KEY_CHUNK):
            q = (
                sa.select(attempts.c.job_id, attempts.c.attempt)
                .where(_key_in(attempts, chunk), attempts.c.state.in_(SAMPLED_STATES))
                .order_by(attempts.c.id)
                .with_for_update(skip_locked=True)
            )
            live.update((r.job_id, r.attempt) for r in conn.execute(q))
        rows = [
            {
                "job_id": s.job_id,
                "attempt": s.attempt,
                "node": s.node,
                "gpu": s.gpu,
                "at_ms": s.at_ms,
                "span_ms": s.span_ms,
                "util_bp": s.util_bp,
                "memory_mib": s.memory_mib,
            }
            for s in samples
            if (s.job_id, s.attempt) in live
        ]
        if rows:
            conn.execute(sa.insert(gpu_samples), rows)
    return live


@dataclass(frozen=True, slots=True)
class Reading:
    """An attempt's utilisation at one sampler pass: the mean over its GPUs read then."""

    last_id: int
    """The largest sample id it is made of (where the next read starts)."""
    job_id: str
    attempt: int
    at_ms: int
    util_bp: int


def readings_after(target: Target, after: int, limit: int = 100_000) -> list[Reading]:
    """The raw samples after id ``after`` (at most ``limit``), grouped per attempt and
    sampler pass (one ``at_ms``), in the order they were written."""
    q = (
        sa.select(
            gpu_samples.c.id,
            gpu_samples.c.job_id,
            gpu_samples.c.attempt,
            gpu_samples.c.at_ms,
            gpu_samples.c.util_bp,
        )
        .where(gpu_samples.c.id > after)
        .order_by(gpu_samples.c.id)
        .limit(limit)
    )
    groups: dict[tuple[str, int, int], list[int]] = {}
    last: dict[tuple[str, int, int], int] = {}
    with reading(target) as conn:
        for r in conn.execute(q):
            key = (r.job_id, r.attempt, r.at_ms)
            groups.setdefault(key, []).append(r.util_bp)
            last[key] = r.id
    out = [Reading(last[k], k[0], k[1], k[2], round(sum(v) / len(v))) for k, v in groups.items()]
    out.sort(key=lambda x: x.last_id)
    return out


def last_sample_id(target: Target) -> int:
    """The id of the latest raw sample (0: none)."""
    with reading(target) as conn:
        return int(conn.execute(sa.select(sa.func.max(gpu_samples.c.id))).scalar() or 0)


def _raw_sums(where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    c = gpu_samples.c
    return (
        sa.select(
            c.job_id,
            c.attempt,
            sa.func.count(),
            sa.func.sum(c.span_ms),
            sa.func.sum(c.util_bp * c.span_ms),
            sa.func.max(c.memory_mib),
            sa.func.min(c.at_ms),
            sa.func.max(c.at_ms),
        )
        .where(where)
        .group_by(c.job_id, c.attempt)
    )


def _of(row: Any) -> Utilisation:
    return Utilisation(*(int(v) for v in row[2:8]))


def fold(store: Store, *, before_ms: int | None = None, max_rows: int | None = None) -> int:
    """Fold raw samples into their attempts' summaries and delete them: those read before
    ``before_ms``, and, past ``max_rows`` raw rows, the oldest ones beyond it. One
    transaction; returns how many raw rows were folded."""
    if max_rows is not None and max_rows < 0:
        raise ValueError(f"max_rows must be >= 0, got {max_rows}")
    with store.begin() as conn:
        cut: list[sa.ColumnElement[bool]] = []
        if before_ms is not None:
            cut.append(gpu_samples.c.at_ms < before_ms)
        if max_rows is not None:
            n = int(conn.scalar(sa.select(sa.func.count()).select_from(gpu_samples)) or 0)
            if n > max_rows:
                last = conn.scalar(
                    sa.select(gpu_samples.c.id)
                    .order_by(gpu_samples.c.id)
                    .offset(n - max_rows - 1)
                    .limit(1)
                )
                cut.append(gpu_samples.c.id <= last)
        if not cut:
            return 0
        where = sa.or_(*cut)
        folded = {(r[0], int(r[1])): _of(r) for r in conn.execute(_raw_sums(where))}
        if not folded:
            return 0
        s = gpu_util_summaries.c
        before: dict[tuple[str, int], Utilisation] = {}
        for chunk in chunks(sorted(folded), KEY_CHUNK):
            q = sa.select(
                s.job_id, s.attempt, s.samples, s.span_ms, s.util_bp_ms, s.memory_max_mib,
                s.first_ms, s.last_ms,
            ).where(_key_in(gpu_util_summaries, chunk))  # fmt: skip
            before.update(((r[0], int(r[1])), _of(r)) for r in conn.execute(q))
        inserts = []
        for (job_id, attempt), u in folded.items():
            if (job_id, attempt) in before:
                total = before[(job_id, attempt)].merged(u)
                conn.execute(
                    sa.update(gpu_util_summaries)
                    .where(s.job_id == job_id, s.attempt == attempt)
                    .values(_summary_values(total))
                )
            else:
                inserts.append({"job_id": job_id, "attempt": attempt, **_summary_values(u)})
        if inserts:
            conn.execute(sa.insert(gpu_util_summaries), inserts)
        result = conn.execute(sa.delete(gpu_samples).where(where))
        return int(result.rowcount)


def _summary_values(u: Utilisation) -> dict[str, int]:
    return {
        "samples": u.samples,
        "span_ms": u.span_ms,
        "util_bp_ms": u.util_bp_ms,
        "memory_max_mib": u.memory_max_mib,
        "first_ms": u.first_ms,
        "last_ms": u.last_ms,
    }


def utilisation(
    target: Target, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], Utilisation]:
    """The sampled utilisation of each (job, attempt) of ``keys`` that has samples (raw
    and folded together); attempts without any are not in the answer."""
    wanted = sorted(set(keys))
    out: dict[tuple[str, int], Utilisation] = {}
    s = gpu_util_summaries.c
    with reading(target) as conn:
        for chunk in chunks(wanted, KEY_CHUNK):
            for r in conn.execute(_raw_sums(_key_in(gpu_samples, chunk))):
                out[(r[0], int(r[1]))] = _of(r)
            q = sa.select(
                s.job_id, s.attempt, s.samples, s.span_ms, s.util_bp_ms, s.memory_max_mib,
                s.first_ms, s.last_ms,
            ).where(_key_in(gpu_util_summaries, chunk))  # fmt: skip
            for r in conn.execute(q):
                key = (r[0], int(r[1]))
                out[key] = _of(r).merged(out.get(key))
    return {k: u for k, u in out.items() if u.span_ms > 0}


def job_utilisation(target: Target, job_id: str) -> dict[int, Utilisation]:
    """The sampled utilisation of each attempt of ``job_id`` that has samples."""
    with reading(target) as conn:
        numbers = conn.execute(
            sa.select(attempts.c.attempt).where(attempts.c.job_id == job_id)
        ).scalars()
        found = utilisation(conn, [(job_id, int(n)) for n in numbers])
    return {attempt: u for (_, attempt), u in found.items()}


def raw_samples(target: Target, job_id: str, attempt: int) -> list[Sample]:
    """The raw samples still kept of one attempt, in the order they were read."""
    c = gpu_samples.c
    q = (
        sa.select(gpu_samples)
        .where(c.job_id == job_id, c.attempt == attempt)
        .order_by(c.at_ms, c.id)
    )
    with reading(target) as conn:
        return [
            Sample(r.job_id, r.attempt, r.node, r.gpu, r.at_ms, r.span_ms, r.util_bp,
                   r.memory_mib)
            for r in conn.execute(q)
        ]  # fmt: skip


# --- the bill's side -----------------------------------------------------------------------

CHARGE_DIMENSIONS = ("resource", "band", "book_version", "batch")
"""The ledger's dimensions that are properties of charges, not of usage records."""
GPU_DIMENSIONS = tuple(d for d in DIMENSIONS if d not in CHARGE_DIMENSIONS)
"""The ledger's dimensions (``ledger.DIMENSIONS``) that usage records have."""


@dataclass
class GpuTime:
    """GPU time of one group, in milli-GPU x ms: allocated, and of it used and idle (where
    the attempt's utilisation was sampled) or unmeasured (where it was not)."""

    allocated: int = 0
    used: int = 0
    idle: int = 0
    unmeasured: int = 0


@dataclass
class GpuTimeReport:
    """``gpu_time``'s answer: per group, and every attempt without samples with its
    allocated GPU time (milli-GPU x ms), by (job, attempt)."""

    by: list[str]
    groups: dict[tuple[str, ...], GpuTime] = field(default_factory=dict)
    unmeasured: dict[tuple[str, int], int] = field(default_factory=dict)


def gpu_time(
    target: Target,
    by: Sequence[str],
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    tenant: str | None = None,
) -> GpuTimeReport:
    """GPU time allocated, used (allocated x the attempt's sampled mean utilisation, as
    metering put it in each usage record's ``gpu_util``) and idle (allocated - used), of the
    usage records starting in ``[since_ms, until_ms)`` (of ``tenant``'s jobs only, if given),
    grouped by those of ``by`` that usage records have (``GPU_DIMENSIONS``; the others are
    left out). Records without a utilisation are counted as unmeasured, neither used nor
    idle, and their attempts listed. Used time is rounded half-even to a milli-GPU x ms."""
    dims = [d for d in by if d in GPU_DIMENSIONS]
    r, g = usage_records.c, usage_gpus.c
    q = (
        sa.select(
            r.job_id, r.attempt, r.start_ms, r.end_ms, r.org, r.queue, r.priority_class,
            r.cluster, r.gpu_util, g.gpu_model, g.milli,
        )
        .join(usage_records, usage_records.c.key == g.record_key)
        .order_by(r.id, g.position)
    )  # fmt: skip
    if since_ms is not None:
        q = q.where(r.start_ms >= since_ms)
    if until_ms is not None:
        q = q.where(r.start_ms < until_ms)
    if tenant is not None:
        q = q.join(jobs, jobs.c.id == r.job_id).where(jobs.c.tenant == tenant)
    report = GpuTimeReport(dims)
    with reading(target) as conn:
        for row in conn.execute(q):
            allocated = int(row.milli) * (int(row.end_ms) - int(row.start_ms))
            if allocated <= 0:
                continue
            values = {**row._mapping, "day": int(row.start_ms) // MS_PER_DAY}
            group = tuple(dimension_value(d, values) for d in dims)
            fig = report.groups.setdefault(group, GpuTime())
            fig.allocated += allocated
            util = row.gpu_util
            if util is None or util != util:  # None or NaN: not measured
                fig.unmeasured += allocated
                key = (row.job_id, int(row.attempt))
                report.unmeasured[key] = report.unmeasured.get(key, 0) + allocated
                continue
            used = round(allocated * Fraction(min(max(float(util), 0.0), 1.0)))
            fig.used += used
            fig.idle += allocated - used
    return report


def unmeasured_by_attempt(report: GpuTimeReport) -> list[tuple[str, int, int]]:
    """The report's attempts without samples as (job, attempt, milli-GPU x ms), in job
    order (numeric ids as numbers)."""

    def order(k: tuple[str, int]) -> tuple[int, int | str, int]:
        job, attempt = k
        return (0, int(job), attempt) if job.isdigit() else (1, job, attempt)  # type: ignore[return-value]

    return [(j, a, report.unmeasured[(j, a)]) for j, a in sorted(report.unmeasured, key=order)]


__all__ = [
    "CHARGE_DIMENSIONS",
    "GPU_DIMENSIONS",
    "GpuTime",
    "GpuTimeReport",
    "SAMPLED_STATES",
    "Sample",
    "SampledAttempt",
    "Utilisation",
    "fold",
    "gpu_time",
    "job_utilisation",
    "raw_samples",
    "record_samples",
    "sampled_attempts",
    "unmeasured_by_attempt",
    "utilisation",
]
