"""Run tasks as real subprocesses on this machine, each under its own supervisor (the shim).

Layout: every task gets ``root/<job_id>/<attempt>/<task>/`` (the job id escaped for the
filesystem, mode 0700, the server's) holding ``spec.json`` (what to run, written before the
shim starts), ``stdout.log``/``stderr.log`` (the task's output, written by the shim, each
capped at ``Launch.log_max_bytes`` with one rotated ``.1`` file), ``pid`` (the command's
pid), ``shim.log`` (the supervisor's own errors), ``stop.json`` (a requested stop and its
outcome) and ``exit.json`` (how it ended, written atomically by the shim).

A task without a ``cwd`` runs in its own scratch directory,
``scratch/<instance>/<job_id>/<attempt>/<task>/`` (mode 0700, owned by the task's user),
never in the run directory: the scratch root lies outside the state directory (``root``'s
parent), so whatever a task writes or reads relative to its working directory is kept away
from the database and the other tasks' files. ``<instance>`` is a random id kept in
``root/@scratch-id``: job ids restart when a state directory is made anew, and two servers
may share a scratch root, so without it a task could be handed another run's directory.
The scratch directories are removed when the attempt is released.

A task of an elastic job (``Launch.elastic``) has an elastic file,
``scratch/<instance>/<job_id>/<attempt>/elastic/<task>.json`` (``SUANLI_ELASTIC_FILE``),
whatever its working directory: the server's, 0644 in directories of mode 0711, so the
task's user reads it and nobody else writes it; written before the task starts and
rewritten atomically (a temporary file renamed over it) by :meth:`LocalBackend.resize`,
which then sends ``SIGUSR1`` to the task's shim; the shim passes it on to the task's
processes that catch it, once one does.

The shim (:mod:`suanli.backends.shim`) leads its own session and process group, so the
task keeps running, keeps its runtime limit and still leaves an exit file while the control
plane is down; a restarted control plane finds it again with :meth:`LocalBackend.adopt`.

Linux only: process identity (pid plus start time) and liveness are read from ``/proc``.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import stat as stat_mode
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suanli.backends.base import (
    IDENTITY_VARIABLES,
    LOADER_VARIABLES,
    RESIZE_SIGNAL,
    STOP_OUTCOMES,
    SUANLI_VARIABLES,
    Elastic,
    Exit,
    Handle,
    Launch,
    Outcome,
    job_dir_name,
    merged_environment,
    signal_number,
)
from suanli.backends.endings import exit_from_record, gone_without_record
from suanli.backends.prepare import Prepare, files_note, warm_directory
from suanli.backends.shim import (
    EXIT_FILE,
    FORWARDED,
    HANDLE_FILE,
    PID_FILE,
    SHIM_LOG,
    SPEC_FILE,
    STDERR_LOG,
    STDOUT_LOG,
    STOP_FILE,
    group_members,
    proc_stat,
    process_alive,
    read_json,
    write_json_atomic,
)

# How long after the grace period the backend SIGKILLs the whole group (shim included) if the
# shim has not finished the job itself; the shim's own SIGKILL comes first and leaves an
# exit file, this only covers a shim that is stuck or gone. Larger than the shim's own work
# after the child ends (killing stragglers, draining the pipes for DRAIN_TIMEOUT_S).
BACKSTOP_MARGIN_S = 5.0


@dataclass(slots=True)
class _Tracked:
    handle: Handle
    process: subprocess.Popen[bytes] | None  # the shim, when this backend started it


# In ``root``, the id of this state directory's scratch level. ``@`` never appears in a job
# directory name (job_dir_name escapes it), so no job can collide with it.
SCRATCH_ID_FILE = "@scratch-id"


def default_scratch() -> Path:
    """The scratch root used by default: ``<tempdir>/suanli-scratch-<euid>``.

    Outside any state directory and private to the server's user (checked when a backend
    starts, since anyone may create names in the shared temporary directory).
    """
    return Path(tempfile.gettempdir()) / f"suanli-scratch-{os.geteuid()}"


def _scratch_id(root: Path) -> str:
    """The random id of ``root``'s scratch level, made on first use and kept in ``root``.

    Written to a temporary file and hard-linked into place, so that concurrent first uses
    agree on one id and no reader sees a half-written one.
    """
    path = root / SCRATCH_ID_FILE
    for _ in range(2):
        try:
            value = path.read_text().strip()
        except FileNotFoundError:
            pass
        else:
            if value and all(ch in "0123456789abcdef" for ch in value):
                return value
            raise ValueError(f"{path}: not a scratch id: {value!r}")
        tmp = root / f".{SCRATCH_ID_FILE}.{os.getpid()}.tmp"
        tmp.write_text(secrets.token_hex(8) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # someone else made it first: read theirs
        finally:
            tmp.unlink()
    return path.read_text().strip()


def _inside(path: Path, directory: Path) -> bool:
    """True if ``path`` is ``directory`` or below it, symlinks resolved."""
    real, base = os.path.realpath(path), os.path.realpath(directory)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _private_dir(path: Path, field: str) -> None:
    """Make ``path`` a directory of this user that only it can write (0711), or refuse.

    Created if missing (with its parents, which are not checked). An existing one must be a real directory (not a
    symlink) owned by this user and not writable by group or others, since a directory that
    someone else could write may already hold what they put there; 0711 lets a task's user
    pass through to its own subdirectory without listing the others.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o711)
    info = os.lstat(path)
    if not stat_mode.S_ISDIR(info.st_mode):
        raise ValueError(f"{field}: {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise ValueError(
            f"{field}: {path} is owned by uid {info.st_uid}, not by this server (uid "
            f"{os.geteuid()})"
        )
    if info.st_mode & (stat_mode.S_IWGRP | stat_mode.S_IWOTH):
        raise ValueError(f"{field}: {path} is writable by group or others; make it 0711")
    if stat_mode.S_IMODE(info.st_mode) != 0o711:
        os.chmod(path, 0o711)


def identity_environment(uid: int) -> dict[str, str]:
    """HOME, USER and LOGNAME for a task running as ``uid``, from the password database.

    A uid without an entry gets ``HOME=/`` (as container runtimes do) and no USER/LOGNAME,
    rather than the server's own values.
    """
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return {"HOME": "/"}
    return {"HOME": entry.pw_dir or "/", "USER": entry.pw_name, "LOGNAME": entry.pw_name}


class LocalBackend:
    """Runs each task as a subprocess of a shim supervisor under ``root`` (Linux only).

    ``scratch`` is where tasks without a ``cwd`` get their working directories (default:
    :func:`default_scratch`; see :meth:`scratch_dir_for`); it must not lie inside ``root``'s parent (the state
    directory) nor contain it, and must be this user's and writable by no one else
    (``ValueError`` naming ``scratch`` otherwise). ``poll_interval`` is how often
    :meth:`wait` polls; ``python`` is the interpreter that runs the shim (it must be able to
    import ``suanli``); ``hidden_env`` names variables of this process that tasks must not
    inherit (the user's own ``env`` may still set them). Methods are thread-safe.
    """

    def __init__(
        self,
        root: Path,
        *,
        scratch: Path | None = None,
        poll_interval: float = 0.2,
        python: str = sys.executable,
        hidden_env: tuple[str, ...] = (),
    ) -> None:
        self.root = Path(root).absolute()
        self.scratch = default_scratch() if scratch is None else Path(scratch).absolute()
        state = self.root.parent
        if _inside(self.scratch, state) or _inside(state, self.scratch):
            raise ValueError(
                f"scratch: {self.scratch} must lie outside the state directory {state} "
                f"(tasks work there) and must not contain it"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        _private_dir(self.scratch, "scratch")
        self.scratch_id = _scratch_id(self.root)
        self.poll_interval = poll_interval
        self.python = python
        self.hidden_env = hidden_env
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, int, int], _Tracked] = {}
        # Shims whose end is reported but which may not have been reaped yet: our own Popen,
        # or (pid, start_ticks) for an adopted one that may still be our child.
        self._reap_later: list[subprocess.Popen[bytes] | tuple[int, int]] = []
        self._timers: list[threading.Timer] = []

    # --- paths ---------------------------------------------------------------------------

    def run_dir_for(self, job_id: str, attempt: int, task: int) -> Path:
        """The directory of one task's files."""
        return self.root / job_dir_name(job_id) / str(attempt) / str(task)

    def scratch_dir_for(self, job_id: str, attempt: int, task: int) -> Path:
        """The working directory of a task launched without a ``cwd``:
        ``scratch/<scratch_id>/<job_id>/<attempt>/<task>``."""
        return self.scratch / self.scratch_id / job_dir_name(job_id) / str(attempt) / str(task)

    def prepare(self, job: Prepare) -> str:
        """``job`` is expected to start soon: read its checkpoint ahead into the page cache
        (``suanli.backends.prepare``); says how many files were asked for."""
        return files_note(warm_directory(job.checkpoint_dir) if job.checkpoint_dir else 0)

    def release(self, job_id: str, attempt: int) -> None:
        """Remove the attempt's scratch directories (the working directories of its tasks that
        were given none); its run directories, with the logs, stay."""
        top = self.scratch / self.scratch_id / job_dir_name(job_id) / str(attempt)
        shutil.rmtree(top, ignore_errors=True)
        try:
            top.parent.rmdir()  # the job's, once no attempt has one left
        except OSError:
            pass

    def release_task(self, job_id: str, attempt: int, task: int) -> None:
        """Remove one task's scratch directory and elastic file (its siblings' stay): what a
        backend that runs each task apart (on a node of a cluster) frees when that task's
        end is read. The attempt's and job's levels go once no task has one left."""
        scratch = self.scratch_dir_for(job_id, attempt, task)
        shutil.rmtree(scratch, ignore_errors=True)
        elastic = self.elastic_file_for(job_id, attempt, task)
        elastic.unlink(missing_ok=True)
        for level in (elastic.parent, scratch.parent, scratch.parent.parent):
            try:
                level.rmdir()
            except OSError:
                pass

    def elastic_file_for(self, job_id: str, attempt: int, task: int) -> Path:
        """The elastic file of a task of an elastic job (see the module docstring)."""
        attempt_dir = self.scratch / self.scratch_id / job_dir_name(job_id) / str(attempt)
        return attempt_dir / "elastic" / f"{task}.json"

    def _write_elastic(self, path: Path, told: Elastic) -> None:
        """Write ``path`` atomically, 0644, making its directories (0711) as needed."""
        for level in (path.parents[3], path.parents[2], path.parents[1], path.parent):
            try:
                os.mkdir(level, 0o711)
            except FileExistsError:
                continue
            os.chmod(level, 0o711)  # whatever the umask
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.fchmod(fd, 0o644)
            os.write(fd, json.dumps(told.to_json(), sort_keys=True).encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def resize(self, handle: Handle, told: Elastic) -> None:
        """Rewrite the task's elastic file, then send ``SIGUSR1`` to its shim, which passes
        it on to the task's processes (``Backend.resize``). A task that has ended, or that is
        being stopped, is left alone."""
        run_dir = Path(handle.run_dir)
        if (run_dir / EXIT_FILE).exists() or (run_dir / STOP_FILE).exists():
            return
        if not process_alive(handle.pid, handle.start_ticks):
            return
        self._write_elastic(self.elastic_file_for(*handle.key), told)
        _kill(handle.pid, RESIZE_SIGNAL)

    def elastic(self, handle: Handle) -> Elastic | None:
        """What the task's elastic file says now (None: it has none)."""
        return Elastic.from_json(read_json(self.elastic_file_for(*handle.key)))

    def node_address(self, node: str) -> str:
        """The local backend runs every task on this machine: its tasks meet on loopback."""
        return "127.0.0.1"

    def find(self, job_id: str, attempt: int, task: int) -> Handle | None:
        """The handle written when the task was launched, if it was (see ``Backend.find``).

        A control plane killed inside ``launch``, after the shim started and before the
        handle file was written, leaves a run directory without one: the shim is then found
        by its command line (it names its run directory), or, if it has ended, by the pid in
        its exit file, and the handle is written now. None if no shim ever ran there."""
        run_dir = self.run_dir_for(job_id, attempt, task)
        record = read_json(run_dir / HANDLE_FILE)
        if record is not None:
            return Handle.from_json(record)
        if not (run_dir / SPEC_FILE).exists():
            return None
        shim = _shim_of(run_dir)
        if shim is None:
            ended = read_json(run_dir / EXIT_FILE)
            if ended is None or not isinstance(ended.get("shim_pid"), int):
                return None
            shim = (ended["shim_pid"], -1)  # over: start ticks no live process has
        handle = Handle(job_id, attempt, task, shim[0], shim[1], str(run_dir))
        write_json_atomic(run_dir / HANDLE_FILE, handle.to_json())
        return handle

    def _never_ran(self, run_dir: Path) -> bool:
        """Whether a run directory holds no trace of a shim: no handle, no exit, no pid, no
        shim process naming it."""
        return (
            not any((run_dir / name).exists() for name in (HANDLE_FILE, EXIT_FILE, PID_FILE))
            and _shim_of(run_dir) is None
        )

    def log_paths(self, handle: Handle) -> tuple[Path, Path]:
        """The current stdout and stderr logs (older output may be in ``<name>.1``)."""
        run_dir = Path(handle.run_dir)
        return run_dir / STDOUT_LOG, run_dir / STDERR_LOG

    # --- launch --------------------------------------------------------------------------

    def launch(self, spec: Launch, *, tether: tuple[int, int] | None = None) -> Handle:
        """Write the task's ``spec.json`` and start its shim in a new session.

        ``tether`` is the (pid, start ticks) of a process the task must not outlive (the Ray
        backend's actor for it): the shim kills the task once that process is gone.

        Raises ``ValueError`` for an invalid launch (also for ``run_as`` when this server
        does not run as root and so cannot switch users) and ``FileExistsError`` if this
        (job, attempt, task) already has a run directory: a relaunch needs a new attempt,
        so that files of an earlier run (perhaps still running) are never mixed up.
        """
        env = merged_environment(spec)  # validates the launch
        unset = [*SUANLI_VARIABLES, *sorted(LOADER_VARIABLES), *self.hidden_env]
        if spec.run_as is not None:
            if os.geteuid() != 0:
                raise ValueError(
                    f"run_as: switching tasks to uid {spec.run_as[0]} needs the server to run "
                    f"as root (it runs as uid {os.geteuid()})"
                )
            # The server's HOME/USER/LOGNAME name the server's user: replace them; the
            # user's own env still wins.
            unset.extend(IDENTITY_VARIABLES)
            env = {**identity_environment(spec.run_as[0]), **env}
        key = (spec.job_id, spec.attempt, spec.task)
        run_dir = self.run_dir_for(*key)
        if spec.elastic is not None:
            env["SUANLI_ELASTIC_FILE"] = str(self.elastic_file_for(*key))
        with self._lock:
            if key in self._tasks:
                raise FileExistsError(f"task {key} is already running")
        run_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if run_dir.exists() and self._never_ran(run_dir):
            # A launch cut short before its shim existed (the control plane died inside it):
            # nothing ran there, so the directory is made afresh.
            shutil.rmtree(run_dir)
            # Its scratch directory, if the cut-short launch had made it, is as fresh.
            shutil.rmtree(self.scratch_dir_for(*key), ignore_errors=True)
        try:
            run_dir.mkdir(mode=0o700)
        except FileExistsError:
            raise FileExistsError(
                f"run directory {run_dir} already exists: launch a new attempt instead"
            ) from None
        if spec.cwd is not None:
            cwd = spec.cwd
        else:
            try:
                cwd = str(self._make_scratch(spec))
            except BaseException:
                run_dir.rmdir()  # nothing started: the attempt may be launched again
                raise
        write_json_atomic(
            run_dir / SPEC_FILE,
            {
                "job_id": spec.job_id,
                "attempt": spec.attempt,
                "task": spec.task,
                "command": list(spec.command),
                "env": env,
                "unset": unset,
                "cwd": cwd,
                "run_as": list(spec.run_as) if spec.run_as is not None else None,
                "gpus": list(spec.gpus),
                "gpu_milli": spec.gpu_milli,
                "gpu_memory_mib": spec.gpu_memory_mib,
                "checkpoint_dir": spec.checkpoint_dir,
                "max_runtime_s": spec.max_runtime_s,
                "stop_signal": spec.stop_signal,
                "grace_s": spec.grace_s,
                "elastic": spec.elastic is not None,
                "log_max_bytes": spec.log_max_bytes,
                "log_min_free_bytes": spec.log_min_free_bytes,
                "tether": list(tether) if tether is not None else None,
                "created_at": time.time(),
            },
        )
        for log in (STDOUT_LOG, STDERR_LOG):  # exist from the start, so readers can tail them
            os.close(os.open(run_dir / log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        if spec.elastic is not None:  # there before the task starts, as its env says
            self._write_elastic(self.elastic_file_for(*key), Elastic.of(spec.elastic))
        # The shim starts with the signals it handles blocked and unblocks them once its
        # handlers are in place, so a stop that comes while it starts up is not lost.
        blocked = set(FORWARDED)
        if spec.stop_signal not in ("SIGKILL", "SIGSTOP"):
            blocked.add(signal.Signals[spec.stop_signal])
        with open(run_dir / SHIM_LOG, "ab") as shim_log:
            previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
            try:
                process = subprocess.Popen(
                    [self.python, "-P", "-m", "suanli.backends.shim", str(run_dir)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=shim_log,
                    cwd=run_dir,
                    close_fds=True,
                    start_new_session=True,
                )
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        stat = proc_stat(process.pid)  # a zombie still has its stat until we reap it
        if stat is None:
            process.kill()
            process.wait()
            raise RuntimeError(f"cannot read /proc/{process.pid}/stat for the new shim")
        handle = Handle(spec.job_id, spec.attempt, spec.task, process.pid, stat[2], str(run_dir))
        # Written as soon as the shim exists: a control plane that dies before it records
        # the handle finds the task again with ``find``.
        write_json_atomic(run_dir / HANDLE_FILE, handle.to_json())
        with self._lock:
            self._tasks[key] = _Tracked(handle, process)
        return handle

    def _make_scratch(self, spec: Launch) -> Path:
        """Create the task's scratch directory: 0700, owned by the task's user.

        The levels above it are the server's, 0711, so a task's user can pass through them
        to its own directory only. ``FileExistsError`` if the task's directory is already
        there (its run directory was removed by hand): it is never reused, since it may hold
        another run's files.
        """
        task_dir = self.scratch_dir_for(spec.job_id, spec.attempt, spec.task)
        for level in (task_dir.parents[2], task_dir.parents[1], task_dir.parent):
            try:
                os.mkdir(level, 0o711)
            except FileExistsError:
                continue
            os.chmod(level, 0o711)  # whatever the umask
        try:
            os.mkdir(task_dir, 0o700)
        except FileExistsError:
            raise FileExistsError(
                f"scratch directory {task_dir} already exists: remove it or launch a new attempt"
            ) from None
        if spec.run_as is not None:
            os.chown(task_dir, spec.run_as[0], spec.run_as[1])
        return task_dir

    # --- poll ----------------------------------------------------------------------------

    def poll(self) -> list[Exit]:
        """Tasks that ended since the last poll, each reported once, oldest end first."""
        with self._lock:
            tracked = list(self._tasks.values())
        exits = []
        for item in tracked:
            ended = self._check(item)
            if ended is not None:
                exits.append(ended)
                with self._lock:
                    self._tasks.pop(item.handle.key, None)
        self._reap()
        exits.sort(key=lambda e: (e.finished_at, e.handle.job_id, e.handle.task))
        return exits

    def wait(self, timeout: float) -> list[Exit]:
        """Poll every ``poll_interval`` until some task ends or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while True:
            exits = self.poll()
            remaining = deadline - time.monotonic()
            if exits or remaining <= 0:
                return exits
            time.sleep(min(self.poll_interval, remaining))

    def running(self) -> list[Handle]:
        """Tracked tasks whose end has not been reported yet, in launch/adoption order."""
        with self._lock:
            return [item.handle for item in self._tasks.values()]

    def _check(self, item: _Tracked) -> Exit | None:
        handle = item.handle
        run_dir = Path(handle.run_dir)
        if item.process is not None:
            status = item.process.poll()  # first, so a missing exit file below is final
            record = read_json(run_dir / EXIT_FILE)
            if record is not None:
                if status is None:  # the shim is just exiting: reap it on a later poll
                    self._defer_reap(item.process)
                return self._exit_from_record(handle, record)
            if status is None:
                return None
            return self._gone(handle, -status if status < 0 else None, status)
        record = read_json(run_dir / EXIT_FILE)
        if record is None:
            if process_alive(handle.pid, handle.start_ticks):
                return None
            record = read_json(run_dir / EXIT_FILE)  # it may have finished in between
        self._defer_reap((handle.pid, handle.start_ticks))
        if record is not None:
            return self._exit_from_record(handle, record)
        return self._gone(handle, None, None)

    def _defer_reap(self, shim: subprocess.Popen[bytes] | tuple[int, int]) -> None:
        with self._lock:
            self._reap_later.append(shim)

    def _reap(self) -> None:
        """Collect ended shims that are our children, so none is left a zombie.

        An adopted shim is our child only after a restart within the same process; otherwise
        its parent (init, after the old control plane died) collects it.
        """
        with self._lock:
            pending, self._reap_later = self._reap_later, []
        keep: list[subprocess.Popen[bytes] | tuple[int, int]] = []
        for shim in pending:
            if isinstance(shim, subprocess.Popen):
                if shim.poll() is None:
                    keep.append(shim)
                continue
            pid, ticks = shim
            stat = proc_stat(pid)
            if stat is None or stat[2] != ticks:
                continue  # already collected
            if stat[0] != "Z":
                keep.append(shim)
                continue
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # not our child: its parent collects it
        with self._lock:
            self._reap_later.extend(keep)

    # --- outcomes ------------------------------------------------------------------------

    def _exit_from_record(self, handle: Handle, record: dict[str, Any]) -> Exit:
        return exit_from_record(handle, record)

    def _gone(self, handle: Handle, sig: int | None, status: int | None) -> Exit:
        return gone_without_record(handle, sig, status)

    # --- stop ----------------------------------------------------------------------------

    def stop(self, handle: Handle, outcome: Outcome) -> None:
        """Ask the task to stop: its stop signal to the group now, SIGKILL after the grace.

        The outcome is recorded in ``stop.json`` first, so the Exit says CANCELLED or
        PREEMPTED even if it is read after a restart. A task that has already ended, or that
        is being stopped already, is left alone (the first request wins). Non-blocking.
        """
        if outcome not in STOP_OUTCOMES:
            raise ValueError(f"outcome: stop takes CANCELLED or PREEMPTED, got {outcome!r}")
        run_dir = Path(handle.run_dir)
        if (run_dir / EXIT_FILE).exists() or (run_dir / STOP_FILE).exists():
            return
        if not process_alive(handle.pid, handle.start_ticks):
            return
        spec = read_json(run_dir / SPEC_FILE) or {}
        name = str(spec.get("stop_signal", "SIGTERM"))
        grace_s = float(spec.get("grace_s", 30.0))
        sig = signal_number(name)
        requested_at = time.time()
        write_json_atomic(
            run_dir / STOP_FILE,
            {
                "outcome": outcome.value,
                "requested_at": requested_at,
                "signal": sig,
                "signal_name": name,
                "grace_s": grace_s,
            },
        )
        if sig == signal.SIGKILL:
            # SIGKILL cannot be caught: spare the shim so that it still reaps the task and
            # writes the exit file.
            for pid in group_members(handle.pid):
                if pid != handle.pid:
                    _kill(pid, sig)
        else:
            try:
                os.killpg(handle.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        self._arm_backstop(handle, grace_s + BACKSTOP_MARGIN_S)

    def _arm_backstop(self, handle: Handle, delay: float) -> None:
        timer = threading.Timer(max(0.0, delay), self._backstop, (handle,))
        timer.daemon = True
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def _backstop(self, handle: Handle) -> None:
        if (Path(handle.run_dir) / EXIT_FILE).exists():
            return
        if process_alive(handle.pid, handle.start_ticks):
            try:
                os.killpg(handle.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # --- restart -------------------------------------------------------------------------

    def adopt(self, handles: Iterable[Handle]) -> list[Exit]:
        """Track tasks started before a restart; return the Exits of those already over.

        A task is still ours only if its pid is alive with the same start ticks (a recycled
        pid is someone else). Those that ended while we were down report their exit file;
        those gone without one are LOST (or the requested stop outcome, if a stop was
        recorded). A pending stop gets its SIGKILL backstop again. Already tracked handles
        are skipped.
        """
        exits = []
        for handle in handles:
            with self._lock:
                if handle.key in self._tasks:
                    continue
            run_dir = Path(handle.run_dir)
            record = read_json(run_dir / EXIT_FILE)
            if record is None and process_alive(handle.pid, handle.start_ticks):
                with self._lock:
                    self._tasks[handle.key] = _Tracked(handle, None)
                stop = read_json(run_dir / STOP_FILE)
                if stop is not None:
                    due = float(stop.get("requested_at", 0.0)) + float(stop.get("grace_s", 0.0))
                    self._arm_backstop(handle, due + BACKSTOP_MARGIN_S - time.time())
                continue
            if record is None:
                record = read_json(run_dir / EXIT_FILE)
            self._defer_reap((handle.pid, handle.start_ticks))
            if record is not None:
                exits.append(self._exit_from_record(handle, record))
            else:
                exits.append(self._gone(handle, None, None))
        self._reap()
        return exits

    def close(self) -> None:
        """Cancel pending SIGKILL backstops (the shims keep their own). Tasks keep running."""
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()


def _shim_of(run_dir: Path) -> tuple[int, int] | None:
    """(pid, start ticks) of the live shim supervising ``run_dir``, found by its command line
    (``python -P -m suanli.backends.shim <run_dir>``), or None."""
    want = [b"-m", b"suanli.backends.shim", os.fsencode(str(run_dir))]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and not args[-1]:
            args.pop()
        if args[-3:] == want:
            stat = proc_stat(int(entry))
            if stat is not None and stat[0] not in ("Z", "X", "x"):
                return int(entry), stat[2]
    return None


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
