"""Speed bases (``suanli.core.speed``): effective node speeds, native bases and their errors."""

from __future__ import annotations

import math

import pytest

from suanli.core.model import KNOWN_GPU_MODELS, ClusterSpec, GpuModel, NodeSpec, SpecError
from suanli.core.speed import REFERENCE, SpeedBasis, gpu_weighted_speed, native_basis
from suanli.core.view import ClusterView

K80, V100, H100 = (KNOWN_GPU_MODELS[n] for n in ("K80", "V100", "H100"))
P40 = GpuModel("P40", 24 * 1024, 0.5)


def cluster(*groups: tuple[int, int, GpuModel | None], name: str = "c") -> ClusterSpec:
    """``(nodes, gpus per node, model)`` groups, in order."""
    nodes = []
    for g, (n, gpus, model) in enumerate(groups):
        nodes += [NodeSpec(f"g{g}-{i}", gpus, model, 64_000, 512 * 1024) for i in range(n)]
    return ClusterSpec(name, tuple(nodes))


PHILLY_LIKE = cluster((3, 2, K80), (1, 8, P40), name="own")  # 6 K80 + 8 P40


def test_the_reference_basis_is_each_models_own_speed_bit_for_bit() -> None:
    c = cluster((1, 8, H100), (1, 2, K80), (1, 0, None), (1, 4, P40))
    assert REFERENCE.is_reference
    assert REFERENCE.node_speeds(c) == [H100.speed, K80.speed, 1.0, P40.speed]
    assert ClusterView(c).node_speed.tolist() == [5.0, 0.3, 1.0, 0.5]
    assert ClusterView(c).speed_basis is REFERENCE


def test_a_native_basis_weights_speeds_by_gpus_on_the_trace_machines() -> None:
    b = native_basis(PHILLY_LIKE)
    assert b.native == ("K80", "P40")
    assert b.speed == pytest.approx((6 * 0.3 + 8 * 0.5) / 14, rel=1e-15)
    assert not b.is_reference
    # Nodes without GPUs count for nothing.
    with_cpu = cluster((3, 2, K80), (2, 0, None), (1, 8, P40))
    assert native_basis(with_cpu).speed == b.speed
    assert gpu_weighted_speed({K80: 1, H100: 1}) == pytest.approx(2.65)


def test_native_models_run_as_recorded_others_at_their_speed_over_s_native() -> None:
    b = native_basis(PHILLY_LIKE)
    s = b.speed
    foreign = cluster((1, 2, K80), (1, 8, V100), (1, 8, H100), (1, 0, None), (1, 8, P40))
    assert b.node_speeds(foreign) == [1.0, 1.0 / s, 5.0 / s, 1.0, 1.0]
    view = ClusterView(foreign, b)
    assert view.node_speed.tolist() == [1.0, 1.0 / s, 5.0 / s, 1.0, 1.0]
    assert b.scaled(foreign) == {"V100": s / 1.0, "H100": s / 5.0}
    assert b.node_speeds(PHILLY_LIKE) == [1.0] * len(PHILLY_LIKE.nodes)
    assert b.scaled(PHILLY_LIKE) == {}


def test_a_subset_of_models_can_be_declared_native() -> None:
    b = native_basis(PHILLY_LIKE, ["P40"])
    assert (b.native, b.speed) == (("P40",), 0.5)
    # The K80s of the trace's own machines are then other hardware.
    assert b.node_speeds(PHILLY_LIKE)[:3] == [0.3 / 0.5] * 3


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["V100"], "unknown native GPU model 'V100': cluster own has K80, P40"),
        (["K80", "k80"], "unknown native GPU model 'k80'"),
        ([], "name at least one"),
    ],
)
def test_unknown_native_models_are_refused_by_name(names: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        native_basis(PHILLY_LIKE, names)


def test_a_cluster_without_gpus_has_no_native_basis() -> None:
    with pytest.raises(SpecError, match="has no GPUs"):
        native_basis(cluster((2, 0, None)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"speed": 0.0}, "speed must be a number > 0"),
        ({"speed": math.nan}, "speed must be a number > 0"),
        ({"speed": math.inf}, "speed must be a number > 0"),
        ({"native": ("",)}, "must be names"),
        ({"native": ("K80", "K80")}, "named twice"),
    ],
)
def test_bad_bases(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        SpeedBasis(**kwargs)  # type: ignore[arg-type]


def test_the_one_line_description() -> None:
    b = native_basis(PHILLY_LIKE)
    assert b.describe(PHILLY_LIKE) == (
        "native GPU models: K80, P40 (GPU-weighted speed 0.4143); "
        "every GPU here is native: durations as recorded"
    )
    mixed = cluster((1, 2, K80), (1, 8, H100))
    assert b.describe(mixed) == (
        "native GPU models: K80, P40 (GPU-weighted speed 0.4143); "
        "on this cluster: K80 as recorded, H100 (speed 5) duration × 0.08286"
    )
    assert REFERENCE.describe(mixed) == (
        "runtimes at speed 1 (V100 = 1.0), no native GPU models; "
        "on this cluster: K80 (speed 0.3) duration × 3.333, H100 (speed 5) duration × 0.2"
    )
    assert b.as_dict(mixed) == {
        "native": ["K80", "P40"],
        "native_speed": b.speed,
        "duration_factor": {"H100": b.speed / 5.0},
    }
