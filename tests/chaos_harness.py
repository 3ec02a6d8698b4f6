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

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from chaos_checks import (  # noqa: F401 - re-exported for the test and the benchmark
    FAST_RECONCILE_S,
    GPU_MODEL,
    GPUS,
    HOLDING,
    INTERVAL_S,
    NODE,
    PRICES,
    RECONCILE_S,
    ROOT,
    SLACK_S,
    STALL_S,
    START_TIMEOUT_S,
    TENANT,
    ClaimKey,
    Monitor,
    Reader,
    Stuck,
    _compare_ledger,
    _expected_claims,
    _metered_usage,
    _session,
    check_jobs,
    check_ledger,
    check_ledger_snapshot,
    check_no_tasks_left,
    check_present,
    check_runs,
    control_config,
    end_tasks,
    free_port,
    task_shims,
    wait_final,
    wait_for,
)
from suanli.store import jobs as js
from suanli.store.schema import attempts as attempts_table
from suanli.store.schema import gpu_claims, gpus
from tasks import TASK_PY

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
        args += ["--reconcile-interval", str(RECONCILE_S)]
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
