"""Domain values: GPU models, nodes, topology, cluster specs, task requests and jobs.

Everything here is a frozen dataclass: plain, hashable data with no behaviour beyond
validation and a few derived values. Parsing from YAML or the command line lives in
``suanli.config``; this module never does I/O.

Units, chosen to be exact integers in the hot path:
- GPU compute share in milli-GPU (1000 = one whole GPU),
- memory (node and GPU) in MiB,
- CPU in milli-cores,
- time in seconds (float).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

MILLI = 1000
"""One whole GPU, in milli-GPU."""

MAX_QUANTITY = 2**40
"""The largest amount of one resource a task may ask for, in its unit (milli-GPU, milli-CPU,
MiB: a tebibyte of MiB is an exbibyte), and ``MAX_TASKS`` the most tasks a job may have: so
that every sum the scheduler forms (``tasks × amount``, a node's total) stays exact in the
64-bit integers of ``ClusterView``. Larger input is a ``SpecError``, never an overflow."""

MAX_TASKS = 2**20

OUTCOMES = ("", "completed", "failed", "killed")
"""The values of ``Job.outcome``: how a trace recorded the job ending (``""``: not recorded)."""


class SpecError(ValueError):
    """A domain value that cannot exist (a negative GPU count, an unknown GPU model, ...)."""


class KeyPathError(SpecError):
    """A ``SpecError`` at a key path of a document: ``path`` locates the offending value
    (``versions[1].rates[3].band``; ``""`` for the whole document), ``problem`` says what is
    wrong, ``where`` names the file (``""`` when unknown). ``within`` prefixes the path, so
    that a reader can add the keys above the part that failed."""

    def __init__(self, path: str, problem: str, where: str = "") -> None:
        self.path = path
        self.problem = problem
        self.where = where
        text = f"{path}: {problem}" if path else problem
        super().__init__(f"{where}: {text}" if where else text)

    def within(self, prefix: str) -> KeyPathError:
        """The same error (same class) with key path ``prefix`` in front of its own."""
        if not prefix:
            path = self.path
        elif not self.path:
            path = prefix
        else:
            path = prefix + self.path if self.path.startswith("[") else f"{prefix}.{self.path}"
        return type(self)(path, self.problem, self.where)


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A GPU model: its name, memory per GPU and speed relative to the reference (1.0).

    A job's runtime is stated for a GPU of speed 1.0 (the reference basis); on a GPU of speed
    ``s`` it runs ``runtime / s`` (the slowest GPU of a gang sets the pace). A trace's runtimes
    are stated on its own GPU models instead (``suanli.core.speed``): there they run as
    recorded, and ``runtime × s_native / s`` on others.
    """

    name: str
    memory_mib: int
    speed: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("GPU model needs a name")
        if self.memory_mib <= 0:
            raise SpecError(f"GPU model {self.name}: memory_mib must be > 0, got {self.memory_mib}")
        if not self.speed > 0:
            raise SpecError(f"GPU model {self.name}: speed must be > 0, got {self.speed}")


# Well-known models; memory from the vendors' data sheets, speed a rough dense-training ratio
# to V100 (the reference generation of the Philly and openb traces). Users override freely.
KNOWN_GPU_MODELS: Mapping[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("K80", 12 * 1024, 0.3),
        GpuModel("P100", 16 * 1024, 0.6),
        GpuModel("T4", 16 * 1024, 0.5),
        GpuModel("V100", 32 * 1024, 1.0),
        GpuModel("V100M16", 16 * 1024, 1.0),
        GpuModel("V100M32", 32 * 1024, 1.0),
        GpuModel("A10", 24 * 1024, 0.9),
        GpuModel("A100", 80 * 1024, 2.5),
        GpuModel("A100-40G", 40 * 1024, 2.5),
        GpuModel("A800", 80 * 1024, 2.5),
        GpuModel("L40S", 48 * 1024, 2.0),
        GpuModel("H100", 80 * 1024, 5.0),
        GpuModel("H800", 80 * 1024, 5.0),
        GpuModel("H200", 141 * 1024, 5.5),
        GpuModel("B200", 180 * 1024, 10.0),
        GpuModel("GB200", 186 * 1024, 10.0),
    )
}


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine: its GPUs (all of one model, or none), CPU, memory, labels and health.

    ``rack`` and ``nvlink_domain`` name the topology levels above the node. By default a node
    is its own NVLink domain; a rack-scale domain (e.g. 72 GPUs over 18 nodes) is expressed by
    giving several nodes the same ``nvlink_domain``.
    """

    name: str
    gpus: int
    gpu_model: GpuModel | None
    cpu_milli: int
    memory_mib: int
    rack: str = "rack-0"
    nvlink_domain: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    healthy: bool = True

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise SpecError(f"node {self.name}: gpus must be >= 0, got {self.gpus}")
        if self.gpus > 0 and self.gpu_model is None:
            raise SpecError(f"node {self.name}: has {self.gpus} GPUs but no GPU model")
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise SpecError(f"node {self.name}: cpu and memory must be >= 0")

    @property
    def domain(self) -> str:
        """The NVLink domain this node belongs to (itself unless stated)."""
        return self.nvlink_domain or self.name


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A named set of nodes. The order of ``nodes`` is the node index everywhere else."""

    name: str
    nodes: tuple[NodeSpec, ...]

    def __post_init__(self) -> None:
        if not self.nodes:
            raise SpecError(f"cluster {self.name}: has no nodes")
        seen: set[str] = set()
        models: dict[str, GpuModel] = {}
        for n in self.nodes:
            if n.name in seen:
                raise SpecError(f"cluster {self.name}: duplicate node name {n.name!r}")
            seen.add(n.name)
            m = n.gpu_model
            if m is not None and models.setdefault(m.name, m) != m:
                raise SpecError(
                    f"cluster {self.name}: GPU model {m.name!r} defined twice differently "
                    f"({models[m.name]} and {m}, on node {n.name})"
                )

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpus_by_model(self) -> dict[str, int]:
        """GPUs per GPU model name, in order of first appearance (nodes with GPUs only)."""
        out: dict[str, int] = {}
        for n in self.nodes:
            if n.gpus and n.gpu_model is not None:
                out[n.gpu_model.name] = out.get(n.gpu_model.name, 0) + n.gpus
        return out

    @property
    def gpu_models(self) -> tuple[GpuModel, ...]:
        """The distinct GPU models present, in order of first appearance."""
        out: dict[str, GpuModel] = {}
        for n in self.nodes:
            if n.gpu_model is not None and n.gpu_model.name not in out:
                out[n.gpu_model.name] = n.gpu_model
        return tuple(out.values())


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What one task of a job asks for.

    ``gpus`` whole GPUs each with ``gpu_milli`` = 1000, or, when ``gpus == 1`` and
    ``gpu_milli < 1000``, a fraction of one GPU: a compute share plus ``gpu_memory_mib`` of
    its memory. A whole-GPU request takes the GPU's entire memory and so needs a GPU nobody
    shares; for it ``gpu_memory_mib`` is the least memory each GPU must have (0: any).
    ``gpu_models`` lists acceptable models (empty: any).
    """

    gpus: int = 1
    gpu_milli: int = MILLI
    gpu_memory_mib: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_models: frozenset[str] = frozenset()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Computed once: requests are dictionary keys in the scheduler's hot path.
        return self._hash

    def __post_init__(self) -> None:
        if self.gpus == 0 and self.gpu_milli == 0:
            # One encoding for "no GPU": equal requests must be one shape.
            object.__setattr__(self, "gpu_milli", MILLI)
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.gpus,
                    self.gpu_milli,
                    self.gpu_memory_mib,
                    self.cpu_milli,
                    self.memory_mib,
                    self.gpu_models,
                )
            ),
        )
        if self.gpus < 0:
            raise SpecError(f"task: gpus must be >= 0, got {self.gpus}")
        if self.gpus == 0:
            if self.gpu_milli not in (0, MILLI) or self.gpu_memory_mib:
                raise SpecError("task: a CPU-only task (gpus=0) cannot ask for a GPU share")
        elif not 0 < self.gpu_milli <= MILLI:
            raise SpecError(f"task: gpu_milli must be in 1..1000, got {self.gpu_milli}")
        elif self.gpu_milli < MILLI and self.gpus != 1:
            raise SpecError(
                f"task: a fractional share (gpu_milli={self.gpu_milli}) is for one GPU, "
                f"not {self.gpus}"
            )
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.gpu_memory_mib < 0:
            raise SpecError("task: cpu, memory and GPU memory must be >= 0")
        if max(self.gpus, self.cpu_milli, self.memory_mib, self.gpu_memory_mib) > MAX_QUANTITY:
            raise SpecError(
                f"task: gpus, cpu_milli, memory_mib and gpu_memory_mib must each be at most "
                f"{MAX_QUANTITY}, got {self.gpus}, {self.cpu_milli}, {self.memory_mib}, "
                f"{self.gpu_memory_mib}"
            )

    @property
    def fractional(self) -> bool:
        return self.gpus == 1 and self.gpu_milli < MILLI

    @property
    def gpu_share_milli(self) -> int:
        """GPU compute this task holds, in milli-GPU (3 whole GPUs = 3000)."""
        return self.gpu_milli if self.fractional else self.gpus * MILLI


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A named priority level. Higher ``value`` goes first; only jobs of a ``preemptible``
    class are ever evicted (by a higher class, or to give back quota their queue borrowed)."""

    name: str
    value: int
    preemptible: bool = False


DEFAULT_PRIORITY_CLASSES: Mapping[str, PriorityClass] = {
    p.name: p
    for p in (
        PriorityClass("online", 1000, preemptible=False),
        PriorityClass("high", 100, preemptible=False),
        PriorityClass("normal", 0, preemptible=True),
        PriorityClass("spot", -100, preemptible=True),
    )
}


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of work: ``tasks`` identical tasks, started together (a gang).

    ``gang_min`` is the fewest tasks the job can start with (default: all of them). The
    job's ``runtime`` is its true duration on GPUs of effective speed 1.0 with all tasks
    (speed-1.0 GPUs, or a trace's native ones: ``suanli.core.speed``; known to the simulator
    only); ``estimate`` is what the user said, if anything. With fewer than all
    tasks, the work is assumed to scale linearly (runtime × tasks / started tasks).
    ``gpu_util`` is the fraction of its allocated GPU time the job really keeps busy.
    ``checkpoint_interval`` is how often (seconds of running) the job saves its progress;
    a preempted job resumes from its last checkpoint, and without one it starts over.
    ``storage_gb`` is storage the job holds while it runs and ``network_gb`` what it transfers
    over a whole run, both only metered (declared by the user, 0 if not). ``user`` is who
    submitted it (the trace's user where it records one, the token's user live; ``""``: not
    known, and per-user limits then count the job under its tenant). ``outcome`` is how the
    trace recorded the job ending (``OUTCOMES``): ``"completed"``, ``"failed"``, ``"killed"``,
    or ``""`` when not recorded. It is a recorded fact only: the simulator still runs the job
    for its recorded ``runtime`` (a failed or killed job held its GPUs that long).
    """

    id: str
    submit: float
    runtime: float
    task: TaskRequest = field(default_factory=TaskRequest)
    tasks: int = 1
    gang_min: int = 0
    tenant: str = "default"
    queue: str = "default"
    priority_class: str = "normal"
    estimate: float | None = None
    gpu_util: float = 1.0
    checkpoint_interval: float | None = None
    storage_gb: float = 0.0
    network_gb: float = 0.0
    user: str = ""
    outcome: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            raise SpecError("job needs an id")
        if self.outcome not in OUTCOMES:
            raise SpecError(
                f"job {self.id}: outcome must be one of {', '.join(map(repr, OUTCOMES))}, "
                f"got {self.outcome!r}"
            )
        if not 1 <= self.tasks <= MAX_TASKS:
            raise SpecError(f"job {self.id}: tasks must be in 1..{MAX_TASKS}, got {self.tasks}")
        if not 0 <= self.gang_min <= self.tasks:
            raise SpecError(
                f"job {self.id}: gang_min must be in 0..tasks ({self.tasks}), got {self.gang_min}"
            )
        if not self.runtime >= 0:
            raise SpecError(f"job {self.id}: runtime must be >= 0, got {self.runtime}")
        if self.submit != self.submit or self.submit < 0:  # NaN or negative
            raise SpecError(f"job {self.id}: submit time must be >= 0, got {self.submit}")
        if self.estimate is not None and not self.estimate >= 0:
            raise SpecError(f"job {self.id}: estimate must be >= 0, got {self.estimate}")
        if not 0 <= self.gpu_util <= 1:
            raise SpecError(f"job {self.id}: gpu_util must be in [0, 1], got {self.gpu_util}")
        for name in ("storage_gb", "network_gb"):
            v = getattr(self, name)
            if not (v >= 0 and v != float("inf")):
                raise SpecError(f"job {self.id}: {name} must be a finite number >= 0, got {v}")
        if self.checkpoint_interval is not None and not self.checkpoint_interval > 0:
            raise SpecError(
                f"job {self.id}: checkpoint_interval must be > 0, got {self.checkpoint_interval}"
            )

    @property
    def min_tasks(self) -> int:
        """The fewest tasks this job may start with."""
        return self.gang_min or self.tasks

    @property
    def gpu_demand_milli(self) -> int:
        """GPU compute of the whole job with all tasks, in milli-GPU."""
        return self.task.gpu_share_milli * self.tasks

    def with_class(self, priority_class: str) -> Job:
        """This job in another priority class (e.g. demoted by a budget)."""
        return replace(self, priority_class=priority_class)
