"""``suanli bill reconcile DIR``: rate a directory's attempts again and compare with the ledger
(``suanli.store.reconcile``). Registered on ``suanli bill`` by ``suanli.cli.bill``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated, Any

import sqlalchemy as sa
import typer
from rich.console import Console

from suanli.cli.bill import (  # the shared pieces of the bill commands
    SHOWN_DIFFERENCES,
    DbOpt,
    DirArg,
    EpochOpt,
    JsonOpt,
    PolicyOpt,
    PricesOpt,
    _console,
    _ledger_sums,
    _load_inputs,
    _now,
    _open_store,
    _scenario_of_batch,
    meter_result,
    scenario_batch,
)
from suanli.cli.dbtarget import first_line
from suanli.cli.errors import fail, user_errors
from suanli.metering.charges import MONEY_QUANTUM, Charge
from suanli.metering.prices import PriceBook
from suanli.metering.report import (
    plain,
    render_json,
)
from suanli.metering.simout import (
    DEFAULT_EPOCH,
    SimResultFiles,
)
from suanli.store import (
    Difference,
    Store,
    journal,
    totals,
)
from suanli.store import reconcile as reconcile_ledger


def _live_outside(conn: Any, stems: set[str]) -> list[Charge]:
    """The live entries (charge entries not reversed) of every scenario but ``stems``, keyed
    by their charge key: expecting them as they stand leaves them untouched. Empty without
    reading the journal when every batch of the ledger belongs to ``stems``."""
    batches = {t.group[0] for t in totals(conn, by=("batch",))}
    if all(_scenario_of_batch(b) in stems for b in batches):
        return []
    prefixes = tuple(f"{s}/" for s in stems)
    reversed_keys: set[str] = set()
    live: dict[str, Charge] = {}
    for e in journal(conn):
        if e.reverses is not None:
            reversed_keys.add(e.reverses)
        elif not e.charge.job_id.startswith(prefixes):
            live[e.charge.key] = e.charge._replace(key=e.charge_key)
    return [c for k, c in live.items() if k not in reversed_keys]


@dataclass(slots=True)
class _Reconciled:
    """What reconcile found for one scenario (before any fix), and what a fix appended."""

    result: SimResultFiles
    rated: list[Charge]
    missing: list[Charge] = field(default_factory=list)
    unexpected: dict[str, Decimal] = field(default_factory=dict)
    differing: list[Difference] = field(default_factory=list)
    ledger_total: Decimal = Decimal(0)
    reversed: int = 0
    posted: int = 0
    refused: str = ""

    @property
    def clean(self) -> bool:
        return not (self.missing or self.unexpected or self.differing)

    @property
    def matched(self) -> int:
        return len(self.rated) - len(self.missing) - len(self.differing)

    @property
    def rated_total(self) -> Decimal:
        return sum((c.amount for c in self.rated), Decimal(0))


def reconcile_results(
    store: Store,
    results: Sequence[SimResultFiles],
    book: PriceBook,
    epoch_ms: int,
    fix: bool,
    now: datetime,
) -> list[_Reconciled]:
    """Compare the ledger's entries of each scenario of ``results`` with its charges rated
    afresh (one comparison for all of them; entries of other scenarios are expected as they
    stand, so they never count as differences). With ``fix``, each scenario that differs is
    corrected on its own, by appending, in batch ``reconcile:<stem>``."""
    found = [_Reconciled(r, meter_result(r, book, epoch_ms).charges) for r in results]
    by_stem = {f.result.stem: f for f in found}
    stems = set(by_stem)

    def owner(job_or_key: str) -> _Reconciled | None:
        stem, sep, _ = job_or_key.partition("/")
        return by_stem.get(stem) if sep else None

    with store.read() as conn:
        others = _live_outside(conn, stems)
        ledger = {stem: _ledger_sums(conn, stem) for stem in stems}
    for f in found:
        f.ledger_total = sum((a for a, _ in ledger[f.result.stem].values()), Decimal(0))
    report = reconcile_ledger(store, [c for f in found for c in f.rated] + others)
    foreign = 0
    for c in report.missing:
        hit = owner(c.job_id)
        if hit is None:
            foreign += 1
        else:
            hit.missing.append(c)
    for key, net in report.unexpected_net.items():
        hit = owner(key)
        if hit is None:
            foreign += 1
        else:
            hit.unexpected[key] = net
    for d in report.differing:
        hit = owner(d.key)
        if hit is None:
            foreign += 1
        else:
            hit.differing.append(d)
    if not fix:
        return found
    for f in found:
        if f.clean:
            continue
        if foreign:
            f.refused = (
                f"{foreign:,} entries of other scenarios changed while reading; not fixed "
                "(run again)"
            )
            continue
        with store.read() as conn:
            rest = _live_outside(conn, {f.result.stem})
        done = reconcile_ledger(
            store,
            [*f.rated, *rest],
            fix=True,
            now=now,
            batch=scenario_batch(f.result.stem, "reconcile"),
            reason=f"suanli bill reconcile: {f.result.policy} rated afresh",
        )
        f.reversed, f.posted = done.reversed, done.posted
    return found


def reconcile_command(
    directory: DirArg,
    prices: PricesOpt,
    epoch: EpochOpt = DEFAULT_EPOCH,
    db: DbOpt = None,
    policy: PolicyOpt = None,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Append reversals and corrected charges until the ledger agrees (never "
            "edits or deletes an entry).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Rate DIR's attempts again and compare with the ledger, key by key.

    Exit status 0 when the ledger agrees (or --fix made it agree), 1 when it differs."""
    with user_errors():
        _, results, book, epoch_ms = _load_inputs(directory, policy, prices, epoch)
    store, shown = _open_store(db, directory)
    now = _now()
    try:
        with user_errors():
            done = reconcile_results(store, results, book, epoch_ms, fix, now)
    except sa.exc.SQLAlchemyError as e:
        fail(f"--db {shown}: {first_line(e)}")
    finally:
        store.close()
    differs = any(not r.clean and (not fix or r.refused) for r in done)
    if as_json:
        sys.stdout.write(render_json(_reconcile_document(done, shown, fix)))
    else:
        console = _console()
        for r in done:
            _print_reconciled(console, r, fix, shown)
    if differs:
        raise typer.Exit(1)


def _money_text(x: Decimal) -> str:
    return plain(x.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN))


def _print_reconciled(console: Console, r: _Reconciled, fix: bool, shown: str) -> None:
    name = f"{r.result.policy} (ledger {shown})"
    if r.clean:
        console.print(
            f"{name}: clean: {r.matched:,} charges match (total {_money_text(r.rated_total)})",
            markup=False,
        )
        return
    missing = sum((c.amount for c in r.missing), Decimal(0))
    unexpected = sum(r.unexpected.values(), Decimal(0))
    delta = sum((d.delta for d in r.differing), Decimal(0))
    console.print(
        f"{name}: {r.matched:,} match, {len(r.differing):,} differ (ledger − rated "
        f"{_money_text(delta)}), {len(r.missing):,} missing ({_money_text(missing)}), "
        f"{len(r.unexpected):,} unexpected ({_money_text(unexpected)}); ledger "
        f"{_money_text(r.ledger_total)}, rated {_money_text(r.rated_total)}",
        markup=False,
    )
    for d in r.differing[:SHOWN_DIFFERENCES]:
        console.print(
            f"  differs: {d.key}: ledger {d.recorded}, rated {d.expected} ({', '.join(d.fields)})",
            markup=False,
        )
    for c in r.missing[: max(0, SHOWN_DIFFERENCES - len(r.differing))]:
        console.print(f"  missing: {c.key}: {c.amount}", markup=False)
    rest = len(r.differing) + len(r.missing) - SHOWN_DIFFERENCES
    if rest > 0:
        console.print(f"  ... and {rest:,} more", markup=False)
    if r.refused:
        console.print(f"{name}: {r.refused}", markup=False)
    elif fix:
        console.print(
            f"{name}: fixed: appended {r.reversed:,} reversals and {r.posted:,} charges "
            f"(batch {scenario_batch(r.result.stem, 'reconcile')})",
            markup=False,
        )
    else:
        console.print("run again with --fix to correct the ledger", style="dim", markup=False)


def _reconcile_document(done: Sequence[_Reconciled], shown: str, fix: bool) -> dict[str, Any]:
    return {
        "ledger": shown,
        "fix": fix,
        "results": [
            {
                "policy": r.result.policy,
                "stem": r.result.stem,
                "clean": r.clean,
                "matched": r.matched,
                "differing": [
                    {
                        "key": d.key,
                        "ledger": plain(d.recorded),
                        "rated": plain(d.expected),
                        "fields": list(d.fields),
                    }
                    for d in r.differing
                ],
                "missing": [{"key": c.key, "amount": plain(c.amount)} for c in r.missing],
                "unexpected": [{"key": k, "net": plain(v)} for k, v in r.unexpected.items()],
                "ledger_total": plain(r.ledger_total),
                "rated_total": plain(r.rated_total),
                "reversed": r.reversed,
                "posted": r.posted,
                "refused": r.refused or None,
            }
            for r in done
        ],
    }
