"""The Ray actor that stands for one task on its node (see :mod:`suanli.backends.ray_backend`).

One detached actor per task, created on the node suanli chose: it starts the task under
suanli's own supervisor (the shim, through a :class:`~suanli.backends.local.LocalBackend` on
the node), tethered to the actor's process, so the task lives exactly as long as the actor,
and it carries out what the control plane asks of a running task on that node (stop,
resize, release). Everything the control plane reads back (the task's ``exit.json``,
``stop.json``, logs) lies in the run directory on the shared path, which every node sees.

This module imports Ray only inside methods: it is loaded on every node by Ray's workers, and
by the control plane, which wraps :class:`TaskKeeper` with ``ray.remote`` at run time.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from suanli.backends.base import Elastic, Handle, Launch, Outcome
from suanli.backends.shim import EXIT_FILE, proc_stat, write_json_atomic

PLACED_FILE = "ray.json"
"""In the task's run directory: where Ray placed it (suanli node, Ray node id, actor pid)."""
WATCH_INTERVAL_S = 1.0
"""How often the actor's watcher polls its task's supervisor (it reaps it once it ends)."""


class TaskKeeper:
    """Started on the task's node: launches ``spec`` under the shim, tethered to this process.

    ``root`` is the shared run root (``<shared>/runs``); ``scratch`` the node-local root of
    scratch working directories (None: the node's temporary directory, as the local backend
    does). A launch that cannot start (its run directory exists: this attempt's task ran
    already) raises, and the actor dies with the error; one whose command cannot start ends
    through its exit file, as locally.
    """

    def __init__(self, root: str, scratch: str | None, spec: Launch) -> None:
        from suanli.backends.local import LocalBackend

        self.spec = spec
        self.local = LocalBackend(
            Path(root), scratch=Path(scratch) if scratch else None, poll_interval=WATCH_INTERVAL_S
        )
        me = os.getpid()
        stat = proc_stat(me)
        if stat is None:
            raise RuntimeError(f"cannot read /proc/{me}/stat of the task's actor")
        self.handle: Handle | None = None
        try:
            self.handle = self.local.launch(spec, tether=(me, stat[2]))
        except (ValueError, OSError, RuntimeError) as e:
            run_dir = self.local.run_dir_for(spec.job_id, spec.attempt, spec.task)
            if isinstance(e, FileExistsError) or not run_dir.is_dir():
                raise  # never write into another launch's run directory
            # Written as the shim would: the task ends as one that could not start.
            write_json_atomic(
                run_dir / EXIT_FILE,
                {"exit_code": 127, "signal": None, "error": f"could not start: {e}"},
            )
            self.handle = None
        self.node_id = _node_id()
        run_dir = self.local.run_dir_for(spec.job_id, spec.attempt, spec.task)
        if run_dir.is_dir():
            write_json_atomic(
                run_dir / PLACED_FILE, {"node": spec.node, "node_id": self.node_id, "pid": me}
            )
        threading.Thread(target=self._watch, name="suanli-task-watch", daemon=True).start()

    def _watch(self) -> None:
        """Reap the supervisor once it ends (it is this process's child)."""
        while self.local.running():
            self.local.wait(3600.0)

    def started(self) -> dict[str, Any]:
        """Where the task runs: the supervisor's handle on this node and the Ray node id."""
        return {
            "handle": self.handle.to_json() if self.handle is not None else None,
            "node_id": self.node_id,
            "pid": os.getpid(),
        }

    def stop(self, outcome: str) -> None:
        """The job's stop signal now, SIGKILL after its grace (``LocalBackend.stop``)."""
        if self.handle is not None:
            self.local.stop(self.handle, Outcome(outcome))

    def resize(self, told: tuple[int, int, int]) -> None:
        if self.handle is not None:
            self.local.resize(self.handle, Elastic.of(told))

    def elastic(self) -> dict[str, int] | None:
        found = self.local.elastic(self.handle) if self.handle is not None else None
        return found.to_json() if found is not None else None

    def prepare(self, job_id: str, directory: str) -> int:
        """Another job expected to start soon on this node: read its checkpoint ahead into
        this node's page cache (``suanli.backends.prepare``), write what was asked for beside
        this task's run directory, and return it."""
        from suanli.backends.prepare import prepared_path, warm_directory

        files = warm_directory(directory)
        spec = self.spec
        run_dir = self.local.run_dir_for(spec.job_id, spec.attempt, spec.task)
        try:
            # (0600, the actor's own: it may name another user's job, not for this task to read)
            answer = prepared_path(run_dir)
            write_json_atomic(answer, {"job_id": job_id, "files": files, "at": time.time()})
        except OSError:
            pass  # (the answer is for inspection: the read-ahead happened)
        return files

    def release(self) -> None:
        """The task's end is read: remove its scratch on this node (its siblings' stay), then
        end the actor, which gives the task's GPU share back to Ray at once (a task a
        shrink removed frees its GPUs for the job that waits for them)."""
        import ray

        spec = self.spec
        self.local.release_task(spec.job_id, spec.attempt, spec.task)
        self.local.close()
        ray.actor.exit_actor()


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())
