"""Run tasks on a Ray cluster, each on the node and GPUs suanli chose (docs/backends.md).

suanli stays the scheduler; Ray executes. Per task, the control plane creates one **detached
actor** (:class:`~suanli.backends.ray_task.TaskKeeper`) on the task's node
(``NodeAffinitySchedulingStrategy``, not soft), holding the task's GPU share in Ray's own
accounting (``num_gpus``: the GPU count, or the fraction of a shared GPU; no CPU), so other
Ray work never lands on suanli's GPUs. The actor starts the task under suanli's supervisor
(the shim), tethered to itself: the task lives exactly as long as its actor.

Why detached actors and not Ray's Jobs API: a Jobs API entrypoint runs where its supervisor
is placed, needs the dashboard's HTTP server, and is stopped with one cluster-wide signal and
wait; an actor per task is placed on the very node suanli chose, needs nothing but the GCS,
and runs the same supervisor as the local backend, so the job's stop signal and grace, its
maximum runtime (enforced on the node, also while the control plane is down), the log caps
and the exit record are one code, tested once.

**GPU indices.** Ray cannot be asked for GPU index 3. Ray's own ``CUDA_VISIBLE_DEVICES``
handling is switched off in the actor (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES``), and
the task's environment sets ``CUDA_VISIBLE_DEVICES`` to the indices suanli placed it on
(``task_environment``), whatever Ray would have chosen. Ray's accounting still counts the
GPUs held per node, which is all it needs to refuse oversubscription by others; suanli must
own the GPUs of the nodes it schedules (as a Slurm partition would).

**Finding a task again.** The actor's name is a deterministic function of the attempt,
``<instance>/<job>/<attempt>/<task>`` in the namespace ``suanli`` (``instance``: the random id
of the state's run root), so a launch retried after a crash can never start a second copy
(Ray refuses the name) and a restarted control plane finds every task by name (``adopt``).
What the control plane reads back lies on the **shared path** (``--shared-dir``), which every
node must mount at the same place: the run directories (``exit.json``, ``stop.json``, logs).
The working directories of tasks given none are node-local (each node's temporary
directory); checkpoints must be on the shared path too, since an attempt requeued after a
node's loss starts elsewhere.

**Endings.** A task's end is its ``exit.json``; an actor that is gone (its node died, or it
was killed) without one is a lost task, requeued from its checkpoint. A node's raylet that
dies takes its workers with it; the task's supervisor sees its tether end and kills the task
(``tether_lost``), so a lost node never leaves a task running.

Ray is imported when a :class:`RayBackend` is made, never on import of this module.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suanli.backends.base import (
    STOP_OUTCOMES,
    Elastic,
    EngineUnreachable,
    Exit,
    Handle,
    Launch,
    NodeGone,
    Outcome,
    job_dir_name,
)
from suanli.backends.endings import exit_from_record, gone_without_record
from suanli.backends.local import _scratch_id
from suanli.backends.prepare import Prepare, agents_note
from suanli.backends.ray_task import PLACED_FILE
from suanli.backends.shared_runs import OutageClock, SharedRunDirs
from suanli.backends.shim import EXIT_FILE, HANDLE_FILE, read_json
from suanli.config.cluster import _known_model
from suanli.core.model import GpuModel, NodeSpec, SpecError

log = logging.getLogger("suanli.backends.ray")

NAMESPACE = "suanli"
"""The Ray namespace of every actor suanli creates."""
NODE_LABEL = "suanli.io/node"
"""A Ray node label that names the node for suanli (default: the host name, made unique)."""
ACCELERATOR_PREFIX = "accelerator_type:"
"""Ray's resource naming a node's GPU model (set by Ray for detected GPUs, or declared)."""
ACCELERATOR_LABEL = "ray.io/accelerator-type"
NOSET_CUDA = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
KEEP_CHILDREN = "RAY_kill_child_processes_on_worker_exit"
"""Off in the actor: a worker that exits would SIGKILL its children, the supervisor among
them, and leave the task's own processes running; kept, the supervisor sees its tether end
and kills the whole task, then records it."""
DEFAULT_PLACE_TIMEOUT_S = 300.0
"""How long an actor may wait for Ray to place it before its task is counted lost."""
SUSPECT_S = 60.0
"""A node whose task was lost with its actor is left out of the inventory this long, or until
Ray declares it dead: Ray's own health checks take seconds to tens of seconds to notice a
dead raylet, and a job requeued meanwhile must not be placed there again. A node Ray still
lists alive afterwards (only the actor had died) is back."""
ANSWER_S = 5.0
"""How long one call to Ray may take before the cluster is taken for unreachable."""
DEFAULT_OUTAGE_TIMEOUT_S = 600.0
"""How long the cluster may not answer before its running tasks are taken for lost."""
RECONNECT_VARIABLE = "RAY_gcs_rpc_server_reconnect_timeout_s"
RECONNECT_S = 30 * 86_400
"""What the control plane's own Ray driver is given to reconnect to the GCS (Ray's default,
60 s, would end the control plane in a longer outage)."""


def gpu_share(spec: Launch) -> float:
    """What the task's actor asks of Ray's ``GPU`` resource: the GPU count, or the share of
    the one GPU a fractional task holds."""
    return spec.gpu_milli / 1000 if spec.fractional else float(len(spec.gpus))


@dataclass(frozen=True, slots=True)
class RayNode:
    """One live Ray node as suanli sees it: its suanli name, Ray id and address."""

    name: str
    node_id: str
    address: str
    spec: NodeSpec


def node_specs(nodes: Iterable[Mapping[str, Any]]) -> list[RayNode]:
    """The live nodes of ``ray.nodes()`` as suanli nodes, in Ray's order.

    Name: the ``suanli.io/node`` label, else the host name (``-<id8>`` added where two live
    nodes share one, as Ray's local test clusters do). GPUs: Ray's ``GPU`` resource (whole
    GPUs); model: the ``accelerator_type:<model>`` resource or the ``ray.io/accelerator-type``
    label, a catalogue model where one matches. CPU and memory: Ray's ``CPU`` and ``memory``.
    ``SpecError`` for a node with GPUs and no model, or a fractional GPU count.
    """
    alive = [n for n in nodes if n.get("Alive", n.get("alive"))]
    hosts: dict[str, int] = {}
    for n in alive:
        host = str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or "")
        hosts[host] = hosts.get(host, 0) + 1
    out = []
    for n in alive:
        node_id = str(n["NodeID"])
        labels = dict(n.get("Labels") or {})
        res = dict(n.get("Resources") or {})
        host = str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or node_id[:8])
        name = labels.get(NODE_LABEL) or (
            host if hosts.get(host, 0) <= 1 else f"{host}-{node_id[:8]}"
        )
        gpus_f = float(res.get("GPU", 0.0))
        if gpus_f != int(gpus_f):
            raise SpecError(f"Ray node {name}: a GPU count of {gpus_f:g} (whole GPUs only)")
        gpus = int(gpus_f)
        model: GpuModel | None = None
        if gpus:
            types = sorted(
                k[len(ACCELERATOR_PREFIX) :] for k in res if k.startswith(ACCELERATOR_PREFIX)
            )
            kind = labels.get(ACCELERATOR_LABEL) or (types[0] if types else "")
            if not kind:
                raise SpecError(
                    f"Ray node {name}: {gpus} GPUs but no GPU model (start it with "
                    f"--resources '{{\"{ACCELERATOR_PREFIX}H100\": 1}}' or the label "
                    f"{ACCELERATOR_LABEL}=H100)"
                )
            model = _known_model(kind) or GpuModel(kind, 80 * 1024, 1.0)
        spec = NodeSpec(
            name=name,
            gpus=gpus,
            gpu_model=model,
            cpu_milli=round(float(res.get("CPU", 0.0)) * 1000),
            memory_mib=int(float(res.get("memory", 0.0)) // (1 << 20)),
            labels=tuple(sorted((k, str(v)) for k, v in labels.items())),
        )
        out.append(RayNode(name, node_id, str(n.get("NodeManagerAddress") or "127.0.0.1"), spec))
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise SpecError(
            f"Ray nodes: two live nodes are both called {', '.join(dup)} ({NODE_LABEL})"
        )
    return out


@dataclass(slots=True)
class _Task:
    handle: Handle
    name: str
    node: str
    actor: Any
    started: Any  # the ObjectRef of TaskKeeper.started, until it is answered
    launched_at: float  # monotonic
    running: bool = False


@dataclass(slots=True)
class _Ended:
    """Actors of an attempt's ended tasks, kept until the attempt is released."""

    actors: dict[int, Any] = field(default_factory=dict)


class RayBackend(SharedRunDirs, OutageClock):
    """The :class:`~suanli.backends.base.Backend` on a Ray cluster at ``address``.

    ``shared`` is the path every node sees (the run directories go to ``shared/runs``);
    ``scratch`` the node-local root of tasks' scratch working directories (None: each node's
    temporary directory). ``place_timeout_s``: see :data:`DEFAULT_PLACE_TIMEOUT_S`.

    **Outages.** Every call to Ray runs on a helper thread and is given ``answer_s``; one
    that takes longer means the cluster is unreachable (its head, the GCS, is down):
    ``available()`` says so until that call answers. Meanwhile tasks' ends are still read
    from their exit files on the shared path, nothing is launched (the loop asks
    ``available()`` first), stops and releases are kept and sent on the cluster's return,
    and no task is taken for lost until ``outage_timeout_s`` has passed. Then the running
    ones are reported lost (requeued from their checkpoints) and remembered: if the cluster
    returns and one still runs, it is stopped, so an attempt never runs twice. On the
    cluster's return every task is checked by name again (an actor gone without an exit
    record is a lost task). The cluster must keep its actors across a head restart (GCS
    fault tolerance, with an external Redis) for anything to be found again.
    """

    def __init__(
        self,
        address: str,
        shared: Path,
        *,
        scratch: str | None = None,
        place_timeout_s: float = DEFAULT_PLACE_TIMEOUT_S,
        answer_s: float = ANSWER_S,
        outage_timeout_s: float = DEFAULT_OUTAGE_TIMEOUT_S,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise SpecError(
                "--backend ray: Ray is not installed (pip install 'suanli[ray]')"
            ) from None
        from suanli.backends.ray_task import TaskKeeper

        self.ray = ray
        self.address = address
        self.shared = Path(shared).absolute()
        self.root = self.shared / "runs"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.instance = _scratch_id(self.root)
        self.scratch = scratch
        self.place_timeout_s = place_timeout_s
        self.answer_s = answer_s
        self.outage_timeout_s = outage_timeout_s
        if not ray.is_initialized():
            # A driver that loses the GCS for longer than Ray's reconnect timeout (60 s by
            # default) exits: the control plane must outlive an outage of its engine.
            os.environ.setdefault(RECONNECT_VARIABLE, str(RECONNECT_S))
            try:
                ray.init(
                    address=address,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise SpecError(f"--ray-address {address}: cannot connect to Ray: {e}") from None
        self._keeper = ray.remote(TaskKeeper)
        self._lock = threading.Lock()
        self._calls = ThreadPoolExecutor(max_workers=2, thread_name_prefix="suanli-ray")
        self._tasks: dict[tuple[str, int, int], _Task] = {}
        self._ended: dict[tuple[str, int], _Ended] = {}
        self._nodes: dict[str, RayNode] = {}
        self._suspect: dict[str, float] = {}  # node -> monotonic time its task was lost
        self._down_since: float | None = None  # monotonic; None: the cluster answers
        self._probe: Future[Any] | None = None  # the call that did not answer in time
        self._back = False  # the cluster answered again: check everything on the next poll
        self._given_up: set[str] = set()  # tasks reported lost in an outage: stop if found
        self._stops: dict[str, tuple[Any, str]] = {}  # stops kept for the cluster's return
        self._releases: set[tuple[str, int]] = set()  # releases kept likewise
        self.refresh()

    # --- calls to Ray --------------------------------------------------------------------

    def _ask(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on a helper thread, given ``answer_s``; ``EngineUnreachable`` if
        it does not answer (or if the cluster is known to be down)."""
        if self.available() is not None:
            raise EngineUnreachable(self.available())
        call = self._calls.submit(fn, *args)
        try:
            return call.result(timeout=self.answer_s)
        except FutureTimeout:
            with self._lock:
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    log.warning("the Ray cluster at %s did not answer in %g s: down until "
                                "it does", self.address, self.answer_s)  # fmt: skip
                self._probe = call
            raise EngineUnreachable(self.available()) from None

    def available(self) -> str | None:
        """None when the cluster answers; else why nothing can be started or stopped now."""
        return self.engine_down(f"the Ray cluster at {self.address}", self._names)

    def _names(self) -> set[str]:
        return set(self.ray.util.list_named_actors())

    def _live_names(self) -> set[str]:
        return set(self._ask(self._names))

    def _actor(self, name: str) -> Any | None:
        def get() -> Any | None:
            try:
                return self.ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                return None

        return self._ask(get)

    # --- inventory -----------------------------------------------------------------------

    def refresh(self) -> list[RayNode]:
        """Read the cluster's live nodes from Ray (``ray.nodes()``), less those suspected
        lost (``SUSPECT_S``), and remember them. ``EngineUnreachable`` in an outage."""
        found = node_specs(self._ask(self.ray.nodes))
        now = time.monotonic()
        with self._lock:
            self._suspect = {n: t for n, t in self._suspect.items() if now - t < SUSPECT_S}
            found = [n for n in found if n.name not in self._suspect]
            self._nodes = {n.name: n for n in found}
        return found

    def inventory(self) -> list[NodeSpec]:
        """The live nodes now, as suanli nodes (the control plane's inventory watch)."""
        return [n.spec for n in self.refresh()]

    def node_address(self, node: str) -> str:
        """The address of ``node`` (its raylet's), where rank 0 of a gang listens."""
        with self._lock:
            found = self._nodes.get(node)
        if found is None:
            found = {n.name: n for n in self.refresh()}.get(node)
        if found is None:
            raise NodeGone(f"node {node} is not in the Ray cluster")
        return found.address

    # --- names and paths -----------------------------------------------------------------

    def actor_name(self, job_id: str, attempt: int, task: int) -> str:
        return f"{self.instance}/{job_dir_name(job_id)}/{attempt}/{task}"

    # --- launch --------------------------------------------------------------------------

    def launch(self, spec: Launch) -> Handle:
        """Create the task's actor on ``spec.node``; returns once Ray has taken the request
        (Ray places it; ``poll`` tells when it runs).

        ``NodeGone`` if the node is not in the cluster; ``EngineUnreachable`` if the cluster
        does not answer (the request may have reached it: should the actor appear later,
        it is stopped); ``FileExistsError`` if this task of this attempt was launched
        already (its actor's name is taken, or its run directory exists).
        """
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._lock:
            node = self._nodes.get(spec.node)
        if node is None:
            node = {n.name: n for n in self.refresh()}.get(spec.node)
        if node is None:
            raise NodeGone(f"node {spec.node!r} is not in the Ray cluster")
        key = (spec.job_id, spec.attempt, spec.task)
        name = self.actor_name(*key)
        run_dir = self.run_dir_for(*key)
        if run_dir.exists() or name in self._live_names():
            raise FileExistsError(f"task {key} was launched already ({name})")
        options = self._keeper.options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            max_restarts=0,
            num_cpus=0,
            num_gpus=gpu_share(spec),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            runtime_env={"env_vars": {NOSET_CUDA: "1", KEEP_CHILDREN: "0"}},
        )

        def create() -> tuple[Any, Any]:
            actor = options.remote(str(self.root), self.scratch, spec)
            return actor, actor.started.remote()  # type: ignore[attr-defined]

        try:
            actor, started = self._ask(create)
        except ValueError as e:  # the name is taken: a launch cut short ran it already
            raise FileExistsError(f"task {key}: {e}") from None
        except EngineUnreachable:
            with self._lock:
                self._given_up.add(name)
            raise
        handle = Handle(spec.job_id, spec.attempt, spec.task, 0, 0, str(run_dir))
        with self._lock:
            self._tasks[key] = _Task(handle, name, spec.node, actor, started, time.monotonic())
        return handle

    # --- poll ----------------------------------------------------------------------------

    def poll(self) -> list[Exit]:
        """Tasks that ended since the last poll, each reported once, oldest end first.

        In an outage only exit records are read (see the class docstring)."""
        with self._lock:
            tracked = list(self._tasks.values())
        live: set[str] | None
        try:
            self.available()  # notices the cluster's return, even with nothing tracked
            live = self._live_names() if tracked or self._back else set()
        except EngineUnreachable:
            live = None
        if live is not None and self._back:
            self._after_outage(live)
        if live is not None:
            self._answer_started([t for t in tracked if t.started is not None])
        exits = []
        for t in tracked:
            ended = self._check(t, live) if live is not None else self._check_in_outage(t)
            if ended is not None:
                if ended.outcome is Outcome.LOST and t.running and live is not None:
                    with self._lock:  # its node may be gone (see SUSPECT_S)
                        self._suspect[t.node] = time.monotonic()
                exits.append(ended)
                with self._lock:
                    self._tasks.pop(t.handle.key, None)
                if live is not None and t.name in live:
                    self._release_actor(t.actor)  # its GPU share back to Ray now
                else:
                    with self._lock:
                        self._ended.setdefault(t.handle.key[:2], _Ended()).actors[t.handle.task] = (
                            t.actor
                        )
        exits.sort(key=lambda e: (e.finished_at, e.handle.job_id, e.handle.task))
        return exits

    def _check_in_outage(self, t: _Task) -> Exit | None:
        record = read_json(Path(t.handle.run_dir) / EXIT_FILE)
        if record is not None:
            return exit_from_record(t.handle, record)
        return self.lost_in_outage(t.handle, t.name, "the Ray cluster")

    def _after_outage(self, live: set[str]) -> None:
        """The cluster answers again: stop what was given up, send what was kept."""
        self._back = False
        with self._lock:
            stops, self._stops = self._stops, {}
            releases, self._releases = self._releases, set()
            given_up = self._given_up & live
        try:
            for name in sorted(given_up):
                actor = self._actor(name)
                if actor is not None:
                    log.warning("task %s, given up in the outage, still ran: stopped", name)
                    self._ask(self.ray.kill, actor)
                with self._lock:
                    self._given_up.discard(name)
            while stops:
                name, (actor, outcome) = next(iter(stops.items()))
                self._ask(lambda a=actor, o=outcome: a.stop.remote(o))
                del stops[name]
        except EngineUnreachable:  # down again: the rest waits for the next return
            with self._lock:
                self._stops.update(stops)
                self._releases |= releases
            return
        for job_id, attempt in sorted(releases):
            self.release(job_id, attempt)

    def _answer_started(self, waiting: list[_Task]) -> None:
        if not waiting:
            return
        refs = [t.started for t in waiting]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        done = set(ready)
        for t in waiting:
            if t.started not in done:
                continue
            try:
                self.ray.get(t.started, timeout=self.answer_s)
                t.running = True
            except Exception as e:  # noqa: BLE001 - the actor died: told below by its name
                log.warning("task %s: its actor ended before it started: %s", t.name, e)
            t.started = None

    def _check(self, t: _Task, live: set[str]) -> Exit | None:
        run_dir = Path(t.handle.run_dir)
        record = read_json(run_dir / EXIT_FILE)
        if record is not None:
            return exit_from_record(t.handle, record)
        if t.name not in live:
            record = read_json(run_dir / EXIT_FILE)  # it may have ended in between
            if record is not None:
                return exit_from_record(t.handle, record)
            ended = gone_without_record(t.handle, None, None)
            if ended.outcome is Outcome.LOST:
                why = "it never started" if not t.running else "its node left or it was killed"
                return Exit(
                    t.handle, Outcome.LOST, None, None, ended.finished_at,
                    f"its Ray actor on node {t.node} is gone ({why})",
                )  # fmt: skip
            return ended
        if (
            not t.running
            and t.started is not None
            and time.monotonic() - t.launched_at > self.place_timeout_s
        ):
            self._ask(self.ray.kill, t.actor)
            return Exit(
                t.handle, Outcome.LOST, None, None, time.time(),
                f"Ray did not place it on node {t.node} within {self.place_timeout_s:g} s",
            )  # fmt: skip
        return None

    def running(self) -> list[Handle]:
        with self._lock:
            return [t.handle for t in self._tasks.values()]

    # --- stop, resize --------------------------------------------------------------------

    def _tracked(self, handle: Handle) -> _Task | None:
        with self._lock:
            return self._tasks.get(handle.key)

    def stop(self, handle: Handle, outcome: Outcome) -> None:
        """Ask the task's actor to stop it (its stop signal, SIGKILL after its grace).
        Non-blocking; the Exit comes through ``poll`` with ``outcome``. In an outage the
        stop is kept and sent when the cluster answers again."""
        if outcome not in STOP_OUTCOMES:
            raise ValueError(f"outcome: stop takes CANCELLED or PREEMPTED, got {outcome!r}")
        if (Path(handle.run_dir) / EXIT_FILE).exists():
            return
        name = self.actor_name(*handle.key)
        t = self._tracked(handle)
        try:
            actor = t.actor if t is not None else self._actor(name)
            if actor is not None:
                self._ask(lambda: actor.stop.remote(outcome.value))
        except EngineUnreachable:
            if t is not None:
                with self._lock:
                    self._stops.setdefault(name, (t.actor, outcome.value))

    def resize(self, handle: Handle, told: Elastic) -> None:
        t = self._tracked(handle)
        if t is not None:
            self._ask(lambda: t.actor.resize.remote((told.world_size, told.rank, told.generation)))

    def elastic(self, handle: Handle) -> Elastic | None:
        t = self._tracked(handle)
        if t is None:
            return None
        try:
            found = self._ask(lambda: self.ray.get(t.actor.elastic.remote(), timeout=self.answer_s))
        except Exception:  # noqa: BLE001 - an actor that is gone has no elastic file
            return None
        return Elastic.from_json(found)

    # --- restart -------------------------------------------------------------------------

    def find(self, job_id: str, attempt: int, task: int) -> Handle | None:
        """The task's handle if it was ever launched: its run directory has a trace of its
        supervisor, or its actor lives (see ``Backend.find``)."""
        run_dir = self.run_dir_for(job_id, attempt, task)
        handle = Handle(job_id, attempt, task, 0, 0, str(run_dir))
        if (run_dir / HANDLE_FILE).exists() or (run_dir / EXIT_FILE).exists():
            return handle
        try:
            live = self._live_names()
        except EngineUnreachable:
            return None  # nothing of it is on the shared path: it has not started (yet)
        return handle if self.actor_name(job_id, attempt, task) in live else None

    def adopt(self, handles: Iterable[Handle]) -> list[Exit]:
        """Track tasks launched before a restart, found by their actors' names; return the
        Exits of those already over (``exit.json``), or gone (lost)."""
        live = self._live_names()
        exits = []
        for handle in handles:
            with self._lock:
                if handle.key in self._tasks:
                    continue
            name = self.actor_name(*handle.key)
            actor = self._actor(name) if name in live else None
            node = self._node_of(handle)
            t = _Task(handle, name, node, actor, None, time.monotonic(), running=True)
            if actor is not None:
                t.started = self._ask(lambda a=actor: a.started.remote())
            ended = self._check(t, live if actor is not None else live - {name})
            if ended is None:
                with self._lock:
                    self._tasks[handle.key] = t
            else:
                exits.append(ended)
                if actor is not None:
                    self._release_actor(actor)
        return exits

    def prepare(self, job: Prepare) -> str:
        """``job`` is expected to start soon on ``job.nodes``: on each, the actor of a running
        suanli task (``TaskKeeper.prepare``) reads the job's checkpoint ahead into that node's
        page cache, as the local backend does on its machine; the call is sent, not waited
        for. A node with no running task of suanli's is skipped."""
        if not job.checkpoint_dir:
            return "no checkpoint directory: nothing to read ahead"
        with self._lock:
            agents = [t for t in self._tasks.values() if t.running and t.actor is not None]
        asked = []
        for node in job.nodes:
            t = next((t for t in agents if t.node == node), None)
            if t is None:
                continue
            try:
                self._ask(lambda a=t.actor: a.prepare.remote(job.job_id, job.checkpoint_dir))
            except EngineUnreachable:
                break  # (an optimisation: not kept for the cluster's return)
            asked.append(node)
        return agents_note(asked, job.nodes)

    def _node_of(self, handle: Handle) -> str:
        record = read_json(Path(handle.run_dir) / PLACED_FILE) or {}
        return str(record.get("node") or "?")

    def _release_actor(self, actor: Any) -> None:
        try:
            self._ask(lambda: actor.release.remote())
        except EngineUnreachable:
            pass  # found by name at the attempt's release

    def release(self, job_id: str, attempt: int) -> None:
        """Every task of the attempt has ended and its end is recorded: each actor still
        there (each is asked to end as soon as its task's end is read) removes the task's
        scratch on its node and ends, giving its GPU share back to Ray. In an outage this is
        kept for the cluster's return."""
        with self._lock:
            ended = self._ended.pop((job_id, attempt), None)
        actors = [a for a in ended.actors.values() if a is not None] if ended is not None else []
        try:
            if not actors:  # after a restart: find them by name
                prefix = f"{self.instance}/{job_dir_name(job_id)}/{attempt}/"
                names = sorted(n for n in self._live_names() if n.startswith(prefix))
                actors = [a for n in names if (a := self._actor(n)) is not None]
            for actor in actors:
                self._ask(lambda a=actor: a.release.remote())
        except EngineUnreachable:
            with self._lock:
                self._releases.add((job_id, attempt))

    def close(self) -> None:
        """Disconnect from Ray. Detached actors, and so the tasks, keep running."""
        self._calls.shutdown(wait=False, cancel_futures=True)
        if self.ray.is_initialized() and self.available() is None:
            self.ray.shutdown()
