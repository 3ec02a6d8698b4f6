"""The execution-backend interface: what the control plane asks of whatever runs tasks.

A backend starts one task of a job (:class:`Launch`), hands back a :class:`Handle` that is
enough to find the task again after a control-plane restart, and reports how each task ended
(:class:`Exit`). Two implementations exist: :class:`suanli.backends.local.LocalBackend`
(real subprocesses on this machine) and :class:`suanli.backends.fake.FakeBackend`
(deterministic, in memory, for tests and the simulator parity check).

This module is stdlib-only so that importing it stays cheap.
"""

from __future__ import annotations

import hashlib
import math
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

# Variables suanli sets for every task (or for some tasks). A user-supplied value for one of
# these never wins, and the control plane's own copies are not passed down to tasks.
SUANLI_VARIABLES: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "SUANLI_JOB_ID",
    "SUANLI_ATTEMPT",
    "SUANLI_TASK_INDEX",
    "SUANLI_GPU_MILLI",
    "SUANLI_GPU_MEMORY_MIB",
    "SUANLI_CHECKPOINT_DIR",
    "SUANLI_ELASTIC_FILE",
    "SUANLI_WORLD_SIZE",
    "SUANLI_RANK",
    # The gang rendezvous (``Launch.rendezvous``): what PyTorch's ``env://`` initialisation
    # and ``torchrun``'s workers read.
    "WORLD_SIZE",
    "RANK",
    "LOCAL_WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
)

RENDEZVOUS_PORTS = (20_000, 40_000)
"""The range ``rendezvous_port`` draws from (half-open)."""

RESIZE_SIGNAL = signal.SIGUSR1
"""Sent to a surviving task of an elastic job once its elastic file says its new world size
and rank (docs/serve.md, "Elastic jobs"); a job's stop signal is never this one."""

# Variables that make the dynamic loader or the C library load or run other code, or change
# how shared libraries are found and bound: glibc's list of variables it removes for setuid
# programs (``UNSECURE_ENVVARS`` in ``sysdeps/generic/unsecvars.h``), plus the other ``LD_*``
# variables its loader reads and the a.out-era ones. A task that sets one can bypass what is
# interposed on it (e.g. a preloaded GPU-sharing limiter) or load code from anywhere, so:
# the server's own values never reach a task, a user's value reaches it only where the admin
# allowed the name (``Launch.allowed_env``), and the API refuses them at submission otherwise.
# Left out of glibc's list on purpose: ``TMPDIR`` and ``TZDIR``, which only choose where
# ordinary library functions look for data, load no code, and are commonly set by jobs.
LOADER_VARIABLES: frozenset[str] = frozenset(
    {
        # glibc unsecvars.h
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LD_AUDIT",
        "LD_BIND_NOT",
        "LD_DEBUG",
        "LD_DEBUG_OUTPUT",
        "LD_DYNAMIC_WEAK",
        "LD_HWCAP_MASK",
        "LD_LIBRARY_PATH",
        "LD_ORIGIN_PATH",
        "LD_PRELOAD",
        "LD_PROFILE",
        "LD_SHOW_AUXV",
        "LD_USE_LOAD_BIAS",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        # other variables the loader reads (ld.so(8)), current and historical
        "LD_ASSUME_KERNEL",
        "LD_BIND_NOW",
        "LD_LIBRARY_VERSION",
        "LD_POINTER_GUARD",
        "LD_PREFER_MAP_32BIT_EXEC",
        "LD_PROFILE_OUTPUT",
        "LD_TRACE_LOADED_OBJECTS",
        "LD_TRACE_PRELINKING",
        "LD_VERBOSE",
        "LD_WARN",
        "LD_AOUT_LIBRARY_PATH",
        "LD_AOUT_PRELOAD",
    }
)

# Identity variables replaced for a task that runs under another user (``Launch.run_as``):
# the server's own values would name the server's user and home.
IDENTITY_VARIABLES: tuple[str, ...] = ("HOME", "USER", "LOGNAME")

# Defaults for the per-stream log cap and the free-space floor below which output is dropped.
DEFAULT_LOG_MAX_BYTES = 64 << 20
DEFAULT_LOG_MIN_FREE_BYTES = 1 << 30


def loader_variables(names: Iterable[str]) -> list[str]:
    """Which of ``names`` are loader variables (:data:`LOADER_VARIABLES`), sorted, no repeats.

    For the API: a job that sets one is refused unless the admin allowed the name.
    """
    return sorted({name for name in names if name in LOADER_VARIABLES})


def signal_number(name: str) -> int:
    """The number of the signal called ``name`` (e.g. ``"SIGTERM"``); ValueError if unknown."""
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise ValueError(f"stop_signal: unknown signal name {name!r}") from None


def signal_name(number: int) -> str:
    """A readable name for signal ``number`` (``"SIGKILL"``), or ``"signal N"`` if unknown."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def rendezvous_port(job_id: str, attempt: int) -> int:
    """The port rank 0 of a gang attempt listens on: a stable function of the attempt, so a
    task relaunched after a control-plane restart is told the same one, and two attempts of
    one job differ. The Slurm convention (``MASTER_PORT = 10000 + job id mod 20000``) made
    stable for any job id; like it, it can meet a port another program holds."""
    digest = hashlib.sha256(f"{job_id}\0{attempt}".encode("utf-8", "surrogatepass")).digest()
    lo, hi = RENDEZVOUS_PORTS
    return lo + int.from_bytes(digest[:4], "big") % (hi - lo)


def _finite_non_negative(field: str, value: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{field}: must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: must be a finite number >= 0, got {value!r}")


def _no_nul(field: str, value: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{field}: must be a string, got {value!r}")
    if "\0" in value:
        raise ValueError(f"{field}: must not contain a NUL character")


@dataclass(frozen=True, slots=True)
class Launch:
    """One task of one job attempt, as the backend should start it.

    ``command`` is always an argv: a single element containing spaces is run as one program
    name, never split by a shell. Construction validates the values and raises ``ValueError``
    naming the offending field, so a bad launch fails where it is built.

    ``run_as`` is the (uid, gid) the command runs as (None: the server's own user); uid 0 is
    refused, so a task never becomes root this way. ``log_max_bytes`` caps each of the
    task's two log files (past it the file is rotated to ``<name>.1``, so at most twice that
    is kept per stream); while the filesystem of the logs has less than
    ``log_min_free_bytes`` free, output is dropped (and counted) instead of written.
    ``allowed_env`` names the loader variables (:data:`LOADER_VARIABLES`) the user's ``env``
    may set; others are dropped from the task's environment. ``elastic`` is, for a task of
    an elastic job, ``(world_size, rank, generation)``: what its elastic file says when it
    starts (see :class:`Elastic`). ``rendezvous`` is, for a task of a job of more than one
    task, ``(world_size, rank, local_world_size, local_rank, master_addr, master_port)``:
    the gang's size, the task's rank in it, the tasks on its node and its rank among them,
    and where rank 0 listens (see :func:`task_environment`). ``node`` names the node the
    scheduler placed the task on (empty: the backend's only one); a backend that runs on many
    nodes must run it there, one that runs on one machine (the local backend) ignores it.
    ``cpu_milli`` and ``memory_mib`` are what the placement holds of the node's CPU and
    memory for the task: a backend whose engine keeps its own accounting (Slurm) asks it for
    as much.
    """

    job_id: str
    attempt: int
    task: int
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    gpus: tuple[int, ...] = ()
    gpu_milli: int = 0
    gpu_memory_mib: int = 0
    checkpoint_dir: str | None = None
    max_runtime_s: float | None = None
    stop_signal: str = "SIGTERM"
    grace_s: float = 30.0
    run_as: tuple[int, int] | None = None
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    log_min_free_bytes: int = DEFAULT_LOG_MIN_FREE_BYTES
    allowed_env: frozenset[str] = frozenset()
    elastic: tuple[int, int, int] | None = None
    rendezvous: tuple[int, int, int, int, str, int] | None = None
    node: str = ""
    cpu_milli: int = 0
    memory_mib: int = 0

    def __post_init__(self) -> None:
        validate_launch(self)

    @property
    def fractional(self) -> bool:
        """True when the task holds a share of one GPU rather than whole GPUs."""
        return 0 < self.gpu_milli < 1000


# (uid_t)-1: to setreuid/setregid it means "leave unchanged", so as a run_as id it would
# keep the task as the server's user.
_NO_ID = 2**32 - 1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_launch(spec: Launch) -> None:
    """Raise ``ValueError`` naming the field if ``spec`` cannot be run as given."""
    _no_nul("job_id", spec.job_id)
    if not spec.job_id:
        raise ValueError("job_id: must not be empty")
    if not _is_int(spec.attempt) or spec.attempt < 1:
        raise ValueError(f"attempt: must be an integer >= 1, got {spec.attempt!r}")
    if not _is_int(spec.task) or spec.task < 0:
        raise ValueError(f"task: must be an integer >= 0, got {spec.task!r}")
    if not isinstance(spec.command, tuple) or not spec.command:
        raise ValueError("command: must be a non-empty tuple of strings")
    for arg in spec.command:
        _no_nul("command", arg)
    if not spec.command[0]:
        raise ValueError("command: the program name must not be empty")
    if not isinstance(spec.env, tuple):
        raise ValueError("env: must be a tuple of (name, value) pairs")
    for pair in spec.env:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"env: expected (name, value) pairs, got {pair!r}")
        name, value = pair
        _no_nul("env", name)
        _no_nul("env", value)
        if not name or "=" in name:
            raise ValueError(f"env: invalid variable name {name!r}")
    if spec.cwd is not None:
        _no_nul("cwd", spec.cwd)
        if not spec.cwd:
            raise ValueError("cwd: must not be empty (use None for the default)")
    if not isinstance(spec.gpus, tuple):
        raise ValueError("gpus: must be a tuple of GPU indices")
    for gpu in spec.gpus:
        if not _is_int(gpu) or gpu < 0:
            raise ValueError(f"gpus: indices must be integers >= 0, got {gpu!r}")
    if len(set(spec.gpus)) != len(spec.gpus):
        raise ValueError(f"gpus: duplicate GPU index in {spec.gpus!r}")
    if not _is_int(spec.gpu_milli) or not 0 <= spec.gpu_milli < 1000:
        raise ValueError(f"gpu_milli: must be an integer in [0, 1000), got {spec.gpu_milli!r}")
    if spec.gpu_milli > 0 and len(spec.gpus) != 1:
        raise ValueError(
            f"gpus: a fractional task (gpu_milli={spec.gpu_milli}) needs exactly one GPU, "
            f"got {spec.gpus!r}"
        )
    if not _is_int(spec.gpu_memory_mib) or spec.gpu_memory_mib < 0:
        raise ValueError(f"gpu_memory_mib: must be an integer >= 0, got {spec.gpu_memory_mib!r}")
    if spec.checkpoint_dir is not None:
        _no_nul("checkpoint_dir", spec.checkpoint_dir)
        if not spec.checkpoint_dir:
            raise ValueError("checkpoint_dir: must not be empty (use None for none)")
    if spec.max_runtime_s is not None:
        _finite_non_negative("max_runtime_s", spec.max_runtime_s)
        if spec.max_runtime_s == 0:
            raise ValueError("max_runtime_s: must be > 0 (use None for no limit)")
    if not isinstance(spec.stop_signal, str):
        raise ValueError(f"stop_signal: must be a signal name, got {spec.stop_signal!r}")
    signal_number(spec.stop_signal)
    _finite_non_negative("grace_s", spec.grace_s)
    if spec.run_as is not None:
        if (
            not isinstance(spec.run_as, tuple)
            or len(spec.run_as) != 2
            or not all(_is_int(n) and 0 <= n < _NO_ID for n in spec.run_as)
        ):
            raise ValueError(
                f"run_as: must be a (uid, gid) pair of integers in [0, {_NO_ID}), "
                f"got {spec.run_as!r}"
            )
        if spec.run_as[0] == 0:
            raise ValueError("run_as: uid 0 (root) is refused: a task never runs as root")
    if not _is_int(spec.log_max_bytes) or spec.log_max_bytes <= 0:
        raise ValueError(f"log_max_bytes: must be an integer > 0, got {spec.log_max_bytes!r}")
    if not _is_int(spec.log_min_free_bytes) or spec.log_min_free_bytes < 0:
        raise ValueError(
            f"log_min_free_bytes: must be an integer >= 0, got {spec.log_min_free_bytes!r}"
        )
    if not isinstance(spec.allowed_env, frozenset):
        raise ValueError(f"allowed_env: must be a frozenset of names, got {spec.allowed_env!r}")
    for name in spec.allowed_env:
        _no_nul("allowed_env", name)
        if not name or "=" in name:
            raise ValueError(f"allowed_env: invalid variable name {name!r}")
    if spec.rendezvous is not None:
        _validate_rendezvous(spec.rendezvous)
    _no_nul("node", spec.node)
    for name in ("cpu_milli", "memory_mib"):
        value = getattr(spec, name)
        if not _is_int(value) or value < 0:
            raise ValueError(f"{name}: must be an integer >= 0, got {value!r}")
    if spec.elastic is not None:
        Elastic.of(spec.elastic)
        if signal_number(spec.stop_signal) == RESIZE_SIGNAL:
            raise ValueError(
                f"stop_signal: {spec.stop_signal} tells an elastic task it was resized"
            )


def _validate_rendezvous(value: object) -> None:
    if not isinstance(value, tuple) or len(value) != 6:
        raise ValueError(
            "rendezvous: (world_size, rank, local_world_size, local_rank, master_addr, "
            f"master_port), got {value!r}"
        )
    world, rank, local_world, local_rank, addr, port = value
    if not all(map(_is_int, (world, rank, local_world, local_rank, port))):
        raise ValueError(f"rendezvous: sizes, ranks and the port must be integers, got {value!r}")
    if not (world >= 1 and 0 <= rank < world and 1 <= local_world <= world):
        raise ValueError(f"rendezvous: need 0 <= rank < world_size, got {value!r}")
    if not 0 <= local_rank < local_world:
        raise ValueError(f"rendezvous: need 0 <= local_rank < local_world_size, got {value!r}")
    _no_nul("rendezvous", addr)
    if not addr or any(c.isspace() for c in addr):
        raise ValueError(f"rendezvous: master_addr must be a host name or address, got {addr!r}")
    if not 1 <= port <= 65535:
        raise ValueError(f"rendezvous: master_port must be in 1..65535, got {port}")


@dataclass(frozen=True, slots=True)
class Elastic:
    """What a task of an elastic job is told in its elastic file (``SUANLI_ELASTIC_FILE``):
    how many tasks its job runs on now, its rank among them (0-based) and the generation of
    the job's layout (0 at the attempt's start, one more with each resize)."""

    world_size: int
    rank: int
    generation: int

    @classmethod
    def of(cls, value: tuple[int, int, int]) -> Elastic:
        if not isinstance(value, tuple) or len(value) != 3 or not all(map(_is_int, value)):
            raise ValueError(f"elastic: (world_size, rank, generation) integers, got {value!r}")
        world, rank, gen = value
        if not (world >= 1 and 0 <= rank < world and gen >= 0):
            raise ValueError(
                f"elastic: need world_size >= 1, 0 <= rank < world_size and generation >= 0, "
                f"got {value!r}"
            )
        return cls(world, rank, gen)

    def to_json(self) -> dict[str, int]:
        return {"world_size": self.world_size, "rank": self.rank, "generation": self.generation}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Elastic | None:
        """The file's content, or None if it is not one (missing, or written by hand)."""
        if not isinstance(d, Mapping):
            return None
        try:
            return cls.of((d["world_size"], d["rank"], d["generation"]))
        except (KeyError, ValueError):
            return None


def task_environment(spec: Launch) -> dict[str, str]:
    """The variables suanli sets for a task, on top of the user's ``spec.env``.

    ``CUDA_VISIBLE_DEVICES`` is always set (empty when the task has no GPU, so it sees none).
    A task of a gang (``spec.rendezvous``) gets ``WORLD_SIZE``, ``RANK``,
    ``LOCAL_WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``, the variables
    PyTorch's ``env://`` initialisation reads, so that ``torch.distributed`` needs no
    launcher of its own.
    A fractional task also gets the CUDA MPS limits: the thread percentage (its share, rounded
    up, at least 1) and a pinned memory limit on device 0 (device 0 because
    ``CUDA_VISIBLE_DEVICES`` renumbers the one visible GPU).
    """
    validate_launch(spec)
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in spec.gpus),
        "SUANLI_JOB_ID": spec.job_id,
        "SUANLI_ATTEMPT": str(spec.attempt),
        "SUANLI_TASK_INDEX": str(spec.task),
    }
    if spec.fractional:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(spec.gpu_milli / 10)))
        env["SUANLI_GPU_MILLI"] = str(spec.gpu_milli)
        if spec.gpu_memory_mib > 0:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={spec.gpu_memory_mib}M"
    if spec.gpu_memory_mib > 0:
        env["SUANLI_GPU_MEMORY_MIB"] = str(spec.gpu_memory_mib)
    if spec.checkpoint_dir is not None:
        env["SUANLI_CHECKPOINT_DIR"] = spec.checkpoint_dir
    if spec.elastic is not None:
        env["SUANLI_WORLD_SIZE"] = str(spec.elastic[0])
        env["SUANLI_RANK"] = str(spec.elastic[1])
    if spec.rendezvous is not None:
        world, rank, local_world, local_rank, addr, port = spec.rendezvous
        env.update(
            WORLD_SIZE=str(world),
            RANK=str(rank),
            LOCAL_WORLD_SIZE=str(local_world),
            LOCAL_RANK=str(local_rank),
            MASTER_ADDR=addr,
            MASTER_PORT=str(port),
        )
    return env


def merged_environment(spec: Launch, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (minus suanli's and the loader's variables) + the user's env + suanli's.

    suanli's variables (:func:`task_environment`) win over the user's. Names suanli reserves
    but does not set for this task (e.g. ``SUANLI_CHECKPOINT_DIR`` with no checkpoint dir) are
    dropped from ``base`` so the caller's own values do not leak into the task; the user may
    still set them. Loader variables (:data:`LOADER_VARIABLES`) are always dropped from
    ``base``, and from the user's env unless named in ``spec.allowed_env``: the backend
    enforces this even where a caller forgot to check at submission.
    """
    env = {
        k: v
        for k, v in (base or {}).items()
        if k not in SUANLI_VARIABLES and k not in LOADER_VARIABLES
    }
    env.update((k, v) for k, v in spec.env if k not in LOADER_VARIABLES or k in spec.allowed_env)
    env.update(task_environment(spec))
    return env


_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def job_dir_name(job_id: str) -> str:
    """``job_id`` as one safe path component: no ``/``, never ``.`` or ``..``, not too long.

    Characters outside ``[A-Za-z0-9._-]`` become ``%XX`` (UTF-8 bytes), so distinct ids get
    distinct names; ``.`` and ``..`` are escaped wholly; names over 200 bytes are cut and
    suffixed with a hash of the id.
    """
    if not job_id:
        raise ValueError("job_id: must not be empty")
    name = "".join(
        ch if ch in _SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in job_id
    )
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    if len(name) > 200:
        digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{name[:150]}~{digest}"
    return name


@dataclass(frozen=True, slots=True)
class Handle:
    """Everything needed to find a task again after a control-plane restart.

    All values are plain JSON types; store :meth:`to_json` and rebuild with :meth:`from_json`.
    ``pid`` is the supervisor (shim) process, which leads the task's process group;
    ``start_ticks`` is its start time in clock ticks since boot, which tells a live task from
    an unrelated process that was later given the same pid.
    """

    job_id: str
    attempt: int
    task: int
    pid: int
    start_ticks: int
    run_dir: str

    @property
    def key(self) -> tuple[str, int, int]:
        """(job_id, attempt, task): unique per launched task."""
        return (self.job_id, self.attempt, self.task)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "task": self.task,
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "run_dir": self.run_dir,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Handle:
        try:
            job_id, run_dir = d["job_id"], d["run_dir"]
            numbers = [d["attempt"], d["task"], d["pid"], d["start_ticks"]]
        except KeyError as exc:
            raise ValueError(f"handle: missing field {exc.args[0]!r}") from None
        if not isinstance(job_id, str) or not isinstance(run_dir, str):
            raise ValueError("handle: job_id and run_dir must be strings")
        for name, value in zip(("attempt", "task", "pid", "start_ticks"), numbers, strict=True):
            if not _is_int(value):
                raise ValueError(f"handle: {name} must be an integer, got {value!r}")
        attempt, task, pid, start_ticks = numbers
        return cls(job_id, attempt, task, pid, start_ticks, run_dir)


class Outcome(StrEnum):
    """How a task ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    LOST = "lost"


STOP_OUTCOMES = frozenset({Outcome.CANCELLED, Outcome.PREEMPTED})


class LaunchLost(RuntimeError):
    """Raised by ``launch`` when the task cannot be started for a reason that is not the
    job's: the attempt is lost and requeued."""


class NodeGone(LaunchLost):
    """The node the task was placed on has left the backend's cluster."""


class EngineUnreachable(LaunchLost):
    """The engine the backend drives (a Ray cluster, a Slurm controller) did not answer in
    time. A backend that has one says so in ``available()`` until it answers again."""


@dataclass(frozen=True, slots=True)
class Exit:
    """The end of one task: outcome, exit status, when, and a one-line human explanation.

    ``exit_code`` is None when the command was killed by a signal (then ``signal`` is set) or
    its end is unknown (LOST). ``finished_at`` is epoch seconds.
    """

    handle: Handle
    outcome: Outcome
    exit_code: int | None
    signal: int | None
    finished_at: float
    detail: str


@runtime_checkable
class Backend(Protocol):
    """What the control plane needs from something that runs tasks.

    ``poll`` reports each ended task exactly once. ``stop`` is non-blocking: it asks the task
    to stop (its ``stop_signal``) and makes sure it is killed ``grace_s`` later; the Exit comes
    through ``poll`` with the requested outcome. ``adopt`` re-attaches tasks after a restart.
    Optional: ``prepare(job: suanli.backends.prepare.Prepare) -> str`` readies a job expected
    to start soon (pre-staging: its checkpoint read ahead where it will run) and says what it
    did, for the job's history.
    """

    def launch(self, spec: Launch) -> Handle: ...

    def poll(self) -> list[Exit]: ...

    def stop(self, handle: Handle, outcome: Outcome) -> None: ...

    def adopt(self, handles: Iterable[Handle]) -> list[Exit]: ...

    def running(self) -> list[Handle]: ...

    def log_paths(self, handle: Handle) -> tuple[Path, Path]: ...

    def find(self, job_id: str, attempt: int, task: int) -> Handle | None:
        """The handle of a task launched earlier, even by a control plane that stopped
        before it could record it (None: never launched)."""
        ...

    def release(self, job_id: str, attempt: int) -> None:
        """Every task of the attempt has ended and its end is recorded: free what the backend
        kept for it (its scratch directories). Its logs stay."""
        ...

    def resize(self, handle: Handle, told: Elastic) -> None:
        """Tell a running task of an elastic job its new layout: rewrite its elastic file
        atomically (a reader sees the old one or the new one), then send it
        :data:`RESIZE_SIGNAL`. A task that has ended is left alone."""
        ...

    def elastic(self, handle: Handle) -> Elastic | None:
        """What the task's elastic file says now (None: it has none)."""
        ...

    def node_address(self, node: str) -> str:
        """An address on which the tasks of a gang reach a task on ``node`` (its
        ``MASTER_ADDR`` when rank 0 runs there)."""
        ...
