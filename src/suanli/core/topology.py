"""Topology that costs time: the slowest link a placement's GPUs talk over, what a ring
all-reduce over it takes, and how much slower a data-parallel step runs there than on the
best placement of as many GPUs.

Levels, from fastest: GPUs of one node talk over the node's interconnect; GPUs on several
nodes of one NVLink domain (``NodeSpec.domain``, e.g. a GB200 NVL72 rack) over NVLink;
nodes of one rack over the network (one NIC per GPU); nodes of several racks over the
network and the spine, which may be oversubscribed. The slowest link of the placement
sets the ring's pace.

A node's interconnect is one of:

- ``nvswitch``: every GPU reaches every other at its NVLink bandwidth (8-GPU HGX boards);
- ``nvlink-pairs``: GPUs ``2k`` and ``2k+1`` are bridged by NVLink, every other pair of GPUs
  talks over PCIe (4- and 8-GPU servers without a switch);
- ``pcie``: every pair of GPUs talks over PCIe.

A ring all-reduce of ``S`` bytes over ``n`` GPUs at bus bandwidth ``B`` takes at least
``S / B · 2(n − 1)/n`` (NVIDIA/nccl-tests, ``doc/PERFORMANCE.md``); NCCL reaches about 80%
of link peak. A data-parallel step that computes for ``compute_s`` and then all-reduces its
``grad_bytes`` (no overlap: the slowdown is an upper bound of what overlap would leave)
takes ``compute_s + allreduce``; its slowdown on a placement is that time over the same on
the best placement the cluster could give as many GPUs (packed on one node, else one
NVLink domain, else one rack).

Defaults, in GB/s each way per GPU (``../shared/docs/ANCHORS.md``, "Interconnects"):
NVLink 4 (H100, H200) 450 (900 both directions), NVLink 3 (A100) 300, NVLink 5 (B200,
GB200) 900; PCIe 5 ×16 63; InfiniBand NDR 400 Gb/s = 50 per GPU. All overridable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from suanli.core.model import SpecError

__all__ = [
    "DEFAULT_NVLINK_GBS",
    "INTERCONNECTS",
    "LEVELS",
    "Comm",
    "Fabric",
    "GpuSlot",
    "allreduce_s",
]

INTERCONNECTS = ("nvswitch", "nvlink-pairs", "pcie")
LEVELS = ("gpu", "node", "domain", "rack", "spine")
"""How far apart a placement's GPUs are: one GPU (no communication), one node, one NVLink
domain, one rack, several racks."""

DEFAULT_NVLINK_GBS: Mapping[str, float] = {
    "H100": 450.0, "H200": 450.0, "A100": 300.0, "B200": 900.0, "GB200": 900.0,
}  # fmt: skip
"""NVLink bandwidth per GPU, each way, by GPU model (half the vendors' both-ways figure)."""
PCIE5_GBS = 63.0
NETWORK_GBS = 50.0
NCCL_EFFICIENCY = 0.8


def allreduce_s(grad_bytes: float, gpus: int, link_gbs: float, efficiency: float = 1.0) -> float:
    """Seconds a ring all-reduce of ``grad_bytes`` over ``gpus`` GPUs takes at least, at
    ``link_gbs`` GB/s of bus bandwidth used at ``efficiency`` of its peak (0 for one GPU)."""
    if gpus <= 1 or grad_bytes <= 0:
        return 0.0
    return grad_bytes / (link_gbs * 1e9 * efficiency) * 2 * (gpus - 1) / gpus


@dataclass(frozen=True, slots=True)
class Comm:
    """A data-parallel job's step: ``compute_s`` of compute, then an all-reduce of
    ``grad_bytes`` (its gradients: 2 bytes a parameter in BF16)."""

    grad_bytes: float
    compute_s: float

    def __post_init__(self) -> None:
        if not self.grad_bytes >= 0:
            raise SpecError(f"comm: grad_bytes must be >= 0, got {self.grad_bytes}")
        if not self.compute_s > 0:
            raise SpecError(f"comm: compute_s must be > 0, got {self.compute_s}")


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """Where one GPU of a placement is: its node, its index on it, the node's NVLink domain
    and rack, its model and the node's interconnect."""

    node: str
    gpu: int
    domain: str
    rack: str
    model: str
    interconnect: str = "nvswitch"


@dataclass(frozen=True)
class Fabric:
    """The cluster's links (module docstring); every figure overridable."""

    nvlink_gbs: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_NVLINK_GBS))
    pcie_gbs: float = PCIE5_GBS
    network_gbs: float = NETWORK_GBS
    """Network bandwidth per GPU, each way (one NIC per GPU)."""
    spine_oversubscription: float = 1.0
    """Rack uplinks' oversubscription (1: a non-blocking fat tree): across racks a GPU gets
    ``network_gbs / spine_oversubscription``."""
    efficiency: float = NCCL_EFFICIENCY

    def __post_init__(self) -> None:
        for name, v in (("pcie_gbs", self.pcie_gbs), ("network_gbs", self.network_gbs),
                        ("spine_oversubscription", self.spine_oversubscription)):  # fmt: skip
            if not v > 0:
                raise SpecError(f"fabric: {name} must be > 0, got {v}")
        if not 0 < self.efficiency <= 1:
            raise SpecError(f"fabric: efficiency must be in (0, 1], got {self.efficiency}")
        for model, v in self.nvlink_gbs.items():
            if not v > 0:
                raise SpecError(f"fabric: NVLink bandwidth of {model} must be > 0, got {v}")

    def nvlink(self, model: str) -> float | None:
        """NVLink GB/s each way of ``model`` (None: it has none here: PCIe only)."""
        return self.nvlink_gbs.get(model)

    def _inside(self, model: str, interconnect: str, gpus: Sequence[int]) -> float:
        """The slowest link among ``gpus`` of one node."""
        if interconnect not in INTERCONNECTS:
            raise SpecError(f"interconnect must be one of {', '.join(INTERCONNECTS)}, "
                            f"got {interconnect!r}")  # fmt: skip
        nv = self.nvlink(model)
        if nv is None or interconnect == "pcie":
            return self.pcie_gbs
        if interconnect == "nvswitch" or len({g // 2 for g in gpus}) == 1:
            return nv
        return self.pcie_gbs  # NVLink pairs: a ring over two pairs crosses PCIe

    def level(self, slots: Sequence[GpuSlot]) -> str:
        """How far apart ``slots`` are (``LEVELS``)."""
        if len(slots) <= 1:
            return "gpu"
        if len({s.node for s in slots}) == 1:
            return "node"
        if len({s.domain for s in slots}) == 1:
            return "domain"
        return "rack" if len({s.rack for s in slots}) == 1 else "spine"

    def link_gbs(self, slots: Sequence[GpuSlot]) -> float:
        """The slowest link a ring over ``slots`` crosses, GB/s each way (inf: one GPU)."""
        level = self.level(slots)
        if level == "gpu":
            return float("inf")
        by_node: dict[str, list[GpuSlot]] = {}
        for s in slots:
            by_node.setdefault(s.node, []).append(s)
        inner = [self._inside(g[0].model, g[0].interconnect, [s.gpu for s in g])
                 for g in by_node.values() if len(g) > 1]  # fmt: skip
        inside = min(inner, default=float("inf"))
        if level == "node":
            return inside
        if level == "domain":
            nv = min((self.nvlink(s.model) or self.pcie_gbs) for s in slots)
            return min(inside, nv)
        net = self.network_gbs
        if level == "spine":
            net /= self.spine_oversubscription
        return min(inside, net)

    def step_s(self, comm: Comm, slots: Sequence[GpuSlot]) -> float:
        """One step of ``comm`` on ``slots``: compute, then the ring all-reduce."""
        link = self.link_gbs(slots)
        if link == float("inf"):
            return comm.compute_s
        return comm.compute_s + allreduce_s(comm.grad_bytes, len(slots), link, self.efficiency)

    def slowdown(self, comm: Comm, slots: Sequence[GpuSlot], best: Sequence[GpuSlot]) -> float:
        """How much slower ``comm`` steps on ``slots`` than on ``best`` (as many GPUs, the
        best placement the cluster has for them): >= 1 when ``best`` is that."""
        return self.step_s(comm, slots) / self.step_s(comm, best)
