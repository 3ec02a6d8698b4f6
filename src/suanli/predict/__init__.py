"""Runtime predictors that learn from the jobs that ended: plugins of the ``runtime`` seam
(``suanli.core.seams.Predictor``), registered by entry point (``pyproject.toml``).

* ``runtime/history`` (``history.HistoryPredictor``): quantiles of the last runtimes of the
  same user and shape, falling back to the user, the tenant, the shape and all jobs (QSSF's
  idea, Helios, SC'21);
* ``runtime/learned`` (``learned.LearnedPredictor``): gradient-boosted quantile regression
  (LightGBM), retrained online as jobs end.

``features`` is what they may know of a job at its submission; ``accuracy`` scores them.
The modules are imported on use (``runtime/learned`` imports LightGBM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from suanli.predict.accuracy import Accuracy, accuracy, replay
    from suanli.predict.history import HistoryPredictor
    from suanli.predict.learned import LearnedPredictor

__all__ = ["Accuracy", "HistoryPredictor", "LearnedPredictor", "accuracy", "replay"]

_WHERE = {
    "Accuracy": "suanli.predict.accuracy",
    "accuracy": "suanli.predict.accuracy",
    "replay": "suanli.predict.accuracy",
    "HistoryPredictor": "suanli.predict.history",
    "LearnedPredictor": "suanli.predict.learned",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'suanli.predict' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where), name)
