"""Rating: usage records priced by a price book, as charges.

``rate(records, book)`` cuts each record's ``[start_ms, end_ms)`` at every band edge and every
version boundary of the book into **segments** and yields, for each segment and each resource
the record holds a non-zero amount of, one ``Charge``.

Contracts:

- Segments partition the record: they are contiguous, in time order, and their integer
  durations sum to the record's. A segment is maximal: its neighbours differ from it in band
  or in version. A record of zero duration is one empty segment (it can still carry network).
- Raw quantities are exact integers: ``milli-GPU × ms`` per GPU model, ``milli-core × ms``,
  ``MiB × ms`` (memory), ``MB × ms`` (storage) over the segment's duration, and network
  ``MB`` split among segments in proportion to their durations (floored), the remainder to
  the last segment, so the parts sum to the record's ``network_mb``.
- Idle GPU: when ``gpu_util`` is known and a ``gpu-idle`` rate matches (or ``gpu-idle`` is
  free), a GPU model's raw time splits into used, ``round_half_even(raw × util)``, charged as
  ``gpu``, and idle, the rest, charged as ``gpu`` with ``waste=True`` at the ``gpu-idle``
  rate. ``util`` is read as its shortest decimal form and clamped into [0, 1] (telemetry can
  overshoot); NaN counts as unknown. Without a matching ``gpu-idle`` rate all of it is ``gpu``.
- ``amount = raw × rate / unit`` exactly, rounded half-even to ``MONEY_QUANTUM`` once per
  charge (integer arithmetic, so no intermediate rounding at all); ``quantity`` is
  ``raw / unit`` rounded half-even to ``QUANTITY_QUANTUM``.
- Keys come from ``charge_key``; rating the same records again yields equal charges, in the
  same order (segments in time order; per segment GPU models in the record's order, then
  cpu, memory, storage, network).
- A usage no rate matches raises ``RatingError`` naming the record and the usage, unless the
  resource is ``free`` in the book (then it is charged at rate 0).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal
from typing import NamedTuple

from suanli.core.model import SpecError
from suanli.metering.charges import MONEY_QUANTUM, QUANTITY_QUANTUM, Charge, charge_key
from suanli.metering.prices import (
    GPU_IDLE,
    MINUTES_PER_WEEK,
    PriceBook,
    PriceVersion,
    format_instant,
)
from suanli.metering.usage import (
    CPU_HOUR,
    GPU_HOUR,
    MEMORY_GIB_HOUR,
    NETWORK_GB,
    STORAGE_GB_HOUR,
    UsageRecord,
)

__all__ = ["RatingError", "Segment", "rate", "segments"]

_MINUTE_MS = 60_000
_HOUR_MS = 3_600_000
_DAY_MS = 86_400_000
_WEEK_MS = 7 * _DAY_MS
_MONDAY_MS = 4 * _DAY_MS  # 1970-01-05, the first Monday after the epoch (a Thursday)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)

# Priced units as integers (see suanli.metering.usage).
_GPU_UNIT = int(GPU_HOUR)
_CPU_UNIT = int(CPU_HOUR)
_MEMORY_UNIT = int(MEMORY_GIB_HOUR)
_STORAGE_UNIT = int(STORAGE_GB_HOUR)
_NETWORK_UNIT = int(NETWORK_GB)
_UNITS = {
    "gpu": _GPU_UNIT,
    GPU_IDLE: _GPU_UNIT,
    "cpu": _CPU_UNIT,
    "memory": _MEMORY_UNIT,
    "storage": _STORAGE_UNIT,
    "network": _NETWORK_UNIT,
}
_MONEY_EXP = int(MONEY_QUANTUM.as_tuple().exponent)  # -6: amounts in micro-units
_QUANTITY_EXP = int(QUANTITY_QUANTUM.as_tuple().exponent)
_MONEY_SCALE = 10**-_MONEY_EXP
_QUANTITY_SCALE = 10**-_QUANTITY_EXP
_EXACT = Context(prec=200)  # wide enough that scaling an integer amount never rounds


class RatingError(SpecError):
    """A usage record the price book cannot price (no version in effect, no matching rate)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch ``[start_ms, end_ms)`` of one band under one version of the book."""

    start_ms: int
    end_ms: int
    band: str
    version: PriceVersion


def segments(book: PriceBook, start_ms: int, end_ms: int) -> list[Segment]:
    """The segments of ``[start_ms, end_ms)`` (see the module docstring). ``RatingError`` if
    the interval starts before the book's first version or ends before it starts."""
    cal = _Calendar(book)
    cal.check(start_ms, end_ms, f"interval [{start_ms}, {end_ms})")
    return [
        Segment(a, b, book.bands[bi].name, book.versions[vi])
        for a, b, bi, vi in cal.cut(start_ms, end_ms)
    ]


def rate(records: Iterable[UsageRecord], book: PriceBook) -> Iterator[Charge]:
    """The charges of ``records`` under ``book``, record by record (see the module docstring).

    Band timelines and rate lookups are cached for the duration of the call, so pass records
    in large batches; the charges do not depend on how records are batched or ordered."""
    rater = _Rater(book)
    for r in records:
        yield from rater.record(r)


class _Rater:
    """Rates records under one book, with the book's band timelines and prices cached."""

    def __init__(self, book: PriceBook) -> None:
        self.calendar = _Calendar(book)
        self.prices = _Prices(book)
        self.currency = book.currency
        self.band_names = book.band_names
        self.version_names = tuple(v.name for v in book.versions)

    def record(self, r: UsageRecord) -> Iterator[Charge]:
        s, e = r.start_ms, r.end_ms
        rk = r.key
        self.calendar.check(s, e, f"record {rk!r}")
        if min(r.cpu_milli, r.memory_mib, r.storage_mb, r.network_mb) < 0 or any(
            m < 0 for _, m in r.gpu
        ):
            raise RatingError(f"record {rk!r}: negative quantity")
        cuts = self.calendar.cut(s, e)
        gpu = _gpu_by_model(r.gpu)
        util = _util_ratio(r.gpu_util)
        total = e - s
        net_given = 0
        last = len(cuts) - 1
        price = self.prices.get
        make = self.charge
        cls, cluster = r.priority_class, r.cluster
        head = (rk, r.job_id, r.attempt, r.org, r.queue, cls, cluster)
        for k, (a, b, bi, vi) in enumerate(cuts):
            dur = b - a
            band, version = self.band_names[bi], self.version_names[vi]
            for model, milli in gpu:
                raw = milli * dur
                if not raw:
                    continue
                used = raw
                idle_price = None
                if util is not None:
                    idle_price = price(rk, vi, GPU_IDLE, model, cls, bi, cluster, False)
                    if idle_price is not None:
                        used = _half_even(raw * util[0], util[1])
                if used:
                    p = price(rk, vi, "gpu", model, cls, bi, cluster, True)
                    yield make(head, "gpu", model, band, version, a, b, used, p, False)
                if idle_price is not None and raw > used:
                    yield make(
                        head, "gpu", model, band, version, a, b, raw - used, idle_price, True
                    )
            for resource, qty in (
                ("cpu", r.cpu_milli),
                ("memory", r.memory_mib),
                ("storage", r.storage_mb),
            ):
                if qty and dur:
                    p = price(rk, vi, resource, "", cls, bi, cluster, True)
                    yield make(head, resource, "", band, version, a, b, qty * dur, p, False)
            if r.network_mb:
                net = r.network_mb - net_given if k == last else r.network_mb * dur // total
                net_given += net
                if net:
                    p = price(rk, vi, "network", "", cls, bi, cluster, True)
                    yield make(head, "network", "", band, version, a, b, net, p, False)

    def charge(
        self,
        head: tuple[str, str, int, str, str, str, str],
        resource: str,
        model: str,
        band: str,
        version: str,
        a: int,
        b: int,
        raw: int,
        price: _Price | None,
        waste: bool,
    ) -> Charge:
        """One charge of ``raw`` at ``price``; ``head`` is the record's (key, job id, attempt,
        org, queue, priority class, cluster)."""
        assert price is not None  # a required lookup raises rather than return None
        rk, job_id, attempt, org, queue, cls, cluster = head
        # Half-even rounding of raw / unit and raw × rate / unit, inlined (the hot path).
        q, rem = divmod(raw * _QUANTITY_SCALE, price.unit)
        rem += rem
        if rem > price.unit or (rem == price.unit and q & 1):
            q += 1
        m, rem = divmod(raw * price.mul, price.div)
        rem += rem
        if rem > price.div or (rem == price.div and m & 1):
            m += 1
        # Positional in the field order of Charge (charges.py), which is measurably faster
        # than keywords for a 21-field dataclass; test_charge_fields_come_from_the_record
        # checks every field by name.
        return Charge(
            charge_key(rk, resource, model, a, waste),
            rk,
            job_id,
            attempt,
            org,
            queue,
            cls,
            cluster,
            resource,
            model,
            band,
            a,
            b,
            raw,
            Decimal(q).scaleb(_QUANTITY_EXP, _EXACT),
            price.rate,
            Decimal(m).scaleb(_MONEY_EXP, _EXACT),
            self.currency,
            version,
            waste,
        )


# --------------------------------------------------------------------------------------------
# Exact arithmetic
# --------------------------------------------------------------------------------------------


def _half_even(num: int, den: int) -> int:
    """``num / den`` rounded to the nearest integer, ties to even (``num >= 0``, ``den > 0``)."""
    q, r = divmod(num, den)
    twice = 2 * r
    if twice > den or (twice == den and q & 1):
        q += 1
    return q


def _util_ratio(util: float | None) -> tuple[int, int] | None:
    """``util`` as an exact fraction of its shortest decimal form, clamped into [0, 1]."""
    if util is None:
        return None
    if util != util:  # NaN: not measured after all
        return None
    num, den = Decimal(repr(min(max(util, 0.0), 1.0))).as_integer_ratio()
    return num, den


def _gpu_by_model(gpu: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    """Milli-GPU per model, one entry per model (first-appearance order), so keys are unique."""
    if len(gpu) < 2:
        return list(gpu)
    merged: dict[str, int] = {}
    for model, milli in gpu:
        merged[model] = merged.get(model, 0) + milli
    return list(merged.items())


class _Price(NamedTuple):
    """A rate per priced unit of one resource, with what the exact amount needs: the amount
    of ``raw`` in units of ``MONEY_QUANTUM`` is ``raw × mul / div`` (``rate = num / den``,
    ``mul = num × 10**6``, ``div = den × unit``), rounded half-even once."""

    rate: Decimal
    mul: int
    div: int
    unit: int


class _Prices:
    """Rate lookups of one book, cached by usage (a lookup scans a version's rows)."""

    def __init__(self, book: PriceBook) -> None:
        self.book = book
        self.cache: dict[tuple[int, str, str, str, int, str], _Price | None] = {}

    def get(
        self,
        record_key: str,
        vi: int,
        resource: str,
        model: str,
        cls: str,
        bi: int,
        cluster: str,
        required: bool,
    ) -> _Price | None:
        """The price of the usage; ``None`` if nothing matches and it is not ``required``;
        ``RatingError`` if nothing matches, it is required and the resource is not free."""
        key = (vi, resource, model, cls, bi, cluster)
        try:
            hit = self.cache[key]
        except KeyError:
            hit = self.cache[key] = self._lookup(record_key, *key)
        if hit is None and required:
            raise self._missing(record_key, *key)
        return hit

    def _lookup(
        self, record_key: str, vi: int, resource: str, model: str, cls: str, bi: int, cluster: str
    ) -> _Price | None:
        book = self.book
        version = book.versions[vi]
        band = book.bands[bi].name
        try:
            price = version.price(resource, model, cls, band, cluster)
        except SpecError as e:
            raise RatingError(f"record {record_key!r}: version {version.name!r}: {e}") from None
        if price is None:
            if resource not in book.free:
                return None
            price = Decimal(0)
        num, den = price.as_integer_ratio()
        unit = _UNITS[resource]
        return _Price(price, num * _MONEY_SCALE, den * unit, unit)

    def _missing(
        self, record_key: str, vi: int, resource: str, model: str, cls: str, bi: int, cluster: str
    ) -> RatingError:
        version = self.book.versions[vi]
        usage = f"resource {resource}"
        if model:
            usage += f", gpu_model {model!r}"
        usage += f", priority_class {cls!r}, band {self.book.bands[bi].name!r}, cluster {cluster!r}"
        return RatingError(
            f"record {record_key!r}: no rate in version {version.name!r} for {usage} "
            f"(add a rate row that matches, or list {resource} under free)"
        )


# --------------------------------------------------------------------------------------------
# Band edges and version boundaries
# --------------------------------------------------------------------------------------------


class _Calendar:
    """Band timelines of a book, one per UTC day, cached.

    A day's timeline is the list of instants in it where the band changes (its first entry is
    the day's start) with the band from each. Within a stretch of constant UTC offset, local
    time is ``utc + offset`` and the band follows the weekly minute table; offset changes are
    found by sampling the offset hourly and bisecting to the millisecond where it changes (so
    this assumes no zone changes its offset twice within one hour, true of all of tzdata)."""

    def __init__(self, book: PriceBook) -> None:
        self.book = book
        self.zone = book.zone
        self.week = book.week
        w = book.week
        # (minute of the week, band from it) wherever the band differs from the minute before.
        self.changes = [(m, w[m]) for m in range(MINUTES_PER_WEEK) if w[m] != w[m - 1]]
        self.effective = book.effective_ms
        self.days: dict[int, tuple[list[int], list[int]]] = {}

    def check(self, start_ms: int, end_ms: int, what: str) -> None:
        if end_ms < start_ms:
            raise RatingError(f"{what}: ends ({end_ms}) before it starts ({start_ms})")
        if start_ms < self.effective[0]:
            first = self.book.versions[0]
            raise RatingError(
                f"{what}: starts at {format_instant(start_ms)}, before the price book's first version "
                f"({first.name!r}, effective {format_instant(first.effective_ms)})"
            )

    def offset(self, t: int) -> int:
        """The zone's UTC offset at instant ``t``, in ms."""
        off = (_EPOCH + timedelta(milliseconds=t)).astimezone(self.zone).utcoffset()
        assert off is not None
        return off // _ONE_MS

    def band_of_local(self, local_ms: int) -> int:
        return self.week[((local_ms - _MONDAY_MS) // _MINUTE_MS) % MINUTES_PER_WEEK]

    def day(self, d: int) -> tuple[list[int], list[int]]:
        hit = self.days.get(d)
        if hit is not None:
            return hit
        lo = d * _DAY_MS
        hi = lo + _DAY_MS
        # Stretches [a, b) of constant UTC offset covering the day.
        stretches: list[tuple[int, int, int]] = []
        a, prev_t = lo, lo
        prev_o = self.offset(lo)
        for t in [lo + k * _HOUR_MS for k in range(1, 24)] + [hi - 1]:
            o = self.offset(t)
            if o != prev_o:
                x, y = prev_t, t  # offset(x) == prev_o != offset(y): first change in (x, y]
                while y - x > 1:
                    mid = (x + y) // 2
                    if self.offset(mid) == prev_o:
                        x = mid
                    else:
                        y = mid
                stretches.append((a, y, prev_o))
                a, prev_o = y, o
            prev_t = t
        stretches.append((a, hi, prev_o))
        starts: list[int] = []
        bands: list[int] = []
        for a, b, o in stretches:
            la, lb = a + o, b + o
            band = self.band_of_local(la)
            if not bands or bands[-1] != band:
                starts.append(a)
                bands.append(band)
            base = _MONDAY_MS + (la - _MONDAY_MS) // _WEEK_MS * _WEEK_MS
            for week in (base, base + _WEEK_MS):  # a day's local span meets at most two weeks
                for m, cb in self.changes:
                    t = week + m * _MINUTE_MS
                    if la < t < lb and cb != bands[-1]:
                        starts.append(t - o)
                        bands.append(cb)
        self.days[d] = (starts, bands)
        return starts, bands

    def cut(self, s: int, e: int) -> list[tuple[int, int, int, int]]:
        """``(start, end, band index, version index)`` of each segment of ``[s, e)``; the
        caller has checked ``s`` against the first version (``check``)."""
        d = s // _DAY_MS
        starts, bands = self.day(d)
        i = bisect_right(starts, s) - 1
        band = bands[i]
        # Band changes in (s, e).
        changes: list[tuple[int, int]] = []
        cur = band
        last_day = (e - 1) // _DAY_MS
        while True:
            for j in range(i + 1, len(starts)):
                t = starts[j]
                if t >= e:
                    break
                if bands[j] != cur:
                    changes.append((t, bands[j]))
                    cur = bands[j]
            else:
                d += 1
                if d <= last_day:
                    starts, bands = self.day(d)
                    i = -1
                    continue
            break
        # Version boundaries in (s, e).
        eff = self.effective
        vi = bisect_right(eff, s) - 1
        nv = vi + 1
        if not changes and (nv >= len(eff) or eff[nv] >= e):
            return [(s, e, band, vi)]
        bounds: list[int] = []
        while nv < len(eff) and eff[nv] < e:
            bounds.append(eff[nv])
            nv += 1
        out: list[tuple[int, int, int, int]] = []
        a, p, q = s, 0, 0
        never = e + 1
        while p < len(changes) or q < len(bounds):
            t = min(
                changes[p][0] if p < len(changes) else never,
                bounds[q] if q < len(bounds) else never,
            )
            out.append((a, t, band, vi))
            if p < len(changes) and changes[p][0] == t:
                band = changes[p][1]
                p += 1
            if q < len(bounds) and bounds[q] == t:
                vi += 1
                q += 1
            a = t
        out.append((a, e, band, vi))
        return out
