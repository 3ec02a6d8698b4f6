"""Pieces of ``suanli serve``'s set-up that are not the wiring itself: its ``--config`` file,
the Ray and Slurm engines and their inventory, and the one line the server starts with."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from suanli.core.model import ClusterSpec, NodeSpec


def config_file(ctx: typer.Context, param: Any, value: Path | None) -> Path | None:
    """``--config FILE``: a YAML mapping of serve's options (``backend: ray``,
    ``ray-address: head:6379``, ``preempt: true``, ...) made the defaults; options given on
    the command line still win. Read first (an eager option), so every other option sees it."""
    if value is None:
        return None
    import yaml

    try:
        loaded = yaml.safe_load(value.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise typer.BadParameter(f"{value}: {' '.join(str(e).split())}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise typer.BadParameter(f"{value}: must be a mapping of option names to values")
    by_flag = {o: p.name for p in ctx.command.params for o in p.opts if o.startswith("--")}
    defaults = {}
    for key, setting in loaded.items():
        flag = "--" + str(key).replace("_", "-")
        name = by_flag.get(flag)
        if name is None or name == "config":
            raise typer.BadParameter(f"{value}: {key!r} is not an option of suanli serve")
        defaults[name] = setting
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def capacity_of(cluster: ClusterSpec) -> dict[str, float]:
    """GPUs per model (healthy or not: a node that left may return)."""
    out: dict[str, float] = {}
    for n in cluster.nodes:
        if n.gpu_model is not None:
            out[n.gpu_model.name] = out.get(n.gpu_model.name, 0.0) + n.gpus
    return out


def engine_name(engine: str, ray_address: str | None, partition: str) -> str:
    """What a remote engine is called in the line ``suanli serve`` starts with."""
    return f"Ray cluster {ray_address}" if engine == "ray" else f"Slurm partition {partition}"


def describe(inventory: Any, cluster: ClusterSpec, engine: str) -> str:
    """The one line ``suanli serve`` starts with: what it schedules onto."""
    if inventory is None:
        gpus = sum(n.gpus for n in cluster.nodes if n.healthy)
        models = sorted({n.gpu_model.name for n in cluster.nodes if n.gpu_model is not None})
        live = sum(1 for n in cluster.nodes if n.healthy)
        kinds = f" ({', '.join(models)})" if models else ""
        return f"{engine}: {live} nodes, {gpus} GPUs{kinds}"
    node = inventory.node
    if node.gpu_model is None:
        return f"node {node.name}: no GPUs"
    return f"node {node.name}: {node.gpus} × {node.gpu_model.name} ({inventory.source})"


def stored_node(row: Any) -> NodeSpec:
    """A node of the stored inventory, as the scheduler's (for one an engine no longer has)."""
    from suanli.config.cluster import _known_model
    from suanli.core.model import GpuModel, NodeSpec

    model = None
    if row.gpu_model is not None:
        base = _known_model(row.gpu_model)
        speed = base.speed if base is not None else 1.0
        model = GpuModel(row.gpu_model, row.gpu_memory_mib, speed)
    return NodeSpec(row.name, row.gpus, model, row.cpu_milli, row.memory_mib, healthy=False)


def remote_engine(
    engine: str,
    address: str | None,
    slurm: tuple[str, str | None],
    shared: Path | None,
    state: Path,
    gpus: int | None,
    node_name: str | None,
    backend: Any,
    engine_timeout: float,
) -> Any:
    """The backend for ``--backend ray`` or ``--backend slurm`` (``backend``, a test's, if
    given)."""
    from suanli.control.identity import inside
    from suanli.core.model import SpecError

    if gpus is not None or node_name is not None:
        raise SpecError(f"--gpus, --gpu-model and --node-name: the {engine.capitalize()} "
                        "cluster says its nodes")  # fmt: skip
    if engine == "ray" and address is None:
        raise SpecError("--backend ray: needs --ray-address HOST:PORT")
    if shared is None:
        raise SpecError(f"--backend {engine}: needs --shared-dir DIR, a path every node sees at "
                        "the same place (run directories, logs, checkpoints)")  # fmt: skip
    if inside(str(shared), state) or inside(str(state), shared):
        raise SpecError(f"--shared-dir {shared}: must not lie in the state directory {state} "
                        "nor contain it (tasks on every node write there)")  # fmt: skip
    if backend is not None:
        return backend
    if engine == "slurm":
        import sys

        from suanli.backends.slurm_backend import SlurmBackend

        partition, python = slurm
        return SlurmBackend(shared, partition=partition, python=python or sys.executable,
                            outage_timeout_s=engine_timeout)  # fmt: skip
    from suanli.backends.ray_backend import RayBackend

    assert address is not None
    return RayBackend(address, shared, outage_timeout_s=engine_timeout)
