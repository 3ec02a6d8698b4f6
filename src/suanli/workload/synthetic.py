"""The built-in seeded synthetic workload: the default job list of ``suanli simulate``.

``generate(config, cluster)`` draws ``config.jobs`` jobs that all fit ``cluster``. Every draw
is vectorised with NumPy from ``numpy.random.default_rng(config.seed)`` (one independent child
stream per attribute, so changing, say, the priority mix does not reshuffle the runtimes);
the only per-job Python work is building the ``Job`` objects. The same config and cluster
always give the same list.

Calibration. The defaults below are constants measured once from the public traces in
``../shared/traces/`` (see ``docs/workload.md`` for every figure and how it was taken). This
module never reads the traces:

- openb = Alibaba GPU cluster trace 2023 (``cluster-trace-gpu-v2023``), as used by the FGD
  paper, Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
  Fragmentation Gradient Descent", USENIX ATC'23. File: ``openb/openb_pod_list_default.csv``
  (8,152 pods). Gives the CPU-only / fractional / whole-GPU split, the fractional GPU shares,
  the CPU and memory requests, and the QoS mix.
- Philly = Microsoft Philly trace, Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU
  Clusters for DNN Training Workloads", USENIX ATC'19, as processed by the Pollux artifact
  (Qiao et al., OSDI'21). File: ``philly/philly_jobs.csv`` (82,247 jobs). Gives the
  whole-GPU size mix (1 / 2-8 / gangs), the runtimes and the tenant skew.

The two traces describe different clusters (openb: inference-heavy, GPU-sharing; Philly:
training). The default mix blends them: openb sets how many jobs are CPU-only, fractional or
whole-GPU; Philly splits the whole-GPU jobs into 1 GPU, 2-8 GPUs on one node, and multi-node
gangs.

Units follow ``suanli.core.model``: milli-GPU, milli-CPU, MiB, seconds. Runtimes are in
reference-speed seconds (a GPU of speed 1.0); the simulator divides by the GPU's speed.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from suanli.core.model import (
    DEFAULT_PRIORITY_CLASSES,
    MILLI,
    ClusterSpec,
    Job,
    NodeSpec,
    SpecError,
    TaskRequest,
)
from suanli.workload.calibration import (
    CPU_ONLY_SHAPES,
    CPU_ONLY_SHARE,
    ESTIMATE_FACTOR_MEDIAN,
    ESTIMATE_FACTOR_SIGMA,
    ESTIMATE_MISSING_SHARE,
    FRACTIONAL_SHAPES,
    FRACTIONAL_SHARE,
    GANG_GPUS_PER_TASK,
    GANG_SHARE,
    GANG_TASKS,
    MODEL_CONSTRAINED_SHARE,
    MULTI_GPU_SHAPES,
    MULTI_GPU_SHARE,
    MULTI_GPU_SIZES,
    ONE_GPU_SHAPES,
    PHILLY_RUNTIME,
    PRIORITY_MIX,
    TENANT_ZIPF_S,
    TENANTS,
    RuntimeModel,
)
from suanli.workload.duty import parse_duty
from suanli.workload.info import WorkloadInfo

# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------

_SHARE_FIELDS = (
    "cpu_only_share",
    "fractional_share",
    "multi_gpu_share",
    "gang_share",
    "model_constrained_share",
    "estimate_missing_share",
)


def _bad(name: str, why: str) -> SpecError:
    return SpecError(f"WorkloadConfig.{name}: {why}")


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What to generate. Defaults are calibrated to openb and Philly (see module docstring).

    Exactly one of ``target_load`` and ``arrival_rate`` is set. The class shares are of all
    jobs; whole single-GPU jobs take what ``cpu_only_share + fractional_share +
    multi_gpu_share + gang_share`` leaves (the sum must be <= 1). ``priority_mix`` accepts a
    mapping or pairs and is stored as a tuple of (class, weight) pairs; weights need not sum
    to 1. Invalid values raise ``SpecError`` naming the field.
    """

    jobs: int | None = 2000
    """Jobs to draw; None: as many as ``horizon`` holds at the offered load (derived)."""
    seed: int = 0
    target_load: float | None = 0.9
    """Offered load: mean GPU-seconds asked per second / the cluster's GPU capacity."""
    arrival_rate: float | None = None
    """Jobs per second (Poisson)."""
    horizon: float | None = None
    """Seconds over which the jobs arrive. With ``jobs`` None, the job count is derived from it
    and the offered load (or ``arrival_rate``); with ``jobs`` set (and no load or rate), the
    arrival rate is derived: the jobs arrive over exactly this span."""
    time_limit: float | None = None
    """Wall-clock seconds a job may run on the cluster (as a partition's time limit): drawn
    runtimes that would run longer on the slowest GPUs the job may get are cut to it."""
    speed_weighted_load: bool = True
    """Capacity for ``target_load``: True (default), sum of GPUs x model speed, the capacity the
    simulator really has; False, the GPU count."""
    load_window: bool = False
    """True: ``target_load`` is the busy fraction while the jobs arrive, counting only
    GPU-seconds before the last arrival (see ``generate``): a burst that fills the cluster
    while it arrives and then drains for as long as its longest job. False (default): the
    plain mean, a steady arrival process."""
    cpu_only_share: float = CPU_ONLY_SHARE
    fractional_share: float = FRACTIONAL_SHARE
    multi_gpu_share: float = MULTI_GPU_SHARE
    """Single-task jobs of 2, 4 or 8 GPUs (Philly mix)."""
    gang_share: float = GANG_SHARE
    """Multi-task jobs of 8-GPU tasks (2-16 tasks, Philly mix), started all together."""
    model_constrained_share: float = MODEL_CONSTRAINED_SHARE
    """GPU jobs pinned to one GPU model (only on clusters with more than one model)."""
    tenants: int = TENANTS
    tenant_zipf_s: float = TENANT_ZIPF_S
    priority_mix: Mapping[str, float] | tuple[tuple[str, float], ...] = PRIORITY_MIX
    runtime_model: RuntimeModel = PHILLY_RUNTIME
    runtime_scale: float = 1.0
    """Multiplies every drawn runtime (after rounding to whole seconds, min 1 s)."""
    runtime_cap: float | None = None
    """If set, no runtime exceeds this many seconds."""
    estimate_missing_share: float = ESTIMATE_MISSING_SHARE
    estimate_factor_median: float = ESTIMATE_FACTOR_MEDIAN
    estimate_factor_sigma: float = ESTIMATE_FACTOR_SIGMA
    duty: str = "synthetic"
    """GPU duty profile of the jobs (``suanli.workload.duty``): by default fractional-GPU jobs
    draw from Alibaba's GenAI serving trace, whole-GPU jobs from Jeon et al.'s Philly means."""

    def __post_init__(self) -> None:
        if self.jobs is not None:
            if isinstance(self.jobs, bool) or not isinstance(self.jobs, (int, np.integer)):
                raise _bad("jobs", f"must be an integer, got {self.jobs!r}")
            if self.jobs < 0:
                raise _bad("jobs", f"must be >= 0, got {self.jobs}")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise _bad("seed", f"must be an integer >= 0, got {self.seed!r}")
        for name in ("target_load", "arrival_rate", "horizon", "time_limit"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not (math.isfinite(v) and v > 0)):
                raise _bad(name, f"must be a finite number > 0, got {v}")
        given = (self.target_load is not None) + (self.arrival_rate is not None)
        if self.jobs is None and self.horizon is None:
            raise _bad("jobs", "give jobs, or a horizon to derive them from")
        if self.jobs is not None and self.horizon is not None:
            if given:
                raise _bad(
                    "horizon",
                    "with both jobs and horizon the arrival rate is derived: leave target_load "
                    f"and arrival_rate unset (got target_load={self.target_load}, "
                    f"arrival_rate={self.arrival_rate})",
                )
        elif given != 1:
            raise _bad(
                "target_load",
                "set exactly one of target_load and arrival_rate "
                f"(got target_load={self.target_load}, arrival_rate={self.arrival_rate})",
            )
        if self.load_window and (self.horizon is not None or self.target_load is None):
            raise _bad("load_window", "applies only to target_load without a horizon")
        for name in _SHARE_FIELDS:
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise _bad(name, f"must be in [0, 1], got {v}")
        total = self.cpu_only_share + self.fractional_share + self.multi_gpu_share + self.gang_share
        if total > 1.0 + 1e-9:
            raise _bad(
                "shares",
                "cpu_only_share + fractional_share + multi_gpu_share + gang_share must be "
                f"<= 1 (the rest are 1-GPU jobs), got {total:.4f}",
            )
        if isinstance(self.tenants, bool) or not isinstance(self.tenants, (int, np.integer)):
            raise _bad("tenants", f"must be an integer, got {self.tenants!r}")
        if self.tenants < 1:
            raise _bad("tenants", f"must be >= 1, got {self.tenants}")
        if not (math.isfinite(self.tenant_zipf_s) and self.tenant_zipf_s >= 0):
            raise _bad("tenant_zipf_s", f"must be >= 0, got {self.tenant_zipf_s}")
        mix = self.priority_mix
        pairs = tuple(
            (name, float(w)) for name, w in (mix.items() if isinstance(mix, Mapping) else mix)
        )
        for name, w in pairs:
            if name not in DEFAULT_PRIORITY_CLASSES:
                raise _bad(
                    "priority_mix",
                    f"unknown class {name!r} (known: {', '.join(DEFAULT_PRIORITY_CLASSES)})",
                )
            if not (math.isfinite(w) and w >= 0):
                raise _bad("priority_mix", f"weight of {name!r} must be >= 0, got {w}")
        if len({n for n, _ in pairs}) != len(pairs):
            raise _bad("priority_mix", "a class is listed twice")
        if not sum(w for _, w in pairs) > 0:
            raise _bad("priority_mix", "weights must sum to > 0")
        object.__setattr__(self, "priority_mix", pairs)
        if not isinstance(self.runtime_model, RuntimeModel):
            raise _bad("runtime_model", "must be a RuntimeModel")
        if not (math.isfinite(self.runtime_scale) and self.runtime_scale > 0):
            raise _bad("runtime_scale", f"must be > 0, got {self.runtime_scale}")
        if self.runtime_cap is not None and not self.runtime_cap > 0:
            raise _bad("runtime_cap", f"must be > 0, got {self.runtime_cap}")
        if not (math.isfinite(self.estimate_factor_median) and self.estimate_factor_median > 0):
            raise _bad("estimate_factor_median", f"must be > 0, got {self.estimate_factor_median}")
        if not (math.isfinite(self.estimate_factor_sigma) and self.estimate_factor_sigma >= 0):
            raise _bad("estimate_factor_sigma", f"must be >= 0, got {self.estimate_factor_sigma}")
        try:
            if parse_duty(self.duty).kind == "declared":
                raise SpecError("'declared' has nothing to declare in a synthetic workload")
        except SpecError as e:
            raise _bad("duty", str(e)) from None

    @property
    def priority_pairs(self) -> tuple[tuple[str, float], ...]:
        """``priority_mix`` as (class, weight) pairs (the form it is stored in)."""
        mix = self.priority_mix
        return tuple(mix.items()) if isinstance(mix, Mapping) else tuple(mix)

    @property
    def one_gpu_share(self) -> float:
        """Share of whole single-GPU jobs: what the other classes leave."""
        return max(
            0.0,
            1.0
            - self.cpu_only_share
            - self.fractional_share
            - self.multi_gpu_share
            - self.gang_share,
        )


# --------------------------------------------------------------------------------------------
# Tenants
# --------------------------------------------------------------------------------------------

_DEPARTMENTS = (
    "ai-lab/vision",
    "ai-lab/nlp",
    "search/ranking",
    "ads/ctr",
    "ai-lab/speech",
    "cloud/infra",
    "research/rl",
    "robotics/perception",
    "health/imaging",
    "research/theory",
    "finance/risk",
    "games/agents",
)
_USERS = (
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
    "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "wendy",
)  # fmt: skip


def tenant_paths(n: int) -> tuple[tuple[str, str], ...]:
    """(tenant, queue) of the ``n`` tenants, heaviest first: ``org/department/user`` and
    ``org/department``. Tenant ``k`` sits in department ``k mod 12``, so the heaviest ones land
    in distinct departments (queues) and queue shares stay close to the tenant skew."""
    out = []
    for k in range(n):
        dept = _DEPARTMENTS[k % len(_DEPARTMENTS)]
        user = _USERS[k % len(_USERS)]
        if k >= len(_USERS):
            user = f"{user}{k // len(_USERS)}"
        out.append((f"{dept}/{user}", dept))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------

# Job classes (internal codes).
_CPU, _FRAC, _ONE, _MULTI, _GANG = 0, 1, 2, 3, 4

# The request table of each class: rows of (gpu_milli, cpu_milli, memory_mib, weight) with
# CPU and memory per task (fractional, CPU-only) or per GPU (whole GPUs).
_TABLES: tuple[tuple[tuple[int, int, int, float], ...], ...] = (
    tuple((0, c, m, w) for c, m, w in CPU_ONLY_SHAPES),
    FRACTIONAL_SHAPES,
    tuple((MILLI, c, m, w) for c, m, w in ONE_GPU_SHAPES),
    tuple((MILLI, c, m, w) for c, m, w in MULTI_GPU_SHAPES),
    tuple((MILLI, c, m, w) for c, m, w in MULTI_GPU_SHAPES),
)
_PER_GPU = (False, False, True, True, True)
_ROWS = max(len(t) for t in _TABLES)
_SIZES = len(MULTI_GPU_SIZES)


def _pick(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """``n`` indices drawn with probabilities proportional to ``weights`` (vectorised)."""
    cdf = np.cumsum(weights, dtype=float)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1)


@dataclass(frozen=True, slots=True)
class _Nodes:
    """The cluster as arrays, for fitting shapes."""

    gpus: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    model: np.ndarray  # index into models, -1 for CPU-only nodes
    models: tuple[str, ...]
    model_gpus: np.ndarray  # total GPUs per model
    min_gpu_mem: int
    speed: np.ndarray  # per node: its GPU model's speed (1.0 for CPU-only nodes)

    @staticmethod
    def of(cluster: ClusterSpec) -> _Nodes:
        models = tuple(m.name for m in cluster.gpu_models)
        index = {m: i for i, m in enumerate(models)}
        nodes: tuple[NodeSpec, ...] = cluster.nodes
        model = np.array(
            [index[n.gpu_model.name] if n.gpus and n.gpu_model else -1 for n in nodes], np.int64
        )
        gpus = np.array([n.gpus for n in nodes], np.int64)
        model_gpus = np.array([gpus[model == i].sum() for i in range(len(models))], np.int64)
        mems = [n.gpu_model.memory_mib for n in nodes if n.gpus and n.gpu_model]
        return _Nodes(
            gpus=gpus,
            cpu=np.array([n.cpu_milli for n in nodes], np.int64),
            mem=np.array([n.memory_mib for n in nodes], np.int64),
            model=model,
            models=models,
            model_gpus=model_gpus,
            min_gpu_mem=min(mems) if mems else 0,
            speed=np.array([n.gpu_model.speed if n.gpu_model else 1.0 for n in nodes], float),
        )

    def fit(self, gpus: int, model: int, cpu: int, mem: int) -> tuple[int, int, int]:
        """Shrink (cpu, mem) of a ``gpus``-GPU task so some eligible node holds it.

        Eligible: nodes with >= ``gpus`` GPUs (of ``model`` unless -1); there must be one.
        CPU and memory are scaled by one common factor, the largest that fits one eligible
        node, then rounded down (CPU to 500 milli, memory to 1 GiB, when that much remains).
        Returns the fitted (cpu, mem) and how many such tasks the eligible nodes hold in all
        (the widest gang of this task the empty cluster can start).
        """
        ok = self.gpus >= gpus
        if model >= 0:
            ok &= self.model == model
        cpus, mems, gs = self.cpu[ok], self.mem[ok], self.gpus[ok]
        ratio = np.ones(len(cpus))
        if cpu > 0:
            ratio = np.minimum(ratio, cpus / cpu)
        if mem > 0:
            ratio = np.minimum(ratio, mems / mem)
        f = float(ratio.max())
        if f < 1.0:
            best = int(np.argmax(ratio))
            cpu = min(int(cpu * f), int(cpus[best]))
            mem = min(int(mem * f), int(mems[best]))
            cpu = cpu - cpu % 500 if cpu >= 500 else cpu
            mem = mem - mem % 1024 if mem >= 1024 else mem
        big = 1 << 40  # "no limit" per node; the sum stays far from int64 overflow
        per = gs // gpus if gpus > 0 else np.full(len(gs), big)
        if cpu > 0:
            per = np.minimum(per, cpus // cpu)
        if mem > 0:
            per = np.minimum(per, mems // mem)
        return cpu, mem, int(min(per.sum(), big))


@dataclass(frozen=True, slots=True)
class _Recipe:
    """What one distinct (class, table row, multi-GPU size, pinned model) becomes."""

    request: TaskRequest
    gpus: int  # GPUs per task after clamping
    slots: int  # tasks of this request the empty cluster holds
    slowest: float  # speed of the slowest node it may run on (1.0 without GPUs)


def _recipe(code: int, row: int, size: int, model: int, nodes: _Nodes) -> _Recipe:
    milli, cpu, mem, _ = _TABLES[code][row]
    if code == _CPU:
        gpus = 0
    elif code == _MULTI:
        gpus = MULTI_GPU_SIZES[size][0]
    elif code == _GANG:
        gpus = GANG_GPUS_PER_TASK
    else:
        gpus = 1
    gpus = min(gpus, int(nodes.gpus.max()))
    if _PER_GPU[code]:
        cpu, mem = cpu * gpus, mem * gpus
    cpu, mem, slots = nodes.fit(gpus, model, cpu, mem)
    fractional = gpus == 1 and milli < MILLI
    request = TaskRequest(
        gpus=gpus,
        gpu_milli=milli if gpus else MILLI,  # as TaskRequest(gpus=0) has it
        gpu_memory_mib=milli * nodes.min_gpu_mem // MILLI if fractional else 0,
        cpu_milli=cpu,
        memory_mib=mem,
        gpu_models=frozenset((nodes.models[model],)) if model >= 0 else frozenset(),
    )
    slowest = 1.0
    if gpus:
        ok = nodes.gpus >= gpus
        if model >= 0:
            ok &= nodes.model == model
        slowest = float(nodes.speed[ok].min())
    return _Recipe(request, gpus, slots, slowest)


@dataclass(frozen=True, slots=True)
class _Drawn:
    """Every job's drawn attributes but its arrival, tenant, priority, estimate and duty."""

    nodes: _Nodes
    cls: np.ndarray
    recipe: np.ndarray  # index into recipes
    recipes: list[_Recipe]
    tasks: np.ndarray
    gpus: np.ndarray  # GPUs per task
    runtime: np.ndarray  # reference seconds, after the cap and the time limit
    gpu_width: np.ndarray  # GPUs the job holds (fractional shares count as such)
    cpu_width: np.ndarray  # CPU cores the job holds
    capped: int  # jobs the time limit cut
    cut: float  # share of the GPU-seconds the time limit cut
    streams: list[np.random.Generator]


def _draw(config: WorkloadConfig, nodes: _Nodes, n: int) -> _Drawn:
    """Draw ``n`` jobs' shapes and runtimes (see ``generate``)."""
    has_gpus = int(nodes.gpus.sum()) > 0
    streams = np.random.default_rng(config.seed).spawn(10)
    _, s_class, s_size, s_shape, s_runtime, _, _, _, _, s_model = streams

    # Class of each job.
    if has_gpus:
        weights = np.array([
            config.cpu_only_share, config.fractional_share, config.one_gpu_share,
            config.multi_gpu_share, config.gang_share,
        ])  # fmt: skip
        if weights.sum() <= 0:
            weights[_ONE] = 1.0
        cls = _pick(s_class, weights, n)
    else:
        s_class.random(n)  # same draws as with GPUs, so the other streams do not depend on it
        cls = np.full(n, _CPU, np.int64)

    # Requested size (multi-GPU size, gang width) and request row of each job.
    size = _pick(s_size, np.array([w for _, w in MULTI_GPU_SIZES]), n)
    width = np.array([t for t, _ in GANG_TASKS], np.int64)[
        _pick(s_size, np.array([w for _, w in GANG_TASKS]), n)
    ]
    is_multi, is_gang = cls == _MULTI, cls == _GANG
    size[~is_multi] = 0
    u_shape = s_shape.random(n)
    row = np.zeros(n, np.int64)
    for code, table in enumerate(_TABLES):
        m = cls == code
        cdf = np.cumsum([r[-1] for r in table])
        row[m] = np.minimum(
            np.searchsorted(cdf / cdf[-1], u_shape[m], side="right"), len(table) - 1
        )

    # Optional pin to one GPU model (only meaningful with several models).
    model = np.full(n, -1, np.int64)
    u_model = s_model.random((2, n))
    if len(nodes.models) > 1 and config.model_constrained_share > 0:
        gpus_req = np.select(
            [cls == _CPU, is_multi, is_gang],
            [0, np.array([g for g, _ in MULTI_GPU_SIZES])[size], GANG_GPUS_PER_TASK],
            1,
        )
        gpus_req = np.minimum(gpus_req, int(nodes.gpus.max()))
        pinned = (gpus_req > 0) & (u_model[0] < config.model_constrained_share)
        for g in np.unique(gpus_req[pinned]).tolist():
            m = pinned & (gpus_req == g)
            # Models with a node holding g GPUs, weighted by their GPU count.
            w = np.array([
                nodes.model_gpus[i] if (nodes.gpus[nodes.model == i] >= g).any() else 0
                for i in range(len(nodes.models))
            ], float)  # fmt: skip
            cdf = np.cumsum(w) / w.sum()
            model[m] = np.minimum(np.searchsorted(cdf, u_model[1][m], side="right"), len(w) - 1)

    # Each distinct (class, row, size, model) is turned into a request once (few dozen).
    n_models = len(nodes.models) + 1
    recipe = ((cls * _ROWS + row) * _SIZES + size) * n_models + (model + 1)
    present = np.bincount(recipe, minlength=5 * _ROWS * _SIZES * n_models) > 0
    codes = np.flatnonzero(present)
    dense = np.cumsum(present) - 1
    recipe = dense[recipe]  # index into `codes`
    made: dict[TaskRequest, TaskRequest] = {}
    recipes: list[_Recipe] = []
    for c in codes.tolist():
        c, md = divmod(c, n_models)
        c, sz = divmod(c, _SIZES)
        code, rw = divmod(c, _ROWS)
        r = _recipe(code, rw, sz, md - 1, nodes)
        recipes.append(_Recipe(made.setdefault(r.request, r.request), r.gpus, r.slots, r.slowest))
    r_gpus = np.array([r.gpus for r in recipes], np.int64)
    r_slots = np.array([r.slots for r in recipes], np.int64)
    r_share = np.array([r.request.gpu_share_milli for r in recipes], np.int64)
    r_cpu = np.array([r.request.cpu_milli for r in recipes], np.int64)

    # Tasks: 1, or a gang of `width` 8-GPU tasks re-cut to the clamped task size and capped
    # at what the cluster holds.
    gpus = r_gpus[recipe]
    total = width * GANG_GPUS_PER_TASK
    tasks = np.where(is_gang, -(-total // np.maximum(gpus, 1)), 1)
    tasks = np.maximum(1, np.minimum(tasks, r_slots[recipe]))

    # Runtimes, by the requested size; whole seconds (min 1 s), then scaled.
    u_rt = s_runtime.random(n)
    runtime = np.empty(n)
    rm = config.runtime_model
    groups = (
        (cls <= _ONE, rm.one_gpu),
        (is_multi & (size == 0), rm.for_gpus(MULTI_GPU_SIZES[0][0])),
        (is_multi & (size == 1), rm.for_gpus(MULTI_GPU_SIZES[1][0])),
        (is_multi & (size == 2), rm.for_gpus(MULTI_GPU_SIZES[2][0])),
        (is_gang, rm.gang),
    )
    for m, qt in groups:
        runtime[m] = qt.sample(u_rt[m])
    runtime = np.maximum(np.round(runtime), 1.0) * config.runtime_scale
    if config.runtime_cap is not None:
        runtime = np.minimum(runtime, config.runtime_cap)
    gpu_width = r_share[recipe] / MILLI * tasks
    uncut = float((gpu_width * runtime).sum())
    capped = 0
    if config.time_limit is not None:
        # Reference seconds the job may run: the limit on the slowest node it may get.
        limit = config.time_limit * np.array([r.slowest for r in recipes])[recipe]
        over = runtime > limit
        capped = int(over.sum())
        runtime = np.where(over, limit, runtime)
    cut = 1.0 - float((gpu_width * runtime).sum()) / uncut if uncut > 0 else 0.0
    return _Drawn(
        nodes, cls, recipe, recipes, tasks, gpus, runtime, gpu_width,
        r_cpu[recipe] / 1000.0 * tasks, capped, cut, streams,
    )  # fmt: skip


PILOT_JOBS = 100_000
"""Jobs drawn to learn the mean job size when the job count is derived from a horizon."""


def generate(config: WorkloadConfig, cluster: ClusterSpec) -> list[Job]:
    """Draw ``config.jobs`` jobs for ``cluster``, sorted by submit time (see
    ``generate_with_info``, which also says how the workload's size and pace came about).
    """
    return generate_with_info(config, cluster)[0]


def generate_with_info(
    config: WorkloadConfig, cluster: ClusterSpec
) -> tuple[list[Job], WorkloadInfo]:
    """Draw ``config.jobs`` jobs for ``cluster``, sorted by submit time, and say how.

    Contract:
    - deterministic in (config, cluster); ids ``j000001``... zero-padded (wider past a
      million jobs), in submit order;
    - submit times: a Poisson process from t = 0 (the first job at 0, exponential gaps);
    - ``horizon`` without ``jobs``: the job count is the arrival rate (from ``target_load`` and
      the mean job of a pilot draw of ``PILOT_JOBS``, or ``arrival_rate``) times the horizon;
      the rate is then set from the drawn jobs as below, so the span is the horizon up to the
      sampling error of the mean. ``jobs`` with ``horizon``: the arrival rate is derived, the
      last job arriving at exactly ``horizon``;
    - ``time_limit``: no job runs longer than it on the slowest node it may be placed on
      (nodes with enough GPUs of its pinned model; CPU-only jobs at speed 1.0); the runtimes
      over it are cut (the arrival rate is set from the cut runtimes);
    - every job fits ``cluster`` when empty: per task, some node (of the pinned model, if
      any) holds its GPUs, CPU and memory, and a gang's tasks all fit at once, so its GPUs
      never exceed the cluster's. Larger requests are clamped: GPUs per task to the largest
      node (a gang keeps its total GPUs by taking more, smaller tasks, up to what the cluster
      holds), CPU and memory scaled down together. The realised class shares can then differ
      from the config (e.g. no multi-GPU jobs on a cluster of 1-GPU nodes). Node health is
      not looked at;
    - a cluster without GPUs gets CPU-only jobs only;
    - ``target_load``: the arrival rate is set from the DRAWN jobs so that their mean
      GPU-seconds (reference speed) per job x rate / capacity == target_load, capacity being
      the cluster's GPU count (or GPUs x speed with ``speed_weighted_load``). If the cluster
      has no GPUs or the jobs ask for none, CPU-seconds over the cluster's cores are used.
      With ``load_window`` the target is instead the busy fraction of the capacity between
      the first and the last arrival if no job ever waited (a job still running at the last
      arrival counts up to then); the rate is found by bisection. With heavy-tailed runtimes
      and few jobs, most GPU-seconds of the default basis fall after the last arrival, so
      this basis is the one that keeps a short list busy while it arrives;
    - task requests are shared: jobs of one shape hold the same ``TaskRequest`` object.
    """
    nodes = _Nodes.of(cluster)
    n = config.jobs
    derived = "horizon"
    if n is None:
        assert config.horizon is not None
        derived = "jobs"
        rate = config.arrival_rate
        if rate is None:
            pilot = _draw(config, nodes, PILOT_JOBS)
            rate = _rate_for_load(config, cluster, pilot.gpu_width, pilot.cpu_width, pilot.runtime)
        n = max(1, round(rate * config.horizon))
    elif config.horizon is not None:
        derived = "arrival rate"
    elif config.load_window:
        derived = "load window"
    if n == 0:
        return [], WorkloadInfo(0, 0.0, 0.0, 0.0, derived, time_limit=config.time_limit)
    d = _draw(config, nodes, n)
    s_arrival, _, _, _, _, s_tenant, s_prio, s_est, s_util, _ = d.streams
    recipe, recipes, tasks, gpus, runtime = d.recipe, d.recipes, d.tasks, d.gpus, d.runtime

    # Arrivals.
    gaps = s_arrival.standard_exponential(n)
    gaps[0] = 0.0
    unit_submit = np.cumsum(gaps)  # arrival times at rate 1
    if derived == "arrival rate":
        assert config.horizon is not None
        rate = float(unit_submit[-1]) / config.horizon if n > 1 else 1.0
    elif config.arrival_rate is not None:
        rate = config.arrival_rate
    else:
        rate = _rate_for_load(config, cluster, d.gpu_width, d.cpu_width, runtime, unit_submit)
    submit = unit_submit / rate
    span = float(submit[-1])
    capacity, width = _load_basis(config, cluster, d.gpu_width, d.cpu_width)
    info = WorkloadInfo(
        n,
        span,
        (n - 1) / span if span > 0 else rate,
        config.target_load
        if config.target_load is not None and derived in ("horizon", "jobs")
        else float((width * runtime).sum()) / (capacity * span)
        if span > 0
        else 0.0,
        derived,
        d.capped,
        d.cut,
        config.time_limit,
    )

    # Tenants, priorities, estimates, utilisation.
    ranks = np.arange(1, config.tenants + 1, dtype=float)
    tenant_idx = _pick(s_tenant, ranks**-config.tenant_zipf_s, n)
    prio_names = [name for name, _ in config.priority_pairs]
    prio_idx = _pick(s_prio, np.array([w for _, w in config.priority_pairs], float), n)
    u_est = s_est.random(n)
    factor = config.estimate_factor_median * np.exp(
        config.estimate_factor_sigma * s_est.standard_normal(n)
    )
    estimate = np.ceil(runtime * factor / 60.0) * 60.0
    estimate[u_est < config.estimate_missing_share] = np.nan
    fractional = (tasks == 1) & (gpus == 1) & (d.gpu_width < 1)
    util = parse_duty(config.duty).draw(s_util, d.gpu_width, fractional)

    paths = tenant_paths(config.tenants)
    tenant_names = [p[0] for p in paths]
    user_names = [p[0].rsplit("/", 1)[-1] for p in paths]  # tenant org/department/user
    queue_names = [p[1] for p in paths]
    requests = [r.request for r in recipes]
    ti = tenant_idx.tolist()
    digits = max(6, len(str(n)))
    columns = (
        [f"j{i:0{digits}d}" for i in range(1, n + 1)],
        submit.tolist(),
        runtime.tolist(),
        [requests[i] for i in recipe.tolist()],
        tasks.tolist(),
        [0] * n,
        [tenant_names[i] for i in ti],
        [queue_names[i] for i in ti],
        [prio_names[i] for i in prio_idx.tolist()],
        [None if e != e else e for e in estimate.tolist()],  # NaN -> no estimate
        util.tolist(),
        [None] * n,  # checkpoint_interval
        [0.0] * n,  # storage_gb
        [0.0] * n,  # network_gb
        [user_names[i] for i in ti],
    )
    # A million new objects would trigger many full garbage collections (none can free
    # anything: every object is kept); pausing the collector keeps the build linear.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return list(map(Job, *columns)), info
    finally:
        if was_enabled:
            gc.enable()


def _load_basis(
    config: WorkloadConfig, cluster: ClusterSpec, gpu_width: np.ndarray, cpu_width: np.ndarray
) -> tuple[float, np.ndarray]:
    """The capacity a load is counted against and each job's width in its units: GPUs
    (x speed with ``speed_weighted_load``), or CPU cores when the cluster has no GPUs or the
    jobs ask for none."""
    if config.speed_weighted_load:
        capacity = float(sum(n.gpus * n.gpu_model.speed for n in cluster.nodes if n.gpu_model))
    else:
        capacity = float(cluster.total_gpus)
    width = gpu_width
    if capacity <= 0 or not (width > 0).any():
        width = cpu_width
        capacity = sum(n.cpu_milli for n in cluster.nodes) / 1000.0
        if capacity <= 0 or not (width > 0).any():
            raise _bad("target_load", "the jobs ask for no GPU and no CPU; set arrival_rate")
    return capacity, width


def _rate_for_load(
    config: WorkloadConfig,
    cluster: ClusterSpec,
    gpu_width: np.ndarray,
    cpu_width: np.ndarray,
    runtime: np.ndarray,
    unit_submit: np.ndarray | None = None,
) -> float:
    """Jobs per second giving ``config.target_load`` for the drawn jobs (see ``generate``).

    ``*_width`` are the GPUs (CPU cores) each job holds, ``unit_submit`` the arrival times at
    rate 1 (submit times at rate r are ``unit_submit / r``; only ``load_window`` needs them).
    """
    assert config.target_load is not None
    target = config.target_load
    capacity, width = _load_basis(config, cluster, gpu_width, cpu_width)
    rate = target * capacity / float((width * runtime).mean())
    if unit_submit is None or not config.load_window or float(unit_submit[-1]) <= 0:
        return rate
    span = float(unit_submit[-1])

    # Window basis: busy(r) = sum(width * min(r * runtime, span - unit_submit)) / (capacity *
    # span) is the no-queue busy fraction before the last arrival at rate r; it grows with r.
    left = span - unit_submit

    def busy(r: float) -> float:
        return float((width * np.minimum(r * runtime, left)).sum()) / (capacity * span)

    if busy(math.inf) <= target:
        raise _bad(
            "target_load",
            f"{target} is out of reach with load_window for these {len(runtime)} jobs "
            f"(at most {busy(math.inf):.3f}); lower it or add jobs",
        )
    lo, hi = rate / 2, rate
    while busy(hi) < target:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if busy(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return hi


def offered_load(jobs: list[Job], cluster: ClusterSpec, *, speed_weighted: bool = False) -> float:
    """Offered GPU load of ``jobs``: mean GPU-seconds per job (reference speed) x arrival rate
    / capacity, the rate being (jobs - 1) / (last submit - first submit).

    Capacity is the cluster's GPU count, or GPUs x speed with ``speed_weighted``. Returns 0
    for fewer than two jobs, a zero span or a cluster without GPUs.
    """
    if len(jobs) < 2 or cluster.total_gpus == 0:
        return 0.0
    span = jobs[-1].submit - jobs[0].submit
    if span <= 0:
        return 0.0
    if speed_weighted:
        capacity = sum(n.gpus * n.gpu_model.speed for n in cluster.nodes if n.gpu_model)
    else:
        capacity = cluster.total_gpus
    gpu_seconds = sum(j.gpu_demand_milli * j.runtime for j in jobs) / MILLI
    return gpu_seconds / len(jobs) * ((len(jobs) - 1) / span) / capacity
