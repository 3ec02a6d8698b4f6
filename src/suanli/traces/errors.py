"""Errors of the trace readers, and the report of rows skipped with ``skip_bad_rows=True``.

A reader either reads every data row of its file or says exactly which rows it did not read:
by default the first bad row raises :class:`TraceFormatError`; with ``skip_bad_rows=True`` the
reader goes on and returns a :class:`SkipReport` beside its result (the ``skipped`` attribute).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class TraceFormatError(ValueError):
    """A trace file that does not read as its format says.

    ``line`` is 1-based with the header on line 1; ``column`` names the column at fault (None
    when the row or the file as a whole is at fault); ``message`` says what was expected and
    what was found; ``reason`` is the same without the value found, used to count skipped rows
    by kind. ``str()`` reads like::

        openb_pod_list_default.csv:17: column 'gpu_milli': expected an integer in 0..1000, got 'abc'
    """

    def __init__(
        self,
        file: str | Path,
        line: int,
        message: str,
        *,
        column: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.file = Path(file)
        self.line = line
        self.column = column
        self.message = message
        self.reason = reason if reason is not None else message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file.name}:{self.line}: "
        if self.column is not None:
            where += f"column {self.column!r}: "
        return where + self.message

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_format_error,
            (self.file, self.line, self.message, self.column, self.reason),
        )

    @property
    def kind(self) -> str:
        """The key this error is counted under in a :class:`SkipReport`."""
        return f"column {self.column!r}: {self.reason}" if self.column is not None else self.reason


def _rebuild_format_error(
    file: Path, line: int, message: str, column: str | None, reason: str
) -> TraceFormatError:
    return TraceFormatError(file, line, message, column=column, reason=reason)


class MissingColumnsError(TraceFormatError):
    """A header that lacks columns the reader needs; ``missing`` lists them."""

    def __init__(self, file: str | Path, missing: Sequence[str], found: Sequence[str]) -> None:
        self.missing = tuple(missing)
        self.found = tuple(found)
        names = ", ".join(repr(m) for m in self.missing)
        have = ", ".join(repr(f) for f in self.found) or "nothing"
        super().__init__(
            file,
            1,
            f"missing column{'s' if len(self.missing) > 1 else ''} {names} (the header has {have})",
            reason="missing columns",
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (MissingColumnsError, (self.file, self.missing, self.found))


class TraceNotFoundError(FileNotFoundError):
    """No trace directory where one was looked for; ``places`` lists where, in order."""

    def __init__(self, places: Sequence[tuple[str, Path]]) -> None:
        self.places = tuple(places)
        looked = "; ".join(f"{why}: {path}" for why, path in self.places)
        super().__init__(
            f"public traces not found (looked at {looked}); pass the directory explicitly "
            "or set SUANLI_TRACE_DIR"
        )

    def __str__(self) -> str:
        return str(self.args[0])


class TraceUseError(ValueError):
    """A trace or file that exists but cannot be used as asked (a machine list given as jobs, a
    pod list without times given as a schedule, a missing file named explicitly)."""


class UnknownTraceError(ValueError):
    """A trace or cluster name that the catalogue does not know; ``known`` lists the names."""

    def __init__(self, message: str, known: Iterable[str]) -> None:
        self.known = tuple(known)
        super().__init__(f"{message}; known: {', '.join(self.known)}")


@dataclass
class SkipReport:
    """The rows a reader skipped with ``skip_bad_rows=True``.

    ``rows_skipped`` counts them, ``by_reason`` counts them per kind of fault (the column and
    what was expected), ``examples`` keeps the first ``max_examples`` errors with their file
    and line, and ``rows_read`` counts the data rows that were read. A report of zero skipped
    rows says that the reader checked every row and found nothing wrong.
    """

    files: tuple[str, ...] = ()
    rows_read: int = 0
    rows_skipped: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    examples: list[TraceFormatError] = field(default_factory=list)
    max_examples: int = 5

    def add(self, error: TraceFormatError) -> None:
        """Count one skipped row."""
        self.rows_skipped += 1
        self.by_reason[error.kind] = self.by_reason.get(error.kind, 0) + 1
        if len(self.examples) < self.max_examples:
            self.examples.append(error)

    @classmethod
    def combine(cls, reports: Iterable[SkipReport | None]) -> SkipReport | None:
        """One report for several files (None if every report is None)."""
        present = [r for r in reports if r is not None]
        if not present:
            return None
        out = cls(max_examples=max(r.max_examples for r in present))
        for r in present:
            out.files += r.files
            out.rows_read += r.rows_read
            out.rows_skipped += r.rows_skipped
            for kind, n in r.by_reason.items():
                out.by_reason[kind] = out.by_reason.get(kind, 0) + n
            room = out.max_examples - len(out.examples)
            out.examples.extend(r.examples[: max(room, 0)])
        return out

    def __str__(self) -> str:
        names = ", ".join(self.files) or "no file"
        if not self.rows_skipped:
            return f"{names}: read {self.rows_read:,} rows, skipped none"
        kinds = "; ".join(
            f"{n:,} × {kind}" for kind, n in sorted(self.by_reason.items(), key=lambda kv: -kv[1])
        )
        lines = [
            f"{names}: read {self.rows_read:,} rows, skipped {self.rows_skipped:,} ({kinds})",
            *(f"  {e}" for e in self.examples),
        ]
        if self.rows_skipped > len(self.examples):
            lines.append(f"  ... and {self.rows_skipped - len(self.examples):,} more")
        return "\n".join(lines)
