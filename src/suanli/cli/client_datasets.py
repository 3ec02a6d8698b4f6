"""``suanli datasets [list|put|rm]``: the copies of data sets a member holds, which a
federation front reads (``GET /v1/datasets``), through the API. Admins only."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

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

datasets_app = typer.Typer(
    name="datasets",
    help="The copies of data sets this member holds or is being sent, as a federation front "
    "reads them (admins). Without a command: list them.",
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode=None,
)

NameArgument = Annotated[str, typer.Argument(help="The data set's name.")]


@datasets_app.callback()
def datasets_command(
    ctx: typer.Context,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the copies held here."""
    if ctx.invoked_subcommand is None:
        _list(Client.of(server, token).get("/v1/datasets"), as_json)


@datasets_app.command("list")
def list_(
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the copies held here: size, present or arriving (and when), from where."""
    _list(Client.of(server, token).get("/v1/datasets"), as_json)


def _list(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    rows = ((d["name"], f"{d['gb']:,.6g}", d["state"], d["arrives_at"] or "-", d["source"] or "-",
             d["updated_by"]) for d in data["datasets"])  # fmt: skip
    print_rows(("DATASET", "GB", "STATE", "ARRIVES", "FROM", "BY"), rows)


@datasets_app.command("put")
def put(
    name: NameArgument,
    gb: Annotated[float, typer.Option(help="Its size in GB.")],
    arriving_in: Annotated[
        float | None,
        typer.Option(help="On its way, due in this many seconds (else: here now)."),
    ] = None,
    source: Annotated[str | None, typer.Option(help="Where it comes from (a member).")] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Record a copy of a data set here (a present copy stays present)."""
    body: dict[str, Any] = {"gb": gb}
    if arriving_in is not None:
        body.update(state="arriving", arrives_in_s=arriving_in)
    if source is not None:
        body["source"] = source
    got = Client.of(server, token).send("PUT", f"/v1/datasets/{quote(name, safe='')}", json=body)
    got = got.json()
    if as_json:
        print_json(got)
        return
    due = f", due {got['arrives_at']}" if got["arrives_at"] else ""
    typer.echo(f"data set {got['name']}: {got['state']}{due}")


@datasets_app.command("rm")
def rm(
    name: NameArgument,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
) -> None:
    """Forget the copy held here (the data evicted)."""
    Client.of(server, token).delete(f"/v1/datasets/{quote(name, safe='')}")
    typer.echo(f"data set {name}: forgotten here")
