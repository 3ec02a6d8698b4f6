"""Live metering: each ended attempt's usage (and, with a price book, its charges) to the ledger.

An attempt is metered once it has ended: from the moment its tasks started to the moment the
last one ended, holding what its placement held (GPU shares per model, CPU, memory), owned by
``<tenant>/<user>`` in the job's queue and class. An elastic job's attempt that was resized
is metered in segments, cut where a task joined (``from_ms``) or left (``until_ms``): each
segment holds what its tasks held then (``attempt_usages``). The records are cut at multiples of the
metering interval (``usage.usage_records``), so their keys are fixed by the attempt alone:
writing them again (after a crash between the ledger write and the ``metered`` flag, say)
changes nothing. Usage, charges and the flag go in one transaction.

Where the attempt's GPUs were sampled (``suanli.control.sampler``), each record's
``gpu_util`` is the attempt's time-weighted mean utilisation over all its samples, raw and
folded (``suanli.store.utilisation``): the bill's used and idle GPU time, and, with a
``gpu-idle`` price, the idle charge. An attempt without samples has no ``gpu_util``: its
GPU time is unmeasured, never assumed used or idle. The sampler writes no sample once an
attempt's end is written, so the figure metering reads is final.

A job a federation front routed here from another region (its ``routing`` names this member
and, in what it asked of the federation, a ``home`` that is another member) is a
cross-region use: each of its charges is also settled, as the simulated federation settles
them (``suanli.federation.settle``): a ``settlement`` entry crediting ``region/<member>``
with the charge, in the same transaction.

``recomputed_usage`` rebuilds the usage records from the attempts table (and the samples)
alone; the ledger must hold exactly those (the crash-safety check compares the two).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from suanli.control.crash import crash_point
from suanli.metering.rating import rate
from suanli.metering.usage import Attempt, UsageRecord, usage_records
from suanli.store import Store, post_charges, post_settlements, provider, record_usage
from suanli.store import jobs as js
from suanli.store.utilisation import utilisation

if TYPE_CHECKING:
    from suanli.control.loop import ControlConfig

LEDGER_BATCH = "live"
"""The ledger batch of the control plane's charges."""


def attempt_usage(
    rec: js.JobRecord,
    a: js.AttemptRecord,
    cluster: str,
    models: dict[str, str | None],
    gpu_util: float | None = None,
) -> Attempt:
    """The metering view of attempt ``a`` of job ``rec``, never resized; ``models`` maps
    node names to their GPU model; ``gpu_util`` the attempt's sampled mean GPU utilisation
    (0 to 1), if any."""
    assert a.started_ms is not None and a.ended_ms is not None
    return _segment(rec, a, a.placement, a.started_ms, max(a.ended_ms, a.started_ms), cluster,
                    models, gpu_util)  # fmt: skip


def attempt_usages(
    rec: js.JobRecord,
    a: js.AttemptRecord,
    cluster: str,
    models: dict[str, str | None],
    gpu_util: float | None = None,
) -> list[Attempt]:
    """The metering view of attempt ``a``, one ``Attempt`` per span of time in which the
    same tasks ran (one in all for an attempt never resized): the boundaries are its start,
    its end and each task's ``from_ms`` and ``until_ms`` between them."""
    assert a.started_ms is not None and a.ended_ms is not None
    start, end = a.started_ms, max(a.ended_ms, a.started_ms)
    cuts = {start, end}
    for t in a.placement:
        for k in ("from_ms", "until_ms"):
            if t.get(k) is not None and start < int(t[k]) < end:
                cuts.add(int(t[k]))
    times = sorted(cuts)
    if len(times) == 1:
        return [_segment(rec, a, a.placement, start, end, cluster, models, gpu_util)]
    out = []
    for s, e in zip(times, times[1:], strict=False):
        held = [
            t for t in a.placement
            if int(t.get("from_ms") or start) <= s and int(t.get("until_ms") or end) >= e
        ]  # fmt: skip
        out.append(_segment(rec, a, held, s, e, cluster, models, gpu_util))
    return out


def _segment(
    rec: js.JobRecord,
    a: js.AttemptRecord,
    placement: list[dict[str, Any]],
    start_ms: int,
    end_ms: int,
    cluster: str,
    models: dict[str, str | None],
    gpu_util: float | None,
) -> Attempt:
    gpu: dict[str, int] = {}
    cpu = memory = 0
    for t in placement:
        model = models.get(t["node"])
        if model is not None and t["gpus"]:
            gpu[model] = gpu.get(model, 0) + t["gpu_milli"] * len(t["gpus"])
        cpu += t["cpu_milli"]
        memory += t["memory_mib"]
    return Attempt(
        job_id=rec.id,
        attempt=a.attempt,
        start_ms=start_ms,
        end_ms=end_ms,
        org=f"{rec.tenant}/{rec.user}",
        queue=rec.queue,
        priority_class=rec.priority_class,
        cluster=cluster,
        gpu=tuple(sorted(gpu.items())),
        cpu_milli=cpu,
        memory_mib=memory,
        outcome=a.outcome or "finished",
        gpu_util=gpu_util if gpu else None,
    )


def meter_attempt(
    store: Store,
    rec: js.JobRecord,
    a: js.AttemptRecord,
    config: ControlConfig,
    now_s: float | None = None,
) -> int:
    """Write the usage (and charges) of ended attempt ``a`` and flag it metered, in one
    transaction; returns how many usage records were new."""
    models = _models(config)
    at = datetime.fromtimestamp(now_s if now_s is not None else (a.ended_ms or 0) / 1000, UTC)
    with store.begin() as conn:
        util = sampled_util(conn, a.job_id, a.attempt)
        att = attempt_usages(rec, a, config.cluster.name, models, util)
        records = list(usage_records(att, config.meter_interval_ms))
        new = record_usage(conn, records)
        if config.prices is not None:
            charges = list(rate(records, config.prices))
            post_charges(conn, charges, at, LEDGER_BATCH)
            provider = cross_region(rec.spec)
            if provider is not None:
                post_settlements(conn, [(c, provider) for c in charges], at, LEDGER_BATCH)
        js.mark_metered(conn, a.job_id, a.attempt)
        crash_point("meter-inside")
    return new


def cross_region(spec: dict[str, Any]) -> str | None:
    """The account a job's charges are settled to (``region/<member>``) where a front
    routed it here from another home region (module docstring), else None."""
    note = spec.get("routing") or {}
    member, home = note.get("member"), (note.get("asks") or {}).get("home")
    if not isinstance(member, str) or not isinstance(home, str):
        return None
    region = member.split("/")[0]  # "member/model": a decision held to a GPU model
    return None if home == region else provider(region)


def recomputed_usage(store: Store, config: ControlConfig) -> list[UsageRecord]:
    """The usage records the ledger should hold: every ended, started attempt's."""
    models = _models(config)
    out: list[UsageRecord] = []
    with store.read() as conn:
        for rec in js.jobs_in(conn, js.JOB_STATES):
            for a in js.job_attempts(conn, rec.id):
                if a.state == "ended" and a.started_ms is not None:
                    util = sampled_util(conn, a.job_id, a.attempt)
                    att = attempt_usages(rec, a, config.cluster.name, models, util)
                    out.extend(usage_records(att, config.meter_interval_ms))
    return out


def sampled_util(conn: Any, job_id: str, attempt: int) -> float | None:
    """The attempt's time-weighted mean GPU utilisation over its samples (0 to 1), or
    None when it has none."""
    found = utilisation(conn, [(job_id, attempt)]).get((job_id, attempt))
    return None if found is None else found.ratio


def _models(config: Any) -> dict[str, str | None]:
    return {
        n.name: (n.gpu_model.name if n.gpu_model is not None else None)
        for n in config.cluster.nodes
    }
