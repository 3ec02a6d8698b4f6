"""Budget files: the example loads into the spec it describes; bad files say which file, which
key and what is wrong."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from builders import job
from suanli.config.budgets import budgets_from_dict, load_budgets, parse_budgets, parse_duration
from suanli.core.budget import BudgetBook, BudgetError, BudgetSpec
from suanli.core.model import SpecError
from suanli.metering.costmodel import PriceBookCostModel
from suanli.metering.prices import load_price_book

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "budgets.yaml"
PRICES = ROOT / "examples" / "prices.yaml"
WHERE = "budgets.yaml"


def posix(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def base_doc() -> dict[str, Any]:
    return {
        "currency": "USD",
        "default_runtime": "12h",
        "budgets": [
            {"org": "vision", "period": "monthly", "limit": "25000.00", "action": "demote"},
            {
                "org": "nlp/chat",
                "period": "weekly",
                "limit": 4000,
                "thresholds": [0.5, "90%"],
                "action": "refuse",
            },
        ],
    }


def load(mutate: Callable[[dict[str, Any]], object] | None = None) -> Any:
    doc = base_doc()
    if mutate is not None:
        mutate(doc)
    return budgets_from_dict(doc, WHERE)


# --------------------------------------------------------------------------------------------
# The example file
# --------------------------------------------------------------------------------------------


def test_example_file_loads_into_the_spec_it_describes() -> None:
    spec = load_budgets(EXAMPLE)
    assert spec.currency == "USD"
    assert spec.default_runtime_s == 24 * 3600
    assert spec.epoch_s == 0
    by_label = {b.label: b for b in spec.budgets}
    assert list(by_label) == [
        "lab",
        "vision",
        "vision/detection",
        "nlp/chat",
        "nlp/eval",
        "climate-grant",
    ]
    assert by_label["lab"] == BudgetSpec(
        "", "monthly", Decimal("120000.00"), (0.5, 0.75, 0.9, 1.0), "none", name="lab"
    )
    assert by_label["vision"] == BudgetSpec(
        "vision", "monthly", Decimal("25000.00"), (0.5, 0.8, 1.0), "demote", "spot"
    )
    assert by_label["vision/detection"].thresholds == (0.5, 0.9)
    assert by_label["vision/detection"].action == "off-peak"
    assert by_label["nlp/chat"].limit == Decimal(4000)
    grant = by_label["climate-grant"]
    assert (grant.period, grant.org, grant.action) == ("fixed", "research/climate", "refuse")
    assert (grant.start, grant.end) == (
        posix("2026-10-01T00:00:00Z"),
        posix("2027-04-01T00:00:00Z"),
    )


def test_example_budgets_run_on_the_example_price_book() -> None:
    """The two example files fit together: same currency, and a detection job is governed by
    the lab, its department and its project."""
    epoch_s = posix("2026-11-02T00:00:00Z")  # a Monday
    spec = load_budgets(EXAMPLE, epoch_s=epoch_s)
    costs = PriceBookCostModel(load_price_book(PRICES), "train-1", epoch_s * 1000, ["H100"])
    book = BudgetBook(spec, costs)
    j = job("det-1", tenant="vision/detection/alice", estimate=3600.0)
    assert [b.label for b in book.governing(j)] == ["lab", "vision", "vision/detection"]
    assert book.commit(j, "H100", 10 * 3600.0) == Decimal("3.60")  # 11:00 Berlin: H100 peak
    assert [s.committed for s in book.status(10 * 3600.0)][:3] == [Decimal("3.60")] * 3
    assert [s.period_label for s in book.status(10 * 3600.0)][:3] == [
        "2026-11",
        "2026-11",
        "2026-W45",
    ]


# --------------------------------------------------------------------------------------------
# Values as written
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("24h", 86_400.0),
        ("90m", 5_400.0),
        ("1h30m", 5_400.0),
        ("2d", 172_800.0),
        ("1w", 604_800.0),
        ("45s", 45.0),
        ("1.5h", 5_400.0),
        ("3600", 3_600.0),
        (7200, 7_200.0),
        (" 2H ", 7_200.0),
    ],
    ids=[
        "hours",
        "minutes",
        "mixed",
        "days",
        "week",
        "seconds",
        "decimal",
        "bare-string",
        "number",
        "spaces-case",
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text, "default_runtime") == seconds


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        ("25000.00", Decimal("25000.00")),
        (4000, Decimal(4000)),
        (12.5, Decimal("12.5")),
        ("1_000", Decimal(1000)),
    ],
    ids=["decimal-string", "integer", "float-read-as-written", "underscores"],
)
def test_limits_are_exact_decimals(limit: object, expected: Decimal) -> None:
    spec = load(lambda d: d["budgets"][0].update(limit=limit))
    assert spec.budgets[0].limit == expected
    assert str(spec.budgets[0].limit) == str(expected)


def test_thresholds_as_fractions_or_percentages_sorted() -> None:
    spec = load(lambda d: d["budgets"][0].update(thresholds=["100%", 0.5, "75%"]))
    assert spec.budgets[0].thresholds == (0.5, 0.75, 1.0)
    assert load().budgets[0].thresholds == (0.5, 0.8, 1.0)  # the default
    assert load(lambda d: d["budgets"][0].update(thresholds=[])).budgets[0].thresholds == ()


def test_fixed_periods_take_dates_and_instants_with_offsets() -> None:
    fixed = {
        "org": "research",
        "period": "fixed",
        "start": "2026-10-01",
        "end": "2027-01-01T01:00:00+01:00",
        "limit": 5,
    }
    spec = load(lambda d: d["budgets"].append(fixed))
    b = spec.budgets[-1]
    assert (b.start, b.end) == (posix("2026-10-01T00:00:00Z"), posix("2027-01-01T00:00:00Z"))
    text = "currency: EUR\nbudgets:\n  - {org: r, period: fixed, start: 2026-10-01, end: 2026-10-08T00:00:00Z, limit: 1}\n"
    b = parse_budgets(text, "r.yaml").budgets[0]
    assert (b.start, b.end) == (posix("2026-10-01T00:00:00Z"), posix("2026-10-08T00:00:00Z"))


def test_everyone_and_epoch() -> None:
    spec = load(lambda d: d["budgets"].append({"org": "*", "period": "daily", "limit": 1}))
    assert spec.budgets[-1].org == "" and spec.budgets[-1].label == "*"
    assert budgets_from_dict(base_doc(), WHERE, epoch_s=1_790_000_000).epoch_s == 1_790_000_000


# --------------------------------------------------------------------------------------------
# Errors name the file, the key path and the problem
# --------------------------------------------------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return mutate


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        del node[last]

    return mutate


ERRORS: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    ("missing-currency", _drop("currency"), "budgets.yaml: currency: required key is missing"),
    (
        "unknown-top-key",
        _set("budget", []),
        "budgets.yaml: unknown key 'budget' (did you mean 'budgets'?)",
    ),
    ("no-budgets", _set("budgets", []), "budgets.yaml: budgets: must list at least one budget"),
    (
        "budgets-not-a-list",
        _set("budgets", {"org": "x"}),
        "budgets.yaml: budgets: must be a list of budgets, got {'org': 'x'}",
    ),
    (
        "bad-duration",
        _set("default_runtime", "a day"),
        "budgets.yaml: default_runtime: must be a duration such as 24h, 90m or 1h30m (or "
        "seconds), got 'a day'",
    ),
    (
        "zero-duration",
        _set("default_runtime", "0h"),
        "budgets.yaml: default_runtime: must be a duration > 0, got '0h'",
    ),
    (
        "unknown-budget-key",
        _set("budgets.1.limits", 5),
        "budgets.yaml: budgets[1]: unknown key 'limits' (did you mean 'limit'?)",
    ),
    (
        "missing-org",
        _drop("budgets.0.org"),
        'budgets.yaml: budgets[0].org: required key is missing (an org path, or "*" for everyone)',
    ),
    (
        "missing-limit",
        _drop("budgets.1.limit"),
        "budgets.yaml: budgets[1].limit: required key is missing",
    ),
    (
        "unknown-action",
        _set("budgets.1.action", "refuze"),
        "budgets.yaml: budgets[1].action: unknown action 'refuze' (did you mean 'refuse'?)",
    ),
    (
        "unknown-period",
        _set("budgets.0.period", "month"),
        "budgets.yaml: budgets[0].period: unknown period 'month' (did you mean 'monthly'?)",
    ),
    (
        "negative-limit",
        _set("budgets.0.limit", "-5"),
        "budgets.yaml: budgets[0].limit: must be an amount > 0, got '-5'",
    ),
    (
        "text-limit",
        _set("budgets.0.limit", "lots"),
        "budgets.yaml: budgets[0].limit: must be an amount such as \"25000.00\", got 'lots'",
    ),
    (
        "percent-as-number",
        _set("budgets.1.thresholds", [0.5, 80]),
        "budgets.yaml: budgets[1].thresholds[1]: must be a fraction of the limit (0.8 is 80%) "
        "or a percentage such as '80%', got 80",
    ),
    (
        "duplicate-threshold",
        _set("budgets.1.thresholds", [0.5, "50%"]),
        "budgets.yaml: budgets[1].thresholds[1]: 0.5 is listed twice",
    ),
    (
        "demote-class-without-demote",
        _set("budgets.1.demote_to", "spot"),
        "budgets.yaml: budgets[1].demote_to: only a demote budget demotes (this one's action "
        "is refuse)",
    ),
    (
        "empty-org-part",
        _set("budgets.0.org", "vision//det"),
        "budgets.yaml: budgets[0].org: 'vision//det' has an empty part (write e.g. "
        "vision/detection)",
    ),
    (
        "fixed-without-start",
        _set("budgets.0.period", "fixed"),
        "budgets.yaml: budgets[0].start: required key is missing",
    ),
    (
        "start-on-monthly",
        _set("budgets.0.start", "2026-01-01"),
        "budgets.yaml: budgets[0].start: only a fixed period has a start (monthly periods "
        "follow the UTC calendar)",
    ),
    (
        "duplicate-label",
        _set("budgets.1.org", "/vision/"),
        "budgets.yaml: budgets[1]: budget 'vision' is also budgets[0]; give one of them a "
        "distinct name",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_file_key_and_problem(
    mutate: Callable[[dict[str, Any]], object], message: str
) -> None:
    doc = copy.deepcopy(base_doc())
    mutate(doc)
    with pytest.raises(BudgetError) as e:
        budgets_from_dict(doc, WHERE)
    assert str(e.value) == message
    assert isinstance(e.value, SpecError)


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        (
            {"start": "2026-10-01T00:00:00", "end": "2026-11-01"},
            "budgets.yaml: budgets[2].start: 2026-10-01T00:00:00 needs a UTC offset (e.g. "
            "2026-11-01T00:00:00Z), or give a date for 00:00 UTC",
        ),
        (
            {"start": "2026-11-01", "end": "2026-10-01"},
            "budgets.yaml: budgets[2].end: must be after start (1793491200), got 1790812800",
        ),
        (
            {"start": "soon", "end": "2026-10-01"},
            "budgets.yaml: budgets[2].start: must be a date (2026-11-01) or an instant "
            "(2026-11-01T00:00:00Z), got 'soon'",
        ),
    ],
    ids=["naive-instant", "end-before-start", "not-a-date"],
)
def test_fixed_period_errors(fixed: dict[str, str], message: str) -> None:
    b = {"org": "r", "period": "fixed", "limit": 1} | fixed
    with pytest.raises(BudgetError) as e:
        load(lambda d: d["budgets"].append(b))
    assert str(e.value) == message


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match=r"^nowhere\.yaml: not found$"):
        load_budgets("nowhere.yaml")
    wrong = tmp_path / "budgets.json"
    wrong.write_text("{}")
    with pytest.raises(BudgetError, match=r"budgets\.json: expected a \.yaml or \.yml file$"):
        load_budgets(wrong)
    broken = tmp_path / "broken.yaml"
    broken.write_text("currency: USD\nbudgets: [\n")
    with pytest.raises(BudgetError, match=r"broken\.yaml: invalid YAML at line 3"):
        load_budgets(broken)
    bad = tmp_path / "bad.yml"
    bad.write_text("currency: USD\nbudgets:\n  - {org: x, period: daily, limit: 0}\n")
    with pytest.raises(BudgetError) as e:
        load_budgets(bad)
    assert str(e.value) == f"{bad}: budgets[0].limit: must be an amount > 0, got 0"
    with pytest.raises(BudgetError, match=r"^<yaml>: expected a mapping with currency and budgets"):
        parse_budgets("- 1\n- 2\n")
