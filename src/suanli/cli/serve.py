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

GPU health: with NVML's GPUs, a health thread checks them every ``--health-interval``
seconds (a GPU lost from the bus, uncorrected ECC errors, pending page retirements or row
remaps, critical XIDs); a faulty GPU is taken out of service and its attempts requeued
from their checkpoints until it is healthy again (``suanli.control.hardware``). An admin
cordons, drains and uncordons nodes with ``suanli nodes cordon|drain|uncordon``.

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
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from suanli.cli.errors import fail, user_errors
from suanli.cli.serve_build import DB_FILE, STALE_PASSES, TOKEN_FILE, Server, build_server
from suanli.cli.serve_setup import config_file

__all__ = ["DB_FILE", "STALE_PASSES", "TOKEN_FILE", "Server", "build_server", "serve_command"]

if TYPE_CHECKING:
    pass

DEFAULT_PORT = 8620
LOG_FILE = "serve.log"


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
    preemption_policy: Annotated[
        str,
        typer.Option(
            "--preemption-policy",
            help="With --preempt: the preemption/... plugin (checkpoint-aware, by-order, or "
            "defrag: also moves checkpointed work to make scattered free GPUs whole for a "
            "job that waits; docs/defrag.md).",
        ),
    ] = "checkpoint-aware",
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
    health_interval: Annotated[
        float,
        typer.Option(
            "--health-interval",
            metavar="SECONDS",
            help="Seconds between GPU health checks (NVML: lost GPUs, ECC, XIDs; 0: off).",
        ),
    ] = 5.0,
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
    if not (math.isfinite(health_interval) and (health_interval == 0 or health_interval >= 0.1)):
        fail(f"--health-interval: must be 0 (off) or at least 0.1 seconds, got {health_interval}")
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
            preemption_policy=preemption_policy,
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
            health_interval=health_interval,
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
    health = server.health.start(server.stop) if server.health is not None else None
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
        if health is not None:
            health.join(timeout=30)
        server.close()
    if died or stopped_by_loop:
        why = f"{type(died[0]).__name__}: {died[0]}" if died else "it returned"
        typer.echo(f"suanli serve: the scheduler loop stopped ({why}): exiting", err=True)
        raise typer.Exit(1)
