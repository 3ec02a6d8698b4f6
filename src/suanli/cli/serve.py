"""``suanli serve``: the live control plane: API, scheduler loop, and a backend that runs tasks.

One process runs the HTTP API (FastAPI on uvicorn), the scheduler loop (a thread running
``suanli.control.loop.Controller``) and the local backend (tasks as processes under a
supervisor each, in ``STATE/runs``). State is in SQLite (``STATE/suanli.db``, WAL, durable
commits) unless ``--db`` names a PostgreSQL URL; the schema is migrated on start.

Backends: ``--backend local`` (the default) runs tasks as processes on this machine;
``--backend ray --ray-address HOST:PORT --shared-dir DIR`` runs each on the node of a Ray
cluster suanli placed it on, the inventory being the Ray cluster's nodes
(``suanli.backends.ray_backend``, docs/backends.md). ``--config FILE`` takes these options,
and any other, from a YAML file.

GPUs: NVML's when the machine has any (``nvidia-ml-py``), else those declared with
``--gpus N --gpu-model MODEL`` (virtual GPUs: everything runs, the jobs just see GPU
indices), else none (CPU jobs only). ``--gpus``/``--gpu-model`` also override what NVML
says.

Policies: the same options as ``suanli simulate`` (``--policy``, ``--quotas``,
``--preempt``, ``--budgets`` with ``--prices``); with ``--prices`` every ended attempt is
charged in the ledger as well as metered.

Auth: on first start, with no token in the store, an admin token is made and written to
``STATE/admin.token`` (mode 0600); give it to the client as ``SUANLI_TOKEN`` or with
``suanli token create`` make narrower ones. Stopping the server (Ctrl-C, SIGTERM) leaves
running jobs running: the next start adopts them.

Isolation: the state directory is 0700 and the database files 0600. Run as root, every task
runs under an unprivileged uid (``--run-as``, default ``nobody``; ``--tenant-user
TENANT=USER`` per tenant); run as another user, tasks run as that user (single-user mode: no
isolation from the server's files). Working directories are never inside the state
directory. ``docs/serve.md`` has the threat model.

GPU utilisation: with NVML's GPUs, a sampler thread reads each running attempt's GPUs
every ``--util-interval`` seconds (0: never) into the store, keeps raw samples for
``--util-retention`` (and at most ``--util-max-samples`` rows), then folds them into
per-attempt summaries (``suanli.control.sampler``, ``docs/serve.md``).

Online services: ``POST /v1/services`` (``suanli service create``) runs replicas of a
service as ``online`` jobs, sized once every ``--service-step`` seconds by the simulator's
autoscalers from the demand the tenant reports (``suanli.control.services``).

Idle GPUs: with ``--idle-threshold`` (off by default), a job whose sampled GPU duty stays
below it for ``--idle-window`` is warned in its history and, ``--idle-grace`` later, still
idle and with a job waiting, reclaimed by ``--idle-action`` (``suanli.control.reclaim``);
online jobs and those labelled ``interactive`` or ``debugging`` never are.

Elastic jobs (``min_workers < max_workers``) grow into idle GPUs and shrink for jobs that
wait (``suanli.control.resize``); a resize costs such a job ``--resize-cost`` (default 30 s),
so it grows only where that saves more.

The server logs to ``STATE/serve.log`` (``--log -``: standard error) and prints one line
when it is ready: the API answers and the scheduler has recovered its state. If the
scheduler loop stops, ``/healthz`` answers 503 and the process exits with status 1, so that a
supervisor (``docs/serve.md`` has a systemd unit) restarts it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.cli.errors import fail, user_errors
from suanli.cli.serve_setup import (
    capacity_of,
    config_file,
    describe,
    engine_name,
    remote_engine,
    stored_node,
)

if TYPE_CHECKING:
    from suanli.backends.gpu_util import GpuUseReader
    from suanli.control.loop import ControlConfig, Controller
    from suanli.control.metrics import ControlMetrics
    from suanli.control.sampler import UtilSampler
    from suanli.core.idle import IdlePolicy
    from suanli.core.model import ClusterSpec
    from suanli.store import Store

DEFAULT_PORT = 8620
TOKEN_FILE = "admin.token"
LOG_FILE = "serve.log"
DB_FILE = "suanli.db"
STALE_PASSES = 20
"""``/healthz`` reports the loop unwell after this many intervals (at least 30 s) without a
completed pass."""


def default_state_dir() -> Path:
    """``$SUANLI_STATE_DIR``, else ``$XDG_DATA_HOME/suanli``, else ``~/.local/share/suanli``."""
    if os.environ.get("SUANLI_STATE_DIR"):
        return Path(os.environ["SUANLI_STATE_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "suanli"


def serve_command(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="A YAML file of these options (backend: ray, ray-address: ...); the "
            "command line wins.",
            is_eager=True,
            callback=config_file,
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            help="Where the database, task logs and the admin token live "
            "(default $SUANLI_STATE_DIR, else ~/.local/share/suanli).",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="PATH|URL",
            help="A SQLite file or a PostgreSQL URL (default STATE/suanli.db).",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = DEFAULT_PORT,
    engine: Annotated[
        str,
        typer.Option(
            "--backend",
            metavar="local|ray|slurm",
            help="What runs the tasks: processes on this machine, a Ray cluster's nodes, or "
            "a Slurm partition's (SLURM_CONF names the cluster).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", metavar="HOST:PORT", help="The Ray cluster (--backend ray)."),
    ] = None,
    slurm_partition: Annotated[
        str,
        typer.Option(
            "--slurm-partition",
            metavar="NAME",
            help="The Slurm partition suanli owns and places on (--backend slurm).",
        ),
    ] = "suanli",
    slurm_python: Annotated[
        str | None,
        typer.Option(
            "--slurm-python",
            metavar="PATH",
            help="The interpreter that runs each task's batch step on the Slurm nodes, as "
            "the task's user (default: this one; another is given this suanli's source).",
        ),
    ] = None,
    inventory_interval: Annotated[
        float,
        typer.Option(
            "--inventory-interval",
            metavar="SECONDS",
            help="How often the Ray cluster's or Slurm partition's nodes are read (joins "
            "and losses).",
        ),
    ] = 10.0,
    engine_timeout: Annotated[
        str,
        typer.Option(
            "--engine-timeout",
            metavar="DURATION",
            help="How long the Ray cluster or Slurm controller may not answer before its "
            "running tasks are "
            "taken for lost and requeued (submissions queue meanwhile).",
        ),
    ] = "10m",
    shared_dir: Annotated[
        Path | None,
        typer.Option(
            "--shared-dir",
            metavar="DIR",
            help="A path every node sees at the same place: run directories and logs "
            "(--backend ray or slurm); jobs' checkpoint_dir must lie in it.",
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", help="Declare this many (virtual) GPUs instead of NVML's."),
    ] = None,
    gpu_model: Annotated[
        str | None, typer.Option("--gpu-model", metavar="MODEL", help="Model of declared GPUs.")
    ] = None,
    node_name: Annotated[
        str | None, typer.Option("--node-name", help="This node's name (default: host name).")
    ] = None,
    policy: Annotated[
        str,
        typer.Option("--policy", "-p", metavar="SET", help="Policy set, as suanli simulate's."),
    ] = "fifo+best-fit",
    quotas: Annotated[
        Path | None,
        typer.Option("--quotas", metavar="FILE", help="Queues and quotas (docs/tenancy.md)."),
    ] = None,
    preempt: Annotated[
        bool, typer.Option("--preempt", help="Let jobs evict lower-priority ones.")
    ] = False,
    min_runtime: Annotated[
        float,
        typer.Option(
            "--min-runtime",
            metavar="SECONDS",
            help="With --preempt: how long a job runs before it may be preempted.",
        ),
    ] = 600.0,
    budgets: Annotated[
        Path | None,
        typer.Option(
            "--budgets", metavar="FILE", help="Budgets (docs/budgets.md); needs --prices."
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", metavar="FILE", help="Price book: charge every attempt."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between scheduling passes.")
    ] = 1.0,
    metrics_public: Annotated[
        bool, typer.Option("--metrics-public", help="Serve /metrics without a token.")
    ] = False,
    run_as: Annotated[
        str | None,
        typer.Option(
            "--run-as", metavar="USER", help="As root: the user tasks run as (default nobody)."
        ),
    ] = None,
    tenant_user: Annotated[
        list[str] | None,
        typer.Option(
            "--tenant-user",
            metavar="TENANT=USER",
            help="As root: run this tenant's tasks as USER (repeatable).",
        ),
    ] = None,
    isolate_tenants: Annotated[
        bool,
        typer.Option(
            "--isolate-tenants", help="As root: refuse the jobs of tenants without a --tenant-user."
        ),
    ] = False,
    allow_env: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-env",
            metavar="NAME",
            help="Let jobs set this loader variable (LD_LIBRARY_PATH...; repeatable).",
        ),
    ] = None,
    submit_rate: Annotated[
        float,
        typer.Option(
            "--submit-rate",
            help="Submissions/s per tenant, and demand reports/s apart (0: no limit).",
        ),
    ] = 50.0,
    submit_burst: Annotated[
        int, typer.Option("--submit-burst", help="Submissions at once per tenant.")
    ] = 200,
    max_pending: Annotated[
        int, typer.Option("--max-pending", help="Pending jobs per tenant (0: no limit).")
    ] = 10_000,
    task_log_max: Annotated[
        str,
        typer.Option(
            "--task-log-max",
            metavar="SIZE",
            help="Per task and stream: rotate the log past this size.",
        ),
    ] = "64M",
    reconcile_interval: Annotated[
        float,
        typer.Option(
            "--reconcile-interval",
            metavar="SECONDS",
            help="Seconds between reconciliations of store, loop and tasks.",
        ),
    ] = 30.0,
    util_interval: Annotated[
        float,
        typer.Option(
            "--util-interval",
            metavar="SECONDS",
            help="Seconds between GPU utilisation samples of running jobs (NVML; 0: off).",
        ),
    ] = 10.0,
    util_retention: Annotated[
        str,
        typer.Option(
            "--util-retention",
            metavar="DURATION",
            help="Keep raw utilisation samples this long (7d, 12h, seconds), then fold them.",
        ),
    ] = "7d",
    util_max_samples: Annotated[
        int,
        typer.Option(
            "--util-max-samples",
            metavar="N",
            help="Keep at most N raw utilisation samples, folding the oldest (0: no cap).",
        ),
    ] = 1_000_000,
    idle_threshold: Annotated[
        float,
        typer.Option(
            "--idle-threshold",
            metavar="RATIO",
            help="Idle-GPU reclaim: a job whose GPU duty stays below this (0.05 = 5%) for "
            "--idle-window is warned, and reclaimed --idle-grace later (0: off, the default).",
        ),
    ] = 0.0,
    idle_window: Annotated[
        str,
        typer.Option("--idle-window", metavar="DURATION", help="Idle this long: warned."),
    ] = "30m",
    idle_grace: Annotated[
        str,
        typer.Option(
            "--idle-grace", metavar="DURATION", help="Still idle this long after: reclaimed."
        ),
    ] = "10m",
    idle_action: Annotated[
        str,
        typer.Option(
            "--idle-action",
            metavar="ACTION",
            help="preempt (stop it, requeue it from its checkpoint) or shrink (an elastic "
            "job to its minimum workers; others are preempted).",
        ),
    ] = "preempt",
    service_step: Annotated[
        float,
        typer.Option(
            "--service-step",
            metavar="SECONDS",
            help="Step of online services' demand history: each is resized once a step.",
        ),
    ] = 10.0,
    resize_cost: Annotated[
        str,
        typer.Option(
            "--resize-cost",
            metavar="DURATION",
            help="What a resize costs an elastic job: it grows only where that saves more.",
        ),
    ] = "30s",
    log: Annotated[
        str | None,
        typer.Option(
            "--log",
            metavar="FILE|-",
            help="The server's log (default STATE/serve.log; - for stderr).",
        ),
    ] = None,
) -> None:
    """Run the control plane: API, scheduler loop and backend (docs/serve.md, docs/backends.md)."""  # fmt: skip
    import math

    import uvicorn

    from suanli.config.budgets import parse_duration
    from suanli.control.spec import size_mib
    from suanli.core.model import SpecError

    if not 0 < port < 65536:
        fail(f"--port: must be in 1..65535, got {port}")
    if not interval > 0:
        fail(f"--interval: must be > 0, got {interval}")
    if not min_runtime >= 0:
        fail(f"--min-runtime: must be >= 0, got {min_runtime}")
    if not inventory_interval > 0:
        fail(f"--inventory-interval: must be > 0, got {inventory_interval}")
    if not reconcile_interval > 0:
        fail(f"--reconcile-interval: must be > 0, got {reconcile_interval}")
    if not submit_rate >= 0 or submit_burst < 1 or max_pending < 0:
        fail("--submit-rate and --max-pending must be >= 0, --submit-burst >= 1")
    try:
        log_max = size_mib(task_log_max, "--task-log-max") << 20
    except ValueError as e:
        fail(str(e))
    if log_max <= 0:
        fail("--task-log-max: must be > 0")
    if not (math.isfinite(util_interval) and (util_interval == 0 or util_interval >= 0.1)):
        fail(f"--util-interval: must be 0 (off) or at least 0.1 seconds, got {util_interval}")
    try:
        retention_s = parse_duration(util_retention, "--util-retention")
    except SpecError as e:
        fail(str(e))
    idle = None
    if idle_threshold != 0:
        from suanli.core.idle import IdlePolicy

        if idle_action not in ("preempt", "shrink"):
            fail(f"--idle-action: preempt or shrink, got {idle_action!r} (share is the "
                 "simulator's: GPUs are not lent to other work live)")  # fmt: skip
        try:
            idle = IdlePolicy(
                threshold=idle_threshold,
                window=parse_duration(idle_window, "--idle-window"),
                grace=parse_duration(idle_grace, "--idle-grace"),
                action=idle_action,
            )
        except SpecError as e:
            fail(str(e))
    if not (math.isfinite(service_step) and service_step >= 0.05):
        fail(f"--service-step: must be at least 0.05 seconds, got {service_step}")
    if util_max_samples < 0:
        fail(f"--util-max-samples: must be >= 0 (0: no cap), got {util_max_samples}")
    try:
        resize_cost_s = parse_duration(resize_cost, "--resize-cost")
        engine_timeout_s = parse_duration(engine_timeout, "--engine-timeout")
    except SpecError as e:
        fail(str(e))
    state = state_dir or default_state_dir()
    with user_errors():
        server = build_server(
            state,
            db=db,
            engine=engine,
            ray_address=ray_address,
            slurm_partition=slurm_partition,
            slurm_python=slurm_python,
            shared_dir=shared_dir,
            inventory_interval=inventory_interval,
            engine_timeout=engine_timeout_s,
            gpus=gpus,
            gpu_model=gpu_model,
            node_name=node_name,
            policy=policy,
            quotas=quotas,
            preempt=preempt,
            min_runtime=min_runtime,
            budgets=budgets,
            prices=prices,
            metrics_public=metrics_public,
            run_as=run_as,
            tenant_users=tenant_user or (),
            isolate_tenants=isolate_tenants,
            allow_env=allow_env or (),
            limits=(submit_rate or None, submit_burst, max_pending or None),
            task_log_max=log_max,
            interval=interval,
            reconcile_interval=reconcile_interval,
            util_interval=util_interval,
            util_retention=retention_s,
            util_max_samples=util_max_samples or None,
            service_step=service_step,
            idle=idle,
            resize_cost=resize_cost_s,
        )
    log_target = log if log is not None else str(server.state / LOG_FILE)
    fmt = "%(asctime)s %(name)s %(levelname)s %(message)s"
    if log_target == "-":
        logging.basicConfig(level=logging.INFO, format=fmt)
    else:
        fd = os.open(log_target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        logging.basicConfig(level=logging.INFO, format=fmt, filename=log_target)
    url = f"http://{host}:{port}/v1"
    typer.echo(
        f"suanli serve: {server.describe} · state {server.state} · {url}"
        + (f" · admin token written to {server.token_file}" if server.token_file else "")
        + (f" · log {log_target}" if log_target != "-" else ""),
        err=True,
    )
    uv = uvicorn.Server(
        uvicorn.Config(server.app, host=host, port=port, log_level="warning", access_log=False)
    )
    died: list[BaseException] = []

    def scheduler() -> None:
        try:
            server.controller.run(server.stop, server.wake, interval)
        except BaseException as e:  # noqa: BLE001 - reported, and the server exits on it
            died.append(e)
            logging.getLogger("suanli.control").exception("the scheduler loop stopped")
        finally:
            if not server.stop.is_set():
                uv.should_exit = True  # the API must not go on without its scheduler

    def announce() -> None:
        while not server.stop.is_set():
            if uv.started and server.controller.health.state == "running":
                typer.echo(f"suanli serve: ready at {url}", err=True)
                return
            time.sleep(0.05)

    loop = threading.Thread(target=scheduler, name="suanli-scheduler", daemon=True)
    loop.start()
    sampler = server.sampler.start(server.stop) if server.sampler is not None else None
    threading.Thread(target=announce, name="suanli-ready", daemon=True).start()
    try:
        uv.run()
    finally:
        stopped_by_loop = not server.stop.is_set() and not loop.is_alive()
        server.stop.set()
        server.wake.set()
        loop.join(timeout=30)
        if sampler is not None:
            sampler.join(timeout=30)
        server.close()
    if died or stopped_by_loop:
        why = f"{type(died[0]).__name__}: {died[0]}" if died else "it returned"
        typer.echo(f"suanli serve: the scheduler loop stopped ({why}): exiting", err=True)
        raise typer.Exit(1)


@dataclass
class Server:
    """Everything ``suanli serve`` runs, built and wired (for tests too)."""

    store: Store
    backend: Any
    controller: Controller
    metrics: ControlMetrics
    config: ControlConfig
    token_file: Path | None
    describe: str
    state: Path
    app: Any = None
    sampler: UtilSampler | None = None
    """The GPU utilisation sampler (None: off), run on a thread of its own."""
    stop: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        if self.app is not None:
            self.app.state.submissions.close()  # answers what is queued, then stops
        self.backend.close()
        self.store.close()


def build_server(
    state: Path,
    *,
    db: str | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    slurm_partition: str = "suanli",
    slurm_python: str | None = None,
    shared_dir: Path | None = None,
    inventory_interval: float = 10.0,
    engine_timeout: float = 600.0,
    gpus: int | None = None,
    gpu_model: str | None = None,
    node_name: str | None = None,
    policy: str = "fifo+best-fit",
    quotas: Path | None = None,
    preempt: bool = False,
    min_runtime: float = 600.0,
    budgets: Path | None = None,
    prices: Path | None = None,
    metrics_public: bool = False,
    backend: Any = None,
    clock: Any = time.time,
    run_as: str | None = None,
    tenant_users: Any = (),
    isolate_tenants: bool = False,
    allow_env: Any = (),
    limits: tuple[float | None, int, int | None] = (50.0, 200, 10_000),
    task_log_max: int = 64 << 20,
    interval: float = 1.0,
    reconcile_interval: float = 30.0,
    scratch: Path | None = None,
    euid: int | None = None,
    util_interval: float = 10.0,
    util_retention: float | None = 7 * 86_400.0,
    util_max_samples: int | None = 1_000_000,
    util_reader: GpuUseReader | None = None,
    service_step: float = 10.0,
    idle: IdlePolicy | None = None,
    resize_cost: float = 30.0,  # suanli.core.elastic.DEFAULT_RESIZE_COST
) -> Server:
    """Open the store, take the inventory, and build the controller, backend and API.

    ``limits`` is (submissions a second, burst, pending jobs) per tenant (None: no limit);
    ``euid`` stands in for the process's effective uid (tests). GPU utilisation is sampled
    every ``util_interval`` seconds (0: not at all) through NVML when the GPUs are NVML's;
    ``util_reader`` replaces NVML with another reader (tests: a stand-in for hardware that
    is not there; there is no command-line option or API for it)."""
    from suanli.api.app import create_app
    from suanli.backends.base import loader_variables
    from suanli.backends.gpu_util import NvmlReader, nvml_present
    from suanli.backends.inventory import declared, detect
    from suanli.backends.inventory import telemetry as nvml_telemetry
    from suanli.backends.local import LocalBackend
    from suanli.config.budgets import load_budgets
    from suanli.config.tenancy import load_tenancy
    from suanli.control.identity import RunAs
    from suanli.control.intake import Intake, Limits
    from suanli.control.loop import ControlConfig, Controller
    from suanli.control.metrics import ControlMetrics
    from suanli.control.sampler import UtilSampler
    from suanli.core.budget import BudgetBook
    from suanli.core.builder import PolicySet
    from suanli.core.model import SpecError
    from suanli.core.preemption import PreemptionConfig
    from suanli.metering.costmodel import PriceBookCostModel
    from suanli.metering.prices import load_price_book
    from suanli.store import jobs as js
    from suanli.store import open_store
    from suanli.store.tokens import create_token, list_tokens

    state = state.absolute()
    try:
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(state, 0o700)  # the database, tokens and task files are the server's alone
    except OSError as e:
        raise SpecError(f"--state-dir {state}: cannot create it: {e.strerror or e}") from None
    identity = RunAs.of(run_as, tenant_users, euid=euid, isolate_tenants=isolate_tenants)
    allowed = frozenset(allow_env)
    not_loader = sorted(allowed - set(loader_variables(allowed)))
    if not_loader:
        raise SpecError(f"--allow-env: not a loader variable: {', '.join(not_loader)} "
                        "(jobs set any other variable without it)")  # fmt: skip
    if engine not in ("local", "ray", "slurm"):
        raise SpecError(f"--backend: local, ray or slurm, got {engine!r}")
    if (gpus is None) != (gpu_model is None) and not (gpus == 0 and gpu_model is None):
        raise SpecError("--gpus and --gpu-model go together (--gpus 0 for a CPU-only node)")
    if engine != "slurm" and (slurm_python is not None or slurm_partition != "suanli"):
        raise SpecError("--slurm-partition and --slurm-python are for --backend slurm")
    on_engine = None
    if engine in ("ray", "slurm"):
        if engine == "slurm" and ray_address is not None:
            raise SpecError("--ray-address is for --backend ray")
        on_engine = remote_engine(
            engine, ray_address, (slurm_partition, slurm_python), shared_dir, state, gpus,
            node_name, backend, engine_timeout,
        )  # fmt: skip
        inventory = None
    elif ray_address is not None or shared_dir is not None:
        raise SpecError("--ray-address and --shared-dir are for --backend ray or slurm")
    else:
        inventory = detect(node_name=node_name) if gpus is None else None
        if inventory is None:
            inventory = declared(gpus or 0, gpu_model, node_name=node_name)
    if db is None:
        store = open_store(_private_sqlite(state / DB_FILE))
    elif "://" not in db:  # a SQLite file named by its path
        store = open_store(_private_sqlite(Path(db)))
    else:
        store = open_store(db)
    now_ms = round(clock() * 1000)
    if on_engine is not None:
        from suanli.control.inventory import merged_cluster, node_rows

        # Nodes stored by an earlier run and gone now stay, unhealthy: what ran there is
        # restored and found lost.
        known = [stored_node(row) for row, _ in js.list_nodes(store) if row.source == engine]
        cluster = merged_cluster(engine, on_engine.inventory(), known)
        js.sync_inventory(store, *node_rows(cluster.nodes, engine), now_ms)
    else:
        assert inventory is not None
        cluster = inventory.cluster("local")
        node = inventory.node
        js.sync_inventory(
            store,
            [
                js.NodeRow(
                    node.name,
                    node.gpus,
                    node.gpu_model.name if node.gpu_model is not None else None,
                    node.gpu_model.memory_mib if node.gpu_model is not None else 0,
                    node.cpu_milli,
                    node.memory_mib,
                    node.healthy,
                    inventory.source,
                )
            ],
            [js.GpuRow(node.name, g.index, g.model, g.uuid, g.memory_mib) for g in inventory.gpus],
            now_ms,
        )
    tenancy = load_tenancy(quotas) if quotas is not None else None
    book = load_price_book(prices) if prices is not None else None
    budget_book = None
    if budgets is not None:
        if book is None:
            raise SpecError("--budgets: needs --prices FILE (budgets are in money)")
        models = [m.name for m in cluster.gpu_models]
        # Live times are epoch seconds (epoch 0), priced from now on.
        cost = PriceBookCostModel(book, cluster.name, 0, models, earliest_ms=round(clock() * 1000))
        budget_book = BudgetBook(load_budgets(budgets, epoch_s=0), cost)
    policy_set = PolicySet.parse(policy)
    policy_set.check()
    config = ControlConfig(
        cluster=cluster,
        policy=policy_set,
        tenancy=tenancy,
        preemption=PreemptionConfig(min_runtime=min_runtime) if preempt else None,
        budgets=budget_book,
        prices=book,
        run_as=identity,
        allowed_env=allowed,
        log_max_bytes=task_log_max,
        reconcile_interval_s=reconcile_interval,
        service_step_s=service_step,
        idle=idle,
        resize_cost_s=resize_cost,
        inventory_interval_s=inventory_interval,
    )
    token_file = None
    if not list_tokens(store):
        token, _ = create_token(
            store, name="bootstrap", role="admin", tenant=None, user="admin", now_ms=now_ms
        )
        token_file = state / TOKEN_FILE
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    if on_engine is not None:
        runs = on_engine
    else:
        runs = LocalBackend(state / "runs", scratch=scratch) if backend is None else backend
    metrics = ControlMetrics(
        queues=[q.name for q in tenancy.tenancy.queues] if tenancy is not None else None
    )
    controller = Controller(store, config, runs, clock=clock, metrics=metrics)
    reader: GpuUseReader | None = util_reader
    if on_engine is not None:
        controller.inventory_source = engine
        reader, sampling = None, f"off: tasks run on the {engine.capitalize()} cluster's nodes"
    elif util_interval <= 0:
        reader, sampling = None, "off: --util-interval 0"
    elif reader is not None:
        sampling = str(getattr(reader, "name", type(reader).__name__))
    elif inventory is not None and inventory.source == "nvml":
        reader, sampling = NvmlReader(), "nvml"
    elif nvml_present():
        sampling = "off: GPUs declared with --gpus (NVML is not read for them)"
    else:
        sampling = "off: NVML not present"
    if idle is not None and reader is None:
        raise SpecError(
            f"--idle-threshold: idle GPUs are found from utilisation samples, and there are "
            f"none here ({sampling})"
        )
    sampler = None
    if reader is not None and inventory is not None:
        sampler = UtilSampler(
            store,
            reader,
            node=inventory.node.name,
            interval_s=util_interval,
            retention_s=util_retention,
            max_rows=util_max_samples,
            clock=clock,
            metrics=metrics,
        )
    server = Server(
        store=store,
        backend=runs,
        controller=controller,
        metrics=metrics,
        config=config,
        sampler=sampler,
        token_file=token_file,
        state=state,
        describe=describe(inventory, cluster, engine_name(engine, ray_address, slurm_partition)),
    )

    def log_file(job_id: str, attempt: int, task: int, stream: str) -> Path | None:
        finder = getattr(runs, "find", None)
        handle = finder(job_id, attempt, task) if finder is not None else None
        if handle is None:
            return None
        out, err = runs.log_paths(handle)
        return Path(out if stream == "stdout" else err)

    def queues() -> list[dict[str, Any]]:
        if tenancy is None:
            return []
        return [
            {
                "name": q.name,
                "org": q.org,
                "cohort": q.cohort,
                "nominal": dict(q.nominal),
                "borrowing_limit": dict(q.borrowing_limit),
                "lending_limit": dict(q.lending_limit),
                "weight": q.weight,
                "tenants": [q.org.strip("/")] if q.org.strip("/") else ["*"],
            }
            for q in tenancy.tenancy.queues
        ]

    def gpu_telemetry() -> dict[tuple[str, int], Any]:
        if inventory is None or inventory.source != "nvml":
            return {}  # declared GPUs have nothing to read
        samples = nvml_telemetry([g.index for g in inventory.gpus])
        return {(inventory.node.name, i): x for i, x in samples.items()}

    rate, burst, pending = limits
    intake = Intake(
        cluster,
        config.setting,
        tenancy=tenancy,
        state_dir=state,
        shared_dir=on_engine.shared if on_engine is not None else None,
        run_as=identity,
        allowed_env=allowed,
        limits=Limits(rate, burst, pending),
        pending_counts=lambda: js.pending_by_tenant(store),
    )
    stale_s = max(30.0, STALE_PASSES * interval)
    capacity = capacity_of(cluster)

    def new_cluster(changed: ClusterSpec) -> None:
        """Nodes joined the engine's cluster: the intake and the gauges take them in."""
        from suanli.core.builder import Refusals

        intake.refusals = Refusals(changed, config.setting)
        capacity.clear()
        capacity.update(capacity_of(changed))

    controller.on_cluster = new_cluster

    def health() -> str | None:
        h = controller.health
        last = "" if h.error is None else f" (last error: {h.error})"
        if h.state in ("failed", "stopped"):
            return f"the loop has {h.state}{last}"
        if h.state == "starting":
            return f"starting: recovering its state{last}"
        idle = time.monotonic() - (h.last_pass or 0.0)
        if idle > stale_s:
            return f"no pass completed for {idle:.0f} s{last}"
        return None

    def gpu_counts() -> tuple[dict[str, float], dict[str, float]]:
        claimed = js.claimed_milli(store)
        return capacity, {m: claimed.get(m, 0) / 1000 for m in capacity}

    server.app = create_app(
        store,
        metrics=metrics,
        log_file=log_file,
        wake=server.wake.set,
        queues=queues,
        clock_ms=lambda: round(clock() * 1000),
        metrics_public=metrics_public,
        telemetry=gpu_telemetry,
        intake=intake,
        health=health,
        gpus=gpu_counts,
        gpu_sampling=sampling,
    )
    return server


def _private_sqlite(path: Path) -> Path:
    """``path``, created 0600 if new, and it and its write-ahead files made 0600: SQLite
    creates those with the database file's mode."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for suffix in ("", "-wal", "-shm", "-journal"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            os.chmod(part, 0o600)
    return path
