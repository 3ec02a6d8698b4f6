"""What the scheduler foresees of jobs and what jobs taught it, in the store: each pending
job's start estimate as the loop last planned it (migration ``0007``), and the ended runs a
restarted control plane's runtime predictor relearns (``suanli.core.starts``,
``suanli.predict``). Targets as in ``suanli.store.jobs``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from suanli.store.db import Target, reading, writing
from suanli.store.jobs import JobRecord, job_record
from suanli.store.schema import attempts, jobs

StartEstimate = tuple[int | None, int | None, int]
"""A pending job's start estimate as stored: P50 and P90 (None: none possible), and when its
plan was made, epoch milliseconds."""


def set_start_estimates(target: Target, estimates: dict[str, StartEstimate]) -> None:
    """Record the start estimates of jobs still pending (no event: they are refreshed as the
    queue moves)."""
    if not estimates:
        return
    with writing(target) as conn:
        for job_id, (p50, p90, planned) in estimates.items():
            conn.execute(
                sa.update(jobs)
                .where(jobs.c.id == job_id, jobs.c.state == "pending")
                .values(start_p50_ms=p50, start_p90_ms=p90, start_planned_ms=planned)
            )


@dataclass(frozen=True, slots=True)
class EndedRun:
    """A job that ended after running: its record and its last attempt's run."""

    job: JobRecord
    started_ms: int
    ended_ms: int

    @property
    def runtime_s(self) -> float:
        return max(0, self.ended_ms - self.started_ms) / 1000


RAN_OUTCOMES = ("succeeded", "failed", "timed-out")
"""How an attempt ends when its tasks ran to an end of their own (not stopped, not lost)."""


def ended_runs(target: Target, limit: int) -> list[EndedRun]:
    """The latest ``limit`` jobs (by end) that succeeded or failed with their last attempt
    run to an end of its own, in the order they ended: what a runtime predictor learns from
    a control plane's history."""
    q = (
        sa.select(jobs, attempts.c.started_ms.label("a_started"), attempts.c.ended_ms.label("a_ended"))
        .join(attempts, sa.and_(attempts.c.job_id == jobs.c.id, attempts.c.attempt == jobs.c.attempts))
        .where(
            jobs.c.state.in_(["succeeded", "failed"]),
            attempts.c.outcome.in_(list(RAN_OUTCOMES)),
            attempts.c.started_ms.is_not(None),
            attempts.c.ended_ms.is_not(None),
        )
        .order_by(attempts.c.ended_ms.desc(), jobs.c.seq.desc())
        .limit(limit)
    )  # fmt: skip
    with reading(target) as conn:
        rows = list(conn.execute(q))
    return [EndedRun(job_record(r), int(r.a_started), int(r.a_ended)) for r in reversed(rows)]
