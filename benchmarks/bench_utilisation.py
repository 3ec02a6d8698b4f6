"""Speed of ``suanli bench utilisation``: the fixed co-location scenario, one week on 512 GPUs.

Prints, per seed, the wall time of building the scenario and of each setup's run, and the
ratio of the slowest setup to the static partition's run measured in the same process (the
simplest setup: no autoscaling, elasticity, sharing or reclaim), so that a slower machine
does not read as a slower simulator. The issue's budget: the whole bench in <= 60 s.

    PYTHONPATH=src python benchmarks/bench_utilisation.py [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import time

from suanli.bench.utilisation import build, setups
from suanli.sim.colocation.engine import run
from suanli.sim.colocation.outcome import bound, summarise
from suanli.traces import find_trace_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    args = ap.parse_args()
    root = find_trace_dir()
    total = time.perf_counter()
    for seed in (int(s) for s in args.seeds.split(",")):
        t0 = time.perf_counter()
        built = build(root, seed)
        t_build = time.perf_counter() - t0
        walls = {}
        for lv in setups(built):
            t1 = time.perf_counter()
            summarise(lv.name, built.scenario, run(built.scenario, lv))
            walls[lv.name] = time.perf_counter() - t1
        t2 = time.perf_counter()
        bound(built.scenario)
        t_bound = time.perf_counter() - t2
        worst = max(walls, key=walls.__getitem__)
        print(
            f"seed {seed}: build {t_build:.2f} s, "
            + ", ".join(f"{k} {v:.2f} s" for k, v in walls.items())
            + f", bound {t_bound:.2f} s; {worst}/static {walls[worst] / walls['static']:.2f}"
        )
    print(f"all seeds: {time.perf_counter() - total:.1f} s (budget 60 s)")


if __name__ == "__main__":
    main()
