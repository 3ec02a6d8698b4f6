"""Kueue's scheduler performance scenario (baseline), replayed through suanli's simulator.

The scenario (kubernetes-sigs/kueue, ``test/performance/scheduler/configs/baseline/
generator.yaml``): 5 cohorts × 6 cluster queues; each queue has a nominal quota of 20 units
and may borrow up to 100 more inside its cohort; per queue, 350 small workloads (1 unit,
200 ms, priority 50, one every 100 ms), 100 medium (5 units, 500 ms, priority 100, every
500 ms) and 50 large (20 units, 1 s, priority 200, every 1.2 s): 15,000 workloads. Kueue's
test has no nodes, quota alone decides; here the units are CPUs of one 600-CPU node (the sum
of the quotas), so capacity never binds before quota does.

Kueue's gates for it, from ``../shared/docs/ANCHORS.md`` (Kueue performance gate, baseline):
wall time ≤ 425 s, utilisation ≥ 50% of nominal quota, mean time to admission ≤ 23 s (large),
90 s (medium), 260 s (small). Kueue's times are a live control plane's; suanli's simulated
times are the policy's alone, and its wall time is the simulator's.

    PYTHONPATH=src python benchmarks/bench_kueue.py
"""

from __future__ import annotations

import time

import numpy as np

from suanli.core.model import ClusterSpec, Job, NodeSpec, PriorityClass, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.core.seams import OrderContext
from suanli.core.tenancy import CPU, QueueSpec, TenancySpec
from suanli.sim.engine import PolicySet, simulate

COHORTS, QUEUES = 5, 6
NOMINAL, BORROW = 20, 100
CLASSES = (  # name, count per queue, units, runtime s, priority, interval s
    ("small", 350, 1, 0.2, 50, 0.1),
    ("medium", 100, 5, 0.5, 100, 0.5),
    ("large", 50, 20, 1.0, 200, 1.2),
)
GATES = {"wall_s": 425.0, "min_usage_pct": 50.0, "small": 260.0, "medium": 90.0, "large": 23.0}


def scenario() -> tuple[ClusterSpec, list[Job], TenancySpec, OrderContext]:
    queues = []
    jobs = []
    for c in range(COHORTS):
        for q in range(QUEUES):
            name = f"cohort{c}-cq{q}"
            queues.append(
                QueueSpec(
                    name,
                    cohort=f"cohort{c}",
                    nominal={CPU: NOMINAL * 1000},
                    borrowing_limit={CPU: BORROW * 1000},
                )
            )
            for cls, count, units, runtime, _prio, interval in CLASSES:
                task = TaskRequest(gpus=0, cpu_milli=units * 1000)
                for k in range(count):
                    jobs.append(
                        Job(
                            f"{name}-{cls}-{k}",
                            submit=k * interval,
                            runtime=runtime,
                            task=task,
                            queue=name,
                            tenant=name,
                            priority_class=cls,
                        )
                    )
    capacity = COHORTS * QUEUES * NOMINAL
    node = NodeSpec("pool", 0, None, capacity * 1000, 1 << 30)
    classes = {cls: PriorityClass(cls, prio, preemptible=True) for cls, _, _, _, prio, _ in CLASSES}
    return (
        ClusterSpec("kueue-baseline", (node,)),
        jobs,
        TenancySpec(tuple(queues)),
        OrderContext(classes),
    )


def main() -> None:
    cluster, jobs, tenancy, ctx = scenario()
    t0 = time.perf_counter()
    # Kueue's scenario: reclaim within the cohort, lower priority preempted within a queue; its
    # workloads have no minimum runtime and no checkpoints.
    rules = PreemptionConfig(min_runtime=0.0, max_preemptions=1_000_000, restart_overhead=0.0)
    r = simulate(
        cluster, jobs, PolicySet("priority", "first-fit"), tenancy=tenancy, ctx=ctx,
        preemption=rules,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    rec = r.records
    by_id = {j.id: j for j in jobs}
    wait = rec.start - rec.submit
    cls = np.array([by_id[i].priority_class for i in rec.ids])
    queue = np.array([by_id[i].queue for i in rec.ids])
    units = np.array([by_id[i].task.cpu_milli / 1000 for i in rec.ids])
    end = float(np.nanmax(rec.finish))
    usage = [
        100 * float((units[m] * rec.held_s[m]).sum()) / (NOMINAL * end)
        for m in (queue == q.name for q in tenancy.queues)
    ]
    print(
        f"scenario=kueue-baseline  jobs={len(jobs)}  simulate_wall_s={wall:.2f}  "
        f"(Kueue gate {GATES['wall_s']:.0f} s)  simulated_makespan_s={end:.1f}  "
        f"finished={r.finished}  preemptions={r.preemptions}"
    )
    for name, *_ in CLASSES:
        m = cls == name
        print(
            f"  class={name:6s} mean_time_to_admission_s={np.nanmean(wait[m]):8.2f}  "
            f"p99={np.nanpercentile(wait[m], 99):8.2f}  (Kueue gate mean <= {GATES[name]:.0f} s)"
        )
    print(
        f"  queue_usage_of_nominal_pct min={min(usage):.1f} mean={np.mean(usage):.1f} "
        f"max={max(usage):.1f}  (Kueue gate min >= {GATES['min_usage_pct']:.0f}%)"
    )


if __name__ == "__main__":
    main()
