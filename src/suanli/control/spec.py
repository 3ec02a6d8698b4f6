"""A live job's spec: what a user submits (YAML, JSON, or the API's request body).

::

    name: train-resnet            # optional, for people
    command: [python, train.py, --epochs, "10"]
    env: {WANDB_MODE: offline}    # optional
    workdir: /home/ana/resnet     # absolute; default: where `suanli submit` ran, else scratch
    tasks: 2                      # identical tasks, started together (a gang); default 1
    min_workers: 1                # elastic: may run on 1..4 tasks (a worker is one task),
    max_workers: 4                # ``tasks`` being the size its work is stated at
    speedup: power:0.938          # elastic: its scaling curve (``suanli.core.elastic``)
    gpus: 1                       # per task: whole GPUs (1, 2, 8) or a share of one (0.25)
    gpu_memory: 20G               # per task: for a share, its GPU memory limit
    cpu: 4                        # cores per task (default 1)
    memory: 16G                   # per task (default 4G)
    gpu_models: [H100]            # acceptable models (default any)
    tenant: vision                # default: the submitting token's tenant
    queue: vision                 # default: the tenant's name
    priority_class: normal        # online, high, normal or spot (default normal)
    max_runtime: 3600             # seconds; the task is stopped after it (default none)
    checkpoint_dir: /ckpt/resnet  # handed to the job as SUANLI_CHECKPOINT_DIR
    checkpoint_interval: 600      # seconds between checkpoints, if it makes them
    stop_signal: SIGTERM          # sent on preemption or cancel, before the kill
    grace: 30                     # seconds between that signal and the kill
    labels: [interactive]         # free-form labels (``interactive`` and ``debugging``
                                  # protect a job from idle reclaim; replicas carry
                                  # ``service=<name>``)
    routing: {member: us-east, router: suanli, why: ..., scores: [...], excluded: [...]}
                                  # set by a federation front (admin tokens only): where
                                  # it sent the job and why; ``suanli show`` prints it

Sizes take a binary unit (``512M``, ``20G``, ``1T``) or a number of MiB. Unknown keys are
errors, and every error names the field (pydantic's location) and why. Every number is
bounded here (a boolean is not a number), so that the core only ever sees values it can hold;
whether the job fits the cluster is checked against the inventory at submission.
"""

from __future__ import annotations

import math
import os
import signal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from suanli.core.elastic import DEFAULT_SPEEDUP, ElasticRange, parse_speedup
from suanli.core.model import (
    DEFAULT_PRIORITY_CLASSES,
    MAX_QUANTITY,
    MILLI,
    Job,
    SpecError,
    TaskRequest,
)

MAX_TASKS = 4096
MAX_COMMAND_ARGS = 4096
MAX_NAME = 200
MAX_PATH = 4096
MAX_ENV = 1024
MAX_MODELS = 64
MAX_LABELS = 32
_LABEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:=@-]{0,127}$"
MAX_SIZE_MIB = MAX_QUANTITY
"""The largest size a spec may give (MiB): the core's bound (an exbibyte)."""
_MODEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"
_NUMBERS = ("tasks", "gang_min", "min_workers", "max_workers", "gpus", "cpu", "memory", "gpu_memory", "max_runtime",
            "estimate", "checkpoint_interval", "grace")  # fmt: skip
MAX_SECONDS = 10 * 366 * 86_400
"""The longest time a spec may give (ten years): a runtime, an estimate, an interval."""
RESIZE_SIGNAL = "SIGUSR1"
"""What an elastic job's surviving tasks are sent after a resize (docs/serve.md, "Elastic
jobs"): never a job's stop signal as well."""
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$"
_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def size_mib(value: Any, field: str) -> int:
    """A size (``20G``, ``512M``, ``1T``, ``64K``, or a number of MiB) in whole MiB."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: a size like 20G or a number of MiB, got {value!r}")
    if isinstance(value, int | float):
        mib = float(value)
    elif isinstance(value, str):
        text = value.strip().upper().removesuffix("IB").removesuffix("B")
        unit = _UNITS.get(text[-1:]) if text else None
        number = text[:-1] if unit is not None else text
        try:
            mib = float(number) * (unit if unit is not None else 1)
        except ValueError:
            raise ValueError(
                f"{field}: a size like 20G or a number of MiB, got {value!r}"
            ) from None
    else:
        raise ValueError(f"{field}: a size like 20G or a number of MiB, got {value!r}")
    if not math.isfinite(mib) or mib < 0:
        raise ValueError(f"{field}: must be a finite size >= 0, got {value!r}")
    if mib > MAX_SIZE_MIB:
        raise ValueError(f"{field}: must be at most {MAX_SIZE_MIB} MiB (1E), got {value!r}")
    return math.ceil(mib)


def _utf8(text: str) -> bool:
    """Whether ``text`` is valid Unicode the database can store (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def absolute_path(value: str | None, field: str) -> str | None:
    """A directory path as a spec may give it: absolute, normalised (``..`` resolved
    lexically), no NUL, at most ``MAX_PATH`` characters."""
    if value is None:
        return None
    if not value or "\0" in value or len(value) > MAX_PATH:
        raise ValueError(f"{field}: an absolute path of 1..{MAX_PATH} characters without NUL")
    if not value.startswith("/"):
        raise ValueError(f"{field}: must be an absolute path, got {value!r}")
    return os.path.normpath(value)


Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]

MAX_ROUTE_ROWS = 64
_Text = Annotated[str, Field(max_length=1000)]
_Short = Annotated[str, Field(min_length=1, max_length=200)]
_Figure = Annotated[float, Field(allow_inf_nan=False)]


class RouteScore(BaseModel):
    """One candidate of a routing decision: its member (``member`` or ``member/model``),
    its score and the parts it is made of."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: _Short
    total: _Figure
    parts: Annotated[dict[Annotated[str, Field(max_length=40)], _Figure], Field(max_length=16)] = (
        Field(default_factory=dict)
    )


class RouteExcluded(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    member: _Short
    why: _Text


class RoutingNote(BaseModel):
    """Where a federation sent the job and why (``suanli.core.routing.Route.as_dict``): kept
    with the spec and shown by ``suanli show``. Only a federation front (an admin token)
    may attach one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: _Short | None
    router: _Short
    why: _Text
    scores: Annotated[list[RouteScore], Field(max_length=MAX_ROUTE_ROWS)] = Field(
        default_factory=list
    )
    excluded: Annotated[list[RouteExcluded], Field(max_length=MAX_ROUTE_ROWS)] = Field(
        default_factory=list
    )
    wait_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """The wait the front predicted at this member when it sent the job (seconds)."""
    asks: Annotated[dict[Annotated[str, Field(max_length=40)], Any], Field(max_length=8)] | None = (
        None
    )
    """What the job asked of the federation (its spec's ``federation`` block): a front that
    routes it again reads it here."""
    rerouted_from: _Short | None = None
    """The member a front took the job back from, having waited there far longer than
    predicted (a job is re-routed at most once)."""


class JobSpec(BaseModel):
    """A job as submitted (see the module docstring for the fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    name: Annotated[str, Field(max_length=MAX_NAME)] = ""
    command: Annotated[list[str], Field(min_length=1, max_length=MAX_COMMAND_ARGS)]
    env: Annotated[dict[str, str], Field(max_length=MAX_ENV)] = Field(default_factory=dict)
    workdir: str | None = None
    tasks: Annotated[int, Field(ge=1, le=MAX_TASKS)] = 1
    gang_min: Annotated[int, Field(ge=0, le=MAX_TASKS)] = 0
    min_workers: Annotated[int, Field(ge=1, le=MAX_TASKS)] | None = None
    """Elastic: the fewest tasks it runs on (default ``tasks``; see ``elastic``)."""
    max_workers: Annotated[int, Field(ge=1, le=MAX_TASKS)] | None = None
    """Elastic: the most tasks it runs on (default ``tasks``)."""
    speedup: Annotated[str, Field(max_length=1000)] = DEFAULT_SPEEDUP
    """Elastic: how its throughput grows with workers (``suanli.core.elastic``)."""
    gpus: Annotated[float, Field(ge=0, le=64, allow_inf_nan=False)] = 0
    gpu_memory: int | float | str = 0
    cpu: Annotated[float, Field(ge=0.001, le=4096, allow_inf_nan=False)] = 1
    """Cores per task, at least a thousandth: a task always uses some CPU, and a job of
    tasks that ask none would have no bound on how many processes it starts."""
    memory: int | float | str = "4G"
    gpu_models: Annotated[
        list[Annotated[str, Field(pattern=_MODEL_PATTERN)]], Field(max_length=MAX_MODELS)
    ] = Field(default_factory=list)
    tenant: Annotated[str, Field(pattern=_NAME_PATTERN)] | None = None
    queue: Annotated[str, Field(pattern=_NAME_PATTERN)] | None = None
    priority_class: str = "normal"
    max_runtime: Seconds | None = None
    estimate: Seconds | None = None
    checkpoint_dir: str | None = None
    checkpoint_interval: Seconds | None = None
    stop_signal: str = "SIGTERM"
    grace: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 30
    labels: Annotated[
        list[Annotated[str, Field(pattern=_LABEL_PATTERN)]], Field(max_length=MAX_LABELS)
    ] = Field(default_factory=list)
    routing: RoutingNote | None = None
    """The federation's routing decision for this job (admins only: a federation front)."""

    @field_validator(*_NUMBERS, mode="before")
    @classmethod
    def _not_boolean(cls, v: Any, info: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError(f"a number, not a boolean (got {str(v).lower()})")
        return v

    @field_validator("workdir", "checkpoint_dir")
    @classmethod
    def _path(cls, v: str | None, info: Any) -> str | None:
        return absolute_path(v, info.field_name)

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        if not v[0]:
            raise ValueError("the program name (first element) must not be empty")
        if "\0" in "".join(v):
            raise ValueError("arguments must not contain NUL characters")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not name or "=" in name or "\0" in name or not _utf8(name):
                raise ValueError(f"invalid environment variable name {name!r}")
            if "\0" in value:
                raise ValueError(f"the value of {name!r} must not contain NUL characters")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: float) -> float:
        if v > 1 and v != int(v):
            raise ValueError(f"more than one GPU must be a whole number, got {v}")
        if 0 < v < 1 and round(v * MILLI) < 1:
            raise ValueError(f"a GPU share must be at least 0.001, got {v}")
        return v

    @field_validator("gpu_memory", "memory")
    @classmethod
    def _size(cls, v: Any, info: Any) -> int:
        return size_mib(v, info.field_name)

    @field_validator("priority_class")
    @classmethod
    def _class(cls, v: str) -> str:
        if v not in DEFAULT_PRIORITY_CLASSES:
            raise ValueError(
                f"unknown class {v!r}: choose from {', '.join(DEFAULT_PRIORITY_CLASSES)}"
            )
        return v

    @field_validator("stop_signal")
    @classmethod
    def _signal(cls, v: str, info: Any) -> str:
        name = v if v.startswith("SIG") else f"SIG{v}"
        if name not in signal.Signals.__members__:
            raise ValueError(f"unknown signal {v!r}")
        tasks = info.data.get("tasks") or 1
        least, most = info.data.get("min_workers"), info.data.get("max_workers")
        elastic = (most if most is not None else tasks) > (least if least is not None else tasks)
        if elastic and name == RESIZE_SIGNAL:
            raise ValueError(
                f"{name} tells an elastic job's tasks that they were resized: choose another "
                "stop signal"
            )
        return name

    @field_validator("gang_min")
    @classmethod
    def _gang(cls, v: int, info: Any) -> int:
        tasks = info.data.get("tasks")
        if tasks is not None and v > tasks:
            raise ValueError(f"gang_min ({v}) must be at most tasks ({tasks})")
        return v

    @field_validator("min_workers")
    @classmethod
    def _min_workers(cls, v: int | None, info: Any) -> int | None:
        tasks, gang = info.data.get("tasks"), info.data.get("gang_min")
        if v is None or tasks is None:
            return v
        if v > tasks:
            raise ValueError(f"min_workers ({v}) must be at most tasks ({tasks})")
        if gang and gang != v:
            raise ValueError(
                f"min_workers ({v}) and gang_min ({gang}) disagree: an elastic job starts "
                "with min_workers tasks at least; give one of them"
            )
        return v

    @field_validator("max_workers")
    @classmethod
    def _max_workers(cls, v: int | None, info: Any) -> int | None:
        tasks, least = info.data.get("tasks"), info.data.get("min_workers")
        if v is None or tasks is None:
            return v
        if least is not None and v < least:
            raise ValueError(f"max_workers ({v}) must be at least min_workers ({least})")
        if v < tasks:
            raise ValueError(f"max_workers ({v}) must be at least tasks ({tasks})")
        return v

    @field_validator("speedup")
    @classmethod
    def _speedup(cls, v: str) -> str:
        try:
            parse_speedup(v)
        except SpecError as e:
            raise ValueError(str(e)) from None
        return v

    @property
    def workers(self) -> ElasticRange:
        """The tasks it may run on, and the size its work is stated at (``tasks``)."""
        t = self.tasks
        return ElasticRange(
            self.min_workers if self.min_workers is not None else t,
            self.max_workers if self.max_workers is not None else t,
            t,
        )

    @property
    def elastic(self) -> bool:
        """Whether it may be resized while it runs: ``max_workers > min_workers``."""
        most, least = self.max_workers, self.min_workers  # cheap: the loop asks every pass
        return (most or self.tasks) > (least or self.tasks)

    @property
    def memory_mib(self) -> int:
        assert isinstance(self.memory, int)
        return self.memory

    @property
    def gpu_memory_mib(self) -> int:
        assert isinstance(self.gpu_memory, int)
        return self.gpu_memory

    def task_request(self) -> TaskRequest:
        """The core's request for one task."""
        if 0 < self.gpus < 1:
            whole, milli = 1, round(self.gpus * MILLI)
        else:
            whole, milli = int(self.gpus), MILLI
        try:
            return TaskRequest(
                gpus=whole,
                gpu_milli=milli if whole else MILLI,
                gpu_memory_mib=self.gpu_memory_mib,
                cpu_milli=round(self.cpu * MILLI),
                memory_mib=self.memory_mib,
                gpu_models=frozenset(self.gpu_models),
            )
        except SpecError as e:
            raise ValueError(str(e)) from None

    def job(
        self,
        job_id: str,
        submit: float,
        tenant: str,
        queue: str,
        priority_class: str | None = None,
        user: str = "",
    ) -> Job:
        """The core's job for this spec: submitted at ``submit`` (seconds on the control
        plane's clock) by ``user`` (the token's) for ``tenant`` in ``queue``, in
        ``priority_class`` if given (a budget may have demoted it) else the spec's. Its ``runtime`` is unknown to a live
        scheduler; the maximum runtime (else infinity) stands in, and ``estimate`` is the
        user's, for backfill."""
        return Job(
            id=job_id,
            submit=submit,
            runtime=self.max_runtime if self.max_runtime is not None else math.inf,
            task=self.task_request(),
            tasks=self.tasks,
            # An elastic job starts on as few as min_workers tasks when no more are free (the
            # core's gang minimum); it grows and shrinks while it runs (control.resize).
            gang_min=self.min_workers if self.min_workers is not None else self.gang_min,
            tenant=tenant,
            queue=queue,
            priority_class=priority_class or self.priority_class,
            estimate=self.estimate if self.estimate is not None else self.max_runtime,
            checkpoint_interval=self.checkpoint_interval,
            user=user,
        )
