"""What this machine has: its GPUs (found through NVML, or declared), CPU and memory.

``suanli serve`` schedules onto the machine it runs on, so it needs that machine as a
``NodeSpec``. Two sources:

- :func:`detect` asks NVML (the NVIDIA driver's management library, through ``pynvml`` from
  the ``nvidia-ml-py`` package) for the GPUs; ``None`` when there is no NVML or no GPU.
- :func:`declared` takes the GPUs from the command line (``--gpus N --gpu-model M``): virtual
  GPUs, for machines without GPUs (development, tests) or to use only some of the real ones.

Both read CPU (the cores this process may run on) and memory (``MemTotal``) from the host.
:func:`telemetry` samples live utilisation, memory, power and temperature through NVML.

A ``NodeSpec`` holds one GPU model, so a machine with mixed models is an error rather than a
guess. A known model (``H100``, ``A100``, ...) takes its entry in the catalogue
(``KNOWN_GPU_MODELS``: memory and speed), so that a locally detected node agrees with cluster
specs written by hand; NVML's exact memory is kept in ``GpuInfo.memory_mib``. Other models
become custom models with NVML's memory (the least over the GPUs) and speed 1.0.

NVML is initialised and shut down on each call: it is cheap (milliseconds) and leaves no state
behind between calls. Tests pass a stand-in for the ``pynvml`` module as ``nvml``.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from suanli.config.cluster import _known_model
from suanli.core.model import ClusterSpec, GpuModel, NodeSpec, SpecError

__all__ = [
    "DEFAULT_CUSTOM_GPU_MEMORY_MIB",
    "GpuInfo",
    "GpuSample",
    "Inventory",
    "declared",
    "detect",
    "model_name",
    "read_device",
    "shutdown",
    "telemetry",
]

DEFAULT_CUSTOM_GPU_MEMORY_MIB = 80 * 1024
"""Memory per GPU of a declared GPU model that is not in the catalogue, unless given
(ASSUMPTION: 80 GiB, the commonest data-centre part in the catalogue)."""

_MIB = 1024 * 1024
_VENDOR_PREFIXES = ("NVIDIA ", "Tesla ", "GeForce ")
_HEAD_RE = re.compile(r"^([A-Za-z]+\d+[A-Za-z]*)(?![A-Za-z0-9])")
_MEMORY_RE = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
# Variants the catalogue tells apart by memory: (head, GB in the name) -> catalogue name.
_BY_MEMORY = {("A100", 40): "A100-40G", ("V100", 16): "V100M16"}
# Names NVML uses for parts the catalogue lists under another name.
_ALIASES = {"V100S": "V100"}


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU: NVML index and UUID, NVML's name (``NVIDIA H200``), total memory in MiB and
    the suanli model name (``H200``, see :func:`model_name`)."""

    index: int
    uuid: str
    name: str
    memory_mib: int
    model: str


@dataclass(frozen=True, slots=True)
class GpuSample:
    """A GPU's state at one moment: utilisation (%, over NVML's last sample period), memory
    in use (MiB), power draw (W) and temperature (C); ``None`` where the GPU does not say."""

    utilization_pct: int
    memory_used_mib: int
    power_w: float | None
    temperature_c: int | None


@dataclass(frozen=True, slots=True)
class Inventory:
    """This machine as a node, its GPUs, and where they came from (``"nvml"``: detected;
    ``"declared"``: virtual GPUs from the command line)."""

    node: NodeSpec
    gpus: tuple[GpuInfo, ...]
    source: str

    def cluster(self, name: str = "local") -> ClusterSpec:
        """A cluster of this one node, for the scheduler core."""
        return ClusterSpec(name, (self.node,))


def model_name(nvml_name: str) -> str:
    """The suanli model name of a GPU named ``nvml_name`` by NVML.

    A catalogue model where one matches (``NVIDIA H100 80GB HBM3`` -> ``H100``,
    ``NVIDIA A100-SXM4-40GB`` -> ``A100-40G``, ``Tesla V100-SXM2-16GB`` -> ``V100M16``);
    otherwise the name without the vendor words ``NVIDIA``/``Tesla``/``GeForce``, spaces as
    ``-`` (``NVIDIA GeForce RTX 4090`` -> ``RTX-4090``).
    """
    cleaned = " ".join(nvml_name.split())
    stripped = True
    while stripped:
        stripped = False
        for prefix in _VENDOR_PREFIXES:
            if cleaned.lower().startswith(prefix.lower()):
                cleaned = cleaned[len(prefix) :].lstrip()
                stripped = True
    m = _HEAD_RE.match(cleaned)
    if m:
        head = m.group(1).upper()
        head = _ALIASES.get(head, head)
        size = _MEMORY_RE.search(cleaned[m.end() :])
        if size and (head, int(size.group(1))) in _BY_MEMORY:
            return _BY_MEMORY[(head, int(size.group(1)))]
        known = _known_model(head)
        if known is not None:
            return known.name
    return cleaned.replace(" ", "-") or nvml_name.strip() or "unknown"


def detect(*, node_name: str | None = None, nvml: Any = None) -> Inventory | None:
    """This machine's GPUs, through NVML; ``None`` when NVML is missing (no ``pynvml``, no
    driver) or finds no GPU.

    ``nvml`` is the ``pynvml`` module (the default) or a stand-in for tests. Raises
    ``SpecError`` when the GPUs are of different models (a node holds one model), and
    ``RuntimeError`` when NVML starts but then fails to describe a GPU.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        gpus = tuple(_describe(nvml, i) for i in range(nvml.nvmlDeviceGetCount()))
    except nvml.NVMLError as e:
        raise RuntimeError(f"NVML found GPUs but could not describe them: {e}") from None
    finally:
        shutdown(nvml)
    if not gpus:
        return None
    models = sorted({g.model for g in gpus})
    if len(models) > 1:
        per_model = "; ".join(
            f"{m}: GPUs {', '.join(str(g.index) for g in gpus if g.model == m)}" for m in models
        )
        raise SpecError(
            f"this machine has GPUs of {len(models)} models ({per_model}); a node holds one "
            "model, so declare the ones to use with --gpus and --gpu-model"
        )
    model = _known_model(models[0]) or GpuModel(models[0], min(g.memory_mib for g in gpus))
    node = NodeSpec(
        name=node_name or socket.gethostname(),
        gpus=len(gpus),
        gpu_model=model,
        cpu_milli=_host_cpu_milli(),
        memory_mib=_host_memory_mib(),
    )
    return Inventory(node, gpus, "nvml")


def declared(
    gpus: int,
    gpu_model: str | None,
    *,
    node_name: str | None = None,
    cpu_milli: int | None = None,
    memory_mib: int | None = None,
    gpu_memory_mib: int | None = None,
) -> Inventory:
    """This machine with ``gpus`` virtual GPUs of model ``gpu_model`` (``--gpus``,
    ``--gpu-model``); ``gpus`` 0 is a CPU-only node.

    A catalogue model matches case-insensitively (``h100`` -> ``H100``) as in cluster specs;
    another name is a custom model of speed 1.0 with ``gpu_memory_mib`` per GPU (default
    ``DEFAULT_CUSTOM_GPU_MEMORY_MIB``), which also overrides a catalogue model's memory. CPU
    and memory default to the host's. Errors are ``SpecError`` naming the option.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise SpecError(f"--gpus: must be a whole number >= 0 (got {gpus!r})")
    name = (gpu_model or "").strip()
    if gpus == 0:
        if name:
            raise SpecError(f"--gpu-model: given ({name!r}) but --gpus is 0")
        model: GpuModel | None = None
    else:
        if not name:
            raise SpecError(f"--gpu-model: required with --gpus {gpus}")
        if gpu_memory_mib is not None and gpu_memory_mib <= 0:
            raise SpecError(f"gpu_memory_mib: must be > 0 (got {gpu_memory_mib})")
        base = _known_model(name)
        if base is None:
            memory = DEFAULT_CUSTOM_GPU_MEMORY_MIB if gpu_memory_mib is None else gpu_memory_mib
            model = GpuModel(name, memory, 1.0)
        elif gpu_memory_mib is not None:
            model = GpuModel(base.name, gpu_memory_mib, base.speed)
        else:
            model = base
    for option, value in (("cpu_milli", cpu_milli), ("memory_mib", memory_mib)):
        if value is not None and value < 0:
            raise SpecError(f"{option}: must be >= 0 (got {value})")
    node = NodeSpec(
        name=node_name or socket.gethostname(),
        gpus=gpus,
        gpu_model=model,
        cpu_milli=_host_cpu_milli() if cpu_milli is None else cpu_milli,
        memory_mib=_host_memory_mib() if memory_mib is None else memory_mib,
    )
    infos = tuple(
        GpuInfo(i, f"virtual-{i}", model.name, model.memory_mib, model.name)
        for i in range(gpus)
        if model is not None
    )
    return Inventory(node, infos, "declared")


def telemetry(indices: Iterable[int], *, nvml: Any = None) -> dict[int, GpuSample]:
    """A sample of each GPU in ``indices`` (NVML indices), by index; ``{}`` when NVML is
    missing. A GPU NVML cannot read is left out; power and temperature are ``None`` where
    the GPU does not report them."""
    wanted = list(indices)
    if not wanted:
        return {}
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return {}
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return {}
    out: dict[int, GpuSample] = {}
    try:
        for i in wanted:
            device = read_device(nvml, i)
            if device is None:
                continue
            handle, util, mem = device
            power: float | None
            try:
                power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # milliwatts
            except nvml.NVMLError:
                power = None
            temperature: int | None
            try:
                temperature = int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
            except nvml.NVMLError:
                temperature = None
            out[i] = GpuSample(int(util.gpu), int(mem.used) // _MIB, power, temperature)
    finally:
        shutdown(nvml)
    return out


def read_device(nvml: Any, index: int) -> tuple[Any, Any, Any] | None:
    """GPU ``index``'s NVML handle, utilisation rates and memory info (NVML started), or
    None when NVML cannot read them."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return (
            handle,
            nvml.nvmlDeviceGetUtilizationRates(handle),
            nvml.nvmlDeviceGetMemoryInfo(handle),
        )
    except nvml.NVMLError:
        return None


def _describe(nvml: Any, index: int) -> GpuInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(nvml.nvmlDeviceGetName(handle))
    return GpuInfo(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=name,
        memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB,
        model=model_name(name),
    )


def _text(value: str | bytes) -> str:
    """NVML strings: ``str`` in current ``nvidia-ml-py``, ``bytes`` in old releases."""
    return value.decode() if isinstance(value, bytes) else value


def shutdown(nvml: Any) -> None:
    """Shut NVML down, ignoring an error (it was started by the caller)."""
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass


def _host_cpu_milli() -> int:
    """The cores this process may run on (its CPU affinity), in milli-cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 0
    return cores * 1000


def _host_memory_mib() -> int:
    """The host's total memory in MiB (``MemTotal`` of ``/proc/meminfo``; 0 if unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _MIB
    except (AttributeError, ValueError, OSError):
        return 0
