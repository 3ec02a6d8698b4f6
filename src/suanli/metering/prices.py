"""Price books: what each resource costs, by GPU model, priority class, time-of-day band,
cluster and effective date.

``load_price_book(path)`` reads a ``.yaml``/``.yml`` file; ``price_book_from_dict(doc, where)``
reads a parsed document. Every error is a ``PriceBookError`` (a ``SpecError``) with a one-line
message naming the file, then the key path of the offending value:
``prices.yaml: versions[1].rates[3].band: unknown band 'night' (bands: peak, off-peak)``.
The format and the rating rules are described in ``docs/prices.md``.

Contracts:

- **Bands** are local times in the book's ``timezone`` (an IANA name, read by ``zoneinfo``): a
  band holds an instant when the instant's local wall-clock time falls in one of its windows.
  The windows of all bands are disjoint; one band may be the ``default``, holding every minute
  of the week no window lists. Without a default band the windows must cover the whole week.
- **Versions** apply from their ``effective`` instant (inclusive) until the next version's;
  their effective instants strictly increase. Before the first there is no price.
- **Rates**: among the rows of a version for a resource that match a usage (each of
  ``gpu_model``, ``priority_class``, ``band`` and ``cluster`` either omitted or equal), the row
  naming the most of those fields wins. Two rows that could both win for one usage are a
  ``PriceBookError`` when the version is built, so a valid book prices every usage uniquely.
- A version's ``class_multipliers`` scale a matched row's price by the usage's priority class
  unless that row names a priority class itself (its price is then final).
- Prices are exact ``Decimal`` values (``Decimal(str(x))`` of what the file says), >= 0.
"""

from __future__ import annotations

import difflib
import os
import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from itertools import combinations
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from suanli.config.yamldoc import yaml_mapping
from suanli.core.model import KeyPathError, SpecError

__all__ = [
    "DEFAULT_BAND",
    "GPU_IDLE",
    "RATE_FIELDS",
    "RATE_RESOURCES",
    "Band",
    "PriceBook",
    "PriceBookError",
    "PriceVersion",
    "Rate",
    "Window",
    "format_instant",
    "load_price_book",
    "price_book_from_dict",
]

GPU_IDLE = "gpu-idle"
"""The rate of the idle part of allocated GPU time (priced per GPU-hour, per model)."""

RATE_RESOURCES = ("gpu", GPU_IDLE, "cpu", "memory", "storage", "network")
"""Resources a rate row may price: the metered resources plus ``gpu-idle``."""

RATE_FIELDS = ("gpu_model", "priority_class", "band", "cluster")
"""The optional match fields of a rate row, in the order messages list them."""

DEFAULT_BAND = "all"
"""The single band of a book that lists no bands: every minute of the week."""

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_PER_DAY = 1440
MINUTES_PER_WEEK = 7 * MINUTES_PER_DAY

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_YAML_SUFFIXES = (".yaml", ".yml")
_TOP_KEYS = ("currency", "timezone", "bands", "free", "versions")
_VERSION_KEYS = ("name", "effective", "class_multipliers", "rates")
_RATE_KEYS = ("resource", *RATE_FIELDS, "price")
_GPU_RESOURCES = ("gpu", GPU_IDLE)
_DAY_NAMES = {name.lower(): i for i, name in enumerate(WEEKDAYS)} | {
    full: i
    for i, full in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
_WINDOW_RE = re.compile(
    r"^\s*(?:(?P<days>[A-Za-z][A-Za-z ,\-]*?)\s+)?"
    r"(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})\s*$"
)


class PriceBookError(KeyPathError):
    """An invalid price book. ``path`` is the key path of the offending value (``""`` for the
    whole book), ``problem`` what is wrong with it, ``where`` the file (``""`` when unknown)."""


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


# --------------------------------------------------------------------------------------------
# Domain values
# --------------------------------------------------------------------------------------------


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _week_minute(minute: int) -> str:
    """``Sat 10:00`` for a minute of the week counted from Monday 00:00."""
    return f"{WEEKDAYS[minute // MINUTES_PER_DAY]} {_hhmm(minute % MINUTES_PER_DAY)}"


@dataclass(frozen=True, slots=True)
class Window:
    """Local times from ``start_min`` to ``end_min`` (minutes since midnight) on each of
    ``days`` (0 = Monday). ``end_min`` is in 1..1440 (1440 = midnight at the day's end); when it
    is not after ``start_min`` the window runs past midnight and ends on the next day."""

    days: tuple[int, ...]
    start_min: int
    end_min: int

    def __post_init__(self) -> None:
        if not self.days:
            raise PriceBookError("", "a window needs at least one weekday")
        if any(not 0 <= d < 7 for d in self.days) or len(set(self.days)) != len(self.days):
            raise PriceBookError("", f"weekdays must be distinct, 0 (Mon) to 6 (Sun): {self.days}")
        if not 0 <= self.start_min < MINUTES_PER_DAY:
            raise PriceBookError("", f"start must be 00:00 to 23:59, got minute {self.start_min}")
        if not 0 < self.end_min <= MINUTES_PER_DAY:
            raise PriceBookError("", f"end must be 00:01 to 24:00, got minute {self.end_min}")
        if self.start_min == self.end_min:
            raise PriceBookError(
                "",
                f"{self}: starts and ends at the same time (write 00:00-24:00 for a whole day)",
            )

    @property
    def length_min(self) -> int:
        """Minutes the window lasts on each of its days."""
        return (self.end_min - self.start_min) % MINUTES_PER_DAY or MINUTES_PER_DAY

    def minutes(self) -> Iterator[int]:
        """The minutes of the week (from Monday 00:00 local) the window covers."""
        for day in self.days:
            first = day * MINUTES_PER_DAY + self.start_min
            for m in range(first, first + self.length_min):
                yield m % MINUTES_PER_WEEK

    def __str__(self) -> str:
        return f"{_days_text(self.days)} {_hhmm(self.start_min)}-{_hhmm(self.end_min)}"

    @classmethod
    def parse(cls, text: str) -> Window:
        """A window from ``Mon-Fri 08:00-20:00``, ``Sat,Sun 10:00-16:00`` or ``22:00-06:00``
        (no weekdays: every day). ``PriceBookError`` (with an empty path) otherwise."""
        m = _WINDOW_RE.match(text)
        if not m:
            raise PriceBookError(
                "",
                f"{text!r} is not a window such as 'Mon-Fri 08:00-20:00' "
                "(weekdays, then from-to in local 24-hour time)",
            )
        days = _parse_days(m["days"]) if m["days"] else tuple(range(7))
        return cls(days, _parse_time(m["start"], text, 23), _parse_time(m["end"], text, 24))


def _days_text(days: tuple[int, ...]) -> str:
    if len(days) == 7:
        return "daily"
    parts: list[str] = []
    run: list[int] = []
    for d in sorted(days) + [99]:
        if run and d == run[-1] + 1:
            run.append(d)
            continue
        if run:
            parts.append(
                WEEKDAYS[run[0]] if len(run) == 1 else f"{WEEKDAYS[run[0]]}-{WEEKDAYS[run[-1]]}"
            )
        run = [d]
    return ",".join(parts)


def _parse_days(text: str) -> tuple[int, ...]:
    """``Mon-Fri``, ``Sat,Sun``, ``Mon,Wed-Fri``, ``Fri-Mon`` (wraps), ``daily``."""
    if text.strip().lower() in ("daily", "all", "every day"):
        return tuple(range(7))
    days: list[int] = []
    for part in text.split(","):
        ends = [_day(p, text) for p in part.split("-")]
        if len(ends) == 1:
            span = ends
        elif len(ends) == 2:
            span = [(ends[0] + k) % 7 for k in range((ends[1] - ends[0]) % 7 + 1)]
        else:
            raise PriceBookError("", f"{text!r}: {part.strip()!r} is not a day or a range")
        for d in span:
            if d in days:
                raise PriceBookError("", f"{text!r}: {WEEKDAYS[d]} is listed twice")
            days.append(d)
    return tuple(sorted(days))


def _day(text: str, whole: str) -> int:
    key = text.strip().lower()
    if key in _DAY_NAMES:
        return _DAY_NAMES[key]
    hint = _did_you_mean(key.capitalize(), WEEKDAYS) or " (Mon, Tue, Wed, Thu, Fri, Sat, Sun)"
    raise PriceBookError("", f"{whole!r}: unknown weekday {text.strip()!r}{hint}")


def _parse_time(text: str, whole: str, max_hour: int) -> int:
    hour, minute = (int(x) for x in text.split(":"))
    if minute > 59 or hour > max_hour or (hour == 24 and minute):
        limit = "24:00" if max_hour == 24 else "23:59"
        raise PriceBookError("", f"{whole!r}: time {text} is out of range (00:00 to {limit})")
    return hour * 60 + minute


@dataclass(frozen=True, slots=True)
class Band:
    """A named time-of-day band: its ``windows``, or ``default=True`` for every minute of the
    week no other band's window lists (then it has no windows of its own)."""

    name: str
    windows: tuple[Window, ...] = ()
    default: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise PriceBookError("", "a band needs a name")
        if self.default and self.windows:
            raise PriceBookError("", "the default band covers the rest and lists no windows")
        if not self.default and not self.windows:
            raise PriceBookError(
                "", "must list at least one window (e.g. 'Mon-Fri 08:00-20:00') or be 'default'"
            )


@dataclass(frozen=True, slots=True)
class Rate:
    """One row of a version's rates: ``price`` per priced unit of ``resource`` (GPU-hour,
    core-hour, GiB-hour, GB-hour, GB) for usages that match every field given (``None``: any).
    ``gpu_model`` is only for ``gpu`` and ``gpu-idle``."""

    resource: str
    price: Decimal
    gpu_model: str | None = None
    priority_class: str | None = None
    band: str | None = None
    cluster: str | None = None

    def __post_init__(self) -> None:
        if self.resource not in RATE_RESOURCES:
            hint = _did_you_mean(self.resource, RATE_RESOURCES) or (
                " (resources: " + ", ".join(RATE_RESOURCES) + ")"
            )
            raise PriceBookError("resource", f"unknown resource {self.resource!r}{hint}")
        if self.gpu_model is not None and self.resource not in _GPU_RESOURCES:
            raise PriceBookError(
                "gpu_model", f"only gpu and gpu-idle rates name a GPU model, not {self.resource}"
            )
        for name in RATE_FIELDS:
            if getattr(self, name) == "":
                raise PriceBookError(name, "must not be empty (omit it to match any)")
        _check_amount(self.price, "price")

    @property
    def constraints(self) -> tuple[tuple[str, str], ...]:
        """The match fields this row gives, as (field, value) pairs in ``RATE_FIELDS`` order."""
        return tuple(
            (name, value) for name in RATE_FIELDS if (value := getattr(self, name)) is not None
        )

    @property
    def specificity(self) -> int:
        """How many match fields the row gives; the most specific matching row wins."""
        return len(self.constraints)

    def matches(self, gpu_model: str, priority_class: str, band: str, cluster: str) -> bool:
        return (
            (self.gpu_model is None or self.gpu_model == gpu_model)
            and (self.priority_class is None or self.priority_class == priority_class)
            and (self.band is None or self.band == band)
            and (self.cluster is None or self.cluster == cluster)
        )


def _check_amount(value: Decimal, path: str) -> None:
    if not value.is_finite():
        raise PriceBookError(path, f"must be a finite number, got {value}")
    if value < 0:
        raise PriceBookError(path, f"must be >= 0, got {value}")


def _describe(constraints: Mapping[str, str] | tuple[tuple[str, str], ...]) -> str:
    items = dict(constraints)
    if not items:
        return "any usage"
    return ", ".join(f"{k} {items[k]!r}" for k in RATE_FIELDS if k in items)


@dataclass(frozen=True, slots=True)
class PriceVersion:
    """The rates in effect from ``effective_ms`` (epoch milliseconds, UTC) until the next
    version's. ``class_multipliers`` scale a matched row's price by priority class unless the
    row names a class itself. Building one checks that no two rows can tie (see the module
    docstring); errors carry key paths relative to the version (``rates[3].band``)."""

    name: str
    effective_ms: int
    rates: tuple[Rate, ...]
    class_multipliers: Mapping[str, Decimal] = field(default_factory=dict)
    _index: dict[str, tuple[Rate, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise PriceBookError("name", "must not be empty")
        if not self.rates:
            raise PriceBookError("rates", "must list at least one rate")
        for cls, m in self.class_multipliers.items():
            _check_amount(m, f"class_multipliers.{cls}")
        _check_ties(self.rates)
        index: dict[str, list[Rate]] = {}
        for r in self.rates:
            index.setdefault(r.resource, []).append(r)
        # Most specific first, so that a lookup can stop below the first match's specificity.
        self._index.update(
            {res: tuple(sorted(rows, key=lambda r: -r.specificity)) for res, rows in index.items()}
        )

    def match(
        self, resource: str, gpu_model: str, priority_class: str, band: str, cluster: str
    ) -> Rate | None:
        """The most specific row for ``resource`` matching the usage; ``None`` if none does.
        ``gpu_model`` is ignored by rows of other resources (pass ``""``)."""
        best: Rate | None = None
        for r in self._index.get(resource, ()):
            if best is not None and r.specificity < best.specificity:
                break
            if r.matches(gpu_model, priority_class, band, cluster):
                if best is not None:  # unreachable for a built version; kept as a guard
                    raise PriceBookError(
                        "rates",
                        f"two {resource} rows tie for {_describe(best.constraints)} and "
                        f"{_describe(r.constraints)}",
                    )
                best = r
        return best

    def price(
        self, resource: str, gpu_model: str, priority_class: str, band: str, cluster: str
    ) -> Decimal | None:
        """The price per priced unit for the usage, class multiplier applied; ``None`` when no
        row matches."""
        row = self.match(resource, gpu_model, priority_class, band, cluster)
        if row is None:
            return None
        if row.priority_class is None and priority_class in self.class_multipliers:
            return row.price * self.class_multipliers[priority_class]
        return row.price


def _check_ties(rates: tuple[Rate, ...]) -> None:
    """``PriceBookError`` if two rows of one resource could both be the most specific match.

    Rows A and B of equal specificity both match some usage exactly when no field they both
    give differs. They tie for that usage unless a more specific row matches every usage both
    match, i.e. a row giving more fields, all among the union of A's and B's. Checking each
    compatible pair of equal specificity this way finds every possible tie."""
    by_resource: dict[str, list[tuple[int, Rate]]] = {}
    for i, r in enumerate(rates):
        by_resource.setdefault(r.resource, []).append((i, r))
    for rows in by_resource.values():
        seen = {frozenset(r.constraints): i for i, r in reversed(rows)}
        for (i, a), (j, b) in combinations(rows, 2):
            ca, cb = dict(a.constraints), dict(b.constraints)
            if ca == cb:
                raise PriceBookError(
                    f"rates[{j}]",
                    f"same resource and match fields as rates[{i}] ({a.resource}, {_describe(ca)})",
                )
            if len(ca) != len(cb) or any(ca[k] != cb[k] for k in ca.keys() & cb.keys()):
                continue
            union = ca | cb
            items = list(union.items())
            resolved = any(
                frozenset(sub) in seen
                for n in range(len(ca) + 1, len(items) + 1)
                for sub in combinations(items, n)
            )
            if not resolved:
                raise PriceBookError(
                    f"rates[{j}]",
                    f"ties with rates[{i}]: both {a.resource} rows name {len(ca)} field(s) and "
                    f"both match {_describe(union)}; add a row for that case or make one of "
                    "them more specific",
                )


@dataclass(frozen=True, slots=True)
class PriceBook:
    """A whole price book: ``currency``, the ``timezone`` its bands are local to, the
    ``bands``, the effective-dated ``versions`` (in order) and the resources that are ``free``
    (priced 0 where no row of theirs matches; rows that match still apply).

    Building one validates it; errors carry key paths (``bands.peak[1]``, ``versions[2].name``).
    """

    currency: str
    timezone: str
    bands: tuple[Band, ...]
    versions: tuple[PriceVersion, ...]
    free: frozenset[str] = frozenset()
    zone: ZoneInfo = field(init=False, repr=False, compare=False)
    week: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """The band (an index into ``bands``) of each minute of the week from Monday 00:00 local."""
    effective_ms: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Each version's effective instant, ascending."""

    def __post_init__(self) -> None:
        if not self.currency or any(c.isspace() for c in self.currency):
            raise PriceBookError("currency", f"must be a code such as USD, got {self.currency!r}")
        object.__setattr__(self, "zone", _zone(self.timezone))
        object.__setattr__(self, "week", _week_table(self.bands))
        names = {b.name for b in self.bands}
        for res in sorted(self.free):
            if res not in RATE_RESOURCES:
                hint = _did_you_mean(res, RATE_RESOURCES)
                raise PriceBookError("free", f"unknown resource {res!r}{hint}")
        if not self.versions:
            raise PriceBookError("versions", "must list at least one version")
        first: dict[str, int] = {}
        for k, v in enumerate(self.versions):
            if v.name in first:
                raise PriceBookError(
                    f"versions[{k}].name", f"{v.name!r} is also versions[{first[v.name]}]'s name"
                )
            first[v.name] = k
            if k and v.effective_ms <= self.versions[k - 1].effective_ms:
                raise PriceBookError(
                    f"versions[{k}].effective",
                    f"{format_instant(v.effective_ms)} must be after versions[{k - 1}]'s "
                    f"({format_instant(self.versions[k - 1].effective_ms)}); list versions in order",
                )
            for j, r in enumerate(v.rates):
                if r.band is not None and r.band not in names:
                    hint = _did_you_mean(r.band, names) or (
                        " (bands: " + ", ".join(self.band_names) + ")"
                    )
                    raise PriceBookError(
                        f"versions[{k}].rates[{j}].band", f"unknown band {r.band!r}{hint}"
                    )
        object.__setattr__(self, "effective_ms", tuple(v.effective_ms for v in self.versions))

    @property
    def band_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bands)

    def band_at(self, ms: int) -> str:
        """The band holding instant ``ms`` (epoch milliseconds): by its local wall-clock time."""
        local = (_EPOCH + timedelta(milliseconds=ms)).astimezone(self.zone)
        minute = local.weekday() * MINUTES_PER_DAY + local.hour * 60 + local.minute
        return self.bands[self.week[minute]].name

    def version_at(self, ms: int) -> PriceVersion | None:
        """The version in effect at ``ms``; ``None`` before the first."""
        k = bisect_right(self.effective_ms, ms) - 1
        return self.versions[k] if k >= 0 else None


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PriceBookError(
            "timezone", f"unknown time zone {name!r} (an IANA name such as Europe/Berlin or UTC)"
        ) from None


def _week_table(bands: tuple[Band, ...]) -> tuple[int, ...]:
    """The band index of each minute of the week; errors for overlaps and uncovered minutes."""
    if not bands:
        raise PriceBookError("bands", "must list at least one band (or omit bands)")
    seen: dict[str, int] = {}
    defaults = [i for i, b in enumerate(bands) if b.default]
    for i, b in enumerate(bands):
        if b.name in seen:
            raise PriceBookError(f"bands.{b.name}", "is defined twice")
        seen[b.name] = i
    if len(defaults) > 1:
        raise PriceBookError(
            f"bands.{bands[defaults[1]].name}",
            f"only one band can be the default; {bands[defaults[0]].name!r} already is",
        )
    week = [-1] * MINUTES_PER_WEEK
    owner: list[tuple[int, int]] = [(-1, -1)] * MINUTES_PER_WEEK

    def where(bi: int, wi: int) -> str:
        b = bands[bi]
        return f"bands.{b.name}" if len(b.windows) == 1 else f"bands.{b.name}[{wi}]"

    for bi, b in enumerate(bands):
        for wi, w in enumerate(b.windows):
            for m in w.minutes():
                if week[m] != -1:
                    obi, owi = owner[m]
                    other = where(obi, owi)
                    same = " (the same band)" if obi == bi else ""
                    raise PriceBookError(
                        where(bi, wi),
                        f"{w} overlaps {other} ({bands[obi].windows[owi]}){same} at "
                        f"{_week_minute(m)}",
                    )
                week[m] = bi
                owner[m] = (bi, wi)
    if -1 in week:
        if not defaults:
            m = week.index(-1)
            raise PriceBookError(
                "bands",
                f"{_week_minute(m)} (local time) is in no band; add it to a window or mark one "
                "band as the rest (e.g. off-peak: default)",
            )
        week = [defaults[0] if x == -1 else x for x in week]
    return tuple(week)


def format_instant(ms: int) -> str:
    """An epoch-millisecond instant as ISO 8601 UTC (``2026-01-01T00:00:00Z``), for messages."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    text = dt.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# From the document to the book
# --------------------------------------------------------------------------------------------


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _mapping(value: Any, path: str, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise PriceBookError(path, f"must be a mapping ({what}), got {value!r}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise PriceBookError(path, f"must be a list, got {value!r}")
    if not value:
        raise PriceBookError(path, "must not be empty")
    return value


def _known_keys(doc: Mapping[Any, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in doc:
        if key not in allowed:
            hint = _did_you_mean(str(key), allowed) or " (keys: " + ", ".join(allowed) + ")"
            raise PriceBookError(path, f"unknown key {key!r}{hint}")


def _required(doc: Mapping[Any, Any], key: str, path: str) -> Any:
    if key not in doc or doc[key] is None:
        raise PriceBookError(_join(path, key), "required key is missing")
    return doc[key]


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise PriceBookError(path, f"must be a string, got {value!r} (quote it)")
    if not value.strip():
        raise PriceBookError(path, "must not be empty")
    return value.strip()


def _decimal(value: Any, path: str) -> Decimal:
    """A price or multiplier as written: ``Decimal(str(x))`` of a number or a decimal string."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PriceBookError(path, f"must be a number or a decimal string, got {value!r}")
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        raise PriceBookError(path, f"must be a number such as 2.40, got {value!r}") from None
    _check_amount(d, path)
    return d


def _bands(doc: Any) -> tuple[Band, ...]:
    raw = _mapping(doc, "bands", "band name to windows, or to 'default'")
    if not raw:
        raise PriceBookError("bands", "must list at least one band (or omit bands)")
    bands: list[Band] = []
    for name, value in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise PriceBookError("bands", f"band name {name!r} must be a non-empty string")
        path = f"bands.{name}"
        if value == "default":
            bands.append(Band(name, default=True))
            continue
        items = value if isinstance(value, list) else [value]
        if not items:
            raise PriceBookError(path, "must list at least one window, or be 'default'")
        windows: list[Window] = []
        for i, item in enumerate(items):
            wpath = f"{path}[{i}]" if isinstance(value, list) else path
            if not isinstance(item, str):
                raise PriceBookError(
                    wpath, f"must be a window such as 'Mon-Fri 08:00-20:00', got {item!r}"
                )
            try:
                windows.append(Window.parse(item))
            except PriceBookError as e:
                raise e.within(wpath) from None
        bands.append(Band(name, tuple(windows)))
    return tuple(bands)


def _effective(value: Any, zone: ZoneInfo, path: str) -> int:
    """Epoch milliseconds of an instant with a UTC offset, or of local midnight of a date."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
        except ValueError:
            raise PriceBookError(
                path, f"must be an instant such as 2026-01-01T00:00:00Z, got {text!r}"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise PriceBookError(
                path,
                f"{value.isoformat()} needs a UTC offset (e.g. 2026-01-01T00:00:00Z or "
                "+01:00), or give a date for local midnight",
            )
        dt = value
    elif isinstance(value, date):
        dt = datetime.combine(value, time(0), tzinfo=zone)
    else:
        raise PriceBookError(
            path, f"must be an instant such as 2026-01-01T00:00:00Z, got {value!r}"
        )
    ms, rest = divmod(dt - _EPOCH, _MS)
    if rest:
        raise PriceBookError(path, f"must be a whole number of milliseconds, got {value}")
    return int(ms)


def _rate(doc: Any, path: str) -> Rate:
    row = _mapping(doc, path, "resource, price and optional match fields")
    _known_keys(row, _RATE_KEYS, path)
    resource = _text(_required(row, "resource", path), f"{path}.resource")
    price = _decimal(_required(row, "price", path), f"{path}.price")
    given = {
        name: _text(row[name], f"{path}.{name}")
        for name in RATE_FIELDS
        if name in row and row[name] is not None
    }
    try:
        return Rate(resource=resource, price=price, **given)
    except PriceBookError as e:
        raise e.within(path) from None


def _version(doc: Any, zone: ZoneInfo, path: str) -> PriceVersion:
    ver = _mapping(doc, path, "name, effective and rates")
    _known_keys(ver, _VERSION_KEYS, path)
    name = _required(ver, "name", path)
    name = _text(str(name) if isinstance(name, (int, date)) else name, f"{path}.name")
    effective = _effective(_required(ver, "effective", path), zone, f"{path}.effective")
    rows = _list(_required(ver, "rates", path), f"{path}.rates")
    rates = tuple(_rate(r, f"{path}.rates[{i}]") for i, r in enumerate(rows))
    multipliers: dict[str, Decimal] = {}
    if ver.get("class_multipliers") is not None:
        raw = _mapping(
            ver["class_multipliers"], f"{path}.class_multipliers", "priority class to factor"
        )
        for cls, factor in raw.items():
            if not isinstance(cls, str) or not cls:
                raise PriceBookError(
                    f"{path}.class_multipliers", f"class name {cls!r} must be a string"
                )
            multipliers[cls] = _decimal(factor, f"{path}.class_multipliers.{cls}")
    try:
        return PriceVersion(name, effective, rates, multipliers)
    except PriceBookError as e:
        raise e.within(path) from None


def _book(doc: Mapping[Any, Any]) -> PriceBook:
    _known_keys(doc, _TOP_KEYS, "")
    currency = _text(_required(doc, "currency", ""), "currency")
    timezone = _text(doc.get("timezone") or "UTC", "timezone")
    zone = _zone(timezone)
    bands = (
        _bands(doc["bands"])
        if doc.get("bands") is not None
        else (Band(DEFAULT_BAND, default=True),)
    )
    free: list[str] = []
    if doc.get("free") is not None:
        raw = doc["free"] if isinstance(doc["free"], list) else [doc["free"]]
        for i, res in enumerate(raw):
            res = _text(res, f"free[{i}]")
            if res not in RATE_RESOURCES:
                hint = _did_you_mean(res, RATE_RESOURCES) or (
                    " (resources: " + ", ".join(RATE_RESOURCES) + ")"
                )
                raise PriceBookError(f"free[{i}]", f"unknown resource {res!r}{hint}")
            free.append(res)
    rows = _list(_required(doc, "versions", ""), "versions")
    versions = tuple(_version(v, zone, f"versions[{i}]") for i, v in enumerate(rows))
    return PriceBook(currency, timezone, bands, versions, frozenset(free))


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def price_book_from_dict(doc: Mapping[Any, Any], where: str) -> PriceBook:
    """The price book described by a parsed YAML document; ``where`` names it in errors.

    Raises ``PriceBookError`` (a ``SpecError``): ``<where>: <key path>: <problem>``."""
    try:
        if not isinstance(doc, Mapping):
            raise PriceBookError("", "expected a mapping with currency, bands and versions")
        return _book(doc)
    except PriceBookError as e:
        raise PriceBookError(e.path, e.problem, where) from None


def load_price_book(path: str | os.PathLike[str]) -> PriceBook:
    """The price book in a ``.yaml``/``.yml`` file (format: ``docs/prices.md``). Errors name
    the file as given, then the key path: ``prices.yaml: versions[0].rates[2].price: ...``."""
    where = os.fspath(path)
    p = Path(where)
    if not p.is_file():
        raise PriceBookError("", "is not a file" if p.exists() else "not found", where)
    if p.suffix.lower() not in _YAML_SUFFIXES:
        raise PriceBookError("", "expected a .yaml or .yml file", where)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PriceBookError("", f"cannot read: {e}", where) from None
    try:
        doc = yaml_mapping(text, where, "currency, bands and versions")
    except SpecError as e:
        raise PriceBookError("", str(e).removeprefix(f"{where}: "), where) from None
    return price_book_from_dict(doc, where)
