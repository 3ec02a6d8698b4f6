"""GPU memory pooling (``suanli.core.pooling``): which source serves a job's overflow, what it
is charged, how the job is rewritten, and that no task ever loses memory it was promised."""

from __future__ import annotations

import re

import pytest

from builders import cluster, frac, node, rng, take
from suanli.config.cluster import load_cluster
from suanli.core.gang import place_job
from suanli.core.model import GpuModel, Job, SpecError, TaskRequest
from suanli.core.pooling import MemoryPool
from suanli.core.registry import create
from suanli.core.topology import Fabric
from suanli.core.view import ClusterView

GIB = 1024
H100 = load_cluster("4x8xH100")


def big(gb: float, gpus: int = 2, **kw) -> Job:  # type: ignore[no-untyped-def]
    return Job("j", 0.0, 1000.0, TaskRequest(gpus=gpus, gpu_memory_mib=int(gb * GIB), **kw),
               estimate=2000.0)  # fmt: skip


def test_a_job_that_fits_a_gpu_is_left_alone() -> None:
    assert MemoryPool().plan(big(80), H100) is None  # exactly the GPU's 80 GiB
    assert MemoryPool().plan(Job("f", 0, 1, TaskRequest(gpus=1, gpu_milli=500)), H100) is None


def test_peers_serve_the_overflow_at_the_nvlink_bound() -> None:
    p = MemoryPool().plan(big(90), H100)
    assert p is not None and (p.source, p.model, p.lenders, p.overflow_mib) == (
        "peer",
        "H100",
        1,
        10 * GIB,
    )
    assert p.slowdown == pytest.approx(1 + (10 / 90) * (3350 / 450 - 1))
    two = MemoryPool().plan(big(170, gpus=1), H100)  # 90 GiB over: two lenders a GPU
    assert two is not None and two.lenders == 2


def test_host_memory_at_the_pcie_bound_when_no_peer_can_lend() -> None:
    # 8 GPUs on 8-GPU nodes: no room for lenders; the host has 1 TiB a node.
    p = MemoryPool().plan(big(120, gpus=8), H100)
    assert p is not None and (p.source, p.lenders) == ("host", 0)
    assert p.slowdown == pytest.approx(1 + (40 / 120) * (3350 / 63 - 1))
    only = MemoryPool(sources=("host",)).plan(big(90), H100)
    assert only is not None and only.source == "host"
    # Not enough host memory: nothing serves it.
    small_host = load_cluster("2x8xH100[mem=256G]")
    assert MemoryPool().plan(big(120, gpus=8), small_host) is None


def test_the_cheaper_source_in_gpu_seconds_wins_and_the_cap_holds() -> None:
    # Bound: peer 2 GPUs at 1.72x (3.43 GPU-s a second) beats host 1 GPU at 6.8x.
    assert MemoryPool().plan(big(90), H100).source == "peer"  # type: ignore[union-attr]
    assert MemoryPool(max_slowdown=1.5).plan(big(90), H100) is None
    # With 90% of the traffic hidden: host 1 GPU at 1.58x beats peer 2 GPUs at 1.07x.
    hidden = MemoryPool(overlap=0.9).plan(big(90), H100)
    assert hidden is not None and hidden.source == "host"
    assert hidden.slowdown == pytest.approx(1 + 0.1 * (10 / 90) * (3350 / 63 - 1))


def test_a_model_that_holds_it_means_no_pooling_and_models_without_nvlink_use_the_host() -> None:
    mixed = load_cluster("2x8xH100+2x8xH200")
    assert MemoryPool().plan(big(120), mixed) is None  # an H200 (141 GiB) holds it: it waits
    pinned = MemoryPool().plan(big(120, gpu_models=frozenset({"H100"})), mixed)
    assert pinned is not None and pinned.model == "H100"
    pcie = cluster(node("p", 8, GpuModel("H100", 80 * GIB, 1.0)))
    no_nvlink = MemoryPool(fabric=Fabric(nvlink_gbs={}))
    assert no_nvlink.plan(big(90), pcie).source == "host"  # type: ignore[union-attr]


def test_a_model_with_no_hbm_figure_is_a_clear_error() -> None:
    odd = cluster(node("x", 8, GpuModel("X9", 16 * GIB, 1.0)))
    with pytest.raises(SpecError, match="no HBM bandwidth for GPU model 'X9'"):
        MemoryPool(
            fabric=__import__("suanli.core.topology").core.topology.Fabric(nvlink_gbs={"X9": 100.0})
        ).plan(big(20), odd)


@pytest.mark.parametrize(
    "kw, says",
    [({"sources": ("peer", "disk")}, "sources must be some of peer, host"),
     ({"sources": ()}, "got none"), ({"overlap": 1.0}, "overlap must be in [0, 1)"),
     ({"max_slowdown": 0.5}, "max_slowdown must be >= 1"),
     ({"hbm_gbs": {"H100": 0.0}}, "HBM bandwidth of H100 must be > 0")],
)  # fmt: skip
def test_bad_settings_are_refused(kw, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=re.escape(says)):
        MemoryPool(**kw)


def test_apply_rewrites_the_task_the_runtime_and_the_utilisation() -> None:
    jobs = [big(60), big(90), Job("h", 0, 100, TaskRequest(gpus=8, gpu_memory_mib=120 * GIB,
                                                           memory_mib=1000))]  # fmt: skip
    jobs[1] = Job("p", 0, 1000, jobs[1].task, estimate=2000.0, gpu_util=0.8)
    out, pooled = MemoryPool().apply(jobs, H100)
    assert out[0] is jobs[0] and set(pooled) == {"p", "h"}
    p, h = out[1], out[2]
    s = pooled["p"].slowdown
    assert (p.task.gpus, p.task.gpu_memory_mib, p.task.gpu_models) == (4, 0, frozenset({"H100"}))
    assert p.runtime == pytest.approx(1000 * s) and p.estimate == pytest.approx(2000 * s)
    assert p.gpu_util == pytest.approx(0.8 / (2 * s))
    assert (h.task.gpus, h.task.memory_mib) == (8, 1000 + 8 * 40 * GIB)
    assert h.gpu_util == pytest.approx(1 / pooled["h"].slowdown)


def test_a_pooled_job_never_takes_memory_promised_to_another_task() -> None:
    view = ClusterView(cluster(node("n", 8, GpuModel("H100", 80 * GIB, 1.0))))
    take(view, 0, [0], frac(500, 40 * GIB))  # half of GPU 0 and 40 GiB of its memory
    before = view.gpu_free_mem[0].copy()
    (job,), _ = MemoryPool().apply([big(90, gpus=3)], view.spec)
    p, reason, _ = place_job(view, job, create("placement", "best-fit"), rng(0))
    assert reason is None and p is not None
    gpus = {g for tp in p.tasks for g in tp.gpus}
    assert len(gpus) == 6 and 0 not in gpus  # three GPUs and three lenders, all free ones
    assert view.gpu_free_mem[0, 0] == before[0]  # the fractional task keeps its memory
    # A second such job does not fit: one whole GPU is left.
    again, why, _ = place_job(view, job, create("placement", "best-fit"), rng(0))
    assert again is None and why is not None
