"""What running a job costs under a price book: the core's ``CostModel`` for budgets.

``PriceBookCostModel(book, cluster, epoch_ms, cluster_models)`` prices a job on ``cluster``
with the same rows rating uses (``suanli.metering.prices``): per task, ``gpus × gpu_milli /
1000`` GPUs at the ``gpu`` rate of the job's GPU model, ``cpu_milli / 1000`` cores at the
``cpu`` rate and ``memory_mib / 1024`` GiB at the ``memory`` rate, times the job's task
count, for the job's priority class (class multipliers included) and the band and version in
effect; prices are per hour. Caller time ``t`` (seconds) is the instant ``epoch_ms + t ×
1000`` (epoch milliseconds, rounded to the millisecond).

Contracts:

- ``cost(job, model, t0, t1)`` integrates the rate over ``[t0, t1)``, cut at every band edge
  and version boundary exactly as rating cuts a usage record (``rating.segments``), and is
  rounded half-even to ``MONEY_QUANTUM`` once. Rates are >= 0, so the cost never decreases
  as ``t1`` grows.
- A job's GPU model unknown (``None``): the dearest model it may use, per band and version
  (its ``gpu_models`` that the cluster has, else its ``gpu_models``, else every model in
  ``cluster_models``; with none of these, the ``gpu`` row that matches any model).
- Allocated GPU time is priced at the ``gpu`` rate whatever the job's utilisation: budgets
  admit on what a job holds. (The ledger may charge an idle part at the ``gpu-idle`` rate.)
- **Off-peak** is the book's ``default`` band (every minute no window lists), plus a band
  literally named ``off-peak``, unless ``off_peak_bands`` names the bands. ``next_off_peak``
  finds the next start from the band timeline (never by scanning minutes); ``off_peak`` of
  its answer is true.
- A usage no rate row matches raises ``CostModelError`` naming it, unless the resource is
  ``free`` in the book (then it costs 0), as rating does; so is an instant before the book's
  first version. Both are configuration errors, so the constructor checks ``epoch_ms``.
"""

from __future__ import annotations

import difflib
import math
from bisect import bisect_right
from collections.abc import Iterable
from decimal import Context, Decimal, localcontext

from suanli.core.model import Job, SpecError, TaskRequest
from suanli.metering.charges import MONEY_QUANTUM
from suanli.metering.prices import PriceBook, format_instant
from suanli.metering.rating import segments
from suanli.metering.usage import MS_PER_HOUR

__all__ = ["CostModelError", "PriceBookCostModel"]

OFF_PEAK = "off-peak"
"""A band of this name is off-peak, besides the default band."""

_DAY_MS = 86_400_000
_SEARCH_DAYS = 9  # a week of local time, plus room for a DST shift and the partial first day
_EXACT = Context(prec=60)  # price × milli-units × ms never needs more digits than this

# (start_ms, end_ms, band index, version index) of each segment of one UTC day.
_Timeline = tuple[tuple[int, ...], tuple[tuple[int, int, int, int], ...]]


class CostModelError(SpecError):
    """A job the price book cannot price (no version in effect, no rate row for a usage)."""


class PriceBookCostModel:
    """Job costs on ``cluster`` under ``book`` (see the module docstring).

    ``epoch_ms`` is the epoch millisecond that caller time 0 stands for; it must not precede
    the book's first version, unless ``earliest_ms`` says from when on jobs are priced (a live
    control plane's times are epoch seconds, so its epoch is 1970 and its earliest instant
    the moment it starts). ``cluster_models`` are the GPU models the cluster has (for jobs
    whose placement is not known yet); ``off_peak_bands`` overrides which bands are off-peak.
    Band timelines are cached per UTC day and rates per (job shape, priority class, GPU
    model, version, band), so one model should serve a whole run."""

    def __init__(
        self,
        book: PriceBook,
        cluster: str,
        epoch_ms: int,
        cluster_models: Iterable[str] = (),
        off_peak_bands: Iterable[str] | None = None,
        earliest_ms: int | None = None,
    ) -> None:
        self.book = book
        self.cluster = cluster
        self.epoch_ms = int(epoch_ms)
        self.currency = book.currency
        self.cluster_models = frozenset(cluster_models)
        first = book.effective_ms[0]
        earliest = self.epoch_ms if earliest_ms is None else int(earliest_ms)
        if earliest < first:
            what = "epoch" if earliest_ms is None else "the earliest instant priced"
            raise CostModelError(
                f"{what} {format_instant(earliest)} is before the price book's first "
                f"version ({book.versions[0].name!r}, effective {format_instant(first)})"
            )
        names = book.band_names
        if off_peak_bands is None:
            off = {b.name for b in book.bands if b.default or b.name == OFF_PEAK}
        else:
            off = set(off_peak_bands)
            for name in sorted(off):
                if name not in names:
                    close = difflib.get_close_matches(name, names, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise CostModelError(
                        f"off-peak band {name!r} is not a band of the price book{hint} "
                        f"(bands: {', '.join(names)})"
                    )
        self.off_peak_bands = frozenset(off)
        self._off = frozenset(k for k, name in enumerate(names) if name in off)
        self._band_index = {name: k for k, name in enumerate(names)}
        self._version_index = {v.name: k for k, v in enumerate(book.versions)}
        self._days: dict[int, _Timeline] = {}
        self._prices: dict[tuple[int, str, str, str, int], Decimal] = {}
        self._hourly: dict[tuple[TaskRequest, int, str, str | None, int, int], Decimal] = {}

    # ---------------------------------------------------------------- the CostModel
    def rate(self, job: Job, gpu_model: str | None, t: float) -> Decimal:
        """Money per second for the whole job at ``t``."""
        bi, vi = self._locate(self._ms(t))
        with localcontext(_EXACT):
            return self._hourly_rate(job, gpu_model, vi, bi) / 3600

    def cost(self, job: Job, gpu_model: str | None, t0: float, t1: float) -> Decimal:
        """Money for running the whole job over ``[t0, t1)``, rounded to ``MONEY_QUANTUM``."""
        a, b = self._ms(t0), self._ms(t1)
        if b <= a:
            return Decimal(0)
        with localcontext(_EXACT):
            total = Decimal(0)  # price per hour × ms
            for s, e, bi, vi in self._cut(a, b):
                total += self._hourly_rate(job, gpu_model, vi, bi) * (e - s)
            return (total / MS_PER_HOUR).quantize(MONEY_QUANTUM)

    def off_peak(self, t: float) -> bool:
        """Whether the band at ``t`` is off-peak."""
        return self._locate(self._ms(t))[0] in self._off

    def next_off_peak(self, t: float) -> float:
        """``t`` if off-peak now, else when the next off-peak band starts; ``math.inf`` if
        the book has no off-peak minute."""
        if not self._off:
            return math.inf
        ms = self._ms(t)
        if self._locate(ms)[0] in self._off:
            return t
        day = ms // _DAY_MS
        for d in range(day, day + _SEARCH_DAYS):
            for s, _e, bi, _vi in self._day(d)[1]:
                if s > ms and bi in self._off:
                    # (s - epoch) / 1000 maps back to exactly s in _ms, so off_peak() agrees.
                    return (s - self.epoch_ms) / 1000
        return math.inf

    # ---------------------------------------------------------------- time
    def _ms(self, t: float) -> int:
        return self.epoch_ms + round(t * 1000)

    def _day(self, d: int) -> _Timeline:
        hit = self._days.get(d)
        if hit is not None:
            return hit
        first = self.book.effective_ms[0]
        lo, hi = d * _DAY_MS, (d + 1) * _DAY_MS
        if hi <= first:
            raise CostModelError(
                f"{format_instant(lo)} is before the price book's first version "
                f"({self.book.versions[0].name!r}, effective {format_instant(first)})"
            )
        segs = tuple(
            (s.start_ms, s.end_ms, self._band_index[s.band], self._version_index[s.version.name])
            for s in segments(self.book, max(lo, first), hi)
        )
        hit = self._days[d] = (tuple(s[0] for s in segs), segs)
        return hit

    def _locate(self, ms: int) -> tuple[int, int]:
        """(band index, version index) at instant ``ms``."""
        starts, segs = self._day(ms // _DAY_MS)
        k = bisect_right(starts, ms) - 1
        if k < 0:
            first = self.book.versions[0]
            raise CostModelError(
                f"{format_instant(ms)} is before the price book's first version "
                f"({first.name!r}, effective {format_instant(first.effective_ms)})"
            )
        _s, _e, bi, vi = segs[k]
        return bi, vi

    def _cut(self, a: int, b: int) -> Iterable[tuple[int, int, int, int]]:
        """Segments of ``[a, b)``: pieces of one band and one version."""
        if a < self.book.effective_ms[0]:
            self._locate(a)  # raises: before the first version
        for d in range(a // _DAY_MS, (b - 1) // _DAY_MS + 1):
            for s, e, bi, vi in self._day(d)[1]:
                lo, hi = max(s, a), min(e, b)
                if lo < hi:
                    yield lo, hi, bi, vi

    # ---------------------------------------------------------------- prices
    def _hourly_rate(self, job: Job, gpu_model: str | None, vi: int, bi: int) -> Decimal:
        """Money per hour for the whole job in version ``vi`` and band ``bi``."""
        task = job.task
        key = (task, job.tasks, job.priority_class, gpu_model, vi, bi)
        hit = self._hourly.get(key)
        if hit is not None:
            return hit
        cls, n = job.priority_class, job.tasks
        gpu_milli = task.gpu_share_milli * n
        with localcontext(_EXACT):
            total = Decimal(0)
            if gpu_milli:
                models = (gpu_model,) if gpu_model is not None else self._candidates(task)
                per_gpu = max(self._price(vi, "gpu", m, cls, bi) for m in models)
                total += per_gpu * gpu_milli / 1000
            if task.cpu_milli:
                total += self._price(vi, "cpu", "", cls, bi) * (task.cpu_milli * n) / 1000
            if task.memory_mib:
                total += self._price(vi, "memory", "", cls, bi) * (task.memory_mib * n) / 1024
        self._hourly[key] = total
        return total

    def _candidates(self, task: TaskRequest) -> tuple[str, ...]:
        allowed = task.gpu_models
        if allowed and self.cluster_models:
            both = allowed & self.cluster_models
            return tuple(sorted(both or allowed))
        if allowed or self.cluster_models:
            return tuple(sorted(allowed or self.cluster_models))
        return ("",)

    def _price(self, vi: int, resource: str, model: str, cls: str, bi: int) -> Decimal:
        key = (vi, resource, model, cls, bi)
        hit = self._prices.get(key)
        if hit is not None:
            return hit
        version = self.book.versions[vi]
        band = self.book.bands[bi].name
        price = version.price(resource, model, cls, band, self.cluster)
        if price is None:
            if resource not in self.book.free:
                usage = f"resource {resource}"
                if model:
                    usage += f", gpu_model {model!r}"
                raise CostModelError(
                    f"no rate in price book version {version.name!r} for {usage}, "
                    f"priority_class {cls!r}, band {band!r}, cluster {self.cluster!r} "
                    f"(add a rate row that matches, or list {resource} under free)"
                )
            price = Decimal(0)
        self._prices[key] = price
        return price
