"""``suanli token create|list|revoke``: API tokens, through the API."""

from __future__ import annotations

from typing import Annotated

import typer

from suanli.cli.client_http import (
    DEFAULT_SERVER,
    Client,
    JsonOption,
    ServerOption,
    TokenOption,
    print_json,
    print_rows,
    when,
)

token_app = typer.Typer(
    name="token",
    help="Make, list and revoke API tokens (admins and tenant admins).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@token_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The token's name (for people).")],
    user: Annotated[str, typer.Option(help="The user it acts as.")],
    role: Annotated[
        str, typer.Option(help="user, tenant-admin, admin or metrics (a scraper's).")
    ] = "user",
    tenant: Annotated[
        str | None, typer.Option(help="Its tenant (default: yours; admins must give it).")
    ] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a token; it is printed this once (on stdout, alone)."""
    body = {"name": name, "user": user, "role": role, "tenant": tenant}
    made = Client.of(server, token).post("/v1/tokens", body)
    if as_json:
        print_json(made)
        return
    typer.echo(made["token"])
    typer.echo(
        f"token {made['id']} ({made['role']}, user {made['user']}, tenant "
        f"{made['tenant'] or 'all'}): shown this once, keep it safe",
        err=True,
    )


@token_app.command("list")
def list_(
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List tokens (never their secrets)."""
    data = Client.of(server, token).get("/v1/tokens")
    if as_json:
        print_json(data)
        return
    rows = (
        (str(t["id"]), t["name"], t["role"], t["tenant"] or "*", t["user"],
         when(t["created_at"]), when(t["revoked_at"]))
        for t in data["tokens"]
    )  # fmt: skip
    columns = ("ID", "NAME", "ROLE", "TENANT", "USER", "CREATED", "REVOKED")
    print_rows(columns, rows, right=("ID",))


@token_app.command("revoke")
def revoke(
    token_id: Annotated[int, typer.Argument(metavar="ID", help="The token's id.")],
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: requests with it are refused from now on."""
    info = Client.of(server, token).delete(f"/v1/tokens/{token_id}")
    if as_json:
        print_json(info)
    else:
        typer.echo(f"token {info['id']} ({info['name']}) revoked")
