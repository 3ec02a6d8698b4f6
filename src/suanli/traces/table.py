"""The CSV reading every trace reader shares: header check, row loop, cell parsers, timestamps.

A reader states its required and optional columns and gives a row parser; :func:`read_rows`
opens the file, checks the header, feeds every data row to the parser and turns a
:class:`RowError` raised by it into a :class:`TraceFormatError` with the file and line, or,
with ``skip_bad_rows``, into an entry of the :class:`SkipReport`.

Wholly blank lines (a trailing empty line, as ``philly_jobs.csv`` ends with) are not rows and
are passed over; every other line is a row that is read or reported.
"""

from __future__ import annotations

import csv
import gc
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import TypeAlias, TypeVar

from suanli.traces.errors import MissingColumnsError, SkipReport, TraceFormatError

T = TypeVar("T")

RowParser: TypeAlias = Callable[[list[str], int], T]
"""A row parser: the cells of one data row and its line number in, one value out (or RowError)."""

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class RowError(Exception):
    """A fault in one row, raised by a row parser; :func:`read_rows` adds the file and line."""

    def __init__(self, message: str, column: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Header:
    """A file's header: its path, column names (stripped of spaces) and their positions."""

    path: Path
    columns: tuple[str, ...]
    index: Mapping[str, int]

    def has(self, column: str) -> bool:
        return column in self.index


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many long-lived objects.

    Tens of thousands of new jobs otherwise trigger collections that re-scan all of them;
    none of them form cycles. The collector is switched back on only if it was on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def read_header(path: Path) -> tuple[str, ...]:
    """The column names of a CSV file's first line, stripped of spaces (empty for an empty file)."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        first = next(csv.reader(f), [])
    return tuple(c.strip() for c in first)


def read_rows(
    path: str | Path,
    required: Sequence[str],
    optional: Sequence[str],
    make_parser: Callable[[Header], RowParser[T]],
    *,
    skip_bad_rows: bool,
    strip: bool = False,
) -> tuple[list[T], SkipReport | None, Header]:
    """Read ``path``: check the header, parse every data row, raise or report bad rows.

    ``make_parser`` gets the checked header and returns the row parser (so that parsers can
    look column positions up once). Columns beyond ``required`` and ``optional`` are ignored.
    ``strip`` drops spaces around every cell (for files written with ``", "`` separators).
    Returns the parsed rows in file order, the skip report (None unless ``skip_bad_rows``) and
    the header.
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        first = next(reader, None)
        if first is None or not any(c.strip() for c in first):
            raise TraceFormatError(
                path, 1, f"empty header, expected the columns {', '.join(required)}"
            )
        columns = tuple(c.strip() for c in first)
        seen: set[str] = set()
        for c in columns:
            if c in seen:
                raise TraceFormatError(path, 1, f"column {c!r} appears twice in the header")
            seen.add(c)
        missing = [c for c in required if c not in seen]
        if missing:
            raise MissingColumnsError(path, missing, columns)
        header = Header(path, columns, {c: i for i, c in enumerate(columns)})
        parse = make_parser(header)
        width = len(columns)
        out: list[T] = []
        report = SkipReport(files=(path.name,)) if skip_bad_rows else None
        for row in reader:
            if len(row) != width:
                if not row or not any(c.strip() for c in row):
                    continue  # a blank line, not a row
                err = TraceFormatError(
                    path,
                    reader.line_num,
                    f"expected {width} columns, got {len(row)}",
                    reason="wrong number of columns",
                )
                if report is None:
                    raise err
                report.add(err)
                continue
            if strip:
                row = [c.strip() for c in row]
            try:
                out.append(parse(row, reader.line_num))
            except RowError as e:
                err = TraceFormatError(
                    path, reader.line_num, e.message, column=e.column, reason=e.reason
                )
                if report is None:
                    raise err from None
                report.add(err)
        if report is not None:
            report.rows_read = len(out) + report.rows_skipped
    return out, report, header


# ------------------------------------------------------------------------------------------
# Cell parsers: each raises RowError naming the column, what was expected and what was found.
# ------------------------------------------------------------------------------------------


def _range_text(kind: str, lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{kind} in {lo:g}..{hi:g}"
    if lo is not None:
        return f"{kind} >= {lo:g}"
    if hi is not None:
        return f"{kind} <= {hi:g}"
    return kind


def parse_int(text: str, column: str, lo: int | None = 0, hi: int | None = None) -> int:
    """An integer cell in ``lo..hi`` (either bound None: open)."""
    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
        expected = "expected " + _range_text("an integer", lo, hi)
        raise RowError(f"{expected}, got {text!r}", column, expected)
    return v


def parse_float(
    text: str, column: str, lo: float | None = 0.0, hi: float | None = None, *, above: bool = False
) -> float:
    """A finite number cell in ``lo..hi``; with ``above`` the lower bound is exclusive."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    bad = not math.isfinite(v)
    if not bad and lo is not None:
        bad = v <= lo if above else v < lo
    if not bad and hi is not None:
        bad = v > hi
    if bad:
        if above and lo is not None:
            what = f"a number > {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        else:
            what = _range_text("a number", lo, hi)
        expected = "expected " + what
        raise RowError(f"{expected}, got {text!r}", column, expected)
    return v


def parse_name(text: str, column: str) -> str:
    """A non-empty text cell."""
    if not text.strip():
        raise RowError("expected a non-empty value, got ''", column, "expected a non-empty value")
    return text


class TimestampParser:
    """Parses ``YYYY-MM-DD HH:MM:SS[.fraction]`` cells to seconds since 1970-01-01.

    With ``tz`` None the wall-clock time is taken as it stands (no time zone, no daylight
    saving); with a ``tzinfo`` it is a local time in that zone. Without a zone the seconds of
    each distinct ``YYYY-MM-DD HH`` are cached, so a file of many rows costs a dictionary
    lookup and two small integer conversions per cell.
    """

    _EXPECTED = "expected a timestamp YYYY-MM-DD HH:MM:SS[.fraction]"

    def __init__(self, tz: tzinfo | None = None) -> None:
        self.tz = tz
        self._hours: dict[str, float] = {}

    def _bad(self, text: str, column: str) -> RowError:
        return RowError(f"{self._EXPECTED}, got {text!r}", column, self._EXPECTED)

    def _hour(self, text: str, column: str) -> float:
        """Seconds at ``YYYY-MM-DD HH:00:00`` (wall clock, or in ``tz``), checked."""
        if len(text) < 13 or text[4] != "-" or text[7] != "-" or text[10] not in " T":
            raise self._bad(text, column)
        parts = (text[:4], text[5:7], text[8:10], text[11:13])
        if not all(p.isdigit() for p in parts):
            raise self._bad(text, column)
        y, mo, d, h = (int(p) for p in parts)
        try:
            if self.tz is not None:
                return datetime(y, mo, d, h, tzinfo=self.tz).timestamp()
            if h > 23:
                raise ValueError
            day = date(y, mo, d).toordinal() - _EPOCH_ORDINAL
        except ValueError:
            raise self._bad(text, column) from None
        base = float(day * 86400 + h * 3600)
        self._hours[text[:13]] = base
        return base

    def __call__(self, text: str, column: str) -> float:
        base = self._hours.get(text[:13])
        if base is None:
            base = self._hour(text, column)
        mm, ss = text[14:16], text[17:19]
        if (
            len(text) < 19
            or text[13] != ":"
            or text[16] != ":"
            or not mm.isdigit()
            or not ss.isdigit()
            or mm > "59"
            or ss > "59"
        ):
            raise self._bad(text, column)
        t = base + int(mm) * 60 + int(ss)
        if len(text) > 19:
            frac = text[20:]
            if text[19] != "." or not frac.isdigit():
                raise self._bad(text, column)
            t += int(frac) / 10 ** len(frac)
        return t
