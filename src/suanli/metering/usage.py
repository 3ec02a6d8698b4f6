"""Usage records: what each job attempt held, and for how long, attributed to its owner.

An **attempt** is one run of a job, from start until it finished, failed or was preempted.
A **usage record** is the resources one attempt held over one interval: the whole attempt in
the simulator, and one record per metering interval live (an attempt still running is
metered up to now, then onwards). Each record's key is unique per (job, attempt, interval),
so writing a record twice changes nothing.

Quantities are integers so that sums and splits are exact: times in epoch milliseconds (UTC),
GPUs in milli-GPU per GPU model (a half GPU is 500, two whole GPUs 2000), CPU in milli-cores,
memory in MiB, storage held in MB and network transferred in MB. A resource-time is then
``quantity × milliseconds``; ``GPU_SECOND`` and friends convert it to the priced units.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

MS_PER_HOUR = 3_600_000

# The priced unit of each resource, in (quantity unit × ms): GPU-hour, core-hour, GiB-hour,
# GB-hour of storage, and GB of network transfer (a count, not a time).
GPU_HOUR = Decimal(1000 * MS_PER_HOUR)  # milli-GPU × ms per GPU-hour
CPU_HOUR = Decimal(1000 * MS_PER_HOUR)  # milli-core × ms per core-hour
MEMORY_GIB_HOUR = Decimal(1024 * MS_PER_HOUR)  # MiB × ms per GiB-hour
STORAGE_GB_HOUR = Decimal(1000 * MS_PER_HOUR)  # MB × ms per GB-hour
NETWORK_GB = Decimal(1000)  # MB per GB

RESOURCES = ("gpu", "cpu", "memory", "storage", "network")
"""Metered resources: ``gpu`` (GPU-hours, per model), ``cpu`` (core-hours), ``memory``
(GiB-hours), ``storage`` (GB-hours held) and ``network`` (GB transferred)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of a job: who owns it, what it held, from ``start_ms`` to ``end_ms``.

    ``gpu`` lists (GPU model, milli-GPU held on that model), e.g. ``(("H100", 500),)`` for
    half an H100; ``outcome`` is ``finished``, ``preempted``, ``failed``, ``cancelled``,
    ``lost`` or ``running`` (live: not ended yet, ``end_ms`` is now). ``gpu_util`` is the
    measured share of the allocated GPU time the job kept busy, when known.
    """

    job_id: str
    attempt: int
    start_ms: int
    end_ms: int
    org: str
    queue: str
    priority_class: str
    cluster: str
    gpu: tuple[tuple[str, int], ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    storage_mb: int = 0
    network_mb: int = 0
    outcome: str = "finished"
    gpu_util: float | None = None

    def __post_init__(self) -> None:
        if self.end_ms < self.start_ms:
            raise ValueError(
                f"attempt {self.job_id}#{self.attempt}: ends ({self.end_ms}) before it starts "
                f"({self.start_ms})"
            )


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """What one attempt held over ``[start_ms, end_ms)``; ``key`` is unique per interval.

    ``network_mb`` is the transfer attributed to this interval (a count, split in proportion
    to time when an attempt is cut into intervals, the remainder to the last interval).
    """

    key: str
    job_id: str
    attempt: int
    start_ms: int
    end_ms: int
    org: str
    queue: str
    priority_class: str
    cluster: str
    gpu: tuple[tuple[str, int], ...]
    cpu_milli: int
    memory_mib: int
    storage_mb: int
    network_mb: int
    gpu_util: float | None = None

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms

    @property
    def gpu_milli(self) -> int:
        """Milli-GPU held, over all GPU models."""
        return sum(m for _, m in self.gpu)


def record_key(job_id: str, attempt: int, start_ms: int) -> str:
    """The unique key of the record of ``job_id``'s ``attempt`` for the interval from ``start_ms``."""
    return f"{job_id}#{attempt}@{start_ms}"


def usage_records(
    attempts: Iterable[Attempt], interval_ms: int | None = None
) -> Iterator[UsageRecord]:
    """The usage records of ``attempts``: one per attempt, or, with ``interval_ms``, one per
    slice of each attempt cut at multiples of ``interval_ms`` since the epoch (so that a
    live attempt metered again later yields the same keys for the slices already written)."""
    if interval_ms is not None and interval_ms <= 0:
        raise ValueError(f"interval_ms must be > 0, got {interval_ms}")
    for a in attempts:
        cuts = [a.start_ms]
        if interval_ms is not None:
            t = (a.start_ms // interval_ms + 1) * interval_ms
            while t < a.end_ms:
                cuts.append(t)
                t += interval_ms
        cuts.append(a.end_ms)
        total = a.end_ms - a.start_ms
        given = 0
        for k in range(len(cuts) - 1):
            s, e = cuts[k], cuts[k + 1]
            last = k == len(cuts) - 2
            net = (
                a.network_mb - given if last else (a.network_mb * (e - s) // total if total else 0)
            )
            given += net
            yield UsageRecord(
                key=record_key(a.job_id, a.attempt, s),
                job_id=a.job_id,
                attempt=a.attempt,
                start_ms=s,
                end_ms=e,
                org=a.org,
                queue=a.queue,
                priority_class=a.priority_class,
                cluster=a.cluster,
                gpu=a.gpu,
                cpu_milli=a.cpu_milli,
                memory_mib=a.memory_mib,
                storage_mb=a.storage_mb,
                network_mb=net,
                gpu_util=a.gpu_util,
            )
