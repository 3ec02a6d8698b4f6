"""The NVML health reader, over a stand-in for ``pynvml``: this machine has no GPU and no
NVIDIA driver, so the stand-in plays the driver (its lost GPUs, ECC counters, pending page
retirements, row remaps and XID events)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from suanli.backends.gpu_health import NvmlHealth


class FakeError(Exception):
    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


@dataclass
class Gpu:
    uuid: str
    lost: bool = False
    ecc: int | None = 0  # None: not supported
    retired_pending: int = 0
    remap: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass
class HealthNvml:
    """The subset of ``pynvml`` the health reader uses."""

    gpus: list[Gpu]
    events: list[tuple[int, int]] = field(default_factory=list)  # (GPU index, XID)
    init_fails: bool = False
    inits: int = 0

    NVMLError = FakeError
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_TIMEOUT = 10
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_FEATURE_ENABLED = 1
    nvmlEventTypeXidCriticalError = 8

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise FakeError(9, "Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        if not 0 <= i < len(self.gpus):
            raise FakeError(2, "Invalid Argument")
        if self.gpus[i].lost:
            raise FakeError(15, "GPU is lost")
        return i

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self.gpus[handle].uuid.encode()

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        assert (kind, counter) == (1, 0)
        if self.gpus[handle].ecc is None:
            raise FakeError(3, "Not Supported")
        return self.gpus[handle].ecc  # type: ignore[return-value]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        return self.gpus[handle].retired_pending

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        return self.gpus[handle].remap

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceRegisterEvents(self, handle: int, kind: int, events: str) -> None:
        assert kind == self.nvmlEventTypeXidCriticalError and events == "set"

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> Any:
        if not self.events:
            raise FakeError(10, "Timeout")
        index, xid = self.events.pop(0)
        return SimpleNamespace(device=index, eventData=xid)

    def nvmlEventSetFree(self, events: str) -> None:
        pass


def reader(n: int = 4, **kw: Any) -> tuple[HealthNvml, NvmlHealth, list[float]]:
    nvml = HealthNvml([Gpu(f"GPU-{i}") for i in range(n)])
    now = [0.0]
    return nvml, NvmlHealth(nvml, clock=lambda: now[0], **kw), now


def uuids(n: int = 4) -> dict[int, str]:
    return {i: f"GPU-{i}" for i in range(n)}


def test_healthy_gpus_read_healthy_and_nvml_stays_started() -> None:
    nvml, health, _ = reader()
    assert health.read(uuids()) == dict.fromkeys(range(4))
    assert health.read(uuids()) == dict.fromkeys(range(4))
    assert nvml.inits == 1
    health.close()
    health.read(uuids())
    assert nvml.inits == 2


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        (lambda g: setattr(g, "lost", True), "lost: the GPU fell off the bus"),
        (lambda g: setattr(g, "ecc", 2), "ecc: 2 uncorrected errors since the driver loaded"),
        (lambda g: setattr(g, "retired_pending", 1), "ecc: a page retirement is pending"),
        (lambda g: setattr(g, "remap", (3, 1, 1, 0)), "ecc: a row remapping is pending"),
        (lambda g: setattr(g, "remap", (3, 9, 0, 1)), "ecc: row remapping failed"),
        (lambda g: setattr(g, "uuid", "GPU-x"), "lost: GPU GPU-2 is no longer at index 2"),
    ],
)
def test_each_fault_is_found_on_its_gpu_and_clears_with_it(change: Any, fault: str) -> None:
    nvml, health, _ = reader()
    before = Gpu(**vars(nvml.gpus[2]))
    change(nvml.gpus[2])
    got = health.read(uuids())
    assert got[2] is not None and got[2].startswith(fault)
    assert [got[i] for i in (0, 1, 3)] == [None, None, None]
    nvml.gpus[2] = before  # reset, or replaced
    assert health.read(uuids())[2] is None


def test_an_unsupported_ecc_query_says_nothing() -> None:
    nvml, health, _ = reader()
    nvml.gpus[0].ecc = None
    assert health.read(uuids())[0] is None


def test_critical_xids_hold_for_their_time_and_application_xids_are_passed_over() -> None:
    nvml, health, now = reader(xid_hold_s=600)
    health.read(uuids())  # registers the GPUs for events
    nvml.events = [(1, 79), (3, 13), (3, 31)]  # 13 and 31: the application's faults
    assert health.read(uuids()) == {0: None, 1: "xid 79", 2: None, 3: None}
    now[0] = 599.0
    assert health.read(uuids())[1] == "xid 79"
    nvml.events = [(1, 48)]
    now[0] = 900.0
    assert health.read(uuids())[1] == "xid 48"  # the newest, held from its report
    now[0] = 1_500.0
    assert health.read(uuids())[1] is None


def test_a_driver_that_does_not_start_raises() -> None:
    nvml, health, _ = reader()
    nvml.init_fails = True
    with pytest.raises(FakeError, match="Driver Not Loaded"):
        health.read(uuids())
    with pytest.raises(ValueError, match="xid_hold_s"):
        NvmlHealth(nvml, xid_hold_s=-1)
