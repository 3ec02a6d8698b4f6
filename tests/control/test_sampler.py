"""The GPU utilisation sampler over a real store (SQLite and PostgreSQL), the fake backend and
a fake clock.

There is no GPU and no NVML on this machine: ``gpu_standin.StandIn`` stands in for the
hardware, reporting what a script says each GPU is doing, so that every figure the sampler,
the store, metering and the bill produce can be checked against one computed by hand from
the stand-in's known readings. ``NvmlReader`` is tested against a stand-in ``pynvml``
module at the end.
"""

from __future__ import annotations

import logging
import threading
import time
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from fake_clock import Clock
from gpu_standin import StandIn, constant
from pg import postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
from suanli.backends.gpu_util import DeviceUse, NvmlReader, ProcessUse
from suanli.config.cluster import load_cluster
from suanli.control.loop import ControlConfig, Controller
from suanli.control.metering import recomputed_usage
from suanli.control.metrics import ControlMetrics
from suanli.control.sampler import UtilSampler
from suanli.control.spec import JobSpec
from suanli.core.builder import PolicySet
from suanli.metering.usage import GPU_HOUR
from suanli.store import Store, open_store, read_usage
from suanli.store import jobs as js
from suanli.store import utilisation as su
from suanli.store.schema import gpu_samples

CLUSTER = "1x4xTESTGPU[gpumem=80G,speed=1]"
NODE = "TESTGPU-0"
MIB = 1 << 20

store = store_fixture()


def gauge(metrics: ControlMetrics, name: str, labels: dict[str, str]) -> float | None:
    """The value of one series of ``metrics``' exposition (None: no such series)."""
    body = metrics.render()[0].decode()
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


def controller(store: Store, clock: Clock) -> Controller:
    cluster = load_cluster(CLUSTER)
    node = cluster.nodes[0]
    js.sync_inventory(
        store,
        [js.NodeRow(node.name, 4, "TESTGPU", 81920, node.cpu_milli, node.memory_mib, True, "x")],
        [js.GpuRow(node.name, i, "TESTGPU", f"v-{i}", 81920) for i in range(4)],
        0,
    )
    config = ControlConfig(cluster=cluster, policy=PolicySet.parse("fifo+best-fit"))
    ctl = Controller(store, config, FakeBackend(clock), clock=clock)
    ctl.recover()
    return ctl


def submit(store: Store, at: float, runtime: float | None, gpus: float = 1, **kw: Any) -> str:
    env = {RUNTIME_VARIABLE: str(runtime)} if runtime is not None else {}
    spec = JobSpec(command=["train"], gpus=gpus, cpu=1, memory="1G", env=env, **kw)
    return js.submit_job(
        store,
        spec=spec.model_dump(mode="json"),
        tenant="lab",
        user="ana",
        name="",
        queue="lab",
        priority_class="normal",
        now_ms=round(at * 1000),
    ).id


def gpus_of(store: Store, job: str) -> list[int]:
    (a,) = js.job_attempts(store, job)
    return [g for t in a.placement for g in t["gpus"]]


def test_a_stand_in_at_25_then_75_percent_gives_a_50_percent_mean_and_half_the_gpu_time_used(
    store: Store,
) -> None:
    """The stand-in reports 25 % for the job's first 10 s and 75 % for its next 10 s: the
    time-weighted mean is 50 %, the metered usage says so, and the bill's used GPU time is
    half the allocated (1 GPU x 20 s), the other half idle."""
    clock = Clock()
    ctl = controller(store, clock)
    job = submit(store, clock.t, runtime=20)
    ctl.step()
    start = clock.t

    def script(now: float, gpu: int) -> DeviceUse:
        return DeviceUse(25.0 if now - start <= 10 else 75.0, 4096 if now - start <= 10 else 6144)

    reader = StandIn(script, clock)
    sampler = UtilSampler(store, reader, node=NODE, interval_s=1.0, clock=clock)
    for _ in range(20):
        clock.t += 1
        assert sampler.sample() == 1
    ctl.step()  # the job ends at start + 20 s and is metered
    assert js.get_job(store, job).state == "succeeded"  # type: ignore[union-attr]
    (u,) = su.job_utilisation(store, job).values()
    assert (u.samples, u.span_ms, u.memory_max_mib) == (20, 20_000, 6144)
    assert u.ratio == 0.5 and u.util_bp_ms == (10 * 2500 + 10 * 7500) * 1000
    assert [r[1] for r in reader.reads] == [tuple(gpus_of(store, job))] * 20
    (record,) = list(read_usage(store))
    assert record.gpu_util == 0.5
    assert [r.gpu_util for r in recomputed_usage(store, ctl.config)] == [0.5]
    report = su.gpu_time(store, ["queue"])
    (fig,) = report.groups.values()
    allocated = 1000 * 20_000  # one GPU, 20 s, in milli-GPU x ms
    assert (fig.allocated, fig.used, fig.idle, fig.unmeasured) == (
        allocated,
        allocated // 2,
        allocated // 2,
        0,
    )
    assert report.unmeasured == {}
    assert fig.used / GPU_HOUR == Decimal(10) / 3600  # 10 GPU-seconds used


def test_no_sample_is_written_for_an_ended_attempt_and_unsampled_ones_are_unmeasured(
    store: Store,
) -> None:
    clock = Clock()
    ctl = controller(store, clock)
    sampled = submit(store, clock.t, runtime=5)
    unsampled = submit(store, clock.t, runtime=5)
    ctl.step()
    sampler = UtilSampler(
        store, StandIn(constant({0: (40.0, 100), 1: (40.0, 100)}), clock), node=NODE,
        interval_s=1.0, clock=clock,
    )  # fmt: skip
    clock.t += 5
    ctl.step()  # both end: no later sample may land on them
    late = su.Sample(sampled, 1, NODE, 0, round(clock.t * 1000), 1000, 4000, 100)
    assert su.record_samples(store, [late]) == set()
    assert sampler.sample() == 0
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(gpu_samples)).scalar() == 0
    report = su.gpu_time(store, ["job_id"])
    assert set(report.unmeasured) == {(sampled, 1), (unsampled, 1)}
    assert all(
        f.used == f.idle == 0 and f.unmeasured == f.allocated for f in report.groups.values()
    )
    with pytest.raises(ValueError, match="not a valid sample"):
        su.record_samples(store, [su.Sample("1", 1, NODE, 0, 0, 0, 100, 0)])


def test_a_shared_gpu_is_attributed_by_process_and_never_split_by_share(store: Store) -> None:
    """Two half-GPU jobs on one GPU: each gets its own processes' SM share over its own
    share (30 % of the GPU for a half is 60 % of what it holds); without per-process
    figures neither gets a sample."""
    clock = Clock()
    ctl = controller(store, clock)
    a = submit(store, clock.t, runtime=None, gpus=0.5, gpu_memory="10G")
    b = submit(store, clock.t, runtime=None, gpus=0.5, gpu_memory="10G")
    ctl.step()
    (gpu,) = set(gpus_of(store, a)) | set(gpus_of(store, b))  # best-fit: the same GPU
    pid = {a: 500, b: 600}
    procs: dict[int, ProcessUse] | None = {
        500: ProcessUse(30.0, 3000),
        600: ProcessUse(None, 1000),  # holds memory, ran no kernel since the last read
        777: ProcessUse(5.0, 10),  # someone else's
    }

    def script(now: float, i: int) -> DeviceUse:
        return DeviceUse(35.0, 4010, procs)

    sampler = UtilSampler(
        store, StandIn(script, clock), node=NODE, interval_s=1.0, clock=clock,
        pids_of=lambda handles: {pid[h["job_id"]] for h in handles}, pid_known=lambda p: True,
    )  # fmt: skip
    clock.t += 1
    assert sampler.sample() == 2
    got = su.utilisation(store, [(a, 1), (b, 1)])
    assert got[(a, 1)].ratio == 0.6 and got[(a, 1)].memory_max_mib == 3000
    assert got[(b, 1)].ratio == 0.0 and got[(b, 1)].memory_max_mib == 1000
    procs = None
    clock.t += 1
    assert sampler.sample() == 0 and sampler.unattributed == 2
    procs = {9999: ProcessUse(50.0, 10)}  # pids of another namespace: none is ours
    sampler.pid_known = lambda p: False
    clock.t += 1
    assert sampler.sample() == 0 and sampler.unattributed == 4
    assert su.utilisation(store, [(a, 1)])[(a, 1)].samples == 1


def test_retention_folds_old_samples_into_summaries_and_the_figures_stay(store: Store) -> None:
    clock = Clock()
    ctl = controller(store, clock)
    job = submit(store, clock.t, runtime=None, gpus=2)

    def script(now: float, gpu: int) -> DeviceUse:
        return DeviceUse(float((int(now) * 7 + gpu * 13) % 101), 1000 + int(now) % 50 + gpu)

    sampler = UtilSampler(
        store, StandIn(script, clock), node=NODE, interval_s=1.0, clock=clock,
        retention_s=5.0, max_rows=None, fold_every_s=1e9,
    )  # fmt: skip
    ctl.step()
    for _ in range(12):
        clock.t += 1
        sampler.sample()
    whole = su.job_utilisation(store, job)[1]
    assert whole.samples == 24 and whole.span_ms == 24_000
    assert len(su.raw_samples(store, job, 1)) == 24
    folded = sampler.fold(clock.t)  # the readings of the first 6 s are over 5 s old
    assert folded == 2 * 6
    assert len(su.raw_samples(store, job, 1)) == 2 * 6
    assert su.job_utilisation(store, job)[1] == whole
    # A row cap folds the oldest beyond it, and adds to the summary already there.
    assert su.fold(store, max_rows=3) == 9
    assert len(su.raw_samples(store, job, 1)) == 3
    assert su.job_utilisation(store, job)[1] == whole
    assert su.fold(store, before_ms=round(clock.t * 1000) + 1) == 3
    assert su.raw_samples(store, job, 1) == [] and su.job_utilisation(store, job)[1] == whole
    clock.t += 1
    sampler.sample()
    more = su.job_utilisation(store, job)[1]
    assert more.samples == 26 and more.span_ms == 26_000
    with pytest.raises(ValueError, match="max_rows"):
        su.fold(store, max_rows=-1)


def test_a_reader_that_raises_is_counted_and_logged_and_sampling_goes_on(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    ctl = controller(store, clock)
    job = submit(store, clock.t, runtime=None)
    ctl.step()
    metrics = ControlMetrics()
    broken = {"on": True}
    reader = StandIn(
        constant({g: (60.0, 2048) for g in range(4)}),
        clock,
        fail=lambda now: RuntimeError("NVML: GPU is lost") if broken["on"] else None,
    )
    sampler = UtilSampler(store, reader, node=NODE, interval_s=1.0, clock=clock, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="suanli.control.sampler"):
        for _ in range(3):
            clock.t += 1
            assert sampler.sample() == 0
            ctl.step()  # the scheduler goes on
    assert sampler.errors == 3 and "GPU is lost" in (sampler.last_error or "")
    assert len([r for r in caplog.records if "GPU is lost" in r.getMessage()]) == 1  # once
    body = metrics.render()[0].decode()
    assert 'suanli_gpu_sampling_errors_total{stage="read"} 3.0' in body
    broken["on"] = False
    clock.t += 1
    assert sampler.sample() == 1
    assert su.job_utilisation(store, job)[1].ratio == 0.6
    labels = {"job": job, "queue": "lab", "tenant": "lab"}
    assert gauge(metrics, "suanli_job_gpu_utilization_ratio", labels) == 0.6
    assert gauge(metrics, "suanli_job_gpu_memory_used_bytes", labels) == 2048 * MIB
    assert gauge(metrics, "suanli_gpu_sampled_jobs", {}) == 1
    # The job is cancelled: its series go with it.
    js.request_cancel(store, job, round(clock.t * 1000), "ana")
    ctl.step()
    clock.t += 1
    ctl.step()
    sampler.sample()
    body = metrics.render()[0].decode()
    assert f'job="{job}"' not in body and "suanli_gpu_sampled_jobs 0.0" in body


def test_the_sampler_thread_survives_any_failure_and_stops_when_told(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    try:
        clock = Clock()
        ctl = controller(store, clock)
        submit(store, clock.t, runtime=None)
        ctl.step()
        reader = StandIn(constant({0: (10.0, 1)}), fail=OSError("driver gone"))
        sampler = UtilSampler(store, reader, node=NODE, interval_s=0.02)
        stop = threading.Event()
        thread = sampler.start(stop)
        deadline = time.monotonic() + 10
        while sampler.errors < 3:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.01)
        stop.set()
        thread.join(5)
        assert not thread.is_alive() and sampler.last_error == "read: OSError: driver gone"
    finally:
        store.close()


def test_bad_sampler_settings_are_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    try:
        reader = StandIn(constant({}))
        for kw, what in (
            ({"interval_s": 0}, "interval_s"),
            ({"retention_s": -1}, "retention_s"),
            ({"max_rows": 0}, "max_rows"),
        ):
            with pytest.raises(ValueError, match=what):
                UtilSampler(store, reader, node=NODE, **kw)  # type: ignore[arg-type]
    finally:
        store.close()


# --- NvmlReader, over a stand-in pynvml module ---------------------------------------------


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """The part of ``pynvml`` the reader uses, over two GPUs: GPU 0 with per-process
    figures, GPU 1 without (the driver answers Not Supported)."""

    NVMLError = FakeNVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6

    def __init__(self) -> None:
        self.init_fails = False
        self.seen: list[int] = []
        self.samples = [
            SimpleNamespace(pid=10, timeStamp=100, smUtil=20),
            SimpleNamespace(pid=10, timeStamp=200, smUtil=40),
            SimpleNamespace(pid=11, timeStamp=150, smUtil=5),
        ]

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise FakeNVMLError(9)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i > 1:
            raise FakeNVMLError(2)
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=(70, 15)[h], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=(5000, 700)[h] * MIB, total=80_000 * MIB)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        if h == 1:
            raise FakeNVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return [SimpleNamespace(pid=10, usedGpuMemory=3000 * MIB),
                SimpleNamespace(pid=12, usedGpuMemory=None)]  # fmt: skip

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        if h == 1:
            raise FakeNVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return [SimpleNamespace(pid=10, usedGpuMemory=3000 * MIB)]  # the same process

    def nvmlDeviceGetProcessUtilization(self, h: int, since: int) -> list[Any]:
        self.seen.append(since)
        fresh = [s for s in self.samples if s.timeStamp > since]
        if not fresh:
            raise FakeNVMLError(self.NVML_ERROR_NOT_FOUND)
        return fresh


def test_the_nvml_reader_reads_devices_and_processes() -> None:
    nvml = FakeNvml()
    reader = NvmlReader(nvml)
    got = reader.read([0, 1, 2])  # GPU 2 cannot be read: left out
    assert set(got) == {0, 1}
    assert (got[0].utilization_pct, got[0].memory_used_mib) == (70.0, 5000)
    assert got[0].processes == {
        10: ProcessUse(30.0, 3000),  # mean of its two samples; in two lists, counted once
        11: ProcessUse(5.0, None),  # sampled, not in a running-process list
        12: ProcessUse(None, None),
    }
    assert got[1] == DeviceUse(15.0, 700, None)  # no per-process figures
    again = reader.read([0])  # only samples newer than the last one seen
    assert nvml.seen == [0, 200] and again[0].processes == {
        10: ProcessUse(None, 3000),
        12: ProcessUse(None, None),
    }
    nvml.init_fails = True
    with pytest.raises(FakeNVMLError):
        reader.read([0])
    assert reader.read([]) == {}
