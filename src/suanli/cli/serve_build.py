"""``suanli serve``'s wiring: the store, the inventory, the backend (local, Ray or Slurm),
the controller, the sampler and the API, built from the command's options into a
:class:`Server` (``build_server``; tests build one the same way). The command itself, its
options and its threads, is ``suanli.cli.serve``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suanli.cli.serve_setup import (
    capacity_of,
    describe,
    engine_name,
    remote_engine,
    stored_node,
)

if TYPE_CHECKING:
    from suanli.backends.gpu_health import GpuHealthReader
    from suanli.backends.gpu_util import GpuUseReader
    from suanli.control.health_watch import HealthWatch
    from suanli.control.loop import ControlConfig, Controller
    from suanli.control.metrics import ControlMetrics
    from suanli.control.sampler import UtilSampler
    from suanli.core.idle import IdlePolicy
    from suanli.core.model import ClusterSpec
    from suanli.store import Store

TOKEN_FILE = "admin.token"
DB_FILE = "suanli.db"
STALE_PASSES = 20
"""``/healthz`` reports the loop unwell after this many intervals (at least 30 s) without a
completed pass."""


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
    health: HealthWatch | None = None
    """The GPU health watch (None: off), run on a thread of its own."""
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
    preemption_policy: str = "checkpoint-aware",
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
    health_interval: float = 5.0,
    health_reader: GpuHealthReader | None = None,
    service_step: float = 10.0,
    idle: IdlePolicy | None = None,
    resize_cost: float = 30.0,  # suanli.core.elastic.DEFAULT_RESIZE_COST
) -> Server:
    """Open the store, take the inventory, and build the controller, backend and API.

    ``limits`` is (submissions a second, burst, pending jobs) per tenant (None: no limit);
    ``euid`` stands in for the process's effective uid (tests). GPU utilisation is sampled
    every ``util_interval`` seconds (0: not at all) through NVML when the GPUs are NVML's;
    ``util_reader`` replaces NVML with another reader (tests: a stand-in for hardware that
    is not there; there is no command-line option or API for it). GPU health is read every
    ``health_interval`` seconds (0: not at all) through NVML when the GPUs are NVML's, or
    through ``health_reader`` (tests: a stand-in)."""
    from suanli.api.app import create_app
    from suanli.backends.base import loader_variables
    from suanli.backends.gpu_health import NvmlHealth
    from suanli.backends.gpu_util import NvmlReader, nvml_present
    from suanli.backends.inventory import declared, detect
    from suanli.backends.inventory import telemetry as nvml_telemetry
    from suanli.backends.local import LocalBackend
    from suanli.config.budgets import load_budgets
    from suanli.config.tenancy import load_tenancy
    from suanli.control.health_watch import HealthWatch
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
    if preemption_policy != "checkpoint-aware":
        if not preempt:
            raise SpecError("--preemption-policy: only with --preempt")
        from suanli.core.registry import UnknownPolicyError, check

        try:
            check("preemption", preemption_policy)
        except UnknownPolicyError as e:
            raise SpecError(f"--preemption-policy: {e}") from None
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
        preemption=(
            PreemptionConfig(min_runtime=min_runtime, policy=preemption_policy) if preempt else None
        ),  # fmt: skip
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
    watch = None
    if inventory is not None and health_interval > 0 and on_engine is None:
        checks = health_reader
        if checks is None and inventory.source == "nvml":
            checks = NvmlHealth()
        if checks is not None:
            watch = HealthWatch(
                store,
                checks,
                node=inventory.node.name,
                gpus={g.index: g.uuid for g in inventory.gpus},
                interval_s=health_interval,
                clock=clock,
            )
            controller.health_probe = watch.probe
    server = Server(
        store=store,
        backend=runs,
        controller=controller,
        metrics=metrics,
        config=config,
        sampler=sampler,
        health=watch,
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
        what_if=controller.ask_what_if,
        withdraw=controller.ask_withdraw,
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
