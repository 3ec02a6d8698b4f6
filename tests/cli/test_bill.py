"""``suanli bill``: attempts of a simulation output to usage, charges, the ledger and reports.

Two kinds of input: a small run of the simulator (end to end, through the CLI), and output
directories written here by hand (``write_output``), whose figures are worked out by hand.
"""

from __future__ import annotations

import csv
import json
import struct
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pg import fresh_schema, postgres_server  # noqa: F401  (postgres_server: a fixture)
from suanli.cli.bill import meter_result
from suanli.cli.main import app
from suanli.metering.prices import load_price_book, price_book_from_dict
from suanli.metering.rating import rate
from suanli.metering.report import chargeback, tally
from suanli.metering.simout import (
    SimOutputError,
    load_output,
    parse_epoch,
    read_attempts,
    seconds_to_ms,
)
from suanli.metering.usage import Attempt, usage_records
from suanli.store import journal, open_store, totals
from suanli.traces import TraceNotFoundError, find_trace_dir
from support import philly_billed

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "examples" / "prices.yaml"
EPOCH = "2026-01-05T00:00:00Z"
EPOCH_MS = 1_767_571_200_000
from bill_builders import (  # noqa: E402
    FLAT_BOOK,
    HOUR,
    NO_IDLE_BOOK,
    attempt_row,
    run,
    write_book,
    write_output,
)


@pytest.fixture()
def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def bill_json(runner: CliRunner, *args: str | Path) -> dict[str, Any]:
    result = run(runner, "bill", *args, "--json")
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def ledger_entries(db: Path) -> int:
    store = open_store(db)
    try:
        return sum(1 for _ in journal(store))
    finally:
        store.close()


def ledger_total(db: Path) -> Decimal:
    store = open_store(db)
    try:
        return sum((t.amount for t in totals(store, by=())), Decimal(0))
    finally:
        store.close()


# --------------------------------------------------------------------------------------------
# A small simulated run, end to end
# --------------------------------------------------------------------------------------------

LABELS = ("fifo+best-fit", "sjf+best-fit")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulator output directory: 300 synthetic jobs on 2x8xV100, two policy sets."""
    out = tmp_path_factory.mktemp("sim") / "out"
    args = ["simulate", "-c", "2x8xV100", "-n", "300", "-o", str(out), "--quiet"]
    for label in LABELS:
        args += ["-p", label]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture()
def sim_copy(simulated: Path, tmp_path: Path) -> Path:
    """A fresh copy of the simulated directory (no ledger yet)."""
    d = tmp_path / "out"
    d.mkdir()
    for f in simulated.iterdir():
        if f.suffix in (".csv", ".json"):
            (d / f.name).write_bytes(f.read_bytes())
    return d


def rated(directory: Path, prices: Path = PRICES) -> dict[str, list[Any]]:
    """The charges of every result of ``directory``, rated here without the CLI."""
    book = load_price_book(prices)
    return {
        r.policy: meter_result(r, book, EPOCH_MS).charges for r in load_output(directory).results
    }


def test_ledger_total_is_the_sum_of_the_rated_charges(runner: CliRunner, sim_copy: Path) -> None:
    result = run(runner, "bill", sim_copy, "--prices", PRICES)
    assert result.exit_code == 0, result.output + result.stderr
    charges = rated(sim_copy)
    expected = sum((c.amount for cs in charges.values() for c in cs), Decimal(0))
    assert expected > 0
    assert ledger_total(sim_copy / "ledger.db") == expected  # exact, Decimal
    store = open_store(sim_copy / "ledger.db")
    try:
        by_batch = {t.group[0]: t.amount for t in totals(store, by=("batch",))}
    finally:
        store.close()
    for label, cs in charges.items():
        stem = label.replace("+", "_")
        assert by_batch[f"bill:{stem}"] == sum((c.amount for c in cs), Decimal(0))


def test_billing_twice_posts_nothing(runner: CliRunner, sim_copy: Path) -> None:
    first = bill_json(runner, sim_copy, "--prices", PRICES)
    db = sim_copy / "ledger.db"
    entries, total = ledger_entries(db), ledger_total(db)
    assert all(r["ledger"]["new_charges"] == r["charges"] > 0 for r in first["results"])
    second = bill_json(runner, sim_copy, "--prices", PRICES)
    assert all(r["ledger"]["already_billed"] for r in second["results"])
    assert all(r["ledger"]["new_charges"] == 0 for r in second["results"])
    assert (ledger_entries(db), ledger_total(db)) == (entries, total)
    assert [r["chargeback"] for r in second["results"]] == [
        r["chargeback"] for r in first["results"]
    ]
    text = run(runner, "bill", sim_copy, "--prices", PRICES)
    assert "already billed, nothing new posted" in text.stdout


def test_gpu_hours_equal_the_simulators_allocated_gpu_hours(
    runner: CliRunner, sim_copy: Path
) -> None:
    doc = bill_json(runner, sim_copy, "--prices", PRICES)
    summary = json.loads((sim_copy / "summary.json").read_text())
    allocated = {r["policy"]: Decimal(r["allocated_gpu_hours"]) for r in summary["results"]}
    assert [r["policy"] for r in doc["results"]] == list(LABELS)
    for r in doc["results"]:
        check = r["gpu_hours_check"]
        assert check["equal"] is True
        assert Decimal(check["bill_gpu_hours"]) == allocated[r["policy"]]
        assert (
            Decimal(check["bill_gpu_milli_ms"]) / Decimal(3_600_000_000) == allocated[r["policy"]]
        )
    text = run(runner, "bill", sim_copy, "--prices", PRICES, "--policy", "sjf+best-fit")
    shown = f"{allocated['sjf+best-fit']:,.2f}"
    assert f"the bill's {shown} equal the simulator's allocated_gpu_hours ({shown}) exactly" in (
        text.stdout
    )
    assert "of the allocated GPU time busy" in text.stdout


def test_json_is_strict_and_alone_on_stdout(runner: CliRunner, sim_copy: Path) -> None:
    result = run(runner, "bill", sim_copy, "--prices", PRICES, "--json")
    assert result.exit_code == 0

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name}")

    doc = json.loads(result.stdout, parse_constant=no_constants)
    assert result.stdout.startswith("{") and result.stdout.rstrip().endswith("}")
    total = doc["results"][0]["chargeback"]["total"]
    groups = doc["results"][0]["chargeback"]["groups"]
    assert Decimal(total["cost"]) == sum(Decimal(g["cost"]) for g in groups)
    assert total["raw"]["gpu_milli_ms"] == sum(g["raw"]["gpu_milli_ms"] for g in groups)


def test_reconcile_is_clean_after_a_bill_and_finds_another_book(
    runner: CliRunner, sim_copy: Path, tmp_path: Path
) -> None:
    assert run(runner, "bill", sim_copy, "--prices", PRICES).exit_code == 0
    clean = run(runner, "bill", "reconcile", sim_copy, "--prices", PRICES)
    assert clean.exit_code == 0, clean.output + clean.stderr
    assert clean.stdout.count(": clean:") == len(LABELS)

    dearer = write_book(
        tmp_path,
        PRICES.read_text().replace(
            '{resource: gpu, price: "1.00"}', '{resource: gpu, price: "1.10"}'
        ),
        "dearer.yaml",
    )
    assert dearer.read_text() != PRICES.read_text()
    found = run(runner, "bill", "reconcile", sim_copy, "--prices", dearer, "--json")
    assert found.exit_code == 1
    doc = json.loads(found.stdout)
    for r in doc["results"]:
        assert not r["clean"] and r["differing"] and not r["missing"] and not r["unexpected"]
        assert all("rate" in d["fields"] for d in r["differing"])
        # The amount differs too, but for charges so small that both round to the same
        # (a second of a GPU at a low duty: 0.000005).
        assert all(
            "amount" in d["fields"]
            for d in r["differing"]
            if Decimal(d["ledger"]) >= Decimal("0.01")
        )
        assert Decimal(r["rated_total"]) > Decimal(r["ledger_total"])

    # Billing with the other book is refused, nothing written.
    before = ledger_entries(sim_copy / "ledger.db")
    refused = run(runner, "bill", sim_copy, "--prices", dearer)
    assert refused.exit_code == 2
    assert "holds a different bill" in refused.stderr and "reconcile" in refused.stderr
    assert ledger_entries(sim_copy / "ledger.db") == before

    fixed = run(runner, "bill", "reconcile", sim_copy, "--prices", dearer, "--fix")
    assert fixed.exit_code == 0, fixed.output + fixed.stderr
    assert "fixed: appended" in fixed.stdout
    again = run(runner, "bill", "reconcile", sim_copy, "--prices", dearer)
    assert again.exit_code == 0 and again.stdout.count(": clean:") == len(LABELS)
    expected = sum((c.amount for cs in rated(sim_copy, dearer).values() for c in cs), Decimal(0))
    assert ledger_total(sim_copy / "ledger.db") == expected
    # The ledger now holds the dearer bill, so billing with it is "already billed".
    doc = bill_json(runner, sim_copy, "--prices", dearer)
    assert all(r["ledger"]["already_billed"] for r in doc["results"])


def test_reconcile_of_one_policy_leaves_the_other_alone(
    runner: CliRunner, sim_copy: Path, tmp_path: Path
) -> None:
    assert run(runner, "bill", sim_copy, "--prices", PRICES).exit_code == 0
    dearer = write_book(tmp_path, PRICES.read_text().replace('"0.030"', '"0.031"'), "d.yaml")
    fixed = run(
        runner, "bill", "reconcile", sim_copy, "--prices", dearer, "-p", "sjf+best-fit", "--fix"
    )
    assert fixed.exit_code == 0, fixed.output + fixed.stderr
    other = run(runner, "bill", "reconcile", sim_copy, "--prices", PRICES, "-p", LABELS[0])
    assert other.exit_code == 0 and ": clean:" in other.stdout
    now = run(runner, "bill", "reconcile", sim_copy, "--prices", dearer, "-p", "sjf+best-fit")
    assert now.exit_code == 0 and ": clean:" in now.stdout


def test_charts_are_png_files(runner: CliRunner, sim_copy: Path, tmp_path: Path) -> None:
    charts = tmp_path / "charts"
    result = run(
        runner, "bill", sim_copy, "--prices", PRICES, "--charts", charts, "-p", LABELS[0], "-q"
    )
    assert result.exit_code == 0, result.output + result.stderr
    names = sorted(p.name for p in charts.iterdir())
    assert names == ["gpu-hours-fifo_best-fit.png", "spend-fifo_best-fit.png"]
    for name in names:
        data = (charts / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        length, kind, width, height = struct.unpack(">I4sII", data[8:24])
        assert (length, kind) == (13, b"IHDR") and width > 400 and height > 200
        assert data[-8:-4] == b"IEND"


def test_csv_holds_the_same_table_as_json(
    runner: CliRunner, sim_copy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cb.csv"
    doc = bill_json(runner, sim_copy, "--prices", PRICES, "--csv", out, "--by", "department")
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    for r in doc["results"]:
        mine = [x for x in rows if x["policy"] == r["policy"]]
        groups = [x for x in mine if x["row"] == "group"]
        assert [g["department"] for g in groups] == [
            g["department"] for g in r["chargeback"]["groups"]
        ]
        assert [g["cost"] for g in groups] == [g["cost"] for g in r["chargeback"]["groups"]]
        (total,) = [x for x in mine if x["row"] == "total"]
        assert total["gpu_hours"] == r["chargeback"]["total"]["gpu_hours"]


# --------------------------------------------------------------------------------------------
# Hand-made output directories, figures worked out by hand
# --------------------------------------------------------------------------------------------


def test_by_department_groups_by_the_first_org_component(runner: CliRunner, tmp_path: Path) -> None:
    rows = [
        attempt_row("a", 0, HOUR, tenant="ads/ctr/dave"),  # 1 GPU-h
        attempt_row("b", 0, 2 * HOUR, tenant="ads/search/erin", gpu="H100=500"),  # 1 GPU-h
        attempt_row("c", 0, HOUR, tenant="ai/vision/alice", gpu="H100=2000", cpu_milli=4000),
    ]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows})
    doc = bill_json(runner, d, "--prices", write_book(tmp_path), "--by", "department")
    cb = doc["results"][0]["chargeback"]
    got = {g["department"]: (g["gpu_hours"], g["cpu_core_hours"], g["cost"]) for g in cb["groups"]}
    assert got == {
        "ads": ("2.000000000", "0.000000000", "4.000000"),
        "ai": ("2.000000000", "4.000000000", "4.400000"),  # 2 GPU-h × 2.00 + 4 core-h × 0.10
    }
    assert cb["total"]["cost"] == "8.400000"

    doc = bill_json(runner, d, "--prices", write_book(tmp_path), "--by", "department,project")
    cb = doc["results"][0]["chargeback"]
    assert [tuple(g[k] for k in ("department", "project")) for g in cb["groups"]] == [
        ("ads", "ads/ctr"),
        ("ads", "ads/search"),
        ("ai", "ai/vision"),
    ]
    assert [(s["department"], s["gpu_hours"]) for s in cb["subtotals"]] == [("ads", "2.000000000")]


def test_half_utilisation_is_half_waste(runner: CliRunner, tmp_path: Path) -> None:
    # One H100 for 2 h at utilisation 0.5: 1 GPU-h used at 2.00, 1 GPU-h idle at 1.00.
    rows = [attempt_row("j", 0, 2 * HOUR, gpu_util=0.5)]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows})
    total = bill_json(runner, d, "--prices", write_book(tmp_path))["results"][0]["chargeback"][
        "total"
    ]
    assert total["gpu_hours"] == "2.000000000"
    assert total["idle_gpu_hours"] == "1.000000000"
    assert total["used_gpu_hours"] == "1.000000000"
    assert total["idle_cost"] == "1.000000"
    assert total["cost"] == "3.000000"

    # Without a gpu-idle rate the waste is still shown, in hours only.
    d2 = write_output(tmp_path / "out2", {"fifo+best-fit": rows})
    cb = bill_json(runner, d2, "--prices", write_book(tmp_path, NO_IDLE_BOOK, "n.yaml"))["results"][
        0
    ]["chargeback"]
    assert cb["idle_priced"] is False
    assert cb["total"]["idle_gpu_hours"] == "1.000000000"
    assert cb["total"]["idle_cost"] is None
    assert cb["total"]["cost"] == "4.000000"  # all 2 GPU-h at the gpu rate


def test_idle_hours_without_an_idle_rate_follow_ratings_rule() -> None:
    # A record cut into band segments: rating rounds the idle part per segment. Without a
    # gpu-idle rate the report computes the same split itself, so its idle GPU time equals
    # the waste charges' of the same usage under a book that prices idle time.
    with_idle = load_price_book(PRICES)
    text = "".join(line for line in PRICES.read_text().splitlines(True) if "gpu-idle" not in line)
    without_idle = price_book_from_dict(yaml.safe_load(text), "no-idle.yaml")
    a = Attempt(
        "j",
        0,
        EPOCH_MS,
        EPOCH_MS + 30 * HOUR * 1000 + 1,
        "ads/ctr/dave",
        "ads/ctr",
        "normal",
        "c",
        (("H100", 700),),
        gpu_util=0.3333,
    )
    records = list(usage_records([a]))
    priced = list(rate(records, with_idle))
    assert len({c.band for c in priced}) > 1  # really cut into bands
    waste = sum(c.raw for c in priced if c.waste)
    assert 0 < waste < 700 * (30 * HOUR * 1000 + 1)
    assert tally(priced, records, with_idle).total().idle_raw == waste
    unpriced = list(rate(records, without_idle))
    assert not any(c.waste for c in unpriced)
    cb = chargeback(tally(unpriced, records, without_idle))
    assert cb.total.figures.idle_raw == waste and not cb.idle_priced
    assert cb.total.figures.gpu_raw == 700 * (30 * HOUR * 1000 + 1)


def test_policy_selects_one_result_and_names_the_choices(runner: CliRunner, tmp_path: Path) -> None:
    rows = [attempt_row("a", 0, HOUR)]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows, "sjf+best-fit": rows})
    doc = bill_json(runner, d, "--prices", write_book(tmp_path), "--policy", "sjf+best-fit")
    assert [r["policy"] for r in doc["results"]] == ["sjf+best-fit"]
    bad = run(runner, "bill", d, "--prices", write_book(tmp_path), "--policy", "nope")
    assert bad.exit_code == 2
    assert "--policy 'nope'" in bad.stderr and "fifo+best-fit, sjf+best-fit" in bad.stderr


def test_scenarios_share_a_ledger_without_colliding(runner: CliRunner, tmp_path: Path) -> None:
    # The same job in two results: two scenarios, each billed in full.
    rows = [attempt_row("a", 0, HOUR)]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows, "sjf+best-fit": rows})
    doc = bill_json(runner, d, "--prices", write_book(tmp_path))
    assert [r["ledger"]["new_charges"] for r in doc["results"]] == [1, 1]
    assert ledger_total(d / "ledger.db") == Decimal("4.000000")


def test_epoch_maps_simulated_time_to_wall_time(runner: CliRunner, tmp_path: Path) -> None:
    # examples/prices.yaml: H100 4.00 in peak (Mon-Fri 08:00-20:00 Europe/Berlin), 3.20 else.
    rows = [attempt_row("a", 0, HOUR, tenant="ads/ctr/dave")]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows})
    night = bill_json(runner, d, "--prices", PRICES, "--db", tmp_path / "a.db")
    noon = bill_json(
        runner, d, "--prices", PRICES, "--epoch", "2026-01-05T11:00:00Z", "--db", tmp_path / "b.db"
    )
    assert night["results"][0]["chargeback"]["total"]["cost"] == "3.200000"
    assert noon["results"][0]["chargeback"]["total"]["cost"] == "4.000000"


# --------------------------------------------------------------------------------------------
# Reading the output directory
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "ms"),
    [
        ("0", 0),
        ("12", 12_000),
        ("12.5", 12_500),
        ("0.001", 1),
        ("384.8", 384_800),
        ("11089179.333", 11_089_179_333),
        ("1e3", 1_000_000),  # not plain: the Decimal path, same formula
        ("12.3456", 12_345),  # more decimals than the simulator writes: truncated as specified
    ],
)
def test_seconds_to_ms_is_the_decimal_formula(cell: str, ms: int) -> None:
    assert seconds_to_ms(cell) == ms == int(Decimal(cell) * 1000)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2026-01-05T00:00:00", "no UTC offset"),
        ("yesterday", "expected an ISO-8601 instant"),
        ("2026-01-05T00:00:00.0005Z", "finer than a millisecond"),
    ],
)
def test_parse_epoch_refuses(text: str, problem: str) -> None:
    with pytest.raises(SimOutputError, match=problem):
        parse_epoch(text)


def test_parse_epoch() -> None:
    assert parse_epoch(EPOCH) == EPOCH_MS
    assert parse_epoch("2026-01-05T01:00:00+01:00") == EPOCH_MS


def test_read_attempts_converts_exactly(tmp_path: Path) -> None:
    rows = [
        attempt_row(
            "j1",
            "39.381",
            "86.381",
            gpu="H100=470;A100=30",
            cpu_milli=12000,
            memory_mib=47104,
            gpu_util="0.41",
            storage_gb="1.0005",
            network_gb="2.5",
            priority_class="high",
        ),
        attempt_row("j2", "0", "1", gpu="", gpu_util=""),
    ]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows}, cluster="lab")
    (result,) = load_output(d).results
    a1, a2 = read_attempts(result, EPOCH_MS)
    assert (a1.job_id, a1.start_ms, a1.end_ms) == (
        "fifo_best-fit/j1",
        EPOCH_MS + 39_381,
        EPOCH_MS + 86_381,
    )
    assert a1.gpu == (("H100", 470), ("A100", 30))
    assert (a1.org, a1.queue, a1.priority_class, a1.cluster) == (
        "ads/ctr/dave",
        "ads/ctr",
        "high",
        "lab",
    )
    assert (a1.cpu_milli, a1.memory_mib, a1.gpu_util) == (12000, 47104, 0.41)
    assert (a1.storage_mb, a1.network_mb) == (1000, 2500)  # 1000.5 MB rounds half-even to 1000
    assert a2.gpu == () and a2.gpu_util is None
    assert read_attempts(result, 0, namespace=False)[0].job_id == "j1"


BAD_CELLS = [
    ("job", "", "empty job id"),
    ("attempt", "-1", "expected a whole number >= 0"),
    ("tenant", "", "empty tenant"),
    ("start", "soon", "expected simulated seconds, got 'soon'"),
    ("end", "nan", "expected simulated seconds"),
    ("end", "1", "ends (1) before it starts (100)"),
    ("outcome", "exploded", "expected one of"),
    ("gpu", "H100:1000", "expected MODEL=milli-GPU"),
    ("gpu_milli", "999", "999 is not the sum of column 'gpu'"),
    ("cpu_milli", "1.5", "expected a whole number >= 0"),
    ("memory_mib", "x", "expected a whole number >= 0"),
    ("gpu_util", "1.5", "expected a number in [0, 1]"),
    ("gpu_util", "abc", "expected a number in [0, 1]"),
    ("storage_gb", "-2", "expected GB >= 0"),
    ("network_gb", "lots", "expected GB >= 0"),
]


@pytest.mark.parametrize(
    ("column", "value", "problem"), BAD_CELLS, ids=[f"{c}={v!r}" for c, v, _ in BAD_CELLS]
)
def test_a_bad_cell_names_file_line_and_column(
    runner: CliRunner, tmp_path: Path, column: str, value: str, problem: str
) -> None:
    rows = [attempt_row("ok", 0, 100), attempt_row("ok2", 100, 200), attempt_row("bad", 100, 200)]
    rows[2][column] = value
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows})
    result = run(runner, "bill", d, "--prices", write_book(tmp_path))
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert "\n" not in err
    assert f"fifo_best-fit-attempts.csv: line 4, column {column!r}: {problem}" in err
    assert not (d / "ledger.db").exists() or ledger_entries(d / "ledger.db") == 0


def test_rows_of_the_wrong_width_and_missing_columns(tmp_path: Path) -> None:
    d = write_output(tmp_path / "out", {"fifo+best-fit": [attempt_row("a", 0, 1)]})
    path = d / "fifo_best-fit-attempts.csv"
    path.write_text(path.read_text() + "x,0,t\n")
    (result,) = load_output(d).results
    with pytest.raises(SimOutputError, match=r"attempts.csv: line 3: 3 cells, expected 15"):
        read_attempts(result, 0)
    path.write_text("job,attempt\nx,0\n")
    with pytest.raises(SimOutputError, match=r"line 1: missing column\(s\) 'tenant', 'queue'"):
        read_attempts(result, 0)


ERRORS = [
    ("no directory", lambda d, b: [d / "nope", "--prices", b], "nope: no such directory"),
    ("no summary", lambda d, b: [b.parent, "--prices", b], "no summary.json"),
    (
        "no attempts file",
        lambda d, b: [d, "--prices", b],
        "fifo_best-fit-attempts.csv: no such file",
    ),
    (
        "bad price book",
        lambda d, b: [d, "--prices", b.with_name("bad.yaml")],
        "bad.yaml: currency: required",
    ),
    ("missing rate", lambda d, b: [d, "--prices", b.with_name("nocpu.yaml")], "no rate in version"),
    ("bad --by", lambda d, b: [d, "--prices", b, "--by", "colour"], "--by 'colour': choose from"),
    ("bad --epoch", lambda d, b: [d, "--prices", b, "--epoch", "noon"], "--epoch: expected"),
]


@pytest.mark.parametrize(("case", "args", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_one_line(
    runner: CliRunner, tmp_path: Path, case: str, args: Any, message: str
) -> None:
    book = write_book(tmp_path)
    write_book(tmp_path, "versions: []\n", "bad.yaml")
    write_book(
        tmp_path, FLAT_BOOK.replace('      - {resource: cpu, price: "0.10"}\n', ""), "nocpu.yaml"
    )
    d = write_output(
        tmp_path / "out", {"fifo+best-fit": [attempt_row("a", 0, HOUR, cpu_milli=1000)]}
    )
    if case == "no attempts file":
        (d / "fifo_best-fit-attempts.csv").unlink()
    result = run(runner, "bill", *args(d, book))
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("suanli: error: ") and "\n" not in err
    assert message in err


def test_a_summary_without_attempts_files_is_explained(tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"run": {}, "results": [{"policy": "fifo"}]}))
    with pytest.raises(SimOutputError, match=r"results\[0\]\.cluster"):
        load_output(d)
    (d / "summary.json").write_text(
        json.dumps({"run": {"cluster": "c"}, "results": [{"policy": "fifo"}]})
    )
    with pytest.raises(SimOutputError, match=r"files\.attempts_csv: missing"):
        load_output(d)
    (d / "summary.json").write_text("{nope")
    with pytest.raises(SimOutputError, match=r"invalid JSON at line 1, column 2"):
        load_output(d)


def test_a_gpu_hours_mismatch_fails_and_posts_nothing(runner: CliRunner, tmp_path: Path) -> None:
    d = write_output(tmp_path / "out", {"fifo+best-fit": [attempt_row("a", 0, HOUR)]})
    summary = json.loads((d / "summary.json").read_text())
    summary["results"][0]["allocated_gpu_hours"] = "1.5"
    (d / "summary.json").write_text(json.dumps(summary))
    result = run(runner, "bill", d, "--prices", write_book(tmp_path))
    assert result.exit_code == 2
    assert "the bill holds 1 GPU-hours but the simulator allocated 1.5" in result.stderr
    assert not (d / "ledger.db").exists() or ledger_entries(d / "ledger.db") == 0


# --------------------------------------------------------------------------------------------
# PostgreSQL (when a server can be started) and the Philly trace (when present)
# --------------------------------------------------------------------------------------------


def test_bill_into_postgresql(runner: CliRunner, tmp_path: Path, request: Any) -> None:
    rows = [attempt_row("a", 0, HOUR, gpu_util=0.5), attempt_row("b", 0, 2 * HOUR)]
    d = write_output(tmp_path / "out", {"fifo+best-fit": rows})
    with fresh_schema(request.getfixturevalue("postgres_server")) as url:
        doc = bill_json(runner, d, "--prices", write_book(tmp_path), "--db", url)
        assert doc["ledger"].startswith("postgresql")
        # a: 0.5 GPU-h used at 2.00 and 0.5 idle at 1.00; b: 2 GPU-h at 2.00.
        assert doc["results"][0]["chargeback"]["total"]["cost"] == "5.500000"
        again = bill_json(runner, d, "--prices", write_book(tmp_path), "--db", url)
        assert again["results"][0]["ledger"]["already_billed"] is True
        clean = run(runner, "bill", "reconcile", d, "--prices", write_book(tmp_path), "--db", url)
        assert clean.exit_code == 0 and ": clean:" in clean.stdout


@pytest.fixture(scope="module")
def trace_dir() -> Iterator[Path]:
    try:
        yield find_trace_dir()
    except TraceNotFoundError as e:
        places = ", ".join(str(p) for _, p in e.places)
        pytest.skip(f"trace directory absent (looked in {places}): set SUANLI_TRACE_DIR")


def test_philly_chargeback_per_virtual_cluster(trace_dir: Path) -> None:
    out, doc = philly_billed(trace_dir)  # simulate --trace philly, bill --by queue
    (r,) = doc["results"]
    assert r["gpu_hours_check"]["equal"] is True
    summary = json.loads((out / "summary.json").read_text())
    assert Decimal(r["gpu_hours_check"]["bill_gpu_hours"]) == Decimal(
        summary["results"][0]["allocated_gpu_hours"]
    )
    queues = {row["queue"] for row in csv.DictReader((out / "fifo_best-fit-attempts.csv").open())}
    groups = r["chargeback"]["groups"]
    assert {g["queue"] for g in groups} == queues and len(queues) >= 10  # Philly's VCs
    assert sum(Decimal(g["cost"]) for g in groups) == Decimal(r["chargeback"]["total"]["cost"])
    assert ledger_total(out / "ledger.db") == Decimal(r["chargeback"]["total"]["cost"])


def test_another_epoch_is_not_already_billed(runner: CliRunner, tmp_path: Path) -> None:
    # Under a flat book an hour's shift changes no amount and no day: the keys tell.
    d = write_output(tmp_path / "out", {"fifo+best-fit": [attempt_row("a", 0, HOUR)]})
    book = write_book(tmp_path)
    assert run(runner, "bill", d, "--prices", book).exit_code == 0
    shifted = run(runner, "bill", d, "--prices", book, "--epoch", "2026-01-05T01:00:00Z")
    assert shifted.exit_code == 2 and "holds a different bill" in shifted.stderr
    assert ledger_entries(d / "ledger.db") == 1
