"""What the chaos runs check, and where they read it (``tests/chaos_harness.py`` starts the
servers and their load, and re-exports these): the store read directly, a monitor that checks
the GPU claims at every poll, the checks after each restart and at the end, and the task
processes left on the machine."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from suanli.backends.inventory import declared
from suanli.control.loop import ControlConfig
from suanli.control.metering import attempt_usage, recomputed_usage
from suanli.metering.prices import PriceBook, load_price_book
from suanli.metering.rating import rate
from suanli.metering.usage import UsageRecord, usage_records
from suanli.sim.engine import PolicySet
from suanli.store import Store, entries, open_store, read_usage
from suanli.store import jobs as js
from suanli.store.schema import attempts as attempts_table
from suanli.store.schema import gpu_claims, gpus, jobs

if TYPE_CHECKING:
    from chaos_harness import Serve

ROOT = Path(__file__).resolve().parents[1]
PRICES = ROOT / "examples" / "prices.yaml"
NODE = "chaos-node"
GPUS = 2
GPU_MODEL = "H100"
INTERVAL_S = 0.1
"""``suanli serve --interval``: seconds between scheduling passes."""
FAST_RECONCILE_S = 1.0
"""The reconciliation interval asked for, if ``suanli serve`` takes one."""
SLACK_S = 2.0
"""Beyond one reconciliation period: a pass, a poll, the time a pass takes."""
START_TIMEOUT_S = 60.0
TENANT = "lab"
HOLDING = ("admitted", "running", "stopping")


RECONCILE_S = FAST_RECONCILE_S
"""The reconciliation interval the servers run with (``suanli serve --reconcile-interval``)."""
STALL_S = 10.0 + RECONCILE_S + SLACK_S
"""The longest an attempt may stay ``admitted`` (waiting for GPUs to drain) or ``stopping``
(its grace, at most 2 s here, then the backend's SIGKILL backstop, 5 s after it) while a
server runs, with a reconciliation to spare."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def control_config() -> ControlConfig:
    """The cluster and price book of the servers, for recomputing their usage."""
    return ControlConfig(
        cluster=declared(GPUS, GPU_MODEL, node_name=NODE).cluster("local"),
        policy=PolicySet.parse("fifo+best-fit"),
        prices=load_price_book(PRICES),
    )


# ------------------------------------------------------------------------------ store reads


class Reader:
    """The store, opened directly (once the server has created it)."""

    def __init__(self, db: str) -> None:
        self.db = db
        self._store: Store | None = None
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.db)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def job(self, job_id: str) -> js.JobRecord | None:
        return js.get_job(self.store, job_id)

    def state(self, job_id: str) -> str | None:
        rec = self.job(job_id)
        return None if rec is None else rec.state

    def all_jobs(self) -> list[js.JobRecord]:
        return js.jobs_in(self.store, js.JOB_STATES)

    def ids(self) -> set[str]:
        with self.store.read() as conn:
            return {r[0] for r in conn.execute(sa.select(jobs.c.id))}

    def unfinished(self) -> int:
        with self.store.read() as conn:
            q = sa.select(sa.func.count()).where(jobs.c.state.not_in(list(js.FINAL_STATES)))
            return int(conn.execute(q).scalar_one())

    def unmetered(self) -> int:
        return len(js.unmetered_attempts(self.store))


# ------------------------------------------------------------------------------ the monitor


ClaimKey = tuple[str, int, int, str, int]  # job, attempt, task, node, GPU


@dataclass
class Stuck:
    """A difference between the claims and the live attempts, while it lasts."""

    kind: str  # "stuck claim" (no live attempt holds it) or "missing claim"
    key: ClaimKey
    seen: float  # time.monotonic() when first seen
    flagged: bool = False


def _expected_claims(live: Iterable[Any]) -> dict[ClaimKey, int]:
    want: dict[ClaimKey, int] = {}
    for job_id, attempt, state, detail, placement in live:
        if state == "stopping" and detail == "preempted":
            continue  # a preemption hands the GPUs over at once: no claims while it drains
        for t in json.loads(placement):
            if t["gpu_milli"] > 0:
                for g in t["gpus"]:
                    want[(job_id, int(attempt), int(t["task"]), t["node"], int(g))] = int(
                        t["gpu_milli"]
                    )
    return want


class Monitor(threading.Thread):
    """Checks the GPU claims at every poll (see the module docstring), whether a server runs
    or not; ``violations`` lists what broke, ``released`` how long each difference lasted."""

    def __init__(self, reader: Reader, serve: Serve, period: float = 0.1) -> None:
        super().__init__(name="chaos-monitor", daemon=True)
        self.reader = reader
        self.serve = serve
        self.period = period
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.violations: list[str] = []
        self.open: dict[tuple[str, ClaimKey], Stuck] = {}
        self.released: list[tuple[str, ClaimKey, float]] = []
        self.found = 0
        self.polls = 0
        self.errors: list[str] = []
        self.max_used = 0
        self.waiting: dict[tuple[str, int, str], float] = {}  # admitted/stopping: first seen
        self.stalled: set[tuple[str, int, str]] = set()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001 - the store may be missing yet; kept
                with self.lock:
                    self.errors.append(f"{type(e).__name__}: {e}")
            self.halt.wait(self.period)

    def poll(self) -> None:
        with self.reader.store.read() as conn:  # one snapshot
            rows = list(conn.execute(sa.select(gpu_claims.c.job_id, gpu_claims.c.attempt,
                gpu_claims.c.task, gpu_claims.c.node, gpu_claims.c.idx, gpu_claims.c.milli)))  # fmt: skip
            used = {(n, int(i)): int(m) for n, i, m in
                    conn.execute(sa.select(gpus.c.node, gpus.c.idx, gpus.c.used_milli))}  # fmt: skip
            live = list(conn.execute(sa.select(attempts_table.c.job_id,
                attempts_table.c.attempt, attempts_table.c.state, attempts_table.c.detail,
                attempts_table.c.placement).where(attempts_table.c.state.in_(HOLDING))))  # fmt: skip
        now = time.monotonic()
        have = {(j, int(a), int(t), n, int(i)): int(m) for j, a, t, n, i, m in rows}
        per_gpu: dict[tuple[str, int], int] = {}
        for (_, _, _, n, i), m in have.items():
            per_gpu[(n, i)] = per_gpu.get((n, i), 0) + m
        problems = []
        for g, m in used.items():
            if not per_gpu.get(g, 0) == m <= 1000:
                problems.append(f"GPU {g}: claims {per_gpu.get(g, 0)} != used_milli {m} "
                                f"or > 1000 (claims {sorted(have.items())})")  # fmt: skip
        for g in per_gpu.keys() - used.keys():
            problems.append(f"claims on an unknown GPU {g}")
        want = _expected_claims(live)
        current: dict[tuple[str, ClaimKey], None] = {}
        for k, m in have.items():
            if want.get(k) != m:
                current[("stuck claim", k)] = None
        for k in want.keys() - have.keys():
            current[("missing claim", k)] = None
        waiting = {(j, int(a), st) for j, a, st, _, _ in live if st in ("admitted", "stopping")}
        up = self.serve.up_since()
        with self.lock:
            self.polls += 1
            for w in list(self.waiting):
                if w not in waiting:
                    del self.waiting[w]
            for w in waiting:
                seen = self.waiting.setdefault(w, now)
                if up is not None and w not in self.stalled and now - max(seen, up) > STALL_S:
                    self.stalled.add(w)
                    what = "admitted and not started" if w[2] == "admitted" else "stopping"
                    self.violations.append(
                        f"attempt {w[1]} of job {w[0]} {what} for over {STALL_S:g} s of a "
                        "running server (its claims held, or its GPUs drained, for nothing)"
                    )
            self.max_used = max([self.max_used, *used.values()])
            self.violations.extend(problems)
            for key in list(self.open):
                if key not in current:
                    s = self.open.pop(key)
                    self.released.append((s.kind, s.key, now - s.seen))
            for key in current:
                if key not in self.open:
                    self.found += 1
                    self.open[key] = Stuck(key[0], key[1], now)
            for s in self.open.values():
                # The rule's clock runs from when it was seen or, if later, from when the
                # server now running had recovered (none can repair while down or starting).
                if (
                    up is not None
                    and not s.flagged
                    and now - max(s.seen, up) > RECONCILE_S + SLACK_S
                ):
                    s.flagged = True
                    self.violations.append(
                        f"{s.kind} {s.key} not repaired within one reconciliation period "
                        f"({RECONCILE_S:g} s + {SLACK_S:g} s) of a running server"
                    )

    def settle(self, timeout: float | None = None) -> None:
        """Wait (the server running) until no difference is open, at most one
        reconciliation period past the newest; a difference left then is a violation."""
        limit = RECONCILE_S + SLACK_S + 1 if timeout is None else timeout
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            self.poll()
            with self.lock:
                if not self.open:
                    return
            time.sleep(self.period)
        with self.lock:
            for s in self.open.values():
                if not s.flagged:
                    s.flagged = True
                    self.violations.append(f"{s.kind} {s.key} still there after {limit:g} s")

    def stop(self) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(timeout=10)

    def longest_release(self) -> float:
        return max((d for _, _, d in self.released), default=0.0)


# ------------------------------------------------------------------------------ the checks


def check_present(reader: Reader, acknowledged: Iterable[str]) -> list[str]:
    """Every acknowledged job is stored."""
    stored = reader.ids()
    return [f"acknowledged job {j} is not in the store" for j in acknowledged if j not in stored]


def check_jobs(reader: Reader, *, final: bool) -> list[str]:
    """No job or attempt ended otherwise than expected; with ``final``, every job has ended.
    Expected: ``succeeded``, or ``cancelled`` (or ``succeeded``, if it ended first) for a job
    whose cancel was asked; attempts end ``succeeded``, ``preempted`` or ``cancelled`` (a lost
    or failed attempt means a task was not adopted, or a crash broke a job)."""
    out = []
    with reader.store.read() as conn:
        recs = js.jobs_in(conn, js.JOB_STATES)
        by_job: dict[str, list[tuple[int, str, str | None, str | None]]] = {}
        q = sa.select(attempts_table.c.job_id, attempts_table.c.attempt, attempts_table.c.state,
                      attempts_table.c.outcome, attempts_table.c.detail)  # fmt: skip
        for j, a, st, outcome, detail in conn.execute(q):
            by_job.setdefault(j, []).append((int(a), st, outcome, detail))
    for rec in recs:
        ok = ("cancelled", "succeeded") if rec.cancel_requested else ("succeeded",)
        if rec.final and rec.state not in ok:
            out.append(f"job {rec.id} ({rec.name}) ended {rec.state}: {rec.reason}; attempts "
                       f"{sorted(by_job.get(rec.id, []))}")  # fmt: skip
        elif final and not rec.final:
            out.append(f"job {rec.id} ({rec.name}) has not ended: {rec.state} ({rec.reason})")
        for a, st, outcome, detail in by_job.get(rec.id, []):
            if st == "ended" and outcome not in ("succeeded", "preempted", "cancelled"):
                out.append(f"job {rec.id} ({rec.name}) attempt {a} ended {outcome}: {detail}")
    return out


def _metered_usage(conn: Any, config: ControlConfig) -> list[Any]:
    """The usage records of the attempts flagged metered, rebuilt from their rows."""
    models = {n.name: (n.gpu_model.name if n.gpu_model is not None else None)
              for n in config.cluster.nodes}  # fmt: skip
    recs = {r.id: r for r in js.jobs_in(conn, js.JOB_STATES)}
    q = sa.select(attempts_table).where(
        attempts_table.c.state == "ended",
        attempts_table.c.metered.is_(True),
        attempts_table.c.started_ms.is_not(None),
    )
    out: list[UsageRecord] = []
    for row in conn.execute(q):
        a = js.AttemptRecord(
            job_id=row.job_id, attempt=row.attempt, state=row.state,
            placement=json.loads(row.placement),
            handles=None if row.handles is None else json.loads(row.handles),
            admitted_ms=row.admitted_ms, started_ms=row.started_ms, ended_ms=row.ended_ms,
            outcome=row.outcome, exit_code=row.exit_code, detail=row.detail,
            metered=bool(row.metered),
        )  # fmt: skip
        rec = recs[a.job_id]
        out.extend(usage_records([attempt_usage(rec, a, config.cluster.name, models)],
                                 config.meter_interval_ms))  # fmt: skip
    return out


def _compare_ledger(got: list[Any], want: list[Any], charged: list[Any], book: PriceBook,
                    what: str) -> list[str]:  # fmt: skip
    out = []
    got = sorted(got, key=lambda r: r.key)
    want = sorted(want, key=lambda r: r.key)
    if got != want:
        g, w = {r.key: r for r in got}, {r.key: r for r in want}
        extra = sorted(g.keys() - w.keys())
        missing = sorted(w.keys() - g.keys())
        differ = sorted(k for k in g.keys() & w.keys() if g[k] != w[k])
        out.append(f"ledger usage != {what}: {len(extra)} extra {extra[:5]}, {len(missing)} "
                   f"missing {missing[:5]}, {len(differ)} differ {differ[:5]}")  # fmt: skip
    charges = sorted(rate(want, book), key=lambda c: c.key)
    charged = sorted(charged, key=lambda c: c.key)
    if charged != charges:
        total_got = sum((c.amount for c in charged), start=0)
        total_want = sum((c.amount for c in charges), start=0)
        out.append(f"ledger charges != rate({what}): {len(charged)} entries for {total_got}, "
                   f"{len(charges)} rated for {total_want}")  # fmt: skip
    return out


def check_ledger_snapshot(reader: Reader, config: ControlConfig) -> list[str]:
    """At one instant: the ledger's usage is exactly that of the attempts flagged metered
    (usage, charges and the flag are written in one transaction), and its charges the
    rating of that usage."""
    assert config.prices is not None
    with reader.store.read() as conn:
        want = _metered_usage(conn, config)
        got = list(read_usage(conn))
        charged = list(entries(conn))
    return _compare_ledger(got, want, charged, config.prices, "the metered attempts' usage")


def check_ledger(reader: Reader, config: ControlConfig) -> list[str]:
    """Once every attempt is metered: the ledger equals ``recomputed_usage`` (every ended,
    started attempt) and its charges are ``rate`` of that usage."""
    assert config.prices is not None
    want = list(recomputed_usage(reader.store, config))
    got = list(read_usage(reader.store))
    charged = list(entries(reader.store))
    return _compare_ledger(got, want, charged, config.prices, "recomputed_usage")


def wait_for(what: str, cond: Callable[[], bool], timeout: float, period: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(period)


def wait_final(reader: Reader, timeout: float) -> list[str]:
    """Wait until every job has ended and every ended attempt is metered; what did not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reader.unfinished() == 0 and reader.unmetered() == 0:
            return []
        time.sleep(0.1)
    left = [f"{r.id} ({r.name}) {r.state}: {r.reason}" for r in reader.all_jobs() if not r.final]
    return [f"not ended within {timeout} s: {len(left)} jobs {left[:10]}, "
            f"{reader.unmetered()} attempts unmetered"]  # fmt: skip


# ------------------------------------------------------------------------------ processes


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def task_shims(state: Path) -> list[int]:
    """The pids of this state directory's task supervisors (shims) still running."""
    runs = str(state / "runs") + "/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue
        if "suanli.backends.shim" in argv and any(a.startswith(runs) for a in argv):
            found.append(int(entry))
    return sorted(found)


def check_no_tasks_left(state: Path, timeout: float = 10.0) -> list[str]:
    """Once every job has ended, no task of theirs may still run (a shim outlives the server
    by design, but not its task's end)."""
    deadline = time.monotonic() + timeout
    while True:
        left = task_shims(state)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    out = []
    for pid in left:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                what = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out.append(f"a task still runs after every job ended: pid {pid}: {what}")
    return out


def end_tasks(state: Path) -> None:
    """SIGKILL what is left of this state directory's tasks: each shim's session (the shim
    and its task's processes), by pid."""
    for shim in task_shims(state):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and _session(int(entry)) == shim:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass


def check_runs(reader: Reader, state: Path) -> list[str]:
    """Every task that ran (its shim wrote ``pid``) belongs to an attempt the store records
    as started: otherwise a process ran on GPUs untracked, and unmetered."""
    from suanli.backends.base import job_dir_name

    out: list[str] = []
    runs = state / "runs"
    with reader.store.read() as conn:
        rows = conn.execute(sa.select(attempts_table.c.job_id, attempts_table.c.attempt,
                                      attempts_table.c.started_ms))  # fmt: skip
        started = {(job_dir_name(j), str(a)): s is not None for j, a, s in rows}
    if not runs.is_dir():
        return out
    for job_dir in sorted(p for p in runs.iterdir() if p.is_dir()):
        for attempt_dir in sorted(p for p in job_dir.iterdir() if p.is_dir()):
            for task_dir in sorted(p for p in attempt_dir.iterdir() if p.is_dir()):
                if not (task_dir / "pid").exists():
                    continue
                key = (job_dir.name, attempt_dir.name)
                if not started.get(key, False):
                    ran = "exited" if (task_dir / "exit.json").exists() else "started"
                    out.append(f"task {task_dir.relative_to(runs)} ran ({ran}) for an attempt "
                               f"the store has {'as never started' if key in started else 'not'}"
                               ": an untracked, unmetered process")  # fmt: skip
    return out
