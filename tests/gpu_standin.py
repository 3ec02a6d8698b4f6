"""A stand-in for GPU hardware and NVML, which this machine does not have.

``StandIn`` is a ``suanli.backends.gpu_util.GpuUseReader`` whose readings come from a
script: a function of the time (its clock's) and the GPU index that returns the
``DeviceUse`` the hardware would report, or None for a GPU it cannot read. It records every
read, and can be made to raise (a driver that fails) or to block (a driver that hangs).
Tests give it to the sampler, or to ``build_server(util_reader=...)``, where the real
server would use ``NvmlReader``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from suanli.backends.gpu_util import DeviceUse

Script = Callable[[float, int], DeviceUse | None]


class StandIn:
    """Readings from ``script(now, gpu)``; ``fail`` raises from ``read`` while set (an
    exception, or a function of the time returning one or None); ``hold`` blocks ``read``
    until it is set."""

    name = "stand-in"

    def __init__(
        self,
        script: Script,
        clock: Callable[[], float] = time.time,
        fail: BaseException | Callable[[float], BaseException | None] | None = None,
    ) -> None:
        self.script = script
        self.clock = clock
        self.fail = fail
        self.hold: threading.Event | None = None
        self.reads: list[tuple[float, tuple[int, ...]]] = []
        self.answers: list[tuple[float, int, DeviceUse]] = []

    def read(self, indices: Sequence[int]) -> dict[int, DeviceUse]:
        if self.hold is not None:
            self.hold.wait()
        now = self.clock()
        self.reads.append((now, tuple(indices)))
        failure = self.fail(now) if callable(self.fail) else self.fail
        if failure is not None:
            raise failure
        out = {}
        for i in indices:
            x = self.script(now, i)
            if x is not None:
                out[i] = x
                self.answers.append((now, i, x))
        return out


def constant(by_gpu: dict[int, tuple[float, int]]) -> Script:
    """A script where GPU ``i`` always reads ``by_gpu[i]`` (utilisation %, memory MiB)."""

    def script(now: float, gpu: int) -> DeviceUse | None:
        if gpu not in by_gpu:
            return None
        pct, mib = by_gpu[gpu]
        return DeviceUse(pct, mib)

    return script
