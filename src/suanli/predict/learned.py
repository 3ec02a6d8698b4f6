"""runtime/learned: gradient-boosted quantile regression of runtimes, retrained online.

One LightGBM model per quantile of a fixed grid (``quantiles``, default 0.5, 0.8, 0.9,
0.95), each fitted with the pinball loss (``objective="quantile"``, ``alpha=q``) on
``log1p(runtime)``. For one job the grid's predictions are made non-decreasing
(``np.maximum.accumulate``); ``quantile(job, q)`` interpolates linearly between neighbouring
grid points in log space (q outside the grid takes the nearest end point), so the answer is
non-decreasing in ``q``.

Features (``suanli.predict.features.NAMES``), all known at the job's submission and never
``job.runtime``: user and tenant (categorical codes in first-seen order), tasks, GPUs per
task, total GPUs, milli-GPU, the requested GPU model (categorical, "" for any), the user's
estimate (NaN if none), hour of day and day of week of the submission, and the user's history:
how many of the user's jobs had ended (capped at 16: uncounted, it grows with the trace's
time, so every new row would lie beyond the training range, where trees cannot extrapolate;
replaying a synthetic trace of 6,000 heavily overlapping jobs of 30 users the cap lifted the
held-out coverage of P90 from 0.74 to 0.78), log1p of the median and of the mean of the user's last 16 runtimes, log1p of the
user's last runtime, and log1p of the median of the last 16 at the job's shape (NaN where
there are none). The history features are *recomputed from only the learned jobs that ended
at or before* ``job.submit`` (the history is kept in end-time order), so a training row never
uses a runtime that ended after its job's submission, whenever the row is computed; a job's
row is computed once (the first time it is needed) and kept until the job is learned, so its
features, and its prediction per model version, stay fixed.

Retraining is count-based, so a replay is deterministic: the first fit when ``min_train``
jobs were learned, then whenever the learned count reaches twice the count at the last fit,
but at least every ``retrain_every`` jobs (next fit at min(2c, c + retrain_every) after a fit
at count c); each fit uses the last ``window`` learned jobs. Until the first fit an embedded
``runtime/history`` answers (the same ``plan_q`` and ``default``, its ``window`` and
``min_samples`` given as ``history_window`` and ``min_samples``); it learns every job.
``fits`` counts the fits, ``fitted_at`` lists the counts they happened at, and
``train_seconds`` sums their wall time (``time.perf_counter``: a statistic, never a decision).

The model: ``trees`` = 100 boosting rounds of at most ``leaves`` = 15 leaves, learning rate
0.1, ``min_data_in_leaf`` = 50 (and as many rows per categorical group), single-threaded,
``deterministic=True``, ``force_row_wise=True``, seeded by ``seed``; the grid's models share
one binned ``Dataset``. Small enough to retrain often and bit-for-bit repeatable; smaller
leaves than LightGBM's default 31/20 because online the newest training rows are biased to
short jobs (the long ones submitted with them have not ended yet) and noise features (hour,
weekday) let a larger tree pick that bias up: on that synthetic trace 15/50 held P90
coverage nearer 0.9 (0.80 against 0.78; 0.87 against 0.85 with jobs ten times sparser) at a
slightly lower median error.

Why LightGBM and not scikit-learn's ``HistGradientBoostingRegressor``: both are histogram
GBDTs with a quantile loss and native categorical splits, but the model is retrained online
inside every replay, so single-threaded training speed matters, and LightGBM is
deterministic with ``deterministic=True`` and one thread. Measured on the project's 2-core
development machine (shared with other work, so best of 5 runs), 20,000 synthetic rows × 15
features (3 categorical, 5 % missing), 100 trees, one thread, the four grid quantiles fitted
one after the other: with 15 leaves and min_data_in_leaf 50, LightGBM 1.09 s (binning the
shared dataset included), scikit-learn 2.16 s; with 31 leaves and 20, LightGBM 1.62 s,
scikit-learn 3.42 s: LightGBM about 2× faster (less than "several times": the quantile loss's
leaf re-fit costs LightGBM about as much as the trees). Prediction of one row differs far more:
``Booster.predict`` ~98 µs, scikit-learn's ``predict`` ~3 ms (per-call overhead), and
LightGBM's single-row C API (``_OneRow``) ~10 µs per model; a batch ~5 µs a row. Plans ask
for running jobs' durations every cycle, so predictions are cached per job and model version;
after each fit every job with a row (waiting or running) is predicted again in one batch, and
``prime`` does the same for a batch of jobs not predicted yet.
"""

from __future__ import annotations

import ctypes
import math
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence

import lightgbm as lgb
import numpy as np

from suanli.core.model import Job, SpecError
from suanli.core.seams import PLAN_Q
from suanli.predict.features import CATEGORICAL, NAMES, Features
from suanli.predict.history import (
    DEFAULT_RUNTIME,
    HistoryPredictor,
    check_int,
    check_options,
    check_q,
    check_runtime,
)

GRID = (0.5, 0.8, 0.9, 0.95)
"""The default quantiles with a model of their own."""


class _OneRow:
    """LightGBM's single-row fast path (``LGBM_BoosterPredictForMatSingleRowFast`` of its C
    API, which the Python package does not wrap) for a list of boosters: ~10 µs a model
    where ``Booster.predict`` spends ~100 µs on one row. The same trees, so the same numbers
    (the tests check it against ``Booster.predict``). ``None`` from ``make`` where this build
    of LightGBM lacks it: the caller falls back on ``Booster.predict``."""

    def __init__(self, models: list[lgb.Booster], ncol: int) -> None:
        from lightgbm.basic import _LIB, _safe_call

        self._lib = _LIB
        self._models = models  # outlive the configs, which point into them
        self._configs: list[ctypes.c_void_p] = []
        self._row = np.zeros(ncol, dtype=np.float64)
        self._row_p = self._row.ctypes.data_as(ctypes.c_void_p)
        self._out = np.zeros(len(models), dtype=np.float64)
        base = self._out.ctypes.data
        self._out_p = [
            ctypes.cast(base + 8 * k, ctypes.POINTER(ctypes.c_double)) for k in range(len(models))
        ]
        self._len = ctypes.c_int64()
        self._call = _LIB.LGBM_BoosterPredictForMatSingleRowFast
        for m in models:
            cfg = ctypes.c_void_p()
            _safe_call(
                _LIB.LGBM_BoosterPredictForMatSingleRowFastInit(
                    m._handle,
                    ctypes.c_int(0),  # C_API_PREDICT_NORMAL
                    ctypes.c_int(0),  # start iteration
                    ctypes.c_int(-1),  # all iterations
                    ctypes.c_int(1),  # C_API_DTYPE_FLOAT64
                    ctypes.c_int32(ncol),
                    ctypes.c_char_p(b"num_threads=1"),
                    ctypes.byref(cfg),
                )
            )
            self._configs.append(cfg)

    @classmethod
    def make(cls, models: list[lgb.Booster], ncol: int) -> _OneRow | None:
        try:
            return cls(models, ncol)
        except Exception:  # noqa: BLE001 - any trouble with the C API: use Booster.predict
            return None

    def __call__(self, row: list[float]) -> np.ndarray:
        """The models' predictions for ``row`` (a view, valid until the next call)."""
        self._row[:] = row
        call, cfgs, out_p, n, row_p = self._call, self._configs, self._out_p, self._len, self._row_p
        for k in range(len(cfgs)):
            if call(cfgs[k], row_p, ctypes.byref(n), out_p[k]) != 0:
                raise lgb.basic.LightGBMError(self._lib.LGBM_GetLastError().decode("utf-8"))
        return self._out

    def __del__(self) -> None:
        for cfg in getattr(self, "_configs", ()):
            self._lib.LGBM_FastConfigFree(cfg)
        self._configs = []


class LearnedPredictor:
    """Gradient-boosted quantile regression (LightGBM) on the job's request and its user's history.

    Options: ``plan_q`` (``PLAN_Q``), ``default`` (seconds before anything is learned, for a
    job without an estimate), ``quantiles`` (the grid, (0.5, 0.8, 0.9, 0.95)), ``min_train``
    (200), ``retrain_every`` (2000), ``window`` (20000 training rows), ``seed`` (0),
    ``trees`` (100), ``leaves`` (15), ``learning_rate`` (0.1), ``min_data_in_leaf`` (50),
    ``history_window`` (32) and ``min_samples`` (3) for the history used before the first fit.
    """

    plugin = "runtime/learned"

    def __init__(
        self,
        plan_q: float = PLAN_Q,
        default: float = DEFAULT_RUNTIME,
        quantiles: Sequence[float] = GRID,
        min_train: int = 200,
        retrain_every: int = 2000,
        window: int = 20_000,
        seed: int = 0,
        trees: int = 100,
        leaves: int = 15,
        learning_rate: float = 0.1,
        min_data_in_leaf: int = 50,
        history_window: int = 32,
        min_samples: int = 3,
    ) -> None:
        p = self.plugin
        check_options(p, plan_q, default)
        try:
            if isinstance(quantiles, str | bytes):
                raise TypeError
            grid = tuple(float(q) for q in quantiles)
        except (TypeError, ValueError):
            raise SpecError(
                f"{p}: quantiles must be a list of numbers, got {quantiles!r}"
            ) from None
        if not grid or any(not 0 < q < 1 for q in grid):
            raise SpecError(f"{p}: quantiles must be a non-empty list in (0, 1), got {quantiles!r}")
        if any(b <= a for a, b in zip(grid, grid[1:], strict=False)):
            raise SpecError(f"{p}: quantiles must be strictly increasing, got {quantiles!r}")
        self.min_train = check_int(p, "min_train", min_train, 1)
        self.retrain_every = check_int(p, "retrain_every", retrain_every, 1)
        self.window = check_int(p, "window", window, 1)
        self.seed = check_int(p, "seed", seed, 0)
        self.trees = check_int(p, "trees", trees, 1)
        self.leaves = check_int(p, "leaves", leaves, 2)
        self.min_data_in_leaf = check_int(p, "min_data_in_leaf", min_data_in_leaf, 1)
        if (
            isinstance(learning_rate, bool)
            or not isinstance(learning_rate, int | float)
            or not 0 < learning_rate <= 1
        ):
            raise SpecError(f"{p}: learning_rate must be in (0, 1], got {learning_rate!r}")
        self.learning_rate = float(learning_rate)
        check_int(p, "history_window", history_window, 1)
        check_int(p, "min_samples", min_samples, 1)
        if min_samples > history_window:
            raise SpecError(
                f"{p}: min_samples ({min_samples}) must be at most history_window "
                f"({history_window}): no history key could ever answer"
            )
        self.history = HistoryPredictor(plan_q, default, history_window, min_samples)
        """The history that answers until the first fit (it learns every job)."""
        self.plan_q = float(plan_q)
        self.default = float(default)
        self.quantiles = grid

        self.learned = 0
        """Jobs learned so far."""
        self.fits = 0
        """Fits so far (each fits one model per grid quantile)."""
        self.fitted_at: list[int] = []
        """The learned count at each fit."""
        self.train_seconds = 0.0
        """Wall time of all fits, summed."""
        self.version = 0
        """The model's version: 0 before the first fit, then the number of fits."""

        self._next_fit = self.min_train
        self._features = Features()
        self._rows: dict[str, list[float]] = {}  # job id -> its row, until it is learned
        self._preds: dict[str, tuple[int, tuple[float, ...]]] = {}  # id -> (version, grid)
        self._train_x: deque[list[float]] = deque(maxlen=self.window)
        self._train_y: deque[float] = deque(maxlen=self.window)
        self._models: list[lgb.Booster] = []
        self._one_row: _OneRow | None = None
        self.fast = True
        """Predict one row through LightGBM's single-row C API (False: ``Booster.predict``,
        the same numbers, slower); read at each fit."""

    # ----------------------------------------------------------------------------------------
    # answers

    def duration(self, job: Job) -> float:
        return self.quantile(job, self.plan_q)

    def quantile(self, job: Job, q: float) -> float:
        if not self._models:
            return self.history.quantile(job, q)
        check_q(q)
        p = self._preds.get(job.id)
        if p is None or p[0] != self.version:
            grid = self._predict_one(self.row(job))
            self._preds[job.id] = (self.version, grid)
        else:
            grid = p[1]
        qs = self.quantiles
        if q <= qs[0]:
            v = grid[0]
        elif q >= qs[-1]:
            v = grid[-1]
        else:
            i = bisect_right(qs, q) - 1
            lo, hi = grid[i], grid[i + 1]
            v = min(lo + (hi - lo) * ((q - qs[i]) / (qs[i + 1] - qs[i])), hi)
        return max(math.expm1(v), 0.0)

    def row(self, job: Job) -> list[float]:
        """The job's feature row (``NAMES``): computed the first time it is needed, from the
        history as it was at the job's submission, and kept until the job is learned."""
        r = self._rows.get(job.id)
        if r is None:
            r = self._rows[job.id] = self._features.row(job)
        return r

    def prime(self, jobs: Iterable[Job]) -> None:
        """Predict every one of ``jobs`` not yet predicted by the current model, in one batch
        (no-op before the first fit)."""
        if not self._models:
            return
        todo: dict[str, Job] = {}
        for job in jobs:
            p = self._preds.get(job.id)
            if p is None or p[0] != self.version:
                todo[job.id] = job
        if todo:
            grids = self._predict([self.row(j) for j in todo.values()])
            for jid, grid in zip(todo, grids, strict=True):
                self._preds[jid] = (self.version, grid)

    def _predict_one(self, row: list[float]) -> tuple[float, ...]:
        fast = self._one_row
        if fast is None:
            return self._predict([row])[0]
        out = np.maximum.accumulate(fast(row))
        return tuple(out.tolist())

    def _predict(self, rows: list[list[float]]) -> list[tuple[float, ...]]:
        x = np.asarray(rows, dtype=np.float64)
        out = np.empty((len(rows), len(self._models)))
        for k, m in enumerate(self._models):
            out[:, k] = m.predict(x, num_threads=1)
        np.maximum.accumulate(out, axis=1, out=out)
        return [tuple(r) for r in out.tolist()]

    # ----------------------------------------------------------------------------------------
    # learning

    def learn(self, job: Job, runtime: float, at: float) -> None:
        check_runtime(runtime)
        rt = float(runtime)
        row = self._rows.pop(job.id, None)
        if row is None:
            row = self._features.row(job)  # before its own end joins the history
        self._preds.pop(job.id, None)
        self._train_x.append(row)
        self._train_y.append(math.log1p(rt))
        self._features.learn(job, rt, at)
        self.history.learn(job, rt, at)
        self.learned += 1
        if self.learned >= self._next_fit:
            self._fit()

    @property
    def training_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows the next fit trains on (``NAMES`` columns) and their targets,
        log1p(runtime)."""
        return np.asarray(self._train_x, dtype=np.float64).reshape(-1, len(NAMES)), np.asarray(
            self._train_y, dtype=np.float64
        )

    def _params(self, q: float) -> dict[str, object]:
        return {
            "objective": "quantile",
            "alpha": q,
            "num_leaves": self.leaves,
            "learning_rate": self.learning_rate,
            "min_data_in_leaf": self.min_data_in_leaf,
            "min_data_per_group": self.min_data_in_leaf,
            "deterministic": True,
            "num_threads": 1,
            "seed": self.seed,
            "force_row_wise": True,
            "verbose": -1,
        }

    def _fit(self) -> None:
        t0 = time.perf_counter()
        x, y = self.training_rows
        data = lgb.Dataset(
            x,
            y,
            feature_name=list(NAMES),
            categorical_feature=list(CATEGORICAL),
            params={
                "verbose": -1,
                "num_threads": 1,
                "deterministic": True,
                "seed": self.seed,
                "min_data_in_leaf": self.min_data_in_leaf,
            },
            free_raw_data=True,
        )
        self._models = [
            lgb.train(self._params(q), data, num_boost_round=self.trees) for q in self.quantiles
        ]
        self.train_seconds += time.perf_counter() - t0
        self._one_row = _OneRow.make(self._models, len(NAMES)) if self.fast else None
        self.fits += 1
        self.version = self.fits
        self.fitted_at.append(self.learned)
        c = self.learned
        self._next_fit = min(2 * c, c + self.retrain_every)
        # Every job with a row is waiting or running: predict them all again, in one batch.
        self._preds.clear()
        if self._rows:
            ids = list(self._rows)
            grids = self._predict([self._rows[i] for i in ids])
            self._preds = {i: (self.version, g) for i, g in zip(ids, grids, strict=True)}
