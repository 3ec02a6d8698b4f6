"""How far the network bench's mean JCT could fall: the linear relaxation's bound
(``suanli.federation.bound``) on the fixed week, beside the four routers run in the same
process, per seed. A target below the bound is out of reach for any router; a target above it
is not proven reachable (docs/network.md, "How far it could go").

    PYTHONPATH=src python benchmarks/bench_network_bound.py [--seeds 0-2] [--block-s 1800]
    PYTHONPATH=src python benchmarks/bench_network_bound.py --variants [--seeds 7]
    PYTHONPATH=src python benchmarks/bench_network_bound.py --seeds 0 --placement
    PYTHONPATH=src python benchmarks/bench_network_bound.py --fast-max-gpus 1 --fast-max-gpus 7

``--variants`` runs the six variants of ``bench_network_variants.py`` instead of the fixed
week, on each of the seeds given. ``--fast-max-gpus N`` (repeatable) also gives the bound
over the routers that keep every job of more than N GPUs off the faster GPUs (docs/network.md,
"A class of routers"). ``--placement`` also runs router/suanli once more and
prints its mean JCT by width and by whether a GPU faster than the bulk's is allowed, and
where its jobs ran, by width and GPU speed (docs/network.md, "Where the time goes" and "What
the target would take").
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from suanli.bench.network import network_bench
from suanli.cli.bench import parse_seeds
from suanli.cli.bench_network import comparison
from suanli.core.model import MILLI
from suanli.federation.bound import fastest_allowed, jct_bound
from suanli.federation.engine import JobOutcome, federate
from suanli.federation.model import Federation, FedJob
from suanli.federation.scenario import NetworkScenario, build

TARGET = 0.7
"""The issue's JCT target: 30% below the best baseline's mean JCT."""


def anatomy(fed: Federation, jobs: list[FedJob], outcomes: list[JobOutcome], bulk: float) -> None:
    """What makes router/suanli's mean JCT: per width (one GPU, or more) and whether the job
    may use a GPU faster than the bulk's (its owner's regions, its data's residency, its GPU
    models and node size allow one), the jobs, their share of the mean JCT, and that share
    were each to run at once on the fastest GPU it may use (no limit on capacity)."""
    speed = dict(zip((fj.id for fj in jobs), fastest_allowed(fed, jobs), strict=True))
    rows: dict[tuple[str, bool], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for o in outcomes:
        job = o.fed.job
        s = speed[o.fed.id]
        r = rows[("one GPU" if job.gpu_demand_milli <= MILLI else "2+ GPUs", s > bulk)]
        r[0] += 1
        r[1] += (o.finish - job.submit) / 3600
        r[2] += job.runtime / s / 3600
    n = len(outcomes)
    print(f"     suanli's mean JCT, {sum(r[1] for r in rows.values()) / n:.3f} h, by width and "
          "whether a faster GPU than the bulk's is allowed:")  # fmt: skip
    for (w, fast), (k, jct, ideal) in sorted(rows.items()):
        print(f"       {w}, {'faster allowed' if fast else 'faster barred'}: {k:,} jobs, "
              f"{jct / n:.3f} h of the mean ({jct / k:.2f} h each); at once on the fastest "
              f"allowed: {ideal / n:.3f} h")  # fmt: skip


def placement(fed: Federation, jobs: list[FedJob], seed: int, bulk: float) -> None:
    """Where router/suanli ran the training jobs: per width (GPUs, eight and more together)
    and GPU speed (the run's reference runtime over its length), the jobs, their mean
    runtime at reference speed and the GPU-hours they held."""
    res = federate(fed, jobs, "suanli", seed=seed, reroute=True, split=True)
    anatomy(fed, jobs, res.outcomes, bulk)
    rows: dict[tuple[int, float], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for o in res.outcomes:
        job = o.fed.job
        if o.fed.online or len(o.parts) != 1 or not o.finish > o.start:
            continue
        width = job.gpu_demand_milli // MILLI
        r = rows[(min(width, 8), round(job.runtime / (o.finish - o.start), 1))]
        r[0] += 1
        r[1] += job.runtime / 3600
        r[2] += width * (o.finish - o.start) / 3600
    one = sum(fj.job.runtime for fj in jobs if not fj.online and fj.job.gpu_demand_milli == MILLI)
    print(f"     suanli's placement, seed {seed} (one-GPU jobs' work: {one / 3600:,.0f} "
          "reference GPU-hours):")  # fmt: skip
    for (w, speed), (n, ref, gh) in sorted(rows.items()):
        print(f"       {w}{'+' if w == 8 else ''} GPU at speed {speed}: {n:,} jobs, "
              f"{ref / n:.2f} h each at reference speed, {gh:,.0f} GPU-hours")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--block-s", type=float, default=1800.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--placement", action="store_true")
    ap.add_argument("--fast-max-gpus", type=int, action="append", default=[])
    args = ap.parse_args()
    if args.variants:
        from bench_network_variants import VARIANTS

        cases = list(VARIANTS.items())
    else:
        cases = [("fixed week", NetworkScenario())]
    t0 = time.perf_counter()
    print("case, seed: best baseline's mean JCT; suanli's; the relaxation's bound; its free and loose "
          "figures (hours), and each over the best baseline's")  # fmt: skip
    ratios = []
    for (case, sc), seed in ((c, s) for c in cases for s in parse_seeds(args.seeds)):
        t = time.perf_counter()
        r = network_bench((seed,), scenario=sc, workers=args.workers)
        (c,) = comparison(r.rows)
        best = min((row for row in r.rows if row["router"] != "suanli"), key=lambda x: x["jct_h"])
        ours = next(row for row in r.rows if row["router"] == "suanli")
        fed, jobs, _ = build(sc, seed=seed)
        b = jct_bound(fed, jobs, args.block_s)
        h = 3600.0
        base = best["jct_h"]
        ratios.append(b.mean_jct_s / h / base)
        print(f"  {case}, {seed}: {best['router']} {base:.3f} h; suanli {ours['jct_h']:.3f} h "
              f"({c['jct_ratio']:.3f}x); bound {b.mean_jct_s / h:.3f} h ({b.mean_jct_s / h / base:.3f}x)"
              f" against the target {TARGET * base:.3f} h ({TARGET:.2f}x): "
              f"{'out of reach' if b.mean_jct_s / h > TARGET * base else 'not proven out of reach'}; "
              f"free {b.free_s / h:.3f} h ({b.free_s / h / base:.3f}x), loose {b.loose_s / h:.3f} h "
              f"({b.loose_s / h / base:.3f}x)")  # fmt: skip
        fast = ", ".join(f"{w} GPU: {gh:,.0f}" for w, gh in b.fast_gpu_h.items())
        print(f"     bound's GPU-hours on the faster classes by job width: {fast}; "
              f"LP {b.variables:,} columns, {b.rows:,} rows, solved in {b.solve_s:.1f} s; "
              f"seed {time.perf_counter() - t:.1f} s")  # fmt: skip
        for n in args.fast_max_gpus:
            k = jct_bound(fed, jobs, args.block_s, fast_max_gpus=n).mean_jct_s / h
            print(f"     routers that keep jobs of more than {n} GPU(s) off the faster classes: "
                  f"bound {k:.3f} h ({k / base:.3f}x): "
                  f"{'out of reach' if k > TARGET * base else 'not proven out of reach'} "
                  "for them")  # fmt: skip
        if args.placement:
            placement(fed, jobs, seed, max(s for s, _, capped in b.classes if not capped))
    print(f"bound over the best baseline's mean JCT: {min(ratios):.3f}-{max(ratios):.3f}x over "
          f"{len(ratios)} runs ({time.perf_counter() - t0:.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
