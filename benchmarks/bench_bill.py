"""How long ``suanli bill`` takes on the Philly trace, stage by stage.

Simulates Philly under ``fifo+best-fit`` once into a temporary directory (or reuses an output
directory given on the command line), then bills it in this process into a fresh SQLite
ledger with ``examples/prices.yaml`` and prints the wall time of each stage (read, meter,
rate, check, ledger write, report) and the total, then the GPU-hours check. The target is a
total under 10 s on the 2-core development machine (docs/billing.md has the figures).

The machine is shared, so each run also times a baseline just before the bill: a plain
``csv.reader`` pass over the same attempts file, repeated ``BASELINE_PASSES`` times. The
ratio of the bill to it says how the bill's speed compares across runs whatever the load.

    PYTHONPATH=src python benchmarks/bench_bill.py                 # simulate, then bill
    PYTHONPATH=src python benchmarks/bench_bill.py /tmp/philly     # bill an existing output
    PYTHONPATH=src python benchmarks/bench_bill.py /tmp/philly --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from suanli.cli.bill import STAGES, meter_result, post_bill
from suanli.cli.main import app
from suanli.metering.prices import load_price_book
from suanli.metering.report import chargeback, chargeback_table
from suanli.metering.simout import DEFAULT_EPOCH, load_output, parse_epoch
from suanli.store import open_store

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 10.0
BASELINE_PASSES = 10


def simulate_philly(out: Path) -> float:
    """Simulate Philly under fifo+best-fit into ``out``; the wall seconds it took."""
    t0 = time.perf_counter()
    args = ["simulate", "--trace", "philly", "-p", "fifo+best-fit", "-o", str(out), "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()):  # the results table
        try:
            app(args, prog_name="suanli", standalone_mode=False)
        except SystemExit as e:  # the app's group ends with sys.exit(0)
            if e.code not in (0, None):
                raise
    return time.perf_counter() - t0


def baseline(directory: Path) -> float:
    """Seconds for ``BASELINE_PASSES`` plain ``csv.reader`` passes over the attempts files."""
    t0 = time.perf_counter()
    for result in load_output(directory).results:
        for _ in range(BASELINE_PASSES):
            with result.attempts_csv.open(newline="", encoding="utf-8") as f:
                for _row in csv.reader(f):
                    pass
    return time.perf_counter() - t0


def bill_once(directory: Path, prices: Path, ledger: Path) -> dict[str, float]:
    """Bill every result of ``directory`` into a fresh ``ledger``; seconds per stage."""
    seconds = dict.fromkeys(STAGES, 0.0)
    t0 = time.perf_counter()
    output = load_output(directory)
    book = load_price_book(prices)
    epoch_ms = parse_epoch(DEFAULT_EPOCH)
    seconds["read"] += time.perf_counter() - t0
    store = open_store(ledger)
    try:
        for result in output.results:
            bill = meter_result(result, book, epoch_ms)
            post_bill(store, bill, datetime.now(UTC))
            t1 = time.perf_counter()
            table = chargeback_table(chargeback(bill.tally, ("queue",)))
            Console(file=io.StringIO(), width=200).print(table)
            bill.seconds["report"] = time.perf_counter() - t1
            for stage, s in bill.seconds.items():
                seconds[stage] += s
            print(
                f"{result.policy}: {len(bill.attempts):,} attempts, {len(bill.records):,} "
                f"usage records, {len(bill.charges):,} charges; GPU-hours: bill "
                f"{bill.gpu_hours} vs simulator {result.allocated_gpu_hours}: "
                f"{'equal' if bill.gpu_hours == result.allocated_gpu_hours else 'DIFFERENT'}"
            )
    finally:
        store.close()
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", nargs="?", type=Path, help="simulation output directory")
    p.add_argument("--prices", type=Path, default=ROOT / "examples" / "prices.yaml")
    p.add_argument("--repeat", type=int, default=1, help="bills, each into a fresh ledger")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bill-") as tmp:
        directory = args.directory
        if directory is None:
            directory = Path(tmp) / "philly"
            print(f"simulating philly (fifo+best-fit) into {directory} ...")
            print(f"simulate: {simulate_philly(directory):.2f} s")
        for k in range(args.repeat):
            ledger = Path(tmp) / f"ledger-{k}.db"
            base = baseline(directory)
            t0 = time.perf_counter()
            seconds = bill_once(directory, args.prices, ledger)
            total = time.perf_counter() - t0
            stages = "  ".join(f"{s} {seconds[s]:.2f}" for s in STAGES)
            verdict = "under" if total < TARGET_S else "OVER"
            print(
                f"run {k + 1}: {stages}  total {total:.2f} s ({verdict} the {TARGET_S:g} s "
                f"target); baseline {base:.2f} s, bill/baseline {total / base:.1f}"
            )


if __name__ == "__main__":
    main()
