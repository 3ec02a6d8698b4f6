"""Multi-tenant Philly: static partitioning, FIFO, Kueue-style and Slurm-style sharing, suanli.

The workload: Philly's 82,247 jobs (``suanli.traces.resolve_trace("philly")``, Pollux
artifact) on its machine list (321 × 2 K80 + 231 × 8 P40 GPUs) with the durations recorded
on those GPUs, arrivals compressed so that the offered load is ``--load`` (0.96: × 0.1566;
as recorded the trace asks for a seventh of the machines and nothing waits), or by
``--time-scale``. Philly records neither priorities nor
checkpoints, so each job draws a priority class from ``TRAINING_PRIORITY_MIX`` (seed 0: high
≈ 0.54, normal ≈ 0.23, spot ≈ 0.23; ``suanli.workload.priorities``) and checkpoints every
1,800 s (an assumption). The 15 virtual clusters are the tenants; each is guaranteed a share
of the GPUs in proportion to the GPU-hours its jobs ask (``proportional_tenancy``). Those
nominal quotas are every configuration's entitlements, also where the scheduler runs without
quotas.

Configurations (all with a scheduling cycle every ``--cycle-interval`` seconds, 60 by default):

* ``static``: each tenant only its quota (``proportional_tenancy(..., "static")``), FIFO,
  best-fit, no preemption;
* ``fifo-pool``: no quotas, FIFO on the whole pool, best-fit;
* ``kueue``: one cohort lending idle quota (``"shared"``), priority order, best-fit, and
  ``PreemptionConfig()``: reclaim of lent quota and preemption of lower priorities;
* ``slurm``: shared quotas, fair share (decayed usage) with EASY backfill
  (``fair-share/easy+best-fit``; plain ``fair-share+best-fit`` where the policy set does not
  know ``/easy``, as printed), no preemption;
* ``suanli``: the best of ``suanli_candidates()`` by the issue's criteria (beat static on GPU
  allocation and mean JCT, every tenant's entitlement met >= ``--share-threshold``, beat
  fifo-pool on the P99 queueing delay of high-priority jobs), ranked by how many criteria
  hold, then the smallest entitlement met, then mean JCT. By default only ``SUANLI_DEFAULT``
  runs (the winner of the last search) to keep the run short; ``--search`` runs them all.

Entitlement met (``suanli.sim.fairness``): per tenant, the share of ``min(quota, demand)``
it held over the arrival window; Jain's index over the tenants; the smallest one is shown
with its tenant.

The 60 s cycle is Slurm's default ``sched_interval``; it is also what keeps the preempting
runs affordable: with a cycle at every event the ``kueue`` run alone takes about two minutes.

    PYTHONPATH=src python benchmarks/bench_philly_tenancy.py [--search] [--load 0.96 | --time-scale X]

The figures, and what changed when Philly's durations were read on its own GPUs (they had
been stretched 2.25 times), are in ``docs/tenancy.md`` ("Philly: five ways to share one pool").
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from suanli.cli.simulate import scale_arrivals
from suanli.core.model import (
    DEFAULT_PRIORITY_CLASSES,
    MILLI,
    ClusterSpec,
    Job,
    PriorityClass,
    SpecError,
)
from suanli.core.preemption import PreemptionConfig
from suanli.core.seams import OrderContext
from suanli.core.speed import REFERENCE, SpeedBasis
from suanli.core.tenancy import GPU, TenancySpec
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.fairness import fairness
from suanli.traces import resolve_trace
from suanli.workload.duty import apply_duty, trace_default
from suanli.workload.priorities import (
    DEFAULT_CHECKPOINT_INTERVAL,
    TRAINING_PRIORITY_MIX,
    assign_priorities,
    with_checkpoints,
)
from suanli.workload.quotas import proportional_tenancy
from suanli.workload.synthetic import offered_load

CLASSES = ("high", "normal", "spot")
HOUR, DAY = 3600.0, 86_400.0


def has_easy() -> bool:
    """Whether the policy sets know EASY backfill (``QUEUE/easy+PLACEMENT``)."""
    try:
        return PolicySet.parse("fair-share/easy+best-fit").label == "fair-share/easy+best-fit"
    except SpecError:
        return False


@dataclass(frozen=True)
class Config:
    """One configuration: policy set, quotas, preemption."""

    name: str
    policy: str
    quotas: str | None  # "static", "shared" or None (no quotas)
    preempt: bool = False
    reserve: float = 0.0
    """Share of each nominal quota a tenant keeps for itself: its lending limit is the rest,
    rounded down to whole GPUs (a tenant with a quota under 10 GPUs lends nothing at 0.9)."""
    reclaim_high: bool = False
    """``high`` jobs are preemptible: only reclaim can take them, when their tenant borrows
    (there are no ``online`` jobs here to outrank them)."""

    def describe(self) -> str:
        parts = [self.policy]
        parts.append(
            {"static": "static quotas", "shared": "shared quotas"}.get(
                self.quotas or "", "no quotas"
            )
        )
        if self.reserve:
            parts[-1] += f" (each lends at most {1 - self.reserve:.0%} of its quota)"
        if self.preempt:
            parts.append("preemption (reclaim + lower priority)")
        if self.reclaim_high:
            parts.append("high reclaimable when borrowing")
        return ", ".join(parts)


def baselines(slurm_policy: str) -> list[Config]:
    return [
        Config("static", "fifo+best-fit", "static"),
        Config("fifo-pool", "fifo+best-fit", None),
        # Kueue reclaims any borrowing workload whatever its priority: high is reclaimable.
        Config("kueue", "priority+best-fit", "shared", preempt=True, reclaim_high=True),
        Config("slurm", slurm_policy, "shared"),
    ]


SUANLI_DEFAULT = Config(
    "suanli", "fair-share+best-fit", "shared", preempt=True, reserve=0.9, reclaim_high=True
)
"""The winner of the last ``--search`` (see the module docstring)."""


def suanli_candidates(easy: bool) -> list[Config]:
    """What ``--search`` tries (``/easy`` ones only where the policy sets know it)."""
    out = [
        Config("suanli", "fair-share+best-fit", "shared", preempt=True),
        Config("suanli", "drf+best-fit", "shared", preempt=True),
        Config("suanli", "fair-share+best-fit", "shared", preempt=True, reclaim_high=True),
        Config("suanli", "fair-share+best-fit", "shared", True, reserve=0.8, reclaim_high=True),
        SUANLI_DEFAULT,
        Config("suanli", "fair-share+frag-balance", "shared", True, reserve=0.9, reclaim_high=True),
    ]
    if easy:
        out.append(
            Config(
                "suanli", "fair-share/easy+best-fit", "shared", True, reserve=0.9, reclaim_high=True
            )
        )
    return out


# ------------------------------------------------------------------------------- workload


@dataclass
class State:
    cluster: ClusterSpec
    jobs: list[Job]
    static: TenancySpec
    shared: TenancySpec
    cycle_interval: float
    threshold: float
    nominal: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    basis: SpeedBasis = REFERENCE


_STATE: State | None = None


def time_scale_for(load: float) -> float:
    """The arrival compression that makes Philly's recorded GPU time (on its own machines) an
    offered ``load`` of its GPUs."""
    loaded = resolve_trace("philly")
    return offered_load(loaded.jobs, loaded.cluster) / load


def setup(time_scale: float, seed: int, interval: float, cycle: float, threshold: float) -> State:
    """Load Philly, compress it, draw priorities, duties and checkpoints, derive the quotas."""
    global _STATE
    loaded = resolve_trace("philly")
    jobs = apply_duty(scale_arrivals(loaded.jobs, time_scale), trace_default(loaded.kind), seed)
    jobs = with_checkpoints(assign_priorities(jobs, TRAINING_PRIORITY_MIX, seed), interval)
    cluster = loaded.cluster
    static = proportional_tenancy(jobs, cluster, "static")
    shared = proportional_tenancy(jobs, cluster, "shared")
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j.queue] = counts.get(j.queue, 0) + 1
    nominal = {q.name: q.nominal[GPU] // MILLI for q in static.queues}
    _STATE = State(cluster, jobs, static, shared, cycle, threshold, nominal, counts, loaded.basis)
    return _STATE


def _init_worker(args: tuple[float, int, float, float, float]) -> None:
    if _STATE is None:  # not forked from the parent: build the workload here
        setup(*args)


def tenancy_for(cfg: Config, st: State) -> TenancySpec | None:
    if cfg.quotas is None:
        return None
    spec = st.static if cfg.quotas == "static" else st.shared
    if not cfg.reserve:
        return spec
    queues = []
    for q in spec.queues:
        lend = int(q.nominal[GPU] // MILLI * (1.0 - cfg.reserve)) * MILLI
        queues.append(dataclasses.replace(q, lending_limit={GPU: lend}))
    return TenancySpec(tuple(queues))


# ------------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class Row:
    cfg: Config
    label: str
    allocation: float
    utilisation: float
    jct_mean: float
    jct_p99: float
    wait: dict[str, tuple[float, float]]
    jain: float
    min_met: float
    min_queue: str
    met: dict[str, float]
    preemptions: int
    lost_gpu_hours: float
    unfinished: int
    wall_s: float


def run(cfg: Config) -> Row:
    st = _STATE
    assert st is not None
    ctx = None
    if cfg.reclaim_high:
        classes = dict(DEFAULT_PRIORITY_CLASSES)
        classes["high"] = PriorityClass("high", classes["high"].value, preemptible=True)
        ctx = OrderContext(classes)
    t = time.perf_counter()
    res = simulate(
        st.cluster,
        st.jobs,
        PolicySet.parse(cfg.policy),
        tenancy=tenancy_for(cfg, st),
        preemption=PreemptionConfig() if cfg.preempt else None,
        cycle_interval=st.cycle_interval,
        ctx=ctx,
        speed_basis=st.basis,
    )
    wall = time.perf_counter() - t
    f = fairness(res, st.jobs, st.static)
    owed = {q: x for q, x in f.met.items() if f.entitled_gpu_hours[q] > 0}
    min_queue = min(owed, key=lambda q: (owed[q], q)) if owed else "-"
    return Row(
        cfg=cfg,
        label=res.label,
        allocation=res.gpu_allocation,
        utilisation=res.gpu_utilisation,
        jct_mean=res.jct.mean,
        jct_p99=res.jct.p99,
        wait={c: (g.wait.mean, g.wait.p99) for c, g in res.by_class.items()},
        jain=f.jain,
        min_met=f.min_met,
        min_queue=min_queue,
        met=dict(f.met),
        preemptions=res.preemptions,
        lost_gpu_hours=res.lost_gpu_hours,
        unfinished=res.unfinished,
        wall_s=wall,
    )


# ------------------------------------------------------------------------------- criteria


def criteria(row: Row, static: Row, pool: Row, threshold: float) -> list[tuple[str, bool]]:
    """The issue's four criteria for ``row``, each with the numbers and whether it holds."""
    high, pool_high = row.wait["high"][1], pool.wait["high"][1]
    below = sum(1 for x in row.met.values() if x < threshold)
    return [
        (
            f"GPU allocation {row.allocation:.1%} > static {static.allocation:.1%}",
            row.allocation > static.allocation,
        ),
        (
            f"mean JCT {row.jct_mean / HOUR:.1f} h < static {static.jct_mean / HOUR:.1f} h",
            row.jct_mean < static.jct_mean,
        ),
        (
            f"every tenant's entitlement met >= {threshold:.2f}: min {row.min_met:.3f} "
            f"({row.min_queue}), {below} of {len(row.met)} tenants below",
            row.min_met >= threshold,
        ),
        (
            f"P99 queueing delay of high {high / HOUR:.1f} h < fifo-pool {pool_high / HOUR:.1f} h",
            high < pool_high,
        ),
    ]


def rank(row: Row, static: Row, pool: Row, threshold: float) -> tuple[int, float, float]:
    """Larger is better: criteria held, smallest entitlement met, then shorter mean JCT."""
    held = sum(ok for _, ok in criteria(row, static, pool, threshold))
    return (held, row.min_met, -row.jct_mean)


# ------------------------------------------------------------------------------- output


def table(rows: Sequence[Row]) -> str:
    head = [
        "configuration",
        "policy",
        "GPU alloc %",
        "GPU util %",
        "JCT mean (h)",
        "JCT P99 (d)",
        *(f"wait {c} mean / P99 (h)" for c in CLASSES),
        "Jain",
        "min entitlement met",
        "preemptions",
        "lost GPU-h",
        "wall s",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        waits = [
            f"{r.wait[c][0] / HOUR:.1f} / {r.wait[c][1] / HOUR:.1f}" if c in r.wait else "-"
            for c in CLASSES
        ]
        cells = [
            r.cfg.name,
            r.label,
            f"{r.allocation * 100:.1f}",
            f"{r.utilisation * 100:.1f}",
            f"{r.jct_mean / HOUR:.1f}",
            f"{r.jct_p99 / DAY:.2f}",
            *waits,
            f"{r.jain:.3f}",
            f"{r.min_met:.3f} ({r.min_queue})",
            f"{r.preemptions:,}",
            f"{r.lost_gpu_hours:,.0f}",
            f"{r.wall_s:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def met_table(rows: Sequence[Row], st: State) -> str:
    head = ["tenant (queue)", "jobs", "quota GPUs", *(r.cfg.name for r in rows)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for q in sorted(st.nominal, key=lambda q: -st.nominal[q]):
        cells = [q, f"{st.counts.get(q, 0):,}", str(st.nominal[q])]
        cells += [f"{r.met[q]:.3f}" for r in rows]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument(
        "--load",
        type=float,
        default=0.96,
        help="offered load the arrivals are compressed to (0.96); --time-scale overrides",
    )
    ap.add_argument("--time-scale", type=float, default=None, help="arrival compression")
    ap.add_argument("--seed", type=int, default=0, help="seed of the priority draw (0)")
    ap.add_argument(
        "--checkpoint", type=float, default=DEFAULT_CHECKPOINT_INTERVAL, help="seconds (1800)"
    )
    ap.add_argument("--cycle-interval", type=float, default=60.0, help="seconds (60)")
    ap.add_argument("--share-threshold", type=float, default=0.95, help="entitlement met (0.95)")
    ap.add_argument("--search", action="store_true", help="run every suanli candidate")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    if args.time_scale is None:
        if not args.load > 0:
            ap.error("--load must be > 0")
        args.time_scale = time_scale_for(args.load)
    if not (0 < args.time_scale and args.cycle_interval >= 0 and args.workers >= 1):
        ap.error("--time-scale must be > 0, --cycle-interval >= 0, --workers >= 1")

    t0 = time.perf_counter()
    setup_args = (
        args.time_scale,
        args.seed,
        args.checkpoint,
        args.cycle_interval,
        args.share_threshold,
    )
    st = setup(*setup_args)
    easy = has_easy()
    slurm_policy = "fair-share/easy+best-fit" if easy else "fair-share+best-fit"
    print(
        f"philly: {len(st.jobs):,} jobs, {st.cluster.total_gpus:,} GPUs, {len(st.nominal)} tenants; "
        f"arrivals x {args.time_scale:.4g} (offered load "
        f"{offered_load(st.jobs, st.cluster):.3f} of its GPUs, durations as recorded on them); "
        f"GPU duty {trace_default('philly').label} (Jeon et al., ATC'19); priorities {dict((n, round(s, 3)) for n, s in TRAINING_PRIORITY_MIX)} "
        f"(seed {args.seed}); checkpoints every {args.checkpoint:g} s; cycle every {args.cycle_interval:g} s"
    )
    print(
        f"slurm: {slurm_policy} "
        + ("(EASY backfill)" if easy else "(this policy set has no /easy mode: plain fair share)")
    )
    candidates = suanli_candidates(easy) if args.search else [SUANLI_DEFAULT]
    configs = baselines(slurm_policy) + candidates
    # Longest first (the preempting ones), to keep both workers busy to the end.
    order = sorted(
        range(len(configs)), key=lambda i: (not configs[i].preempt, configs[i].reserve == 0)
    )
    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    results: dict[int, Row] = {}
    with ProcessPoolExecutor(
        args.workers, mp_context=ctx, initializer=_init_worker, initargs=(setup_args,)
    ) as ex:
        futures = {i: ex.submit(run, configs[i]) for i in order}
        for i in order:
            results[i] = futures[i].result()
    rows = [results[i] for i in range(len(configs))]
    static, pool = rows[0], rows[1]
    base, cands = rows[:4], rows[4:]
    best = max(cands, key=lambda r: rank(r, static, pool, args.share_threshold))

    if args.search:
        print("\nsuanli candidates:\n")
        print(table(cands))
        for r in cands:
            held = sum(ok for _, ok in criteria(r, static, pool, args.share_threshold))
            print(
                f"  {r.cfg.describe()}: {held} of 4 criteria, min entitlement met {r.min_met:.3f}"
            )
    print(f"\nsuanli = {best.cfg.describe()}\n")
    print(table([*base, best]))
    print("\nentitlement met per tenant:\n")
    print(met_table([*base, best], st))
    print("\nissue criteria for suanli:")
    for text, ok in criteria(best, static, pool, args.share_threshold):
        print(f"  [{'yes' if ok else 'NO '}] {text}")
    unfinished = sum(r.unfinished for r in rows)
    if unfinished:
        print(f"\n{unfinished} jobs unfinished over all runs")
    print(f"\ntotal wall {time.perf_counter() - t0:.0f} s ({args.workers} workers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
