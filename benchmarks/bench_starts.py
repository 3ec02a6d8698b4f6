"""Start-time estimates: what a plan costs, and how far off its estimates are on workloads
generated here (not the traces the estimator was built on).

**Cost** (``cost``): a full cluster of 1,000 nodes × 8 H100 (every GPU held by a running job
of a synthetic workload, each partway through its run) and a queue of 1,000 and of 6,000
pending jobs; a ``runtime/history`` predictor and the estimator's calibration taught 5,000
ended jobs first. Timed, median of the repeats:

  cold plan   a new estimator's first plan of the queue (every job predicted first)
  plan        a plan again after the queue changed (one job fewer), predictions kept
  arrival     one new job's estimate within the plan's refresh (placed after the plan)

The baseline, in the same run: the same measurement against ``--base COMMIT``'s ``suanli``
(checked out in a temporary git worktree), each tree in ``--rounds`` fresh processes (3),
alternating, the median taken; every figure is also printed as new / base. ``--no-base``:
this tree only.

**Error** (``error``): ``suanli.workload.synthetic`` workloads of 6,000 jobs on 100 × 8
H100, seeds 1-3 at offered loads 0.9 and 1.2 (six variants), replayed under FIFO and QSSF on
``runtime/history``, no backfill; per variant the median start-time error (|start − the P50
estimated at submission| / the real wait, over jobs that waited at least 60 s) and the share
that started by their P90. Printed: each variant, and per policy the median and the spread
(min-max) over the variants.

Run: ``PYTHONPATH=src python benchmarks/bench_starts.py [cost] [error] [--base COMMIT]``
(both, against ``HEAD~1`` by default).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
NODES, GPUS = 1000, 8
QUEUES = (1000, 6000)
TAUGHT = 5000
REPEATS = 15
ARRIVALS = 200


def _cluster(nodes: int):  # type: ignore[no-untyped-def]
    from bench_sim import cluster  # (this script's folder: nodes x 8 H100 in racks of 32)

    return cluster(nodes, GPUS)


def _jobs(n: int, spec, seed: int, load: float):  # type: ignore[no-untyped-def]
    from suanli.workload.synthetic import WorkloadConfig, generate

    return generate(
        WorkloadConfig(jobs=n, seed=seed, target_load=load, runtime_cap=4 * 3600.0), spec
    )


def cost() -> dict[str, float]:
    """The cost figures of this process's ``suanli`` (seconds)."""
    from suanli.core.gang import place_job
    from suanli.core.registry import create
    from suanli.core.starts import StartEstimator
    from suanli.core.view import ClusterView

    spec = _cluster(NODES)
    view = ClusterView(spec)
    jobs = _jobs(TAUGHT + 20 * NODES + max(QUEUES) + ARRIVALS, spec, 7, 1.0)
    taught, rest = jobs[:TAUGHT], jobs[TAUGHT:]
    predictor = create("runtime", "history")
    for j in taught:
        predictor.learn(j, j.runtime, j.submit)
    placement = create("placement", "best-fit")
    rng = np.random.default_rng(0)
    rows = []
    now = 0.0
    k = 0
    waiting = []  # those that did not fit, in order, then the rest
    full = 0.01 * NODES * GPUS * 1000  # milli-GPU free when the cluster counts as full
    while k < len(rest) and view.gpu_free_milli.sum() > full:
        j = rest[k]
        k += 1
        p, _, _ = place_job(view, j, placement, rng)  # (allocates it)
        if p is not None:
            rows.append((j, now - float(rng.uniform(0.0, j.runtime)), p))
        else:
            waiting.append(j)
    waiting += rest[k:]
    out: dict[str, float] = {"running": float(len(rows))}

    def fresh() -> StartEstimator:
        est = StartEstimator(view, predictor)
        for j in taught:
            est.learn_past(j, j.runtime)
        return est

    for n in QUEUES:
        queue = waiting[:n]
        cold, warm, arrive = [], [], []
        for _ in range(REPEATS):
            est = fresh()
            gc.collect()  # (each figure without the collection of what came before)
            t0 = time.perf_counter()
            est.estimate(now, lambda: rows, lambda q=queue: q)
            cold.append(time.perf_counter() - t0)
            for m in range(1, 4):  # the queue changed: planned again, predictions kept
                shorter = queue[: n - m]
                t0 = time.perf_counter()
                est.estimate(now + est.refresh * m, lambda: rows, lambda s=shorter: s)
                warm.append(time.perf_counter() - t0)
        later = waiting[n : n + ARRIVALS]
        at = now + est.refresh * 3
        for j in later:
            t0 = time.perf_counter()
            est.estimate(at + 1.0, lambda: rows, lambda q=queue: q, [j])
            arrive.append(time.perf_counter() - t0)
        out[f"cold_{n}"] = statistics.median(cold)
        out[f"plan_{n}"] = statistics.median(warm)
        out[f"arrival_{n}"] = statistics.median(arrive)
    return out


def _cost_of(tree: Path) -> dict[str, float]:
    """``cost()`` of the ``suanli`` in ``tree``'s ``src``, in a fresh process."""
    from bench_ab import tree_env

    got = subprocess.run([sys.executable, __file__, "--cost-json"], env=tree_env(tree),
                         check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(got.stdout.strip().splitlines()[-1])


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def costs(base: str | None, rounds: int) -> tuple[dict[str, float], dict[str, float] | None]:
    """This tree's cost figures and ``base``'s (None: none), each the median over ``rounds``
    fresh processes, the two trees alternating (base first on even rounds), so that a slow
    spell of the machine falls on both."""
    from bench_ab import base_tree

    if base is None:
        return _median([_cost_of(HERE) for _ in range(rounds)]), None
    with base_tree(base) as tree:
        new, old = [], []
        for r in range(rounds):
            for t in (tree, HERE) if r % 2 == 0 else (HERE, tree):
                (new if t == HERE else old).append(_cost_of(t))
        return _median(new), _median(old)


def print_cost(new: dict[str, float], base: dict[str, float] | None, label: str) -> None:
    print(f"cost: {NODES} nodes x {GPUS} GPUs, {int(new['running'])} running jobs; "
          f"median of {REPEATS} (arrival: of {ARRIVALS}), then over the rounds")  # fmt: skip
    head = f"  {'':22s}{'ms':>10s}"
    if base is not None:
        head += f"{label + ' ms':>14s}{'new/base':>10s}"
    print(head)
    for n in QUEUES:
        for kind in ("cold", "plan", "arrival"):
            key = f"{kind}_{n}"
            line = f"  {kind + ' (' + format(n, ',') + ' pending)':22s}{new[key] * 1e3:10.2f}"
            if base is not None:
                line += f"{base[key] * 1e3:14.2f}{new[key] / base[key]:10.3f}"
            print(line)


def error() -> None:
    from suanli.bench.predict import Prepared, replay
    from suanli.core.speed import REFERENCE

    spec = _cluster(100)
    policies = ("fifo+best-fit", "qssf@history+best-fit")
    got: dict[str, list[float]] = {p: [] for p in policies}
    print("error: 6,000 jobs on 100 x 8 H100; median start-time error / real wait (P90 cover)")
    t0 = time.perf_counter()
    for load in (0.9, 1.2):
        for seed in (1, 2, 3):
            jobs = sorted(_jobs(6000, spec, seed, load), key=lambda j: (j.submit, j.id))
            p = Prepared(f"synthetic seed {seed} load {load}", spec, REFERENCE, jobs, 1.0,
                         {j.id: j.runtime for j in jobs})  # fmt: skip
            cells = []
            for pol in policies:
                r = replay(p, pol).row
                got[pol].append(r.start_error)
                cells.append(f"{pol} {r.start_error:.2f} ({r.start_cover_p90:.0%})")
            print(f"  load {load} seed {seed}: " + "; ".join(cells))
    for pol, v in got.items():
        print(f"  {pol}: median {statistics.median(v):.2f}, spread {min(v):.2f}-{max(v):.2f}")
    print(f"  {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", help="cost, error (default: both)")
    ap.add_argument("--base", default="HEAD~1")
    ap.add_argument("--no-base", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per tree")
    ap.add_argument("--cost-json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cost_json:
        print(json.dumps(cost()))
        return
    a.parts = a.parts or ["cost", "error"]
    if set(a.parts) - {"cost", "error"}:
        ap.error(f"parts are cost and error, not {' '.join(a.parts)}")
    if "cost" in a.parts:
        new, base = costs(None if a.no_base else a.base, a.rounds)
        print_cost(new, base, a.base)
    if "error" in a.parts:
        error()


if __name__ == "__main__":
    main()
