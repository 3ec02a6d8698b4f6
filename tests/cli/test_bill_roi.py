"""ROI of simulated runs: capacity cost, cost per delivered GPU-hour, idle capacity, revenue
and savings, against figures worked out by hand.

The hand case: 8 H100 (2 nodes of 4). Capacity costs: 35,040 per GPU over 4 years is
35,040 / (4 × 8760) = 1.00 per GPU-hour; 1,000 W at PUE 1.5 and 0.20 per kWh is
1 × 1.5 × 0.20 = 0.30 per GPU-hour; so c = 1.30 per GPU-hour and H = 8 × 1.30 = 10.40 per
hour for the cluster. Two jobs of 4 GPUs for 1 hour each at utilisation 0.5:

- ``parallel+packing`` runs them side by side: span 1 h, capacity cost 10.40, delivered
  8 GPU-h, 1.30 per delivered GPU-h, no idle capacity;
- ``serial+spread`` runs one after the other: span 2 h, capacity cost 20.80, delivered 8 GPU-h,
  2.60 per delivered GPU-h, 8 idle GPU-h costing 10.40.

Waste: half of the 8 delivered GPU-hours is idle, 4 GPU-h × 1.30 = 5.20 at capacity cost.
Revenue (flat book): 4 GPU-h used at 2.00 plus 4 idle at 1.00 = 12.00 either way. Parallel
against serial: savings (2.60 − 1.30) × 8 = 10.40, and the extra hour costs 1 × 10.40.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bill_builders import FLAT_BOOK, HOUR, attempt_row, run, write_book, write_output
from suanli.metering.roi import (
    CapacityError,
    capacity_from_dict,
    compare,
    load_capacity,
    roi,
    round_half_even,
)

ROOT = Path(__file__).resolve().parents[2]

CAPACITY = """\
currency: USD
electricity_per_kwh: "0.20"
pue: "1.5"
models:
  H100: {price_per_gpu: "35040", lifetime_years: 4, watts_per_gpu: 1000}
"""

PARALLEL = [
    attempt_row("a", 0, HOUR, gpu="H100=4000", gpu_util=0.5),
    attempt_row("b", 0, HOUR, gpu="H100=4000", gpu_util=0.5),
]
SERIAL = [
    attempt_row("a", 0, HOUR, gpu="H100=4000", gpu_util=0.5),
    attempt_row("b", HOUR, 2 * HOUR, gpu="H100=4000", gpu_util=0.5),
]


@pytest.fixture()
def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture()
def case(tmp_path: Path) -> dict[str, Path]:
    out = write_output(
        tmp_path / "out",
        {"parallel+packing": PARALLEL, "serial+spread": SERIAL},
        cluster="2x4xH100",
    )
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY, encoding="utf-8")
    return {"out": out, "capacity": capacity, "prices": write_book(tmp_path, FLAT_BOOK)}


def roi_json(runner: CliRunner, case: dict[str, Path], *extra: str) -> dict[str, Any]:
    result = run(
        runner,
        "bill",
        "roi",
        case["out"],
        "--capacity",
        case["capacity"],
        "--prices",
        case["prices"],
        "--json",
        *extra,
    )
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def test_roi_figures_match_the_hand_computation(runner: CliRunner, case: dict[str, Path]) -> None:
    doc = roi_json(runner, case)
    parallel, serial = doc["results"]
    assert parallel["cluster_from"] == "cluster spec '2x4xH100'"
    expected_parallel = {
        "gpus": 8,
        "span_hours": "1.000000000",
        "hourly_cluster_cost": "10.400000",
        "capacity_gpu_hours": "8.000000000",
        "capacity_cost": "10.400000",
        "delivered_gpu_hours": "8.000000000",
        "allocation": "1.000000",
        "cost_per_delivered_gpu_hour": "1.300000",
        "idle_capacity_gpu_hours": "0.000000000",
        "idle_capacity_cost": "0.000000",
        "waste_gpu_hours": "4.000000000",
        "waste_cost": "5.200000",
        # Half of the 8 delivered GPU-hours busy: 4 of 8 capacity GPU-hours, 10.40 / 4.
        "busy_gpu_hours": "4.000000000",
        "utilisation": "0.500000",
        "cost_per_busy_gpu_hour": "2.600000",
        "revenue": "12.000000",
        "margin": "1.600000",
        "cost_recovery": "1.153846",  # 12 / 10.4 = 1.1538461...
    }
    expected_serial = {
        "span_hours": "2.000000000",
        "capacity_gpu_hours": "16.000000000",
        "capacity_cost": "20.800000",
        "allocation": "0.500000",
        "utilisation": "0.250000",  # 4 busy of 16 capacity GPU-hours
        "cost_per_busy_gpu_hour": "5.200000",
        "cost_per_delivered_gpu_hour": "2.600000",
        "idle_capacity_gpu_hours": "8.000000000",
        "idle_capacity_cost": "10.400000",
        "waste_cost": "5.200000",
        "revenue": "12.000000",
        "margin": "-8.800000",
        "cost_recovery": "0.576923",  # 12 / 20.8 = 0.5769230...
    }
    assert {k: parallel[k] for k in expected_parallel} == expected_parallel
    assert {k: serial[k] for k in expected_serial} == expected_serial
    assert doc["baseline"] == "parallel+packing"
    (c,) = doc["comparisons"]
    assert c == {
        "policy": "serial+spread",
        "baseline": "parallel+packing",
        "delta_delivered_gpu_hours": "0.000000000",
        "delta_span_hours": "1.000000000",
        "cost_per_delivered_gpu_hour": "2.600000",
        "baseline_cost_per_delivered_gpu_hour": "1.300000",
        "savings": "-10.400000",
        "extra_time_cost": "-10.400000",
    }


def test_what_a_policy_saves_against_a_baseline(runner: CliRunner, case: dict[str, Path]) -> None:
    doc = roi_json(runner, case, "--baseline", "serial+spread")
    assert doc["baseline"] == "serial+spread"
    (c,) = doc["comparisons"]
    assert (c["policy"], c["savings"], c["extra_time_cost"]) == (
        "parallel+packing",
        "10.400000",
        "10.400000",
    )
    table = run(
        runner,
        "bill",
        "roi",
        case["out"],
        "--capacity",
        case["capacity"],
        "--prices",
        case["prices"],
        "--baseline",
        "serial+spread",
    )
    assert table.exit_code == 0
    assert "Against serial+spread" in table.stdout and "10.40" in table.stdout


def test_busy_figures_are_undefined_when_the_book_does_not_split_idle() -> None:
    import yaml

    costs = capacity_from_dict(yaml.safe_load(CAPACITY))
    r = roi("p", costs, {"H100": 8}, HOUR, {"H100": 8 * 1000 * HOUR}, busy_known=False)
    figures = r.figures()
    assert figures["allocation"] == Decimal("1.000000")
    assert figures["busy_gpu_hours"] is None and figures["utilisation"] is None


def test_savings_when_delivered_hours_differ() -> None:
    # x delivered 10 GPU-h in 2 h, y 8 GPU-h in 2 h on the same 8 GPUs: same capacity cost
    # 20.80, k_x = 2.08, k_y = 2.60; savings (2.60 - 2.08) × 10 = 5.20; same span, so the
    # extra-time cost is 0 (the two measures agree only when delivered hours are equal).
    costs = capacity_from_dict(
        {
            "currency": "USD",
            "electricity_per_kwh": "0.20",
            "pue": "1.5",
            "models": {
                "H100": {"price_per_gpu": 35040, "lifetime_years": 4, "watts_per_gpu": 1000}
            },
        }
    )
    gpu_h = 1000 * 3_600_000
    x = roi("x", costs, {"H100": 8}, 2 * 3_600_000, {"H100": 10 * gpu_h})
    y = roi("y", costs, {"H100": 8}, 2 * 3_600_000, {"H100": 8 * gpu_h})
    f = compare(x, y).figures()
    assert f["cost_per_delivered_gpu_hour"] == Decimal("2.080000")
    assert f["savings"] == Decimal("5.200000")
    assert f["extra_time_cost"] == Decimal("0.000000")
    assert f["delta_delivered_gpu_hours"] == Decimal("2.000000000")
    assert x.cost_per_delivered_exact() == Fraction(208, 100)  # exact before rounding


def test_price_per_node_is_shared_among_its_gpus(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        CAPACITY.replace(
            'H100: {price_per_gpu: "35040", lifetime_years: 4, watts_per_gpu: 1000}',
            'H100: {price_per_node: "140160", gpus_per_node: 4, lifetime_years: 4, '
            "watts_per_gpu: 1000}",
        )
    )
    costs = load_capacity(path)
    assert costs.hourly("H100") == Fraction(13, 10)  # 1.00 amortisation + 0.30 power


def test_example_capacity_file_loads() -> None:
    costs = load_capacity(ROOT / "examples" / "capacity.yaml")
    assert {"H100", "A100", "V100", "K80", "P40"} <= set(costs.models)
    # H100: 280,000 / 8 / (4 × 8760) + 1 kW × 1.3 × 0.12 = 0.998858... + 0.156
    assert costs.hourly("H100") == Fraction(35000, 4 * 8760) + Fraction(156, 1000)


CAPACITY_ERRORS = [
    ("currency: USD\nmodels: {}\n", "electricity_per_kwh: required"),
    (CAPACITY.replace('pue: "1.5"', 'pue: "0.9"'), "pue: must be >= 1"),
    (CAPACITY.replace("lifetime_years: 4, ", ""), "models.H100.lifetime_years: required"),
    (
        CAPACITY.replace('price_per_gpu: "35040"', 'price_per_gpu: "35040", price_per_node: 1'),
        "models.H100: give price_per_gpu, or price_per_node with gpus_per_node",
    ),
    (
        CAPACITY.replace('price_per_gpu: "35040"', 'price_per_node: "1"'),
        "models.H100.gpus_per_node: a whole number >= 1 is required",
    ),
    (CAPACITY.replace("watts_per_gpu", "watts"), "models.H100.watts: unknown key"),
    (CAPACITY.replace('"0.20"', '"cheap"'), "electricity_per_kwh: expected a number"),
    (CAPACITY.replace("lifetime_years: 4", "lifetime_years: 0"), "must be a number > 0"),
    ("models: [\n", "invalid YAML at line 2"),
]


@pytest.mark.parametrize(("text", "problem"), CAPACITY_ERRORS, ids=[p for _, p in CAPACITY_ERRORS])
def test_capacity_file_errors_name_the_key(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(text)
    with pytest.raises(CapacityError) as e:
        load_capacity(path)
    assert str(e.value).startswith(str(path)) and problem in str(e.value)


def test_cluster_inventory_from_the_summary_or_cluster_option(
    runner: CliRunner, case: dict[str, Path], tmp_path: Path
) -> None:
    # A cluster name that is neither a trace cluster nor a spec, with two GPU models: the
    # inventory cannot be told, so --cluster is required.
    out = write_output(
        tmp_path / "lab",
        {"parallel+packing": PARALLEL},
        cluster="lab",
        gpu_models=("H100", "A100"),
        total_gpus=12,
    )
    args: list[str | Path] = [
        "bill",
        "roi",
        out,
        "--capacity",
        case["capacity"],
        "--prices",
        case["prices"],
    ]
    result = run(runner, *args)
    assert result.exit_code == 2
    assert "cannot tell the GPUs per model of cluster 'lab': pass --cluster SPEC" in result.stderr
    cap = tmp_path / "cap2.yaml"
    cap.write_text(
        CAPACITY + '  A100: {price_per_gpu: "17520", lifetime_years: 4, watts_per_gpu: 0}\n'
    )
    ok = run(runner, *args[:4], cap, *args[5:], "--cluster", "2x4xH100+1x4xA100", "--json")
    assert ok.exit_code == 0, ok.stderr
    (r,) = json.loads(ok.stdout)["results"]
    # H = 8 × 1.30 + 4 × 0.50 = 12.40 per hour; span 1 h.
    assert (r["gpus"], r["capacity_cost"]) == (12, "12.400000")
    wrong = run(runner, *args[:4], cap, *args[5:], "--cluster", "2x4xH100")
    assert wrong.exit_code == 2 and "has 8 GPUs but" in wrong.stderr

    # One GPU model and total_gpus in the summary: enough.
    single = write_output(tmp_path / "one", {"parallel+packing": PARALLEL}, cluster="lab")
    doc = run(runner, "bill", "roi", single, *args[3:], "--json")
    assert doc.exit_code == 0, doc.stderr
    assert json.loads(doc.stdout)["results"][0]["cluster_from"] == "summary.json (8 H100)"


def test_a_model_without_costs_is_an_error(runner: CliRunner, case: dict[str, Path]) -> None:
    case["capacity"].write_text(CAPACITY.replace("H100:", "A100:"))
    result = run(
        runner,
        "bill",
        "roi",
        case["out"],
        "--capacity",
        case["capacity"],
        "--prices",
        case["prices"],
    )
    assert result.exit_code == 2
    assert "models: no costs for GPU model 'H100' (models: A100)" in result.stderr


def test_more_gpu_time_than_the_cluster_has_is_an_error() -> None:
    costs = capacity_from_dict(
        {
            "currency": "USD",
            "electricity_per_kwh": 0,
            "models": {"H100": {"price_per_gpu": 1, "lifetime_years": 1, "watts_per_gpu": 0}},
        }
    )
    with pytest.raises(CapacityError, match="held more H100 GPU time than 1 GPUs"):
        roi("x", costs, {"H100": 1}, 1000, {"H100": 2 * 1000 * 1000})
    with pytest.raises(CapacityError, match="which the cluster"):
        roi("x", costs, {"H100": 1}, 1000, {"A100": 1})


@pytest.mark.parametrize(
    ("value", "quantum", "rounded"),
    [
        (Fraction(1, 3), Decimal("0.01"), Decimal("0.33")),
        (Fraction(5, 1000), Decimal("0.01"), Decimal("0.00")),  # a tie: to even
        (Fraction(15, 1000), Decimal("0.01"), Decimal("0.02")),
        (Fraction(-15, 1000), Decimal("0.01"), Decimal("-0.02")),
        (Fraction(2, 3), Decimal("0.000001"), Decimal("0.666667")),
    ],
)
def test_rounding_is_half_even(value: Fraction, quantum: Decimal, rounded: Decimal) -> None:
    assert round_half_even(value, quantum) == rounded
