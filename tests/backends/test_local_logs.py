"""LocalBackend: task logs pumped by the supervisor, rotated at their cap, dropped below the
disk floor, drained whole when a task exits."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from local_backend import (
    PY,
    exit_record,
    launch,
    py,
    stdout_of,
    wait_exit,
    wait_until,
)
from suanli.backends import LocalBackend, Outcome
from suanli.backends.shim import DRAIN_TIMEOUT_S

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


# --- bounded logs --------------------------------------------------------------------------

WRITE_A_LOT = """
import os, sys
total, chunk = int(sys.argv[1]), int(sys.argv[2])
block = bytes(range(256)) * (chunk // 256)
for fd in (1, 2):
    written = 0
    while written + len(block) <= total:
        os.write(fd, block)
        written += len(block)
    os.write(fd, b"x" * (total - written - 8) + b"THE-END\\n")
"""


def test_logs_are_rotated_at_the_cap(backend: LocalBackend) -> None:
    total, cap = 10_000_000, 1 << 20
    cmd = (PY, "-c", WRITE_A_LOT, str(total), "65536")
    h = backend.launch(launch(command=cmd, log_max_bytes=cap))
    assert wait_exit(backend, h, timeout=30).outcome is Outcome.SUCCEEDED
    logs = exit_record(h)["logs"]
    assert isinstance(logs, dict)
    for name, path in zip(("stdout", "stderr"), backend.log_paths(h), strict=True):
        rotated = path.with_name(path.name + ".1")
        assert path.stat().st_size <= cap and rotated.stat().st_size <= cap
        assert path.stat().st_size + rotated.stat().st_size <= 2 * cap
        assert path.read_bytes().endswith(b"THE-END\n")  # the newest output is kept
        stats = logs[name]
        assert stats["written"] == total and stats["dropped"] == 0
        assert stats["rotations"] >= total // cap
        assert stats["rotated"] + path.stat().st_size == total


def test_output_is_dropped_below_the_free_space_floor(backend: LocalBackend) -> None:
    cmd = (PY, "-c", WRITE_A_LOT, "300000", "4096")
    h = backend.launch(launch(command=cmd, log_min_free_bytes=1 << 62))  # never that free
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.SUCCEEDED
    assert "output dropped: 300000 bytes of stdout, 300000 bytes of stderr" in e.detail
    out, err = backend.log_paths(h)
    assert out.read_bytes() == b"" and err.read_bytes() == b""
    logs = exit_record(h)["logs"]
    assert isinstance(logs, dict)
    for name in ("stdout", "stderr"):
        assert logs[name]["written"] == 0
        assert logs[name]["dropped"] == logs[name]["dropped_low_disk"] == 300000


def test_fast_output_is_all_in_the_log_when_the_task_exits(backend: LocalBackend) -> None:
    total = 30_000_000  # below the default cap, written as fast as it goes
    cmd = (PY, "-c", WRITE_A_LOT, str(total), "1048576")
    h = backend.launch(launch(command=cmd))
    assert wait_exit(backend, h, timeout=30).outcome is Outcome.SUCCEEDED
    block = bytes(range(256)) * 4096
    expected = block * (total // len(block))
    expected += b"x" * (total - len(expected) - 8) + b"THE-END\n"
    digest = hashlib.sha256(expected).hexdigest()
    for path in backend.log_paths(h):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        assert not path.with_name(path.name + ".1").exists()
    assert exit_record(h)["logs_drain_timed_out"] is False


ESCAPE_THE_GROUP = """
import subprocess, sys
p = subprocess.Popen(["sleep", "30"], start_new_session=True)  # keeps our stdout open
print(p.pid, flush=True)
"""


def test_a_process_holding_the_pipes_does_not_hang_the_shim(backend: LocalBackend) -> None:
    t0 = time.monotonic()
    h = backend.launch(launch(command=py(ESCAPE_THE_GROUP)))
    try:
        e = wait_exit(backend, h, timeout=DRAIN_TIMEOUT_S + 10)
        assert time.monotonic() - t0 < DRAIN_TIMEOUT_S + 5
    finally:
        wait_until(lambda: stdout_of(backend, h).endswith("\n"))
        os.kill(int(stdout_of(backend, h)), signal.SIGKILL)
    assert e.outcome is Outcome.SUCCEEDED
    assert "output after the task's end not read" in e.detail
    record = exit_record(h)
    assert record["logs_drain_timed_out"] is True
    # finished_at is when the child was reaped, before the bounded wait for the pipes
    exit_written = (Path(h.run_dir) / "exit.json").stat().st_mtime
    assert e.finished_at <= exit_written - DRAIN_TIMEOUT_S + 0.5
