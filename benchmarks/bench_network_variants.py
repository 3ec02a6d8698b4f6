"""router/suanli away from the network bench's fixed scenario: other weeks of the traces,
other offered loads and another mix of constraints, each on a seed the bench does not use,
with all four routers run in the same process. Per variant: suanli's mean JCT and cost as
ratios to the baseline with the best mean JCT and to the cheapest run (the figures
``suanli bench network`` prints for the fixed week), and their spread over the variants
(docs/network.md, "Away from the fixed week").

``--bounds SEED`` prints instead the fixed week's loose bounds for that seed: the mean JCT
if every job ran at once on the fastest GPU that could hold it, and the compute cost if every
job ran at the lowest price per unit of work of any GPU that could hold it (no capacity
limit, no wait: neither is reachable).

    PYTHONPATH=src python benchmarks/bench_network_variants.py [--seed 7] [--workers 2]
    PYTHONPATH=src python benchmarks/bench_network_variants.py --bounds 0
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from suanli.bench.network import network_bench
from suanli.cli.bench_network import comparison
from suanli.core.model import MILLI
from suanli.federation.scenario import NetworkScenario, build

BASE = NetworkScenario()
VARIANTS: dict[str, NetworkScenario] = {
    "week of day 14": replace(BASE, week_day=14),
    "week of day 42": replace(BASE, week_day=42),
    "load 0.7": replace(BASE, load=0.7),
    "load 0.9": replace(BASE, load=0.9),
    "more constraints": replace(BASE, eu_resident=0.8, restricted_share=0.15, budget_share=0.15,
                                spot_share=0.3),  # fmt: skip
    "bigger data": replace(BASE, dataset_gb=(100.0, 20000.0)),
}
"""Each variant changes the fixed scenario in one respect (or one group of constraints)."""


def bounds(seed: int) -> None:
    fed, jobs, _ = build(BASE, seed)
    # (region, GPU model, speed, GPUs a node, price an hour) of every GPU node type.
    kinds = {(r.name, n.gpu_model.name, n.gpu_model.speed, n.gpus, r.prices[n.gpu_model.name])
             for r in fed.regions for n in r.cluster.nodes if n.gpu_model is not None and n.gpus}
    jct = cost = 0.0
    for fj in jobs:
        j, t = fj.job, fj.job.task
        fits = [k for k in kinds if (not t.gpu_models or k[1] in t.gpu_models)
                and k[3] >= max(t.gpus, 1) and (not fj.regions or k[0] in fj.regions)]  # fmt: skip
        jct += j.runtime / max(k[2] for k in fits)
        cost += j.gpu_demand_milli / MILLI * j.runtime / 3600 * min(k[4] / k[2] for k in fits)
    print(f"seed {seed}: {len(jobs):,} jobs; loose bounds: mean JCT {jct / len(jobs) / 3600:.3f} h, "
          f"compute ${cost:,.0f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bounds", type=int, metavar="SEED")
    args = ap.parse_args()
    if args.bounds is not None:
        bounds(args.bounds)
        return
    t0 = time.perf_counter()
    jct, cost = [], []
    print("variant: jobs, offered load; suanli JCT and cost over the best-JCT baseline; cost and "
          "JCT over the cheapest run")  # fmt: skip
    for name, sc in VARIANTS.items():
        t = time.perf_counter()
        r = network_bench((args.seed,), scenario=sc, workers=args.workers)
        (c,) = comparison(r.rows)
        jct.append(c["jct_ratio"])
        cost.append(c["cost_ratio"])
        span = max(row["span_days"] for row in r.rows)
        print(f"  {name:17s}: {r.rows[0]['jobs']:,} jobs, span to {span:.1f} d; "
              f"JCT {c['jct_ratio']:.3f}x {c['best_jct_baseline']} at {c['cost_ratio_to_it']:.3f}x "
              f"its cost; cost {c['cost_ratio']:.3f}x {c['cheapest_baseline']} at "
              f"{c['jct_ratio_to_it']:.3f}x its JCT ({time.perf_counter() - t:.1f} s)")  # fmt: skip
        print(f"    {r.title}")
    print(f"spread over {len(VARIANTS)} variants: JCT {min(jct):.3f}-{max(jct):.3f}x the best-JCT "
          f"baseline; cost {min(cost):.3f}-{max(cost):.3f}x the cheapest run "
          f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
