"""``suanli bill``: chargeback and showback of a simulation output directory, and ROI.

- ``suanli bill DIR --prices FILE`` (the default command, also ``suanli bill charge``): for each
  result (policy set) in DIR, read its attempts, meter them into usage records, rate them with
  the price book, check that the bill's GPU-hours equal the simulator's
  ``allocated_gpu_hours``, write usage and charges to the ledger (``DIR/ledger.db`` by
  default), then print the chargeback.
- ``suanli bill reconcile DIR --prices FILE [--fix]``: rate again and compare with the ledger.
- ``suanli bill roi DIR --capacity FILE --prices FILE``: capacity cost, cost per delivered
  GPU-hour, idle capacity, revenue, and what each policy saves against a baseline.
- ``suanli bill slurm --db URL``: the live ledger's usage against Slurm's accounting (sacct).

Contracts (``docs/billing.md``):

- Each result is a scenario of its own: job ids carry its file stem
  (``suanli.metering.simout.scenario_job``) and its entries go to batch ``bill:<stem>`` (fixes
  by ``reconcile`` to ``reconcile:<stem>``), so one ledger holds every scenario of a
  directory and each scenario's net is the sum of its two batches.
- A bill posts in one transaction per result, and only if the ledger then holds exactly the
  rated charges for that scenario (net amount and raw quantity per resource and UTC day):
  billing twice posts nothing; billing with another price book or epoch is refused (nothing
  written) and points to ``reconcile``.
- The GPU-hours check is exact: the integer milli-GPU × ms of the bill, as a quotient of the
  same expression the simulator used, must equal ``allocated_gpu_hours``; otherwise nothing
  is posted and the command fails.
"""

from __future__ import annotations

import gc
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import sqlalchemy as sa
import typer
from rich.console import Console
from typer.core import TyperGroup

from suanli.cli.dbtarget import first_line, masked
from suanli.cli.errors import fail, user_errors
from suanli.core.model import SpecError
from suanli.metering.charges import Charge
from suanli.metering.prices import PriceBook, load_price_book
from suanli.metering.rating import rate
from suanli.metering.report import (
    DIMENSIONS,
    Chargeback,
    Tally,
    chargeback,
    chargeback_csv,
    chargeback_json,
    chargeback_table,
    gpu_hours,
    plain,
    plot_gpu_hours,
    plot_spend,
    render_json,
    tally,
)
from suanli.metering.simout import (
    DEFAULT_EPOCH,
    SimOutput,
    SimResultFiles,
    load_output,
    parse_epoch,
    read_attempts,
    select_results,
)
from suanli.metering.usage import Attempt, UsageRecord, usage_records
from suanli.store import (
    Store,
    StoreError,
    journal,
    open_store,
    post_charges,
    record_usage,
    totals,
)

__all__ = [
    "Bill",
    "BillError",
    "LEDGER_FILE",
    "bill_app",
    "bill_result",
    "meter_result",
    "post_bill",
]

LEDGER_FILE = "ledger.db"
"""The ledger's SQLite file inside the output directory, unless ``--db`` says otherwise."""
DEFAULT_BY = ("department",)
STAGES = ("read", "meter", "rate", "check", "ledger", "report")
"""The timed stages of a bill, in order."""
NON_TTY_WIDTH = 200
_EPOCH_DAY = date(1970, 1, 1)
SHOWN_DIFFERENCES = 10
"""Differences listed by name in ``reconcile``'s output; the rest are counted."""


class BillError(SpecError):
    """A bill that must not be posted (a check failed), or a ledger that disagrees with it."""


# --------------------------------------------------------------------------------------------
# The group: ``suanli bill DIR`` runs the default command
# --------------------------------------------------------------------------------------------

DEFAULT_COMMAND = "charge"


class _DefaultCommandGroup(TyperGroup):
    """A group whose first argument, unless it names a command (or is ``--help``), goes to
    ``DEFAULT_COMMAND``: ``suanli bill DIR`` is ``suanli bill charge DIR``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] != "--help":
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


bill_app = typer.Typer(
    cls=_DefaultCommandGroup,
    name="bill",
    help="Chargeback, showback and ROI of a simulation output directory "
    "(suanli bill DIR --prices FILE; docs/billing.md).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Bill:
    """One result, billed: what was read, metered and rated, and what the ledger got."""

    result: SimResultFiles
    attempts: list[Attempt]
    records: list[UsageRecord]
    charges: list[Charge]
    tally: Tally
    gpu_raw: int
    """Milli-GPU × ms over all GPU charges (used and idle): the bill's GPU time."""
    new_usage: int = 0
    new_charges: int = 0
    already_billed: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds per stage (``STAGES``)."""

    @property
    def gpu_hours(self) -> Decimal:
        return gpu_hours(self.gpu_raw)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (restored after, as it was).

    Metering, rating and posting a bill allocate millions of small tuples that hold no
    reference cycles; with the collector on, its repeated passes over that growing heap
    cost a third of the time of the rating (docs/billing.md, "Speed"). Reference counting
    still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t0


def meter_result(result: SimResultFiles, book: PriceBook, epoch_ms: int) -> Bill:
    """Read, meter and rate ``result``, add the charges up and check the GPU-hours
    (``BillError`` if they differ from the simulator's); nothing is written."""
    seconds: dict[str, float] = {}
    with gc_paused():
        return _meter(result, book, epoch_ms, seconds)


def _meter(
    result: SimResultFiles, book: PriceBook, epoch_ms: int, seconds: dict[str, float]
) -> Bill:
    with _timed(seconds, "read"):
        attempts = read_attempts(result, epoch_ms)
    with _timed(seconds, "meter"):
        records = list(usage_records(attempts))
    with _timed(seconds, "rate"):
        charges = list(rate(records, book))
    with _timed(seconds, "check"):
        t = tally(charges, records, book)
        gpu_raw = t.total().gpu_raw
        check_gpu_hours(result, gpu_raw)
    return Bill(result, attempts, records, charges, t, gpu_raw, seconds=seconds)


def check_gpu_hours(result: SimResultFiles, gpu_raw: int) -> None:
    """``BillError`` unless ``gpu_raw`` (milli-GPU × ms) is the simulator's
    ``allocated_gpu_hours`` of ``result``: the same quotient, compared as ``Decimal``."""
    expected = result.allocated_gpu_hours
    if expected is None:
        raise BillError(
            f"{result.attempts_csv.parent / 'summary.json'}: results[{result.index}]: no "
            "allocated_gpu_hours to check the bill against (simulate again with this version)"
        )
    got = gpu_hours(gpu_raw)
    if got != expected:
        raise BillError(
            f"{result.policy}: the bill holds {got} GPU-hours but the simulator allocated "
            f"{expected} (summary.json); nothing was posted"
        )


def scenario_batch(stem: str, kind: str = "bill") -> str:
    """The ledger batch of a scenario's entries: ``bill:<stem>`` or ``reconcile:<stem>``."""
    return f"{kind}:{stem}"


def _scenario_of_batch(batch: str) -> str:
    kind, sep, stem = batch.partition(":")
    return stem if sep and kind in ("bill", "reconcile") else ""


_Sums = dict[tuple[str, str, str], tuple[Decimal, int]]
"""Per (currency, resource, UTC day of the charge's start): net amount and raw quantity."""

_DAY_MS = 86_400_000


def _rated_sums(charges: Sequence[Charge]) -> _Sums:
    acc: dict[tuple[str, str, int], list[Any]] = defaultdict(lambda: [Decimal(0), 0])
    for c in charges:
        a = acc[(c.currency, c.resource, c.start_ms // _DAY_MS)]
        a[0] += c.amount
        a[1] += c.raw
    return {
        (currency, resource, (_EPOCH_DAY + timedelta(days=day)).isoformat()): (v[0], v[1])
        for (currency, resource, day), v in acc.items()
        if v[0] or v[1]
    }


def _ledger_sums(conn: Any, stem: str) -> _Sums:
    """The ledger's net per (currency, resource, day) over the batches of scenario ``stem``."""
    acc: dict[tuple[str, str, str], list[Any]] = defaultdict(lambda: [Decimal(0), 0])
    for t in totals(conn, by=("batch", "resource", "day")):
        batch, resource, day = t.group
        if _scenario_of_batch(batch) == stem:
            a = acc[(t.currency, resource, day)]
            a[0] += t.amount
            a[1] += t.raw
    return {k: (v[0], v[1]) for k, v in acc.items() if v[0] or v[1]}


def _describe_sums(s: _Sums) -> str:
    if not s:
        return "nothing"
    money: dict[str, Decimal] = defaultdict(Decimal)
    for (currency, _, _), (amount, _) in s.items():
        money[currency] += amount
    return ", ".join(f"{amount} {currency}" for currency, amount in sorted(money.items()))


def post_bill(store: Store, bill: Bill, now: datetime, *, where: str = "the ledger") -> None:
    """Write ``bill``'s usage records and charges in one transaction (see the module
    docstring); sets ``new_usage``, ``new_charges`` and ``already_billed``. ``BillError``
    (nothing written) when the ledger holds a different bill of the scenario."""
    stem = bill.result.stem
    with gc_paused(), _timed(bill.seconds, "ledger"), store.begin() as conn:
        want = _rated_sums(bill.charges)
        before = _ledger_sums(conn, stem)
        if before == want and _holds_samples(conn, bill.charges):
            bill.already_billed = True
            return
        if before:
            raise _mismatch(bill, before, want, where)
        bill.new_usage = record_usage(conn, bill.records)
        bill.new_charges = post_charges(conn, bill.charges, now, scenario_batch(stem))
        # The scenario held nothing before; if every charge went in (their keys are
        # distinct), it now holds exactly them. Otherwise some keys were taken (by entries
        # of another directory's scenario of the same name, say): check, and roll back.
        if bill.new_charges != len(bill.charges):
            after = _ledger_sums(conn, stem)
            if after != want:
                raise _mismatch(bill, after, want, where)


SAMPLES = 5
"""Charges looked up by key before a bill counts as already posted (besides equal sums)."""


def _holds_samples(conn: Any, charges: Sequence[Charge]) -> bool:
    """Whether the ledger holds the keys of ``SAMPLES`` charges spread over ``charges`` (so
    that equal sums from charges at other instants, e.g. another epoch under a flat price
    book, do not pass for this bill). Each lookup reads the entries starting at that
    charge's millisecond (``start_ms`` is indexed)."""
    if not charges:
        return True
    step = max(1, len(charges) // SAMPLES)
    for c in charges[::step][:SAMPLES]:
        found = list(journal(conn, since_ms=c.start_ms, until_ms=c.start_ms + 1))
        if not any(e.charge_key == c.key for e in found):
            return False
    return True


def _mismatch(bill: Bill, held: _Sums, want: _Sums, where: str) -> BillError:
    return BillError(
        f"{where} holds a different bill of {bill.result.policy!r} ({_describe_sums(held)}; "
        f"rated now: {_describe_sums(want)}): billed with another price book or --epoch? "
        "Nothing was posted; compare with 'suanli bill reconcile' (--fix corrects the ledger)"
    )


def bill_result(
    store: Store,
    result: SimResultFiles,
    book: PriceBook,
    epoch_ms: int,
    now: datetime,
    *,
    where: str = "the ledger",
) -> Bill:
    """Meter, rate, check and post one result (the stages of ``STAGES`` but ``report``)."""
    bill = meter_result(result, book, epoch_ms)
    post_bill(store, bill, now, where=where)
    return bill


# --------------------------------------------------------------------------------------------
# Options shared by the commands
# --------------------------------------------------------------------------------------------

DirArg = Annotated[
    Path,
    typer.Argument(
        metavar="DIR",
        help="A simulation output directory (suanli simulate -o DIR).",
        show_default=False,
    ),
]
PricesOpt = Annotated[
    Path, typer.Option("--prices", metavar="FILE", help="Price book (YAML, docs/prices.md).")
]
EpochOpt = Annotated[
    str,
    typer.Option(
        "--epoch",
        metavar="INSTANT",
        help="Wall-clock instant of simulated second 0 (ISO 8601 with offset), for "
        "time-of-day bands.",
    ),
]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        help=f"Ledger: a SQLite file or a PostgreSQL URL (default: DIR/{LEDGER_FILE}).",
    ),
]
PolicyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        "-p",
        metavar="LABEL",
        help="Bill only this result (its policy-set label or file stem); repeatable. "
        "Default: every result, each as its own scenario.",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No notes; results only.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")]


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for item in values or () for v in item.split(",") if v.strip()]


def parse_by(values: Sequence[str] | None) -> tuple[str, ...]:
    """``--by`` values (repeatable, or comma-separated) as dimensions, in order."""
    dims = _split(values) or list(DEFAULT_BY)
    for d in dims:
        if d not in DIMENSIONS:
            fail(f"--by {d!r}: choose from {', '.join(DIMENSIONS)}")
    if len(set(dims)) != len(dims):
        fail(f"--by: a dimension is repeated in {', '.join(dims)}")
    return tuple(dims)


def _open_store(db: str | None, directory: Path) -> tuple[Store, str]:
    target = db if db is not None else str(directory / LEDGER_FILE)
    shown = masked(target)
    try:
        return open_store(target), shown
    except (StoreError, sa.exc.SQLAlchemyError, OSError) as e:
        fail(f"--db {shown}: cannot open the ledger: {first_line(e)}")


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=NON_TTY_WIDTH)
    return console


def _load_inputs(
    directory: Path, policies: Sequence[str] | None, prices: Path, epoch: str
) -> tuple[SimOutput, list[SimResultFiles], PriceBook, int]:
    epoch_ms = parse_epoch(epoch)
    output = load_output(directory)
    results = select_results(output, _split(policies))
    book = load_price_book(prices)
    return output, results, book, epoch_ms


def _now() -> datetime:
    return datetime.now(UTC)


# --------------------------------------------------------------------------------------------
# suanli bill [charge] DIR
# --------------------------------------------------------------------------------------------


def chart_dimension(by: Sequence[str]) -> str:
    """The dimension the charts group by: the first of ``by`` that is not ``day``, else
    ``department``."""
    return next((d for d in by if d != "day"), "department")


def write_charts(bill: Bill, by: Sequence[str], out: Path) -> list[Path]:
    """``spend-<stem>.png`` and ``gpu-hours-<stem>.png`` in ``out``."""
    dim = chart_dimension(by)
    r = bill.result
    spend = out / f"spend-{r.stem}.png"
    hours = out / f"gpu-hours-{r.stem}.png"
    plot_spend(bill.tally, dim, spend, title=f"{r.policy} on {r.cluster}: spend per {dim} per day")
    plot_gpu_hours(
        bill.tally,
        dim,
        hours,
        title=f"{r.policy} on {r.cluster}: allocated versus used GPU-hours per {dim}",
    )
    return [spend, hours]


@bill_app.command(DEFAULT_COMMAND)
def charge_command(
    directory: DirArg,
    prices: PricesOpt,
    epoch: EpochOpt = DEFAULT_EPOCH,
    db: DbOpt = None,
    policy: PolicyOpt = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="DIMENSION",
            help=f"Group by {', '.join(DIMENSIONS)}; repeat (or comma-separate) for a "
            "multi-level table. Default: department.",
        ),
    ] = None,
    csv_out: Annotated[
        Path | None,
        typer.Option("--csv", metavar="FILE", help="Write the chargeback table as CSV."),
    ] = None,
    as_json: JsonOpt = False,
    charts: Annotated[
        Path | None,
        typer.Option(
            "--charts",
            metavar="DIR",
            help="Write PNG charts: daily spend stacked per group, allocated versus used "
            "GPU-hours per group.",
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Bill DIR: meter, rate, post to the ledger, print the chargeback (the default command)."""
    dims = parse_by(by)
    with user_errors():
        _, results, book, epoch_ms = _load_inputs(directory, policy, prices, epoch)
    if charts is not None:
        try:
            charts.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            fail(f"--charts {charts}: cannot create the directory: {e.strerror or e}")
    store, shown = _open_store(db, directory)
    bills: list[tuple[Bill, Chargeback]] = []
    now = _now()
    try:
        with user_errors():
            for result in results:
                bill = bill_result(store, result, book, epoch_ms, now, where=f"ledger {shown}")
                with _timed(bill.seconds, "report"):
                    cb = chargeback(bill.tally, dims)
                bills.append((bill, cb))
    except sa.exc.SQLAlchemyError as e:
        fail(f"--db {shown}: {first_line(e)}")
    finally:
        store.close()
    written: list[Path] = []
    if csv_out is not None:
        try:
            csv_out.write_text(
                chargeback_csv([(b.result.policy, cb) for b, cb in bills]), encoding="utf-8"
            )
        except OSError as e:
            fail(f"--csv {csv_out}: cannot write: {e.strerror or e}")
        written.append(csv_out)
    if charts is not None:
        try:
            for b, _ in bills:
                written += write_charts(b, dims, charts)
        except OSError as e:
            fail(f"--charts {charts}: cannot write: {e.strerror or e}")
    if as_json:
        sys.stdout.write(render_json(_bill_document(bills, directory, prices, epoch, shown)))
        return
    console = _console()
    for b, cb in bills:
        r = b.result
        console.print(
            chargeback_table(
                cb, title=f"{r.policy} on {r.cluster}: chargeback by {', '.join(cb.by)}"
            )
        )
        total = cb.lines()[-1].figures
        idle = total.idle_gpu_hours
        used = (
            f"; used {total.gpu_hours - idle:,.2f}, idle {idle:,.2f} "
            f"({(total.gpu_hours - idle) / total.gpu_hours:.1%} of the allocated GPU time busy)"
            if idle and total.gpu_hours
            else ""
        )
        sim = r.allocated_gpu_hours
        shown = "-" if sim is None else f"{Decimal(sim):,.2f}"
        console.print(
            f"GPU-hours: the bill's {b.gpu_hours:,.2f} equal the simulator's "
            f"allocated_gpu_hours ({shown}) exactly{used}",
            markup=False,
        )
        if not quiet:
            if b.already_billed:
                note = f"ledger {shown}: already billed, nothing new posted"
            else:
                note = (
                    f"ledger {shown}: posted {b.new_usage:,} usage records and "
                    f"{b.new_charges:,} charges (batch {scenario_batch(r.stem)})"
                )
            console.print(note, style="dim", markup=False)
    if written and not quiet:
        console.print(f"wrote {', '.join(str(p) for p in written)}", style="dim", markup=False)


def _bill_document(
    bills: Sequence[tuple[Bill, Chargeback]], directory: Path, prices: Path, epoch: str, db: str
) -> dict[str, Any]:
    return {
        "directory": str(directory),
        "prices": str(prices),
        "epoch": epoch,
        "ledger": db,
        "results": [
            {
                "policy": b.result.policy,
                "cluster": b.result.cluster,
                "stem": b.result.stem,
                "attempts": len(b.attempts),
                "usage_records": len(b.records),
                "charges": len(b.charges),
                "ledger": {
                    "batch": scenario_batch(b.result.stem),
                    "new_usage_records": b.new_usage,
                    "new_charges": b.new_charges,
                    "already_billed": b.already_billed,
                },
                "gpu_hours_check": {
                    "bill_gpu_milli_ms": b.gpu_raw,
                    "bill_gpu_hours": plain(b.gpu_hours),
                    "allocated_gpu_hours": plain(b.result.allocated_gpu_hours)
                    if b.result.allocated_gpu_hours is not None
                    else None,
                    "equal": b.gpu_hours == b.result.allocated_gpu_hours,
                },
                "chargeback": chargeback_json(cb),
            }
            for b, cb in bills
        ],
    }


# `suanli bill reconcile` and `roi` live in modules of their own; they register here, once the
# pieces they share exist.
from suanli.cli.bill_reconcile import reconcile_command  # noqa: E402
from suanli.cli.bill_roi import roi_command  # noqa: E402
from suanli.cli.bill_slurm import slurm_command  # noqa: E402

bill_app.command("reconcile")(reconcile_command)
bill_app.command("roi")(roi_command)
bill_app.command("slurm")(slurm_command)
