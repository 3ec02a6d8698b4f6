"""The co-location model's inputs: the cluster, one online service, the training jobs, and the
levers a setup pulls.

The cluster is ``gpus`` GPUs on nodes of ``gpus_per_node`` (``suanli.sim.colocation.nodes``
says where each worker and replica sits). Time advances in fixed ``step``s; the service's
demand is a rate per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from suanli.core.elastic import DEFAULT_RESIZE_COST, DEFAULT_SPEEDUP, Speedup, parse_speedup
from suanli.core.idle import IdlePolicy
from suanli.core.interference import Interference
from suanli.core.model import SpecError
from suanli.core.serving.service import ServiceSpec

PREEMPT_NEWEST = "newest"
PREEMPT_LYRA = "lyra"


@dataclass(frozen=True, slots=True)
class Training:
    """The training jobs, one entry per job in submission order: ``submit`` and ``runtime``
    (seconds, on ``gpus`` workers), the elastic range (``min_w`` = ``max_w`` = ``gpus`` for
    a rigid job), the GPU ``duty`` and GPU memory per worker (MiB), and whether a job may
    ``spread`` over nodes (None: none may; a job that may not keeps every worker on one)."""

    ids: tuple[str, ...]
    submit: np.ndarray
    runtime: np.ndarray
    gpus: np.ndarray
    min_w: np.ndarray
    max_w: np.ndarray
    duty: np.ndarray
    memory_mib: np.ndarray
    labels: tuple[frozenset[str], ...] = ()
    spread: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.spread is None:
            object.__setattr__(self, "spread", np.zeros(n, bool))
        for name in ("submit", "runtime", "gpus", "min_w", "max_w", "duty", "memory_mib", "spread"):
            if len(getattr(self, name)) != n:
                raise SpecError(f"training: {name} has {len(getattr(self, name))} entries, not {n}")
        if n and not (
            (self.min_w >= 1).all()
            and (self.min_w <= self.gpus).all()
            and (self.gpus <= self.max_w).all()
        ):
            raise SpecError("training: need 1 <= min_w <= gpus <= max_w for every job")
        if n and np.any(np.diff(self.submit) < 0):
            raise SpecError("training: jobs must be in submission order")

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def elastic(self) -> np.ndarray:
        return self.max_w > self.min_w


@dataclass(frozen=True, slots=True)
class Levers:
    """What a setup may do (the scenario's three setups are three of these):

    - ``partition``: the service runs on its own fixed pool of ``pool`` GPUs, sized for the
      peak, and training on the rest; else one shared pool;
    - ``autoscaler``: the plugin that sizes the service (``autoscaler/...``), with
      ``options``;
    - ``preempt``: how GPUs come back to the service: ``newest`` (priority preemption of the
      most recently started training jobs) or ``lyra`` (``suanli.core.loaning``: free GPUs,
      then elastic shrink, then the fewest jobs);
    - ``elastic``: training jobs start on fewer workers than asked and grow into idle GPUs;
    - ``sharing``: a replica may share a GPU with a low-duty training worker;
    - ``idle``: idle-GPU detection and reclaim, with its policy (None: off).
    """

    name: str
    partition: bool = False
    autoscaler: str = "reactive"
    options: tuple[tuple[str, object], ...] = ()
    preempt: str = PREEMPT_NEWEST
    elastic: bool = False
    sharing: bool = False
    idle: IdlePolicy | None = None

    def __post_init__(self) -> None:
        if self.preempt not in (PREEMPT_NEWEST, PREEMPT_LYRA):
            raise SpecError(f"levers {self.name}: preempt must be newest or lyra")


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything a run needs but the levers.

    ``demand[i]`` is the service's request rate over step ``i`` (the run lasts
    ``len(demand)`` steps); ``history`` is what the service saw before the run (the
    autoscalers see it; it is not simulated). ``pool`` is the partitioned service pool's size (for
    ``Levers.partition``). Training jobs checkpoint every ``checkpoint`` seconds of running; a
    resize or a restart from a checkpoint costs ``resize_cost`` seconds without progress.
    A training worker hosts a replica only if its duty is at most ``share_max_duty`` and the
    two fit the GPU's memory.
    """

    gpus: int
    gpu_memory_mib: int
    step: float
    service: ServiceSpec
    demand: np.ndarray
    training: Training
    pool: int
    history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    speedup: Speedup = field(default_factory=lambda: parse_speedup(DEFAULT_SPEEDUP))
    resize_cost: float = DEFAULT_RESIZE_COST
    checkpoint: float = 1800.0
    interference: Interference = field(default_factory=Interference)
    share_max_duty: float = 0.1
    grow_every: int = 5
    idle_every: int = 5
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.gpus <= 0 or self.step <= 0:
            raise SpecError("scenario: gpus and step must be > 0")
        if self.gpus_per_node <= 0 or self.gpus % self.gpus_per_node:
            raise SpecError(
                f"scenario: {self.gpus} GPUs are not whole nodes of {self.gpus_per_node}"
            )
        tr = self.training
        one_node = ~tr.spread  # type: ignore[operator]
        if len(tr) and (tr.max_w[one_node] > self.gpus_per_node).any():
            raise SpecError(
                "scenario: a job that may not spread over nodes asks more workers than a node has"
            )
        if not 0 <= self.pool <= self.gpus:
            raise SpecError(f"scenario: pool must be in 0..{self.gpus}, got {self.pool}")
        if len(self.demand) == 0 or not np.all(np.isfinite(self.demand)) or (self.demand < 0).any():
            raise SpecError("scenario: demand must be finite rates >= 0, at least one step")
        if self.training.max_w.max(initial=0) > self.gpus:
            raise SpecError("scenario: a training job asks more workers than the cluster has")

    @property
    def horizon(self) -> float:
        return len(self.demand) * self.step
