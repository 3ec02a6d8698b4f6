"""Reading what GPUs are doing, for the control plane's utilisation sampler.

One small interface, :class:`GpuUseReader`: ``read(indices)`` returns a :class:`DeviceUse`
for each GPU it could read (by NVML index): the GPU's utilisation (%, over the driver's last
sample period), the GPU memory in use (MiB) and, where the driver gives them, per-process
figures (:class:`ProcessUse`, by pid) with which a GPU shared by several tasks is
attributed to each. A reader raises when it cannot read at all; a GPU it cannot read is
left out of the answer.

:class:`NvmlReader` is the implementation over NVML (``pynvml``, the ``nvidia-ml-py``
package): ``nvmlDeviceGetUtilizationRates`` and ``nvmlDeviceGetMemoryInfo`` per GPU, and per
process ``nvmlDeviceGetProcessUtilization`` (the SM share of each process's samples since the
previous read) with the compute, graphics and MPS running-process lists (each process's
used GPU memory). Where the driver does not give per-process figures (not supported, or an
error), ``DeviceUse.processes`` is ``None``: the GPU can then be attributed only to a sole
holder. Tests pass a stand-in for the ``pynvml`` module as ``nvml``, as the inventory's do.

:func:`task_pids` finds the processes of tasks from their stored handles: a task's
supervisor leads the task's process group, so its pid (checked against the start time
recorded at launch) names the group.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from suanli.backends.inventory import read_device, shutdown
from suanli.backends.shim import proc_stat, process_alive

__all__ = [
    "DeviceUse",
    "GpuUseReader",
    "NvmlReader",
    "ProcessUse",
    "nvml_present",
    "pid_exists",
    "task_pids",
]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessUse:
    """One process on a GPU: its SM utilisation (% of the GPU, mean of the driver's samples
    since the previous read; ``None`` when the driver has no sample of it, e.g. it ran no
    kernel) and the GPU memory it holds (MiB; ``None`` where the driver does not say)."""

    sm_pct: float | None
    memory_mib: int | None


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """One GPU: utilisation (%, 0 to 100), memory in use (MiB), and its processes by pid
    (``None``: the driver gives no per-process figures)."""

    utilization_pct: float
    memory_used_mib: int
    processes: Mapping[int, ProcessUse] | None = None


class GpuUseReader(Protocol):
    """What the sampler reads GPUs through (:class:`NvmlReader`, or a stand-in in tests)."""

    def read(self, indices: Sequence[int]) -> dict[int, DeviceUse]:
        """A reading of each GPU of ``indices`` that could be read; raises if none could
        be read at all (the driver is gone, say)."""
        ...


class NvmlReader:
    """:class:`GpuUseReader` over NVML. NVML is initialised and shut down on each read (as
    the inventory does: cheap, and no state left between reads), except for the timestamp
    of the last per-process sample seen on each GPU, which keeps each read to the samples
    since the one before. Safe to call from one thread at a time."""

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self.nvml = nvml
        self._seen: dict[int, int] = {}  # GPU -> the newest per-process sample's timestamp
        self._lock = threading.Lock()

    def read(self, indices: Sequence[int]) -> dict[int, DeviceUse]:
        nvml = self.nvml
        wanted = list(indices)
        if not wanted:
            return {}
        with self._lock:
            nvml.nvmlInit()  # raises NVMLError: the sampler counts it and goes on
            try:
                out: dict[int, DeviceUse] = {}
                for i in wanted:
                    device = read_device(nvml, i)
                    if device is None:
                        continue
                    handle, util, mem = device
                    out[i] = DeviceUse(
                        float(util.gpu), int(mem.used) // _MIB, self._processes(i, handle)
                    )
                return out
            finally:
                shutdown(nvml)

    def _processes(self, index: int, handle: Any) -> dict[int, ProcessUse] | None:
        """Per-process figures of one GPU, or ``None`` where the driver gives none."""
        nvml = self.nvml
        memory: dict[int, int | None] = {}
        listed = False
        for name in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
            "nvmlDeviceGetMPSComputeRunningProcesses",
        ):
            fn = getattr(nvml, name, None)
            if fn is None:
                continue
            try:
                procs = fn(handle)
            except nvml.NVMLError:
                continue
            listed = True
            for p in procs:
                # A process with both a compute and a graphics context is in both lists,
                # with the same memory: take the largest figure, never the sum.
                used = getattr(p, "usedGpuMemory", None)
                mib = None if used is None else int(used) // _MIB
                before = memory.get(int(p.pid))
                memory[int(p.pid)] = mib if before is None else max(before, mib or 0)
        if not listed:
            return None
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, self._seen.get(index, 0))
        except nvml.NVMLError as e:
            if getattr(e, "value", None) != getattr(nvml, "NVML_ERROR_NOT_FOUND", object()):
                return None  # not supported, or failed: no per-process attribution
            samples = []  # no process ran a kernel since the last read
        sm: dict[int, list[int]] = {}
        newest = self._seen.get(index, 0)
        for s in samples:
            sm.setdefault(int(s.pid), []).append(int(s.smUtil))
            newest = max(newest, int(s.timeStamp))
        self._seen[index] = newest
        out = {
            pid: ProcessUse(sum(sm[pid]) / len(sm[pid]) if pid in sm else None, memory.get(pid))
            for pid in set(memory) | set(sm)
        }
        return out


def task_pids(handles: Iterable[Mapping[str, Any]]) -> set[int]:
    """The live processes of the tasks whose stored handles are ``handles`` (each a
    ``Handle.to_json()``): the members of each task's process group, led by its supervisor.
    A handle whose pid is dead, or was given to another process since (its start time
    differs), contributes nothing. One scan of ``/proc``."""
    groups = set()
    for h in handles:
        pid, ticks = h.get("pid"), h.get("start_ticks")
        if isinstance(pid, int) and isinstance(ticks, int) and process_alive(pid, ticks):
            groups.add(pid)
    if not groups:
        return set()
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] in groups and stat[0] not in ("Z", "X", "x"):
                found.add(int(entry))
    return found


def pid_exists(pid: int) -> bool:
    """Whether ``pid`` names a process in this process's pid namespace."""
    return os.path.exists(f"/proc/{pid}")


def nvml_present(nvml: Any = None) -> bool:
    """Whether NVML can be started here (``pynvml`` importable and a driver to talk to)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return False
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return False
    shutdown(nvml)
    return True
