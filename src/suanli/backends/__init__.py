"""Execution backends: how the control plane starts, watches and stops job tasks.

:mod:`~suanli.backends.base` defines the interface (:class:`Launch`, :class:`Handle`,
:class:`Exit`, :class:`Outcome`, :class:`Backend`); :class:`LocalBackend` runs tasks as
subprocesses on this machine, :class:`FakeBackend` simulates them in memory.

The names are imported lazily: the per-task supervisor (``python -m suanli.backends.shim``)
passes through this package and must not pay for, or depend on, the backend modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from suanli.backends.base import (
        Backend,
        Exit,
        Handle,
        Launch,
        Outcome,
        merged_environment,
        task_environment,
    )
    from suanli.backends.fake import FakeBackend
    from suanli.backends.local import LocalBackend

_WHERE = {
    "Backend": "base",
    "Exit": "base",
    "Handle": "base",
    "Launch": "base",
    "Outcome": "base",
    "merged_environment": "base",
    "task_environment": "base",
    "FakeBackend": "fake",
    "LocalBackend": "local",
}

__all__ = [
    "Backend",
    "Exit",
    "FakeBackend",
    "Handle",
    "Launch",
    "LocalBackend",
    "Outcome",
    "merged_environment",
    "task_environment",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"suanli.backends.{module}"), name)
