"""The price-book cost model budgets use: jobs priced as the price book says (bands,
classes, versions, DST), against hand-computed rates from ``examples/prices.yaml``."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget_builders import (
    HOUR,
    PRICES,
    budget,
    posix,
    spec,
)
from builders import job, task
from suanli.core.budget import (
    BudgetBook,
)
from suanli.core.model import Job
from suanli.metering.costmodel import CostModelError, PriceBookCostModel
from suanli.metering.prices import load_price_book, price_book_from_dict

# --------------------------------------------------------------------------------------------
# The price-book cost model (examples/prices.yaml, hand-computed)
# --------------------------------------------------------------------------------------------

BOOK = load_price_book(PRICES)
EPOCH_MS = posix("2026-03-01T00:00:00Z") * 1000
BIG = task(8, cpu=32_000, mem=256 * 1024)  # 8 GPUs, 32 cores, 256 GiB


def model(**kw: object) -> PriceBookCostModel:
    return PriceBookCostModel(BOOK, "train-1", EPOCH_MS, **kw)  # type: ignore[arg-type]


def t_of(text: str) -> float:
    """Caller time (seconds since EPOCH_MS) of an ISO instant with an offset."""
    return posix(text) - EPOCH_MS / 1000


def big_job(cls: str = "normal", models: tuple[str, ...] = ()) -> Job:
    t = task(8, cpu=32_000, mem=256 * 1024, models=models)
    return job("big", t=t, priority_class=cls)


# Hourly prices of BIG under version 2026-h1: 8 GPUs + 32 cores × 0.030 + 256 GiB × 0.004.
H100_PEAK = 8 * Decimal("4.00") + 32 * Decimal("0.030") + 256 * Decimal("0.004")  # 33.984
H100_OFF = 8 * Decimal("3.20") + 32 * Decimal("0.030") + 256 * Decimal("0.004")  # 27.584
A100_PEAK = 8 * Decimal("2.20") + 32 * Decimal("0.030") + 256 * Decimal("0.004")  # 19.584


@pytest.mark.parametrize(
    ("at", "gpu_model", "cls", "hourly"),
    [
        ("2026-03-11T10:00:00+01:00", "H100", "normal", H100_PEAK),
        ("2026-03-11T21:00:00+01:00", "H100", "normal", H100_OFF),
        ("2026-03-11T10:00:00+01:00", "H100", "spot", H100_PEAK * Decimal("0.4")),
        ("2026-03-11T10:00:00+01:00", "A100", "normal", A100_PEAK),
        ("2026-03-14T12:00:00+01:00", "V100", "normal", 8 * Decimal("1.00") + Decimal("1.984")),
        ("2026-03-11T10:00:00+01:00", None, "normal", H100_PEAK),
        (
            "2026-07-01T10:00:00+02:00",
            "H100",
            "normal",
            8 * Decimal("3.60") + 32 * Decimal("0.028") + 256 * Decimal("0.004"),
        ),
    ],
    ids=[
        "h100-peak",
        "h100-off-peak",
        "spot-multiplier",
        "a100-peak",
        "other-model-weekend",
        "unknown-model-dearest",
        "second-version",
    ],
)
def test_price_book_rate_per_second(
    at: str, gpu_model: str | None, cls: str, hourly: Decimal
) -> None:
    m = model(cluster_models=("A100", "H100"))
    t = t_of(at)
    assert abs(m.rate(big_job(cls), gpu_model, t) * 3600 - hourly) < Decimal("1e-20")
    assert m.cost(big_job(cls), gpu_model, t, t + HOUR) == hourly


def test_unknown_model_is_the_dearest_the_job_may_use() -> None:
    m = model(cluster_models=("A100", "H100", "T4"))
    t = t_of("2026-03-11T10:00:00+01:00")
    assert m.cost(big_job(models=("A100", "T4")), None, t, t + HOUR) == A100_PEAK
    assert m.cost(big_job(models=("A100", "B200")), None, t, t + HOUR) == A100_PEAK
    no_models = model()
    assert no_models.cost(big_job(), None, t, t + HOUR) == 8 + Decimal("1.984")  # any model


def test_cost_is_cut_at_band_edges_and_version_boundaries() -> None:
    m = model()
    j = big_job()
    # Wednesday 19:30-20:30 Berlin: half an hour of peak, half an hour of off-peak.
    t = t_of("2026-03-11T19:30:00+01:00")
    assert m.cost(j, "H100", t, t + HOUR) == (H100_PEAK + H100_OFF) / 2
    # 2026-06-30 23:00 to 2026-07-01 01:00 Berlin: one off-peak hour in each version.
    t = t_of("2026-06-30T23:00:00+02:00")
    h2_off = 8 * Decimal("2.90") + 32 * Decimal("0.028") + 256 * Decimal("0.004")
    assert m.cost(j, "H100", t, t + 2 * HOUR) == H100_OFF + h2_off
    assert m.cost(j, "H100", t, t) == 0
    assert m.cost(j, "H100", t + 10, t) == 0


def test_cpu_only_and_fractional_jobs() -> None:
    m = model()
    t = t_of("2026-03-11T10:00:00+01:00")
    cpu = job("c", t=task(0, cpu=4000, mem=8 * 1024), tasks=2)
    assert m.cost(cpu, None, t, t + HOUR) == 8 * Decimal("0.030") + 16 * Decimal("0.004")
    half = job("h", t=task(1, 500))
    assert m.cost(half, "A100", t, t + HOUR) == Decimal("1.10")


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        ("2026-03-11T21:00:00+01:00", "2026-03-11T21:00:00+01:00"),
        ("2026-03-13T15:00:00+01:00", "2026-03-13T20:00:00+01:00"),
        ("2026-03-14T12:00:00+01:00", "2026-03-14T18:00:00+01:00"),
        ("2026-03-29T10:30:00+02:00", "2026-03-29T18:00:00+02:00"),
        ("2026-10-25T12:00:00+01:00", "2026-10-25T18:00:00+01:00"),
        ("2026-03-27T19:59:00+01:00", "2026-03-27T20:00:00+01:00"),
    ],
    ids=[
        "off-peak-now",
        "friday-peak-to-evening",
        "saturday-weekend-band-to-evening",
        "sunday-after-clocks-go-forward",
        "sunday-after-clocks-go-back",
        "a-minute-before",
    ],
)
def test_next_off_peak_follows_local_time(at: str, expected: str) -> None:
    m = model()
    nxt = m.next_off_peak(t_of(at))
    assert nxt == t_of(expected)
    assert m.off_peak(nxt)
    assert m.off_peak(t_of(at)) == (at == expected)


def test_next_off_peak_with_chosen_bands_and_without_any() -> None:
    sat_noon = t_of("2026-03-14T12:00:00+01:00")
    both = model(off_peak_bands=("off-peak", "weekend"))
    assert both.off_peak(sat_noon) and both.next_off_peak(sat_noon) == sat_noon
    fri = t_of("2026-03-13T09:00:00+01:00")
    weekend_only = model(off_peak_bands=("weekend",))
    assert weekend_only.next_off_peak(fri) == t_of("2026-03-14T10:00:00+01:00")
    with pytest.raises(
        CostModelError, match="off-peak band 'weekends' is not a band.*did you mean 'weekend'"
    ):
        model(off_peak_bands=("weekends",))
    doc = {
        "currency": "USD",
        "bands": {"day": "06:00-22:00", "night": "22:00-06:00"},
        "versions": [
            {"name": "v", "effective": "2026-01-01", "rates": [{"resource": "gpu", "price": 1}]}
        ],
    }
    flat = PriceBookCostModel(price_book_from_dict(doc, "p.yaml"), "c", EPOCH_MS)
    assert not flat.off_peak(12 * HOUR)
    assert flat.next_off_peak(12 * HOUR) == math.inf


def test_cost_model_errors_name_the_usage() -> None:
    with pytest.raises(CostModelError, match="before the price book's first version"):
        PriceBookCostModel(BOOK, "c", posix("2025-12-31T00:00:00Z") * 1000)
    doc = {
        "currency": "USD",
        "versions": [
            {"name": "v", "effective": "2026-01-01", "rates": [{"resource": "gpu", "price": 1}]}
        ],
    }
    m = PriceBookCostModel(price_book_from_dict(doc, "p.yaml"), "c", EPOCH_MS)
    assert m.cost(job("g", t=task(2)), "A100", 0.0, HOUR) == 2
    with pytest.raises(CostModelError, match="no rate in price book version 'v' for resource cpu"):
        m.cost(job("c", t=task(1, cpu=1000)), "A100", 0.0, HOUR)


def test_budget_book_on_the_price_book() -> None:
    """End to end: an H100 job admitted for 2 hours of peak commits what the book says, and
    an off-peak budget lets the next job wait for the evening."""
    m = model()
    epoch_s = EPOCH_MS // 1000
    book = BudgetBook(spec(budget("vision", "60", "off-peak"), epoch_s=epoch_s), m)
    t = t_of("2026-03-11T10:00:00+01:00")
    j = job("big", t=BIG, tenant="vision/a", estimate=2 * HOUR)
    assert book.commit(j, "H100", t) == 2 * H100_PEAK
    block = book.admissible(job("next", tenant="vision/b"), t + 60)
    assert block is not None and block.until == t_of("2026-03-11T20:00:00+01:00")
    assert "jobs start only off-peak; waits until 2026-03-11 19:00 UTC" in str(block)
    assert book.settle("big", t + HOUR) == H100_PEAK


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 300 * 24 * 60))
def test_next_off_peak_is_the_first_off_peak_minute_by_the_books_own_clock(minute: int) -> None:
    """Checked against ``PriceBook.band_at`` minute by minute (DST days included)."""
    m = model()
    t = minute * 60.0 + 17.0
    nxt = m.next_off_peak(t)

    def to_ms(u: float) -> int:
        return EPOCH_MS + round(u * 1000)

    assert BOOK.band_at(to_ms(nxt)) == "off-peak"
    if nxt > t:
        assert BOOK.band_at(to_ms(nxt) - 1) != "off-peak"
        u = t
        while u < nxt:
            assert BOOK.band_at(to_ms(u)) != "off-peak", u
            u += 60.0


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 300 * 86_400),
    st.integers(0, 3 * 86_400),
    st.integers(0, 3 * 86_400),
    st.sampled_from(("normal", "spot", "online")),
)
def test_price_book_cost_is_monotone_and_adds_up_across_cuts(
    start: int, a: int, b: int, cls: str
) -> None:
    m = model(cluster_models=("H100", "A100"))
    j = big_job(cls)
    t0, t1, t2 = float(start), float(start + a), float(start + a + b)
    whole, first, second = m.cost(j, None, t0, t2), m.cost(j, None, t0, t1), m.cost(j, None, t1, t2)
    assert first <= whole and second <= whole
    assert abs(whole - first - second) <= Decimal("0.000002")  # each is rounded once
