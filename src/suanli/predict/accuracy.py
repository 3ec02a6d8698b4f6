"""How good a runtime predictor is: point error of its median and coverage of its quantiles.

``accuracy(true, predicted)`` scores predictions already made; ``replay(predictor, jobs)``
makes them online, as a predictor sees a trace: every job is predicted at its submission and
learned at its end, in time order. ``replay`` is the oracle's side (it reads ``job.runtime``
to know when a job ends and what to teach), never the predictor's.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from suanli.core.model import Job
from suanli.core.seams import Predictor


@dataclass(frozen=True, slots=True)
class Accuracy:
    """``mae``: mean absolute error of the median prediction (seconds); ``median_rel_error``:
    the median over jobs of |median prediction − true| / max(true, ``floor``);
    ``coverage[q]``: the fraction of jobs whose true runtime is at most their predicted
    q-quantile (ideally q)."""

    jobs: int
    mae: float
    median_rel_error: float
    coverage: dict[float, float]


def accuracy(true: ArrayLike, predicted: Mapping[float, ArrayLike], floor: float = 1.0) -> Accuracy:
    """Score ``predicted`` (quantile -> one prediction per job, in seconds; must hold 0.5)
    against the ``true`` runtimes. ``floor`` (seconds) keeps the relative error of a job of
    (almost) no length finite."""
    t = np.asarray(true, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0:
        raise ValueError("accuracy: true must be a non-empty 1-D array of runtimes")
    if 0.5 not in predicted:
        raise ValueError("accuracy: predicted must hold the median (q = 0.5)")
    if not floor > 0:
        raise ValueError(f"accuracy: floor must be > 0 seconds, got {floor}")
    preds = {}
    for q, p in predicted.items():
        a = np.asarray(p, dtype=np.float64)
        if a.shape != t.shape:
            raise ValueError(
                f"accuracy: {len(t)} true runtimes but {a.shape} predictions for q={q}"
            )
        preds[float(q)] = a
    err = np.abs(preds[0.5] - t)
    return Accuracy(
        jobs=len(t),
        mae=float(err.mean()),
        median_rel_error=float(np.median(err / np.maximum(t, floor))),
        coverage={q: float(np.mean(t <= a)) for q, a in sorted(preds.items())},
    )


def replay(
    predictor: Predictor,
    jobs: Iterable[Job],
    qs: Sequence[float] = (0.5, 0.9),
    score: Iterable[str] | None = None,
) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Feed ``jobs`` to ``predictor`` online: each is predicted (at each of ``qs``) at its
    submission and learned at submit + runtime, as if it started at once (the soonest its
    runtime could be known); at equal times ends go first. Returns the true runtimes and the
    predictions of the jobs in ``score`` (ids; default all), in submission order."""
    return replay_runs(predictor, ((j, j.runtime, j.submit + j.runtime) for j in jobs), qs, score)


def replay_runs(
    predictor: Predictor,
    runs: Iterable[tuple[Job, float, float]],
    qs: Sequence[float] = (0.5, 0.9),
    score: Iterable[str] | None = None,
) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """``replay`` for runs that ended when they did: (job, its runtime, when it ended), each
    predicted at its submission (``Job.submit``) and learned at its end, so a prediction
    knows only the runs that had ended by then (a control plane's history)."""
    ordered = sorted(runs, key=lambda r: (r[0].submit, r[0].id))
    keep = None if score is None else set(score)
    ends: list[tuple[float, int, Job, float]] = []
    true: list[float] = []
    out: dict[float, list[float]] = {float(q): [] for q in qs}
    for n, (job, runtime, ended) in enumerate(ordered):
        while ends and ends[0][0] <= job.submit:
            at, _, done, rt = heapq.heappop(ends)
            predictor.learn(done, rt, at)
        if keep is None or job.id in keep:
            for q, col in out.items():
                col.append(predictor.quantile(job, q))
            true.append(runtime)
        heapq.heappush(ends, (max(ended, job.submit), n, job, runtime))
    while ends:
        at, _, done, rt = heapq.heappop(ends)
        predictor.learn(done, rt, at)
    return np.asarray(true), {q: np.asarray(col) for q, col in out.items()}
