"""The topology and memory-pooling benches of ``suanli bench hardware`` on variants of their
scenarios: other seeds, other mixes, other clusters, other models' figures. Each line gives,
over the variant's seeds, the spread (min-max, mean) of the model-aware run against its
baseline in the same run: ``placement/topology`` against best-fit with the topology model on;
pooling against pooling off.

    PYTHONPATH=src python benchmarks/bench_hw_variants.py [--only topology|pooling]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from suanli.bench.pooling import PoolingScenario, pooling_bench
from suanli.bench.topology import TopologyScenario, topology_bench

T = TopologyScenario()
TOPOLOGY = {
    "default, seeds 3-7": (T, (3, 4, 5, 6, 7)),
    "gangs 20% of jobs": (replace(T, weights=(0.3, 0.15, 0.15, 0.2, 0.1, 0.06, 0.04)), (0, 1, 2)),
    "gangs 60% of jobs": (replace(T, weights=(0.1, 0.05, 0.05, 0.2, 0.3, 0.18, 0.12)), (0, 1, 2)),
    "36x8, a domain a rack": (replace(T, cluster="36x8xGB200[nvlink=72]", jobs=1500), (0, 1, 2)),
    "144x8, two domains a rack": (
        replace(T, cluster="144x8xGB200[nvlink=72,rack=18]", jobs=3000),
        (0, 1, 2),
    ),  # fmt: skip
    "fewer tokens a step": (replace(T, tokens=(2048.0, 16384.0)), (0, 1, 2)),
}
P = PoolingScenario()
POOLING = {
    "default, seeds 3-7": (P, (3, 4, 5, 6, 7)),
    "big jobs 10%": (replace(P, big_share=0.1), (0, 1, 2)),
    "big jobs 40%": (replace(P, big_share=0.4), (0, 1, 2)),
    "H200 (141 GiB)": (replace(P, cluster="16x8xH200"), (0, 1, 2)),
    "4-GPU nodes": (
        replace(P, cluster="32x4xH100", gpus=(1, 2, 4), weights=(0.5, 0.3, 0.2)),
        (0, 1, 2),
    ),  # fmt: skip
}


def spread(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{max(xs):.3f} (mean {sum(xs) / len(xs):.3f})"


def topology() -> None:
    print("topology: JCT of placement/topology over best-fit's, both with the model on; "
          "GPU-h lost to spread, the same ratio")  # fmt: skip
    for name, (sc, seeds) in TOPOLOGY.items():
        t = time.perf_counter()
        rows = topology_bench(sc, seeds).rows
        for load in sc.loads:
            bf = [x for x in rows if x["load"] == load and x["model"] == "on"
                  and x["policy"] == "best-fit"]  # fmt: skip
            tp = [x for x in rows if x["load"] == load and x["policy"] == "topology"]
            jct = [b["jct_h"] / a["jct_h"] for a, b in zip(bf, tp, strict=True)]
            lost = [b["spread_gpu_h"] / a["spread_gpu_h"] for a, b in zip(bf, tp, strict=True)]
            print(f"  {name:28s} load {load:g}: JCT {spread(jct)}; lost {spread(lost)}")
        print(f"  {'':28s} {time.perf_counter() - t:.1f} s")


def pooling() -> None:
    print("pooling: jobs run and mean JCT with pooling (peer,host; at most 2x; overlap 0.9) "
          "over pooling off")  # fmt: skip
    for name, (sc, seeds) in POOLING.items():
        t = time.perf_counter()
        rows = pooling_bench(sc, seeds).rows
        for run in ("peer,host", "peer,host at most 2x", "peer,host overlap 0.9"):
            ran, jct = [], []
            for seed in seeds:
                off = next(x for x in rows if x["seed"] == seed and x["pooling"] == "off")
                on = next(x for x in rows if x["seed"] == seed and x["pooling"] == run)
                ran.append(on["ran"] / off["ran"])
                jct.append(on["jct_h"] / off["jct_h"])
            print(f"  {name:16s} {run:22s}: ran {spread(ran)}; JCT {spread(jct)}")
        print(f"  {'':16s} {time.perf_counter() - t:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("topology", "pooling"))
    args = ap.parse_args()
    if args.only in (None, "topology"):
        topology()
    if args.only in (None, "pooling"):
        pooling()


if __name__ == "__main__":
    main()
