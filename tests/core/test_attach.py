"""GPUs attached across hosts (``suanli.core.attach``): each link's bandwidth from the cited
figures, the penalty against a local GPU, and bad values named."""

from __future__ import annotations

import pytest

from suanli.core.attach import AttachModel
from suanli.core.model import SpecError


@pytest.mark.parametrize(
    ("link", "kw", "gbs", "penalty"),
    [
        pytest.param("local", {}, 63.0, 1.0, id="local: PCIe 5 x16"),
        pytest.param("pcie-switch", {}, 63.0, 1.0, id="switch port to itself"),
        pytest.param("pcie-switch", {"gpus_per_port": 4}, 15.75, 0.25, id="switch port shared by 4"),
        pytest.param("rdma", {}, 50.0, 50 / 63, id="rdma: a whole 400 Gb/s NIC"),
        pytest.param("rdma", {"nic_share": 0.25}, 12.5, 12.5 / 63, id="rdma: a quarter of a NIC"),
    ],
)  # fmt: skip
def test_links(link: str, kw: dict[str, float], gbs: float, penalty: float) -> None:
    m = AttachModel()
    assert m.link_gbs(link, **kw) == pytest.approx(gbs)  # type: ignore[arg-type]
    assert m.penalty(link, **kw) == pytest.approx(penalty)  # type: ignore[arg-type]


def test_a_link_faster_than_local_is_no_gain() -> None:
    assert AttachModel(nic_gbs=100.0).penalty("rdma") == 1.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(lambda: AttachModel(pcie_gbs=0), "pcie_gbs must be > 0", id="pcie"),
        pytest.param(lambda: AttachModel(nic_gbs=float("nan")), "nic_gbs must be > 0", id="nic"),
        pytest.param(lambda: AttachModel().link_gbs("rdma", nic_share=0), "nic_share", id="share 0"),
        pytest.param(lambda: AttachModel().link_gbs("rdma", nic_share=1.5), "nic_share", id="share"),
        pytest.param(lambda: AttachModel().link_gbs("pcie-switch", gpus_per_port=0),
                     "gpus_per_port", id="port"),
        pytest.param(lambda: AttachModel().link_gbs("cxl"), "link must be one of", id="link"),
    ],
)  # fmt: skip
def test_bad_values_are_named(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=match):
        call()
