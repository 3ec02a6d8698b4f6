"""``suanli bench hardware``: the hardware models, each beside the same run with the model
off (``docs/failures.md``).

- ``failure_bench``: a trace at a time scale, every job checkpointed every 1,800 s, with
  failures at the default rates (``suanli.sim.failures``) against the failure-free replay:
  failures, attempts interrupted, work lost, capacity out of service, mean JCT and wait.
- ``live_bench``: the live loop (``suanli.control.loop.Controller``) over a real SQLite store,
  with the fake backend and a fake clock. One GPU faults and is later healthy; then an
  operator drains a node and later uncordons it. With the holds on, the loop keeps
  everything off the faulty GPU and the drained node, and moves their work elsewhere. With
  them off, it does not. There is no GPU here, so the health watch reads a scripted stand-in
  for NVML (``ScriptedHealth``).

Each result has its wall time and the ratio of the model-on run's wall time to the
model-off run's, measured in the same call.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BenchResult", "ScriptedHealth", "arrivals", "failure_bench", "live_bench"]

REPAIR_S = 4 * 3600.0
"""The failure bench's repair time (no published figure: ``docs/failures.md``)."""


@dataclass
class BenchResult:
    """One bench: its rows (the model off first), its wall seconds and notes."""

    name: str
    title: str
    rows: list[dict[str, Any]]
    wall_s: float
    notes: list[str] = field(default_factory=list)


def arrivals(
    rng: np.random.Generator,
    n: int,
    sizes: Sequence[int],
    weights: Sequence[float],
    median_runtime_s: float,
    sigma: float,
    load: float,
    total_gpus: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` generated jobs' GPUs (drawn from ``sizes`` by ``weights``), log-normal runtimes
    (capped at 48 h) and submit times spread evenly at random over the horizon that offers
    ``load`` of ``total_gpus``: the generated benches' common shape (in this order of draws)."""
    w = np.asarray(weights, dtype=float)
    gpus = rng.choice(np.asarray(sizes), size=n, p=w / w.sum())
    runtime = np.minimum(median_runtime_s * rng.lognormal(0.0, sigma, n), 48 * 3600.0)
    horizon = float((gpus * runtime).sum()) / (load * total_gpus)
    return gpus, runtime, np.sort(rng.uniform(0.0, horizon, n))


# ------------------------------------------------------------------------------ failures
def failure_bench(
    trace: str = "philly",
    scale: float = 0.19,
    seeds: Sequence[int] = (0,),
    *,
    policy: str = "fifo+best-fit",
    trace_dir: str | Path | None = None,
    first: int | None = None,
) -> BenchResult:
    """``trace`` at arrival scale ``scale`` with failures (one row per seed) beside the
    failure-free replay (the first row)."""
    from suanli.bench.predict import load, prepare
    from suanli.sim.engine import PolicySet, simulate
    from suanli.sim.failures import FailureModel

    t0 = time.perf_counter()
    loaded, jobs = load(trace, trace_dir, first)
    p = prepare(loaded, scale, jobs)
    ps = PolicySet.parse(policy)

    def run(model: FailureModel | None) -> tuple[Any, float]:
        t = time.perf_counter()
        r = simulate(p.cluster, p.jobs, ps, speed_basis=p.basis, failures=model)
        return r.records, time.perf_counter() - t

    base, base_s = run(None)
    b_jct = float(np.mean(base.finish - base.submit))
    b_wait = float(np.mean(base.start - base.submit))
    rows: list[dict[str, Any]] = [
        {"run": "off", "failures": 0, "interrupted": 0, "lost_gpu_h": 0.0, "down_gpu_h": 0.0,
         "jct_h": b_jct / 3600, "jct_ratio": 1.0, "wait_h": b_wait / 3600, "wait_ratio": 1.0,
         "wall_s": base_s, "wall_ratio": 1.0}
    ]  # fmt: skip
    for seed in seeds:
        rec, s = run(FailureModel(repair_s=REPAIR_S, seed=seed))
        log = rec.failures
        assert log is not None
        jct = float(np.mean(rec.finish - rec.submit))
        wait = float(np.mean(rec.start - rec.submit))
        rows.append({
            "run": f"seed {seed}", "failures": len(log.failures), "interrupted": log.interrupted,
            "lost_gpu_h": log.lost_gpu_s / 3600, "down_gpu_h": log.down_gpu_s / 3600,
            "jct_h": jct / 3600, "jct_ratio": jct / b_jct, "wait_h": wait / 3600,
            "wait_ratio": wait / b_wait if b_wait else float("nan"), "wall_s": s,
            "wall_ratio": s / base_s,
        })  # fmt: skip
    title = (f"failures: {trace} x {scale:g} ({len(p.jobs):,} jobs, {p.cluster.total_gpus:,} "
             f"GPUs), {ps.label}, checkpoints every 1,800 s, repairs {REPAIR_S / 3600:g} h, "
             "default rates")  # fmt: skip
    return BenchResult("failures", title, rows, time.perf_counter() - t0)


# ------------------------------------------------------------------------------ live holds
class ScriptedHealth:
    """A stand-in for the NVML health reader (this bench runs where there may be no GPU):
    ``faults`` (GPU index -> fault) is what it reports, set by the script."""

    name = "scripted stand-in for NVML"

    def __init__(self) -> None:
        self.faults: dict[int, str] = {}

    def read(self, gpus: Mapping[int, str]) -> dict[int, str | None]:
        return {i: self.faults.get(i) for i in gpus}


@dataclass(frozen=True)
class LiveScenario:
    """The live bench's fixed script (fake clock seconds)."""

    cluster: str = "4x8xTESTGPU[gpumem=80G,speed=1]"
    small_jobs: int = 48
    """One-GPU jobs of ``small_runtime_s``, all submitted at 0."""
    small_runtime_s: float = 600.0
    gangs: int = 4
    """Eight-GPU jobs of ``gang_runtime_s``, submitted at 0 after the small ones."""
    gang_runtime_s: float = 1200.0
    faulty_gpu: int = 3
    fault_at: float = 100.0
    """GPU ``faulty_gpu`` of the first node faults (XID 79) ..."""
    healthy_at: float = 700.0
    """... and is healthy again."""
    drain_at: float = 900.0
    """The second node is drained ..."""
    uncordon_at: float = 1500.0
    """... and put back in service."""
    step_s: float = 1.0
    end_s: float = 20_000.0


def live_bench(scenario: LiveScenario = LiveScenario()) -> BenchResult:
    """The scenario with the hardware holds on, then off (the first row), each on a fresh
    store."""
    t0 = time.perf_counter()
    quiet = logging.getLogger("suanli.control")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the loop's and the watch's notes are this bench's rows
    try:
        off = _live_run(scenario, holds=False)
        on = _live_run(scenario, holds=True)
    finally:
        quiet.setLevel(level)
    on["wall_ratio"] = on["wall_s"] / off["wall_s"]
    off["wall_ratio"] = 1.0
    title = (f"live holds: {scenario.cluster}, {scenario.small_jobs} one-GPU jobs of "
             f"{scenario.small_runtime_s:g} s and {scenario.gangs} 8-GPU gangs of "
             f"{scenario.gang_runtime_s:g} s; GPU {scenario.faulty_gpu} of node 0 faults (xid 79) "
             f"{scenario.fault_at:g}-{scenario.healthy_at:g} s, node 1 drained "
             f"{scenario.drain_at:g}-{scenario.uncordon_at:g} s (fake backend and clock)")  # fmt: skip
    notes = [f"GPU health read from a {ScriptedHealth.name}: no GPU is needed or used"]
    return BenchResult("live", title, [off, on], time.perf_counter() - t0, notes)


def _live_run(sc: LiveScenario, holds: bool) -> dict[str, Any]:
    from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
    from suanli.config.cluster import load_cluster
    from suanli.control.health_watch import HealthWatch
    from suanli.control.inventory import node_rows
    from suanli.control.loop import ControlConfig, Controller
    from suanli.control.spec import JobSpec
    from suanli.sim.engine import PolicySet
    from suanli.store import jobs as js
    from suanli.store import nodes as sn
    from suanli.store import open_store

    t0 = time.perf_counter()
    now = [0.0]

    def clock() -> float:
        return now[0]

    cluster = load_cluster(sc.cluster)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.db")
        try:
            js.sync_inventory(store, *node_rows(cluster.nodes, "declared"), 0)
            backend = FakeBackend(clock)
            config = ControlConfig(cluster=cluster, policy=PolicySet.parse("fifo+best-fit"),
                                   holds_interval_s=2.0 if holds else float("inf"))  # fmt: skip
            ctl = Controller(store, config, backend, clock=clock)
            first, second = ctl.node_names[0], ctl.node_names[1]
            health = ScriptedHealth()
            watch = HealthWatch(store, health, node=first, gpus=dict.fromkeys(range(8), ""),
                                clock=clock)  # fmt: skip
            if holds:
                ctl.health_probe = watch.probe
            ctl.recover()
            shapes = [(1, sc.small_runtime_s)] * sc.small_jobs + [(8, sc.gang_runtime_s)] * sc.gangs
            for gpus, runtime in shapes:
                spec = JobSpec(command=["train"], gpus=gpus, cpu=1, memory="1G",
                               env={RUNTIME_VARIABLE: str(runtime)})  # fmt: skip
                js.submit_job(store, spec=spec.model_dump(mode="json"), tenant="lab", user="ana",
                              name="", queue="lab", priority_class="normal", now_ms=0)  # fmt: skip
            script = [
                (sc.fault_at, lambda: health.faults.__setitem__(sc.faulty_gpu, "xid 79")),
                (sc.healthy_at, health.faults.clear),
                (
                    sc.drain_at,
                    lambda: sn.set_cordon(store, second, "drain", "bench", round(now[0] * 1000)),
                ),  # fmt: skip
                (
                    sc.uncordon_at,
                    lambda: sn.set_cordon(store, second, None, None, round(now[0] * 1000)),
                ),  # fmt: skip
            ]
            script.sort(key=lambda e: e[0])  # the events in time order, however given
            total = len(shapes)
            while now[0] <= sc.end_s:
                while script and script[0][0] <= now[0]:
                    script.pop(0)[1]()
                if holds:
                    watch.check()  # the watch's thread, at the loop's pace here
                ctl.step()
                done = js.job_ids_in(store, ["succeeded", "failed", "cancelled", "lost"])
                if len(done) == total and not script:
                    break
                now[0] += sc.step_s
            return _live_row(store, sc, first, second, holds, now[0], t0)
        finally:
            store.close()


def _live_row(store: Any, sc: LiveScenario, first: str, second: str, holds: bool,
              end: float, t0: float) -> dict[str, Any]:  # fmt: skip
    """What one live run did, from its store: attempts started on the faulty GPU and on the
    drained node while they were out, attempts that held the GPU when it faulted and ran on
    (not moved off it), interruptions and how soon after the fault or the drain their work
    was moved, the GPU-seconds they ran before it, and how the jobs ended."""
    from suanli.control.attempts import is_interruption
    from suanli.store import jobs as js
    from suanli.store.schema import JOB_STATES

    gpu = sc.faulty_gpu
    fault = (sc.fault_at * 1000, sc.healthy_at * 1000)
    drain = (sc.drain_at * 1000, sc.uncordon_at * 1000)
    landed_gpu = landed_node = ran_through = interrupted = succeeded = 0
    lost_gpu_s = 0.0
    moved_after: list[float] = []
    for _, job_id in js.job_ids_in(store, JOB_STATES):
        rec = js.get_job(store, job_id)
        succeeded += rec is not None and rec.state == "succeeded"
        for a in js.job_attempts(store, job_id):
            on_gpu = any(t["node"] == first and gpu in t["gpus"] for t in a.placement)
            on_node = any(t["node"] == second for t in a.placement)
            moved = is_interruption(a.detail)
            if on_gpu and fault[0] <= a.admitted_ms < fault[1]:
                landed_gpu += 1
            if on_node and drain[0] <= a.admitted_ms < drain[1]:
                landed_node += 1
            began = a.started_ms if a.started_ms is not None else a.admitted_ms
            if on_gpu and not moved and began <= fault[0] < (a.ended_ms or math.inf) - 1:
                ran_through += 1
            if moved:
                interrupted += 1
                if a.started_ms is not None and a.ended_ms is not None:
                    gpus = sum(len(t["gpus"]) for t in a.placement)
                    lost_gpu_s += gpus * (a.ended_ms - a.started_ms) / 1000
                    at = fault[0] if on_gpu and a.ended_ms < fault[1] else drain[0]
                    moved_after.append((a.ended_ms - at) / 1000)
    return {
        "run": "on" if holds else "off",
        "started_on_faulty_gpu": landed_gpu,
        "started_on_drained_node": landed_node,
        "ran_through_fault": ran_through,
        "interrupted": interrupted,
        "moved_within_s": max(moved_after) if moved_after else float("nan"),
        "lost_gpu_s": lost_gpu_s,
        "succeeded": succeeded,
        "makespan_s": end,
        "wall_s": time.perf_counter() - t0,
    }
