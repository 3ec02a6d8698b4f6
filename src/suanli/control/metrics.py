"""Prometheus metrics of the control plane (``GET /metrics`` of ``suanli serve``).

Each :class:`ControlMetrics` has its own ``CollectorRegistry``, never the process-wide default
one, so that several servers in one process (tests) neither clash over metric names nor see
each other's values.

Gauges describe the state now and are replaced wholesale by each update: a label set that is
no longer reported (a queue with no jobs left, a model gone) is removed rather than left
showing its last value. Counters only grow. Names follow Prometheus' conventions
(https://prometheus.io/docs/practices/naming/): base units as suffixes (``_seconds``,
``_bytes``, ``_watts``, ``_celsius``, ``_ratio``), ``_total`` on counters and only on
counters; ``promtool check metrics`` accepts the exposition (``tests/control/test_promtool.py``).
Metrics:

- ``suanli_gpus{model}``: GPUs in the cluster; ``suanli_gpus_allocated{model}``: GPUs claimed
  by running tasks; both in GPUs (a fractional share counts as its fraction);
- ``suanli_jobs{state,queue}``: jobs by state and queue;
- ``suanli_scheduling_cycle_seconds``: histogram of scheduling-cycle durations (1 ms .. 10 s);
- ``suanli_admissions_total{queue}``, ``suanli_preemptions_total{queue,reason}``;
- ``suanli_api_requests_total{method,route,status}``;
- ``suanli_gpu_utilization_ratio``, ``suanli_gpu_memory_used_bytes``,
  ``suanli_gpu_power_watts``, ``suanli_gpu_temperature_celsius``, all ``{node,gpu}``: NVML's
  per-GPU readings;
- ``suanli_job_gpu_utilization_ratio`` and ``suanli_job_gpu_memory_used_bytes``, both
  ``{job,queue,tenant}``: each running job's latest sample (``suanli.control.sampler``: the
  mean utilisation of what it holds over its GPUs, the memory its GPUs' readings gave it);
  ``suanli_gpu_sampled_jobs``: running jobs with a sample in the sampler's last pass;
  ``suanli_job_gpu_idle{job,queue,tenant}``: 1 for a running job whose GPUs have been idle
  for the whole idle window (``suanli.control.reclaim``), 0 for one that is not (only with
  idle detection on);
  ``suanli_gpu_sampling_errors_total{stage}``: sampling passes that failed;
- ``suanli_job_resizes_total{queue,tenant,direction}``: resizes of elastic jobs
  (``suanli.control.resize``), ``grow`` or ``shrink``.

Bounded labels. Every label takes a bounded set of values, whatever users send:

- ``queue``: a known queue name, else :data:`OTHER_QUEUE` (``_other``, which no queue can be
  called: queue names match ``^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$``). The known queues are
  those of the quota file, given to the constructor; without one (``queues=None``) they are
  the first ``max_queues`` distinct valid names seen, kept for the life of the instance;
- ``state``: a job state of ``suanli.store.schema.JOB_STATES``, else ``other``;
- ``reason``: ``priority``, ``reclaim`` or ``defrag`` (the preemption kinds) or ``idle`` (an
  idle job's GPUs reclaimed), else ``other``;
- ``method``: a standard HTTP method, else ``other``; ``route``: the route template
  (``/v1/jobs/{job_id}``), not the path, at most :data:`MAX_ROUTES` distinct ones, else
  ``other``; ``status``: the status code as given (a number, so bounded);
- ``model``, ``node``, ``gpu``: from the cluster file and its inventory (admin-chosen);
- ``job``, ``tenant``: the running jobs' ids and tenants, at most :data:`MAX_JOB_SERIES`
  jobs at a time (those first in submission order; the rest are left out of the per-job
  gauges and counted in ``suanli_gpu_sampled_jobs`` only); a job's series are removed when
  it stops running;
- ``stage``: ``read``, ``store`` or ``pass``, else ``other``;
- ``direction``: ``grow`` or ``shrink``, else ``other``; the resize counter's ``tenant``: the
  first ``max_queues`` distinct tenants seen, else ``_other`` (shown to no tenant).

Tenant views. ``render(queues)`` with a set of queue names is what a plain user's token may
read. The rule:

- metrics labelled by queue (``suanli_jobs``, ``suanli_admissions_total``,
  ``suanli_preemptions_total``) show only the series of the tenant's queues; the folded
  ``_other`` series is never shown (it mixes other tenants' queues);
- metrics of the shared hardware and of the scheduler itself are shown whole: GPU capacity
  and allocation by model, per-GPU telemetry, the scheduling-cycle histogram. In a shared
  cluster these are what every tenant needs to judge its wait and are no tenant's secret;
- metrics labelled by tenant (the per-job GPU gauges, the resize counter) show only the viewer's own tenant's
  series, even in a queue it shares with other tenants;
- everything else is hidden, in particular ``suanli_api_requests_total`` (every tenant's
  traffic by route and status). The list of shown metrics is an allow-list: a metric added
  later stays out of tenant views until it is put on it.

``render()`` (no set) shows everything: for admins and a scraper's ``metrics`` role.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Metric,
    generate_latest,
)
from prometheus_client.registry import Collector

from suanli.store.schema import JOB_STATES

__all__ = [
    "CYCLE_BUCKETS",
    "HTTP_METHODS",
    "MAX_ROUTES",
    "OTHER",
    "OTHER_QUEUE",
    "PREEMPTION_REASONS",
    "MAX_JOB_SERIES",
    "ControlMetrics",
    "GpuReading",
    "JobGpuReading",
    "JobIdleFlag",
]

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

OTHER_QUEUE = "_other"
"""The ``queue`` label of everything not a known queue (no queue name starts with ``_``)."""

OTHER = "other"
"""The value of a ``state``, ``reason``, ``method`` or ``route`` label outside its known set."""

QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
"""What a queue name is (``suanli.control.spec``); anything else is folded."""

HTTP_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
PREEMPTION_REASONS = frozenset({"priority", "reclaim", "defrag", "idle"})
MAX_ROUTES = 256
"""Distinct ``route`` labels kept (routes are the app's templates, far fewer: a guard only)."""

MAX_JOB_SERIES = 1000
"""Running jobs with per-job GPU series at one time (the rest are left out)."""
SAMPLING_STAGES = frozenset({"read", "store", "pass"})
RESIZES = frozenset({"grow", "shrink"})

MIB = 1 << 20


class ControlMetrics:
    """The control plane's metrics, in a registry of their own; safe to update from several
    threads.

    ``queues``: the known queue names (the quota file's); ``None`` keeps the first
    ``max_queues`` distinct names seen instead. Other queue names are counted under
    :data:`OTHER_QUEUE`.
    """

    def __init__(self, queues: Iterable[str] | None = None, max_queues: int = 100) -> None:
        if max_queues < 0:
            raise ValueError(f"max_queues must be >= 0, not {max_queues}")
        if isinstance(queues, str):
            raise TypeError("queues: a collection of queue names, not one string")
        self._fixed_queues = queues is not None
        self._queues: set[str] = set()
        for q in queues or ():
            if not QUEUE_NAME.fullmatch(q):
                raise ValueError(f"not a queue name: {q!r}")
            self._queues.add(q)
        self._max_queues = max_queues
        self._routes: set[str] = set()
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.gpus = Gauge(
            "suanli_gpus", "GPUs in the cluster, by model, in GPUs.", ["model"], registry=r
        )
        self.gpus_allocated = Gauge(
            "suanli_gpus_allocated",
            "GPUs claimed by running tasks, by model, in GPUs (a fractional share counts as "
            "its fraction).",
            ["model"],
            registry=r,
        )
        self.gpus_out = Gauge(
            "suanli_gpus_out_of_service",
            "GPUs a health fault keeps out of service, by node, in GPUs.",
            ["node"],
            registry=r,
        )
        self.nodes_held = Gauge(
            "suanli_nodes_held",
            "Nodes an operator holds out of service, by hold (cordon or drain), in nodes.",
            ["hold"],
            registry=r,
        )
        self._out_nodes: set[str] = set()
        self.jobs = Gauge(
            "suanli_jobs", "Jobs, by state and queue.", ["state", "queue"], registry=r
        )
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
            "Jobs preempted, by queue and reason (priority or reclaim).",
            ["queue", "reason"],
            registry=r,
        )
        self.resizes = Counter(
            "suanli_job_resizes_total",
            "Resizes of elastic jobs, by queue, tenant and direction (grow or shrink).",
            ["queue", "tenant", "direction"],
            registry=r,
        )
        self._tenants: set[str] = set()
        self.api_requests = Counter(
            "suanli_api_requests_total",
            "API requests, by method, route template and status code.",
            ["method", "route", "status"],
            registry=r,
        )
        per_gpu = ["node", "gpu"]
        self.gpu_utilization = Gauge(
            "suanli_gpu_utilization_ratio",
            "Share of the last sample period a GPU was busy (NVML), 0 to 1.",
            per_gpu,
            registry=r,
        )
        self.gpu_memory_used = Gauge(
            "suanli_gpu_memory_used_bytes",
            "GPU memory in use (NVML), in bytes.",
            per_gpu,
            registry=r,
        )
        self.gpu_power = Gauge(
            "suanli_gpu_power_watts", "GPU power draw (NVML), in watts.", per_gpu, registry=r
        )
        self.gpu_temperature = Gauge(
            "suanli_gpu_temperature_celsius",
            "GPU temperature (NVML), in degrees Celsius.",
            per_gpu,
            registry=r,
        )
        per_job = ["job", "queue", "tenant"]
        self.job_gpu_utilization = Gauge(
            "suanli_job_gpu_utilization_ratio",
            "Latest sampled GPU utilisation of a running job, of what it holds, mean over its "
            "GPUs, 0 to 1.",
            per_job,
            registry=r,
        )
        self.job_gpu_memory = Gauge(
            "suanli_job_gpu_memory_used_bytes",
            "GPU memory a running job used at its latest sample, over its GPUs, in bytes.",
            per_job,
            registry=r,
        )
        self.job_gpu_idle = Gauge(
            "suanli_job_gpu_idle",
            "1 if a running job's GPUs have been idle (duty below the idle threshold) for the "
            "whole idle window, else 0.",
            per_job,
            registry=r,
        )
        self.sampled_jobs = Gauge(
            "suanli_gpu_sampled_jobs",
            "Running jobs with a GPU utilisation sample in the sampler's last pass.",
            registry=r,
        )
        self.sampling_errors = Counter(
            "suanli_gpu_sampling_errors_total",
            "GPU utilisation sampling passes that failed, by stage (read, store, pass).",
            ["stage"],
            registry=r,
        )
        self._job_gpu_keys: set[tuple[str, str, str]] = set()
        self._job_idle_keys: set[tuple[str, str, str]] = set()
        self._gpu_models: set[str] = set()
        self._job_keys: set[tuple[str, str]] = set()
        self._gpu_keys: set[tuple[str, int]] = set()
        shared = (
            self.gpus,
            self.gpus_allocated,
            self.cycle_seconds,
            *self._gpu_gauges(),
        )
        per_queue = (
            self.jobs,
            self.admissions,
            self.preemptions,
            self.resizes,
            self.job_gpu_utilization,
            self.job_gpu_memory,
            self.job_gpu_idle,
        )
        self._tenant_families = frozenset(
            family.name for metric in (*shared, *per_queue) for family in metric.describe()
        )

    # --- bounded labels ----------------------------------------------------------------------

    @property
    def queues(self) -> frozenset[str]:
        """The queue names with series of their own (the rest are under ``_other``)."""
        with self._lock:
            return frozenset(self._queues)

    def _queue(self, queue: str) -> str:
        """The ``queue`` label of ``queue`` (call with the lock held)."""
        if queue in self._queues:
            return queue
        if self._fixed_queues or len(self._queues) >= self._max_queues:
            return OTHER_QUEUE
        if not QUEUE_NAME.fullmatch(queue):
            return OTHER_QUEUE
        self._queues.add(queue)
        return queue

    def _route(self, route: str) -> str:
        """The ``route`` label of ``route`` (call with the lock held)."""
        if route in self._routes:
            return route
        if len(self._routes) >= MAX_ROUTES:
            return OTHER
        self._routes.add(route)
        return route

    # --- updates -----------------------------------------------------------------------------

    def set_gpus(self, total: Mapping[str, float], allocated: Mapping[str, float]) -> None:
        """Replace the GPU gauges: ``total`` GPUs of the cluster and ``allocated`` GPUs (claimed
        by running tasks, e.g. summed from the store's claims), by model name.

        A model in ``total`` but not in ``allocated`` shows 0 allocated; models in neither
        are removed from both gauges.
        """
        models = set(total) | set(allocated)
        with self._lock:
            for model in models:
                self.gpus.labels(model).set(total.get(model, 0))
                self.gpus_allocated.labels(model).set(allocated.get(model, 0))
            for model in self._gpu_models - models:
                self.gpus.remove(model)
                self.gpus_allocated.remove(model)
            self._gpu_models = models

    def set_holds(self, gpus_out: Mapping[str, int], held: Mapping[str, int]) -> None:
        """Replace the hardware-hold gauges: GPUs out of service per node (nodes not given
        are removed) and nodes held per hold (``cordon``, ``drain``: 0 when none)."""
        with self._lock:
            for node, n in gpus_out.items():
                self.gpus_out.labels(node).set(n)
            for node in self._out_nodes - set(gpus_out):
                self.gpus_out.remove(node)
            self._out_nodes = set(gpus_out)
            for hold in ("cordon", "drain"):
                self.nodes_held.labels(hold).set(held.get(hold, 0))

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

    def set_job_gpu(self, readings: Mapping[str, JobGpuReading]) -> None:
        """Replace the per-job GPU gauges with ``readings[job id]`` (the sampler's last
        pass); jobs not given are removed. At most :data:`MAX_JOB_SERIES` jobs get series,
        the first in submission order (numeric ids as numbers)."""
        shown = sorted(readings, key=_job_order)[:MAX_JOB_SERIES]
        with self._lock:
            keys: set[tuple[str, str, str]] = set()
            for job in shown:
                x = readings[job]
                labels = (job, self._queue(x.queue), x.tenant)
                keys.add(labels)
                self.job_gpu_utilization.labels(*labels).set(x.utilization_ratio)
                self.job_gpu_memory.labels(*labels).set(x.memory_used_mib * MIB)
            for labels in self._job_gpu_keys - keys:
                _discard(self.job_gpu_utilization, labels)
                _discard(self.job_gpu_memory, labels)
            self._job_gpu_keys = keys
            self.sampled_jobs.set(len(readings))

    def set_job_idle(self, flags: Mapping[str, JobIdleFlag]) -> None:
        """Replace ``suanli_job_gpu_idle`` with ``flags[job id]`` (the running jobs the idle
        watch saw); jobs not given are removed. At most :data:`MAX_JOB_SERIES` jobs."""
        shown = sorted(flags, key=_job_order)[:MAX_JOB_SERIES]
        with self._lock:
            keys: set[tuple[str, str, str]] = set()
            for job in shown:
                x = flags[job]
                labels = (job, self._queue(x.queue), x.tenant)
                keys.add(labels)
                self.job_gpu_idle.labels(*labels).set(1 if x.idle else 0)
            for labels in self._job_idle_keys - keys:
                _discard(self.job_gpu_idle, labels)
            self._job_idle_keys = keys

    def sampling_failed(self, stage: str) -> None:
        """Count one failed sampling pass at ``stage`` (``read``, ``store``, ``pass``)."""
        self.sampling_errors.labels(stage if stage in SAMPLING_STAGES else OTHER).inc()

    def set_jobs(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Replace the job gauge with a snapshot: ``counts[(state, queue)]`` jobs (e.g. the
        store's ``job_counts``); pairs not given are removed. Queues folded into ``_other``
        (and unknown states into ``other``) are summed."""
        with self._lock:
            folded: dict[tuple[str, str], int] = {}
            for (state, queue), n in counts.items():
                k = (state if state in JOB_STATES else OTHER, self._queue(queue))
                folded[k] = folded.get(k, 0) + n
            for (state, queue), n in folded.items():
                self.jobs.labels(state, queue).set(n)
            for state, queue in self._job_keys - set(folded):
                self.jobs.remove(state, queue)
            self._job_keys = set(folded)

    def observe_cycle(self, seconds: float) -> None:
        """Record one scheduling cycle that took ``seconds``."""
        self.cycle_seconds.observe(seconds)

    def admitted(self, queue: str, n: int = 1) -> None:
        """Count ``n`` jobs admitted from ``queue``."""
        with self._lock:
            label = self._queue(queue)
        self.admissions.labels(label).inc(n)

    def preempted(self, queue: str, reason: str, n: int = 1) -> None:
        """Count ``n`` jobs of ``queue`` preempted for ``reason`` (``priority``, ``reclaim``)."""
        with self._lock:
            label = self._queue(queue)
        self.preemptions.labels(label, reason if reason in PREEMPTION_REASONS else OTHER).inc(n)

    def resized(self, queue: str, tenant: str, direction: str) -> None:
        """Count one resize of an elastic job of ``queue`` and ``tenant`` (``grow`` or
        ``shrink``). Tenants past the first ``max_queues`` seen are counted under
        :data:`OTHER_QUEUE`, which no tenant's view shows."""
        with self._lock:
            label = self._queue(queue)
            if tenant not in self._tenants and len(self._tenants) < self._max_queues:
                if QUEUE_NAME.fullmatch(tenant):
                    self._tenants.add(tenant)
            who = tenant if tenant in self._tenants else OTHER_QUEUE
        self.resizes.labels(label, who, direction if direction in RESIZES else OTHER).inc()

    def request(self, method: str, route: str, status: int | str) -> None:
        """Count one API request (``route``: the route template, not the concrete path)."""
        with self._lock:
            label = self._route(route)
        method = method if method in HTTP_METHODS else OTHER
        self.api_requests.labels(method, label, str(status)).inc()

    # --- exposition --------------------------------------------------------------------------

    def render(
        self, queues: Collection[str] | None = None, tenant: str | None = None
    ) -> tuple[bytes, str]:
        """The exposition text and its content type, for ``GET /metrics``.

        ``queues=None``: every metric (admins, the ``metrics`` role). A collection of queue
        names: the tenant view of those queues, for ``tenant`` (series labelled with another
        tenant, or with any tenant when ``tenant`` is None, are left out; the module
        docstring says what it shows).
        """
        if queues is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        if isinstance(queues, str):
            raise TypeError("queues: a collection of queue names, not one string")
        view = _TenantView(
            self.registry, self._tenant_families, frozenset(queues) - {OTHER_QUEUE}, tenant
        )
        return generate_latest(view), CONTENT_TYPE_LATEST


class _TenantView(Collector):
    """The registry's families on the allow-list, less every sample labelled with a queue not
    in ``queues``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        families: frozenset[str],
        queues: frozenset[str],
        tenant: str | None,
    ) -> None:
        self._registry = registry
        self._families = families
        self._queues = queues
        self._tenant = tenant

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            if family.name not in self._families:
                continue
            shown = copy.copy(family)
            shown.samples = [
                s
                for s in family.samples
                if ("queue" not in s.labels or s.labels["queue"] in self._queues)
                and ("tenant" not in s.labels or s.labels["tenant"] == self._tenant)
            ]
            yield shown


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


class JobGpuReading(Protocol):
    """What ``set_job_gpu`` reads of a job's latest sample (``control.sampler``)."""

    @property
    def queue(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def utilization_ratio(self) -> float: ...
    @property
    def memory_used_mib(self) -> int: ...


class JobIdleFlag(Protocol):
    """What ``set_job_idle`` reads of a job's idle flag (``control.reclaim.Flag``)."""

    @property
    def queue(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def idle(self) -> bool: ...


def _job_order(job: str) -> tuple[int, int, str]:
    """Submission order of job ids (numbers as numbers, other ids after them)."""
    return (0, int(job), "") if job.isdigit() else (1, 0, job)


def _discard(gauge: Gauge, labels: tuple[str, ...]) -> None:
    """Remove one labelled series of ``gauge`` if it exists."""
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
