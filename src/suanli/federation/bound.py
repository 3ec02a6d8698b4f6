"""A lower bound of the mean JCT any router could reach on a federation's jobs: the optimum
of a linear relaxation of every schedule the federation could run, solved with HiGHS
(SciPy). No router, online or with hindsight of every runtime, can beat it; a target below it
is out of reach.

**Classes.** The federation's GPUs are grouped by speed (``GpuModel.speed``) across regions.
The *bulk* class is the one with the most speed-weighted GPUs. Classes faster than it are
*capacitated*; the rest are folded into one *free* option: the job starts on arrival at the
fastest of them it may use, with no limit on how many run there at once.

**Time.** Time is cut into blocks of ``block_s``. For a capacitated class ``c``, a job ``j``
(arrival ``a``, GPUs ``g``, runtime ``q = r / s_c`` there) has one variable per block of its
window ``[a, a + f]`` (``f``: its runtime on the free option): the share of its run done in
that block. A run there from ``s`` to ``s + q`` gives those shares, and

- its completion is its mean busy time plus ``q / 2``, and its mean busy time is at least
  each block's start (or ``a``) weighted by the shares, so ``JCT ≥ Σ y (e − a + q/2)``;
  also ``JCT ≥ Σ y q``;
- a class's GPU-hours in a block are at most its GPUs times the block (a job counted at the
  GPUs of its gang minimum, the least it holds once started);
- a job runs at most the block's time (within its window) in a block.

A run on a capacitated class that ends after ``a + f`` is no better than the free option, so
the window loses no schedule worth having. A job that may use capacitated classes only has
a *late* option instead: its window is twice its runtime on the slowest of them and a block,
and a run ending after it counts as ending at its end.

**What the relaxation drops** (each only lowers the bound): nodes (a class is one pool of
GPUs; only a job's per-task GPUs must fit some node of the class where it may run), the
bulk's and slower classes' capacity, the data's moves, outages, budgets, and a divisible
job's split: it counts as two halves of its GPUs, each weighing half in the mean.

The bound is loose where the relaxation is: it proves a target out of reach when it passes
it, and proves nothing when it does not.

**A class of routers.** With ``fast_max_gpus``, jobs wider than it lose their capacitated
options: the bound then holds for every router that keeps such jobs off the faster GPUs (as
a router that saves those GPUs for narrow jobs does), and proves a target out of reach for
that kind of router.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.core.model import MILLI, SpecError
from suanli.federation.model import Federation, FedJob, not_allowed, too_far

__all__ = ["JctBound", "fastest_allowed", "jct_bound"]


@dataclass(frozen=True)
class JctBound:
    """The bound, the simpler figures around it, and the linear programme that gave it."""

    mean_jct_s: float
    """The bound: the relaxation's least mean JCT."""
    loose_s: float
    """Every job at once on the fastest GPU it may use, with no limit on capacity."""
    free_s: float
    """Every job at once on the fastest GPU of the free option it may use (on the fastest GPU
    it may use, for a job no GPU of the free option could hold)."""
    fast_gpu_h: dict[int, float]
    """At the relaxation's optimum, GPU-hours of the capacitated classes by job width (GPUs
    a job holds)."""
    classes: tuple[tuple[float, int, bool], ...]
    """(speed, GPUs, capacitated) of each class."""
    variables: int
    rows: int
    solve_s: float


@dataclass
class _Pool:
    region: str
    model: str
    speed: float
    gpus: int
    node_gpus: int


def _pools(fed: Federation) -> list[_Pool]:
    out: dict[tuple[str, str], _Pool] = {}
    for r in fed.regions:
        for n in r.cluster.nodes:
            if n.gpu_model is None or not n.gpus:
                continue
            key = (r.name, n.gpu_model.name)
            p = out.setdefault(key, _Pool(r.name, n.gpu_model.name, n.gpu_model.speed, 0, 0))
            p.gpus += n.gpus
            p.node_gpus = max(p.node_gpus, n.gpus)
    return list(out.values())


def _allowed(fed: Federation, fj: FedJob, p: _Pool) -> bool:
    """Whether ``fj`` could ever run on ``p``: the owner's regions, its data's residency, its
    users' latency, its GPU models and a node of the pool large enough for one task."""
    t = fj.job.task
    region = fed.region(p.region)
    if not_allowed(fj.regions, p.region) or fed.residency(fj, region):
        return False
    if fj.online and too_far(fed.network.latency_ms(fed.region(fj.home), region),
                             fj.max_latency_ms):  # fmt: skip
        return False
    if t.gpu_models and p.model not in t.gpu_models:
        return False
    return p.node_gpus >= max(t.gpus, 1)


def fastest_allowed(fed: Federation, jobs: Sequence[FedJob]) -> list[float]:
    """Per job, the speed of the fastest GPU it may ever use (``_allowed``), 0 where none."""
    pools = _pools(fed)
    return [max((p.speed for p in pools if _allowed(fed, fj, p)), default=0.0) for fj in jobs]


def jct_bound(
    fed: Federation,
    jobs: Sequence[FedJob],
    block_s: float = 1800.0,
    fast_max_gpus: int | None = None,
) -> JctBound:
    """The least mean JCT any router could reach with ``jobs`` on ``fed`` (module
    docstring); ``SpecError`` for a job no GPU of the federation could ever hold.

    ``fast_max_gpus``: the bound over the routers that keep every job of more GPUs than
    this off the capacitated classes (a divisible job's half counted by its own GPUs): such
    a job has the free option alone. A job that only capacitated classes could hold keeps
    them (no router could keep it off)."""
    from scipy import sparse
    from scipy.optimize import linprog

    if not block_s > 0:
        raise SpecError(f"bound: block_s must be > 0, got {block_s}")
    if fast_max_gpus is not None and fast_max_gpus < 0:
        raise SpecError(f"bound: fast_max_gpus must be >= 0, got {fast_max_gpus}")
    if not jobs:
        raise SpecError("bound: no jobs")
    pools = _pools(fed)
    if not pools:
        raise SpecError("bound: the federation has no GPUs")
    speeds = sorted({p.speed for p in pools})
    gpus = {s: sum(p.gpus for p in pools if p.speed == s) for s in speeds}
    bulk = max(speeds, key=lambda s: (gpus[s] * s, s))
    capped = [s for s in speeds if s > bulk]

    # Columns: per job part, its JCT, its free option, its block shares. Rows: per part one
    # convexity row (equality) and two JCT rows; per (class, block) one capacity row.
    obj: list[float] = []
    upper: list[float] = []
    eq: tuple[list[int], list[int], list[float]] = ([], [], [])  # rows, columns, values
    le: tuple[list[int], list[int], list[float]] = ([], [], [])
    cap_rows: dict[tuple[int, int], int] = {}
    share_of: list[tuple[int, int, float]] = []  # (column, width, GPU-hours at share 1)
    n_jct = loose = free_total = 0.0
    parts: list[tuple[FedJob, float, float]] = []
    for fj in jobs:
        g = fj.job.gpu_demand_milli / MILLI
        if fj.divisible and fj.job.tasks >= 2:
            parts += [(fj, g / 2, 0.5), (fj, g / 2, 0.5)]
        else:
            parts.append((fj, g, 1.0))
    for e, (fj, g, w) in enumerate(parts):
        job = fj.job
        ok = [p for p in pools if _allowed(fed, fj, p)]
        if not ok:
            raise SpecError(f"bound: no GPU of the federation could ever hold job {job.id}")
        r, a = job.runtime, job.submit
        g_min = g * job.min_tasks / job.tasks  # what it holds at least, once started
        loose += w * r / max(p.speed for p in ok)
        free = [p.speed for p in ok if p.speed <= bulk]
        f = r / max(free) if free else math.inf
        opts: list[tuple[int, float, float]] = []  # (column, JCT bound 1, JCT bound 2)
        jct_col = len(obj)
        obj.append(w)
        upper.append(math.inf)
        if free:
            free_total += w * f
            opts.append((len(obj), f, f))
            obj.append(0.0)
            upper.append(1.0)
        else:
            # Only capacitated classes: a run ending after the window (twice its runtime on
            # the slowest of them, and a block) is no better than ending at its end.
            free_total += w * r / max(p.speed for p in ok)
            f = 2.0 * r / min(p.speed for p in ok) + block_s
            opts.append((len(obj), f, f))
            obj.append(0.0)
            upper.append(1.0)
        kept_off = bool(free) and fast_max_gpus is not None and g > fast_max_gpus
        for ci, s in enumerate(capped):
            if kept_off or not any(p.speed == s for p in ok):
                continue
            q = r / s
            end = a + f
            if q >= f:
                continue
            for k in range(int(a // block_s), int(math.ceil(end / block_s))):
                lo, hi = max(k * block_s, a), min((k + 1) * block_s, end)
                if hi <= lo:
                    continue
                col = len(obj)
                obj.append(0.0)
                upper.append(min(1.0, (hi - lo) / q) if q > 0 else 1.0)
                opts.append((col, lo - a + q / 2, q))
                row = cap_rows.setdefault((ci, k), len(cap_rows))
                le[0].append(-1 - row)
                le[1].append(col)
                le[2].append(g_min * q / 3600.0)
                share_of.append((col, int(round(g / w)), g_min * q / 3600.0))
        for col, _, _ in opts:
            eq[0].append(e)
            eq[1].append(col)
            eq[2].append(1.0)
        for which in (1, 2):
            row = int(n_jct)
            for col, b1, b2 in opts:
                le[0].append(row)
                le[1].append(col)
                le[2].append(b1 if which == 1 else b2)
            le[0].append(row)
            le[1].append(jct_col)
            le[2].append(-1.0)
            n_jct += 1
    n_le = int(n_jct)
    rows = [r if r >= 0 else n_le + (-1 - r) for r in le[0]]
    a_ub = sparse.csr_matrix((le[2], (rows, le[1])), shape=(n_le + len(cap_rows), len(obj)))
    b_ub = np.zeros(n_le + len(cap_rows))
    for (ci, _), row in cap_rows.items():
        b_ub[n_le + row] = gpus[capped[ci]] * block_s / 3600.0
    a_eq = sparse.csr_matrix((eq[2], (eq[0], eq[1])), shape=(len(parts), len(obj)))
    t0 = time.perf_counter()
    res = linprog(np.array(obj), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(len(parts)),
                  bounds=np.column_stack([np.zeros(len(obj)), upper]), method="highs")  # fmt: skip
    solve_s = time.perf_counter() - t0
    if res.status != 0:
        raise RuntimeError(f"bound: the linear programme did not solve: {res.message}")
    fast: dict[int, float] = defaultdict(float)
    for col, width, gh in share_of:
        if res.x[col] > 1e-9:
            fast[width] += res.x[col] * gh
    n = len(jobs)
    return JctBound(
        float(res.fun) / n, loose / n, free_total / n, dict(sorted(fast.items())),
        tuple((s, gpus[s], s in capped) for s in speeds), len(obj),
        a_ub.shape[0] + a_eq.shape[0], solve_s,
    )  # fmt: skip
