"""Budgets in the store and ``suanli budget``: versions, migration 0002, spend from the ledger.

Every store test runs once per backend (``[sqlite]``, ``[postgresql]``); the PostgreSQL runs
use a throwaway server (see ``pg.py``) and a fresh schema per test, as ``store/test_ledger.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from typer.testing import CliRunner

from pg import fresh_schema, postgres_server  # noqa: F401  (postgres_server: a fixture)
from suanli.cli.main import app
from suanli.config.budgets import load_budgets
from suanli.core.budget import BudgetSpec
from suanli.metering.charges import Charge
from suanli.store import Store, open_store, post_charges, reverse, upgrade
from suanli.store import db as store_db
from suanli.store.budgets import (
    BudgetStoreError,
    budget_history,
    budget_spend,
    current_budgets,
    remove_budget,
    set_budget,
)
from suanli.store.schema import metadata

BACKENDS = ("sqlite", "postgresql")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "budgets.yaml"
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MAR_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


# --- builders ----------------------------------------------------------------------------


def charge(key: str, org: str, start_ms: int, amount: str, currency: str = "USD") -> Charge:
    """A GPU charge of ``org`` starting at ``start_ms`` for ``amount``."""
    return Charge(
        key=f"{key}|gpu|H100|0",
        record_key=key,
        job_id=key,
        attempt=1,
        org=org,
        queue="train",
        priority_class="high",
        cluster="bj-1",
        resource="gpu",
        gpu_model="H100",
        band="peak",
        start_ms=start_ms,
        end_ms=start_ms + HOUR_MS,
        raw=1000 * HOUR_MS,
        quantity=Decimal("1.000000000"),
        rate=Decimal("1.0"),
        amount=Decimal(amount),
        currency=currency,
        book_version="2025-03",
    )


def budget(org: str, period: str = "monthly", limit: str = "100", **kw: object) -> BudgetSpec:
    return BudgetSpec(org=org, period=period, limit=Decimal(limit), **kw)  # type: ignore[arg-type]


# --- stores on both backends -------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A location for an empty store on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "suanli.db")
    else:
        with fresh_schema(request.getfixturevalue("postgres_server")) as url:
            yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("SUANLI_DB", raising=False)
    monkeypatch.setenv("USER", "ops-alice")
    monkeypatch.setenv("COLUMNS", "200")
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # Click >= 8.2 keeps stderr apart already
        return CliRunner()


def run(runner: CliRunner, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def ok(runner: CliRunner, *args: str) -> str:
    result = run(runner, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return str(result.stdout)


# --- migration 0002 ----------------------------------------------------------------------


def test_migration_0002_creates_the_budgets_table_as_schema_py_says(store_url: str) -> None:
    assert upgrade(store_url) == store_db.head_revision()
    engine = store_db.create_store_engine(store_url)
    try:
        assert store_db.current_revision(engine) == store_db.head_revision()
        assert "budgets" in sa.inspect(engine).get_table_names()
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "version_table": store_db.VERSION_TABLE}
            )
            assert compare_metadata(ctx, metadata) == []
    finally:
        engine.dispose()


def test_migration_0002_downgrades_to_0001_and_to_nothing_and_upgrades_again(
    store_url: str,
) -> None:
    engine = store_db.create_store_engine(store_url)
    try:
        upgrade(engine)
        cfg = store_db.alembic_config(engine)
        command.downgrade(cfg, "0001")
        assert store_db.current_revision(engine) == "0001"
        names = set(sa.inspect(engine).get_table_names())
        assert "budgets" not in names and "ledger_entries" in names
        command.downgrade(cfg, "base")
        assert store_db.current_revision(engine) is None
        assert not {"budgets", "ledger_entries"} & set(sa.inspect(engine).get_table_names())
        assert upgrade(engine) == store_db.head_revision()
    finally:
        engine.dispose()
    s = open_store(store_url)
    try:
        set_budget(s, budget("vision"), "USD", NOW)
        assert current_budgets(s) is not None
    finally:
        s.close()


@pytest.mark.parametrize("statement", ["UPDATE budgets SET version = 9", "DELETE FROM budgets"])
def test_budgets_table_is_append_only_in_the_database(store: Store, statement: str) -> None:
    set_budget(store, budget("vision"), "USD", NOW)
    with pytest.raises(sa.exc.DBAPIError, match="append-only"):
        with store.begin() as conn:
            conn.execute(sa.text(statement))
    assert len(budget_history(store, "vision")) == 1


# --- versions ------------------------------------------------------------------------------


def test_setting_twice_keeps_both_versions_and_the_latest_is_current(store: Store) -> None:
    v1 = set_budget(store, budget("vision", limit="100"), "USD", NOW, set_by="alice")
    v2 = set_budget(store, budget("vision", limit="250.50"), "USD", NOW, set_by="bob")
    assert (v1.version, v2.version) == (1, 2)
    history = budget_history(store, "vision")
    assert [(v.version, v.spec and v.spec.limit, v.set_by) for v in history] == [
        (1, Decimal("100"), "alice"),
        (2, Decimal("250.50"), "bob"),
    ]
    spec = current_budgets(store)
    assert spec is not None and spec.budgets == (budget("vision", limit="250.50"),)


def test_the_set_in_effect_follows_effective_times_and_tombstones(store: Store) -> None:
    jan, feb, mar = (datetime(2025, m, 1, tzinfo=UTC) for m in (1, 2, 3))
    set_budget(store, budget("vision", limit="100"), "USD", jan)
    set_budget(store, budget("nlp", period="weekly", limit="7"), "USD", jan)
    set_budget(store, budget("vision", limit="200"), "USD", feb)
    remove_budget(store, "vision", mar)

    def limits(at: datetime) -> dict[str, Decimal]:
        spec = current_budgets(store, at)
        return {b.label: b.limit for b in spec.budgets} if spec else {}

    assert current_budgets(store, datetime(2024, 12, 31, tzinfo=UTC)) is None
    assert limits(datetime(2025, 1, 15, tzinfo=UTC)) == {"vision": 100, "nlp": 7}
    assert limits(feb) == {"vision": 200, "nlp": 7}
    assert limits(datetime(2025, 3, 15, tzinfo=UTC)) == {"nlp": 7}
    history = budget_history(store, "vision")
    assert [v.removed for v in history] == [False, False, True]
    assert history[-1].effective_at == mar
    # Set again after its removal: back in effect, as version 4.
    assert set_budget(store, budget("vision"), "USD", datetime(2025, 4, 1, tzinfo=UTC)).version == 4


def test_every_field_of_a_budget_reads_back_equal(store: Store) -> None:
    fixed = BudgetSpec(
        org="research/climate",
        period="fixed",
        limit=Decimal("50000.000001"),
        thresholds=(0.1, 0.333, 1.0),
        action="demote",
        demote_to="preemptible",
        start=1_790_000_000,
        end=1_800_000_000,
        name="climate-grant",
    )
    set_budget(store, fixed, "EUR", NOW)
    spec = current_budgets(store)
    assert spec is not None and spec.budgets == (fixed,) and spec.currency == "EUR"
    assert spec.budgets[0].limit.as_tuple() == Decimal("50000.000001").as_tuple()


def test_a_budget_in_another_currency_than_the_set_is_refused(store: Store) -> None:
    set_budget(store, budget("vision"), "USD", NOW)
    with pytest.raises(BudgetStoreError, match=r"'nlp' is in EUR but budget 'vision' is in USD"):
        set_budget(store, budget("nlp"), "EUR", NOW)
    # Re-setting the only budget in another currency is fine: nothing else disagrees.
    set_budget(store, budget("vision"), "EUR", NOW)
    assert budget_history(store, "nlp") == []


def test_removing_an_unknown_budget_is_refused(store: Store) -> None:
    set_budget(store, budget("vision"), "USD", NOW)
    with pytest.raises(BudgetStoreError, match=r"no budget 'nlp' to remove \(budgets: vision\)"):
        remove_budget(store, "nlp", NOW)


def test_times_must_be_timezone_aware(store: Store) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        set_budget(store, budget("vision"), "USD", datetime(2025, 3, 1))


# --- spend from the ledger -----------------------------------------------------------------

AT = datetime(2025, 3, 11, 6, 0, tzinfo=UTC)  # a Tuesday; 10.25 days into March
AT_MS = MAR_MS + 10 * DAY_MS + 6 * HOUR_MS
LEDGER = [
    charge("alice-1", "vision/alice", MAR_MS + 1 * DAY_MS, "30.5"),
    charge("vision-1", "vision", MAR_MS + 4 * DAY_MS, "20.25"),
    charge("carol-credit", "vision/carol", MAR_MS + 6 * DAY_MS, "-0.75"),
    charge("bob-reversed", "vision/bob", MAR_MS + 5 * DAY_MS, "4"),
    charge("alice-2", "vision/alice", MAR_MS + 9 * DAY_MS + 7 * HOUR_MS, "1.000001"),  # Mon 07:00
    charge("visionary", "visionary/x", MAR_MS + 2 * DAY_MS, "1000"),  # a prefix, not under
    charge("nlp", "nlp/chat", MAR_MS + 3 * DAY_MS, "500"),
    charge("february", "vision/bob", MAR_MS - 1, "7"),  # the previous period
    charge("after-at", "vision/bob", AT_MS + 1, "9"),  # in the period, after the instant
    charge("april", "vision/bob", MAR_MS + 31 * DAY_MS, "11"),
]
VISION_MONTH = Decimal("30.5") + Decimal("20.25") - Decimal("0.75") + Decimal("1.000001")
EVERYONE_MONTH = VISION_MONTH + 1000 + 500


def _ledger(store: Store) -> None:
    assert post_charges(store, LEDGER, NOW, "test") == len(LEDGER)
    reverse(store, "bob-reversed|gpu|H100|0", NOW, "posted in error")


def _forecast(spent: Decimal, length_ms: int, elapsed_ms: int) -> Decimal:
    """Hand computation: spend × length / elapsed, rounded half-even to a micro-unit."""
    return Decimal(round(Fraction(spent) * length_ms / elapsed_ms * 10**6)).scaleb(-6)


def test_spend_sums_exactly_the_charges_under_the_org_in_the_period(store: Store) -> None:
    _ledger(store)
    set_budget(store, budget("vision", limit="100"), "USD", NOW)
    set_budget(store, budget("", limit="1500", name="lab"), "USD", NOW)
    set_budget(store, budget("vision", period="weekly", limit="5", name="vision-week"), "USD", NOW)
    spec = current_budgets(store)
    assert spec is not None
    month, lab, week = budget_spend(store, spec, AT_MS)

    assert month.period is not None and month.period.label == "2025-03"
    assert month.spent == VISION_MONTH == Decimal("51.000001")
    assert month.entries == 6  # the reversed charge and its reversal net to zero
    assert month.fraction == Decimal("0.510000")
    assert month.crossed == (0.5,) and not month.exhausted
    assert month.forecast == _forecast(VISION_MONTH, 31 * DAY_MS, AT_MS - MAR_MS)
    assert month.forecast == Decimal("154.243905")

    assert lab.spent == EVERYONE_MONTH == Decimal("1551.000001")
    assert lab.crossed == (0.5, 0.8, 1.0) and lab.exhausted
    assert lab.forecast == Decimal("4690.829271")

    assert week.period is not None and week.period.label == "2025-W11"
    assert week.spent == Decimal("1.000001")  # only Monday's charge is in this ISO week
    assert week.forecast == _forecast(Decimal("1.000001"), 7 * DAY_MS, 30 * HOUR_MS)
    assert week.forecast == Decimal("5.600006")
    assert week.crossed == ()


def test_spend_at_the_first_millisecond_of_a_period_forecasts_the_spend(store: Store) -> None:
    post_charges(store, [charge("edge", "vision", MAR_MS, "3")], NOW, "test")
    set_budget(store, budget("vision"), "USD", NOW)
    spec = current_budgets(store)
    assert spec is not None
    (s,) = budget_spend(store, spec, MAR_MS)
    assert (s.spent, s.forecast) == (Decimal("3"), Decimal("3"))
    (before,) = budget_spend(store, spec, MAR_MS - 1)
    assert before.period is not None and before.period.label == "2025-02"
    assert before.spent == 0 and before.forecast == 0


def test_a_ledger_in_another_currency_is_a_clear_error(store: Store) -> None:
    post_charges(store, [charge("eur", "vision/a", MAR_MS, "3", currency="EUR")], NOW, "t")
    set_budget(store, budget("vision"), "USD", NOW)
    spec = current_budgets(store)
    assert spec is not None
    with pytest.raises(BudgetStoreError, match=r"in USD but the ledger holds 3\.000000 EUR"):
        budget_spend(store, spec, MAR_MS + DAY_MS)
    # A budget of another org is not concerned by those entries.
    other = replace(spec, budgets=(budget("nlp"),))
    assert budget_spend(store, other, MAR_MS + DAY_MS)[0].spent == 0


# --- the command line ----------------------------------------------------------------------


def test_set_show_history_and_remove(runner: CliRunner, store_url: str) -> None:
    db = ("--db", store_url)
    out = ok(
        runner, "budget", "set", *db, "--org", "vision", "--period", "monthly",
        "--limit", "25000", "--thresholds", "50%,80%,100%", "--action", "demote",
        "--demote-to", "spot", "--effective", "2025-01-01",
    )  # fmt: skip
    assert "set budget vision (version 1" in out and "25,000.00 USD" in out
    ok(
        runner, "budget", "set", *db, "--org", "vision", "--period", "monthly",
        "--limit", "30000", "--effective", "2025-02-01T00:00:00Z", "--by", "bob",
    )  # fmt: skip
    doc = json.loads(ok(runner, "budget", "history", *db, "vision", "--json"))
    versions = doc["versions"]
    assert [(v["version"], v["limit"], v["action"], v["set_by"]) for v in versions] == [
        (1, "25000", "demote", "ops-alice"),
        (2, "30000", "none", "bob"),
    ]
    assert versions[0]["effective_at"] == "2025-01-01T00:00:00Z"

    shown = json.loads(ok(runner, "budget", "show", *db, "--at", "2025-01-20", "--json"))
    assert [(b["budget"], b["limit"], b["action"]) for b in shown["budgets"]] == [
        ("vision", "25000", "demote")
    ]
    table = ok(runner, "budget", "show", *db, "--at", "2025-02-20T00:00:00Z")
    assert "monthly 2025-02" in table and "30,000.00" in table

    assert "removed budget vision (version 3)" in ok(
        runner, "budget", "remove", *db, "vision", "--effective", "2025-03-01"
    )
    after = json.loads(ok(runner, "budget", "show", *db, "--at", "2025-03-02", "--json"))
    assert after["budgets"] == [] and after["currency"] is None
    history = json.loads(ok(runner, "budget", "history", *db, "vision", "--json"))
    assert [v["removed"] for v in history["versions"]] == [False, False, True]


def test_import_then_export_round_trips_the_example(
    runner: CliRunner, store_url: str, tmp_path: Path
) -> None:
    out = ok(runner, "budget", "import", "--db", store_url, str(EXAMPLE))
    assert "imported 6 budgets" in out
    exported = tmp_path / "exported.yaml"
    ok(runner, "budget", "export", "--db", store_url, "-o", str(exported))
    assert load_budgets(exported) == load_budgets(EXAMPLE)
    # stdout carries the same file.
    printed = tmp_path / "printed.yaml"
    printed.write_text(ok(runner, "budget", "export", "--db", store_url))
    assert load_budgets(printed) == load_budgets(EXAMPLE)


def test_import_replace_makes_the_file_the_whole_set(
    runner: CliRunner, store_url: str, tmp_path: Path
) -> None:
    ok(runner, "budget", "set", "--db", store_url, "--org", "other", "--period", "daily",
       "--limit", "1")  # fmt: skip
    ok(runner, "budget", "import", "--db", store_url, str(EXAMPLE), "--replace")
    s = open_store(store_url)
    try:
        assert current_budgets(s) == load_budgets(EXAMPLE)
        assert [v.removed for v in budget_history(s, "other")] == [False, True]
    finally:
        s.close()


def test_show_reports_spend_thresholds_and_forecast_from_the_ledger(
    runner: CliRunner, store: Store, store_url: str
) -> None:
    _ledger(store)
    db = ("--db", store_url)
    ok(runner, "budget", "set", *db, "--org", "vision", "--period", "monthly", "--limit", "100",
       "--effective", "2025-01-01")  # fmt: skip
    ok(runner, "budget", "set", *db, "--org", "*", "--name", "lab", "--period", "monthly",
       "--limit", "1500", "--action", "refuse", "--effective", "2025-01-01")  # fmt: skip
    doc = json.loads(ok(runner, "budget", "show", *db, "--at", "2025-03-11T06:00:00Z", "--json"))
    vision, lab = doc["budgets"]
    assert vision == {
        "budget": "vision",
        "org": "vision",
        "period": "monthly",
        "period_label": "2025-03",
        "period_start": "2025-03-01T00:00:00Z",
        "period_end": "2025-04-01T00:00:00Z",
        "limit": "100",
        "spent": "51.000001",
        "entries": 6,
        "fraction": "0.510000",
        "thresholds": [0.5, 0.8, 1.0],
        "crossed": [0.5],
        "forecast": "154.243905",
        "action": "none",
        "demote_to": None,
        "exhausted": False,
    }
    assert (lab["org"], lab["spent"], lab["crossed"], lab["exhausted"]) == (
        "",
        "1551.000001",
        [0.5, 0.8, 1.0],
        True,
    )
    table = ok(runner, "budget", "show", *db, "--at", "2025-03-11T06:00:00Z")
    line = next(ln for ln in table.splitlines() if "│ lab" in ln)
    assert "1,551.00" in line and "103.4" in line and "50%, 80%, 100%" in line
    assert "exhausted" in line and "4,690.83" in line


def test_show_a_budgets_file_against_the_ledger(
    runner: CliRunner, store: Store, store_url: str
) -> None:
    _ledger(store)
    doc = json.loads(
        ok(
            runner,
            "budget",
            "show",
            "--db",
            store_url,
            "--budgets",
            str(EXAMPLE),
            "--at",
            "2025-03-11T06:00:00Z",
            "--json",
        )  # fmt: skip
    )
    by = {b["budget"]: b for b in doc["budgets"]}
    assert doc["budgets_from"] == str(EXAMPLE)
    assert by["vision"]["spent"] == "51.000001"
    assert by["lab"]["spent"] == "1551.000001"
    # The 500 of nlp/chat started on 4 March, in ISO week 2025-W10: not this week's.
    assert by["nlp/chat"]["period_label"] == "2025-W11"
    assert by["nlp/chat"]["spent"] == "0.000000" and by["nlp/chat"]["exhausted"] is False
    assert by["climate-grant"]["period_label"] is None  # a fixed span not yet begun
    assert by["climate-grant"]["forecast"] is None


def test_db_comes_from_the_environment(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = run(runner, "budget", "show")
    assert missing.exit_code == 2
    assert missing.stderr.strip() == (
        "suanli: error: --db: required: a SQLite file or a database URL (or set SUANLI_DB)"
    )
    monkeypatch.setenv("SUANLI_DB", str(tmp_path / "env.db"))
    ok(runner, "budget", "set", "--org", "nlp", "--period", "weekly", "--limit", "4000")
    shown = json.loads(ok(runner, "budget", "show", "--json"))
    assert [b["budget"] for b in shown["budgets"]] == ["nlp"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--period", "montly"],
            "--period: unknown period 'montly' (did you mean 'monthly'?)",
            id="period",
        ),
        pytest.param(["--limit", "-5"], "--limit: must be an amount > 0, got '-5'", id="limit"),
        pytest.param(
            ["--limit", "lots"],
            "--limit: must be an amount such as \"25000.00\", got 'lots'",
            id="limit-text",
        ),
        pytest.param(
            ["--thresholds", "50%,0"], "--thresholds: must be > 0, got 0.0", id="thresholds"
        ),
        pytest.param(
            ["--action", "refuze"],
            "--action: unknown action 'refuze' (did you mean 'refuse'?)",
            id="action",
        ),
        pytest.param(
            ["--demote-to", "spot"],
            "--demote-to: only a demote budget demotes (this one's action is none)",
            id="demote-to",
        ),
        pytest.param(
            ["--period", "fixed", "--start", "2025-01-01"],
            "--end: required with --period fixed (a date, or an instant with offset)",
            id="fixed-without-end",
        ),
        pytest.param(
            ["--start", "2025-01-01"],
            "--start: only a fixed period has a start (monthly periods follow the UTC calendar)",
            id="start-on-monthly",
        ),
        pytest.param(["--org", "a//b"], "--org: 'a//b' has an empty part", id="org"),
        pytest.param(
            ["--effective", "2025-03-01T00:00:00"],
            "--effective '2025-03-01T00:00:00': needs a UTC offset",
            id="effective",
        ),
        pytest.param(
            ["--currency", "US D"], "--currency: must be a code such as USD", id="currency"
        ),
    ],
)
def test_bad_option_values_name_the_option(
    runner: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    base = {"--org": "vision", "--period": "monthly", "--limit": "100"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    result = run(runner, "budget", "set", "--db", str(tmp_path / "s.db"), *flat)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"suanli: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_reading_commands_refuse_a_missing_sqlite_file(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "nowhere.db"
    for cmd in (["show"], ["export"], ["remove", "x"], ["history", "x"]):
        result = run(runner, "budget", *cmd, "--db", str(path))
        assert result.exit_code == 2
        assert result.stderr.strip() == f"suanli: error: --db {path}: no such file"
    assert not path.exists()


def test_show_with_a_bad_at_or_an_unknown_history(runner: CliRunner, store_url: str) -> None:
    ok(runner, "budget", "set", "--db", store_url, "--org", "nlp", "--period", "daily",
       "--limit", "5")  # fmt: skip
    bad = run(runner, "budget", "show", "--db", store_url, "--at", "yesterday")
    assert bad.exit_code == 2 and bad.stderr.startswith("suanli: error: --at 'yesterday'")
    unknown = run(runner, "budget", "history", "--db", store_url, "vision")
    assert unknown.exit_code == 2 and "budget 'vision' was never set" in unknown.stderr
    gone = run(runner, "budget", "remove", "--db", store_url, "vision")
    assert gone.exit_code == 2
    assert "no budget 'vision' to remove (budgets: nlp)" in gone.stderr
