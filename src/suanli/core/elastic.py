"""Elastic training: a job that runs on any number of workers between a minimum and a maximum.

A worker is one GPU. A job's *work* is stated at its requested size ``r``: it runs
``runtime`` seconds on ``r`` workers. On ``n`` workers it progresses at ``S(n) / S(r)`` of
that rate, where ``S`` is its speedup curve:

* ``linear``: ``S(n) = n`` (perfect scaling; the upper bound);
* ``power:ALPHA``: ``S(n) = n ** ALPHA`` (sub-linear for ``ALPHA < 1``: every doubling of
  workers multiplies throughput by ``2 ** ALPHA``);
* ``points:N1=S1,N2=S2,...``: measured throughputs, interpolated linearly between the points
  (and proportionally below the first; flat past the last: more workers never help more
  than the largest measured).

The default, ``power:0.938``, is Horovod's published scaling efficiency for VGG-16, 68% on
512 GPUs (Sergeev and Del Balso, "Horovod: fast and easy distributed deep learning in
TensorFlow", arXiv:1802.05799): ``ALPHA = 1 + ln(0.68) / ln(512)``. The same paper gives 90%
for Inception V3 and ResNet-101 (``power:0.983``), so the default is the pessimistic end.

A resize (grow or shrink) stops the job at a checkpoint and restarts it on the new workers:
it makes no progress for ``resize_cost`` seconds. Default 30 s: ASSUMPTION, between the ~1 s
that Elan's in-memory state replication reaches (Xie et al., "Elan: Towards Generic and
Efficient Elastic Training for Deep Learning", ICDCS 2020) and the minutes a restart from a
checkpoint in shared storage can take for a large model.

``plan_growth`` and ``plan_shrink`` are the scheduler's pure choices of which elastic jobs to
resize; the caller applies them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.core.model import SpecError

DEFAULT_SPEEDUP = "power:0.938"
DEFAULT_RESIZE_COST = 30.0


@dataclass(frozen=True, slots=True)
class Speedup:
    """A speedup curve (see the module docstring): ``S(n)`` for ``n >= 1`` workers."""

    kind: str
    alpha: float = 1.0
    points: tuple[tuple[float, float], ...] = ()

    def __call__(self, n: float) -> float:
        if n <= 0:
            return 0.0
        if self.kind == "linear":
            return float(n)
        if self.kind == "power":
            return float(n) ** self.alpha
        xs = [p[0] for p in self.points]
        ys = [p[1] for p in self.points]
        if n <= xs[0]:
            return ys[0] * n / xs[0]
        return float(np.interp(n, xs, ys))

    def rate(self, n: float, requested: float) -> float:
        """Progress on ``n`` workers as a share of the rate on the ``requested`` workers."""
        return self(n) / self(requested)

    @property
    def label(self) -> str:
        if self.kind == "linear":
            return "linear"
        if self.kind == "power":
            return f"power:{self.alpha:g}"
        return "points:" + ",".join(f"{x:g}={y:g}" for x, y in self.points)


def parse_speedup(text: str) -> Speedup:
    """``linear``, ``power:ALPHA`` (0 < ALPHA <= 1) or ``points:N=S,...`` (N increasing,
    S > 0 and not decreasing); ``SpecError`` saying which form is wrong."""
    t = text.strip().lower()
    if t == "linear":
        return Speedup("linear")
    kind, _, args = t.partition(":")
    try:
        if kind == "power":
            a = float(args)
            if not 0 < a <= 1:
                raise ValueError
            return Speedup("power", a)
        if kind == "points":
            pts = tuple((float(x), float(y)) for x, y in (p.split("=") for p in args.split(",")))
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            if (
                not pts
                or any(x <= 0 or not math.isfinite(x) for x in xs)
                or any(y <= 0 or not math.isfinite(y) for y in ys)
                or any(b <= a for a, b in zip(xs, xs[1:], strict=False))
                or any(b < a for a, b in zip(ys, ys[1:], strict=False))
            ):
                raise ValueError
            return Speedup("points", points=pts)
    except ValueError:
        pass
    raise SpecError(
        f"speedup {text!r}: one of linear, power:ALPHA (0 < ALPHA <= 1), points:N=S,... "
        "(N increasing, S > 0 and not decreasing)"
    )


@dataclass(frozen=True, slots=True)
class ElasticRange:
    """The workers an elastic job may run on, and the size its work is stated at."""

    min_workers: int
    max_workers: int
    requested: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_workers <= self.requested <= self.max_workers:
            raise SpecError(
                "elastic job: need 1 <= min_workers <= requested <= max_workers, got "
                f"{self.min_workers}, {self.requested}, {self.max_workers}"
            )

    @classmethod
    def around(cls, requested: int, cap: int) -> ElasticRange:
        """Half to twice ``requested`` (at least 1, at most ``cap``): the rule of the
        co-location scenario."""
        lo = max(1, requested // 2)
        hi = max(requested, min(2 * requested, cap))
        return cls(lo, hi, requested)


@dataclass(frozen=True, slots=True)
class Resizable:
    """An elastic job as a resize plan sees it: its id, range, current workers, speedup and
    remaining work (seconds at its requested size)."""

    job_id: str
    range: ElasticRange
    workers: int
    speedup: Speedup
    remaining: float
    priority: int = 0


def gain(r: Resizable, extra: int) -> float:
    """Seconds of remaining runtime saved by ``extra`` more workers (negative: lost by
    fewer): the marginal value a resize plan compares."""
    now = r.speedup.rate(r.workers, r.range.requested)
    then = r.speedup.rate(r.workers + extra, r.range.requested)
    if now <= 0 or then <= 0:
        return math.inf if then > 0 else -math.inf
    return r.remaining / now - r.remaining / then


def plan_growth(
    jobs: Sequence[Resizable], free: int, resize_cost: float = DEFAULT_RESIZE_COST
) -> dict[str, int]:
    """New worker counts for elastic jobs that take up to ``free`` idle GPUs.

    Greedy by marginal gain per GPU: each step gives the next doubling-or-less of workers
    to the job whose remaining runtime it shortens most per GPU, and only if that saving
    exceeds the resize cost (a job near its end is not resized for a few seconds). Jobs at
    their maximum are left alone. Ties: higher priority, then job id. Deterministic."""
    sizes = {r.job_id: r.workers for r in jobs}
    by_id = {r.job_id: r for r in jobs}
    left = free
    while left > 0:
        best: tuple[float, int, str] | None = None
        best_add = 0
        for jid in sorted(sizes):
            r = by_id[jid]
            cur = sizes[jid]
            room = r.range.max_workers - cur
            if room <= 0:
                continue
            add = min(room, left, max(1, cur))
            view = Resizable(jid, r.range, cur, r.speedup, r.remaining, r.priority)
            saved = gain(view, add)
            if saved <= resize_cost:
                continue
            key = (saved / add, r.priority, jid)
            if best is None or (key[0], key[1]) > (best[0], best[1]):
                best, best_add = key, add
        if best is None:
            break
        sizes[best[2]] += best_add
        left -= best_add
    return {jid: n for jid, n in sizes.items() if n != by_id[jid].workers}


def plan_shrink(jobs: Sequence[Resizable], need: int) -> tuple[dict[str, int], int]:
    """Worker counts that free ``need`` GPUs from elastic jobs without evicting any, and how
    many GPUs that frees (less than ``need`` if their minimums do not allow it).

    Takes first from the workers that do least: the job whose last worker saves least
    runtime per GPU gives it up, one GPU at a time, never below its minimum; lower priority
    first. Deterministic (ties: job id)."""
    sizes = {r.job_id: r.workers for r in jobs}
    by_id = {r.job_id: r for r in jobs}
    freed = 0
    while freed < need:
        best: tuple[int, float, str] | None = None
        for jid in sorted(sizes):
            r = by_id[jid]
            cur = sizes[jid]
            if cur <= r.range.min_workers:
                continue
            view = Resizable(jid, r.range, cur - 1, r.speedup, r.remaining, r.priority)
            loss = gain(view, 1)
            key = (r.priority, loss, jid)
            if best is None or key < best:
                best = key
        if best is None:
            break
        sizes[best[2]] -= 1
        freed += 1
    return {jid: n for jid, n in sizes.items() if n != by_id[jid].workers}, freed
