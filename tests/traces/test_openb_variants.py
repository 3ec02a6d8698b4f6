"""``suanli.traces.openb_variants``: each dimension reaches its share and leaves the others as
they were, the same seed gives the same list, constraints come from the mix and stay
feasible, and what it writes reads back as the same pods. A synthetic list runs everywhere;
the last test builds the grid's cells from openb's default list (skipped, saying where the
traces were looked for, without them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suanli.core.model import MILLI, ClusterSpec, NodeSpec
from suanli.traces.openb import OPENB_GPU_MODELS, OpenbPods, load_openb_nodes, load_openb_pods
from suanli.traces.openb_variants import (
    CONSTRAINT_MIX,
    Variant,
    VariantError,
    make_variant,
    write_openb_pods,
)
from support import trace_dir_or_skip


def cluster() -> ClusterSpec:
    m = OPENB_GPU_MODELS
    nodes = [NodeSpec(f"g2-{i}", 8, m["G2"], 96_000, 393_216) for i in range(20)]
    nodes += [NodeSpec(f"t4-{i}", 2, m["T4"], 64_000, 262_144) for i in range(20)]
    return ClusterSpec("mixed", tuple(nodes))


def synthetic(n: int = 600, seed: int = 0) -> OpenbPods:
    rng = np.random.default_rng(seed)
    kind = rng.choice(4, size=n, p=[0.35, 0.35, 0.05, 0.25])  # share, one, multi, CPU-only
    num = np.where(kind == 0, 1, np.where(kind == 1, 1, np.where(kind == 2, 4, 0)))
    milli = np.where(kind == 0, rng.choice([250, 500, 700], size=n), np.where(num > 0, MILLI, 0))
    return OpenbPods(
        source=Path("synthetic.csv"),
        names=tuple(f"p{i}" for i in range(n)),
        cpu_milli=rng.choice([2000, 4000, 8000, 16000], size=n).astype(np.int64),
        memory_mib=rng.choice([4096, 16384], size=n).astype(np.int64),
        num_gpu=num.astype(np.int64),
        gpu_milli=milli.astype(np.int64),
        gpu_spec=(frozenset(),) * n,
    )


def make_up(p: OpenbPods) -> dict[str, float]:
    d = np.where(p.num_gpu > 0, p.num_gpu * p.gpu_milli, 0).astype(float)
    gpu = p.num_gpu > 0
    cpu = p.cpu_milli.astype(float)
    return {
        "gpu": float(d.sum()),
        "share": float(d[p.fractional].sum() / d.sum()),
        "multi": float(d[p.num_gpu > 1].sum() / d.sum()),
        "spec": sum(float(d[i]) for i in np.flatnonzero(gpu) if p.gpu_spec[i]) / d.sum(),
        "cpu_only": float((~gpu).sum() / len(p)),
        "cpu_per_gpu_pod": float(cpu[gpu].mean()),
    }


def test_a_variant_that_changes_nothing_is_the_source() -> None:
    src = synthetic()
    out = make_variant(src, cluster(), Variant(), seed=1)
    assert out.names == src.names and (out.cpu_milli == src.cpu_milli).all()
    assert out.gpu_spec == src.gpu_spec


@pytest.mark.parametrize(
    ("variant", "dim", "value"),
    [
        (Variant(share=0.6), "share", 0.6),
        (Variant(share=0.1), "share", 0.1),
        (Variant(multi=0.4), "multi", 0.4),
        (Variant(multi=0.0), "multi", 0.0),
        (Variant(spec=0.33), "spec", 0.33),
        (Variant(cpu_only=0.05), "cpu_only", 0.05),
        (Variant(cpu_only=0.5), "cpu_only", 0.5),
    ],
)
def test_each_dimension_reaches_its_share_and_leaves_the_others(
    variant: Variant, dim: str, value: float
) -> None:
    src = synthetic()
    before = make_up(src)
    after = make_up(make_variant(src, cluster(), variant, seed=3))
    assert after[dim] == pytest.approx(value, abs=0.02)
    assert after["gpu"] == pytest.approx(before["gpu"], rel=0.01)  # the GPU request stays
    untouched = {"share", "multi", "spec", "cpu_only"} - {dim}
    if dim in ("share", "multi"):
        untouched -= {"share", "multi"}  # the whole-GPU pods take up the difference
    for other in untouched:
        assert after[other] == pytest.approx(before[other], abs=0.02), other


def test_cpu_per_pod_scales_gpu_pods_and_keeps_the_cpu_only_pods() -> None:
    src = synthetic()
    before = make_up(src)
    out = make_variant(src, cluster(), Variant(cpu=2.0), seed=5)
    after = make_up(out)
    assert after["cpu_per_gpu_pod"] == pytest.approx(2 * before["cpu_per_gpu_pod"], rel=0.02)
    assert after["cpu_only"] == pytest.approx(before["cpu_only"], abs=0.02)
    # Never more than the largest node that could hold the pod (96 cores: an 8-GPU G2 node).
    assert int(out.cpu_milli.max()) <= 96_000


def test_constraints_come_from_the_mix_and_some_node_can_hold_each_pod() -> None:
    cl = cluster()
    out = make_variant(synthetic(), cl, Variant(spec=0.5, cpu=3.0), seed=7)
    have = {"G2", "T4"}
    seen = {s for s in out.gpu_spec if s}
    allowed = {m & have for m in CONSTRAINT_MIX if m & have}
    assert seen and seen <= allowed
    for i in range(len(out)):
        s = out.gpu_spec[i]
        if s:
            assert int(out.num_gpu[i]) == 0 or any(
                n.gpu_model is not None and n.gpu_model.name in s and n.gpus >= out.num_gpu[i]
                and n.cpu_milli >= out.cpu_milli[i] for n in cl.nodes
            )  # fmt: skip
    assert not any(out.gpu_spec[i] for i in np.flatnonzero(out.num_gpu == 0))


def test_the_same_seed_gives_the_same_list_and_another_seed_another() -> None:
    src, v = synthetic(), Variant(share=0.5, spec=0.2, cpu_only=0.4)
    a, b, c = (make_variant(src, cluster(), v, seed=s) for s in (11, 11, 12))
    assert a.names == b.names and a.gpu_spec == b.gpu_spec
    assert a.names != c.names or a.gpu_spec != c.gpu_spec


def test_written_lists_read_back_as_the_same_pods(tmp_path: Path) -> None:
    src = synthetic()
    out = make_variant(src, cluster(), Variant(share=0.5, spec=0.3), seed=2)
    back = load_openb_pods(write_openb_pods(out, tmp_path / "openb_pod_list_v.csv"))
    assert back.names == out.names and back.gpu_spec == out.gpu_spec
    for col in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        assert (getattr(back, col) == getattr(out, col)).all(), col
    assert len(set(back.names)) == len(back)  # copies are named apart


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("share=2", "share must be a share in 0..1"),
        ("share=0.7,multi=0.5", "more than the whole GPU request"),
        ("cpu=0", "cpu must be a factor > 0"),
        ("cpu_only=1", "cpu_only must be below 1"),
        ("gpus=3", "expected NAME=VALUE with NAME one of"),
        ("share=lots", "'lots' is not a number"),
    ],
)
def test_bad_variants_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(VariantError, match=problem):
        Variant.parse(text)


def test_a_kind_the_list_lacks_cannot_be_made() -> None:
    src = synthetic()
    no_multi = src.select(src.num_gpu <= 1)
    with pytest.raises(VariantError, match="no multi pods"):
        make_variant(no_multi, cluster(), Variant(multi=0.2), seed=0)


def test_grid_cells_from_openb_default_reach_their_make_up() -> None:
    root = trace_dir_or_skip() / "openb"
    src = load_openb_pods(root / "openb_pod_list_default.csv")
    cl = load_openb_nodes(root / "openb_node_list_gpu_node.csv")
    before = make_up(src)
    assert before["share"] == pytest.approx(0.285, abs=0.001)  # the list's own make-up
    for text, dim, value in [
        ("share=0.8", "share", 0.8),
        ("multi=0.5", "multi", 0.5),
        ("spec=0.67", "spec", 0.67),
        ("cpu_only=0.05", "cpu_only", 0.05),
    ]:
        after = make_up(make_variant(src, cl, Variant.parse(text), seed=42))
        assert after[dim] == pytest.approx(value, abs=0.005), text
        assert after["gpu"] == pytest.approx(before["gpu"], rel=0.002), text
