"""A settable clock for the control plane's tests: ``clock()`` is ``clock.t``, moved by hand
(tests never sleep on real time)."""

from __future__ import annotations


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
