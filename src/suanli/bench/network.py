"""``suanli bench network``: one simulated week of the compute network
(``suanli.federation.scenario``) under four routers side by side, every cost read back from
a real ledger (``docs/network.md``).

Routers: ``first-admit`` (Kueue MultiKueue; members tried in the scenario's fixed order:
us-east, us-west, eu-west, ap-northeast), ``least-loaded``, ``cheapest`` (SkyPilot) and
``suanli`` (with re-routing and halves of divisible jobs, which the others do not do). Each
run's bill (``suanli.federation.settle``) is posted to a fresh SQLite store: usage records,
charges and settlements; the costs below are the ledger's totals (``suanli.store.totals``),
and the run checks that every cross-region use has its settlement there.

Per run: mean and P99 JCT, mean queueing delay (submission to start: the data's move
included), total cost (compute at each region's price, capacity bought ahead, data egress
and the link's time), bytes and cost moved, each region's utilisation (GPUs allocated, time
averaged over the run), the jobs each region took, the run's span (from the week's start to
the last job's end), and whether every routed job has its explanation. Each run's wall time
and its ratio to first-admit's in the same seed.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from suanli.bench.hardware import BenchResult
from suanli.federation.engine import FedResult, federate
from suanli.federation.model import Federation, FedJob
from suanli.federation.scenario import NetworkScenario, build
from suanli.federation.settle import Bill, bill
from suanli.sim.spread import spread_map
from suanli.store import open_store, post_charges, post_settlements, record_usage, totals

__all__ = ["ROUTERS", "network_bench", "run_one"]

ROUTERS: tuple[tuple[str, bool], ...] = (
    ("first-admit", False), ("least-loaded", False), ("cheapest", False), ("suanli", True),
)  # fmt: skip
"""Each router, and whether its runs re-route and split (suanli's own features)."""

NOW = datetime(2026, 1, 12, tzinfo=UTC)


@functools.lru_cache(maxsize=4)
def _scenario(
    sc: NetworkScenario, seed: int, trace_dir: str | None
) -> tuple[Federation, list[FedJob], dict[str, object]]:
    return build(sc, seed, trace_dir)


def ledger(b: Bill, path: Path) -> dict[str, Any]:
    """Post ``b`` to a fresh store at ``path`` and read the totals back: cost by resource,
    credits by provider, and the entries of each kind (a settlement for every cross-region
    use is checked against them)."""
    store = open_store(path)
    try:
        record_usage(store, b.records)
        post_charges(store, b.charges, NOW, "network")
        post_settlements(store, b.settlements, NOW, "network")
        by_resource = {t.group[0]: t.amount for t in totals(store, by=("resource",),
                                                              kinds=("charge",))}  # fmt: skip
        credits = {t.group[0]: -t.amount for t in totals(store, by=("org",),
                                                           kinds=("settlement",))}  # fmt: skip
        settled = {t.group[0]: t.entries for t in totals(store, by=("kind",))}
    finally:
        store.close()
    return {"by_resource": by_resource, "credits": credits, "entries": settled}


def run_one(shared: tuple[NetworkScenario, str | None, str | None], item: tuple[int, str, bool]
            ) -> dict[str, Any]:  # fmt: skip
    """One (seed, router) run: federate, bill, post to a ledger, measure."""
    sc, trace_dir, out_dir = shared
    seed, router, own = item
    fed, jobs, info = _scenario(sc, seed, trace_dir)
    t0 = time.perf_counter()
    res = federate(fed, jobs, router, seed=seed, reroute=own, split=own)
    sim_s = time.perf_counter() - t0
    homes: dict[str, str] = info["homes"]  # type: ignore[assignment]
    b = bill(res, fed, homes)
    with tempfile.TemporaryDirectory() as d:
        led = ledger(b, Path(d) / "ledger.db")
    wall = time.perf_counter() - t0
    row = measure(res, fed, led, b)
    row.update({"seed": seed, "router": router, "sim_s": sim_s, "wall_s": wall})
    if out_dir is not None:
        write_jobs(res, Path(out_dir) / f"seed{seed}-{router}-jobs.csv")
    return row


def measure(res: FedResult, fed: Federation, led: dict[str, Any], b: Bill) -> dict[str, Any]:
    """The bench's figures of one run (module docstring)."""
    done = [o for o in res.outcomes if o.finish == o.finish]
    jct = np.array([o.finish - o.fed.job.submit for o in done])
    wait = np.array([o.start - o.fed.job.submit for o in done])
    by = led["by_resource"]
    cost = sum(by.values(), Decimal(0))
    moved = by.get("network", Decimal(0)) + by.get("link", Decimal(0))
    routed = [o for o in res.outcomes if o.routed]
    explained = sum(1 for o in routed if o.route is not None and o.route.member and o.route.why)
    cross = len(b.settlements)
    return {
        "jobs": len(res.outcomes), "finished": len(done), "span_days": res.horizon / 86400,
        "unrouted": sum(1 for o in res.outcomes if not o.routed),
        "jct_h": float(jct.mean()) / 3600 if len(jct) else math.nan,
        "jct_p99_h": float(np.percentile(jct, 99)) / 3600 if len(jct) else math.nan,
        "wait_h": float(wait.mean()) / 3600 if len(wait) else math.nan,
        "cost_usd": float(cost), "compute_usd": float(by.get("gpu", 0)),
        "reserved_usd": float(by.get("reserved", 0)),
        "moved_tb": sum(m.gb for m in res.moves) / 1000, "moved_usd": float(moved),
        "util": {k: round(v, 4) for k, v in res.util.items()},
        "jobs_by_region": dict(Counter(o.member for o in routed if o.member is not None)),
        "explained": explained == len(routed),
        "rerouted": sum(1 for o in res.outcomes if o.reroute is not None),
        "split": sum(1 for o in res.outcomes if o.split_why),
        "cross_region_uses": cross,
        "settled": led["entries"].get("settlement", 0) == cross,
        "credits_usd": {k: float(v) for k, v in led["credits"].items()},
    }  # fmt: skip


JOB_COLUMNS = ("job", "tenant", "home", "member", "submit", "start", "finish", "jct_s", "wait_s",
               "predicted_start", "moved_gb", "move_usd", "rerouted_to", "split", "explanation")  # fmt: skip


def write_jobs(res: FedResult, path: Path) -> None:
    """The per-job CSV: where each job went, when it started and ended, its data's move, and
    its routing decision's explanation (JSON: the winner, why, every candidate's score parts
    and every excluded member's reason)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(JOB_COLUMNS)
        for o in res.outcomes:
            j = o.fed.job
            w.writerow([
                j.id, j.tenant, o.fed.home, o.member or "", j.submit, o.start, o.finish,
                o.finish - j.submit, o.start - j.submit, o.predicted_start, round(o.moved_gb, 3),
                round(o.move_usd, 6), o.reroute.member if o.reroute is not None else "",
                o.split_why,
                json.dumps(o.route.as_dict() if o.route is not None else None, sort_keys=True),
            ])  # fmt: skip


DEFAULT = NetworkScenario()


def network_bench(
    seeds: Sequence[int] = (0, 1, 2),
    *,
    scenario: NetworkScenario = DEFAULT,
    trace_dir: str | Path | None = None,
    workers: int = 2,
    out_dir: str | Path | None = None,
) -> BenchResult:
    """Every router on every seed (module docstring); rows in (seed, router) order."""
    t0 = time.perf_counter()
    items = [(s, r, own) for s in seeds for r, own in ROUTERS]
    shared = (scenario, str(trace_dir) if trace_dir is not None else None,
              str(out_dir) if out_dir is not None else None)  # fmt: skip
    rows = spread_map(run_one, items, shared, workers=workers)
    for s in seeds:
        base = next(r for r in rows if r["seed"] == s and r["router"] == "first-admit")
        for r in rows:
            if r["seed"] == s:
                r["wall_ratio"] = r["wall_s"] / base["wall_s"]
    _, _, info = _scenario(scenario, seeds[0], shared[1])
    gpus: dict[str, int] = info["gpus"]  # type: ignore[assignment]
    title = (f"compute network: one week, 4 regions ({', '.join(f'{k} {v} GPUs' for k, v in gpus.items())}), "
             f"{info['jobs']:,} jobs, offered load {info['offered_load']:.2f} (inventories at 1/{info['k']})")  # fmt: skip
    notes = ["costs are the ledger's totals: compute at each region's AWS price, capacity "
             "bought ahead, data egress (by source) and the link's time",
             "suanli re-routes a job that waits 3x its predicted wait and splits divisible "
             "jobs; the baselines do neither"]  # fmt: skip
    return BenchResult("network", title, rows, time.perf_counter() - t0, notes)
