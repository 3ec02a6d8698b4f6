"""Prometheus metrics of the control plane (``GET /metrics`` of ``suanli serve``).

Each :class:`ControlMetrics` has its own ``CollectorRegistry``, never the process-wide default
one, so that several servers in one process (tests) neither clash over metric names nor see
each other's values.

Gauges describe the state now and are replaced wholesale by each update: a label set that is
no longer reported (a queue with no jobs left, a model gone) is removed rather than left
showing its last value. Counters only grow. Metrics:

- ``suanli_gpus_total{model}``, ``suanli_gpus_allocated{model}``: GPUs, in GPU units (a
  fractional share counts as its fraction);
- ``suanli_jobs{state,queue}``: jobs by state and queue;
- ``suanli_scheduling_cycle_seconds``: histogram of scheduling-cycle durations (1 ms .. 10 s);
- ``suanli_admissions_total{queue}``, ``suanli_preemptions_total{queue,reason}``;
- ``suanli_api_requests_total{method,route,status}``: ``route`` is the route template
  (``/jobs/{id}``), not the path, to keep the number of series bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["CYCLE_BUCKETS", "ControlMetrics"]

CYCLE_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds) of the scheduling-cycle histogram: 1 ms to 10 s, about three per
decade (``+Inf`` is added)."""


class ControlMetrics:
    """The control plane's metrics, in a registry of their own; safe to update from several
    threads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._lock = threading.Lock()
        self.gpus_total = Gauge(
            "suanli_gpus_total", "GPUs in the cluster, by model.", ["model"], registry=r
        )
        self.gpus_allocated = Gauge(
            "suanli_gpus_allocated",
            "GPUs allocated to running tasks, by model (fractional shares count as fractions).",
            ["model"],
            registry=r,
        )
        self.jobs = Gauge("suanli_jobs", "Jobs by state and queue.", ["state", "queue"], registry=r)
        self.cycle_seconds = Histogram(
            "suanli_scheduling_cycle_seconds",
            "Duration of a scheduling cycle, in seconds.",
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.admissions = Counter(
            "suanli_admissions_total", "Jobs admitted, by queue.", ["queue"], registry=r
        )
        self.preemptions = Counter(
            "suanli_preemptions_total",
            "Jobs preempted, by queue and reason.",
            ["queue", "reason"],
            registry=r,
        )
        self.api_requests = Counter(
            "suanli_api_requests_total",
            "API requests, by method, route template and status code.",
            ["method", "route", "status"],
            registry=r,
        )
        self._gpu_models: set[str] = set()
        self._job_keys: set[tuple[str, str]] = set()
        per_gpu = ["node", "gpu"]
        self.gpu_utilization = Gauge(
            "suanli_gpu_utilization_ratio",
            "Share of the last sample period a GPU was busy (NVML), 0-1.",
            per_gpu,
            registry=r,
        )
        self.gpu_memory_used = Gauge(
            "suanli_gpu_memory_used_bytes", "GPU memory in use (NVML).", per_gpu, registry=r
        )
        self.gpu_power = Gauge(
            "suanli_gpu_power_watts", "GPU power draw (NVML).", per_gpu, registry=r
        )
        self.gpu_temperature = Gauge(
            "suanli_gpu_temperature_celsius", "GPU temperature (NVML).", per_gpu, registry=r
        )
        self._gpu_keys: set[tuple[str, int]] = set()

    def set_gpus(self, total: Mapping[str, float], allocated: Mapping[str, float]) -> None:
        """Replace the GPU gauges: ``total`` and ``allocated`` GPUs by model name.

        A model in ``total`` but not in ``allocated`` shows 0 allocated; models in neither
        are removed from both gauges.
        """
        models = set(total) | set(allocated)
        with self._lock:
            for model in models:
                self.gpus_total.labels(model).set(total.get(model, 0))
                self.gpus_allocated.labels(model).set(allocated.get(model, 0))
            for model in self._gpu_models - models:
                self.gpus_total.remove(model)
                self.gpus_allocated.remove(model)
            self._gpu_models = models

    def set_gpu_samples(self, samples: Mapping[tuple[str, int], GpuReading]) -> None:
        """Replace the per-GPU telemetry gauges with ``samples[(node, gpu index)]`` (NVML's
        readings; GPUs not given are removed, as are readings a GPU does not report)."""
        keys = set(samples)
        with self._lock:
            for (node, gpu), x in samples.items():
                labels = (node, str(gpu))
                self.gpu_utilization.labels(*labels).set(x.utilization_pct / 100)
                self.gpu_memory_used.labels(*labels).set(x.memory_used_mib * MIB)
                for gauge, value in (
                    (self.gpu_power, x.power_w),
                    (self.gpu_temperature, x.temperature_c),
                ):
                    if value is None:
                        _discard(gauge, labels)
                    else:
                        gauge.labels(*labels).set(value)
            for node, gpu in self._gpu_keys - keys:
                for gauge in self._gpu_gauges():
                    _discard(gauge, (node, str(gpu)))
            self._gpu_keys = keys

    def _gpu_gauges(self) -> tuple[Gauge, ...]:
        return (self.gpu_utilization, self.gpu_memory_used, self.gpu_power, self.gpu_temperature)

    def set_jobs(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Replace the job gauge: ``counts[(state, queue)]`` jobs; pairs not given are
        removed."""
        keys = set(counts)
        with self._lock:
            for (state, queue), n in counts.items():
                self.jobs.labels(state, queue).set(n)
            for state, queue in self._job_keys - keys:
                self.jobs.remove(state, queue)
            self._job_keys = keys

    def observe_cycle(self, seconds: float) -> None:
        """Record one scheduling cycle that took ``seconds``."""
        self.cycle_seconds.observe(seconds)

    def admitted(self, queue: str, n: int = 1) -> None:
        """Count ``n`` jobs admitted from ``queue``."""
        self.admissions.labels(queue).inc(n)

    def preempted(self, queue: str, reason: str, n: int = 1) -> None:
        """Count ``n`` jobs of ``queue`` preempted for ``reason``."""
        self.preemptions.labels(queue, reason).inc(n)

    def request(self, method: str, route: str, status: int | str) -> None:
        """Count one API request (``route``: the route template, not the concrete path)."""
        self.api_requests.labels(method, route, str(status)).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text of every metric and its content type, for ``GET /metrics``."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


MIB = 1 << 20


class GpuReading(Protocol):
    """What ``set_gpu_samples`` reads of a sample (``backends.inventory.GpuSample``)."""

    @property
    def utilization_pct(self) -> int: ...
    @property
    def memory_used_mib(self) -> int: ...
    @property
    def power_w(self) -> float | None: ...
    @property
    def temperature_c(self) -> int | None: ...


def _discard(gauge: Gauge, labels: tuple[str, ...]) -> None:
    """Remove one labelled series of ``gauge`` if it exists."""
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
