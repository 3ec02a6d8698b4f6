"""Small helpers several test modules share: the public traces (or a skip saying where they
were looked for) and a command-line runner that keeps stderr apart where click can."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from suanli.traces import TraceNotFoundError, find_trace_dir


def trace_dir_or_skip() -> Path:
    """The public trace directory, or skip the test, naming every place looked at."""
    try:
        return find_trace_dir()
    except TraceNotFoundError as e:
        places = ", ".join(str(p) for _, p in e.places)
        pytest.skip(f"public traces not found in {places}: set SUANLI_TRACE_DIR")


def cli_runner() -> CliRunner:
    """A ``CliRunner`` with stdout and stderr apart (click < 8.2 needs ``mix_stderr=False``)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()
