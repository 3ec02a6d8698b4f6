"""The room the network bench's cost target would need: for a baseline's run, each GPU pool's
price of a reference hour of work (its GPU-hour's price over its speed), the GPU-hours it
left unused over the run's span, and what the bill would save were every unused hour of the
pools cheaper than the pool that did most of the work to run work moved off that pool
(docs/network.md, "The cost target"). Generous on purpose: it ignores when those hours fall,
who may use them and how long the jobs that would fill them run, so it is a count of the
room, not a bound.

    PYTHONPATH=src python benchmarks/bench_network_room.py [--seeds 0] [--router cheapest]
    PYTHONPATH=src python benchmarks/bench_network_room.py --variants --seeds 7

``--variants`` counts on the six variants of ``bench_network_variants.py`` instead of the
fixed week (a line each, without the pools).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from suanli.bench.network import ledger, measure
from suanli.core.model import MILLI
from suanli.federation.engine import FedResult, federate
from suanli.federation.scenario import NetworkScenario, build
from suanli.federation.settle import bill


@dataclass
class Pool:
    """One region's GPUs of one model, and what a run did with them."""

    region: str
    model: str
    gpus: int
    speed: float
    price: float
    """USD a GPU-hour."""
    held_h: float
    """GPU-hours the run's attempts held."""
    unused_h: float = 0.0
    saves: float = 0.0

    @property
    def ref_price(self) -> float:
        """USD a reference hour of work: a GPU-hour's price over the GPU's speed."""
        return self.price / self.speed


def pools(res: FedResult) -> list[Pool]:
    """Per (region, GPU model) of a federation run: its GPUs, speed, price and the GPU-hours
    its attempts held."""
    out = []
    for m in res.members:
        (_, starts, ends), use = m.rep.log.arrays()
        held = use.per_model(use.gpu_milli / MILLI * (ends - starts) / 3600.0)
        cluster = m.region.cluster
        speed = {g.name: g.speed for g in cluster.gpu_models}
        out += [Pool(m.name, model, gpus, speed[model], m.region.prices[model],
                     held.get(model, 0.0))
                for model, gpus in sorted(cluster.gpus_by_model.items())]  # fmt: skip
    return out


def room(rows: list[Pool], span_h: float) -> tuple[Pool, float]:
    """The pool that did most of the work (GPU-hours at its speed), whose price of a
    reference hour sets what moved work would have cost; each cheaper pool gets its
    ``unused_h`` over ``span_h`` and what running moved work in them ``saves`` (at its speed,
    the difference of the two prices). Returns that pool and the total saving."""
    main_pool = max(rows, key=lambda r: r.held_h * r.speed)
    total = 0.0
    for r in rows:
        if r.ref_price < main_pool.ref_price:
            r.unused_h = max(0.0, r.gpus * span_h - r.held_h)
            r.saves = r.unused_h * r.speed * (main_pool.ref_price - r.ref_price)
            total += r.saves
    return main_pool, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--router", default="cheapest", help="the baseline whose run is counted")
    ap.add_argument("--variants", action="store_true")
    args = ap.parse_args()
    if args.variants:
        from bench_network_variants import VARIANTS

        cases = list(VARIANTS.items())
    else:
        cases = [("fixed week", NetworkScenario())]
    t0 = time.perf_counter()
    bills = []
    for (case, sc), seed in ((c, int(s)) for c in cases for s in args.seeds.split(",")):
        fed, jobs, info = build(sc, seed=seed)
        res = federate(fed, jobs, args.router, seed=seed)
        b = bill(res, fed, info["homes"])  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as d:
            cost = measure(res, fed, ledger(b, Path(d) / "ledger.db"), b)["cost_usd"]
        span_h = res.horizon / 3600.0
        rows = pools(res)
        main_pool, saving = room(rows, span_h)
        bills.append(1 - saving / cost)
        print(f"{case}, seed {seed}: {args.router}: cost ${cost:,.0f} over {span_h:.1f} h; most "
              f"work on {main_pool.region} {main_pool.model} (${main_pool.ref_price:.3f} a "
              "reference hour)")  # fmt: skip
        for r in rows if not args.variants else ():
            line = (f"  {r.region:<13} {r.model:<13} {r.gpus:>5} GPUs  speed {r.speed:<4} "
                    f"${r.price:.3f}/GPU-h  ${r.ref_price:.3f}/ref-h  held {r.held_h:>9,.0f} of "
                    f"{r.gpus * span_h:>9,.0f} GPU-h")  # fmt: skip
            if r.saves:
                line += f"  unused {r.unused_h:>8,.0f}: saves ${r.saves:>9,.0f}"
            print(line)
        print(f"  every unused cheaper hour filled: saves ${saving:,.0f}, the bill "
              f"{bills[-1]:.3f}x; the cost target (0.8x) needs ${0.2 * cost:,.0f}")  # fmt: skip
    print(f"the bill with every unused cheaper hour filled: {min(bills):.3f}-{max(bills):.3f}x of "
          f"{args.router}'s over {len(bills)} run(s); {time.perf_counter() - t0:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
