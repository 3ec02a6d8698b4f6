"""Chaos harness: kill ``suanli serve`` with SIGKILL while it works, restart it, and check
that nothing it promised was broken. Shared by ``tests/cli/test_chaos.py`` (one kill per crash
point of ``suanli.control.crash``) and ``benchmarks/chaos.py`` (many kills at random moments).

- ``Serve``: a real ``python -m suanli.cli.main serve`` subprocess (two declared H100s, node
  ``chaos-node``, a price book, preemption with no minimum runtime, a pass every 0.1 s), with
  ``SUANLI_CRASH_AT`` in its environment when asked; started, awaited (``/healthz`` 200, or
  its death), killed, stopped.
- The workload: job specs (``gang``, ``half``, ``spot``, ``high``, ``long``, ``short``: every
  task runs ``TASK_PY`` or ``true``, as ``nobody`` when the tests run as root); ``Api``, a
  client that survives the server's deaths; ``Submitter``, a paced submitter that records
  the acknowledged (201) ids; ``Scenario``, the fixed sequence that meets every crash point
  (a whole-GPU gang of two tasks, half-GPU jobs, a job cancelled while it runs, a spot job
  that traps SIGTERM preempted by a high job, short jobs that end and are metered).
- ``Monitor``: polls the store (opened directly, ``suanli.store.open_store``) while the
  servers live and die. At every poll, in one snapshot: per GPU, the claims add up to its
  ``used_milli``, never more than 1000; the claims are exactly the GPU shares of the live
  attempts that hold their placement (admitted, running, stopping but not preempted).
  A difference (a claim no live attempt holds: a *stuck claim*; or an attempt missing its
  claims) must be gone within one reconciliation period (``RECONCILE_S`` plus ``SLACK_S``)
  of being seen or, if later, of a server having recovered (answering ``/healthz``); how
  long each lasted, from when it was first seen, is kept. No attempt may stay ``admitted``
  or ``stopping`` longer than ``STALL_S`` of a running server (a claim held, or GPUs
  drained, for nothing).
- Checks after a restart: ``check_present`` (every acknowledged job is stored),
  ``check_jobs`` (no job failed, was lost, or ended otherwise than expected: ``succeeded``,
  or ``cancelled`` for a job whose cancel was asked; no attempt lost or failed: the tasks
  running at a kill were adopted), ``check_ledger_snapshot`` (at any instant the ledger holds
  exactly the usage and charges of the attempts flagged metered), and at the end
  ``check_ledger`` (the ledger equals ``recomputed_usage`` and its charges ``rate`` of it),
  ``check_no_tasks_left`` (no task outlives its job) and ``check_runs`` (every task that ran
  belongs to an attempt recorded as started).
- Faults no crash point makes: ``inject_stale_claims`` (claims of ended attempts, for
  reconciliation to release), ``launch_without_handle`` (a launch cut before its handle
  file).

The servers reconcile every ``FAST_RECONCILE_S`` (``suanli serve --reconcile-interval``), so
that a stuck claim must go within about a second; a ``suanli serve`` without that option (an
option whose name has ``reconcil`` in it) reconciles at ``ControlConfig``'s default, 30 s,
and the checks wait for that instead.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
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
from tasks import TASK_PY

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


def _serve_options() -> set[str]:
    """The long options of ``suanli serve`` (from its signature, without running it)."""
    from suanli.cli.serve import serve_command

    try:
        hints = typing.get_type_hints(serve_command, include_extras=True)
    except Exception:  # noqa: BLE001 - cannot tell: assume no such option
        return set()
    found: set[str] = set()
    for hint in hints.values():
        for meta in getattr(hint, "__metadata__", ()):
            # typer.Option("--name", ...) in Annotated: the first name lands in ``default``.
            names = [getattr(meta, "default", None), *(getattr(meta, "param_decls", None) or ())]
            found.update(d for d in names if isinstance(d, str) and d.startswith("--"))
    return found


RECONCILE_OPTION = next((o for o in sorted(_serve_options()) if "reconcil" in o), None)
"""``suanli serve``'s option for the reconciliation interval (None if it has none)."""
RECONCILE_S = (
    FAST_RECONCILE_S
    if RECONCILE_OPTION is not None
    else float(ControlConfig.__dataclass_fields__["reconcile_interval_s"].default)  # type: ignore[arg-type]
)
"""The reconciliation interval the servers run with."""
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


# ------------------------------------------------------------------------------ the server


class Serve:
    """One state directory and database, and the ``suanli serve`` process on it (at most one
    at a time). ``start`` never waits; ``wait_up`` does. Every process it started ends, by
    ``kill``, ``stop`` or ``close``."""

    def __init__(self, work: Path, db: str | None = None) -> None:
        self.work = work
        self.state = work / "state"
        self.db = db if db is not None else str(work / "suanli.db")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.crash_at: str | None = None
        self.starts = 0
        self.started_at = 0.0  # time.monotonic() of the last start
        self.up_at: float | None = None  # when the running server first answered /healthz
        self.console = work / "serve-console.log"

    @property
    def log_file(self) -> Path:
        return self.state / "serve.log"

    def args(self) -> list[str]:
        args = [
            sys.executable, "-m", "suanli.cli.main", "serve", "--state-dir", str(self.state),
            "--db", self.db, "--port", str(self.port), "--gpus", str(GPUS),
            "--gpu-model", GPU_MODEL, "--node-name", NODE, "--interval", str(INTERVAL_S),
            "--prices", str(PRICES), "--preempt", "--min-runtime", "0",
        ]  # fmt: skip
        if RECONCILE_OPTION is not None:
            args += [RECONCILE_OPTION, str(FAST_RECONCILE_S)]
        return args

    def start(self, crash_at: str | None = None) -> None:
        assert self.proc is None or self.proc.poll() is not None, "a server is running"
        env = {k: v for k, v in os.environ.items() if k != "SUANLI_CRASH_AT"}
        if crash_at is not None:
            env["SUANLI_CRASH_AT"] = crash_at
        self.crash_at = crash_at
        self.up_at = None
        self.work.mkdir(parents=True, exist_ok=True)
        with open(self.console, "ab") as out:
            out.write(f"--- start {self.starts + 1}, crash at {crash_at}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(self.args(), stdout=out, stderr=out, cwd=ROOT, env=env)
        self.starts += 1
        self.started_at = time.monotonic()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def up_since(self) -> float | None:
        """Since when the running server has answered (recovered): None if none does."""
        return self.up_at if self.alive() else None

    def wait_up(self, timeout: float = START_TIMEOUT_S) -> bool:
        """True once ``/healthz`` answers 200; False if the process exited first."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    self.up_at = time.monotonic()
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not come up in {timeout} s\n{self.tail()}")
            time.sleep(0.05)

    def wait_exit(self, timeout: float) -> int | None:
        """The process's return code, or None if it still runs after ``timeout`` s."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int:
        """SIGKILL, by the harness; the return code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait()

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (running tasks keep running); the return code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()

    def token(self) -> str:
        return (self.state / "admin.token").read_text().strip()

    def tail(self, lines: int = 60, console: bool = True) -> str:
        """The ends of the server's log (and console), for failure messages."""
        out = []
        for path in (self.log_file, self.console) if console else (self.log_file,):
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {path} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(out)


# ------------------------------------------------------------------------------ the workload


def sleep_command(seconds: float) -> list[str]:
    return [TASK_PY, "-c", f"import time; time.sleep({seconds})"]


def trap_command(seconds: float, linger: float) -> list[str]:
    """Sleep ``seconds``; on SIGTERM, go on ``linger`` seconds more, then exit 0."""
    code = (
        "import signal, sys, time\n"
        f"def stop(*_):\n    time.sleep({linger})\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"time.sleep({seconds})\n"
    )
    return [TASK_PY, "-c", code]


def _spec(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    # Small CPU and memory requests: only the GPUs are scarce.
    return {"name": name, "command": command, "tenant": TENANT, "cpu": 0.1, "memory": "64M",
            "grace": 1, **extra}  # fmt: skip


def gang(seconds: float) -> dict[str, Any]:
    """Two tasks of one whole GPU each, started together."""
    return _spec("gang", sleep_command(seconds), tasks=2, gpus=1)


def half(seconds: float) -> dict[str, Any]:
    return _spec("half", sleep_command(seconds), gpus=0.5)


def short(priority_class: str = "spot") -> dict[str, Any]:
    """A half-GPU job that ends at once."""
    return _spec("short", ["true"], gpus=0.5, priority_class=priority_class)


def spot(seconds: float, gpus: int = 1, linger: float = 0.3, grace: float = 2) -> dict[str, Any]:
    """A spot job that traps SIGTERM and lingers ``linger`` s (inside its grace)."""
    return _spec("spot", trap_command(seconds, linger), gpus=gpus, priority_class="spot",
                 grace=grace)  # fmt: skip


def high(seconds: float, gpus: int = 1) -> dict[str, Any]:
    return _spec("high", sleep_command(seconds), gpus=gpus, priority_class="high")


def long(seconds: float, name: str = "long") -> dict[str, Any]:
    return _spec(name, sleep_command(seconds), gpus=1)


class Api:
    """The API, through the server's deaths: every call answers (None/False when the server
    did not), none raises for a connection error."""

    def __init__(self, serve: Serve, timeout: float = 3.0) -> None:
        self.serve = serve
        self.timeout = timeout
        self._client: httpx.Client | None = None

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.serve.token()}"}
            self._client = httpx.Client(base_url=self.serve.url, headers=headers,
                                        timeout=self.timeout)  # fmt: skip
        return self._client

    def submit(self, spec: dict[str, Any]) -> str | None:
        """The id if the server acknowledged (201) the submission, else None."""
        try:
            r = self.client.post("/v1/jobs", json=spec)
        except (httpx.HTTPError, OSError):
            return None
        if r.status_code == 201:
            return str(r.json()["id"])
        if r.status_code not in (429, 500, 502, 503):
            raise AssertionError(f"submission refused: {r.status_code} {r.text}")
        return None

    def submit_until(self, spec: dict[str, Any], deadline: float, pace: float = 0.05) -> str:
        while True:
            got = self.submit(spec)
            if got is not None:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"no submission of {spec['name']} acknowledged in time")
            time.sleep(pace)

    def cancel(self, job_id: str) -> bool:
        try:
            r = self.client.post(f"/v1/jobs/{job_id}/cancel")
        except (httpx.HTTPError, OSError):
            return False
        return r.status_code == 202

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class Submitter(threading.Thread):
    """Submits ``specs`` in turn, ``rate`` a second (paced), each until the server
    acknowledges it (a try the server does not answer is not acknowledged: the next try is
    a new submission). ``acknowledged``: (id, spec name) of each 201, in order."""

    def __init__(self, serve: Serve, specs: Iterable[dict[str, Any]], rate: float,
                 stop: threading.Event | None = None) -> None:  # fmt: skip
        super().__init__(name="chaos-submitter", daemon=True)
        self.api = Api(serve, timeout=2.0)
        self.specs = iter(specs)
        self.gap = 1.0 / rate
        self.stop_event = stop or threading.Event()
        self.acknowledged: list[tuple[str, str]] = []
        self.unanswered = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            nxt = time.monotonic()
            for spec in self.specs:
                while not self.stop_event.is_set():
                    nxt = max(nxt + self.gap, time.monotonic() - self.gap)
                    got = self.api.submit(spec)
                    if got is not None:
                        self.acknowledged.append((got, spec["name"]))
                    else:
                        self.unanswered += 1
                    pause = nxt - time.monotonic()
                    if pause > 0:
                        self.stop_event.wait(pause)
                    if got is not None:
                        break
                if self.stop_event.is_set():
                    return
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.api.close()

    def ids(self) -> list[str]:
        return [i for i, _ in self.acknowledged]


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


# ------------------------------------------------------------------------------ the scenario


class Scenario(threading.Thread):
    """The fixed sequence of the crash tests; it rides out the server's deaths (every call is
    retried until ``timeout``). ``ids``: role -> acknowledged ids; ``cancelled``: the ids it
    asked to cancel; ``error``: what went wrong, if anything; ``step``: where it is."""

    def __init__(self, serve: Serve, reader: Reader, timeout: float = 120.0) -> None:
        super().__init__(name="chaos-scenario", daemon=True)
        self.serve = serve
        self.reader = reader
        self.timeout = timeout
        self.ids: dict[str, list[str]] = {}
        self.cancelled: list[str] = []
        self.error: BaseException | None = None
        self.step = "not started"
        self.deadline = 0.0

    def acknowledged(self) -> list[str]:
        return [j for ids in self.ids.values() for j in ids]

    def _submit(self, role: str, spec: dict[str, Any]) -> str:
        self.step = f"submitting {role}"
        job_id = self.api.submit_until(spec, self.deadline)
        self.ids.setdefault(role, []).append(job_id)
        return job_id

    def _until(self, what: str, cond: Callable[[], bool]) -> None:
        self.step = f"waiting for {what}"
        wait_for(what, cond, max(0.0, self.deadline - time.monotonic()))

    def _state(self, job_id: str) -> str | None:
        try:
            return self.reader.state(job_id)
        except Exception:  # noqa: BLE001 - the store may be busy: not yet
            return None

    def run(self) -> None:
        self.api = Api(self.serve)
        self.deadline = time.monotonic() + self.timeout
        try:
            self._run()
            self.step = "done"
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.api.close()

    def _run(self) -> None:
        # Both GPUs for a gang of two tasks (launch-partial: between its tasks).
        self._submit("gang", gang(0.4))
        # Four half-GPU jobs fill the two GPUs after it.
        for _ in range(4):
            self._submit("half", half(0.2))
        # A normal job that will be cancelled while it runs (cancel-sent).
        cancel_me = self._submit("long", long(30))
        self._until("the long job to run", lambda: self._state(cancel_me) == "running")
        # A spot job on the other GPU, trapping SIGTERM (preempt-grace) ...
        victim = self._submit("spot", spot(1.0, gpus=1, linger=0.3, grace=2))
        self._until("the spot job to run", lambda: self._state(victim) == "running")
        # ... preempted by a high job (it started last: the cheapest victim).
        p = self._submit("high", high(0.3))
        self._until("the preemption", lambda: self._state(p) not in (None, "pending")
                    or self._state(victim) != "running")  # fmt: skip
        self.step = "cancelling the long job"
        while not self.api.cancel(cancel_me):
            if time.monotonic() > self.deadline:
                raise AssertionError("the cancel was never accepted")
            time.sleep(0.05)
        self.cancelled.append(cancel_me)


# ------------------------------------------------------------------------------ faults


def attempt_counts(reader: Reader) -> dict[str, int]:
    """Attempts by state, and ``room``: the milli-GPU free on the freest GPU (one snapshot)."""
    with reader.store.read() as conn:
        q = sa.select(attempts_table.c.state, sa.func.count()).group_by(attempts_table.c.state)
        out = {st: int(n) for st, n in conn.execute(q)}
        used = [int(m) for (m,) in conn.execute(sa.select(gpus.c.used_milli))]
    out["room"] = max((1000 - m for m in used), default=0)
    return out


def inject_stale_claims(reader: Reader, n: int) -> list[ClaimKey]:
    """With the server down: claim 1 milli-GPU for each of ``n`` ended attempts, as a crash
    of an older version, or a hand edit, could leave them (nothing holds them: stuck
    claims, for reconciliation to release). Returns the claims made (fewer if there were
    fewer ended attempts, or no room on the GPUs)."""
    made: list[ClaimKey] = []
    with reader.store.begin() as conn:
        ended = list(conn.execute(
            sa.select(attempts_table.c.job_id, attempts_table.c.attempt)
            .where(attempts_table.c.state == "ended").order_by(attempts_table.c.id).limit(n)
        ))  # fmt: skip
        room = {(node, int(i)): 1000 - int(m) for node, i, m in
                conn.execute(sa.select(gpus.c.node, gpus.c.idx, gpus.c.used_milli))}  # fmt: skip
        for job_id, attempt in ended:
            free = [g for g, r in sorted(room.items()) if r >= 1]
            if not free:
                break
            node, idx = free[0]
            conn.execute(sa.insert(gpu_claims).values(job_id=job_id, attempt=attempt, task=0,
                                                      node=node, idx=idx, milli=1))  # fmt: skip
            room[(node, idx)] -= 1
            made.append((job_id, int(attempt), 0, node, idx))
    return made


def reconciled_events(reader: Reader, job_ids: Iterable[str]) -> dict[str, list[str]]:
    return {j: [e.detail for e in js.job_history(reader.store, j) if e.kind == "reconciled"]
            for j in job_ids}  # fmt: skip


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


def launch_without_handle(serve: Serve, reader: Reader) -> tuple[str, int]:
    """With the server down, after it died with an attempt admitted and not launched
    (``admit-written``): start that attempt's first task as the server's backend would
    (``LocalBackend.launch`` on ``STATE/runs``, as the tenant's user), then remove its handle
    file. That is the state a SIGKILL inside ``LocalBackend.launch`` leaves, after the shim
    started and before the handle file was written (no crash point lies there; the random
    kills of ``benchmarks/chaos.py`` land there). Returns (job, attempt)."""
    from suanli.backends.base import Launch
    from suanli.backends.local import LocalBackend
    from suanli.backends.shim import HANDLE_FILE
    from suanli.control.identity import RunAs

    admitted = [
        a for a in js.live_attempts(reader.store) if a.state == "admitted" and not a.handles
    ]
    assert admitted, "no attempt admitted and not launched"
    a = admitted[0]
    rec = js.get_job(reader.store, a.job_id)
    assert rec is not None
    t = a.placement[0]
    fractional = 0 < t["gpu_milli"] < 1000
    backend = LocalBackend(serve.state / "runs")
    try:
        handle = backend.launch(Launch(
            job_id=a.job_id, attempt=a.attempt, task=0, command=tuple(rec.spec["command"]),
            gpus=tuple(t["gpus"]), gpu_milli=t["gpu_milli"] if fractional else 0,
            gpu_memory_mib=t["gpu_memory_mib"] if fractional else 0,
            stop_signal=rec.spec["stop_signal"], grace_s=rec.spec["grace"],
            run_as=RunAs.of(None)(rec.tenant),
        ))  # fmt: skip
    finally:
        backend.close()
    (Path(handle.run_dir) / HANDLE_FILE).unlink()
    return a.job_id, a.attempt


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
