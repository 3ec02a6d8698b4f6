"""Finding the directory of public traces (``openb/``, ``philly/``, ``itp/``, ...)."""

from __future__ import annotations

import os
from pathlib import Path

from suanli.traces.errors import TraceNotFoundError

ENV_VAR = "SUANLI_TRACE_DIR"
"""The environment variable naming the trace directory."""

RELATIVE = Path("..") / "shared" / "traces"
"""Where the traces sit relative to a checkout: beside it, in ``shared/traces``."""


def _repository_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``pyproject.toml`` or ``.git``."""
    for parent in (start, *start.parents):
        if (parent / "pyproject.toml").is_file() or (parent / ".git").exists():
            return parent
    return None


def find_trace_dir(explicit: str | Path | None = None) -> Path:
    """The trace directory, looked for in this order:

    1. ``explicit``, when given (it must exist: no fallback past an explicit choice);
    2. the ``SUANLI_TRACE_DIR`` environment variable, when set (same rule);
    3. ``../shared/traces`` relative to the current directory;
    4. ``../shared/traces`` relative to the repository root, found by walking up from this
       package's file to the first directory with ``pyproject.toml`` or ``.git``.

    Raises :class:`TraceNotFoundError` naming every place looked at.
    """
    if explicit is not None:
        path = Path(explicit).expanduser()
        if path.is_dir():
            return path.resolve()
        raise TraceNotFoundError([("the path given", path)])
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            return path.resolve()
        raise TraceNotFoundError([(f"${ENV_VAR}", path)])
    places: list[tuple[str, Path]] = [("the current directory", Path.cwd() / RELATIVE)]
    root = _repository_root(Path(__file__).resolve().parent)
    if root is not None:
        places.append(("the repository root", root / RELATIVE))
    for _, path in places:
        if path.is_dir():
            return path.resolve()
    return_places = [(why, p.resolve()) for why, p in places]
    raise TraceNotFoundError([(f"${ENV_VAR}", Path("(not set)")), *return_places])
