"""Chaos: ``suanli serve`` killed by itself (SIGKILL) at each crash point, then restarted.

For every point of ``suanli.control.crash.POINTS``, a real server (``tests/chaos_harness.py``)
runs with ``SUANLI_CRASH_AT=<point>`` under the crash scenario (a gang of two whole-GPU tasks,
half-GPU jobs, a job cancelled while it runs, a spot job that traps SIGTERM preempted by a
high job, and a paced stream of short jobs that end and are metered). The point must be
reached: the server dies of SIGKILL (return code -9) while the harness sends it nothing.
A server is then started on the same state without the variable, and:

- every acknowledged submission is in the store;
- at every poll, before and after the restart, per GPU the claims add up to its
  ``used_milli`` and never pass 1000, and the claims are exactly those of the live attempts
  that hold their GPUs; a difference (a stuck claim) is gone within one reconciliation
  period;
- no attempt stays ``admitted`` (claims held) or ``stopping`` (GPUs drained) for longer
  than a grace period, the backend's backstop and a reconciliation;
- every job ends within a deadline, ``succeeded`` (``cancelled`` for the one cancelled), no
  attempt is lost or failed (the tasks running at the crash were adopted);
- the ledger holds the usage ``recomputed_usage`` makes from the attempts, and the charges
  ``rate`` makes of it;
- no task runs once every job has ended, and every task that ran belongs to an attempt the
  store records as started (none ran untracked, unmetered).

Two points need a recovery with something to recover, so the server is first killed by the
harness while tasks run: ``recover-adopted`` (it is in every recovery), and
``reconcile-partial``, which also needs something to repair: while the server is down, two
stuck claims (claims of ended attempts, as an older version or a hand edit could leave) are
written; reconciliation releases the first and the server dies before the second.

All points on SQLite; two on PostgreSQL. Two more cases are kills the points above do not
reach, each a defect the random kills of ``benchmarks/chaos.py`` found: a kill inside
``LocalBackend.launch`` (after the shim started, before the handle file; made by hand from
``admit-written``), where the shim is now found by its command line and adopted, and
``exit-unrecorded`` met in the preemption of an attempt not launched yet, whose attempt
recovery and reconciliation now end.

The cases run ``WORKERS`` at a time (a module fixture starts every selected case at once and
each test waits for its own): most of a case is waiting for a server to start or a task to
sleep, and one after the other they would take minutes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

import chaos_harness as ch
from pg import (  # noqa: F401  (postgres_server: a fixture)
    BACKENDS,
    ENV_URL,
    NOT_FOUND,
    fresh_schema,
    postgres_server,
    server_binaries,
)
from suanli.control.crash import POINTS
from suanli.store import jobs as js

PRE_KILL = ("recover-adopted", "reconcile-partial")
"""Points reached only in a recovery with work to do: the harness kills the server first."""
STALE_CLAIMS = 2
CRASH_TIMEOUT_S = 60.0
FINAL_TIMEOUT_S = 60.0
STALL_TIMEOUT_S = 20.0
SHORT_JOBS = 12
SHORT_RATE = 8.0
PG_POINTS = ("launch-partial", "meter-inside")
WORKERS = 3
"""Cases at once."""


def _prekill_ready(reader: ch.Reader) -> bool:
    """Tasks running to adopt, two ended attempts (to claim for), room on a GPU."""
    try:
        n = ch.attempt_counts(reader)
    except Exception:  # noqa: BLE001 - not created yet
        return False
    return n.get("running", 0) >= 1 and n.get("ended", 0) >= STALE_CLAIMS and n["room"] >= 1


def crash_and_check(work: Path, db: str, point: str, fault: str = "") -> None:
    """Kill the server at ``point``; with ``fault``, change what the kill left (see
    ``FAULTS``) before the restart; then check (see the module docstring)."""
    serve = ch.Serve(work, db)
    reader = ch.Reader(db)
    monitor = ch.Monitor(reader, serve)
    stop = threading.Event()
    scenario = ch.Scenario(serve, reader)
    # Spot short jobs (they never preempt the scenario's); with a fault, normal ones, so that
    # nothing preempts the attempt the fault is made on before the restart launches it.
    short_class = "normal" if fault else "spot"
    submitter = ch.Submitter(serve, (ch.short(short_class) for _ in range(SHORT_JOBS)),
                             SHORT_RATE, stop)  # fmt: skip
    problems: list[str] = []
    injected: list[ch.ClaimKey] = []
    try:
        if point in PRE_KILL:
            serve.start()
            assert serve.wait_up(), f"the server did not start\n{serve.tail()}"
            monitor.start()
            scenario.start()
            submitter.start()
            for _ in range(5):
                ch.wait_for("running tasks and ended attempts", lambda: _prekill_ready(reader),
                            CRASH_TIMEOUT_S)  # fmt: skip
                assert serve.kill() == -9
                if point != "reconcile-partial":
                    break
                injected = ch.inject_stale_claims(reader, STALE_CLAIMS)
                if len(injected) == STALE_CLAIMS:
                    break
                assert not injected, "half an injection"  # all-or-nothing: one transaction
                serve.start()  # no room on the GPUs at the kill: again
                assert serve.wait_up(), f"the server did not restart\n{serve.tail()}"
            assert point != "reconcile-partial" or len(injected) == STALE_CLAIMS
            serve.start(crash_at=point)
        else:
            serve.start(crash_at=point)
            assert serve.wait_up(), (f"the server died at start with {point}\n"
                                     f"{serve.tail()}")  # fmt: skip
            monitor.start()
            scenario.start()
            submitter.start()
        rc = serve.wait_exit(CRASH_TIMEOUT_S)
        assert rc is not None, (
            f"crash point {point} not reached in {CRASH_TIMEOUT_S} s (scenario: {scenario.step}, "
            f"{len(submitter.acknowledged)} short jobs acknowledged)\n{serve.tail()}"
        )
        assert rc == -9, f"the server exited {rc}, not by SIGKILL at {point}\n{serve.tail()}"
        died_at = time.monotonic()
        monitor.poll()  # the state the crash left, as it is
        if fault == "launch-without-handle":
            ch.launch_without_handle(serve, reader)
        else:
            assert not fault, f"unknown fault {fault!r}"
        serve.start()
        assert serve.wait_up(), f"the server did not restart after {point}\n{serve.tail()}"
        restarted_in = time.monotonic() - died_at
        problems += ch.check_present(reader, scenario.acknowledged() + submitter.ids())
        scenario.join(timeout=ch.START_TIMEOUT_S)
        assert scenario.error is None, (
            f"scenario ({scenario.step}): {scenario.error}\n{serve.tail()}"
        )
        submitter.join(timeout=ch.START_TIMEOUT_S)
        assert submitter.error is None, f"submitter: {submitter.error}"
        problems += ch.check_present(reader, scenario.acknowledged() + submitter.ids())
        problems += ch.wait_final(reader, FINAL_TIMEOUT_S)
        monitor.settle()
        problems += ch.check_jobs(reader, final=True)
        problems += ch.check_ledger_snapshot(reader, ch.control_config())
        if injected:
            events = ch.reconciled_events(reader, {k[0] for k in injected})
            released = [k for k in injected if any(f"attempt {k[1]}" in e for e in events[k[0]])]
            if len(released) != len(injected):
                problems.append(f"stale claims {injected} without their reconciled events: "
                                f"{events}")  # fmt: skip
        rc = serve.stop()
        assert rc in (0, -15), f"the server did not stop cleanly ({rc})\n{serve.tail()}"
        monitor.stop()
        monitor.poll()
        problems += ch.check_ledger(reader, ch.control_config())
        problems += ch.check_no_tasks_left(serve.state)
        problems += ch.check_runs(reader, serve.state)
        assert monitor.max_used <= 1000
        problems += [f"GPU claims left at the end: {k}" for _, k in monitor.open]
        problems += monitor.violations
        for role in ("gang", "half", "long", "spot", "high"):
            assert scenario.ids.get(role), f"the scenario submitted no {role} job"
        assert not problems, (
            f"after a crash at {point} (restart took {restarted_in:.1f} s):\n"
            + "\n".join(problems)
            + f"\n{serve.tail()}"
        )
    finally:
        stop.set()
        monitor.stop()
        serve.close()
        reader.close()
        ch.end_tasks(serve.state)


def preempt_before_launch_and_check(work: Path, db: str, point: str) -> None:
    """The server dies at ``exit-unrecorded`` as it preempts an attempt that was admitted but
    not launched yet: the preemption is written (the victim ``stopping``, ``preempted``, its
    claims released), its end is not. The sequence: a spot job (it traps SIGTERM and lingers
    1 s) and a normal job run on the two GPUs; a third job (normal) preempts the spot job;
    a high job comes; once the spot job's first attempt (1st end) and the normal job (2nd)
    have ended, one pass admits the spot job again, FIFO, and the high job preempts it there,
    before its launch (3rd: ``exit-unrecorded:3``). After the restart the two long jobs are
    cancelled; every job must end (the high one ``succeeded``) and nothing may stay claimed."""
    serve = ch.Serve(work, db)
    reader = ch.Reader(db)
    monitor = ch.Monitor(reader, serve)
    api = ch.Api(serve)
    problems: list[str] = []
    try:
        serve.start(crash_at=point)
        assert serve.wait_up(), f"the server did not start\n{serve.tail()}"
        monitor.start()
        deadline = time.monotonic() + CRASH_TIMEOUT_S
        victim = api.submit_until(ch.spot(30, gpus=1, linger=1.0, grace=4), deadline)
        other = api.submit_until(ch.long(30), deadline)
        ch.wait_for("the spot and the normal job to run",
                    lambda: {reader.state(victim), reader.state(other)} == {"running"},
                    CRASH_TIMEOUT_S)  # fmt: skip
        third = api.submit_until(ch.long(0.5, name="normal"), deadline)
        ch.wait_for("the third job's admission", lambda: reader.state(third) != "pending",
                    CRASH_TIMEOUT_S)  # fmt: skip
        api.submit_until(ch.high(0.3), deadline)
        rc = serve.wait_exit(CRASH_TIMEOUT_S)
        assert rc == -9, f"no crash at {point} ({rc})\n{serve.tail()}"
        live = js.live_attempts(reader.store)
        assert any(a.state == "stopping" and a.detail == "preempted" and not a.handles
                   for a in live), (
            f"the crash did not come in the preemption of an attempt not launched: {live}"
        )  # fmt: skip
        monitor.poll()
        serve.start()
        assert serve.wait_up(), f"the server did not restart\n{serve.tail()}"
        for job_id in (other, victim):
            ch.wait_for(f"the cancel of {job_id}", partial(api.cancel, job_id), 10)
        problems += ch.wait_final(reader, STALL_TIMEOUT_S)
        monitor.settle()
        problems += ch.check_jobs(reader, final=True)
        problems += ch.check_ledger_snapshot(reader, ch.control_config())
        serve.stop()
        monitor.stop()
        monitor.poll()
        problems += ch.check_ledger(reader, ch.control_config())
        problems += ch.check_no_tasks_left(serve.state)
        problems += [f"GPU claims left at the end: {k}" for _, k in monitor.open]
        left = [f"{a.job_id}/{a.attempt} {a.state} ({a.detail})"
                for a in js.live_attempts(reader.store)]  # fmt: skip
        problems += [f"attempts still live at the end: {left}"] if left else []
        problems += [f"GPU claims at the end: {c}" for c in [js.claims(reader.store)] if c]
        problems += monitor.violations
        assert not problems, (
            f"after a crash at {point} in a preemption before the launch:\n"
            + "\n".join(problems)
            + f"\n{serve.tail()}"
        )
    finally:
        api.close()
        monitor.stop()
        serve.close()
        reader.close()
        ch.end_tasks(serve.state)


CASES = [pytest.param(b, p, "", id=f"{b}-{p}")
         for b, ps in (("sqlite", POINTS), ("postgresql", PG_POINTS)) for p in ps]  # fmt: skip
FAULTS = [pytest.param("sqlite", "admit-written", "launch-without-handle",
                       id="sqlite-launch-without-handle")]  # fmt: skip
"""Kills where no crash point is: made by hand from a crash point's state (see
``test_a_kill_inside_a_launch_fails_no_job``)."""
PREEMPT_BEFORE_LAUNCH = [pytest.param("sqlite", "exit-unrecorded:3", "preempt-before-launch",
                                      id="sqlite-preempt-before-launch")]  # fmt: skip
"""A crash point met in a rarer place (see ``preempt_before_launch_and_check``)."""


class Runs:
    """The selected cases, run ``WORKERS`` at a time in threads (most of a case is waiting:
    for a server to start, for tasks to sleep), each test waiting for its own."""

    def __init__(self, base: Path, cases: list[tuple[str, str, str]], pg_url: str | None) -> None:
        self.base = base
        self.pg_url = pg_url
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="chaos-case")
        self.futures: dict[tuple[str, str, str], Future[float]] = {
            case: self.pool.submit(self._run, *case) for case in cases
        }

    def _run(self, backend: str, point: str, fault: str) -> float:
        t0 = time.monotonic()
        work = self.base / f"{backend}-{fault or point}"
        check = preempt_before_launch_and_check if fault == "preempt-before-launch" else None
        if backend == "sqlite":
            where = str(work / "suanli.db")
            check(work, where, point) if check else crash_and_check(work, where, point, fault)
        else:
            assert self.pg_url is not None
            with fresh_schema(self.pg_url) as where:
                check(work, where, point) if check else crash_and_check(work, where, point, fault)
        return time.monotonic() - t0

    def result(self, backend: str, point: str, fault: str) -> float:
        if backend == "postgresql" and self.pg_url is None:
            pytest.skip(NOT_FOUND)
        return self.futures[(backend, point, fault)].result()

    def close(self) -> None:
        for f in self.futures.values():
            f.cancel()
        self.pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    """Starts every case selected in this session (``-k`` included) at once."""
    here = request.node.path if hasattr(request.node, "path") else None
    cases = [
        (item.callspec.params["backend"], item.callspec.params["point"],
         item.callspec.params["fault"])
        for item in request.session.items
        if getattr(item, "path", None) == here and hasattr(item, "callspec")
        and "point" in item.callspec.params
    ]  # fmt: skip
    pg_url = None
    if any(b == "postgresql" for b, _, _ in cases) and (
        os.environ.get(ENV_URL) or server_binaries()
    ):
        pg_url = request.getfixturevalue("postgres_server")
    # The longest first (hand-made faults, then a kill before the crash), so none ends alone.
    cases.sort(key=lambda c: (not c[2], c[1] not in PRE_KILL))
    r = Runs(tmp_path_factory.mktemp("chaos"), cases, pg_url)
    yield r
    r.close()


@pytest.mark.parametrize(("backend", "point", "fault"), CASES)
def test_a_kill_at_each_crash_point_breaks_nothing(
    runs: Runs, backend: str, point: str, fault: str
) -> None:
    runs.result(backend, point, fault)


@pytest.mark.parametrize(("backend", "point", "fault"), FAULTS)
def test_a_kill_inside_a_launch_fails_no_job(
    runs: Runs, backend: str, point: str, fault: str
) -> None:
    """A SIGKILL inside ``LocalBackend.launch``, after the task's shim started and before its
    handle file is written (``launch-without-handle``: the server dies at ``admit-written``,
    then the launch is made by hand, less the handle file). The restarted server must adopt
    the task or run the job again, not fail it (it failed it: "launch failed:
    FileExistsError: run directory ... already exists", with the first task still running
    untracked on GPUs no longer claimed, and its run never metered)."""
    runs.result(backend, point, fault)


@pytest.mark.parametrize(("backend", "point", "fault"), PREEMPT_BEFORE_LAUNCH)
def test_a_kill_in_a_preemption_before_the_launch_strands_nothing(
    runs: Runs, backend: str, point: str, fault: str
) -> None:
    """See ``preempt_before_launch_and_check``. The victim's attempt stayed ``stopping``
    with no task to wait for (recovery had nothing to stop, reconciliation looked only at
    tasks), its GPU drained, and the high job admitted there ``admitted``, its claim held,
    for ever."""
    runs.result(backend, point, fault)


def test_every_crash_point_is_covered() -> None:
    assert len(POINTS) == 10
    assert set(PG_POINTS) <= set(POINTS) and set(PRE_KILL) <= set(POINTS)
    assert {c.values[0] for c in CASES} == set(BACKENDS)
    assert [c.values[1] for c in CASES[: len(POINTS)]] == list(POINTS)
