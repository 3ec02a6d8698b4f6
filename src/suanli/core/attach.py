"""GPUs attached across hosts: the bandwidth a task's host part gets to a GPU that is not in
its own server, against a GPU in the same server.

Three links between a task's host part (its CPU work and memory) and a GPU it uses:

- ``local``: the GPU sits in the task's server, on its own PCIe 5 ×16 slot (63 GB/s each
  way, ``suanli.core.topology``);
- ``pcie-switch``: the GPU sits in a PCIe enclosure that several servers reach through a
  PCIe switch (composable infrastructure); the server's ×16 port to the switch is shared by
  every GPU attached through it, so each gets ``pcie_gbs / gpus_per_port``;
- ``rdma``: the GPU sits in another server and the data crosses the network by RDMA
  (GPUDirect), at the share of a NIC the task is given: ``nic_share × nic_gbs`` (InfiniBand
  NDR or 400 GbE, 400 Gb/s = 50 GB/s a port; ``../shared/docs/ANCHORS.md``, "Interconnects").

``AttachModel.penalty`` is a link's bandwidth over a local GPU's, capped at 1: the share of
the local bandwidth the attached GPU gets. How much slower that makes a task depends on how
much of its time it spends moving data between its host part and the GPU, which no trace
here records, so this module stops at the bandwidth: it is what a report can state.
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.core.model import SpecError
from suanli.core.topology import NETWORK_GBS, PCIE5_GBS

__all__ = ["LINKS", "AttachModel"]

LINKS = ("local", "pcie-switch", "rdma")


@dataclass(frozen=True)
class AttachModel:
    """Link bandwidths, GB/s each way (module docstring); every figure overridable."""

    pcie_gbs: float = PCIE5_GBS
    nic_gbs: float = NETWORK_GBS

    def __post_init__(self) -> None:
        for name, v in (("pcie_gbs", self.pcie_gbs), ("nic_gbs", self.nic_gbs)):
            if not v > 0:
                raise SpecError(f"attach: {name} must be > 0, got {v}")

    def link_gbs(self, link: str, *, nic_share: float = 1.0, gpus_per_port: int = 1) -> float:
        """GB/s each way between a task's host part and one GPU over ``link``: ``nic_share``
        (0-1] is the share of a NIC an RDMA-attached task holds, ``gpus_per_port`` how many
        GPUs share a server's PCIe switch port."""
        if link == "local":
            return self.pcie_gbs
        if link == "pcie-switch":
            if gpus_per_port < 1:
                raise SpecError(f"attach: gpus_per_port must be >= 1, got {gpus_per_port}")
            return self.pcie_gbs / gpus_per_port
        if link == "rdma":
            if not 0 < nic_share <= 1:
                raise SpecError(f"attach: nic_share must be in (0, 1], got {nic_share}")
            return nic_share * self.nic_gbs
        raise SpecError(f"attach: link must be one of {', '.join(LINKS)}, got {link!r}")

    def penalty(self, link: str, *, nic_share: float = 1.0, gpus_per_port: int = 1) -> float:
        """The share of a local GPU's bandwidth the task gets over ``link`` (at most 1)."""
        bw = self.link_gbs(link, nic_share=nic_share, gpus_per_port=gpus_per_port)
        return min(1.0, bw / self.pcie_gbs)
