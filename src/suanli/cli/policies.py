"""``suanli policies``: every plugin of every seam, ``seam/name  description``, one per line."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from suanli.core.registry import catalogue


def policies_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of {policy, description}.")
    ] = False,
) -> None:
    """List every plugin (queue, placement, admission, backfill, preemption, runtime) and what each does."""
    entries = catalogue()
    if as_json:
        doc = [{"policy": name, "description": desc} for name, desc in entries]
        typer.echo(json.dumps(doc, indent=2))
        return
    width = max((len(name) for name, _ in entries), default=0)
    for name, desc in entries:
        typer.echo(f"{name:<{width}}  {desc}".rstrip())
