"""The per-task supervisor ("shim"): ``python -m suanli.backends.shim <run_dir>``.

:class:`suanli.backends.local.LocalBackend` starts one shim per task in a new session, so the
shim leads the task's process group and outlives the control plane. The shim

* reads ``run_dir/spec.json`` (command, environment, cwd, user, max runtime, stop signal,
  grace, log limits);
* starts the command as its child, in its own process group, as the user ``run_as`` names
  (uid, gid, no other groups) if any, and writes the child's pid to ``run_dir/pid``. The
  shim itself stays the server's user, so it can still write the run directory, which the
  task cannot read;
* reads the child's stdout/stderr through pipes, without ever blocking on them, into
  ``stdout.log``/``stderr.log``: a file that would grow past ``log_max_bytes`` is rotated to
  ``<name>.1`` (replacing the older one), and while the filesystem of the run directory has
  less than ``log_min_free_bytes`` free, output is dropped and counted instead, so task
  output can never fill the disk the control plane's state lives on;
* enforces the max runtime itself (stop signal, then SIGKILL after the grace period), so the
  limit holds while the control plane is down;
* with a ``tether`` in the spec (the pid and start ticks of the process that owns the task:
  the Ray backend's actor on the task's node), checks every ``TETHER_CHECK_S`` that the
  owner lives, and when it does not, SIGKILLs the task and records ``tether_lost``: a task
  lives no longer than the actor that stands for it (the engine then holds nothing for it);
* passes signals it receives on to the rest of the group, so signalling the shim alone stops
  the task; for a task of an elastic job (``elastic`` in the spec), ``SIGUSR1`` (a resize:
  its elastic file was rewritten) goes only to the task's processes that catch it (their
  ``SigCgt`` in ``/proc/<pid>/status``), and waits until one does: its default action
  would end a process that has not installed its handler yet; a stop requested by the backend (``stop.json`` present) is sent to the whole group
  by the backend and is not passed on again, so the task sees it once; after such a stop it
  also SIGKILLs the group when the grace period ends;
* reaps the child, SIGKILLs any processes left in the group (a task's processes end with it),
  reads what is left in the pipes (for at most ``DRAIN_TIMEOUT_S``: a process that left the
  group may hold them open), writes ``run_dir/exit.json`` atomically (``finished_at`` is
  when the child was reaped; ``logs`` has per-stream byte counts), and exits.

It uses the standard library only and imports nothing else from suanli, so it starts fast and
keeps running whatever state the rest of the code base is in. Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SPEC_FILE = "spec.json"
EXIT_FILE = "exit.json"
STOP_FILE = "stop.json"
PID_FILE = "pid"
HANDLE_FILE = "handle.json"
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
SHIM_LOG = "shim.log"
ROTATED_SUFFIX = ".1"

# Defaults for a spec.json without log limits (as Launch's defaults).
LOG_MAX_BYTES = 64 << 20
LOG_MIN_FREE_BYTES = 1 << 30
# After the child is reaped and the group killed, how long to keep reading its pipes for
# output still in them; only a process that left the group can hold them open longer.
# Well below the backend's SIGKILL backstop margin (local.BACKSTOP_MARGIN_S), so a stop
# with no grace never kills a shim that is still draining.
DRAIN_TIMEOUT_S = 1.0
# One read from a pipe; and how many reads per stream per turn of the loop, so one stream
# that never pauses cannot starve signals, deadlines or the other stream.
READ_CHUNK = 1 << 16
READS_PER_TURN = 16
# Pipe capacity asked for (best effort): fewer wake-ups for a chatty task.
PIPE_SIZE = 1 << 20
# How stale the free-space reading may get: re-read after this long or this many bytes.
FREE_CHECK_S = 0.25
FREE_CHECK_BYTES = 1 << 20

# What tells a task of an elastic job that its elastic file changed (``base.RESIZE_SIGNAL``),
# and how often a pending one is retried while no process of the task catches it yet.
RESIZE = signal.SIGUSR1
RESIZE_RETRY_S = 0.05
# How often a tethered shim checks that its owner lives.
TETHER_CHECK_S = 0.5
# Signals the shim catches and passes on to the task.
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
# Of those, the ones that ask the task to end (and so start the grace-period countdown).
TERMINATING = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
# Signals that cannot be caught or that must not be set to SIG_IGN (SIGCHLD auto-reaps).
_UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})
_NO_IGNORE = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD})


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` so a reader sees the old file or the whole new one.

    Writes a temporary file in the same directory, fsyncs it, renames it over ``path`` and
    fsyncs the directory, so the file also survives a machine crash once this returns.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(data, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None if the file does not exist or is not an object."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of ``pid`` from ``/proc/<pid>/stat``, or None.

    The second field (the command name) is in parentheses and may itself contain spaces and
    parentheses, so the fixed fields are parsed after the last ``)``: state is field 3, the
    process group field 5 and the start time (clock ticks since boot) field 22.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        rest = data[data.rindex(b")") + 1 :].split()
        return rest[0].decode(), int(rest[2]), int(rest[19])
    except (ValueError, IndexError):
        return None


def process_alive(pid: int, start_ticks: int) -> bool:
    """True if ``pid`` is a live (not zombie) process that started at ``start_ticks``."""
    stat = proc_stat(pid)
    return stat is not None and stat[2] == start_ticks and stat[0] not in ("Z", "X", "x")


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its ``SigCgt`` mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid`` (a snapshot of ``/proc``)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X", "x"):
                members.append(int(entry))
    return members


class _LogStream:
    """One of the task's output streams: the read end of its pipe and its capped log file.

    ``feed`` writes a chunk: the file is rotated to ``<name>.1`` before it would grow past
    ``max_bytes`` (so at most twice that is on disk; one chunk larger than the cap is cut
    into cap-sized pieces), and the chunk is dropped while the filesystem holding the file
    has less than ``min_free`` bytes free, or if the write fails. When writing resumes after
    a drop, a one-line note says how much was lost. Counts go to exit.json (``stats``).
    """

    def __init__(self, path: Path, max_bytes: int, min_free: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.min_free = min_free
        self.fd: int | None = None  # read end of the pipe; None once at EOF or closed
        self.file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = os.fstat(self.file).st_size
        self.written = 0
        self.rotated = 0  # bytes moved out to <name>.1 (the older .1 each time replaced)
        self.rotations = 0
        self.dropped = 0  # bytes not written: low disk or failed writes
        self.dropped_low_disk = 0
        self.unreported_drop = 0  # dropped since the last note in the log
        self.write_errors = 0
        self._free_ok = True
        self._free_checked_at = -float("inf")
        self._since_free_check = 0

    def stats(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "rotated": self.rotated,
            "rotations": self.rotations,
            "dropped": self.dropped,
            "dropped_low_disk": self.dropped_low_disk,
            "write_errors": self.write_errors,
        }

    def _enough_free(self, incoming: int) -> bool:
        if self.min_free <= 0:
            return True
        now = time.monotonic()
        if (
            now - self._free_checked_at >= FREE_CHECK_S
            or self._since_free_check >= FREE_CHECK_BYTES
        ):
            try:
                st = os.statvfs(self.path.parent)
                self._free_ok = st.f_bavail * st.f_frsize - incoming >= self.min_free
            except OSError:
                self._free_ok = False  # cannot tell: keep the disk safe
            self._free_checked_at = now
            self._since_free_check = 0
        self._since_free_check += incoming
        return self._free_ok

    def _rotate(self) -> None:
        """Move the file to ``<name>.1`` (replacing the older one) and start a new one.

        The new file is open before the old descriptor is closed, so a failure leaves a
        valid descriptor (perhaps still to the old file) rather than a stale number.
        """
        os.replace(self.path, self.path.with_name(self.path.name + ROTATED_SUFFIX))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        new_file = os.open(self.path, flags, 0o600)
        os.close(self.file)
        self.file = new_file
        self.rotated += self.size
        self.rotations += 1
        self.size = 0

    def _write(self, data: bytes) -> None:
        if self.size > 0 and self.size + len(data) > self.max_bytes:
            self._rotate()
        view = memoryview(data)
        while view:
            if self.size >= self.max_bytes:
                self._rotate()
            n = os.write(self.file, view[: self.max_bytes - self.size])
            self.size += n
            self.written += n
            view = view[n:]

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if not self._enough_free(len(data)):
            self.dropped += len(data)
            self.dropped_low_disk += len(data)
            self.unreported_drop += len(data)
            return
        try:
            if self.unreported_drop:
                note = (
                    f"\n[suanli: {self.unreported_drop} bytes of output dropped here: "
                    f"the log's filesystem had less than {self.min_free} bytes free "
                    f"or could not be written]\n"
                ).encode()
                self.unreported_drop = 0
                self._write(note)
            self._write(data)
        except OSError as exc:
            self.dropped += len(data)
            self.unreported_drop += len(data)
            self.write_errors += 1
            if self.write_errors == 1:  # once per stream: the shim's own log is on that disk
                print(f"suanli shim: cannot write {self.path}: {exc}", file=sys.stderr, flush=True)

    def pump(self, limit: int | None = READS_PER_TURN) -> bool:
        """Read what the pipe has now (at most ``limit`` reads; None: until it is empty).

        Never blocks. Returns True while the pipe may still deliver more (not at EOF).
        """
        reads = 0
        while self.fd is not None and (limit is None or reads < limit):
            try:
                data = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return True
                self.close_pipe()
                return False
            reads += 1
            if not data:
                self.close_pipe()
                return False
            self.feed(data)
        return self.fd is not None

    def close_pipe(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        self.close_pipe()
        if self.file >= 0:
            try:
                os.close(self.file)
            except OSError:
                pass
            self.file = -1


def _output_pipe() -> tuple[int, int]:
    """A pipe for one output stream: (read end, non-blocking, as large as allowed; write end)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, AttributeError):
        pass  # the default capacity still works, with more wake-ups
    return read_fd, write_fd


class _Shim:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.pgid = os.getpgrp()
        self.pending: list[int] = []
        self.child: subprocess.Popen[bytes] | None = None
        self.kill_at: float | None = None  # monotonic time for SIGKILL to the group
        self.killed = False
        self.timed_out_at: float | None = None
        self.stop_received_at: float | None = None
        self.stop_handled = False
        self.streams: list[_LogStream] = []
        self.drain_timed_out = False
        self.elastic = False
        self.resize_pending = False  # a SIGUSR1 no process of the task catches yet
        self.tether: tuple[int, int] | None = None  # (pid, start ticks) of the task's owner
        self.tether_lost_at: float | None = None

    # --- signals -------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: object) -> None:
        self.pending.append(signum)

    def _install_handlers(self, stop_sig: int) -> int:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        caught = set(FORWARDED) | {signal.SIGCHLD}
        if stop_sig not in _UNCATCHABLE:
            caught.add(signal.Signals(stop_sig))
        for sig in caught:
            signal.signal(sig, self._on_signal)
        # The backend starts the shim with these blocked; with the handlers in place, a stop
        # that arrived meanwhile is delivered now. The task inherits the empty mask.
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        return read_fd

    def _signal_others(self, sig: int) -> None:
        """Send ``sig`` to every process of the task: the group except the shim, and the child."""
        child = self.child.pid if self.child is not None and self.child.returncode is None else None
        if sig in _NO_IGNORE:
            targets = {pid for pid in group_members(self.pgid) if pid != os.getpid()}
            if child is not None:
                targets.add(child)
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            return
        # While the shim ignores ``sig``, a signal to the whole group reaches all the others
        # (the kernel discards an ignored signal when it is sent) and nothing can slip in.
        previous = signal.signal(sig, signal.SIG_IGN)
        try:
            os.killpg(self.pgid, sig)
        except OSError:
            pass
        finally:
            signal.signal(sig, previous)
        if child is not None:
            stat = proc_stat(child)
            if stat is not None and stat[1] != self.pgid:  # the child left the group
                try:
                    os.kill(child, sig)
                except OSError:
                    pass

    def _arm_kill(self, grace_s: float) -> None:
        deadline = time.monotonic() + max(0.0, grace_s)
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)
        if self.stop_received_at is None:
            self.stop_received_at = time.time()

    def _backend_stop(self) -> dict[str, Any] | None:
        return read_json(self.run_dir / STOP_FILE)

    def _handle_signals(self, stop_sig: int, grace_s: float) -> None:
        while self.pending:
            sig = self.pending.pop(0)
            if sig == signal.SIGCHLD:
                continue
            if sig == RESIZE and self.elastic:
                self.resize_pending = True
                continue
            stop = self._backend_stop()
            if stop is not None and stop.get("signal") == sig:
                # The backend sent this to the whole group: the task has it already.
                if not self.stop_handled:
                    self.stop_handled = True
                    self._arm_kill(float(stop.get("grace_s", grace_s)))
                continue
            self._signal_others(sig)
            if sig in TERMINATING or sig == stop_sig:
                self._arm_kill(grace_s)

    def _deliver_resize(self) -> None:
        """Send the pending ``SIGUSR1`` to the task's processes that catch it (none: later)."""
        child = self.child.pid if self.child is not None and self.child.returncode is None else None
        targets = {pid for pid in group_members(self.pgid) if pid != os.getpid()}
        if child is not None:
            targets.add(child)
        for pid in sorted(targets):
            if catches(pid, RESIZE):
                try:
                    os.kill(pid, RESIZE)
                except OSError:
                    continue
                self.resize_pending = False

    # --- main ----------------------------------------------------------------------------

    def _finish(self, **fields: Any) -> None:
        record: dict[str, Any] = {
            "exit_code": None,
            "signal": None,
            "finished_at": time.time(),
            "timed_out": self.timed_out_at is not None,
            "timed_out_at": self.timed_out_at,
            "stop_received_at": self.stop_received_at,
            "killed": self.killed,
            "error": None,
            "child_pid": self.child.pid if self.child is not None else None,
            "shim_pid": os.getpid(),
            "logs": {
                name: stream.stats()
                for name, stream in zip(("stdout", "stderr"), self.streams, strict=False)
            },
            "logs_drain_timed_out": self.drain_timed_out,
        }
        if self.tether_lost_at is not None:
            record["tether_lost"] = True
            record["tether_lost_at"] = self.tether_lost_at
        record.update(fields)
        for stream in self.streams:
            stream.close()
        write_json_atomic(self.run_dir / EXIT_FILE, record)

    def _drain(self) -> None:
        """Read the pipes to their end, for at most ``DRAIN_TIMEOUT_S``.

        Called once the child is reaped and the rest of its group killed, so every writer
        still alive has left the group; past the timeout its output is no longer read.
        """
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while True:
            open_fds = [s.fd for s in self.streams if s.pump() and s.fd is not None]
            if not open_fds:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.drain_timed_out = True
                for stream in self.streams:
                    stream.close_pipe()
                return
            try:
                select.select(open_fds, [], [], remaining)
            except InterruptedError:
                pass

    def run(self) -> int:
        spec = read_json(self.run_dir / SPEC_FILE)
        if spec is None:
            self._finish(error=f"no readable {SPEC_FILE} in {self.run_dir}")
            return 1
        stop_sig = int(signal.Signals[spec["stop_signal"]])
        grace_s = float(spec["grace_s"])
        self.elastic = bool(spec.get("elastic"))
        max_runtime = spec.get("max_runtime_s")
        tether = spec.get("tether")
        if tether is not None:
            self.tether = (int(tether[0]), int(tether[1]))
        wake_fd = self._install_handlers(stop_sig)

        started_at = time.time()
        stop = self._backend_stop()
        if stop is not None or any(s in TERMINATING or s == stop_sig for s in self.pending):
            self.stop_received_at = time.time()
            self._finish(started_at=started_at, error="stopped before the command started")
            return 0

        env = dict(os.environ)
        for name in spec.get("unset", []):
            env.pop(name, None)
        env.update(spec["env"])
        self.streams = [
            _LogStream(
                self.run_dir / name,
                int(spec.get("log_max_bytes", LOG_MAX_BYTES)),
                int(spec.get("log_min_free_bytes", LOG_MIN_FREE_BYTES)),
            )
            for name in (STDOUT_LOG, STDERR_LOG)
        ]
        run_as = spec.get("run_as")
        cwd = spec["cwd"]
        switch: dict[str, Any] = {}
        if run_as is not None:
            uid, gid = int(run_as[0]), int(run_as[1])
            # Popen changes directory before it switches user; change it afterwards instead,
            # so the task only ever starts in a directory its own user may enter.
            switch = {
                "user": uid,
                "group": gid,
                "extra_groups": [gid],
                "preexec_fn": lambda: os.chdir(cwd),
            }
        pipes = [_output_pipe() for _ in self.streams]
        try:
            self.child = subprocess.Popen(
                spec["command"],
                stdin=subprocess.DEVNULL,
                stdout=pipes[0][1],
                stderr=pipes[1][1],
                cwd=None if run_as is not None else cwd,
                env=env,
                close_fds=True,
                **switch,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            for read_fd, write_fd in pipes:
                os.close(read_fd)
                os.close(write_fd)
            if isinstance(exc, OSError):
                reason = str(exc)
                code = 126 if isinstance(exc, PermissionError) else 127
            else:  # only the chdir runs in preexec_fn
                reason = f"cannot enter the working directory {cwd!r} as uid {switch['user']}"
                code = 126
            self.streams[1].feed(
                f"suanli: could not start {spec['command'][0]!r}: {reason}\n".encode()
            )
            self._finish(started_at=started_at, exit_code=code, error=f"could not start: {reason}")
            return 0
        for stream, (read_fd, write_fd) in zip(self.streams, pipes, strict=True):
            os.close(write_fd)  # the child has its copy; EOF comes when every writer is gone
            stream.fd = read_fd
        child = self.child
        pid_tmp = self.run_dir / f".{PID_FILE}.tmp"
        pid_tmp.write_text(f"{child.pid}\n")
        os.replace(pid_tmp, self.run_dir / PID_FILE)

        if self._backend_stop() is not None:
            # A stop arrived while the child was being started; it may have missed the signal.
            self.stop_handled = True
            stop = self._backend_stop() or {}
            self._signal_others(stop_sig)
            self._arm_kill(float(stop.get("grace_s", grace_s)))

        begun = time.monotonic()
        runtime_deadline = begun + float(max_runtime) if max_runtime is not None else None
        status = 0
        while True:
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid == child.pid:
                break
            self._handle_signals(stop_sig, grace_s)
            if self.resize_pending:
                self._deliver_resize()
            now = time.monotonic()
            if (
                runtime_deadline is not None
                and now >= runtime_deadline
                and self.timed_out_at is None
            ):
                self.timed_out_at = time.time()
                self._signal_others(stop_sig)
                self._arm_kill(grace_s)
            if self.kill_at is not None and now >= self.kill_at and not self.killed:
                self.killed = True
                self._signal_others(signal.SIGKILL)
            if (
                self.tether is not None
                and self.tether_lost_at is None
                and not process_alive(*self.tether)
            ):
                self.tether_lost_at = time.time()
                self.killed = True
                self._signal_others(signal.SIGKILL)
            deadlines = [d for d in (runtime_deadline, self.kill_at) if d is not None]
            if self.timed_out_at is not None and runtime_deadline in deadlines:
                deadlines.remove(runtime_deadline)
            if self.killed and self.kill_at in deadlines:
                deadlines.remove(self.kill_at)
            timeout = min([30.0] + [max(0.0, d - now) for d in deadlines])
            if self.resize_pending:
                timeout = min(timeout, RESIZE_RETRY_S)
            if self.tether is not None and self.tether_lost_at is None:
                timeout = min(timeout, TETHER_CHECK_S)
            readers = [stream.fd for stream in self.streams if stream.fd is not None]
            try:
                ready, _, _ = select.select([wake_fd, *readers], [], [], timeout)
            except InterruptedError:
                ready = []
            for stream in self.streams:
                if stream.fd is not None and stream.fd in ready:
                    stream.pump()
            try:
                while os.read(wake_fd, 512):
                    pass
            except BlockingIOError:
                pass

        finished_at = time.time()  # the task's end, for billing: not delayed by the drain
        code = os.waitstatus_to_exitcode(status)
        child.returncode = code
        self._kill_stragglers()
        self._drain()
        if code >= 0:
            self._finish(started_at=started_at, finished_at=finished_at, exit_code=code)
        else:
            self._finish(started_at=started_at, finished_at=finished_at, signal=-code)
        return 0

    def _kill_stragglers(self) -> None:
        """SIGKILL whatever the task left behind in the group (the task ends as a whole)."""
        for _ in range(50):
            others = [pid for pid in group_members(self.pgid) if pid != os.getpid()]
            if not others:
                return
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def abort(self, exc: BaseException) -> None:
        """After an unexpected error: kill the task and still leave an exit file."""
        try:
            self.killed = True
            self._signal_others(signal.SIGKILL)
            self._kill_stragglers()
        finally:
            self._finish(error=f"supervisor error: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m suanli.backends.shim RUN_DIR", file=sys.stderr)
        return 2
    shim = _Shim(Path(args[0]))
    try:
        return shim.run()
    except Exception as exc:
        shim.abort(exc)
        raise


if __name__ == "__main__":
    sys.exit(main())
