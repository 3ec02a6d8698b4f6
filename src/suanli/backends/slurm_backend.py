"""Run tasks on a Slurm cluster, each on the node and GPUs suanli chose (docs/backends.md).

suanli stays the scheduler; Slurm executes. Per task, the control plane submits one batch
job (``sbatch``) pinned to the task's node (``--nodelist``, one node, one task) and holding
what suanli's placement holds there in Slurm's own accounting: its GPUs (``--gres=gpu:N``),
CPUs (``--cpus-per-task``, at least one) and memory (``--mem``, at least 1 MiB, since Slurm
gives a job that names none the whole node's). The batch script is a Python program
(:mod:`suanli.backends.slurm_task`) that runs the task under suanli's own supervisor (the
shim), tethered to itself, so the job's stop signal and grace, its maximum runtime, the log
caps and the exit record are the local backend's code, and the task lives exactly as long
as its Slurm job. One batch job per task, not one heterogeneous job per gang: suanli places
a gang's tasks together, on nodes it has already found free, so Slurm has nothing left to
co-schedule; separate jobs give each task its own state, end and accounting record.

**Slurm runs only what suanli placed.** The nodes suanli schedules are a partition it owns
(``--slurm-partition``, default ``suanli``); Slurm's scheduler must start every job there at
once or never, and nothing else may run there (docs/backends.md, "slurm.conf").

**GPU indices.** ``--gres=gpu:N`` asks Slurm for N GPUs of the node, never for GPU 3. The
mechanism: Slurm counts the GPUs (so its accounting and limits hold), and the task's
environment sets ``CUDA_VISIBLE_DEVICES`` to the indices suanli placed it on
(``task_environment``), whatever Slurm chose (recorded as ``slurm_gpus`` in the run
directory's ``slurm.json``). The partition's nodes must not confine jobs to Slurm's chosen
devices (``ConstrainDevices=no`` in cgroup.conf). A fractional task holds no GPU in Slurm
(Slurm's shards cannot be pinned to a GPU either); suanli alone accounts for shares.

**Identity.** A task of a tenant that maps to a uid (``--run-as``) is submitted with
``sbatch --uid --gid`` (the control plane runs as root), so that Slurm runs its whole job as
that user, as it does for a user's own ``sbatch``, and accounts it to that user.

**Finding a task again.** The job name is a function of the attempt,
``suanli/<instance>/<job>/<attempt>/<task>``: a launch is refused while a job of that name
is in Slurm's queue (``FileExistsError``), so a retried launch never makes two, and a
restarted control plane finds every task by name. What the control plane reads back lies on
the **shared path** (``--shared-dir``), which every node mounts at the same place: run
directories (``exit.json``, logs) and the requests to a running task (stop, resize), which
its batch step reads (see :mod:`suanli.backends.slurm_task`).

**Endings.** A task's end is its ``exit.json``. A job that left Slurm's queue without one
(its node failed: Slurm's ``NODE_FAIL``; or it was cancelled in Slurm) is a lost task,
requeued from its checkpoint; its node is kept out of the inventory until Slurm says it is
back (``SUSPECT_S``). A stop writes its outcome first, then wakes the batch step
(``scancel --batch --signal=USR2``: the batch step alone, never the task), which stops the
task with its stop signal and kills it after its grace; a job still there ``grace +``
:data:`BACKSTOP_S` later is cancelled outright (``scancel``). A job still pending in Slurm
is cancelled at once.

**Outages.** A Slurm command that fails with the controller unreachable, or that takes
longer than ``answer_s``, means ``slurmctld`` is down: ``available()`` says so until a probe
answers. Meanwhile ends are still read from the exit files, nothing is launched (the loop
asks ``available()`` first), stops still reach running tasks (their batch steps read the
request files), and no task is taken for lost before ``outage_timeout_s``. Then the running
ones are reported lost and remembered: if one is found still running when Slurm answers
again, it is cancelled, so an attempt never runs twice. On Slurm's return every task is
checked against its queue again: running jobs are kept, jobs gone without an exit record are
lost (and requeued).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from suanli.backends.base import (
    STOP_OUTCOMES,
    Elastic,
    EngineUnreachable,
    Exit,
    Handle,
    LaunchLost,
    NodeGone,
    Outcome,
    job_dir_name,
    signal_number,
)
from suanli.backends.endings import exit_from_record
from suanli.backends.local import _scratch_id
from suanli.backends.prepare import Prepare, agents_note
from suanli.backends.shared_runs import OutageClock, SharedRunDirs
from suanli.backends.shim import (
    EXIT_FILE,
    HANDLE_FILE,
    read_json,
    write_json_atomic,
)
from suanli.backends.slurm_task import control_paths, launch_to_json
from suanli.config.cluster import _known_model
from suanli.core.model import GpuModel, NodeSpec, SpecError

log = logging.getLogger("suanli.backends.slurm")

DEFAULT_PARTITION = "suanli"
ANSWER_S = 10.0
"""How long one Slurm command may take before the controller is taken for unreachable."""
DEFAULT_OUTAGE_TIMEOUT_S = 600.0
DEFAULT_PLACE_TIMEOUT_S = 300.0
"""How long a job may stay pending in Slurm (suanli found its node free) before its task is
counted lost: Slurm and suanli disagree about the node, and the job is placed again."""
BACKSTOP_S = 10.0
"""A stopped task whose job is still there its grace plus this long later is ``scancel``-ed."""
SUSPECT_S = 120.0
"""A node whose task was lost without an exit record is left out of the inventory this long,
or until Slurm says it is down: Slurm notices a dead ``slurmd`` only after its
``SlurmdTimeout``, and a job requeued meanwhile must not be placed there again."""
QUEUE_EVERY_S = 1.0
"""How often Slurm's queue is read (exit files are read at every poll)."""

ACTIVE = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
     "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"}
)  # fmt: skip
"""Slurm job states in which the job is not over."""
UP_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING", "PLANNED", "RESERVED"})
"""Slurm node states (``sinfo %T``, base state) in which suanli may place work there."""
UNREACHABLE = (
    "unable to contact slurm controller",
    "socket timed out",
    "communication connection failure",
    "zero bytes were transmitted",
    "connection refused",
    "slurm_persist_conn_open",
    "unable to establish controller machine",
)
"""Slurm client messages that mean the controller did not answer (not that it refused)."""


class SlurmError(RuntimeError):
    """A Slurm command refused what it was asked (its message says why)."""


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    address: str
    state: str
    spec: NodeSpec


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: str
    state: str
    node: str
    reason: str


def parse_gres(node: str, gres: str) -> tuple[int, str | None]:
    """(GPU count, GPU type) of a ``sinfo %G`` field such as ``gpu:h100:8(S:0-1)``; the
    type is None for ``gpu:8``. ``SpecError`` for a node with GPUs of two types."""
    count, kinds = 0, set()
    for item in gres.split(","):
        item = item.split("(", 1)[0].strip()
        parts = item.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        try:
            n = int(parts[-1])
        except ValueError:
            raise SpecError(f"Slurm node {node}: cannot read its GRES {gres!r}") from None
        count += n
        kinds.add(parts[1] if len(parts) > 2 else None)
    if len(kinds) > 1:
        raise SpecError(
            f"Slurm node {node}: GPUs of several types ({gres}); suanli takes one model a node"
        )
    return count, next(iter(kinds), None)


def node_specs(sinfo: str) -> list[SlurmNode]:
    """Nodes of ``sinfo -h -N -o '%N|%c|%m|%G|%T|%o|%f'`` (one per line), as suanli nodes.

    The GPU model is the GPU GRES type (a catalogue model where one matches); features
    become labels (``slurm.feature/<f>``). ``SpecError`` for a line that cannot be read or
    a node with GPUs and no type."""
    out: dict[str, SlurmNode] = {}
    for lineno, line in enumerate(sinfo.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 7:
            raise SpecError(f"sinfo line {lineno}: expected 7 fields, got {line!r}")
        name, cpus, memory, gres, state, address, features = (f.strip() for f in fields)
        try:
            cpu_count, memory_mb = int(cpus), int(memory)
        except ValueError:
            raise SpecError(f"sinfo line {lineno}: node {name}: CPUs {cpus!r}, memory "
                            f"{memory!r}") from None  # fmt: skip
        gpus, kind = parse_gres(name, gres)
        model: GpuModel | None = None
        if gpus:
            if kind is None:
                raise SpecError(
                    f"Slurm node {name}: {gpus} GPUs of no type (declare Gres=gpu:<model>:N "
                    f"and the type in gres.conf)"
                )
            model = _known_model(kind) or GpuModel(kind, 80 * 1024, 1.0)
        labels = tuple(
            sorted(
                (f"slurm.feature/{f}", "true") for f in features.split(",") if f and f != "(null)"
            )
        )
        spec = NodeSpec(name, gpus, model, cpu_count * 1000, memory_mb, labels=labels)
        out[name] = SlurmNode(name, address or name, state.upper(), spec)
    return list(out.values())


def node_up(state: str) -> bool:
    """True for a node Slurm would start work on now (``sinfo %T``: ``idle``, ``mixed``...;
    not ``down``, ``drained``, ``draining``, nor one with a flag: ``*`` not responding,
    ``~`` powered down, ``@`` pending reboot, ``$`` in a maintenance reservation...)."""
    s = state.upper()
    if any(flag in s for flag in "*~#!%$@^"):
        return False
    return s.rstrip("-+") in UP_STATES


def _tell(path: Path, value: dict[str, Any]) -> None:
    """Write a request for a task's batch step, which runs as the task's user and must read
    it (the attempt's directory is that user's alone)."""
    write_json_atomic(path, value)
    os.chmod(path, 0o644)


@dataclass(slots=True)
class _Task:
    handle: Handle
    name: str
    node: str
    launched_at: float  # monotonic
    running: bool = False
    stop_at: float | None = None  # monotonic time the stop was asked
    grace_s: float = 0.0
    killed: bool = False
    run_as: tuple[int, int] | None = None
    launched_here: bool = False  # (run_as is known: launched by this control plane)
    seen_active_at: float = 0.0  # epoch: the last queue read that showed the job not over


class SlurmBackend(SharedRunDirs, OutageClock):
    """The :class:`~suanli.backends.base.Backend` on the Slurm cluster of ``SLURM_CONF``.

    ``shared``: the path every node sees (run directories under ``shared/runs``).
    ``partition``: the partition suanli owns. ``python``: the interpreter that runs the
    batch step on the nodes, as the task's user (default: this one). If it is another, it is
    given this suanli's source directory to import from, which must then lie at the same
    path on the nodes (suanli's task side is standard-library only). ``env``: variables for
    the Slurm commands (``SLURM_CONF``) on top of this process's.
    """

    def __init__(
        self,
        shared: Path,
        *,
        partition: str = DEFAULT_PARTITION,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        place_timeout_s: float = DEFAULT_PLACE_TIMEOUT_S,
        answer_s: float = ANSWER_S,
        outage_timeout_s: float = DEFAULT_OUTAGE_TIMEOUT_S,
    ) -> None:
        conf = {**os.environ, **(env or {})}.get("SLURM_CONF")
        if conf and not Path(conf).is_file():
            raise SpecError(f"--backend slurm: SLURM_CONF names {conf}, which is not a file")
        self.shared = Path(shared).absolute()
        self.root = self.shared / "runs"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        # Tasks' batch steps run as their users: they need to pass through (never list).
        os.chmod(self.root, 0o711)
        self.instance = _scratch_id(self.root)
        self.prefix = f"suanli/{self.instance}/"
        self.partition = partition
        self.python = python
        self.source = None if python == sys.executable else str(Path(__file__).parents[2])
        self.env = {**os.environ, **(env or {})}
        self.place_timeout_s = place_timeout_s
        self.answer_s = answer_s
        self.outage_timeout_s = outage_timeout_s
        self.commands = {c: shutil.which(c, path=self.env.get("PATH")) or c
                         for c in ("sbatch", "squeue", "scancel", "sinfo", "sacct")}  # fmt: skip
        self._lock = threading.Lock()
        self._calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="suanli-slurm")
        self._tasks: dict[tuple[str, int, int], _Task] = {}
        self._nodes: dict[str, SlurmNode] = {}
        self._suspect: dict[str, float] = {}
        self._queue: dict[str, SlurmJob] = {}
        self._queue_at = -math.inf
        self._queue_wall = 0.0
        self._down_since: float | None = None
        self._probe: Future[Any] | None = None
        self._back = False
        self._given_up: set[str] = set()
        try:
            nodes = self.refresh()
        except EngineUnreachable as e:
            conf = self.env.get("SLURM_CONF", "Slurm's default configuration")
            raise SpecError(f"--backend slurm ({conf}): {e}") from None
        except SlurmError as e:
            raise SpecError(f"--backend slurm: {e}") from None
        if not nodes and not self._nodes:
            found = self._run("sinfo", "-h", "-o", "%P")
            raise SpecError(
                f"--slurm-partition {partition}: no such partition, or no node in it (Slurm "
                f"has: {', '.join(found.split()) or 'none'})"
            )

    # --- calls to Slurm ------------------------------------------------------------------

    def _run(self, command: str, *args: str, input: str | None = None) -> str:
        """Run a Slurm command; its output. ``EngineUnreachable`` when the controller does
        not answer (marked down until it does), ``SlurmError`` when it refuses."""
        argv = [self.commands.get(command, command), *args]
        try:
            done = subprocess.run(
                argv, input=input, capture_output=True, text=True, env=self.env,
                timeout=self.answer_s, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            why = f"{command} did not answer in {self.answer_s:g} s"
            self._mark_down(why)
            raise EngineUnreachable(f"the Slurm controller does not answer: {why}") from None
        except OSError as e:
            raise SlurmError(f"{command}: cannot run: {e}") from None
        if done.returncode != 0:
            text = " ".join((done.stderr or done.stdout).split())
            if any(m in text.lower() for m in UNREACHABLE):
                self._mark_down(text)
                raise EngineUnreachable(f"the Slurm controller does not answer: {text}")
            raise SlurmError(f"{command}: {text or f'exit status {done.returncode}'}")
        return done.stdout

    def _mark_down(self, why: str) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = time.monotonic()
                log.warning("the Slurm controller does not answer (%s): down until it does", why)

    def available(self) -> str | None:
        """None when the controller answers; else why nothing can be started now."""
        return self.engine_down("the Slurm controller", self._probe_once)

    def _probe_once(self) -> None:
        argv = [self.commands["squeue"], "-h", "-p", self.partition, "-o", "%i", "-t", "PD"]
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              timeout=self.answer_s, check=False)  # fmt: skip
        if done.returncode != 0:
            time.sleep(1.0)  # asked again at most every second
            raise EngineUnreachable(" ".join(done.stderr.split()))

    def _read_queue(self, force: bool = False) -> dict[str, SlurmJob]:
        """suanli's jobs in the partition (also those that ended in the last ``MinJobAge``),
        by name; read at most every :data:`QUEUE_EVERY_S` unless ``force``."""
        now = time.monotonic()
        if not force and now - self._queue_at < QUEUE_EVERY_S:
            return self._queue
        if self.available() is not None:
            raise EngineUnreachable(self.available())
        wall = time.time()  # what the queue says held when it was asked
        out = self._run("squeue", "-h", "-t", "all", "-p", self.partition,
                        "-o", "%i|%T|%N|%r|%j")  # fmt: skip
        jobs: dict[str, SlurmJob] = {}
        for line in out.splitlines():
            parts = line.split("|", 4)
            if len(parts) == 5 and parts[4].startswith(self.prefix):
                job = SlurmJob(parts[0], parts[1].upper(), parts[2], parts[3])
                old = jobs.get(parts[4])
                if old is None or old.state not in ACTIVE:
                    jobs[parts[4]] = job
        self._queue, self._queue_at, self._queue_wall = jobs, now, wall
        return jobs

    def _active(self, force: bool = False) -> dict[str, SlurmJob]:
        return {n: j for n, j in self._read_queue(force).items() if j.state in ACTIVE}

    # --- inventory -----------------------------------------------------------------------

    def refresh(self) -> list[SlurmNode]:
        """The partition's nodes that are up now, suspects left out."""
        out = self._run("sinfo", "-h", "-N", "-p", self.partition,
                        "-o", "%N|%c|%m|%G|%T|%o|%f")  # fmt: skip
        nodes = node_specs(out)
        now = time.monotonic()
        with self._lock:
            self._nodes = {n.name: n for n in nodes}
            for n in nodes:  # Slurm has seen it down (or it never was): no longer a suspect
                if not node_up(n.state):
                    self._suspect.pop(n.name, None)
            self._suspect = {n: t for n, t in self._suspect.items() if now - t < SUSPECT_S}
            return [n for n in nodes if node_up(n.state) and n.name not in self._suspect]

    def inventory(self) -> list[NodeSpec]:
        """The nodes work may be placed on now (the control plane's inventory watch)."""
        return [n.spec for n in self.refresh()]

    def node_address(self, node: str) -> str:
        """The node's address (Slurm's ``NodeAddr``), where rank 0 of a gang listens."""
        with self._lock:
            found = self._nodes.get(node)
        if found is None:
            self.refresh()
            with self._lock:
                found = self._nodes.get(node)
        if found is None:
            raise NodeGone(f"node {node} is not in Slurm partition {self.partition}")
        return found.address

    # --- names and paths -----------------------------------------------------------------

    def job_name(self, job_id: str, attempt: int, task: int) -> str:
        return f"{self.prefix}{job_dir_name(job_id)}/{attempt}/{task}"

    # --- launch --------------------------------------------------------------------------

    def sbatch_args(self, spec: Any, name: str, run_dir: Path) -> list[str]:
        """The ``sbatch`` options for ``spec`` (see the module docstring)."""
        paths = control_paths(run_dir)
        args = [
            "--parsable",
            f"--job-name={name}",
            f"--partition={self.partition}",
            f"--nodelist={spec.node}",
            "--nodes=1",
            "--ntasks=1",
            f"--cpus-per-task={max(1, math.ceil(spec.cpu_milli / 1000))}",
            f"--mem={max(1, spec.memory_mib)}M",
            f"--chdir={spec.cwd or run_dir.parent}",
            f"--output={paths['output']}",
            "--open-mode=append",
            "--no-requeue",
            "--export=NONE",
        ]
        if spec.gpus and not spec.fractional:
            args.append(f"--gres=gpu:{len(spec.gpus)}")
        if spec.max_runtime_s is not None:
            # A backstop only: the supervisor ends the task at its limit, to the second;
            # Slurm's limit is in minutes and comes later.
            args.append(f"--time={math.ceil((spec.max_runtime_s + spec.grace_s) / 60) + 1}")
            if spec.stop_signal not in ("SIGKILL", "SIGSTOP"):
                grace = max(1, math.ceil(spec.grace_s))
                args.append(f"--signal=B:{signal_number(spec.stop_signal)}@{grace}")
        if spec.run_as is not None:
            args += [f"--uid={spec.run_as[0]}", f"--gid={spec.run_as[1]}"]
        return args

    def batch_script(self, spec: Any) -> str:
        """The batch script: a Python program that runs :func:`slurm_task.main`."""
        launch = launch_to_json(spec)
        return (
            f"#!{self.python} -P\n"
            f"# suanli task {spec.job_id} attempt {spec.attempt} task {spec.task}\n"
            "import sys\n"
            + (f"sys.path.insert(0, {self.source!r})\n" if self.source else "")
            + "from suanli.backends.slurm_task import main\n"
            f"sys.exit(main({str(self.root)!r}, None, {launch!r}, {self.source!r}))\n"
        )

    def launch(self, spec: Any) -> Handle:
        """Submit the task's batch job, pinned to ``spec.node``; returns once Slurm has
        queued it (``poll`` tells when it runs).

        ``NodeGone`` if the node is not in the partition; ``EngineUnreachable`` if the
        controller does not answer (the job may have reached it: should it appear later, it
        is cancelled); ``FileExistsError`` if this task of this attempt was launched already;
        ``LaunchLost`` if Slurm refuses the job (its view of the node differs from suanli's).
        """
        with self._lock:
            node = self._nodes.get(spec.node)
        if node is None:
            node = {n.name: n for n in self.refresh()}.get(spec.node)
        if node is None:
            raise NodeGone(f"node {spec.node!r} is not in Slurm partition {self.partition}")
        key = (spec.job_id, spec.attempt, spec.task)
        name = self.job_name(*key)
        run_dir = self.run_dir_for(*key)
        if run_dir.exists() or name in self._active(force=True):
            raise FileExistsError(f"task {key} was launched already ({name})")
        attempt_dir = run_dir.parent
        attempt_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o711)
        attempt_dir.mkdir(exist_ok=True, mode=0o700)
        if spec.run_as is not None:
            os.chown(attempt_dir, *spec.run_as)
        for stale in ("stop", "resize", "elastic"):
            control_paths(run_dir)[stale].unlink(missing_ok=True)
        args = self.sbatch_args(spec, name, run_dir)
        try:
            out = self._run("sbatch", *args, input=self.batch_script(spec))
        except EngineUnreachable:
            with self._lock:
                self._given_up.add(name)
            raise
        except SlurmError as e:
            try:
                attempt_dir.rmdir()  # nothing of it ran (unless a sibling task did)
            except OSError:
                pass
            raise LaunchLost(f"Slurm refused task {key} on node {spec.node}: {e}") from None
        job_id = out.strip().split(";", 1)[0]
        handle = Handle(spec.job_id, spec.attempt, spec.task, 0, 0, str(run_dir))
        with self._lock:
            self._tasks[key] = _Task(handle, name, spec.node, time.monotonic(),
                                     grace_s=spec.grace_s, run_as=spec.run_as,
                                     launched_here=True)  # fmt: skip
            self._queue[name] = SlurmJob(job_id, "PENDING", spec.node, "")
        return handle

    # --- poll ----------------------------------------------------------------------------

    def poll(self) -> list[Exit]:
        """Tasks that ended since the last poll, each reported once, oldest end first."""
        with self._lock:
            tracked = list(self._tasks.values())
        jobs: dict[str, SlurmJob] | None
        try:
            self.available()
            back = self._back  # the queue read before the outage is stale
            jobs = self._read_queue(force=back) if tracked or back or self._given_up else {}
        except EngineUnreachable:
            jobs = None
        if jobs is not None and self._back:
            self._after_outage(jobs)
        exits = []
        for t in tracked:
            ended = self._check(t, jobs) if jobs is not None else self._check_in_outage(t)
            if ended is None:
                continue
            exits.append(ended)
            with self._lock:
                self._tasks.pop(t.handle.key, None)
        exits.sort(key=lambda e: (e.finished_at, e.handle.job_id, e.handle.task))
        return exits

    def _record(self, t: _Task) -> Exit | None:
        """The end its exit record tells, checked against what the control plane knows.

        The run directory is the task's user's (Slurm runs the whole job as that user), so
        the record is the user's word: a stop outcome counts only where the control plane
        asked for that stop (its request lies where the user cannot write), and the end is
        never earlier than the last time Slurm showed the job still running."""
        record = read_json(Path(t.handle.run_dir) / EXIT_FILE)
        if record is None:
            return None
        ended = exit_from_record(t.handle, record)
        asked = self._asked(t.handle)
        if ended.outcome in STOP_OUTCOMES and ended.outcome is not asked:
            ended = replace(ended, outcome=Outcome.FAILED,
                            detail=f"{ended.detail} (a stop suanli did not ask for)")  # fmt: skip
        elif ended.outcome is Outcome.LOST and asked is not None:
            # Its batch step was cancelled before it could stop the task itself.
            ended = replace(ended, outcome=asked, detail=f"{asked.value} in Slurm: {ended.detail}")
        return replace(ended, finished_at=max(ended.finished_at, t.seen_active_at))

    def _asked(self, handle: Handle) -> Outcome | None:
        stop = read_json(control_paths(Path(handle.run_dir))["stop"])
        try:
            outcome = Outcome(str((stop or {}).get("outcome")))
        except ValueError:
            return None
        return outcome if outcome in STOP_OUTCOMES else None

    def _check(self, t: _Task, jobs: dict[str, SlurmJob]) -> Exit | None:
        """The task's end once Slurm says its job is over (an exit record alone is not
        enough: the task's user could write one while the task still runs on its GPUs)."""
        job = jobs.get(t.name)
        if job is None or job.state not in ACTIVE:
            ended = self._record(t)
            if ended is not None:
                return ended
            asked = self._asked(t.handle)
            if job is None:  # left the queue (MinJobAge): what Slurm's accounting says
                job = self._accounted(t.name)
            state = f"{job.state} ({job.reason})" if job is not None else "gone from its queue"
            if asked is not None:
                return Exit(t.handle, asked, None, None, time.time(),
                            f"{asked.value}: its Slurm job ended {state}")  # fmt: skip
            if job is None or job.state != "CANCELLED":
                with self._lock:  # its node may be gone (see SUSPECT_S)
                    self._suspect[t.node] = time.monotonic()
            return Exit(
                t.handle, Outcome.LOST, None, None, time.time(),
                f"its Slurm job {job.job_id if job else '?'} on node {t.node} ended {state} "
                "without an exit record",
            )  # fmt: skip
        t.seen_active_at = max(t.seen_active_at, self._queue_wall)
        now = time.monotonic()
        if job.state == "PENDING":
            if now - t.launched_at > self.place_timeout_s:
                self._cancel(t.name)
                return Exit(
                    t.handle, Outcome.LOST, None, None, time.time(),
                    f"Slurm did not start it on node {t.node} within "
                    f"{self.place_timeout_s:g} s (pending: {job.reason})",
                )  # fmt: skip
        else:
            t.running = True
        if t.stop_at is not None and not t.killed and now - t.stop_at > t.grace_s + BACKSTOP_S:
            t.killed = True
            log.warning("task %s: still in Slurm %.0f s after its stop: cancelled",
                        t.name, now - t.stop_at)  # fmt: skip
            self._cancel(t.name)
        return None

    def _accounted(self, name: str) -> SlurmJob | None:
        """The job's last record in Slurm's accounting (``sacct``), if it keeps one."""
        try:
            out = self._run("sacct", "-X", "-n", "-P", "-a", f"--name={name}",
                            "-o", "JobID,State,NodeList,Reason")  # fmt: skip
        except (SlurmError, EngineUnreachable):
            return None
        rows = [line.split("|") for line in out.splitlines() if line.count("|") == 3]
        if not rows:
            return None
        job_id, state, node, reason = rows[-1]
        return SlurmJob(job_id, state.split()[0].upper(), node, reason)

    def _check_in_outage(self, t: _Task) -> Exit | None:
        ended = self._record(t)
        if ended is not None:
            return ended
        return self.lost_in_outage(t.handle, t.name, "the Slurm controller")

    def _after_outage(self, jobs: dict[str, SlurmJob]) -> None:
        """Slurm answers again: cancel what was given up in the outage and still runs."""
        self._back = False
        with self._lock:
            given_up, self._given_up = self._given_up, set()
        for name in sorted(given_up):
            job = jobs.get(name)
            if job is not None and job.state in ACTIVE:
                log.warning("task %s, given up in the outage, is still in Slurm: cancelled", name)
                try:
                    self._cancel(name)
                except EngineUnreachable:
                    with self._lock:
                        self._given_up.add(name)

    def _cancel(self, name: str, *args: str) -> None:
        try:
            self._run("scancel", f"--partition={self.partition}", f"--name={name}", *args)
        except SlurmError as e:
            log.warning("scancel %s: %s", name, e)

    def running(self) -> list[Handle]:
        with self._lock:
            return [t.handle for t in self._tasks.values()]

    # --- stop, resize --------------------------------------------------------------------

    def stop(self, handle: Handle, outcome: Outcome) -> None:
        """Ask the task to stop (its stop signal, SIGKILL after its grace): the outcome is
        written for its batch step, which is woken; a job still pending in Slurm is
        cancelled. Non-blocking; the Exit comes through ``poll`` with ``outcome``."""
        if outcome not in STOP_OUTCOMES:
            raise ValueError(f"outcome: stop takes CANCELLED or PREEMPTED, got {outcome!r}")
        run_dir = Path(handle.run_dir)
        paths = control_paths(run_dir)
        if (run_dir / EXIT_FILE).exists() or paths["stop"].exists():
            return
        _tell(paths["stop"], {"outcome": outcome.value, "requested_at": time.time()})
        name = self.job_name(*handle.key)
        with self._lock:
            t = self._tasks.get(handle.key)
            if t is not None:
                t.stop_at = time.monotonic()
        try:
            self._cancel(name, "--state=PENDING")
            self._wake(name)
        except EngineUnreachable:
            pass  # the batch step reads the request by itself; the backstop comes later

    def _wake(self, name: str) -> None:
        self._cancel(name, "--state=RUNNING", "--batch", "--signal=USR2")

    def resize(self, handle: Handle, told: Elastic) -> None:
        """Ask the task's batch step to rewrite the task's elastic file and signal it."""
        run_dir = Path(handle.run_dir)
        if (run_dir / EXIT_FILE).exists():
            return
        _tell(control_paths(run_dir)["resize"], told.to_json())
        try:
            self._wake(self.job_name(*handle.key))
        except EngineUnreachable:
            pass  # read within a second by the batch step

    def prepare(self, job: Prepare) -> str:
        """``job`` is expected to start soon on ``job.nodes``: on each, the batch step of a
        running suanli task of the same user (it reads only what that user may) is asked to
        read the job's checkpoint ahead there (``slurm_task``: within a second, no Slurm
        call). A node with no such task is skipped."""
        if not job.checkpoint_dir:
            return "no checkpoint directory: nothing to read ahead"
        with self._lock:
            agents = [t for t in self._tasks.values()
                      if t.running and t.launched_here and t.stop_at is None
                      and t.run_as == job.run_as]  # fmt: skip
        asked = []
        for node in job.nodes:
            t = next((t for t in agents if t.node == node), None)
            if t is None or (Path(t.handle.run_dir) / EXIT_FILE).exists():
                continue
            path = control_paths(Path(t.handle.run_dir))["prepare"]
            write_json_atomic(path, {"job_id": job.job_id, "attempt": job.attempt,
                                     "directory": job.checkpoint_dir,
                                     "requested_at": time.time()})  # fmt: skip
            # It names another job and where its checkpoint lies: written 0600 and given to
            # that job's user (whose step reads it), not made world-readable as a stop
            # request is (the job's directory is 0711: anyone knowing the name could read).
            if job.run_as is not None and os.geteuid() == 0:
                os.chown(path, *job.run_as)
            asked.append(node)
        return agents_note(asked, job.nodes, "suanli task of its user")

    def elastic(self, handle: Handle) -> Elastic | None:
        """What the task's elastic file says, as its batch step last wrote it back."""
        return Elastic.from_json(read_json(control_paths(Path(handle.run_dir))["elastic"]))

    # --- restart -------------------------------------------------------------------------

    def find(self, job_id: str, attempt: int, task: int) -> Handle | None:
        """The task's handle if it was ever launched: its run directory has a trace of its
        supervisor, or a job of its name is in Slurm's queue."""
        run_dir = self.run_dir_for(job_id, attempt, task)
        handle = Handle(job_id, attempt, task, 0, 0, str(run_dir))
        if (run_dir / HANDLE_FILE).exists() or (run_dir / EXIT_FILE).exists():
            return handle
        try:
            queued = self._read_queue(force=True)
        except EngineUnreachable:
            return None
        return handle if self.job_name(job_id, attempt, task) in queued else None

    def adopt(self, handles: Iterable[Handle]) -> list[Exit]:
        """Track tasks launched before a restart, found by their jobs' names; return the
        Exits of those already over, or gone (lost)."""
        jobs = self._read_queue(force=True)
        exits = []
        for handle in handles:
            with self._lock:
                if handle.key in self._tasks:
                    continue
            name = self.job_name(*handle.key)
            job = jobs.get(name)
            placed = read_json(Path(handle.run_dir) / "slurm.json") or {}
            node = str(placed.get("node") or (job.node if job is not None else "?"))
            t = _Task(handle, name, node, time.monotonic(), running=True)
            stop = read_json(control_paths(Path(handle.run_dir))["stop"])
            if stop is not None:
                t.stop_at = time.monotonic()
            ended = self._check(t, jobs)
            if ended is None:
                with self._lock:
                    self._tasks[handle.key] = t
            else:
                exits.append(ended)
        return exits

    def release(self, job_id: str, attempt: int) -> None:
        """Every task of the attempt has ended: its batch steps removed their scratch on
        their nodes as they ended, and Slurm released what they held. Nothing is left."""

    def close(self) -> None:
        """Stop asking Slurm. The jobs, and so the tasks, keep running."""
        self._calls.shutdown(wait=False, cancel_futures=True)
