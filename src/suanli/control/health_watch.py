"""The GPU health watch: whether this node's GPUs are healthy, written to the store.

``HealthWatch`` runs on a thread of its own beside the scheduler loop (``suanli serve``
starts it where the GPUs are NVML's), so a slow or hung driver never holds up scheduling.
Every ``interval_s`` it asks its reader (``suanli.backends.gpu_health``: NVML, or a stand-in
in tests) about the node's GPUs and writes what changed into the store
(``suanli.store.nodes.set_gpu_faults``): a GPU with a fault is unhealthy until the fault
clears. The loop reads the store's holds and takes faulty GPUs out of service
(``suanli.control.hardware``); it also calls ``probe`` when a task failed or was lost, so a
fault that killed a task is found before the task's end is taken as its job's failure.

A reader that raises (the driver does not answer) changes nothing: what was known stays, the
error is logged once per distinct error and counted (``errors``); the next pass goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from suanli.backends.gpu_health import GpuHealthReader
from suanli.store import Store
from suanli.store import nodes as sn

log = logging.getLogger("suanli.control.health")

DEFAULT_INTERVAL_S = 5.0


class HealthWatch:
    """See the module docstring. ``gpus``: the node's GPUs, index -> UUID (``""``: none
    known)."""

    def __init__(
        self,
        store: Store,
        reader: GpuHealthReader,
        *,
        node: str,
        gpus: Mapping[int, str],
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"health interval: must be > 0, got {interval_s}")
        self.store = store
        self.reader = reader
        self.node = node
        self.gpus = dict(gpus)
        self.interval_s = interval_s
        self.clock = clock
        self.errors = 0
        self.passes = 0
        self.faults: dict[int, str | None] = {}
        """The last reading: each GPU's fault (None: healthy)."""
        self._lock = threading.Lock()
        self._last_error = ""

    def check(self) -> list[tuple[int, str | None]]:
        """One reading, written to the store: the GPUs whose health changed, as (index,
        fault). A failed read or write is logged and counted, and changes nothing."""
        with self._lock:
            try:
                faults = self.reader.read(self.gpus)
                changed = sn.set_gpu_faults(
                    self.store, self.node, faults, round(self.clock() * 1000)
                )
            except Exception as e:  # noqa: BLE001 - a driver or store failure is not a fault
                self.errors += 1
                text = f"{type(e).__name__}: {e}"
                if text != self._last_error:
                    log.warning("health: could not read or record the GPUs (%s)", text)
                    self._last_error = text
                return []
            self._last_error = ""
            self.faults = dict(faults)
            self.passes += 1
        for idx, fault in changed:
            if fault is None:
                log.info("health: GPU %d of node %s is healthy again", idx, self.node)
            else:
                log.warning("health: GPU %d of node %s: %s", idx, self.node, fault)
        return changed

    def probe(self) -> None:
        """Read now (the loop's call when a task failed)."""
        self.check()

    def run(self, stop: threading.Event) -> None:
        """``check`` every ``interval_s`` until ``stop`` is set."""
        while not stop.is_set():
            self.check()
            stop.wait(self.interval_s)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="suanli-health", daemon=True)
        thread.start()
        return thread
