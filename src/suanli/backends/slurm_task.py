"""The batch step of one task's Slurm job (see :mod:`suanli.backends.slurm_backend`).

The control plane submits, per task, a batch script that is a Python program: it calls
:func:`main`, which starts the task under suanli's own supervisor (the shim, through a
:class:`~suanli.backends.local.LocalBackend` on the node), tethered to this process, so the
task lives exactly as long as its Slurm job's batch step, and carries out what the control
plane asks of the running task. The control plane asks through files beside the run
directory on the shared path (:func:`control_paths`), and wakes this process with
``SIGUSR2`` (``scancel --batch --signal=USR2``, which signals the batch step alone, never the
task); the files are also read every second, so a request made while ``slurmctld`` is down
(``scancel`` cannot reach the job then) is still carried out.

Signals: ``SIGUSR2`` is the control plane's wake-up. The job's own stop signal, sent by
Slurm ``--signal=B:<stop signal>@<grace>`` ahead of its time limit (a backstop: suanli's
supervisor ends the task at its maximum runtime first), is passed on to the task's process
group, as Slurm would have sent it to the task.

The step exits with the task's exit status (128 + the signal that ended it), so Slurm's own
accounting (``sacct``'s State and ExitCode) tells the task's end as suanli does.

This module is stdlib-only, apart from suanli itself.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from suanli.backends.base import Elastic, Launch, Outcome, signal_number
from suanli.backends.local import LocalBackend, identity_environment
from suanli.backends.prepare import prepared_path, warm_directory
from suanli.backends.shim import EXIT_FILE, proc_stat, read_json, write_json_atomic

PLACED_FILE = "slurm.json"
"""In the task's run directory: where Slurm ran it (node, Slurm job id, Slurm's own GPUs)."""
WAKE_SIGNAL = signal.SIGUSR2
WATCH_INTERVAL_S = 1.0
"""How often the requests are read when no wake-up comes."""


def control_paths(run_dir: Path) -> dict[str, Path]:
    """The control plane's requests to one task, and this step's answers, as files of the
    run directory's job and attempt directories, so that they exist before the task's
    supervisor makes the run directory and never mix with what it writes there.

    The requests (stop, resize, prepare) lie in the job's directory, which is the control plane's
    (mode 0711: a task's user reads a request it knows the name of, and can neither list nor
    write there), so a task can never make a stop or a resize the control plane did not ask
    for; the answers in the attempt's directory, which is the task's user's."""
    attempt_dir = run_dir.parent
    job_dir = attempt_dir.parent
    task, attempt = run_dir.name, attempt_dir.name
    return {
        "stop": job_dir / f"{attempt}.{task}.stop.json",  # {"outcome", "requested_at"}
        "resize": job_dir / f"{attempt}.{task}.resize.json",  # {"world_size", "rank", ...}
        # Pre-staging another job of the same user on this node: {"job_id", "directory", ...}
        "prepare": job_dir / f"{attempt}.{task}.prepare.json",
        "prepared": prepared_path(run_dir),  # {"job_id", "files", "at"}
        "elastic": attempt_dir / f"{task}.elastic.json",  # what the elastic file says now
        "output": attempt_dir / f"{task}.slurm.out",  # the batch step's own (Slurm's --output)
    }


def launch_to_json(spec: Launch) -> dict[str, Any]:
    """``spec`` as plain JSON values (tuples as lists, sets sorted)."""
    out = dataclasses.asdict(spec)
    out["allowed_env"] = sorted(spec.allowed_env)
    return out


def launch_from_json(d: dict[str, Any]) -> Launch:
    """The :class:`Launch` that :func:`launch_to_json` wrote (validated)."""
    values = dict(d)
    values["command"] = tuple(values["command"])
    values["env"] = tuple((str(k), str(v)) for k, v in values.get("env", ()))
    values["gpus"] = tuple(values.get("gpus", ()))
    values["allowed_env"] = frozenset(values.get("allowed_env", ()))
    for name in ("run_as", "elastic", "rendezvous"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    return Launch(**values)


class _Step:
    def __init__(
        self, root: Path, scratch: str | None, spec: Launch, hidden: tuple[str, ...]
    ) -> None:
        self.spec = spec
        run_as = spec.run_as
        if run_as is not None and os.geteuid() == run_as[0]:
            # Slurm started this step as the task's user (sbatch --uid): no switch is left
            # to make, and the task's identity variables are that user's.
            identity = tuple(identity_environment(run_as[0]).items())
            spec = dataclasses.replace(spec, run_as=None, env=identity + spec.env)
        self.local = LocalBackend(
            root,
            scratch=Path(scratch) if scratch else None,
            poll_interval=WATCH_INTERVAL_S,
            hidden_env=hidden,
        )
        self.run_dir = self.local.run_dir_for(spec.job_id, spec.attempt, spec.task)
        self.paths = control_paths(self.run_dir)
        self.launch_spec = spec
        self.wake = threading.Event()
        self.forward: list[int] = []
        self.stopped = False
        self.resized: tuple[int, int, int] | None = None
        self.prepared: dict[str, Any] | None = None  # the last prepare request carried out

    def start(self) -> bool:
        """Launch the task (False: it was asked to stop before it started, or cannot)."""
        if read_json(self.paths["stop"]) is not None:
            return False  # stopped while Slurm held it pending: never start it
        me = os.getpid()
        stat = proc_stat(me)
        if stat is None:
            raise RuntimeError(f"cannot read /proc/{me}/stat of the task's batch step")
        try:
            self.handle = self.local.launch(self.launch_spec, tether=(me, stat[2]))
        except (ValueError, OSError, RuntimeError) as e:
            if isinstance(e, FileExistsError) or not self.run_dir.is_dir():
                raise  # never write into another launch's run directory
            write_json_atomic(
                self.run_dir / EXIT_FILE,
                {"exit_code": 127, "signal": None, "error": f"could not start: {e}",
                 "finished_at": time.time()},
            )  # fmt: skip
            return False
        write_json_atomic(
            self.run_dir / PLACED_FILE,
            {
                "node": os.environ.get("SLURMD_NODENAME", self.spec.node),
                "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                "slurm_gpus": os.environ.get("SLURM_JOB_GPUS"),
                "pid": me,
            },
        )
        if self.spec.elastic is not None:
            self._write_elastic()
        return True

    def _write_elastic(self) -> None:
        found = self.local.elastic(self.handle)
        if found is not None:
            write_json_atomic(self.paths["elastic"], found.to_json())

    def _on_signal(self, sig: int, _frame: Any) -> None:
        if sig != WAKE_SIGNAL:
            self.forward.append(sig)
        self.wake.set()

    def serve(self) -> None:
        """Until the task ends: carry out requests, pass Slurm's stop signal on."""
        while self.local.running():
            self.wake.wait(WATCH_INTERVAL_S)
            self.wake.clear()
            self._requests()
            while self.forward:
                sig = self.forward.pop()
                if read_json(self.paths["stop"]) is None:
                    try:
                        os.killpg(self.handle.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            self.local.poll()

    def _requests(self) -> None:
        stop = read_json(self.paths["stop"])
        if stop is not None and not self.stopped:
            self.stopped = True
            try:
                outcome = Outcome(str(stop.get("outcome")))
                self.local.stop(self.handle, outcome)
            except ValueError:
                self.local.stop(self.handle, Outcome.CANCELLED)
        told = read_json(self.paths["resize"])
        if told is not None and not self.stopped:
            elastic = Elastic.from_json(told)
            if elastic is not None:
                key = (elastic.world_size, elastic.rank, elastic.generation)
                if key != self.resized:
                    self.resized = key
                    self.local.resize(self.handle, elastic)
                    self._write_elastic()
        ask = read_json(self.paths["prepare"])
        if ask is not None and ask != self.prepared:
            self.prepared = ask
            threading.Thread(target=self._prepare, args=(ask,), daemon=True).start()

    def _prepare(self, ask: dict[str, Any]) -> None:
        """Read another job's checkpoint ahead on this node, as this task's user (the control
        plane asks only a step of the same user as that job's), and say so."""
        directory = ask.get("directory")
        files = warm_directory(directory) if isinstance(directory, str) and directory else 0
        write_json_atomic(
            self.paths["prepared"],
            {"job_id": ask.get("job_id"), "files": files, "at": time.time()},
        )

    def end(self) -> int:
        """Remove the task's scratch on this node; the step's exit status (the task's)."""
        spec = self.spec
        self.local.close()
        self.local.release_task(spec.job_id, spec.attempt, spec.task)
        record = read_json(self.run_dir / EXIT_FILE) or {}
        if record.get("exit_code") is not None:
            return int(record["exit_code"]) & 0xFF
        if record.get("signal") is not None:
            return 128 + int(record["signal"])
        return 1


def main(root: str, scratch: str | None, launch: dict[str, Any], source: str | None = None) -> int:
    """The batch step: run the task, serve the control plane's requests, exit as it did.

    ``source``: where this step imported suanli from when the node's interpreter does not
    have it installed; the task's supervisor is told too (``PYTHONPATH``), the task not."""
    os.environ.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    hidden: tuple[str, ...] = ()
    if source is not None:
        os.environ["PYTHONPATH"] = source
        hidden = ("PYTHONPATH",)
    step = _Step(Path(root), scratch, launch_from_json(launch), hidden)
    catch = {WAKE_SIGNAL}
    if step.spec.stop_signal not in ("SIGKILL", "SIGSTOP"):
        catch.add(signal.Signals(signal_number(step.spec.stop_signal)))
    for sig in catch:
        signal.signal(sig, step._on_signal)
    if not step.start():
        return 0 if read_json(step.paths["stop"]) is not None else 127
    step.serve()
    return step.end()
