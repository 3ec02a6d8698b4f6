"""Rating: records cut at band edges and version boundaries into segments that partition them
(DST included), priced exactly, rounded once per charge, the same however they are batched."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suanli.metering.charges import MONEY_QUANTUM, QUANTITY_QUANTUM, Charge, charge_key
from suanli.metering.prices import PriceBook, load_price_book, price_book_from_dict
from suanli.metering.rating import RatingError, rate, segments
from suanli.metering.usage import (
    CPU_HOUR,
    GPU_HOUR,
    MEMORY_GIB_HOUR,
    MS_PER_HOUR,
    NETWORK_GB,
    STORAGE_GB_HOUR,
    Attempt,
    UsageRecord,
    record_key,
    usage_records,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prices.yaml"
HOUR = MS_PER_HOUR
MINUTE = 60_000
DAY = 24 * HOUR
UNIT = {
    "gpu": GPU_HOUR,
    "cpu": CPU_HOUR,
    "memory": MEMORY_GIB_HOUR,
    "storage": STORAGE_GB_HOUR,
    "network": NETWORK_GB,
}

FAST = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 instant with an offset."""
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def record(
    start: int,
    end: int,
    *,
    job: str = "j",
    attempt: int = 0,
    cls: str = "normal",
    cluster: str = "c1",
    gpu: tuple[tuple[str, int], ...] = (),
    cpu: int = 0,
    memory: int = 0,
    storage: int = 0,
    network: int = 0,
    util: float | None = None,
) -> UsageRecord:
    return UsageRecord(
        key=record_key(job, attempt, start),
        job_id=job,
        attempt=attempt,
        start_ms=start,
        end_ms=end,
        org="lab/vision",
        queue="vision",
        priority_class=cls,
        cluster=cluster,
        gpu=gpu,
        cpu_milli=cpu,
        memory_mib=memory,
        storage_mb=storage,
        network_mb=network,
        gpu_util=util,
    )


def utc_doc() -> dict[str, Any]:
    """A UTC book: peak Mon-Fri 08-20, off-peak the rest; v1 from 2026-01-01, v2 from July."""
    return {
        "currency": "EUR",
        "timezone": "UTC",
        "bands": {"peak": "Mon-Fri 08:00-20:00", "off-peak": "default"},
        "free": ["network"],
        "versions": [
            {
                "name": "v1",
                "effective": "2026-01-01T00:00:00Z",
                "class_multipliers": {"spot": "0.4", "online": "1.5"},
                "rates": [
                    {"resource": "gpu", "price": "2.00"},
                    {"resource": "gpu", "gpu_model": "H100", "band": "peak", "price": "4.00"},
                    {"resource": "gpu-idle", "gpu_model": "H100", "price": "1.00"},
                    {"resource": "cpu", "price": "0.05"},
                    {"resource": "memory", "price": "0.004"},
                    {"resource": "storage", "price": "0.0001"},
                    {"resource": "network", "cluster": "edge", "price": "0.02"},
                ],
            },
            {
                "name": "v2",
                "effective": "2026-07-01T00:00:00Z",
                "rates": [
                    {"resource": "gpu", "price": "1.50"},
                    {"resource": "cpu", "price": "0.04"},
                    {"resource": "memory", "price": "0.003"},
                ],
            },
        ],
    }


def utc_book(mutate: Callable[[dict[str, Any]], object] | None = None) -> PriceBook:
    doc = utc_doc()
    if mutate is not None:
        mutate(doc)
    return price_book_from_dict(doc, "utc.yaml")


UTC_BOOK = utc_book()
MON = ms("2026-03-02T00:00:00+00:00")  # a Monday (UTC book: local is UTC)


def only(charges: list[Charge]) -> Charge:
    assert len(charges) == 1, charges
    return charges[0]


def exact_amount(c: Charge) -> Decimal:
    """``raw × rate / unit`` computed in wide Decimal, rounded half-even once."""
    with localcontext(Context(prec=80)):
        return (Decimal(c.raw) * c.rate / UNIT[c.resource]).quantize(
            MONEY_QUANTUM, rounding=ROUND_HALF_EVEN
        )


# --------------------------------------------------------------------------------------------
# Exact amounts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rec", "resource", "quantity", "rate_", "amount"),
    [
        pytest.param(
            record(MON + 9 * HOUR, MON + 10 * HOUR, gpu=(("H100", 1000),)),
            "gpu", "1", "4.00", "4", id="one-h100-hour-at-peak",
        ),
        pytest.param(
            record(MON + 1 * HOUR, MON + 2 * HOUR + 30 * MINUTE, gpu=(("A100", 500),)),
            "gpu", "0.75", "2.00", "1.5", id="half-an-a100-for-90-minutes",
        ),
        pytest.param(
            record(MON, MON + 30 * MINUTE, cpu=8000),
            "cpu", "4", "0.05", "0.2", id="eight-cores-half-an-hour",
        ),
        pytest.param(
            record(MON, MON + 2 * HOUR, memory=64 * 1024),
            "memory", "128", "0.004", "0.512", id="64-gib-two-hours",
        ),
        pytest.param(
            record(MON, MON + HOUR, storage=500_000),
            "storage", "500", "0.0001", "0.05", id="500-gb-held-an-hour",
        ),
        pytest.param(
            record(MON, MON + HOUR, network=2500, cluster="edge"),
            "network", "2.5", "0.02", "0.05", id="2500-mb-transferred",
        ),
        pytest.param(
            record(MON, MON + HOUR, network=2500),
            "network", "2.5", "0", "0", id="free-network",
        ),
        pytest.param(
            record(MON, MON + 7 * MINUTE, cpu=1),
            "cpu", "0.000116667", "0.05", "0.000006", id="quantity-and-amount-rounded",
        ),
    ],
)  # fmt: skip
def test_amounts_are_exact(
    rec: UsageRecord, resource: str, quantity: str, rate_: str, amount: str
) -> None:
    c = only(list(rate([rec], UTC_BOOK)))
    assert (c.resource, c.quantity, c.rate, c.amount) == (
        resource,
        Decimal(quantity),
        Decimal(rate_),
        Decimal(amount),
    )
    assert c.amount.as_tuple().exponent == MONEY_QUANTUM.as_tuple().exponent
    assert c.quantity.as_tuple().exponent == QUANTITY_QUANTUM.as_tuple().exponent
    assert c.currency == "EUR" and c.book_version == "v1"


@pytest.mark.parametrize(
    ("gpu_hours_x2", "amount"),
    [
        pytest.param(1, "0.000000", id="half-a-micro-rounds-to-even-0"),
        pytest.param(3, "0.000002", id="one-and-a-half-micro-rounds-to-even-2"),
        pytest.param(5, "0.000002", id="two-and-a-half-micro-rounds-to-even-2"),
    ],
)
def test_amount_rounds_half_even_once(gpu_hours_x2: int, amount: str) -> None:
    def micro_price(d: dict[str, Any]) -> None:
        d["versions"][0]["rates"][0] = {"resource": "gpu", "price": "0.000001"}

    # Half an A100 for n hours is n/2 GPU-hours: at a millionth of a euro per GPU-hour, odd n
    # falls exactly halfway between two micro-units.
    rec = record(MON, MON + gpu_hours_x2 * HOUR, gpu=(("A100", 500),))
    b = utc_book(micro_price)
    assert only(list(rate([rec], b))).amount == Decimal(amount)


def test_charge_fields_come_from_the_record() -> None:
    rec = record(
        MON + 9 * HOUR, MON + 10 * HOUR, job="train-7", attempt=3, cls="spot", cluster="c9",
        gpu=(("H100", 2000),),
    )  # fmt: skip
    c = only(list(rate([rec], UTC_BOOK)))
    assert c._asdict() == {
        "key": charge_key(rec.key, "gpu", "H100", rec.start_ms, False),
        "record_key": rec.key,
        "job_id": "train-7",
        "attempt": 3,
        "org": "lab/vision",
        "queue": "vision",
        "priority_class": "spot",
        "cluster": "c9",
        "resource": "gpu",
        "gpu_model": "H100",
        "band": "peak",
        "start_ms": rec.start_ms,
        "end_ms": rec.end_ms,
        "raw": 2000 * HOUR,
        "quantity": Decimal("2"),
        "rate": Decimal("1.6"),
        "amount": Decimal("3.2"),
        "currency": "EUR",
        "book_version": "v1",
        "waste": False,
    }


# --------------------------------------------------------------------------------------------
# Bands, versions, multipliers
# --------------------------------------------------------------------------------------------


def test_record_crossing_a_band_edge_is_priced_per_band() -> None:
    rec = record(MON + 7 * HOUR, MON + 9 * HOUR, gpu=(("H100", 1000),))
    got = [(c.band, c.start_ms, c.end_ms, c.rate, c.amount) for c in rate([rec], UTC_BOOK)]
    assert got == [
        ("off-peak", MON + 7 * HOUR, MON + 8 * HOUR, Decimal("2.00"), Decimal("2")),
        ("peak", MON + 8 * HOUR, MON + 9 * HOUR, Decimal("4.00"), Decimal("4")),
    ]


def test_record_crossing_a_version_boundary_is_priced_by_each_version() -> None:
    july = ms("2026-07-01T00:00:00+00:00")  # a Wednesday, off-peak at midnight
    rec = record(july - 3 * HOUR, july + HOUR, gpu=(("A100", 1000),), cpu=2000, memory=1024)
    got = [
        (c.resource, c.book_version, c.start_ms, c.end_ms, c.amount) for c in rate([rec], UTC_BOOK)
    ]
    assert got == [
        ("gpu", "v1", july - 3 * HOUR, july, Decimal("6")),  # 3 h × 2.00
        ("cpu", "v1", july - 3 * HOUR, july, Decimal("0.3")),  # 6 core-h × 0.05
        ("memory", "v1", july - 3 * HOUR, july, Decimal("0.012")),  # 3 GiB-h × 0.004
        ("gpu", "v2", july, july + HOUR, Decimal("1.5")),
        ("cpu", "v2", july, july + HOUR, Decimal("0.08")),
        ("memory", "v2", july, july + HOUR, Decimal("0.003")),
    ]


@pytest.mark.parametrize(
    ("cls", "amount"),
    [
        pytest.param("spot", "0.8", id="spot-0.4"),
        pytest.param("normal", "2", id="normal-unscaled"),
        pytest.param("online", "3", id="online-1.5"),
    ],
)
def test_class_multipliers(cls: str, amount: str) -> None:
    rec = record(MON, MON + HOUR, cls=cls, gpu=(("A100", 1000),))
    assert only(list(rate([rec], UTC_BOOK))).amount == Decimal(amount)


def test_spot_cheaper_and_online_dearer_for_any_usage() -> None:
    b = load_price_book(EXAMPLE)
    start = ms("2026-03-03T06:30:00+01:00")

    def usage(cls: str) -> UsageRecord:
        return record(
            start, start + 5 * HOUR, cls=cls, gpu=(("H100", 4000), ("A100", 1000)),
            cpu=16000, memory=131072, storage=10**6,
        )  # fmt: skip

    totals = {
        cls: sum((c.amount for c in rate([usage(cls)], b)), Decimal(0))
        for cls in ("spot", "normal", "online")
    }
    assert totals["spot"] < totals["normal"] < totals["online"]
    # 0.4 and 1.5 of the same exact products, each rounded: within a micro per charge.
    n = len(list(rate([usage("normal")], b)))
    assert abs(totals["spot"] - totals["normal"] * Decimal("0.4")) <= n * MONEY_QUANTUM
    assert abs(totals["online"] - totals["normal"] * Decimal("1.5")) <= n * MONEY_QUANTUM


def test_row_naming_a_class_is_not_multiplied() -> None:
    b = load_price_book(EXAMPLE)
    start = ms("2026-03-03T10:00:00+01:00")  # peak
    rec = record(start, start + HOUR, cls="online", cluster="infer-1", gpu=(("H100", 1000),))
    c = only(list(rate([rec], b)))
    assert (c.rate, c.amount) == (Decimal("5.00"), Decimal("5"))


# --------------------------------------------------------------------------------------------
# Idle GPU
# --------------------------------------------------------------------------------------------


def test_idle_split_is_exact_and_marked_waste() -> None:
    rec = record(MON + 9 * HOUR, MON + 10 * HOUR, gpu=(("H100", 1000),), util=0.3)
    used, idle = list(rate([rec], UTC_BOOK))
    assert (used.resource, used.waste, used.raw, used.rate, used.amount) == (
        "gpu", False, 300 * HOUR, Decimal("4.00"), Decimal("1.2"),
    )  # fmt: skip
    assert (idle.resource, idle.waste, idle.raw, idle.rate, idle.amount) == (
        "gpu", True, 700 * HOUR, Decimal("1.00"), Decimal("0.7"),
    )  # fmt: skip
    assert used.key != idle.key and idle.key.endswith(f"|gpu~idle|H100|{rec.start_ms}")


@pytest.mark.parametrize(
    ("gpu", "util", "expected"),
    [
        pytest.param(("H100", 1000), None, [("gpu", False, 1000)], id="util-unknown"),
        pytest.param(("H100", 1000), 1.0, [("gpu", False, 1000)], id="fully-busy"),
        pytest.param(("H100", 1000), 0.0, [("gpu", True, 1000)], id="fully-idle"),
        pytest.param(("H100", 1000), 1.07, [("gpu", False, 1000)], id="overshoot-clamped"),
        pytest.param(("A100", 1000), 0.3, [("gpu", False, 1000)], id="no-idle-rate-for-model"),
    ],
)
def test_idle_split_cases(
    gpu: tuple[str, int], util: float | None, expected: list[tuple[str, bool, int]]
) -> None:
    rec = record(MON, MON + HOUR, gpu=(gpu,), util=util)
    got = [(c.resource, c.waste, c.raw // HOUR) for c in rate([rec], UTC_BOOK)]
    assert got == expected


@FAST
@given(
    milli=st.integers(1, 16_000),
    dur=st.integers(1, 30 * DAY),
    util=st.floats(0, 1, allow_nan=False),
)
def test_idle_split_sums_to_the_allocation(milli: int, dur: int, util: float) -> None:
    rec = record(MON, MON + dur, gpu=(("H100", milli),), util=util)
    charges = list(rate([rec], UTC_BOOK))
    assert sum(c.raw for c in charges) == milli * dur
    for start in {c.start_ms for c in charges}:
        part = [c for c in charges if c.start_ms == start]
        seg = part[0].end_ms - start
        used = sum(c.raw for c in part if not c.waste)
        assert sum(c.raw for c in part) == milli * seg
        with localcontext(Context(prec=80)):
            assert abs(used - Decimal(repr(util)) * milli * seg) <= Decimal("0.5")


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_missing_rate_names_the_usage() -> None:
    b = utc_book(lambda d: d["versions"][0]["rates"].pop(0))  # no catch-all GPU row
    rec = record(MON + 21 * HOUR, MON + 22 * HOUR, job="j9", cls="spot", cluster="c7",
                 gpu=(("V100", 1000),))  # fmt: skip
    with pytest.raises(RatingError) as info:
        list(rate([rec], b))
    assert str(info.value) == (
        f"record {rec.key!r}: no rate in version 'v1' for resource gpu, gpu_model 'V100', "
        "priority_class 'spot', band 'off-peak', cluster 'c7' (add a rate row that matches, "
        "or list gpu under free)"
    )


def test_missing_rate_for_a_resource_without_rows() -> None:
    july = ms("2026-07-06T12:00:00+00:00")
    rec = record(july, july + HOUR, storage=100)  # v2 prices no storage, storage not free
    with pytest.raises(RatingError, match="no rate in version 'v2' for resource storage, "):
        list(rate([rec], UTC_BOOK))


def test_record_before_the_first_version() -> None:
    rec = record(MON - 100 * DAY, MON, cpu=1000)
    with pytest.raises(
        RatingError,
        match=r"starts at 2025-11-22T00:00:00Z, before the price "
        r"book's first version \('v1', effective 2026-01-01T00:00:00Z\)",
    ):
        list(rate([rec], UTC_BOOK))


# --------------------------------------------------------------------------------------------
# DST: bands follow the local wall clock
# --------------------------------------------------------------------------------------------


def berlin_book(bands: dict[str, Any]) -> PriceBook:
    return price_book_from_dict(
        {
            "currency": "EUR",
            "timezone": "Europe/Berlin",
            "bands": bands,
            "versions": [
                {"name": "v", "effective": "2020-01-01", "rates": [{"resource": "cpu", "price": 1}]}
            ],
        },
        "berlin.yaml",
    )


EARLY = berlin_book({"early": "daily 02:30-04:00", "rest": "default"})


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        pytest.param(
            "2026-03-29T00:00:00+00:00", "2026-03-29T04:00:00+00:00",
            # 02:00 CET jumps to 03:00 CEST at 01:00Z: 02:30 never happens, early starts there.
            [("00:00", "01:00", "rest"), ("01:00", "02:00", "early"), ("02:00", "04:00", "rest")],
            id="spring-forward",
        ),
        pytest.param(
            "2026-10-24T23:00:00+00:00", "2026-10-25T04:00:00+00:00",
            # 03:00 CEST falls back to 02:00 CET at 01:00Z: 02:30-03:00 happens twice.
            [
                ("23:00", "00:30", "rest"), ("00:30", "01:00", "early"),
                ("01:00", "01:30", "rest"), ("01:30", "03:00", "early"),
                ("03:00", "04:00", "rest"),
            ],
            id="fall-back",
        ),
        pytest.param(
            "2026-07-01T00:00:00+00:00", "2026-07-01T03:00:00+00:00",
            [("00:00", "00:30", "rest"), ("00:30", "02:00", "early"), ("02:00", "03:00", "rest")],
            id="summer-day",
        ),
    ],
)  # fmt: skip
def test_dst_band_edges(start: str, end: str, expected: list[tuple[str, str, str]]) -> None:
    segs = segments(EARLY, ms(start), ms(end))
    assert [(utc_hhmm(s.start_ms), utc_hhmm(s.end_ms), s.band) for s in segs] == expected


def utc_hhmm(t: int) -> str:
    return datetime.fromtimestamp(t // 1000, tz=UTC).strftime("%H:%M")


# --------------------------------------------------------------------------------------------
# Properties: segments partition records; totals do not depend on batching or order
# --------------------------------------------------------------------------------------------

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "Asia/Kolkata",  # +05:30, no DST
    "America/Sao_Paulo",  # DST in some years, none since 2019
    "UTC",
]
SPAN = (ms("2025-01-01T00:00:00+00:00"), ms("2027-12-31T00:00:00+00:00"))
VERSION_STARTS = ["2024-12-01", "2025-03-30T01:00:00Z", "2025-10-26T00:30:00Z",
                  "2026-06-15T12:34:56.789Z", "2027-03-28T01:00:00Z"]  # fmt: skip


@cache
def zone_book(zone: str) -> PriceBook:
    """Bands with edges near the DST hours, one past midnight; versions cut at DST instants
    and at an odd millisecond."""
    return price_book_from_dict(
        {
            "currency": "USD",
            "timezone": zone,
            "bands": {
                "peak": "Mon-Fri 08:00-20:00",
                "dawn": ["daily 02:30-02:45", "Sun 03:00-03:01"],
                "night": "Fri-Sat 22:00-01:00",
                "off-peak": "default",
            },
            "free": ["network"],
            "versions": [
                {
                    "name": f"v{i}",
                    "effective": start,
                    "class_multipliers": {"spot": "0.35", "online": "1.5"},
                    "rates": [
                        {"resource": "gpu", "price": f"{i + 1}.17"},
                        {"resource": "gpu", "gpu_model": "H100", "band": "peak", "price": "3.3"},
                        {"resource": "gpu-idle", "price": "0.123"},
                        {"resource": "cpu", "price": "0.0311"},
                        {"resource": "memory", "band": "night", "price": "0.0007"},
                        {"resource": "memory", "price": "0.0013"},
                        {"resource": "storage", "price": "0.000137"},
                        {"resource": "network", "cluster": "edge", "price": "0.09"},
                    ],
                }
                for i, start in enumerate(VERSION_STARTS)
            ],
        },
        f"{zone}.yaml",
    )


@cache
def transitions(zone: str) -> list[int]:
    """Days of SPAN (their UTC midnights) within which the zone's UTC offset changes."""
    tz = zone_book(zone).zone

    def offset(t: int) -> Any:
        return datetime.fromtimestamp(t // 1000, tz=tz).utcoffset()

    days = range(SPAN[0], SPAN[1], DAY)
    return [t for t in days if offset(t) != offset(t + DAY)] or [SPAN[0]]


@st.composite
def intervals(draw: st.DrawFn) -> tuple[str, int, int]:
    zone = draw(st.sampled_from(ZONES))
    near = draw(st.booleans())
    if near:  # start within two days of an offset change
        start = draw(st.sampled_from(transitions(zone))) + draw(st.integers(-DAY, 2 * DAY))
    else:
        start = draw(st.integers(*SPAN))
    length = draw(st.one_of(st.integers(0, 3 * HOUR), st.integers(0, 3 * 7 * DAY)))
    return zone, start, start + length


@settings(FAST, max_examples=300)
@given(intervals(), st.data())
def test_segments_partition_the_interval(case: tuple[str, int, int], data: st.DataObject) -> None:
    zone, start, end = case
    book = zone_book(zone)
    segs = segments(book, start, end)
    assert segs[0].start_ms == start and segs[-1].end_ms == end
    assert sum(s.end_ms - s.start_ms for s in segs) == end - start
    for a, b in zip(segs, segs[1:], strict=False):
        assert a.end_ms == b.start_ms  # contiguous, in order
        assert a.start_ms < a.end_ms
        assert (a.band, a.version) != (b.band, b.version)  # maximal: a cut changes something
    for s in segs:
        # Each segment lies in one band and one version: check its ends and a random instant.
        inside = [s.start_ms, max(s.start_ms, s.end_ms - 1)]
        if s.end_ms > s.start_ms:
            inside.append(data.draw(st.integers(s.start_ms, s.end_ms - 1), label="instant"))
        for t in inside:
            assert book.band_at(t) == s.band, (zone, t)
            assert book.version_at(t) == s.version


@st.composite
def records(draw: st.DrawFn, zone: str = "Europe/Berlin") -> UsageRecord:
    start = draw(st.sampled_from(transitions(zone))) + draw(st.integers(-3 * DAY, 3 * DAY))
    length = draw(st.one_of(st.integers(0, 5 * HOUR), st.integers(0, 10 * DAY)))
    models = draw(st.lists(st.sampled_from(["H100", "A100", "L4"]), max_size=2, unique=True))
    return record(
        start,
        start + length,
        job=f"job-{draw(st.integers(0, 10**6))}",
        attempt=draw(st.integers(0, 3)),
        cls=draw(st.sampled_from(["spot", "normal", "online"])),
        cluster=draw(st.sampled_from(["c1", "edge"])),
        gpu=tuple((m, draw(st.integers(0, 8000))) for m in models),
        cpu=draw(st.integers(0, 128_000)),
        memory=draw(st.integers(0, 2 * 1024 * 1024)),
        storage=draw(st.sampled_from([0, draw(st.integers(0, 10**7))])),
        network=draw(st.integers(0, 10**6)),
        util=draw(st.one_of(st.none(), st.floats(0, 1, allow_nan=False))),
    )


@settings(FAST, max_examples=60)
@given(st.lists(records(), min_size=1, max_size=8, unique_by=lambda r: r.key), st.randoms())
def test_totals_are_exact_and_independent_of_batching(recs: list[UsageRecord], rnd: Any) -> None:
    book = zone_book("Europe/Berlin")
    charges = list(rate(recs, book))
    # Each amount is the exact product rounded half-even once; no charge is zero-quantity.
    for c in charges:
        assert c.amount == exact_amount(c)
        assert c.raw > 0
    # Keys are unique; re-rating gives equal charges; batching and order change nothing.
    assert len({c.key for c in charges}) == len(charges)
    assert list(rate(recs, book)) == charges
    cut = rnd.randrange(len(recs) + 1)
    assert list(rate(recs[:cut], book)) + list(rate(recs[cut:], book)) == charges
    shuffled = recs[:]
    rnd.shuffle(shuffled)
    again = list(rate(shuffled, book))
    assert sorted(again, key=lambda c: c.key) == sorted(charges, key=lambda c: c.key)
    total = sum((c.amount for c in charges), Decimal(0))
    assert sum((c.amount for c in reversed(again)), Decimal(0)) == total
    assert total == sum((exact_amount(c) for c in charges), Decimal(0))
    # Nothing is lost: per record and resource the raw quantities sum to the record's.
    raw = Counter[tuple[str, str]]()
    for c in charges:
        raw[(c.record_key, c.resource)] += c.raw
    for r in recs:
        d = r.duration_ms
        assert raw[(r.key, "gpu")] == r.gpu_milli * d
        assert raw[(r.key, "cpu")] == r.cpu_milli * d
        assert raw[(r.key, "memory")] == r.memory_mib * d
        assert raw[(r.key, "storage")] == r.storage_mb * d
        assert raw[(r.key, "network")] == r.network_mb


@settings(FAST, max_examples=50)
@given(records(), st.sampled_from([HOUR, 15 * MINUTE, DAY]))
def test_metering_interval_does_not_change_raw_totals(rec: UsageRecord, interval: int) -> None:
    """An attempt metered whole or in slices charges the same resource-time."""
    attempt = Attempt(
        rec.job_id, rec.attempt, rec.start_ms, rec.end_ms, rec.org, rec.queue,
        rec.priority_class, rec.cluster, gpu=rec.gpu, cpu_milli=rec.cpu_milli,
        memory_mib=rec.memory_mib, storage_mb=rec.storage_mb, network_mb=rec.network_mb,
    )  # fmt: skip
    book = zone_book("Europe/Berlin")

    def totals(rs: list[UsageRecord]) -> Counter[tuple[str, str, str, str]]:
        out = Counter[tuple[str, str, str, str]]()
        for c in rate(rs, book):
            out[(c.resource, c.gpu_model, c.band, c.book_version)] += c.raw
        return out

    whole = totals(list(usage_records([attempt])))
    sliced = totals(list(usage_records([attempt], interval)))
    for k in whole.keys() - {k for k in whole if k[0] == "network"}:
        assert whole[k] == sliced[k]
    net = sum(v for k, v in sliced.items() if k[0] == "network")
    assert net == rec.network_mb


def test_zero_length_record_charges_its_network() -> None:
    rec = record(MON + 9 * HOUR, MON + 9 * HOUR, cpu=1000, network=1234, cluster="edge")
    c = only(list(rate([rec], UTC_BOOK)))
    assert (c.resource, c.raw, c.band, c.amount) == ("network", 1234, "peak", Decimal("0.02468"))


def test_network_split_in_proportion_to_time() -> None:
    rec = record(MON + 7 * HOUR, MON + 10 * HOUR, network=1000, cluster="edge")
    assert [(c.band, c.raw) for c in rate([rec], UTC_BOOK)] == [("off-peak", 333), ("peak", 667)]


def test_same_model_listed_twice_is_one_charge() -> None:
    rec = record(MON, MON + HOUR, gpu=(("A100", 500), ("A100", 250)))
    c = only(list(rate([rec], UTC_BOOK)))
    assert (c.raw, c.amount) == (750 * HOUR, Decimal("1.5"))


def test_example_book_rates_a_day() -> None:
    b = load_price_book(EXAMPLE)
    start = ms("2026-03-02T00:00:00+01:00")
    rec = record(start, start + DAY, gpu=(("H100", 1000),), util=0.75, cpu=4000)
    got = [(c.band, c.waste, c.resource, c.amount) for c in rate([rec], b)]
    assert got == [
        ("off-peak", False, "gpu", Decimal("19.2")),  # 8 h × 0.75 × 3.20
        ("off-peak", True, "gpu", Decimal("1.8")),  # 8 h × 0.25 × 0.90
        ("off-peak", False, "cpu", Decimal("0.96")),  # 32 core-h × 0.030
        ("peak", False, "gpu", Decimal("36")),  # 12 h × 0.75 × 4.00
        ("peak", True, "gpu", Decimal("2.7")),
        ("peak", False, "cpu", Decimal("1.44")),
        ("off-peak", False, "gpu", Decimal("9.6")),  # 20:00-24:00
        ("off-peak", True, "gpu", Decimal("0.9")),
        ("off-peak", False, "cpu", Decimal("0.48")),
    ]
