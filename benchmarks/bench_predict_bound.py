"""How close could *any* per-group runtime prediction bring QSSF to SJF with true runtimes?

``suanli bench predict``'s targets ask the best predictive order (QSSF) for a mean JCT within
1.08x of SJF-oracle's and a mean queueing delay within 0.14x of FIFO's, on Philly and on
philly-users. The online estimators fall short (docs/predict.md, "Figures"). This bench asks
what the *information* they predict from allows, by giving QSSF predictors that cheat in ways
no online estimator can, each still blind to the job's own runtime:

  qssf@hindsight-group  the median runtime of all the *other* jobs of the job's user and shape
                        in the whole trace, before and after it (the group's true median,
                        known in hindsight); the user's, then everyone's, where the group
                        has no other job
  qssf@hindsight-mean   the same groups' mean (ordering by the mean processing time is
                        Smith's rule under uncertainty; the median is what QSSF sorts on)
  qssf@hindsight-near   the median of the (up to) 4 jobs of the same user and shape submitted
                        nearest the job, 2 before and 2 after where there are (temporal
                        locality, known in hindsight: the jobs after it have not run yet)
  qssf@oracle           the true runtime: what QSSF's aging costs against SJF-oracle

beside the online ``qssf@history`` and the references FIFO and SJF-oracle, all without
backfill, at the load rule's time scale (found here as ``suanli bench predict`` finds it, or
given by ``--scale``). If even the hindsight predictors miss a target, no online predictor
from the same features reaches it: that is the bound the docs quote.

Every row is a replay in this process, one after another; the time of each is printed beside
FIFO's (the baseline measured in the same run).

Run: ``PYTHONPATH=src python benchmarks/bench_predict_bound.py [--trace philly-users]
[--trace philly] [--scale S] [--jobs N]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

from suanli.bench.predict import find_time_scale, load, prepare, replay
from suanli.core.model import Job
from suanli.core.registry import register
from suanli.predict.features import shape, who

NEAR = 4
"""Neighbours ``hindsight-near`` takes the median of (half before, half after)."""

_GROUP: dict[str, float] = {}
_MEAN: dict[str, float] = {}
_NEAR: dict[str, float] = {}


def _fill(jobs: Sequence[Job]) -> None:
    """The three hindsight tables for ``jobs`` (in submission order), by job id."""
    groups: dict[Hashable, list[Job]] = defaultdict(list)
    users: dict[Hashable, list[float]] = defaultdict(list)
    for j in jobs:
        groups[(who(j), shape(j))].append(j)
        users[who(j)].append(j.runtime)
    everyone = [j.runtime for j in jobs]
    for t in (_GROUP, _MEAN, _NEAR):
        t.clear()
    for members in groups.values():
        runtimes = [j.runtime for j in members]
        if len(members) == 1:  # alone in its group: the user's others, else everyone's
            j = members[0]
            u = list(users[who(j)])
            u.remove(j.runtime)
            others = u or [r for r in everyone if r != j.runtime] or [j.runtime]
            _GROUP[j.id] = _NEAR[j.id] = statistics.median(others)
            _MEAN[j.id] = statistics.fmean(others)
            continue
        a = np.sort(np.asarray(runtimes, np.float64))
        total = float(a.sum())
        m = len(a) - 1  # the others
        for i, j in enumerate(members):
            k = int(np.searchsorted(a, j.runtime))  # one of its copies in the sorted group
            lo, hi = (m - 1) // 2, m // 2  # the others' median positions, then in ``a``:
            _GROUP[j.id] = (a[lo + (lo >= k)] + a[hi + (hi >= k)]) / 2
            _MEAN[j.id] = (total - j.runtime) / m
            before = runtimes[max(0, i - NEAR // 2) : i]
            after = runtimes[i + 1 : i + 1 + NEAR - len(before)]
            if len(before) + len(after) < NEAR:
                before = runtimes[max(0, i - (NEAR - len(after))) : i]
            _NEAR[j.id] = statistics.median(before + after)


class _Hindsight:
    """A point predictor from a table filled before the replay (every quantile the same)."""

    table: dict[str, float] = {}

    def quantile(self, job: Job, q: float) -> float:
        return self.table[job.id]

    def duration(self, job: Job) -> float:
        return self.table[job.id]

    def learn(self, job: Job, runtime: float, at: float) -> None:
        pass


@register("runtime", "hindsight-group")
class HindsightGroup(_Hindsight):
    table = _GROUP


@register("runtime", "hindsight-mean")
class HindsightMean(_Hindsight):
    table = _MEAN


@register("runtime", "hindsight-near")
class HindsightNear(_Hindsight):
    table = _NEAR


ROWS = (
    "fifo+best-fit",
    "sjf-gpu@oracle+best-fit",
    "qssf@oracle+best-fit",
    "qssf@history+best-fit",
    "qssf@hindsight-group+best-fit",
    "qssf@hindsight-mean+best-fit",
    "qssf@hindsight-near+best-fit",
)


def run(spec: str, scale: float | None, first: int | None) -> None:
    trace, jobs = load(spec, None, first)
    t0 = time.perf_counter()
    if scale is None:
        ts = find_time_scale(trace, jobs)
        scale = ts.scale
        print(f"{spec}: {len(jobs):,} jobs; {ts.line()} ({time.perf_counter() - t0:.1f} s)")
    else:
        print(f"{spec}: {len(jobs):,} jobs; time scale {scale:g} (given)")
    p = prepare(trace, scale, jobs)
    _fill(p.jobs)
    rows = {}
    for policy in ROWS:
        rows[policy] = replay(p, policy, start_estimates=False).row
    fifo, sjf = rows["fifo+best-fit"], rows["sjf-gpu@oracle+best-fit"]
    print(
        f"  {'policy':32} {'JCT h':>7} {'queue h':>8} {'JCT/SJF':>8} {'queue/FIFO':>10} "
        f"{'P50 rel err':>11} {'s':>6} {'s/FIFO s':>8}"
    )
    for policy, r in rows.items():
        rel = f"{r.median_rel_error:.2f}" if r.median_rel_error == r.median_rel_error else "-"
        print(
            f"  {policy:32} {r.jct_mean / 3600:7.2f} {r.queue_mean / 3600:8.2f} "
            f"{r.jct_mean / sjf.jct_mean:8.3f} {r.queue_mean / fifo.queue_mean:10.3f} "
            f"{rel:>11} {r.wall_s:6.1f} {r.wall_s / fifo.wall_s:8.2f}"
        )
    print("  targets: JCT/SJF <= 1.08, queue/FIFO <= 0.14")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="append", help="philly-users (default) and/or philly")
    ap.add_argument("--scale", type=float, help="time scale (default: found by the load rule)")
    ap.add_argument("--jobs", type=int, help="the first N jobs only")
    args = ap.parse_args(argv)
    for spec in args.trace or ["philly-users", "philly"]:
        run(spec, args.scale, args.jobs)


if __name__ == "__main__":
    main()
