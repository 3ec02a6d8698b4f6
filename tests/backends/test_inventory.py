"""The machine's inventory: declared virtual GPUs, NVML names to model names, detection and
telemetry through NVML (a fake NVML module where a GPU is needed)."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from suanli.backends.inventory import (
    DEFAULT_CUSTOM_GPU_MEMORY_MIB,
    GpuInfo,
    GpuSample,
    declared,
    detect,
    model_name,
    telemetry,
)
from suanli.config.cluster import load_cluster
from suanli.core.model import KNOWN_GPU_MODELS, SpecError

MIB = 1024 * 1024
H100 = KNOWN_GPU_MODELS["H100"]


# --------------------------------------------------------------------------------------------
# A fake pynvml: this machine has no GPU (and no NVIDIA driver), so a stand-in module with the
# same functions plays the driver for the NVML paths.
# --------------------------------------------------------------------------------------------


class FakeNVMLError(Exception):
    """Plays ``pynvml.NVMLError``."""


@dataclass
class FakeGpu:
    name: str | bytes
    memory_mib: int
    uuid: str = ""
    util: int = 0
    used_mib: int = 0
    power_mw: int | None = 100_000
    temperature: int | None = 40
    broken: bool = False


@dataclass
class FakeNvml:
    """The subset of ``pynvml`` that the inventory uses, over a list of fake GPUs."""

    gpus: list[FakeGpu] = field(default_factory=list)
    init_fails: bool = False
    inits: int = 0
    shutdowns: int = 0

    NVMLError = FakeNVMLError
    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise FakeNVMLError("NVML Shared Library Not Found")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        if not 0 <= i < len(self.gpus) or self.gpus[i].broken:
            raise FakeNVMLError("Invalid Argument")
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: FakeGpu) -> str | bytes:
        return h.name

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return h.uuid

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        return SimpleNamespace(
            total=h.memory_mib * MIB, used=h.used_mib * MIB, free=(h.memory_mib - h.used_mib) * MIB
        )

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        return SimpleNamespace(gpu=h.util, memory=0)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        if h.power_mw is None:
            raise FakeNVMLError("Not Supported")
        return h.power_mw

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        if h.temperature is None:
            raise FakeNVMLError("Not Supported")
        return h.temperature


def nvml_works() -> bool:
    """Whether the real NVML starts here (a GPU machine), where "nothing here" cannot hold."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


no_nvml_here = pytest.mark.skipif(nvml_works(), reason="this machine has NVML (a GPU machine)")


def h200s(n: int) -> FakeNvml:
    return FakeNvml(
        [FakeGpu("NVIDIA H200", 143_771, uuid=f"GPU-{i:04d}", util=10 * i) for i in range(n)]
    )


# --------------------------------------------------------------------------------------------
# declared
# --------------------------------------------------------------------------------------------


def test_declared_known_model() -> None:
    inv = declared(8, "h100", node_name="box", cpu_milli=96_000, memory_mib=1024 * 1024)
    assert inv.source == "declared"
    assert inv.node.name == "box"
    assert inv.node.gpus == 8
    assert inv.node.gpu_model == H100
    assert (inv.node.cpu_milli, inv.node.memory_mib) == (96_000, 1024 * 1024)
    assert inv.gpus[3] == GpuInfo(3, "virtual-3", "H100", H100.memory_mib, "H100")
    assert [g.index for g in inv.gpus] == list(range(8))
    # The same node as the short form describes, but for name and host resources.
    short = load_cluster("1x8xH100").nodes[0]
    assert inv.node.gpu_model == short.gpu_model


def test_declared_cluster_is_one_node() -> None:
    c = declared(4, "A100", node_name="n0").cluster()
    assert c.name == "local"
    assert [n.name for n in c.nodes] == ["n0"]
    assert c.total_gpus == 4
    assert declared(4, "A100").cluster("lab").name == "lab"


def test_declared_defaults_come_from_the_host() -> None:
    inv = declared(2, "T4")
    assert inv.node.name == socket.gethostname()
    assert inv.node.cpu_milli == len(os.sched_getaffinity(0)) * 1000
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    assert inv.node.memory_mib == kb // 1024
    assert inv.node.memory_mib > 0


def test_declared_cpu_only() -> None:
    inv = declared(0, None, node_name="cpu")
    assert inv.node.gpus == 0
    assert inv.node.gpu_model is None
    assert inv.gpus == ()
    assert inv.cluster().total_gpus == 0


def test_declared_custom_model() -> None:
    inv = declared(2, "MYGPU", node_name="x")
    model = inv.node.gpu_model
    assert model is not None
    assert (model.name, model.memory_mib, model.speed) == (
        "MYGPU",
        DEFAULT_CUSTOM_GPU_MEMORY_MIB,
        1.0,
    )
    custom = declared(2, "MYGPU", gpu_memory_mib=40 * 1024).node.gpu_model
    assert custom is not None and custom.memory_mib == 40 * 1024
    # Memory overrides a known model's, keeping its speed (as gpumem= does in cluster specs).
    known = declared(1, "H100", gpu_memory_mib=94 * 1024).node.gpu_model
    assert known is not None
    assert (known.name, known.memory_mib, known.speed) == ("H100", 94 * 1024, H100.speed)


@pytest.mark.parametrize(
    ("gpus", "model", "kwargs", "message"),
    [
        pytest.param(-1, "H100", {}, "--gpus: must be a whole number >= 0", id="negative"),
        pytest.param(True, "H100", {}, "--gpus", id="bool"),
        pytest.param(8, None, {}, "--gpu-model: required with --gpus 8", id="no-model"),
        pytest.param(8, "  ", {}, "--gpu-model: required", id="blank-model"),
        pytest.param(0, "H100", {}, "--gpu-model: given ('H100') but --gpus is 0", id="cpu-model"),
        pytest.param(1, "X", {"gpu_memory_mib": 0}, "gpu_memory_mib: must be > 0", id="gpumem"),
        pytest.param(1, "H100", {"cpu_milli": -1}, "cpu_milli: must be >= 0", id="cpu"),
        pytest.param(1, "H100", {"memory_mib": -5}, "memory_mib: must be >= 0", id="memory"),
    ],
)
def test_declared_errors(gpus: Any, model: str | None, kwargs: Any, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        declared(gpus, model, **kwargs)


# --------------------------------------------------------------------------------------------
# model_name
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nvml_name", "model"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100-40G"),
        ("NVIDIA A100-PCIE-40GB", "A100-40G"),
        ("NVIDIA A800-SXM4-80GB", "A800"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA GH200 480GB", "GH200-480GB"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("Tesla V100-PCIE-16GB", "V100M16"),
        ("Tesla V100S-PCIE-32GB", "V100"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("Tesla T4", "T4"),
        ("Tesla K80", "K80"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("NVIDIA RTX A6000", "RTX-A6000"),
        ("  NVIDIA  H200 ", "H200"),
    ],
)
def test_model_name(nvml_name: str, model: str) -> None:
    assert model_name(nvml_name) == model


def test_model_name_known_names_are_catalogue_entries() -> None:
    for name in ("NVIDIA H200", "Tesla V100-PCIE-16GB", "NVIDIA A100-PCIE-40GB"):
        assert model_name(name) in KNOWN_GPU_MODELS


# --------------------------------------------------------------------------------------------
# detect
# --------------------------------------------------------------------------------------------


@no_nvml_here
def test_detect_finds_nothing_on_this_machine() -> None:
    # This machine has no NVIDIA GPU or driver: the real pynvml fails to start, so None.
    assert detect() is None


def test_detect_through_nvml() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = h200s(8)
    inv = detect(node_name="gpu-box", nvml=nvml)
    assert inv is not None
    assert inv.source == "nvml"
    assert inv.node.name == "gpu-box"
    assert inv.node.gpus == 8
    assert inv.node.gpu_model == KNOWN_GPU_MODELS["H200"]
    assert inv.node.cpu_milli == len(os.sched_getaffinity(0)) * 1000
    assert inv.node.memory_mib > 0
    assert inv.gpus[5] == GpuInfo(5, "GPU-0005", "NVIDIA H200", 143_771, "H200")
    assert inv.cluster().total_gpus == 8
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_detect_default_node_name_and_bytes_names() -> None:
    # A fake NVML stands in because this machine has no GPU; old pynvml returned bytes.
    nvml = FakeNvml([FakeGpu(b"NVIDIA H100 80GB HBM3", 81_559, uuid="GPU-a")])
    inv = detect(nvml=nvml)
    assert inv is not None
    assert inv.node.name == socket.gethostname()
    assert inv.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert inv.node.gpu_model == H100


def test_detect_custom_model_takes_nvml_memory() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = FakeNvml(
        [FakeGpu("NVIDIA GeForce RTX 4090", 24_564), FakeGpu("NVIDIA GeForce RTX 4090", 24_560)]
    )
    inv = detect(nvml=nvml)
    assert inv is not None
    model = inv.node.gpu_model
    assert model is not None
    assert (model.name, model.memory_mib, model.speed) == ("RTX-4090", 24_560, 1.0)


def test_detect_none_without_nvml_or_gpus() -> None:
    # A fake NVML stands in because this machine has no GPU.
    failing = FakeNvml(init_fails=True)
    assert detect(nvml=failing) is None
    assert failing.shutdowns == 0
    empty = FakeNvml([])
    assert detect(nvml=empty) is None
    assert empty.shutdowns == 1


def test_detect_mixed_models_is_an_error() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = FakeNvml(
        [
            FakeGpu("NVIDIA H100 80GB HBM3", 81_559),
            FakeGpu("NVIDIA A100-SXM4-80GB", 81_920),
            FakeGpu("NVIDIA H100 80GB HBM3", 81_559),
        ]
    )
    with pytest.raises(SpecError) as e:
        detect(nvml=nvml)
    text = str(e.value)
    assert "2 models" in text
    assert "A100: GPUs 1" in text
    assert "H100: GPUs 0, 2" in text
    assert "--gpus" in text and "--gpu-model" in text
    assert nvml.shutdowns == 1


def test_detect_nvml_failure_after_init() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = h200s(2)
    nvml.gpus[1].broken = True
    with pytest.raises(RuntimeError, match="could not describe"):
        detect(nvml=nvml)
    assert nvml.shutdowns == 1


# --------------------------------------------------------------------------------------------
# telemetry
# --------------------------------------------------------------------------------------------


@no_nvml_here
def test_telemetry_is_empty_on_this_machine() -> None:
    # No GPU and no driver here: the real pynvml cannot start.
    assert telemetry([0, 1]) == {}


def test_telemetry_through_nvml() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = h200s(4)
    nvml.gpus[2].used_mib = 70_000
    nvml.gpus[2].power_mw = 512_345
    nvml.gpus[2].temperature = 61
    nvml.gpus[3].power_mw = None
    nvml.gpus[3].temperature = None
    out = telemetry([2, 3], nvml=nvml)
    assert out == {
        2: GpuSample(20, 70_000, 512.345, 61),
        3: GpuSample(30, 0, None, None),
    }
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_telemetry_skips_unreadable_gpus() -> None:
    # A fake NVML stands in because this machine has no GPU.
    nvml = h200s(2)
    nvml.gpus[0].broken = True
    assert set(telemetry(range(3), nvml=nvml)) == {1}
    assert telemetry([0], nvml=FakeNvml(init_fails=True)) == {}
    assert telemetry([], nvml=nvml) == {}
