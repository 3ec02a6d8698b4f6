"""Bad input ends a command with one line on stderr and exit code 2, never a traceback.

Two sources of bad input:
- command-line parsing (an unknown option, ``--jobs abc``): ``OneLineErrors``, the app's group
  class, prints the parser's message on one line;
- values the domain rejects (an impossible cluster spec, an unknown policy, a job no node can
  hold): command bodies run inside ``user_errors()``, which turns those exceptions into the
  same one-line message.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from suanli.core.model import SpecError
from suanli.core.registry import UnknownPolicyError
from suanli.traces.errors import (
    TraceFormatError,
    TraceNotFoundError,
    TraceUseError,
    UnknownTraceError,
)

USAGE_EXIT = 2
PROG = "suanli"

USER_ERRORS: tuple[type[BaseException], ...] = (
    SpecError,
    UnknownPolicyError,
    TraceFormatError,
    TraceNotFoundError,
    TraceUseError,
    UnknownTraceError,
)
"""Exceptions that mean the input was wrong (``ImpossibleJobError`` is a ``SpecError``)."""


def one_line(message: str) -> str:
    """``message`` with its lines joined by spaces (and surrounding blanks stripped)."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def fail(message: str) -> NoReturn:
    """Print ``suanli: error: <message>`` on stderr and exit with code 2."""
    typer.echo(f"{PROG}: error: {one_line(message)}", err=True)
    raise typer.Exit(USAGE_EXIT)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn ``USER_ERRORS`` raised inside the block into ``fail``."""
    try:
        yield
    except USER_ERRORS as e:
        fail(str(e))


def _is_click_exception(e: BaseException) -> bool:
    # Typer vendors Click in recent versions and uses the real one in older ones; its public
    # API exports neither exception base, so match it by name along the class hierarchy.
    return any(c.__name__ == "ClickException" for c in type(e).__mro__)


class OneLineErrors(TyperGroup):
    """The app's group: parser errors as one line on stderr, exit code 2 (help stays help)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except Exception as e:
            if not _is_click_exception(e):
                raise
            code = int(getattr(e, "exit_code", USAGE_EXIT))
            if type(e).__name__ == "NoArgsIsHelpError":  # bare ``suanli``: the help text
                typer.echo(e.format_message(), err=True)  # type: ignore[attr-defined]
                sys.exit(code)
            ctx = getattr(e, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"{PROG}: error: {one_line(e.format_message())}{hint}", err=True)  # type: ignore[attr-defined]
            sys.exit(code)
        sys.exit(rv if isinstance(rv, int) else 0)
