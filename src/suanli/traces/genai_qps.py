"""Alibaba GenAI serving demand: the request rate of one service over about 22 hours.

File: ``genai-2026/qps.csv`` (alibaba/clusterdata, ``cluster-trace-v2026-GenAI``; Lin et al.,
SoCC 2025): ``timestamp_anon, value, container_ip, request_type``. Each row is one
container's requests per second at one instant (anonymised values that keep the trend's
proportions); each container reports about every two minutes (median gap 114 s).

:func:`load_genai_demand` sums the containers into the service's load curve: on a grid of
``step`` seconds from the first sample, each container's rate is its latest sample, held
until its next one but at most ``hold`` seconds (a container that stops reporting is gone),
and the curve is the sum over containers. Only ``Generative Requests`` rows carry a
container (the 1,114 ``API Requests`` rows have none: they are not a container's load and are
left out; ``request_types`` can say otherwise).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suanli.traces.errors import TraceFormatError
from suanli.traces.table import Header, RowParser, parse_float, read_rows

QPS_FILE = Path("genai-2026") / "qps.csv"
COLUMNS = ("timestamp_anon", "value", "container_ip", "request_type")


@dataclass(frozen=True, slots=True)
class DemandCurve:
    """A service's request rate: ``rates[i]`` over ``[i step, (i + 1) step)`` from the
    first sample (``start``, the trace's own clock), and how many containers fed it."""

    rates: np.ndarray
    step: float
    start: float
    containers: int

    @property
    def span(self) -> float:
        return len(self.rates) * self.step


def load_genai_demand(
    path: str | Path,
    *,
    step: float = 60.0,
    hold: float = 600.0,
    request_types: Iterable[str] = ("Generative Requests",),
) -> DemandCurve:
    """The summed load curve of ``qps.csv`` (see the module docstring). Bad rows raise
    ``TraceFormatError`` with the file and line."""
    if not (step > 0 and hold > 0):
        raise ValueError(f"step and hold must be > 0 s, got {step} and {hold}")
    kinds = frozenset(request_types)

    def make(h: Header) -> RowParser[tuple[str, float, float] | None]:
        i_t, i_v, i_c, i_k = (h.index[c] for c in COLUMNS)

        def parse(row: list[str], line: int) -> tuple[str, float, float] | None:
            t = parse_float(row[i_t], "timestamp_anon", None)
            v = parse_float(row[i_v], "value", 0.0)
            if row[i_k] not in kinds or not row[i_c]:
                return None
            return (row[i_c], t, v)

        return parse

    rows, _, _ = read_rows(path, COLUMNS, (), make, skip_bad_rows=False)
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        if r is not None:
            samples[r[0]].append((r[1], r[2]))
    if not samples:
        raise TraceFormatError(Path(path), 1, f"no rows of request type {sorted(kinds)}")
    t0 = min(t for s in samples.values() for t, _ in s)
    t1 = max(t for s in samples.values() for t, _ in s)
    grid = np.arange(t0, t1 + step / 2, step)
    total = np.zeros(len(grid))
    for k in sorted(samples):
        s = sorted(samples[k])
        ts = np.array([t for t, _ in s])
        vs = np.array([v for _, v in s])
        i = np.searchsorted(ts, grid, side="right") - 1
        seen = i >= 0
        j = np.maximum(i, 0)
        held = np.where(seen & (grid - ts[j] <= hold), vs[j], 0.0)
        total += held
    return DemandCurve(total, step, float(t0), len(samples))


def daily(curve: DemandCurve, days: float, step: float) -> np.ndarray:
    """``curve`` stretched onto a 24-hour day and repeated for ``days`` days, on a grid of
    ``step`` seconds (linear interpolation; the trace spans about 22.3 h, so the stretch is
    about 1.08)."""
    n = int(round(days * 86400 / step))
    src_t = (np.arange(len(curve.rates)) + 0.5) / len(curve.rates)  # day fraction
    t = ((np.arange(n) + 0.5) * step % 86400) / 86400
    return np.interp(t, src_t, curve.rates, period=1.0)
