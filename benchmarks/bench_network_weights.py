"""router/suanli's time weight on the network bench's scenario: mean JCT and cost of suanli
at each weight, as a ratio to the cheapest-member baseline's in the same seed (the figures
``suanli.core.routers.scored.TIME_WEIGHT`` and docs/network.md record).

    PYTHONPATH=src python benchmarks/bench_network_weights.py [--seed 0] [--weights 0.1,0.3,1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from suanli.bench.network import ledger, measure
from suanli.federation.engine import federate
from suanli.federation.scenario import build
from suanli.federation.settle import bill


def run(seed: int, router: str, **options: float) -> dict[str, float]:
    fed, jobs, info = build(seed=seed)
    own = router == "suanli"
    res = federate(fed, jobs, router, seed=seed, reroute=own, split=own, router_options=options)
    b = bill(res, fed, info["homes"])  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as d:
        m = measure(res, fed, ledger(b, Path(d) / "ledger.db"), b)
    return {"jct_h": m["jct_h"], "cost_usd": m["cost_usd"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", default="0.1,0.3,1")
    args = ap.parse_args()
    t0 = time.perf_counter()
    base = run(args.seed, "cheapest")
    print(f"seed {args.seed}: cheapest: mean JCT {base['jct_h']:.3f} h, cost ${base['cost_usd']:,.0f}")
    for w in (float(x) for x in args.weights.split(",")):
        r = run(args.seed, "suanli", time_weight=w)
        print(f"  suanli, time weight {w:g}: JCT {r['jct_h'] / base['jct_h']:.3f}x, cost "
              f"{r['cost_usd'] / base['cost_usd']:.3f}x")  # fmt: skip
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
