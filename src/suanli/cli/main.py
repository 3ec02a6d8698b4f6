"""The ``suanli`` app: ``suanli policies``, ``suanli simulate``, ``suanli bench fgd``.

Console script: ``suanli = "suanli.cli.main:main"``; also ``python -m suanli.cli.main``.
Bad input exits with code 2 and one line on stderr (see ``suanli.cli.errors``).
"""

from __future__ import annotations

from typing import Annotated

import typer

import suanli
from suanli.cli.bench import bench_app
from suanli.cli.bill import bill_app
from suanli.cli.budget import budget_app
from suanli.cli.errors import OneLineErrors
from suanli.cli.policies import policies_command
from suanli.cli.simulate import simulate_command

app = typer.Typer(
    cls=OneLineErrors,
    name="suanli",
    help="suanli (算力): compute scheduling for AI data centres.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
)
app.command("policies")(policies_command)
app.command("simulate")(simulate_command)
app.add_typer(bench_app)
app.add_typer(bill_app)
app.add_typer(budget_app)


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
