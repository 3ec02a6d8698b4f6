"""The ``suanli`` app: ``policies``, ``simulate``, ``bench``, ``bill`` and ``budget``.

Console script: ``suanli = "suanli.cli.main:main"``; also ``python -m suanli.cli.main``.
Bad input exits with code 2 and one line on stderr (see ``suanli.cli.errors``).
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

import suanli
from suanli.cli.errors import OneLineErrors

COMMANDS: dict[str, tuple[str, str]] = {
    "policies": ("suanli.cli.policies", "policies_command"),
    "simulate": ("suanli.cli.simulate", "simulate_command"),
    "predict": ("suanli.cli.predict", "predict_command"),
    "bench": ("suanli.cli.bench", "bench_app"),
    "bill": ("suanli.cli.bill", "bill_app"),
    "budget": ("suanli.cli.budget", "budget_app"),
    "serve": ("suanli.cli.serve", "serve_command"),
    "submit": ("suanli.cli.client", "submit_command"),
    "route": ("suanli.cli.route", "route_command"),
    "reroute": ("suanli.cli.route", "reroute_command"),
    "queue": ("suanli.cli.client", "queue_command"),
    "show": ("suanli.cli.client", "show_command"),
    "cancel": ("suanli.cli.client", "cancel_command"),
    "logs": ("suanli.cli.client", "logs_command"),
    "nodes": ("suanli.cli.client_nodes", "nodes_app"),
    "datasets": ("suanli.cli.client_datasets", "datasets_app"),
    "usage": ("suanli.cli.client", "usage_command"),
    "ready": ("suanli.cli.client", "ready_command"),
    "token": ("suanli.cli.client_tokens", "token_app"),
    "service": ("suanli.cli.client_services", "service_app"),
}
"""Each command's module and attribute: a command function or a ``typer.Typer`` group.

A command's module is imported only when that command runs (or help lists it), so that
``suanli bill`` does not pay for the simulator's imports (numba among them) and a client
command starts quickly."""


class _LazyCommands(OneLineErrors):
    """The app's group, loading each command of ``COMMANDS`` on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*super().list_commands(ctx), *COMMANDS]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = _load(cmd_name)
            self.add_command(command, cmd_name)
        return command


def _load(name: str) -> Any:
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    # Built as the app would build it, inside a throwaway parent, so that a group of one
    # command (``bench fgd``) stays a group.
    parent = typer.Typer(add_completion=False, rich_markup_mode=None)
    if isinstance(target, typer.Typer):
        parent.add_typer(target, name=name)
    else:  # a command function may name its click class (submit's notes where '--' was)
        parent.command(name, cls=getattr(target, "click_class", None))(target)
    parent.callback()(lambda: None)
    return typer.main.get_command(parent).commands[name]  # type: ignore[attr-defined]


app = typer.Typer(
    cls=_LazyCommands,
    name="suanli",
    help="suanli (算力): compute scheduling for AI data centres.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"suanli {suanli.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """suanli (算力): compute scheduling for AI data centres."""


def main() -> None:
    """Console-script entry point."""
    app(prog_name="suanli")


if __name__ == "__main__":
    main()
