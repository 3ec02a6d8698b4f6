"""GPU memory pooling: a whole-GPU task that asks for more memory a GPU than its GPUs have
runs anyway, its overflow served from NVLink peers or from host memory, and slower for it.

A task of ``g`` GPUs asking ``M`` MiB a GPU, on GPUs of ``G < M`` MiB, has an overflow of
``O = M − G`` a GPU. Two sources:

- ``peer``: each of its GPUs borrows the memory of ``L = ⌈O / G⌉`` NVLink peers on the same
  node. A peer lends only while it is free, and all of it (a whole-GPU task holds a GPU's
  whole memory), so no task ever loses memory it was promised: the task asks for
  ``g · (1 + L)`` whole GPUs of one node, the lenders' compute idle;
- ``host``: the overflow lives in the node's memory, reached over PCIe (unified addressing):
  the task asks for ``g · O`` MiB more of host memory.

Slowdown: a memory-bound step reads its whole working set once, ``M − O`` of it from HBM and
``O`` over the link, so it takes ``1 + (O / M) · (B_hbm / B_link − 1)`` times as long
(``overlap`` of the remote traffic hidden behind compute lowers that:
``1 + (1 − overlap) · (O / M) · (B_hbm / B_link − 1)``). With ``overlap`` 0 it is an upper
bound: SwapAdvisor (ASPLOS'20) ran models up to 12× GPU memory at 53-99% of unlimited-memory
throughput by overlapping swaps with compute. Bandwidths: HBM per GPU model (vendor
datasheets; H100 3.35 TB/s, ``../shared/docs/ANCHORS.md``), NVLink and PCIe 5 as in
``suanli.core.topology``.

``MemoryPool.plan`` picks, for each job that no GPU model it may use could hold as asked,
the source that costs the fewest GPU-seconds (GPUs held × slowdown) among those some node of
that model can give and that slow it down no more than ``max_slowdown``, and ``apply`` rewrites the job: its task as the source asks, its
runtime (and estimate) times the slowdown, its utilisation the useful share (``gpu_util``
over ``(1 + L) · s``: lenders idle, and the GPU waiting on memory ``1 − 1/s`` of the time). A job
that fits some model as asked is left as it is: it waits for that model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from suanli.core.model import MILLI, ClusterSpec, Job, SpecError
from suanli.core.topology import Fabric

__all__ = ["HBM_GBS", "SOURCES", "MemoryPool", "Pooled"]

SOURCES = ("peer", "host")
HBM_GBS: Mapping[str, float] = {
    "H100": 3350.0, "H200": 4800.0, "A100": 2039.0, "B200": 8000.0, "GB200": 8000.0,
}  # fmt: skip
"""HBM bandwidth per GPU, GB/s (vendor datasheets: H100 SXM 3.35 TB/s, H200 4.8, A100 80 GB
SXM 2.039, B200 8)."""


@dataclass(frozen=True, slots=True)
class Pooled:
    """How one job's overflow is served: ``source``, the lenders per GPU (peer), the
    overflow a GPU and the slowdown it is charged."""

    source: str
    model: str
    lenders: int
    overflow_mib: int
    slowdown: float


@dataclass(frozen=True)
class MemoryPool:
    """See the module docstring; every figure overridable."""

    sources: tuple[str, ...] = SOURCES
    fabric: Fabric = field(default_factory=Fabric)
    hbm_gbs: Mapping[str, float] = field(default_factory=lambda: dict(HBM_GBS))
    overlap: float = 0.0
    max_slowdown: float = float("inf")
    """A source that would slow the job down more than this is not used (a job with no
    other source is left as it is: no GPU holds it)."""

    def __post_init__(self) -> None:
        bad = [s for s in self.sources if s not in SOURCES]
        if bad or not self.sources:
            raise SpecError(f"memory pool: sources must be some of {', '.join(SOURCES)}, "
                            f"got {', '.join(self.sources) or 'none'}")  # fmt: skip
        if not 0 <= self.overlap < 1:
            raise SpecError(f"memory pool: overlap must be in [0, 1), got {self.overlap}")
        if not self.max_slowdown >= 1:
            raise SpecError(f"memory pool: max_slowdown must be >= 1, got {self.max_slowdown}")
        for model, v in self.hbm_gbs.items():
            if not v > 0:
                raise SpecError(f"memory pool: HBM bandwidth of {model} must be > 0, got {v}")

    def slowdown(self, model: str, source: str, overflow_share: float) -> float:
        """How much longer a step takes with ``overflow_share`` of its memory on ``source``."""
        hbm = self.hbm_gbs.get(model)
        if hbm is None:
            raise SpecError(f"memory pool: no HBM bandwidth for GPU model {model!r} "
                            f"(known: {', '.join(sorted(self.hbm_gbs))})")  # fmt: skip
        link = self.fabric.nvlink(model) if source == "peer" else self.fabric.pcie_gbs
        assert link is not None
        return 1.0 + (1.0 - self.overlap) * overflow_share * max(0.0, hbm / link - 1.0)

    def plan(self, job: Job, cluster: ClusterSpec) -> Pooled | None:
        """The cheapest way to serve ``job``'s overflow on ``cluster`` (None: it needs no
        pooling, or no node can serve it)."""
        t = job.task
        if not (t.gpus and t.gpu_milli >= MILLI and t.gpu_memory_mib):
            return None
        usable = [m for m in cluster.gpu_models if not t.gpu_models or m.name in t.gpu_models]
        if not usable or any(m.memory_mib >= t.gpu_memory_mib for m in usable):
            return None
        best: tuple[float, Pooled] | None = None
        for m in usable:
            nodes = [n for n in cluster.nodes if n.gpu_model == m]
            over = t.gpu_memory_mib - m.memory_mib
            share = over / t.gpu_memory_mib
            for source in self.sources:
                if source == "peer":
                    if self.fabric.nvlink(m.name) is None:
                        continue
                    lenders = math.ceil(over / m.memory_mib)
                    gpus = t.gpus * (1 + lenders)
                    if not any(n.gpus >= gpus for n in nodes):
                        continue
                else:
                    lenders, gpus = 0, t.gpus
                    if not any(n.memory_mib >= t.memory_mib + t.gpus * over and n.gpus >= t.gpus
                               for n in nodes):  # fmt: skip
                        continue
                slow = self.slowdown(m.name, source, share)
                if slow > self.max_slowdown:
                    continue
                cost = gpus * slow
                if best is None or cost < best[0]:
                    best = (cost, Pooled(source, m.name, lenders, over, slow))
        return best[1] if best is not None else None

    def apply(
        self, jobs: Sequence[Job], cluster: ClusterSpec
    ) -> tuple[list[Job], dict[str, Pooled]]:
        """``jobs`` with every job that needs pooling rewritten (module docstring), and how
        each rewritten one is served, by job id."""
        out: list[Job] = []
        pooled: dict[str, Pooled] = {}
        for job in jobs:
            p = self.plan(job, cluster)
            if p is None:
                out.append(job)
                continue
            t = job.task
            if p.source == "peer":
                task = replace(t, gpus=t.gpus * (1 + p.lenders), gpu_memory_mib=0,
                               gpu_models=frozenset({p.model}))  # fmt: skip
                util = job.gpu_util / ((1 + p.lenders) * p.slowdown)
            else:
                task = replace(t, gpu_memory_mib=0, memory_mib=t.memory_mib + t.gpus * p.overflow_mib,
                               gpu_models=frozenset({p.model}))  # fmt: skip
                util = job.gpu_util / p.slowdown
            est = job.estimate * p.slowdown if job.estimate is not None else None
            out.append(replace(job, task=task, runtime=job.runtime * p.slowdown, estimate=est,
                               gpu_util=util))  # fmt: skip
            pooled[job.id] = p
        return out, pooled
