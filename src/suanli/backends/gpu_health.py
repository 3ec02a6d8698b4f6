"""Reading whether GPUs are healthy, for the control plane's health watch.

One small interface, :class:`GpuHealthReader`: ``read(gpus)`` takes the GPUs to check (NVML
index -> the UUID the inventory found there, ``""`` if none) and returns each one's fault now
(a short text) or ``None`` for a healthy GPU. It raises when it cannot read at all (the
driver does not answer): that is not a GPU fault, and the watch keeps what it last knew.

:class:`NvmlHealth` is the implementation over NVML (``pynvml``, the ``nvidia-ml-py``
package). A GPU is faulty when:

- it cannot be reached: ``nvmlDeviceGetHandleByIndex`` or a query fails with
  ``NVML_ERROR_GPU_IS_LOST`` (the GPU fell off the bus, XID 79) or the index now holds
  another GPU than the inventory's UUID;
- it has uncorrected ECC errors since the driver loaded (``nvmlDeviceGetTotalEccErrors``,
  volatile counter: cleared by a GPU reset);
- a page retirement is pending (``nvmlDeviceGetRetiredPagesPendingStatus``) or row
  remapping is pending or has failed (``nvmlDeviceGetRemappedRows``): the GPU needs a reset,
  or a replacement;
- it reported a critical XID error (an ``nvmlEventTypeXidCriticalError`` event) in the last
  ``xid_hold_s`` seconds. XIDs that NVIDIA's Kubernetes device plugin treats as the
  application's fault, not the GPU's (13, 31, 43, 45, 68, 109: a graphics engine exception,
  a memory page fault, a stopped or cleaned-up context, a video decoder exception, a context
  switch timeout), are passed over by default.

A fault clears when its condition does (a reset clears the ECC counter and pending
retirements; an XID is held ``xid_hold_s`` after its last report). Queries the driver does
not support on a GPU (``NVML_ERROR_NOT_SUPPORTED``, ECC on a consumer GPU) say nothing.
NVML stays initialised between reads (the XID events are delivered to an event set that
must live), until ``close``. Tests pass a stand-in for the ``pynvml`` module as ``nvml``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from suanli.backends.inventory import shutdown

__all__ = ["APPLICATION_XIDS", "DEFAULT_XID_HOLD_S", "GpuHealthReader", "NvmlHealth"]

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs caused by the application rather than the GPU (the set NVIDIA's Kubernetes device
plugin skips when it marks devices unhealthy)."""
DEFAULT_XID_HOLD_S = 600.0
"""Seconds a GPU stays faulty after its last critical XID (a fault that persists shows
itself again, as a lost GPU, an ECC count or a pending retirement)."""


class GpuHealthReader(Protocol):
    """What the health watch reads GPUs through (:class:`NvmlHealth`, or a stand-in)."""

    def read(self, gpus: Mapping[int, str]) -> dict[int, str | None]:
        """Each GPU of ``gpus`` (index -> expected UUID): its fault, or None if healthy;
        raises if nothing could be read."""
        ...


class NvmlHealth:
    """:class:`GpuHealthReader` over NVML (see the module docstring). Safe to call from
    several threads (one read at a time)."""

    name = "nvml"

    def __init__(
        self,
        nvml: Any = None,
        *,
        xid_hold_s: float = DEFAULT_XID_HOLD_S,
        ignored_xids: frozenset[int] = APPLICATION_XIDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        if not xid_hold_s >= 0:
            raise ValueError(f"xid_hold_s: must be >= 0, got {xid_hold_s}")
        self.nvml = nvml
        self.xid_hold_s = xid_hold_s
        self.ignored_xids = ignored_xids
        self.clock = clock
        self._lock = threading.Lock()
        self._started = False
        self._events: Any = None
        self._registered: set[int] = set()
        self._xids: dict[int, tuple[int, float]] = {}  # GPU -> (last critical XID, when)

    def read(self, gpus: Mapping[int, str]) -> dict[int, str | None]:
        with self._lock:
            nvml = self.nvml
            if not self._started:
                nvml.nvmlInit()  # raises NVMLError: the watch counts it and keeps its state
                self._started = True
            now = self.clock()
            self._take_events(gpus, now)
            return {i: self._fault(i, uuid, now) for i, uuid in gpus.items()}

    def close(self) -> None:
        """Free the event set and shut NVML down (a later read starts it again)."""
        with self._lock:
            if self._events is not None:
                try:
                    self.nvml.nvmlEventSetFree(self._events)
                except self.nvml.NVMLError:
                    pass
            self._events, self._registered = None, set()
            if self._started:
                shutdown(self.nvml)
                self._started = False

    # ---------------------------------------------------------------- XID events
    def _take_events(self, gpus: Mapping[int, str], now: float) -> None:
        nvml = self.nvml
        kind = getattr(nvml, "nvmlEventTypeXidCriticalError", None)
        if kind is None:
            return
        try:
            if self._events is None:
                self._events = nvml.nvmlEventSetCreate()
            for i in gpus:
                if i not in self._registered:
                    self._registered.add(i)  # once: a GPU that cannot is not asked again
                    nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(i), kind,
                                                  self._events)  # fmt: skip
        except nvml.NVMLError:
            pass  # not supported here: the other checks still run
        if self._events is None:
            return
        while True:
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError:
                return  # NVML_ERROR_TIMEOUT: no more events
            xid = int(event.eventData)
            if xid in self.ignored_xids:
                continue
            try:
                index = int(nvml.nvmlDeviceGetIndex(event.device))
            except nvml.NVMLError:
                continue
            self._xids[index] = (xid, now)

    # ---------------------------------------------------------------- the checks
    def _fault(self, index: int, uuid: str, now: float) -> str | None:
        nvml = self.nvml
        lost = getattr(nvml, "NVML_ERROR_GPU_IS_LOST", 15)
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            if uuid:
                found = nvml.nvmlDeviceGetUUID(handle)
                found = found.decode() if isinstance(found, bytes) else found
                if found != uuid:
                    return f"lost: GPU {uuid} is no longer at index {index} (found {found})"
            for check in (self._ecc, self._retired, self._remapped):
                fault = check(handle)
                if fault is not None:
                    return fault
        except nvml.NVMLError as e:
            if getattr(e, "value", None) == lost:
                return "lost: the GPU fell off the bus"
            return f"unreachable: {e}"
        xid = self._xids.get(index)
        if xid is not None:
            if now - xid[1] < self.xid_hold_s:
                return f"xid {xid[0]}"
            del self._xids[index]
        return None

    def _supported(self, call: Callable[[], Any]) -> Any:
        """``call()``, or None where the driver does not support it on this GPU."""
        nvml = self.nvml
        try:
            return call()
        except nvml.NVMLError as e:
            if getattr(e, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                return None
            raise

    def _ecc(self, handle: Any) -> str | None:
        nvml = self.nvml
        count = self._supported(lambda: nvml.nvmlDeviceGetTotalEccErrors(
            handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC))  # fmt: skip
        if count:
            return f"ecc: {int(count)} uncorrected errors since the driver loaded"
        return None

    def _retired(self, handle: Any) -> str | None:
        nvml = self.nvml
        fn = getattr(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", None)
        if fn is None:
            return None
        pending = self._supported(lambda: fn(handle))
        if pending is not None and int(pending) == getattr(nvml, "NVML_FEATURE_ENABLED", 1):
            return "ecc: a page retirement is pending (the GPU needs a reset)"
        return None

    def _remapped(self, handle: Any) -> str | None:
        fn = getattr(self.nvml, "nvmlDeviceGetRemappedRows", None)
        if fn is None:
            return None
        rows = self._supported(lambda: fn(handle))
        if rows is None:
            return None
        _, _, pending, failed = rows
        if failed:
            return "ecc: row remapping failed (the GPU needs replacing)"
        if pending:
            return "ecc: a row remapping is pending (the GPU needs a reset)"
        return None
