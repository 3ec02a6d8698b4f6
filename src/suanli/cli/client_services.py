"""``suanli service create|demand|show|list|delete``: online services, through the API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from suanli.cli.client_http import (
    DEFAULT_SERVER,
    Client,
    JsonOption,
    ServerOption,
    TokenOption,
    console,
    print_json,
    print_rows,
    when,
)

service_app = typer.Typer(
    name="service",
    help="Online services: replicas sized by an autoscaler from the demand reported.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

TenantOption = Annotated[str | None, typer.Option("--tenant", help="Admins: the service's tenant.")]


def _path(name: str, tail: str = "") -> str:
    return f"/v1/services/{quote(name, safe='')}{tail}"


def _params(tenant: str | None) -> dict[str, Any]:
    return {"tenant": tenant} if tenant else {}


@service_app.command("create")
def create(
    spec: Annotated[Path, typer.Argument(help="The service (YAML or JSON; docs/serve.md).")],
    name: Annotated[str | None, typer.Option("--name", help="Its name (else the file's).")] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a service from a spec file: its replica, mu, slo and autoscaler."""
    from suanli.cli.client import load_spec

    body = load_spec(spec)
    if name is not None:
        body["name"] = name
    made = Client.of(server, token).post("/v1/services", body)
    if as_json:
        print_json(made)
        return
    typer.echo(
        f"service {made['name']} created for tenant {made['tenant']}: "
        f"{made['min_replicas']} to {made['max_replicas']} replicas ({made['autoscaler']})"
    )


@service_app.command("demand")
def demand(
    name: Annotated[str, typer.Argument(help="The service.")],
    rate: Annotated[float, typer.Argument(help="Requests a second it sees now.", min=0)],
    tenant: TenantOption = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Report the request rate a service sees now."""
    client = Client.of(server, token)
    got = client.send(
        "POST", _path(name, "/demand"), json={"rate": rate}, params=_params(tenant)
    ).json()
    if as_json:
        print_json(got)
        return
    typer.echo(f"service {got['name']}: reported {rate:g} requests/s")


@service_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The service.")],
    tenant: TenantOption = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a service: desired and running replicas, the latest demand, its replica jobs."""
    from rich.table import Table

    svc = Client.of(server, token).get(_path(name), **_params(tenant))
    if as_json:
        print_json(svc)
        return
    req = svc["spec"]["request"]
    fields = Table(box=None, show_header=False, pad_edge=False)
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    demand = "-" if svc["demand"] is None else f"{svc['demand']:g} requests/s"
    rows = [
        ("service", svc["name"]), ("tenant", svc["tenant"]), ("user", svc["user"]),
        ("autoscaler", svc["autoscaler"]),
        ("replicas", f"{svc['min_replicas']} to {svc['max_replicas']}"),
        ("desired", "-" if svc["desired"] is None else str(svc["desired"])),
        ("running", str(svc["running"])), ("starting", str(svc["starting"])),
        ("demand", f"{demand} (at {when(svc['demand_at'])})" if svc["demand_at"] else demand),
        ("model", f"mu {req['mu']:g}/s per replica, P{req['slo_quantile'] * 100:g} latency "
                  f"<= {req['slo']:g} s, cold start {req['cold_start']:g} s"),
        ("replica jobs", ", ".join(f"{r['job']} ({r['state']})" for r in svc["replicas"])
         or "-"),
        ("created", when(svc["created_at"])),
    ]  # fmt: skip
    for k, v in rows:
        fields.add_row(k, v)
    console().print(fields)


@service_app.command("list")
def list_(
    tenant: TenantOption = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List services (your tenant's), desired and running replicas and the latest demand."""
    data = Client.of(server, token).get("/v1/services", **_params(tenant))
    if as_json:
        print_json(data)
        return
    rows = (
        (s["name"], s["autoscaler"], "-" if s["desired"] is None else str(s["desired"]),
         str(s["running"]), str(s["starting"]), f"{s['min_replicas']}-{s['max_replicas']}",
         "-" if s["demand"] is None else f"{s['demand']:g}", s["tenant"])
        for s in data["services"]
    )  # fmt: skip
    columns = ("SERVICE", "AUTOSCALER", "DESIRED", "RUNNING", "STARTING", "BOUNDS",
               "DEMAND/s", "TENANT")  # fmt: skip
    print_rows(columns, rows, right=("DESIRED", "RUNNING", "STARTING", "DEMAND/s"))


@service_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The service.")],
    tenant: TenantOption = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a service: its replicas are cancelled."""
    got = Client.of(server, token).send("DELETE", _path(name), params=_params(tenant)).json()
    if as_json:
        print_json(got)
        return
    typer.echo(f"service {got['name']} deleted; its {len(got['replicas'])} replicas cancelled")
