"""``suanli nodes [list|cordon|drain|uncordon]``: the nodes, their GPUs and their holds,
through the API."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from suanli.cli.client_http import (
    DEFAULT_SERVER,
    Client,
    JsonOption,
    ServerOption,
    TokenOption,
    print_json,
    print_rows,
)

nodes_app = typer.Typer(
    name="nodes",
    help="The nodes, their GPUs and how much of them is allocated; an admin cordons, drains "
    "and uncordons them. Without a command: list them.",
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode=None,
)

ReasonOption = Annotated[str, typer.Option("--reason", "-r", help="Why (shown with the node).")]
NameArgument = Annotated[str, typer.Argument(help="The node's name.")]


@nodes_app.callback()
def nodes_command(
    ctx: typer.Context,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the nodes, their GPUs and how much of them is allocated."""
    if ctx.invoked_subcommand is None:
        _list(server, token, as_json)


@nodes_app.command("list")
def list_(
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the nodes: state, GPUs (those out of service with their fault), allocation."""
    _list(server, token, as_json)


def _list(server: str, token: str | None, as_json: bool) -> None:
    data = Client.of(server, token).get("/v1/nodes")
    if as_json:
        print_json(data)
        return
    rows = (
        (
            n["name"], n.get("state", "up" if n["healthy"] else "down"), str(n["gpu_count"]),
            n["gpu_model"] or "-",
            f"{sum(g['used_milli'] for g in n['gpus']) / 1000:g}/{len(n['gpus'])}",
            f"{n['cpu_milli'] / 1000:g}", f"{n['memory_mib'] / 1024:.0f}G", n["source"],
            _notes(n),
        )
        for n in data["nodes"]
    )  # fmt: skip
    print_rows(
        ("NODE", "STATE", "GPUS", "MODEL", "GPU USED", "CPU", "MEMORY", "SOURCE", "NOTE"), rows
    )


def _notes(n: dict[str, Any]) -> str:
    """The node's hold reason and its GPUs out of service, or ``-``."""
    notes = [f"GPU {g['idx']}: {g['fault']}" for g in n["gpus"] if not g.get("healthy", True)]
    if n.get("cordon_reason"):
        notes.insert(0, n["cordon_reason"])
    return "; ".join(notes) or "-"


def _hold(action: str, name: str, body: dict[str, Any] | None, server: str,
          token: str | None, as_json: bool) -> None:  # fmt: skip
    node = Client.of(server, token).post(f"/v1/nodes/{name}/{action}", body)
    if as_json:
        print_json(node)
        return
    typer.echo(f"node {node['name']}: {node['state']}")


def _hold_command(action: str, doc: str) -> Any:
    """The ``suanli nodes ACTION NAME [--reason]`` command (cordon, drain)."""

    def command(
        name: NameArgument,
        reason: ReasonOption = "",
        server: ServerOption = DEFAULT_SERVER,
        token: TokenOption = None,
        as_json: JsonOption = False,
    ) -> None:
        _hold(action, name, {"reason": reason}, server, token, as_json)

    command.__doc__ = doc
    return nodes_app.command(action)(command)


cordon = _hold_command(
    "cordon", "Cordon a node (admins): nothing new is placed there; what runs there runs on."
)
drain = _hold_command(
    "drain",
    "Drain a node (admins): cordoned, and every attempt on it stopped as a preemption is and "
    "requeued from its checkpoint. ``draining`` until they have stopped, then ``drained``.",
)


@nodes_app.command("uncordon")
def uncordon(
    name: NameArgument,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put a cordoned or drained node back in service (admins)."""
    _hold("uncordon", name, None, server, token, as_json)
