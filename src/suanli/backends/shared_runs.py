"""What the backends that run tasks on a cluster's nodes (Ray, Slurm) share: run directories
on a path every node sees, and the rule for tasks while the engine does not answer.

Standard-library only, as :mod:`suanli.backends.base` is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from suanli.backends.base import Exit, Handle, Outcome, job_dir_name
from suanli.backends.shim import STDERR_LOG, STDOUT_LOG

log = logging.getLogger("suanli.backends")


class SharedRunDirs:
    """Run directories under ``root`` (``<shared>/runs``): ``<job>/<attempt>/<task>``."""

    root: Path

    def run_dir_for(self, job_id: str, attempt: int, task: int) -> Path:
        return self.root / job_dir_name(job_id) / str(attempt) / str(task)

    def log_paths(self, handle: Handle) -> tuple[Path, Path]:
        run_dir = Path(handle.run_dir)
        return run_dir / STDOUT_LOG, run_dir / STDERR_LOG


class OutageClock:
    """When the engine stopped answering, the probe that tells when it answers again, and
    the tasks given up since (to be stopped if the engine returns with them running)."""

    _lock: threading.Lock
    _calls: ThreadPoolExecutor  # the helper thread the probe runs on
    _down_since: float | None  # monotonic; None: the engine answers
    _probe: Future[Any] | None  # the call that tells when it answers again
    _back: bool  # it answered again: check everything on the next poll
    _given_up: set[str]
    outage_timeout_s: float

    def engine_down(self, engine: str, ask: Callable[[], object]) -> str | None:
        """None when the engine answers; else why nothing can be started now. While it is
        down, ``ask`` runs on the helper thread, again each time it fails; the first time it
        answers, the engine is back (``_back``)."""
        with self._lock:
            if self._down_since is None:
                return None
            probe = self._probe
            if probe is not None and probe.done():
                if probe.exception() is None:
                    log.warning("%s answers again after %.0f s", engine,
                                time.monotonic() - self._down_since)  # fmt: skip
                    self._down_since, self._probe, self._back = None, None, True
                    return None
                probe = None
            if probe is None:
                self._probe = self._calls.submit(ask)
            since = time.monotonic() - self._down_since
        return f"{engine} has not answered for {since:.0f} s"

    def lost_in_outage(self, handle: Handle, name: str, engine: str) -> Exit | None:
        """A task with no exit record while the engine is down: lost (and given up) once the
        outage has lasted ``outage_timeout_s``; None before."""
        with self._lock:
            since = self._down_since
        if since is None or time.monotonic() - since < self.outage_timeout_s:
            return None
        with self._lock:
            self._given_up.add(name)
        return Exit(
            handle, Outcome.LOST, None, None, time.time(),
            f"{engine} did not answer for {self.outage_timeout_s:g} s",
        )  # fmt: skip
