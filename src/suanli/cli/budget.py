"""``suanli budget``: set, import, export, remove and show the budgets kept in a store.

- ``suanli budget set --org vision --period monthly --limit 25000 [...]``: append a version.
- ``suanli budget import FILE.yaml [--replace]``: set every budget of a budgets file.
- ``suanli budget export [-o FILE]``: the current set as a budgets file.
- ``suanli budget remove NAME``: append a tombstone for a budget.
- ``suanli budget history NAME``: every version of a budget.
- ``suanli budget show [--at INSTANT] [--budgets FILE] [--json]``: each budget in its period,
  with its spend from the ledger, thresholds crossed and a linear forecast.

Every command needs a store: ``--db PATH|URL`` (a SQLite file or a PostgreSQL URL), else the
``SUANLI_DB`` environment variable. The store holds the ledger too, so ``show`` reads the
budgets and their spend from the same database (``--budgets FILE`` shows a file's budgets
instead). Rules and the file format: ``docs/budgets.md``; the table: ``docs/ledger.md``.

The commands take times from the clock (``now``) unless ``--effective`` / ``--at`` say
otherwise; ``suanli.store.budgets`` itself never reads a clock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from suanli.cli.dbtarget import DbOpt, store_at
from suanli.cli.errors import fail, user_errors
from suanli.config.budgets import budgets_from_dict, load_budgets
from suanli.core.budget import DEFAULT_RUNTIME_S, BudgetError, BudgetSpec, BudgetsSpec
from suanli.metering.report import plain, render_json
from suanli.store.budgets import (
    BudgetSpend,
    BudgetVersion,
    budget_history,
    budget_spend,
    current_budgets,
    remove_budget,
    set_budget,
)

__all__ = ["budget_app", "budgets_document"]

DEFAULT_CURRENCY = "USD"
"""The currency of ``budget set`` when neither ``--currency`` nor stored budgets say."""
NON_TTY_WIDTH = 200
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

budget_app = typer.Typer(
    name="budget",
    help="Set and show budgets kept in a store, with their spend from its ledger "
    "(docs/budgets.md).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

EffectiveOpt = Annotated[
    str | None,
    typer.Option(
        "--effective",
        metavar="INSTANT",
        help="When the change takes effect: an ISO 8601 instant with offset, or a date "
        "(00:00 UTC). Default: now.",
    ),
]
ByOpt = Annotated[
    str | None,
    typer.Option("--by", metavar="WHO", help="Who made the change (default: $USER)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")]
NameArg = Annotated[
    str,
    typer.Argument(metavar="NAME", help="The budget: its name, else its org (* for everyone)."),
]


def parse_instant(text: str, option: str) -> datetime:
    """An ISO 8601 instant with a UTC offset (``Z`` too), or a date for 00:00 UTC."""
    value = text.strip()
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(0), tzinfo=UTC)
        dt = datetime.fromisoformat(value)
    except ValueError:
        fail(
            f"{option} {text!r}: expected a date (2026-11-01) or an instant with offset "
            "(2026-11-01T09:30:00Z)"
        )
    if dt.tzinfo is None or dt.utcoffset() is None:
        fail(f"{option} {text!r}: needs a UTC offset (e.g. 2026-11-01T09:30:00Z)")
    return dt.astimezone(UTC)


def _when(effective: str | None) -> datetime:
    return parse_instant(effective, "--effective") if effective else datetime.now(UTC)


def _who(by: str | None) -> str | None:
    return by if by else os.environ.get("USER") or os.environ.get("LOGNAME") or None


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=NON_TTY_WIDTH)
    return console


def _money(x: Decimal) -> str:
    return f"{x:,.2f}"


def _percent(th: float) -> str:
    return f"{th * 100:g}%"


# --------------------------------------------------------------------------------------------
# suanli budget set
# --------------------------------------------------------------------------------------------

_OPTION_OF_KEY = {
    "org": "--org",
    "name": "--name",
    "period": "--period",
    "limit": "--limit",
    "thresholds": "--thresholds",
    "action": "--action",
    "demote_to": "--demote-to",
    "start": "--start",
    "end": "--end",
    "currency": "--currency",
}


def _option_error(e: BudgetError) -> NoReturn:
    """A budget-file error about the document built from the options, as one naming the
    option: ``budgets[0].thresholds[1]: must be > 0`` becomes ``--thresholds: must be > 0``."""
    path = e.path.removeprefix("budgets[0]").lstrip(".")
    key = path.split(".")[0].split("[")[0]
    option = _OPTION_OF_KEY.get(key, "--" + key if key else "options")
    if key in ("start", "end") and e.problem == "required key is missing":
        fail(f"{option}: required with --period fixed (a date, or an instant with offset)")
    fail(f"{option}: {e.problem}")


def _threshold_items(text: str) -> list[Any]:
    """``50%,80%,1.0`` as the file format's list: percentages as text, fractions as numbers
    (text that is neither stays text, for the file format's error)."""
    items: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if part.endswith("%"):
            items.append(part)
            continue
        try:
            items.append(float(part))
        except ValueError:
            items.append(part)
    return items


def spec_from_options(
    org: str,
    period: str,
    limit: str,
    currency: str,
    thresholds: str | None = None,
    action: str | None = None,
    demote_to: str | None = None,
    name: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> BudgetSpec:
    """A budget from command-line values, validated exactly as a budgets file entry
    (``suanli.config.budgets``); errors name the option."""
    doc: dict[str, Any] = {"org": org, "period": period, "limit": limit}
    optional = {
        "thresholds": _threshold_items(thresholds) if thresholds is not None else None,
        "action": action,
        "demote_to": demote_to,
        "name": name,
        "start": start,
        "end": end,
    }
    doc.update({k: v for k, v in optional.items() if v is not None})
    try:
        spec = budgets_from_dict({"currency": currency, "budgets": [doc]}, "")
    except BudgetError as e:
        _option_error(e)
    return spec.budgets[0]


def _describe(spec: BudgetSpec, currency: str) -> str:
    when = f"{spec.period}"
    if spec.period == "fixed":
        assert spec.start is not None and spec.end is not None
        span = (datetime.fromtimestamp(spec.start, UTC), datetime.fromtimestamp(spec.end, UTC))
        when = f"fixed {span[0]:%Y-%m-%d %H:%M}..{span[1]:%Y-%m-%d %H:%M} UTC"
    action = spec.action + (f" to {spec.demote_to}" if spec.action == "demote" else "")
    return (
        f"{spec.org or '*'}, {when}, limit {_money(spec.limit)} {currency}, thresholds "
        f"{', '.join(_percent(t) for t in spec.thresholds)}, action {action}"
    )


@budget_app.command("set")
def set_command(
    org: Annotated[
        str, typer.Option("--org", metavar="PATH", help="The org path governed; * for everyone.")
    ],
    period: Annotated[
        str, typer.Option("--period", metavar="KIND", help="monthly, weekly, daily or fixed.")
    ],
    limit: Annotated[
        str, typer.Option("--limit", metavar="AMOUNT", help="The limit per period, > 0.")
    ],
    db: DbOpt = None,
    currency: Annotated[
        str | None,
        typer.Option(
            "--currency",
            metavar="CODE",
            help=f"The limit's currency (default: the stored budgets', else {DEFAULT_CURRENCY}).",
        ),
    ] = None,
    thresholds: Annotated[
        str | None,
        typer.Option(
            "--thresholds",
            metavar="LIST",
            help="Alert thresholds, comma-separated fractions or percentages "
            "(default 50%,80%,100%).",
        ),
    ] = None,
    action: Annotated[
        str | None,
        typer.Option(
            "--action", metavar="ACTION", help="none (default), demote, off-peak or refuse."
        ),
    ] = None,
    demote_to: Annotated[
        str | None,
        typer.Option(
            "--demote-to", metavar="CLASS", help="The class a demote budget moves jobs to."
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="Tells two budgets of one org apart."),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option("--start", metavar="INSTANT", help="A fixed period's start (date or ISO)."),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--end", metavar="INSTANT", help="A fixed period's end (date or ISO)."),
    ] = None,
    effective: EffectiveOpt = None,
    by: ByOpt = None,
) -> None:
    """Set a budget: append a new version of it (the previous versions are kept)."""
    when = _when(effective)
    with user_errors(), store_at(db, must_exist=False) as (store, shown):
        if currency is None:
            stored = current_budgets(store)
            currency = stored.currency if stored is not None else DEFAULT_CURRENCY
        spec = spec_from_options(
            "*" if org.strip() == "*" else org,
            period,
            limit,
            currency,
            thresholds,
            action,
            demote_to,
            name,
            start,
            end,
        )
        version = set_budget(store, spec, currency, when, _who(by))
    typer.echo(
        f"set budget {version.label} (version {version.version}, from "
        f"{when:%Y-%m-%d %H:%M:%S} UTC) in {shown}: {_describe(spec, currency)}"
    )


# --------------------------------------------------------------------------------------------
# suanli budget import / export
# --------------------------------------------------------------------------------------------


@budget_app.command("import")
def import_command(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="A budgets file (YAML, docs/budgets.md).")
    ],
    db: DbOpt = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Remove the stored budgets first: the file becomes the whole set."
        ),
    ] = False,
    effective: EffectiveOpt = None,
    by: ByOpt = None,
) -> None:
    """Set every budget of a budgets file (one new version each, in one transaction)."""
    when = _when(effective)
    with user_errors():
        spec = load_budgets(file)
        with store_at(db, must_exist=False) as (store, shown), store.begin() as conn:
            removed = 0
            if replace:
                stored = current_budgets(conn)
                for b in stored.budgets if stored is not None else ():
                    remove_budget(conn, b.label, when, _who(by))
                    removed += 1
            for b in spec.budgets:
                set_budget(conn, b, spec.currency, when, _who(by))
    if spec.default_runtime_s != DEFAULT_RUNTIME_S:
        typer.echo(
            f"note: default_runtime ({spec.default_runtime_s:g} s) is a scheduler setting and "
            "is not stored with the budgets",
            err=True,
        )
    gone = f", removed {removed} stored first" if replace else ""
    typer.echo(f"imported {len(spec.budgets)} budgets from {file} into {shown}{gone}")


def _instant_text(s: int) -> str:
    dt = datetime.fromtimestamp(s, UTC)
    if dt.time() == time(0):
        return dt.date().isoformat()
    return dt.isoformat().replace("+00:00", "Z")


def budgets_document(spec: BudgetsSpec) -> dict[str, Any]:
    """``spec`` as a budgets-file document that ``load_budgets`` reads back equal to it
    (``epoch_s`` aside, which is not part of the file)."""
    rows: list[dict[str, Any]] = []
    for b in spec.budgets:
        row: dict[str, Any] = {"org": b.org or "*"}
        if b.name:
            row["name"] = b.name
        row["period"] = b.period
        if b.period == "fixed":
            assert b.start is not None and b.end is not None
            row["start"] = _instant_text(b.start)
            row["end"] = _instant_text(b.end)
        row["limit"] = plain(b.limit)
        row["thresholds"] = list(b.thresholds)
        row["action"] = b.action
        if b.action == "demote":
            row["demote_to"] = b.demote_to
        rows.append(row)
    doc: dict[str, Any] = {"currency": spec.currency}
    if spec.default_runtime_s != DEFAULT_RUNTIME_S:
        doc["default_runtime"] = spec.default_runtime_s
    doc["budgets"] = rows
    return doc


@budget_app.command("export")
def export_command(
    db: DbOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here (default: stdout)."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", metavar="INSTANT", help="The set in effect then (default: latest)."),
    ] = None,
) -> None:
    """Print (or write) the current budgets as a budgets file."""
    when = parse_instant(at, "--at") if at else None
    with user_errors(), store_at(db, must_exist=True) as (store, shown):
        spec = current_budgets(store, when)
    if spec is None:
        fail(f"--db {shown}: no budgets stored" + (f" in effect at {at}" if at else ""))
    text = f"# Budgets of {shown}" + (f" in effect at {at}" if at else "") + "\n"
    text += yaml.safe_dump(
        budgets_document(spec), sort_keys=False, allow_unicode=True, default_flow_style=None
    )
    if output is None:
        sys.stdout.write(text)
        return
    if output.suffix.lower() not in (".yaml", ".yml"):
        fail(f"--output {output}: expected a .yaml or .yml file")
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        fail(f"--output {output}: {e}")
    typer.echo(f"wrote {len(spec.budgets)} budgets to {output}")


# --------------------------------------------------------------------------------------------
# suanli budget remove / history
# --------------------------------------------------------------------------------------------


@budget_app.command("remove")
def remove_command(
    name: NameArg, db: DbOpt = None, effective: EffectiveOpt = None, by: ByOpt = None
) -> None:
    """Remove a budget: append a tombstone (its versions stay in the history)."""
    when = _when(effective)
    with user_errors(), store_at(db, must_exist=True) as (store, shown):
        version = remove_budget(store, name, when, _who(by))
    typer.echo(f"removed budget {version.label} (version {version.version}) from {shown}")


def _version_json(v: BudgetVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": v.version,
        "effective_at": v.effective_at.isoformat().replace("+00:00", "Z"),
        "set_by": v.set_by,
        "removed": v.removed,
    }
    if v.spec is not None and v.currency is not None:
        out["currency"] = v.currency
        out.update(budgets_document(BudgetsSpec((v.spec,), v.currency))["budgets"][0])
    return out


@budget_app.command("history")
def history_command(name: NameArg, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Every version of a budget, oldest first."""
    with user_errors(), store_at(db, must_exist=True) as (store, shown):
        versions = budget_history(store, name)
    if not versions:
        fail(f"--db {shown}: budget {name!r} was never set")
    if as_json:
        doc = {"budget": name, "db": shown, "versions": [_version_json(v) for v in versions]}
        sys.stdout.write(render_json(doc))
        return
    table = Table(title=f"Budget {name} in {shown}", title_justify="left", header_style="bold")
    for col in ("version", "effective (UTC)", "set by", "budget"):
        table.add_column(col, no_wrap=col != "budget")
    for v in versions:
        what = "removed" if v.spec is None else _describe(v.spec, v.currency or "")
        table.add_row(
            str(v.version), f"{v.effective_at:%Y-%m-%d %H:%M:%S}", v.set_by or "-", Text(what)
        )
    _console().print(table)


# --------------------------------------------------------------------------------------------
# suanli budget show
# --------------------------------------------------------------------------------------------


def _spend_json(s: BudgetSpend) -> dict[str, Any]:
    b, p = s.budget, s.period
    return {
        "budget": b.label,
        "org": b.org,
        "period": b.period,
        "period_label": p.label if p is not None else None,
        "period_start": _iso(p.start_utc) if p is not None else None,
        "period_end": _iso(p.end_utc) if p is not None else None,
        "limit": plain(b.limit),
        "spent": plain(s.spent),
        "entries": s.entries,
        "fraction": plain(s.fraction),
        "thresholds": list(b.thresholds),
        "crossed": list(s.crossed),
        "forecast": plain(s.forecast) if s.forecast is not None else None,
        "action": b.action,
        "demote_to": b.demote_to if b.action == "demote" else None,
        "exhausted": s.exhausted,
    }


def _iso(s: int) -> str:
    return datetime.fromtimestamp(s, UTC).isoformat().replace("+00:00", "Z")


def spend_table(spends: Sequence[BudgetSpend], currency: str, at: datetime) -> Table:
    table = Table(
        title=f"Budgets at {at:%Y-%m-%d %H:%M:%S} UTC ({currency}; spend from the ledger)",
        title_justify="left",
        header_style="bold",
    )
    right = {"limit", "spent", "used %", "forecast"}
    for col in (
        "budget",
        "org",
        "period",
        "limit",
        "spent",
        "used %",
        "crossed",
        "forecast",
        "action",
        "state",
    ):
        table.add_column(col, justify="right" if col in right else "left", no_wrap=True)
    for s in spends:
        b = s.budget
        action = b.action + (f" ({b.demote_to})" if b.action == "demote" else "")
        if s.period is None:
            cells: list[str | Text] = [
                "outside its span",
                _money(b.limit),
                "-",
                "-",
                "-",
                "-",
                action,
                "-",
            ]
        else:
            state: str | Text = Text("exhausted", style="bold red") if s.exhausted else Text("ok")
            crossed = ", ".join(_percent(t) for t in s.crossed) or "-"
            cells = [
                f"{b.period} {s.period.label}",
                _money(b.limit),
                _money(s.spent),
                f"{s.fraction * 100:.1f}",
                crossed,
                _money(s.forecast) if s.forecast is not None else "-",
                action,
                state,
            ]
        table.add_row(
            Text(b.label),
            Text(b.org or "*"),
            *(c if isinstance(c, Text) else Text(c) for c in cells),
        )
    return table


@budget_app.command("show")
def show_command(
    db: DbOpt = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="INSTANT",
            help="Show the budgets in effect and their spend at this instant (ISO 8601 with "
            "offset, or a date for 00:00 UTC). Default: now.",
        ),
    ] = None,
    budgets_file: Annotated[
        Path | None,
        typer.Option(
            "--budgets",
            metavar="FILE",
            help="Show this budgets file's budgets (YAML) instead of the stored ones.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Each budget in its current period: limit, spend from the ledger, thresholds crossed,
    a linear forecast to the period's end, and whether it is exhausted."""
    when = parse_instant(at, "--at") if at else datetime.now(UTC)
    at_ms = (when - _EPOCH) // timedelta(milliseconds=1)
    with user_errors():
        spec = load_budgets(budgets_file) if budgets_file is not None else None
        with store_at(db, must_exist=True) as (store, shown):
            if spec is None:
                spec = current_budgets(store, when)
            spends = budget_spend(store, spec, at_ms) if spec is not None else []
    source = str(budgets_file) if budgets_file is not None else shown
    if as_json:
        doc = {
            "at": when.isoformat().replace("+00:00", "Z"),
            "db": shown,
            "budgets_from": source,
            "currency": spec.currency if spec is not None else None,
            "budgets": [_spend_json(s) for s in spends],
        }
        sys.stdout.write(render_json(doc))
        return
    console = _console()
    if spec is None:
        console.print(
            f"no budgets stored in {shown} in effect at {when:%Y-%m-%d %H:%M:%S} UTC", markup=False
        )
        return
    console.print(spend_table(spends, spec.currency, when))
    console.print(
        f"budgets: {source}; a charge counts in the period it starts in; forecast: spend to "
        "date × period length / elapsed",
        style="dim",
        markup=False,
    )
