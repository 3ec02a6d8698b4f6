"""Group commit of submissions: many concurrent ``POST /v1/jobs`` in one transaction.

Each request hands its validated job to a ``SubmitBatcher`` and waits; one writer thread
takes everything waiting (up to ``max_batch``), stores it with ``jobs.submit_jobs`` in one
transaction, and answers each request once that transaction has committed. A submission is
therefore acknowledged only when it is durable, as before, but a burst of N concurrent
submissions costs one transaction instead of N: on SQLite, with its one writer at a time,
that is the difference between each request queueing for the write lock (and for the
interpreter, while it holds the lock) and one commit for all.

If a batch fails (a database error), its jobs are retried one by one, so that one bad
submission fails alone and the others are stored.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from suanli.control.crash import crash_point
from suanli.store import Store
from suanli.store import jobs as js

MAX_BATCH = 256
"""The most submissions written in one transaction."""


class SubmitBatcher:
    """See the module docstring. ``close`` stops the writer thread (after the queue drains)."""

    def __init__(
        self, store: Store, clock_ms: Callable[[], int], *, max_batch: int = MAX_BATCH
    ) -> None:
        self.store = store
        self.clock_ms = clock_ms
        self.max_batch = max_batch
        self._queue: queue.Queue[tuple[js.NewJob, Future[js.JobRecord]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, new: js.NewJob) -> js.JobRecord:
        """Store ``new`` (with others waiting at the same time) and return it once durable."""
        return self.enqueue(new).result()

    def enqueue(self, new: js.NewJob) -> Future[js.JobRecord]:
        """Queue ``new`` for the next batch; the future resolves once it is durable (for an
        asynchronous caller, which waits without holding a thread)."""
        done: Future[js.JobRecord] = Future()
        self._start()
        self._queue.put((new, done))
        return done

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
                self._thread = None

    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="suanli-submit", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._write(batch)
            if stop:
                return

    def _write(self, batch: list[tuple[js.NewJob, Future[js.JobRecord]]]) -> None:
        try:
            records = js.submit_jobs(self.store, [n for n, _ in batch], self.clock_ms())
        except Exception as e:  # noqa: BLE001 - retried one by one, errors go to each caller
            if len(batch) > 1:
                for item in batch:
                    self._write([item])
            else:
                batch[0][1].set_exception(e)
            return
        crash_point("submit-committed")
        for (_, done), rec in zip(batch, records, strict=True):
            done.set_result(rec)
