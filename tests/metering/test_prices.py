"""Price books: good books load into exact values and price usages by the most specific row;
bad ones say which file, which key and what is wrong."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.model import SpecError
from suanli.metering.prices import (
    DEFAULT_BAND,
    Band,
    PriceBook,
    PriceBookError,
    Rate,
    Window,
    load_price_book,
    price_book_from_dict,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prices.yaml"
WHERE = "prices.yaml"


def ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 instant with an offset."""
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def base_doc() -> dict[str, Any]:
    """A small valid book in UTC: peak weekday daytime, off-peak the rest, two versions."""
    return {
        "currency": "USD",
        "timezone": "UTC",
        "bands": {"peak": "Mon-Fri 08:00-20:00", "off-peak": "default"},
        "versions": [
            {
                "name": "v1",
                "effective": "2026-01-01T00:00:00Z",
                "class_multipliers": {"spot": 0.4, "online": "1.5"},
                "rates": [
                    {"resource": "gpu", "price": "2.00"},
                    {"resource": "gpu", "gpu_model": "H100", "band": "peak", "price": "4.00"},
                    {"resource": "cpu", "price": "0.05"},
                ],
            },
            {
                "name": "v2",
                "effective": "2026-07-01T00:00:00Z",
                "rates": [
                    {"resource": "gpu", "price": "1.50"},
                    {"resource": "gpu", "gpu_model": "H100", "price": "3.00"},
                    {"resource": "cpu", "price": "0.04"},
                    {"resource": "memory", "price": "0.004"},
                ],
            },
        ],
    }


def book(mutate: Callable[[dict[str, Any]], object] | None = None) -> PriceBook:
    doc = base_doc()
    if mutate is not None:
        mutate(doc)
    return price_book_from_dict(doc, WHERE)


BOOK = book()

# --------------------------------------------------------------------------------------------
# The example file
# --------------------------------------------------------------------------------------------


def test_example_file_loads() -> None:
    b = load_price_book(EXAMPLE)
    assert (b.currency, b.timezone) == ("USD", "Europe/Berlin")
    assert b.band_names == ("peak", "weekend", "off-peak")
    assert b.bands[0] == Band("peak", (Window((0, 1, 2, 3, 4), 8 * 60, 20 * 60),))
    assert b.bands[2].default
    assert b.free == frozenset({"network"})
    assert [v.name for v in b.versions] == ["2026-h1", "2026-h2"]
    # An offset-qualified instant and a bare date (local midnight in Berlin, CEST in July).
    assert b.effective_ms == (ms("2025-12-31T23:00:00+00:00"), ms("2026-06-30T22:00:00+00:00"))
    h1 = b.versions[0]
    assert h1.class_multipliers == {"spot": Decimal("0.4"), "online": Decimal("1.5")}
    assert h1.price("gpu", "H100", "normal", "peak", "c1") == Decimal("4.00")
    assert h1.price("gpu", "H100", "spot", "peak", "c1") == Decimal("1.600")
    assert h1.price("gpu", "H100", "online", "peak", "infer-1") == Decimal("5.00")
    assert h1.price("gpu", "T4", "normal", "off-peak", "c1") == Decimal("1.00")
    assert h1.price("gpu-idle", "H100", "normal", "peak", "c1") == Decimal("0.90")
    assert h1.price("network", "", "normal", "peak", "c1") is None  # free: no row matches
    assert h1.price("network", "", "normal", "peak", "edge-1") == Decimal("0.02")


# --------------------------------------------------------------------------------------------
# Windows and bands
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days", "start", "end"),
    [
        pytest.param("Mon-Fri 08:00-20:00", (0, 1, 2, 3, 4), 480, 1200, id="weekday-range"),
        pytest.param("Sat,Sun 10:00-16:00", (5, 6), 600, 960, id="day-list"),
        pytest.param("sat, SUN 10:00-16:00", (5, 6), 600, 960, id="case-and-spaces"),
        pytest.param("Mon,Wed-Fri 00:00-24:00", (0, 2, 3, 4), 0, 1440, id="whole-days"),
        pytest.param("Fri-Mon 09:30-10:15", (0, 4, 5, 6), 570, 615, id="range-wraps-the-week"),
        pytest.param("22:00-06:00", tuple(range(7)), 1320, 360, id="no-days-is-daily"),
        pytest.param("daily 7:05-7:06", tuple(range(7)), 425, 426, id="daily-one-digit-hour"),
        pytest.param("Tuesday 23:00-01:00", (1,), 1380, 60, id="full-day-name"),
    ],
)
def test_window_parse(text: str, days: tuple[int, ...], start: int, end: int) -> None:
    assert Window.parse(text) == Window(days, start, end)


def test_window_past_midnight_covers_the_next_morning() -> None:
    w = Window.parse("Sun 22:00-06:00")
    minutes = set(w.minutes())
    assert len(minutes) == 8 * 60
    assert 6 * 1440 + 22 * 60 in minutes  # Sun 22:00
    assert 0 in minutes and 359 in minutes  # Mon 00:00 and 05:59 (the week wraps)
    assert 360 not in minutes
    assert str(w) == "Sun 22:00-06:00"


@pytest.mark.parametrize(
    ("local", "band"),
    [
        pytest.param("2026-03-02T07:59:59.999+01:00", "off-peak", id="mon-just-before-peak"),
        pytest.param("2026-03-02T08:00:00+01:00", "peak", id="mon-peak-starts"),
        pytest.param("2026-03-06T19:59:00+01:00", "peak", id="fri-last-peak-minute"),
        pytest.param("2026-03-06T20:00:00+01:00", "off-peak", id="fri-peak-ends"),
        pytest.param("2026-03-07T12:00:00+01:00", "weekend", id="sat-noon"),
        pytest.param("2026-07-06T08:00:00+02:00", "peak", id="summer-time-peak-starts"),
        pytest.param("2026-07-06T07:30:00+02:00", "off-peak", id="summer-time-before-peak"),
    ],
)
def test_band_at_local_time(local: str, band: str) -> None:
    assert load_price_book(EXAMPLE).band_at(ms(local)) == band


def test_book_without_bands_has_one_band() -> None:
    def flat(d: dict[str, Any]) -> None:
        del d["bands"]
        del d["versions"][0]["rates"][1]["band"]

    b = book(flat)
    assert b.band_names == (DEFAULT_BAND,)
    assert b.band_at(ms("2026-03-02T09:00:00+00:00")) == DEFAULT_BAND


@settings(max_examples=200, deadline=None)
@given(st.integers(ms("2020-01-01T00:00:00+00:00"), ms("2030-01-01T00:00:00+00:00")))
def test_band_at_follows_the_windows(t: int) -> None:
    """Peak exactly when the UTC weekday is Mon-Fri and the hour is 8 to 19 (a UTC book)."""
    utc = datetime.fromtimestamp(t // 1000, tz=UTC)
    expected = "peak" if utc.weekday() < 5 and 8 <= utc.hour < 20 else "off-peak"
    assert BOOK.band_at(t) == expected


# --------------------------------------------------------------------------------------------
# Rates: the most specific row wins; multipliers; exact prices
# --------------------------------------------------------------------------------------------


def specific_doc(d: dict[str, Any]) -> None:
    d["versions"][0]["rates"] = [
        {"resource": "gpu", "price": "1"},
        {"resource": "gpu", "gpu_model": "H100", "price": "2"},
        {"resource": "gpu", "band": "peak", "price": "3"},
        {"resource": "gpu", "gpu_model": "H100", "band": "peak", "price": "4"},
        {"resource": "gpu", "gpu_model": "H100", "band": "peak", "cluster": "c2", "price": "5"},
        {"resource": "gpu", "priority_class": "online", "price": "6"},
        {"resource": "gpu", "priority_class": "online", "gpu_model": "H100", "price": "7"},
        {"resource": "gpu", "priority_class": "online", "band": "peak", "price": "8"},
        {
            "resource": "gpu",
            "priority_class": "online",
            "gpu_model": "H100",
            "band": "peak",
            "price": "9",
        },
        # Without this row the two rows above naming three fields would tie for it.
        {
            "resource": "gpu",
            "priority_class": "online",
            "gpu_model": "H100",
            "band": "peak",
            "cluster": "c2",
            "price": "10",
        },
    ]
    d["versions"][0]["class_multipliers"] = {"spot": "0.5"}


@pytest.mark.parametrize(
    ("model", "cls", "band", "cluster", "price"),
    [
        pytest.param("A100", "normal", "off-peak", "c1", "1", id="only-the-catch-all"),
        pytest.param("H100", "normal", "off-peak", "c1", "2", id="model"),
        pytest.param("A100", "normal", "peak", "c1", "3", id="band"),
        pytest.param("H100", "normal", "peak", "c1", "4", id="model-and-band"),
        pytest.param("H100", "normal", "peak", "c2", "5", id="model-band-and-cluster"),
        pytest.param("A100", "online", "off-peak", "c1", "6", id="class"),
        pytest.param("H100", "online", "peak", "c1", "9", id="class-model-band"),
        pytest.param("H100", "online", "peak", "c2", "10", id="all-four-fields"),
        pytest.param("A100", "spot", "peak", "c1", "1.5", id="spot-multiplier-on-band-row"),
        pytest.param("H100", "spot", "peak", "c2", "2.5", id="spot-multiplier-on-cluster-row"),
    ],
)
def test_most_specific_row_wins(model: str, cls: str, band: str, cluster: str, price: str) -> None:
    v = book(specific_doc).versions[0]
    assert v.price("gpu", model, cls, band, cluster) == Decimal(price)


def test_multipliers_apply_only_to_rows_without_a_class() -> None:
    def rows(d: dict[str, Any]) -> None:
        d["versions"][0]["rates"].append(
            {"resource": "cpu", "priority_class": "online", "price": "0.09"}
        )

    v = book(rows).versions[0]
    assert v.price("gpu", "A100", "spot", "off-peak", "c") == Decimal("0.800")
    assert v.price("gpu", "A100", "online", "off-peak", "c") == Decimal("3.000")
    assert v.price("gpu", "A100", "normal", "off-peak", "c") == Decimal("2.00")
    assert v.price("cpu", "", "online", "off-peak", "c") == Decimal("0.09")  # names the class
    assert v.price("cpu", "", "spot", "off-peak", "c") == Decimal("0.020")


def test_prices_are_exact_decimals() -> None:
    def floats(d: dict[str, Any]) -> None:
        d["versions"][0]["rates"][0]["price"] = 0.1
        d["versions"][0]["rates"][2]["price"] = "1e-3"

    v = book(floats).versions[0]
    assert v.rates[0].price == Decimal("0.1")  # not 0.1000000000000000055511151231257827
    assert v.rates[2].price == Decimal("0.001")


def test_tie_resolved_by_a_row_naming_both_fields() -> None:
    def rows(d: dict[str, Any]) -> None:
        d["versions"][0]["rates"] = [
            {"resource": "gpu", "band": "peak", "price": "3"},
            {"resource": "gpu", "gpu_model": "A100", "price": "1"},
            {"resource": "gpu", "gpu_model": "A100", "band": "peak", "price": "2"},
        ]

    v = book(rows).versions[0]
    assert v.price("gpu", "A100", "normal", "peak", "c") == Decimal("2")
    assert v.price("gpu", "A100", "normal", "off-peak", "c") == Decimal("1")
    assert v.price("gpu", "H100", "normal", "peak", "c") == Decimal("3")
    assert v.price("gpu", "H100", "normal", "off-peak", "c") is None


def test_effective_date_is_local_midnight() -> None:
    def berlin(d: dict[str, Any]) -> None:
        d["timezone"] = "Europe/Berlin"
        d["versions"][0]["effective"] = "2026-01-01"
        d["versions"][1]["effective"] = datetime.fromisoformat("2026-07-01T00:00:00+02:00")

    b = book(berlin)
    assert b.effective_ms == (ms("2025-12-31T23:00:00+00:00"), ms("2026-06-30T22:00:00+00:00"))
    assert b.version_at(ms("2025-12-31T22:59:59.999+00:00")) is None
    assert b.version_at(ms("2025-12-31T23:00:00+00:00")) == b.versions[0]
    assert b.version_at(ms("2026-06-30T22:00:00+00:00")) == b.versions[1]


# --------------------------------------------------------------------------------------------
# Errors name the file, the key path and the problem
# --------------------------------------------------------------------------------------------


def set_at(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target: Any = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target: Any = d
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def add_rate(version: int, *rows: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        d["versions"][version]["rates"].extend(copy.deepcopy(rows))

    return mutate


RATE0 = ["versions", 0, "rates", 0]

ERRORS = [
    pytest.param(
        set_at(["versions", 1, "rates", 3, "band"], "night"),
        "versions[1].rates[3].band: unknown band 'night' (bands: peak, off-peak)",
        id="unknown-band",
    ),
    pytest.param(
        set_at(["versions", 0, "rates", 1, "band"], "peek"),
        "versions[0].rates[1].band: unknown band 'peek' (did you mean 'peak'?)",
        id="misspelt-band",
    ),
    pytest.param(
        set_at(["bands", "shoulder"], "Fri 18:00-22:00"),
        "bands.shoulder: Fri 18:00-22:00 overlaps bands.peak (Mon-Fri 08:00-20:00) at Fri 18:00",
        id="windows-of-two-bands-overlap",
    ),
    pytest.param(
        set_at(["bands", "peak"], ["Mon 08:00-12:00", "Mon 11:00-13:00"]),
        "bands.peak[1]: Mon 11:00-13:00 overlaps bands.peak[0] (Mon 08:00-12:00) (the same "
        "band) at Mon 11:00",
        id="windows-of-one-band-overlap",
    ),
    pytest.param(
        set_at(["bands", "night"], "Sun 22:00-09:00"),
        "bands.night: Sun 22:00-09:00 overlaps bands.peak (Mon-Fri 08:00-20:00) at Mon 08:00",
        id="overnight-window-wraps-into-monday",
    ),
    pytest.param(
        drop(["bands", "off-peak"]),
        "bands: Mon 00:00 (local time) is in no band; add it to a window or mark one band as "
        "the rest (e.g. off-peak: default)",
        id="uncovered-minutes-without-default",
    ),
    pytest.param(
        set_at(["bands", "rest"], "default"),
        "bands.rest: only one band can be the default; 'off-peak' already is",
        id="two-defaults",
    ),
    pytest.param(
        set_at(["bands", "peak"], "weekdays 8-20"),
        "bands.peak: 'weekdays 8-20' is not a window such as 'Mon-Fri 08:00-20:00'",
        id="window-syntax",
    ),
    pytest.param(
        set_at(["bands", "peak"], ["Mon-Fry 08:00-20:00"]),
        "bands.peak[0]: 'Mon-Fry': unknown weekday 'Fry' (did you mean 'Fri'?)",
        id="unknown-weekday",
    ),
    pytest.param(
        set_at(["bands", "peak"], "Mon 08:00-25:00"),
        "bands.peak: 'Mon 08:00-25:00': time 25:00 is out of range (00:00 to 24:00)",
        id="time-out-of-range",
    ),
    pytest.param(
        set_at(["bands", "peak"], "Mon 08:00-08:00"),
        "bands.peak: Mon 08:00-08:00: starts and ends at the same time",
        id="empty-window",
    ),
    pytest.param(
        set_at(["bands", "peak"], []),
        "bands.peak: must list at least one window, or be 'default'",
        id="band-without-windows",
    ),
    pytest.param(
        set_at([*RATE0, "resource"], "gpus"),
        "versions[0].rates[0].resource: unknown resource 'gpus' (did you mean 'gpu'?)",
        id="unknown-resource",
    ),
    pytest.param(
        set_at(["versions", 0, "rates", 2, "gpu_model"], "H100"),
        "versions[0].rates[2].gpu_model: only gpu and gpu-idle rates name a GPU model, not cpu",
        id="gpu-model-on-cpu",
    ),
    pytest.param(
        set_at([*RATE0, "price"], -1),
        "versions[0].rates[0].price: must be >= 0, got -1",
        id="negative-price",
    ),
    pytest.param(
        set_at([*RATE0, "price"], "two dollars"),
        "versions[0].rates[0].price: must be a number such as 2.40, got 'two dollars'",
        id="price-not-a-number",
    ),
    pytest.param(
        set_at([*RATE0, "price"], "NaN"),
        "versions[0].rates[0].price: must be a finite number, got NaN",
        id="price-nan",
    ),
    pytest.param(
        set_at([*RATE0, "price"], True),
        "versions[0].rates[0].price: must be a number or a decimal string, got True",
        id="price-bool",
    ),
    pytest.param(
        drop([*RATE0, "price"]),
        "versions[0].rates[0].price: required key is missing",
        id="price-missing",
    ),
    pytest.param(
        set_at([*RATE0, "prise"], 1),
        "versions[0].rates[0]: unknown key 'prise' (did you mean 'price'?)",
        id="unknown-rate-key",
    ),
    pytest.param(
        set_at([*RATE0, "cluster"], 7),
        "versions[0].rates[0].cluster: must be a string, got 7 (quote it)",
        id="cluster-not-a-string",
    ),
    pytest.param(
        add_rate(
            0,
            {"resource": "gpu", "band": "peak", "price": "3"},
            {"resource": "gpu", "gpu_model": "A100", "price": "1"},
        ),
        "versions[0].rates[4]: ties with rates[3]: both gpu rows name 1 field(s) and both "
        "match gpu_model 'A100', band 'peak'; add a row for that case or make one of them "
        "more specific",
        id="tie-between-equally-specific-rows",
    ),
    pytest.param(
        add_rate(0, {"resource": "gpu", "band": "peak", "gpu_model": "H100", "price": "9"}),
        "versions[0].rates[3]: same resource and match fields as rates[1] (gpu, gpu_model "
        "'H100', band 'peak')",
        id="duplicate-row",
    ),
    pytest.param(
        set_at(["versions", 1, "effective"], "2025-07-01T00:00:00Z"),
        "versions[1].effective: 2025-07-01T00:00:00Z must be after versions[0]'s "
        "(2026-01-01T00:00:00Z); list versions in order",
        id="versions-out-of-order",
    ),
    pytest.param(
        set_at(["versions", 1, "name"], "v1"),
        "versions[1].name: 'v1' is also versions[0]'s name",
        id="duplicate-version-name",
    ),
    pytest.param(
        set_at(["versions", 0, "effective"], "2026-01-01T00:00:00"),
        "versions[0].effective: 2026-01-01T00:00:00 needs a UTC offset",
        id="effective-without-offset",
    ),
    pytest.param(
        set_at(["versions", 0, "effective"], "next tuesday"),
        "versions[0].effective: must be an instant such as 2026-01-01T00:00:00Z, got "
        "'next tuesday'",
        id="effective-garbage",
    ),
    pytest.param(
        drop(["versions", 0, "effective"]),
        "versions[0].effective: required key is missing",
        id="effective-missing",
    ),
    pytest.param(
        set_at(["versions", 0, "rates"], {"resource": "gpu"}),
        "versions[0].rates: must be a list",
        id="rates-not-a-list",
    ),
    pytest.param(
        set_at(["versions", 0, "class_multipliers", "spot"], -0.5),
        "versions[0].class_multipliers.spot: must be >= 0, got -0.5",
        id="negative-multiplier",
    ),
    pytest.param(
        set_at(["timezone"], "Mars/Olympus_Mons"),
        "timezone: unknown time zone 'Mars/Olympus_Mons'",
        id="unknown-timezone",
    ),
    pytest.param(
        set_at(["currencies"], "USD"),
        "unknown key 'currencies' (did you mean 'currency'?)",
        id="unknown-top-level-key",
    ),
    pytest.param(drop(["currency"]), "currency: required key is missing", id="no-currency"),
    pytest.param(set_at(["versions"], []), "versions: must not be empty", id="no-versions"),
    pytest.param(
        set_at(["free"], ["netwrk"]),
        "free[0]: unknown resource 'netwrk' (did you mean 'network'?)",
        id="unknown-free-resource",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), ERRORS)
def test_errors_name_file_and_key(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    with pytest.raises(PriceBookError) as info:
        book(mutate)
    text = str(info.value)
    assert text.startswith(f"{WHERE}: {message}"), text
    assert isinstance(info.value, SpecError)
    assert info.value.where == WHERE


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    text = EXAMPLE.read_text(encoding="utf-8")
    path.write_text(text.replace('band: peak, price: "4.00"', 'band: night, price: "4.00"'))
    with pytest.raises(SpecError) as info:
        load_price_book(path)
    assert str(info.value) == (
        f"{path}: versions[0].rates[1].band: unknown band 'night' (bands: peak, weekend, off-peak)"
    )


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        pytest.param("missing.yaml", None, "missing.yaml: not found", id="not-found"),
        pytest.param(
            "prices.json", "{}", "prices.json: expected a .yaml or .yml file", id="suffix"
        ),
        pytest.param(
            "bad.yaml", "currency: [USD\n", "bad.yaml: invalid YAML at line 2", id="syntax"
        ),
        pytest.param("empty.yml", "", "empty.yml: empty file", id="empty"),
        pytest.param("list.yaml", "- 1\n", "list.yaml: expected a mapping", id="not-a-mapping"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(PriceBookError) as info:
        load_price_book(str(path))
    assert str(info.value).startswith(str(tmp_path / message)), str(info.value)


def test_constructors_validate_without_a_file() -> None:
    with pytest.raises(PriceBookError, match="^resource: unknown resource 'ram'"):
        Rate("ram", Decimal(1))
    with pytest.raises(PriceBookError, match="must list at least one window"):
        Band("peak")


def test_doc_shows_the_example_file() -> None:
    """docs/prices.md's first YAML block is examples/prices.yaml, byte for byte."""
    doc = (EXAMPLE.parent.parent / "docs" / "prices.md").read_text(encoding="utf-8")
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block == EXAMPLE.read_text(encoding="utf-8")
