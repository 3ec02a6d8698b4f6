"""The control plane's two speed targets (docs/serve.md has the figures).

``submit``: submissions per second through the HTTP API on SQLite (target >= 500/s on the
2-core development machine). A real ``suanli serve`` is started as its own process (two
declared GPUs, its scheduler loop running), and ``--clients`` threads POST ``--jobs`` job
specs over keep-alive connections. Baseline, in the same run: ``GET /healthz`` (the HTTP stack
and one trivial query, no write) with the same clients; the ratio says what the durable
submit costs on top.

``cycle``: one pass of the scheduler loop with 10,000 pending jobs on 1,000 virtual nodes of
8 GPUs (target <= 1 s). The cluster is first filled with running jobs (fake backend, fake
clock, a SQLite store), 10,000 more are queued behind them, then the clock steps forward so
that a few jobs end and a few start in each pass. Printed: each pass's wall time (``step``:
backend poll, intake, the core's cycle, the store writes, launches) and the core's cycle alone
inside it, as the baseline.

``scale``: placements per second at the scale of Kubernetes' scheduler performance gate
(``test/integration/scheduler_perf``: >= 680 pods/s at 5,000 nodes and 10,000 pods; see
``../shared/docs/ANCHORS.md``). 10,000 single-GPU jobs wait in a SQLite store when the live
loop starts on 5,000 virtual nodes of 8 GPUs (fake backend, fake clock, the jobs run until
stopped); timed from the loop's start (``recover`` included, then ``step`` passes as
``Controller.run`` makes them, without its idle waits between passes) until every job is
running (target >= 1,000 placements/s). Baseline, in the same run: the core's cycle alone
(the scheduler ``suanli.core.builder`` builds over a ``ClusterView`` of the same cluster)
admitting the same 10,000 jobs, which must place each where the loop did.

    PYTHONPATH=src python benchmarks/bench_serve.py submit
    PYTHONPATH=src python benchmarks/bench_serve.py cycle
    PYTHONPATH=src python benchmarks/bench_serve.py scale
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hammer(url: str, headers: dict[str, str], n: int, clients: int, call: Any) -> float:
    """Seconds for ``clients`` threads to make ``n`` calls in all."""
    per = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
    errors: list[str] = []

    def work(k: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
            for _ in range(k):
                r = call(c)
                if r.status_code >= 300:
                    errors.append(r.text)

    threads = [threading.Thread(target=work, args=(k,)) for k in per]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} calls failed, e.g. {errors[0]}")
    return took


def _cancel_all(url: str, headers: dict[str, str]) -> None:
    """Cancel every job, the waiting ones first: tasks outlive the server by design."""
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
        for states in (["pending"], ["admitted", "running"]):
            deadline = time.monotonic() + 60
            while True:
                page = c.get("/v1/jobs", params={"state": states, "limit": 1000}).json()["jobs"]
                if not page:
                    break
                for job in page:
                    if not job["cancel_requested"]:
                        c.post(f"/v1/jobs/{job['id']}/cancel")
                if time.monotonic() > deadline:
                    raise SystemExit(f"jobs in {states} did not stop")
                time.sleep(0.2)


def start_server(
    tmp: Path, extra: list[str]
) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """``suanli serve`` as its own process on a state under ``tmp`` with ``extra`` options,
    once it answers ``/healthz``: the process, its URL and the admin's headers."""
    state, port = tmp / "state", _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(
        [sys.executable, "-m", "suanli.cli.main", "serve", "--state-dir", str(state),
         "--port", str(port), *extra],
        stdout=log, stderr=log, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("the server did not start: " + (tmp / "serve.log").read_text())
        time.sleep(0.1)
    token = (state / "admin.token").read_text().strip()
    return proc, url, {"Authorization": f"Bearer {token}"}


def bench_submit(jobs: int, clients: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, headers = start_server(Path(tmp), ["--gpus", "2", "--gpu-model", "H100"])
        try:
            # Two long jobs take the two GPUs; the submissions then wait, as in a busy cluster.
            filler = {"command": ["sleep", "600"], "gpus": 1, "tenant": "lab"}
            with httpx.Client(base_url=url, headers=headers) as c:
                for _ in range(2):
                    c.post("/v1/jobs", json=filler)
            spec = {"command": ["sleep", "600"], "gpus": 2, "tenant": "lab"}
            healthz = _hammer(url, headers, jobs, clients, lambda c: c.get("/healthz"))
            submit = _hammer(url, headers, jobs, clients, lambda c: c.post("/v1/jobs", json=spec))
            healthz2 = _hammer(url, headers, jobs, clients, lambda c: c.get("/healthz"))
            base = min(healthz, healthz2)
            print(f"submit  {jobs:,} jobs, {clients} clients: {submit:6.2f} s  "
                  f"{jobs / submit:7.0f} submissions/s (target >= 500/s)")  # fmt: skip
            print(f"healthz {jobs:,} calls, {clients} clients: {base:6.2f} s  "
                  f"{jobs / base:7.0f} calls/s (baseline: HTTP and one read)")  # fmt: skip
            print(f"ratio   submit / healthz: {submit / base:.2f}")
            with httpx.Client(base_url=url, headers=headers) as c:
                listed = 0
                after: str | None = None
                while True:
                    params: dict[str, Any] = {"limit": 1000}
                    if after is not None:
                        params["after"] = after
                    page = c.get("/v1/jobs", params=params).json()
                    listed += len(page["jobs"])
                    after = page["next"]
                    if after is None:
                        break
            print(f"stored  {listed:,} jobs: every acknowledged submission, and the 2 fillers")
            _cancel_all(url, headers)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def bench_cycle(nodes: int, pending: int, passes: int) -> None:
    from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
    from suanli.config.cluster import load_cluster
    from suanli.control.loop import ControlConfig, Controller
    from suanli.control.spec import JobSpec
    from suanli.sim.engine import PolicySet
    from suanli.store import jobs as js
    from suanli.store import open_store

    cluster = load_cluster(f"{nodes}x8xH100")
    clock_t = [0.0]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.db")
        js.sync_inventory(
            store,
            [js.NodeRow(n.name, 8, "H100", 81920, n.cpu_milli, n.memory_mib, True, "declared")
             for n in cluster.nodes],
            [js.GpuRow(n.name, i, "H100", f"v-{n.name}-{i}", 81920)
             for n in cluster.nodes for i in range(8)],
            0,
        )  # fmt: skip
        backend = FakeBackend(lambda: clock_t[0])
        ctl = Controller(
            store,
            ControlConfig(cluster=cluster, policy=PolicySet.parse("fifo+best-fit")),
            backend,
            clock=lambda: clock_t[0],
        )
        ctl.recover()
        sizes = (1, 2, 4, 8)
        running = nodes * 8 // 4  # jobs of 4 GPUs on average fill the cluster

        def add(count: int, start: int) -> None:
            with store.begin() as conn:
                for i in range(start, start + count):
                    spec = JobSpec(
                        command=["train"],
                        gpus=sizes[i % 4],
                        env={RUNTIME_VARIABLE: str(100 + (i * 7919) % 3600)},
                        tenant="lab",
                    )
                    js.submit_job(conn, spec=spec.model_dump(mode="json"), tenant="lab",
                                  user="u", name="", queue="lab", priority_class="normal",
                                  now_ms=0)  # fmt: skip

        t0 = time.perf_counter()
        add(running, 0)
        ctl.step()
        fill = time.perf_counter() - t0
        add(pending + 300, running)  # some start at once (capacity left by the filling)
        t1 = time.perf_counter()
        ctl.step()  # intake of the queue
        intake = time.perf_counter() - t1
        print(f"setup: {len(ctl.live):,} jobs running on {nodes * 8:,} GPUs ({fill:.1f} s), "
              f"{len(ctl.pending):,} pending (intake of the queue: {intake:.2f} s)")  # fmt: skip
        cycle_s: list[float] = []
        inner = ctl.sched.cycle

        def timed_cycle(*a: Any, **k: Any) -> Any:
            c0 = time.perf_counter()
            out = inner(*a, **k)
            cycle_s.append(time.perf_counter() - c0)
            return out

        ctl.sched.cycle = timed_cycle  # type: ignore[method-assign]
        steps: list[float] = []
        admitted = 0
        for _ in range(passes):
            nxt = backend.next_exit_at()
            clock_t[0] = nxt if nxt is not None else clock_t[0] + 1
            s0 = time.perf_counter()
            decisions = ctl.step()
            steps.append(time.perf_counter() - s0)
            admitted += sum(1 for d in decisions if type(d).__name__ == "Admit")
        print(
            f"{passes} passes with {len(ctl.pending):,} still pending, {admitted} admitted in all"
        )
        for name, xs in (("step ", steps), ("cycle", cycle_s)):
            q = statistics.quantiles(xs, n=100, method="inclusive")
            print(f"{name}  p50 {statistics.median(xs) * 1000:7.1f} ms  p99 {q[98] * 1000:7.1f} ms"
                  f"  max {max(xs) * 1000:7.1f} ms")  # fmt: skip
        print(f"ratio  step / cycle (medians): {statistics.median(steps) / statistics.median(cycle_s):.2f}; "
              f"target: step <= 1 s")  # fmt: skip
        store.close()


def _declared_store(path: Path, cluster: Any) -> Any:
    """A SQLite store at ``path`` holding ``cluster`` as a declared inventory of H100s."""
    from suanli.store import jobs as js
    from suanli.store import open_store

    store = open_store(path)
    js.sync_inventory(
        store,
        [js.NodeRow(n.name, n.gpus, "H100", 81920, n.cpu_milli, n.memory_mib, True, "declared")
         for n in cluster.nodes],
        [js.GpuRow(n.name, i, "H100", f"v-{n.name}-{i}", 81920)
         for n in cluster.nodes for i in range(n.gpus)],
        0,
    )  # fmt: skip
    return store


def bench_scale(nodes: int, jobs: int, profile: str | None = None) -> None:
    import numpy as np

    from suanli.backends.fake import FakeBackend
    from suanli.config.cluster import load_cluster
    from suanli.control.attempts import job_of
    from suanli.control.loop import MIN_GAP_S, ControlConfig, Controller
    from suanli.control.spec import JobSpec
    from suanli.core.builder import build
    from suanli.core.decisions import Admit
    from suanli.core.view import ClusterView
    from suanli.sim.engine import PolicySet
    from suanli.store import jobs as js

    cluster = load_cluster(f"{nodes}x8xH100")
    policy = PolicySet.parse("fifo+best-fit")
    clock_t = [0.0]
    with tempfile.TemporaryDirectory() as tmp:
        s0 = time.perf_counter()
        store = _declared_store(Path(tmp) / "bench.db", cluster)
        spec = JobSpec(command=["train"], gpus=1, tenant="lab").model_dump(mode="json")
        new = [js.NewJob(spec, "lab", "u", "", "lab", "normal") for _ in range(jobs)]
        records = js.submit_jobs(store, new, 0)
        setup = time.perf_counter() - s0
        print(f"setup: {nodes:,} nodes x 8 GPUs, {jobs:,} single-GPU jobs pending in the store "
              f"({setup:.1f} s)")  # fmt: skip

        # The live loop: recover, then passes until every job runs.
        backend = FakeBackend(lambda: clock_t[0])
        ctl = Controller(
            store, ControlConfig(cluster=cluster, policy=policy), backend,
            clock=lambda: clock_t[0],
        )  # fmt: skip
        prof = None
        if profile is not None:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        ctl.recover()
        recovered = time.perf_counter() - t0
        passes = running = 0
        live: dict[str, Any] = {}
        while running < jobs:
            clock_t[0] += MIN_GAP_S
            live.update((d.job.id, d.placement) for d in ctl.step() if type(d) is Admit)
            passes += 1
            placed, running = running, len(backend.running())
            if running == placed:  # nothing ends: a pass that places nothing, nor will the next
                raise SystemExit(f"{running:,} of {jobs:,} running after {passes} passes")
        loop_s = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        states = js.job_counts(store)
        if states != {("running", "lab"): jobs}:
            raise SystemExit(f"the store does not say every job runs: {states}")

        # The baseline: the core's cycle alone over the same cluster and jobs.
        sched = build(ClusterView(cluster), policy)
        c0 = time.perf_counter()
        for rec in records:
            sched.submit(job_of(rec)[1], 0.0)
        submitted = time.perf_counter() - c0
        rng = np.random.default_rng(0)
        core: dict[str, Any] = {}
        cycles = 0
        c1 = time.perf_counter()
        while len(sched):
            core.update((d.job.id, d.placement) for d in sched.cycle(rng, 0.0) if type(d) is Admit)
            cycles += 1
        cycle_s = time.perf_counter() - c1
        if core != live:
            raise SystemExit(f"the core placed {len(core):,} jobs, the loop {len(live):,}, "
                             "not all in the same places")  # fmt: skip
        store.close()

    print(f"loop   {jobs:,} placed in {loop_s:6.2f} s  {jobs / loop_s:8.0f} placements/s "
          f"(recover {recovered:.2f} s, {passes} pass{'es' if passes != 1 else ''}; "
          f"target >= 1,000/s)")  # fmt: skip
    print(f"cycle  {jobs:,} placed in {cycle_s:6.2f} s  {jobs / cycle_s:8.0f} placements/s "
          f"({cycles} cycle{'s' if cycles != 1 else ''}; the core alone, after "
          f"{submitted:.2f} s of submissions; the same placements)")  # fmt: skip
    print(
        f"ratio  loop / cycle: {loop_s / cycle_s:.2f} "
        "(Kubernetes' gate at 5,000 nodes, 10,000 pods: >= 680 pods/s)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=("submit", "cycle", "scale"))
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="submit: 3,000 submissions; scale: 10,000 jobs in the store",
    )
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--nodes", type=int, default=None, help="cycle: 1,000; scale: 5,000")
    p.add_argument("--profile", metavar="FILE", help="scale: cProfile the loop into FILE")
    p.add_argument("--pending", type=int, default=10_000)
    p.add_argument("--passes", type=int, default=50)
    a = p.parse_args()
    if a.what == "submit":
        bench_submit(a.jobs or 3000, a.clients)
    elif a.what == "cycle":
        bench_cycle(a.nodes or 1000, a.pending, a.passes)
    else:
        bench_scale(a.nodes or 5000, a.jobs or 10_000, a.profile)


if __name__ == "__main__":
    main()
