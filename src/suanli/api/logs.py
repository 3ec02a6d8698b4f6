"""Reading a task's log file for ``GET /v1/jobs/{id}/logs``: a byte range, or the last lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

BLOCK = 65_536


def tail_offset(path: Path, lines: int, size: int) -> int:
    """The byte offset where the last ``lines`` lines of the first ``size`` bytes of
    ``path`` start (a final newline ends the last line; it does not start another)."""
    if lines <= 0 or size <= 0:
        return size
    with path.open("rb") as f:
        f.seek(size - 1)
        end = size - 1 if f.read(1) == b"\n" else size
        seen = 0
        pos = end
        while pos > 0:
            start = max(0, pos - BLOCK)
            f.seek(start)
            block = f.read(pos - start)
            i = len(block)
            while (i := block.rfind(b"\n", 0, i)) >= 0:
                seen += 1
                if seen == lines:
                    return start + i + 1
            pos = start
    return 0


def read_range(path: Path, start: int, end: int) -> Iterator[bytes]:
    """The bytes ``[start, end)`` of ``path``, in blocks."""
    with path.open("rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            data = f.read(min(BLOCK, left))
            if not data:
                break
            left -= len(data)
            yield data
