"""``suanli route``: a live federation front (``suanli.federation.front``) routes one job among
member control planes and submits it to the winner with its decision attached."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from suanli.cli.client import load_spec
from suanli.cli.client_http import JsonOption, print_json, refused
from suanli.cli.errors import fail
from suanli.core.model import SpecError
from suanli.core.registry import UnknownPolicyError

RouterOption = Annotated[str, typer.Option(help="first-admit, least-loaded, cheapest or suanli.")]
FILE_HELP = "The federation file: each member's URL, admin token and prices; its data sets."


def route_command(
    spec_file: Annotated[Path, typer.Argument(help="The job's spec file (YAML or JSON).")],
    members: Annotated[
        Path,
        typer.Option(
            "--members",
            "-m",
            help=FILE_HELP,
        ),
    ],
    tenant: Annotated[
        str | None, typer.Option(help="The job's tenant (default: the spec's tenant).")
    ] = None,
    router: RouterOption = "suanli",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say where it would go; submit nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Route a job among the federation's members (each asked when it would start the job,
    and for its GPUs) and submit it to the winner, its decision attached for suanli show."""
    from suanli.federation.front import Front, load_federation

    spec = load_spec(spec_file)
    if tenant is not None:
        spec["tenant"] = tenant
    if not spec.get("tenant"):
        fail("name the job's tenant (--tenant or the spec's 'tenant'): the front submits "
             "with the members' admin tokens")  # fmt: skip
    try:
        front = Front(load_federation(members), router)
    except (SpecError, UnknownPolicyError) as e:
        fail(str(e))
    try:
        routed = front.route(spec) if dry_run else front.submit(spec)
    except SpecError as e:
        refused(str(e))
    if as_json:
        print_json({"route": routed.route.as_dict(), "job": routed.job_id,
                    "moves": [asdict(m) for m in routed.moves], "notes": list(routed.notes)})  # fmt: skip
        return
    typer.echo(routed.route.explain())
    for m in routed.moves:
        typer.echo(f"Data to move: {m.name}, {m.gb:,.6g} GB from {m.source} to {m.target} "
                   f"({m.seconds / 60:,.1f} min, ${m.usd:,.2f})")  # fmt: skip
    if routed.job_id is not None:
        typer.echo(f"Submitted job {routed.job_id} to member {routed.route.member}")
        for m in routed.moves:
            if not any(f"data set {m.name} is on its way:" in n for n in routed.notes):
                typer.echo(f"Recorded at {m.target}: data set {m.name} on its way")
        for n in routed.notes:
            typer.echo(f"Warning: {n}", err=True)
    else:
        typer.echo("Nothing was submitted (--dry-run)")


def reroute_command(
    member: Annotated[str, typer.Argument(help="The member the job waits at.")],
    job_id: Annotated[
        str | None, typer.Argument(help="The job's id there (or --all: every one due).")
    ] = None,
    members: Annotated[
        Path | None, typer.Option("--members", "-m", help=FILE_HELP)
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every pending job a front sent to the member.")
    ] = False,
    router: RouterOption = "suanli",
    force: Annotated[
        bool, typer.Option("--force", help="Whatever it has waited (not 3x its predicted wait).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Route again a job that waits at a member far longer than predicted (3 times, at
    least 30 minutes): if another member would finish it sooner, it is taken back (only
    while it has never started) and sent there, at most once. With --all, every pending
    job a front sent to the member (for a periodic run)."""
    from suanli.federation.front import Front, load_federation

    if members is None:
        fail("give the federation file: --members FILE")
    if (job_id is None) == (not every):
        fail("name one job, or give --all (not both)")
    try:
        front = Front(load_federation(members), router)
        done = (front.reroute_all(member, force) if every
                else [(str(job_id), front.reroute(member, str(job_id), force=force))])  # fmt: skip
    except (SpecError, UnknownPolicyError) as e:
        refused(str(e))
    if as_json:
        print_json([{"job": j, "moved": d.moved, "why": d.why,
                     "route": None if d.routed is None else d.routed.route.as_dict(),
                     "sent": None if d.routed is None else d.routed.job_id}
                    for j, d in done])  # fmt: skip
        return
    for j, d in done:
        if d.routed is not None and not every:
            typer.echo(d.routed.route.explain())
        typer.echo(f"{j}: {d.why}")
        if d.moved and d.routed is not None:
            typer.echo(f"{j}: submitted as job {d.routed.job_id} to member "
                       f"{d.routed.route.member}; withdrawn at {member}")  # fmt: skip
