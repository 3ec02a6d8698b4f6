"""The topology model: links by level and interconnect, the ring all-reduce's time (the
nccl-tests bound), and slowdowns against the best placement."""

from __future__ import annotations

import pytest

from suanli.core.model import SpecError
from suanli.core.topology import Comm, Fabric, GpuSlot, allreduce_s


def slots(spec: list[tuple[str, int]], model: str = "H100", ic: str = "nvswitch",
          domain: dict[str, str] | None = None, rack: dict[str, str] | None = None
          ) -> list[GpuSlot]:  # fmt: skip
    domain, rack = domain or {}, rack or {}
    return [GpuSlot(n, g, domain.get(n, n), rack.get(n, "r0"), model, ic) for n, g in spec]


def test_allreduce_is_the_nccl_tests_bound() -> None:
    # nccl-tests: bus bandwidth = algorithm bandwidth x 2(n-1)/n, so a ring of S bytes at bus
    # bandwidth B takes S / B x 2(n-1)/n: 1 GB over 8 GPUs at 50 GB/s is 35 ms.
    assert allreduce_s(1e9, 8, 50.0) == pytest.approx(0.035)
    assert allreduce_s(1e9, 8, 50.0, efficiency=0.8) == pytest.approx(0.035 / 0.8)
    assert allreduce_s(1e9, 1, 50.0) == 0.0 and allreduce_s(0, 8, 50.0) == 0.0
    # Its n -> infinity limit is 2 S / B.
    assert allreduce_s(1e9, 10_000, 50.0) == pytest.approx(0.04, rel=1e-3)


def test_links_by_level_and_interconnect() -> None:
    f = Fabric()
    one = [("a", i) for i in range(8)]
    assert f.level(slots(one[:1])) == "gpu" and f.link_gbs(slots(one[:1])) == float("inf")
    assert f.level(slots(one)) == "node" and f.link_gbs(slots(one)) == 450.0
    assert f.link_gbs(slots(one, model="A100")) == 300.0
    assert f.link_gbs(slots(one, model="L40S")) == 63.0  # no NVLink: PCIe
    assert f.link_gbs(slots(one, ic="pcie")) == 63.0
    assert f.link_gbs(slots(one[:2], ic="nvlink-pairs")) == 450.0  # one bridged pair
    assert f.link_gbs(slots(one[2:4], ic="nvlink-pairs")) == 450.0
    assert f.link_gbs(slots(one[1:3], ic="nvlink-pairs")) == 63.0  # across two pairs
    two = one + [("b", i) for i in range(8)]
    assert f.level(slots(two)) == "rack" and f.link_gbs(slots(two)) == 50.0
    nvl = slots(two, model="GB200", domain={"a": "nvl-0", "b": "nvl-0"})
    assert f.level(nvl) == "domain" and f.link_gbs(nvl) == 900.0
    apart = slots(two, rack={"a": "r0", "b": "r1"})
    assert f.level(apart) == "spine" and f.link_gbs(apart) == 50.0
    assert Fabric(spine_oversubscription=2.0).link_gbs(apart) == 25.0
    # The slowest link anywhere in the ring sets the pace: a PCIe-only node in the gang.
    mixed = slots(one) + slots([("b", 0), ("b", 1)], ic="pcie")
    assert f.link_gbs(mixed) == 50.0
    assert Fabric(network_gbs=100.0).link_gbs(mixed) == 63.0


def test_a_spread_gang_steps_slower_than_a_packed_one() -> None:
    f = Fabric()
    comm = Comm(grad_bytes=14e9, compute_s=1.0)  # a 7B-parameter model's BF16 gradients
    two = [("a", i) for i in range(8)] + [("b", i) for i in range(8)]
    packed = slots(two, model="GB200", domain={"a": "nvl", "b": "nvl"})
    spread = slots(two, model="GB200", rack={"a": "r0", "b": "r1"})
    # 14 GB over 16 GPUs: 0.656 s at 50 GB/s x 0.8, 0.0365 s at 900 GB/s x 0.8.
    assert f.step_s(comm, spread) == pytest.approx(1 + 14e9 / 40e9 * 2 * 15 / 16)
    assert f.step_s(comm, packed) == pytest.approx(1 + 14e9 / 720e9 * 2 * 15 / 16)
    assert f.slowdown(comm, spread, packed) == pytest.approx(1.598, abs=1e-3)
    assert f.slowdown(comm, packed, packed) == 1.0
    assert f.slowdown(Comm(0, 1.0), spread, packed) == 1.0  # nothing to say: no slowdown


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Comm(-1, 1.0), "grad_bytes must be >= 0"),
        (lambda: Comm(1, 0), "compute_s must be > 0"),
        (lambda: Fabric(network_gbs=0), "network_gbs must be > 0"),
        (lambda: Fabric(efficiency=1.5), "efficiency must be in"),
        (lambda: Fabric(nvlink_gbs={"H100": -1}), "NVLink bandwidth of H100"),
        (lambda: Fabric().link_gbs(slots([("a", 0), ("a", 1)], ic="pcie4")), "interconnect"),
    ],
)
def test_bad_models_are_refused(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=message):
        make()
