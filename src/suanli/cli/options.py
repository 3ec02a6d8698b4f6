"""Command-line options that several commands share, written once (same flag, same help)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

TraceDirOption = Annotated[
    Path | None,
    typer.Option(
        help="Folder of the public traces (default: $SUANLI_TRACE_DIR or ../shared/traces)."
    ),
]
"""``--trace-dir DIR``: where the public traces are."""

WorkersOption = Annotated[
    int, typer.Option(help="Processes to run replays on (default: every CPU core).")
]
"""``--workers N``: processes for a sweep's replays (0: every CPU core)."""
