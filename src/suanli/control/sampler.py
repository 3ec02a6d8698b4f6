"""The GPU utilisation sampler: what each running attempt's GPUs are doing, over time.

``UtilSampler`` runs on a thread of its own beside the scheduler loop (``suanli serve``
starts it), so a slow or hung driver never holds up scheduling. Every ``interval_s`` it
reads the store's running attempts (and stopping ones, whose tasks still run), asks its
reader (``suanli.backends.gpu_util``: NVML, or a stand-in in tests) about the GPUs they hold
on this node, attributes each reading to the attempts holding that GPU, and writes one
sample per (attempt, GPU) into the store (``suanli.store.utilisation``). Each sample stands
for the time since that attempt's previous reading of that GPU (the first: since the
attempt started), at most twice the interval, which weights the time-weighted mean.

Attribution:

- a GPU held by one attempt (whole, or a share nobody else holds now) is that attempt's:
  the GPU's utilisation and used memory;
- a GPU shared by several attempts is split by process: each attempt gets the SM
  utilisation of its own processes (the members of its tasks' process groups) and the
  memory they hold, as the driver reports per process. Where the driver gives no
  per-process figures, or none of the processes it lists is known here (another pid
  namespace), the GPU gives no sample to any of its holders: a utilisation is never
  invented or split by share;
- utilisation is of what the attempt holds: for a share, the attempt's part of the GPU
  divided by its share (a half-GPU task keeping half the GPU busy is at 100 %), at most
  100 %.

Failures never stop it: a reader that raises, or a store that refuses, is logged (once per
distinct error), counted (``errors``, and ``suanli_gpu_sampling_errors_total{stage}``), and
the next pass goes on. Each pass also replaces the per-job gauges of ``/metrics`` with its
readings; every ``fold_every_s`` it folds samples past ``retention_s`` or beyond
``max_rows`` into per-attempt summaries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from suanli.backends.gpu_util import DeviceUse, GpuUseReader, pid_exists, task_pids
from suanli.control.metrics import ControlMetrics
from suanli.store import Store
from suanli.store import utilisation as su

log = logging.getLogger("suanli.control.sampler")

FOLD_EVERY_S = 60.0
"""Seconds between two retention passes (folding old samples into summaries)."""
DEFAULT_INTERVAL_S = 10.0
DEFAULT_RETENTION_S = 7 * 86_400.0
DEFAULT_MAX_ROWS = 1_000_000

PidsOf = Callable[[Iterable[Mapping[str, Any]]], set[int]]
"""The live processes of tasks, from their stored handles (``gpu_util.task_pids``)."""


@dataclass(frozen=True, slots=True)
class JobReading:
    """A running job's latest sample, for ``/metrics`` (``metrics.JobGpuReading``)."""

    queue: str
    tenant: str
    utilization_ratio: float
    memory_used_mib: int


@dataclass
class _Holder:
    """One attempt's hold on one GPU of this node."""

    attempt: su.SampledAttempt
    milli: int  # its share of the GPU, summed over its tasks there


class UtilSampler:
    """See the module docstring. ``sample`` is one pass (tests call it with a fake clock);
    ``run`` repeats it until ``stop`` is set. One thread at a time."""

    def __init__(
        self,
        store: Store,
        reader: GpuUseReader,
        *,
        node: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        retention_s: float | None = DEFAULT_RETENTION_S,
        max_rows: int | None = DEFAULT_MAX_ROWS,
        clock: Callable[[], float] = time.time,
        metrics: ControlMetrics | None = None,
        pids_of: PidsOf = task_pids,
        pid_known: Callable[[int], bool] = pid_exists,
        fold_every_s: float = FOLD_EVERY_S,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if retention_s is not None and not retention_s > 0:
            raise ValueError(f"retention_s must be > 0, got {retention_s}")
        if max_rows is not None and max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        self.store = store
        self.reader = reader
        self.node = node
        self.interval_s = interval_s
        self.retention_s = retention_s
        self.max_rows = max_rows
        self.clock = clock
        self.metrics = metrics
        self.pids_of = pids_of
        self.pid_known = pid_known
        self.fold_every_s = fold_every_s
        self.passes = 0
        self.stored = 0
        """Samples written since start."""
        self.unattributed = 0
        """(attempt, GPU) readings dropped: a shared GPU without per-process figures."""
        self.errors = 0
        self.last_error: str | None = None
        self._last: dict[tuple[str, int, int], int] = {}  # (job, attempt, GPU) -> at_ms
        self._folded_at = -float("inf")

    # ------------------------------------------------------------------ one pass
    def sample(self) -> int:
        """One pass: read, attribute, store, export, and fold when due. Returns how many
        samples were stored. Never raises: failures are counted and logged."""
        self.passes += 1
        now = self.clock()
        at_ms = round(now * 1000)
        try:
            live = su.sampled_attempts(self.store)
        except Exception as e:  # noqa: BLE001 - the store may be down: try next pass
            self._failed("store", e)
            return 0
        holders = self._holders(live)
        readings: dict[int, DeviceUse] = {}
        if holders:
            try:
                readings = self.reader.read(sorted(holders))
            except Exception as e:  # noqa: BLE001 - a reader error must not stop sampling
                self._failed("read", e)
                self._export({})
                return 0
        samples = self._attribute(holders, readings, at_ms)
        stored = 0
        if samples:
            try:
                kept = su.record_samples(self.store, samples)
            except Exception as e:  # noqa: BLE001
                self._failed("store", e)
                kept = set()
            for s in samples:
                if (s.job_id, s.attempt) in kept:
                    self._last[(s.job_id, s.attempt, s.gpu)] = s.at_ms
                    stored += 1
            samples = [s for s in samples if (s.job_id, s.attempt) in kept]
        self.stored += stored
        seen = {(a.job_id, a.attempt) for a in live}
        self._last = {k: v for k, v in self._last.items() if (k[0], k[1]) in seen}
        self._export(self._per_job(live, samples))
        if now - self._folded_at >= self.fold_every_s:
            self.fold(now)
        return stored

    def fold(self, now: float) -> int:
        """Fold the samples past retention, or beyond the row cap, into summaries."""
        self._folded_at = now
        before = None if self.retention_s is None else round((now - self.retention_s) * 1000)
        try:
            return su.fold(self.store, before_ms=before, max_rows=self.max_rows)
        except Exception as e:  # noqa: BLE001
            self._failed("store", e)
            return 0

    def _holders(self, live: Sequence[su.SampledAttempt]) -> dict[int, list[_Holder]]:
        """This node's GPUs that running attempts hold, each with its holders."""
        out: dict[int, dict[tuple[str, int], _Holder]] = {}
        for a in live:
            for t in a.placement:
                if t.get("node") != self.node or t.get("until_ms") is not None:
                    continue  # another node's, or a task a resize removed
                for gpu in t.get("gpus", ()):
                    by = out.setdefault(int(gpu), {})
                    h = by.get((a.job_id, a.attempt))
                    if h is None:
                        by[(a.job_id, a.attempt)] = _Holder(a, int(t["gpu_milli"]))
                    else:
                        h.milli += int(t["gpu_milli"])
        return {gpu: list(by.values()) for gpu, by in out.items()}

    def _attribute(
        self, holders: Mapping[int, list[_Holder]], readings: Mapping[int, DeviceUse], at_ms: int
    ) -> list[su.Sample]:
        out: list[su.Sample] = []
        interval_ms = round(self.interval_s * 1000)
        for gpu in sorted(holders):
            reading = readings.get(gpu)
            if reading is None:
                continue  # the reader could not read this GPU
            hs = holders[gpu]
            figures = self._figures(hs, reading)
            for h, fig in zip(hs, figures, strict=True):
                if fig is None:
                    self.unattributed += 1
                    continue
                pct, memory = fig
                a = h.attempt
                last = self._last.get((a.job_id, a.attempt, gpu))
                if last is None:
                    span = min(at_ms - a.started_ms, interval_ms)
                else:
                    span = min(at_ms - last, 2 * interval_ms)
                if span <= 0:
                    continue  # no time passed since the last reading
                share = max(1, min(h.milli, 1000))
                util_bp = round(max(0.0, pct) * 100 * 1000 / share)
                out.append(
                    su.Sample(a.job_id, a.attempt, self.node, gpu, at_ms, span,
                              min(util_bp, 10_000), max(0, int(memory)))
                )  # fmt: skip
        return out

    def _figures(self, hs: list[_Holder], reading: DeviceUse) -> list[tuple[float, int] | None]:
        """(utilisation %, memory MiB) of the GPU for each holder, or None where it cannot
        be attributed (see the module docstring)."""
        if len(hs) == 1:
            return [(reading.utilization_pct, reading.memory_used_mib)]
        procs = reading.processes
        if procs is None:
            return [None] * len(hs)
        if procs and not any(self.pid_known(pid) for pid in procs):
            return [None] * len(hs)  # the driver's pids are not ours: another namespace
        out: list[tuple[float, int] | None] = []
        for h in hs:
            pids = self.pids_of(h.attempt.handles)
            mine = [procs[p] for p in pids if p in procs]
            if any(p.memory_mib is None for p in mine):
                out.append(None)
                continue
            pct = min(100.0, sum(p.sm_pct or 0.0 for p in mine))
            out.append((pct, sum(p.memory_mib or 0 for p in mine)))
        return out

    # ------------------------------------------------------------------ metrics, errors
    def _per_job(
        self, live: Sequence[su.SampledAttempt], samples: Sequence[su.Sample]
    ) -> dict[str, JobReading]:
        by: dict[tuple[str, int], list[su.Sample]] = {}
        for s in samples:
            by.setdefault((s.job_id, s.attempt), []).append(s)
        out: dict[str, JobReading] = {}
        for a in live:
            got = by.get((a.job_id, a.attempt))
            if got:
                out[a.job_id] = JobReading(
                    a.queue,
                    a.tenant,
                    sum(s.util_bp for s in got) / len(got) / 10_000,
                    sum(s.memory_mib for s in got),
                )
        return out

    def _export(self, readings: Mapping[str, JobReading]) -> None:
        if self.metrics is not None:
            self.metrics.set_job_gpu(readings)

    def _failed(self, stage: str, e: Exception) -> None:
        self.errors += 1
        text = f"{stage}: {type(e).__name__}: {e}"
        if self.metrics is not None:
            self.metrics.sampling_failed(stage)
        if text != self.last_error:
            log.warning("GPU utilisation sampling failed (%s); sampling goes on", text)
        self.last_error = text

    # ------------------------------------------------------------------ the thread
    def run(self, stop: threading.Event) -> None:
        """``sample`` every ``interval_s`` until ``stop`` is set (the first pass at once)."""
        while not stop.is_set():
            began = time.monotonic()
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001 - sample does not raise; belt and braces
                self._failed("pass", e)
            stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def start(self, stop: threading.Event) -> threading.Thread:
        """``run`` on a daemon thread of its own; returns the thread."""
        thread = threading.Thread(
            target=self.run, args=(stop,), name="suanli-gpu-sampler", daemon=True
        )
        thread.start()
        return thread
