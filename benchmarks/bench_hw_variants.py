"""The topology, memory-pooling, DLRM and defragmentation benches of ``suanli bench
hardware`` on variants of their scenarios: other seeds, other mixes, other clusters, other
loads and budgets. Each line gives, over the variant's seeds, the spread (min-max, mean) of
the model-aware run against its baseline in the same run: ``placement/topology`` against
best-fit with the topology model on; pooling against pooling off; disaggregated serving
against co-located; ``preemption/defrag`` against checkpoint-aware.

    PYTHONPATH=src python benchmarks/bench_hw_variants.py [--only topology|pooling|dlrm|defrag]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from suanli.bench.defrag import CHECKPOINT_S, pair
from suanli.bench.dlrm import DlrmScenario, rows_for, trace_path
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

D = DlrmScenario()
DAY = 86400.0
DLRM = {  # name: (scenario, seeds: the draw of services where only a share is replayed)
    "60% of the services": (replace(D, apps_share=0.6), (0, 1, 2)),
    "30% of the services": (replace(D, apps_share=0.3), (0, 1, 2)),
    "days 0-15": (replace(D, window=(0.0, 15 * DAY)), (0,)),
    "days 15-31": (replace(D, window=(15 * DAY, 31 * DAY)), (0,)),
    "first-fit": (replace(D, placement="first-fit"), (0,)),
    "dot-product": (replace(D, placement="dot-product"), (0,)),
    "no density limits": (replace(D, density=False), (0,)),
    "8 NICs a CPU node": (replace(D, cpu_node=replace(D.cpu_node, nics=8)), (0,)),
    # openb's 8-GPU G3 servers and its largest CPU nodes (Alibaba 2023): the 192-core CN
    # instances fit neither and are refused in both modes.
    "openb G3 + 104-core CPU nodes": (
        replace(
            D,
            gpu_node=replace(D.gpu_node, cpu=128, memory_gib=768),
            cpu_node=replace(D.cpu_node, cpu=104, memory_gib=768),
        ),
        (0,),
    ),  # fmt: skip
}

DEFRAG = {  # name: (scenario, load, moves an hour, seeds)
    "load 0.85, 6 an hour, seeds 3-7": (T, 0.85, 6.0, (3, 4, 5, 6, 7)),
    "load 0.7": (T, 0.7, 6.0, (0, 1, 2)),
    "load 0.95": (T, 0.95, 6.0, (0, 1, 2)),
    "2 moves an hour": (T, 0.85, 2.0, (0, 1, 2)),
    "20 moves an hour": (T, 0.85, 20.0, (0, 1, 2)),
    "gangs 60% of jobs": (TOPOLOGY["gangs 60% of jobs"][0], 0.85, 6.0, (0, 1, 2)),
    "36x8, a domain a rack": (TOPOLOGY["36x8, a domain a rack"][0], 0.85, 6.0, (0, 1, 2)),
}


def spread(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{max(xs):.3f} (mean {sum(xs) / len(xs):.3f})"


def topology() -> None:
    print("topology: JCT of placement/topology (alone, then with gangs waiting 300 s or 3600 s "
          "for one domain or rack) over best-fit's, all with the model on; GPU-h lost to "
          "spread, the same ratio")  # fmt: skip
    for name, (sc, seeds) in TOPOLOGY.items():
        t = time.perf_counter()
        rows = topology_bench(sc, seeds).rows
        for load in sc.loads:
            bf = [x for x in rows if x["load"] == load and x["model"] == "on"
                  and x["policy"] == "best-fit"]  # fmt: skip
            for policy in ("topology", *(f"topology+wait {w:g}s" for w in sc.waits)):
                tp = [x for x in rows if x["load"] == load and x["policy"] == policy]
                jct = [b["jct_h"] / a["jct_h"] for a, b in zip(bf, tp, strict=True)]
                lost = [b["spread_gpu_h"] / a["spread_gpu_h"] for a, b in zip(bf, tp, strict=True)]
                print(f"  {name:28s} load {load:g} {policy:20s}: JCT {spread(jct)}; "
                      f"lost {spread(lost)}")  # fmt: skip
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


def dlrm() -> None:
    from suanli.traces.dlrm import load_dlrm_instances

    print("dlrm: disaggregated over co-located serving: GPUs the fleet needed; GPU allocation "
          "and stranded GPUs of each; the disaggregated CPU nodes over their bound")  # fmt: skip
    trace = load_dlrm_instances(trace_path())
    for name, (sc, seeds) in DLRM.items():
        t = time.perf_counter()
        gpus, alloc_co, alloc_dis, strand_co, strand_dis, cpu = [], [], [], [], [], []
        for seed in seeds:
            co, dis = rows_for(trace, sc, seed)
            cpu.append(dis["cpu_nodes"] / dis["cpu_nodes_bound"])
            gpus.append(dis["gpus"] / co["gpus"])
            alloc_co.append(co["gpu_alloc"])
            alloc_dis.append(dis["gpu_alloc"])
            strand_co.append(co["stranded_gpus"])
            strand_dis.append(dis["stranded_gpus"])
        print(f"  {name:30s}: GPUs {spread(gpus)}; GPU allocation {spread(alloc_co)} -> "
              f"{spread(alloc_dis)}; stranded {spread(strand_co)} -> {spread(strand_dis)}; "
              f"CPU nodes / bound {spread(cpu)} "
              f"(refused {co['refused']:,}; {time.perf_counter() - t:.1f} s)")  # fmt: skip


def defrag() -> None:
    import numpy as np

    from suanli.bench.topology import topology_workload
    from suanli.config.cluster import load_cluster
    from suanli.core.speed import native_basis

    print("defrag: gang wait and mean JCT with preemption/defrag over checkpoint-aware; "
          "moves and their GPU-h")  # fmt: skip
    for name, (sc, load, budget, seeds) in DEFRAG.items():
        t = time.perf_counter()
        cluster = load_cluster(sc.cluster)
        wait, jct, moves, cost = [], [], [], []
        for seed in seeds:
            jobs, _ = topology_workload(sc, seed, load)
            jobs = [replace(j, checkpoint_interval=CHECKPOINT_S) for j in jobs]
            gang = np.array([j.tasks > 1 for j in jobs])
            off, on = pair(name, cluster, jobs, native_basis(cluster), gang, seed, budget)
            wait.append(on["gang_wait_ratio"])
            jct.append(on["jct_ratio"])
            moves.append(on["moves"])
            cost.append(on["move_gpu_h"])
        print(f"  {name:34s}: gang wait {spread(wait)}; JCT {spread(jct)}; moves "
              f"{min(moves)}-{max(moves)}, {min(cost):.1f}-{max(cost):.1f} GPU-h "
              f"({time.perf_counter() - t:.1f} s)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("topology", "pooling", "dlrm", "defrag"))
    args = ap.parse_args()
    if args.only in (None, "topology"):
        topology()
    if args.only in (None, "pooling"):
        pooling()
    if args.only in (None, "dlrm"):
        dlrm()
    if args.only in (None, "defrag"):
        defrag()


if __name__ == "__main__":
    main()
