"""Chaos: ``suanli serve`` killed with SIGKILL ``--kills`` times under load, restarted after
each kill, its invariants checked after every restart (``tests/chaos_harness.py``).

A real server (two declared H100s, a price book, preemption) gets a bounded load: ``--jobs``
jobs drawn with ``--seed`` (short and half-GPU jobs, gangs of two whole GPUs, spot jobs that
trap SIGTERM, high jobs that preempt them, long jobs cancelled once they run), submitted at
``--rate`` a second by a paced client that retries what the server does not acknowledge.
Each kill comes at a moment drawn uniformly from ``--window`` seconds after the server
answered (with ``--point-share``, that share of the kills are instead the server's own, at
a random crash point and count of ``suanli.control.crash``, or at the window's end if the
point is not reached by then). After each kill the server is restarted on the same state and
checked: every acknowledged job is stored, no job or attempt ended otherwise than expected
(nothing lost or failed: every task was adopted), and the ledger holds exactly the usage
and charges of the metered attempts; throughout, a monitor checks at every poll that the GPU
claims add up to each GPU's ``used_milli`` (never past 1000) and equal the live attempts'
shares, that every difference (a stuck claim) goes within one reconciliation period, and
that no attempt stays admitted or stopping for long (a claim held, or GPUs drained, for
nothing). At the end every job must have ended, the ledger must equal the usage recomputed
from the attempts and its charges the rating of that usage, no task may still run, and
every task that ran must belong to an attempt recorded as started.

Baseline, in the same run: the same jobs, the same rate, no kills. Printed: kills done,
restarts, acknowledged jobs, jobs finished, invariant violations (must be 0), stuck claims
found and how long until released, the time taken, and jobs finished per second with kills
against without. Exits 1 if any invariant was violated.

    PYTHONPATH=src python benchmarks/chaos.py --kills 50
    PYTHONPATH=src python benchmarks/chaos.py --kills 10 --db postgresql+psycopg://u@host/db
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the harness and its helpers live beside the tests

import chaos_harness as ch  # noqa: E402
from suanli.control.crash import POINTS  # noqa: E402

WEIGHTS = {"short": 60, "half": 16, "gang": 6, "spot": 8, "high": 5, "long-c": 5}
"""How often each kind of job is drawn."""


def workload(jobs: int, seed: int) -> list[dict[str, Any]]:
    """``jobs`` job specs, drawn with ``seed`` (the same for the baseline and the chaos)."""
    rng = random.Random(seed)
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    out = []
    for _ in range(jobs):
        kind = rng.choices(kinds, weights)[0]
        if kind == "short":
            out.append(ch.short(rng.choice(("normal", "spot"))))
        elif kind == "half":
            out.append(ch.half(round(rng.uniform(0.1, 0.4), 2)))
        elif kind == "gang":
            out.append(ch.gang(round(rng.uniform(0.2, 0.6), 2)))
        elif kind == "spot":
            out.append(ch.spot(round(rng.uniform(0.5, 1.5), 2), linger=0.2, grace=1.5))
        elif kind == "high":
            out.append(ch.high(0.2))
        else:
            out.append(ch.long(3.0, name="long-c"))  # cancelled once it runs
    return out


class Canceller(threading.Thread):
    """Cancels each acknowledged ``long-c`` job once the store says it runs."""

    def __init__(self, serve: ch.Serve, reader: ch.Reader, sub: ch.Submitter) -> None:
        super().__init__(name="chaos-canceller", daemon=True)
        self.api = ch.Api(serve)
        self.reader = reader
        self.sub = sub
        self.halt = threading.Event()
        self.done: set[str] = set()

    def run(self) -> None:
        while not self.halt.is_set():
            for job_id, name in list(self.sub.acknowledged):
                if name != "long-c" or job_id in self.done:
                    continue
                try:
                    rec = self.reader.job(job_id)
                except Exception:  # noqa: BLE001 - the store is busy: next time
                    continue
                if rec is None:
                    continue
                if rec.final or rec.cancel_requested:
                    self.done.add(job_id)
                elif rec.state == "running" and self.api.cancel(job_id):
                    self.done.add(job_id)
            self.halt.wait(0.2)
        self.api.close()


@dataclass
class Run:
    """What one run (the baseline, or the chaos) did and found."""

    kills: int = 0
    by_point: Counter[str] = field(default_factory=Counter)
    restarts: int = 0
    recover_s: list[float] = field(default_factory=list)
    acknowledged: int = 0
    unanswered: int = 0
    stored: int = 0
    finished: int = 0
    states: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    stuck_found: int = 0
    stuck_released: list[float] = field(default_factory=list)
    stalled: int = 0
    polls: int = 0
    seconds: float = 0.0
    aborted: str | None = None

    @property
    def per_s(self) -> float:
        return self.finished / self.seconds if self.seconds else 0.0


@contextmanager
def database(db: str | None, work: Path) -> Iterator[str]:
    """A fresh store: a SQLite file under ``work``, or a fresh schema on the PostgreSQL
    server ``db`` names (dropped afterwards)."""
    if db is None or db == "sqlite":
        yield str(work / "suanli.db")
        return
    from pg import fresh_schema

    with fresh_schema(db) as url:
        yield url


def run(specs: list[dict[str, Any]], db: str | None, args: argparse.Namespace, kills: int,
        deadline: float, label: str) -> Run:  # fmt: skip
    out = Run()
    rng = random.Random(args.seed + 1)
    config = ch.control_config()
    with tempfile.TemporaryDirectory(prefix=f"suanli-chaos-{label}-") as tmp, \
            database(db, Path(tmp)) as where:  # fmt: skip
        serve = ch.Serve(Path(tmp), where)
        reader = ch.Reader(where)
        monitor = ch.Monitor(reader, serve, period=0.2)
        stop = threading.Event()
        sub = ch.Submitter(serve, specs, args.rate, stop)
        canceller = Canceller(serve, reader, sub)
        t0 = time.monotonic()

        def draw() -> tuple[float, str | None]:
            """The next kill: when (seconds after the server answered) and by which point."""
            wait = rng.uniform(*args.window)
            if args.point_share and rng.random() < args.point_share:
                return wait, f"{rng.choice(list(POINTS))}:{rng.randint(1, 3)}"
            return wait, None

        seen: set[str] = set()

        def check(after: str) -> None:
            """The checks after a restart; each violation is kept once, with when it was
            first seen."""
            found = ch.check_present(reader, sub.ids()) + ch.check_jobs(reader, final=False)
            found += ch.check_ledger_snapshot(reader, config)
            for v in found:
                if v not in seen:
                    seen.add(v)
                    out.violations.append(f"{after}: {v}")

        def restart(point: str | None, k: int) -> bool:
            """Start a server (armed with ``point``); False if none would start."""
            for i in range(3):
                serve.start(crash_at=point if i == 0 else None)
                out.restarts += k > 0
                if serve.wait_up():
                    return True
                if point is not None and i == 0 and serve.proc is not None \
                        and serve.proc.returncode == -9:  # fmt: skip
                    return True  # its point came in the recovery: that is the next kill
                out.violations.append(
                    f"start after kill {k}: the server would not start (exit "
                    f"{serve.proc.returncode if serve.proc else None})\n{serve.tail(20)}"
                )
            return False

        try:
            nxt = draw() if kills else (0.0, None)
            if not restart(nxt[1], 0):
                raise SystemExit(f"the server did not start\n{serve.tail()}")
            monitor.start()
            t0 = time.monotonic()
            sub.start()
            canceller.start()
            for k in range(kills):
                if time.monotonic() > deadline:
                    out.aborted = f"--max-seconds reached after {k} kills"
                    break
                wait, point = nxt
                if point is not None:
                    rc = serve.wait_exit(wait)
                    point = point if rc == -9 else None
                else:
                    time.sleep(wait)
                if serve.alive():
                    serve.kill()
                out.kills += 1
                out.by_point[point.partition(":")[0] if point else "random moment"] += 1
                monitor.poll()  # the state the kill left
                died = time.monotonic()
                nxt = draw() if k + 1 < kills else (0.0, None)
                if not restart(nxt[1], k + 1):
                    out.aborted = f"the server would not start after kill {k + 1}"
                    break
                out.recover_s.append(time.monotonic() - died)
                check(f"after kill {k + 1}")
            if serve.crash_at is not None or not serve.alive():  # stopped early: a plain one
                serve.stop()
                if not restart(None, out.kills):
                    raise SystemExit(f"the server would not start\n{serve.tail()}")
            # No more kills: the rest of the submissions, then every job to its end.
            while sub.is_alive() and time.monotonic() < deadline + args.drain:
                sub.join(timeout=0.5)
            stop.set()
            sub.join(timeout=10)
            left = max(30.0, deadline + args.drain - time.monotonic())
            out.violations += ch.wait_final(reader, left)
            out.seconds = time.monotonic() - t0
            monitor.settle()
            check("at the end")
            out.violations += [v for v in ch.check_jobs(reader, final=True) if v not in seen]
            canceller.halt.set()
            serve.stop()
            monitor.stop()
            monitor.poll()
            out.violations += ch.check_ledger(reader, config)
            out.violations += ch.check_no_tasks_left(serve.state)
            out.violations += ch.check_runs(reader, serve.state)
            out.violations += [f"GPU claim left at the end: {k}" for _, k in monitor.open]
            out.violations += monitor.violations
            if sub.error is not None:
                out.violations.append(f"submitter: {sub.error}")
            recs = reader.all_jobs()
            out.stored = len(recs)
            out.finished = sum(1 for r in recs if r.final)
            out.states = Counter(r.state for r in recs)
            out.acknowledged = len(sub.acknowledged)
            out.unanswered = sub.unanswered
            out.stuck_found = monitor.found
            out.stuck_released = [d for _, _, d in monitor.released]
            out.stalled = len(monitor.stalled)
            out.polls = monitor.polls
            if out.violations:
                log = serve.tail(40, console=False)
                out.violations.append(f"(server log)\n{log}")
        finally:
            stop.set()
            canceller.halt.set()
            monitor.stop()
            serve.close()
            reader.close()
            ch.end_tasks(serve.state)
    return out


def report(label: str, r: Run, kills_asked: int | None = None) -> None:
    kills = ""
    if kills_asked is not None:
        points = ", ".join(f"{n} {p}" for p, n in sorted(r.by_point.items()))
        rec = (f"; back up in {statistics.mean(r.recover_s):.1f} s mean, "
               f"{max(r.recover_s):.1f} s max" if r.recover_s else "")  # fmt: skip
        kills = (f"\n  kills          {r.kills} of {kills_asked} ({points}); "
                 f"restarts {r.restarts}{rec}")  # fmt: skip
    released = (f"; released in {max(r.stuck_released):.2f} s at most, "
                f"{statistics.mean(r.stuck_released):.2f} s mean" if r.stuck_released else "")  # fmt: skip
    states = ", ".join(f"{n} {s}" for s, n in sorted(r.states.items()))
    print(
        f"{label}{kills}\n"
        f"  acknowledged   {r.acknowledged} jobs ({r.unanswered} tries unanswered); "
        f"{r.stored} stored (with those committed but not answered)\n"
        f"  finished       {r.finished} jobs ({states}) in {r.seconds:.1f} s: "
        f"{r.per_s:.2f} jobs/s\n"
        f"  violations     {len([v for v in r.violations if not v.startswith('(server log)')])}"
        f" (monitor: {r.polls} polls)\n"
        f"  stuck claims   {r.stuck_found} found, {len(r.stuck_released)} released{released}; "
        f"{r.stalled} attempts stalled (admitted or stopping > {ch.STALL_S:g} s)"
        + (f"\n  aborted        {r.aborted}" if r.aborted else "")
    )  # fmt: skip
    for v in r.violations[:20]:
        print(f"    ! {v}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--rate", type=float, default=20.0, help="submissions a second")
    p.add_argument("--jobs", type=int, default=600, help="jobs in all (the load's bound)")
    p.add_argument(
        "--window",
        type=float,
        nargs=2,
        default=(0.2, 3.0),
        metavar=("FROM", "TO"),
        help="a kill comes this many seconds after the server answered (uniform)",
    )
    p.add_argument(
        "--point-share",
        type=float,
        default=0.0,
        help="share of the kills made by a random crash point instead",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default="sqlite", help="sqlite (a file per run) or a PostgreSQL URL")
    p.add_argument("--max-seconds", type=float, default=600.0, help="bound on the whole run")
    p.add_argument("--drain", type=float, default=90.0,
                   help="after the kills, at most this long for the jobs to end")  # fmt: skip
    p.add_argument("--no-baseline", action="store_true")
    a = p.parse_args()
    if not 0 <= a.window[0] <= a.window[1]:
        p.error("--window: 0 <= FROM <= TO")
    t0 = time.monotonic()
    end = t0 + a.max_seconds
    specs = workload(a.jobs, a.seed)
    kinds = Counter(s["name"] for s in specs)
    print(f"chaos: {a.jobs} jobs ({', '.join(f'{n} {k}' for k, n in kinds.items())}) at "
          f"{a.rate:g}/s, {a.kills} kills {a.window[0]:g}-{a.window[1]:g} s after each start, "
          f"seed {a.seed}, {a.db}, reconciliation every {ch.RECONCILE_S:g} s")  # fmt: skip
    base = None
    if not a.no_baseline:
        # The baseline may take at most 40 % of the time.
        base = run(specs, a.db, a, 0, t0 + 0.4 * a.max_seconds - a.drain, "baseline")
        report("baseline (no kills)", base)
    # Kills stop in time for the drain to fit in --max-seconds.
    chaos = run(specs, a.db, a, a.kills, end - a.drain, "chaos")
    report("chaos", chaos, a.kills)
    took = time.monotonic() - t0
    bad = len([v for v in chaos.violations if not v.startswith("(server log)")])
    if base is not None:
        bad += len([v for v in base.violations if not v.startswith("(server log)")])
        ratio = chaos.per_s / base.per_s if base.per_s else float("nan")
        print(f"ratio  jobs finished/s with {chaos.kills} kills / without: {ratio:.2f}")
    print(f"time   {took:.1f} s in all; invariant violations: {bad} (must be 0)")
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
