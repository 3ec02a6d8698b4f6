"""Helpers of the LocalBackend tests (``tests/backends/test_local*.py``): launches, waits,
and the unprivileged user tasks are switched to. Their fixtures are in
``tests/backends/conftest.py``."""

from __future__ import annotations

import json
import os
import pwd
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from suanli.backends import Exit, Handle, Launch, LocalBackend
from suanli.backends.shim import proc_stat

PY = sys.executable


def py(code: str) -> tuple[str, ...]:
    return (PY, "-c", code)


def launch(job: str = "job", **kw: object) -> Launch:
    fields: dict[str, object] = {"job_id": job, "attempt": 1, "task": 0}
    fields.update(kw)
    return Launch(**fields)  # type: ignore[arg-type]


def new_backend(tmp_path: Path, **kw: object) -> LocalBackend:
    """A backend on ``tmp_path/state/runs`` with its scratch at ``tmp_path/scratch``."""
    fields: dict[str, object] = {"scratch": tmp_path / "scratch", "poll_interval": 0.02}
    fields.update(kw)
    return LocalBackend(tmp_path / "state" / "runs", **fields)  # type: ignore[arg-type]


def cleanup(b: LocalBackend) -> None:
    for h in b.running():  # never leave processes behind
        try:
            os.killpg(h.pid, signal.SIGKILL)
        except OSError:
            pass
    b.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def wait_exits(b: LocalBackend, handles: list[Handle], timeout: float = 10.0) -> dict[int, Exit]:
    """Poll until every handle has an Exit; keyed by task index."""
    got: dict[int, Exit] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(handles):
        for e in b.poll():
            assert e.handle.task not in got, "an Exit was reported twice"
            got[e.handle.task] = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; got {got}")
        time.sleep(0.02)
    return got


def wait_exit(b: LocalBackend, handle: Handle, timeout: float = 10.0) -> Exit:
    return wait_exits(b, [handle], timeout)[handle.task]


def stdout_of(b: LocalBackend, h: Handle) -> str:
    return b.log_paths(h)[0].read_text()


def wait_output(b: LocalBackend, h: Handle, text: str) -> None:
    wait_until(lambda: text in stdout_of(b, h))


def gone(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is None or stat[0] == "Z"


def exit_record(h: Handle) -> dict[str, object]:
    record = json.loads((Path(h.run_dir) / "exit.json").read_text())
    assert isinstance(record, dict)
    return record


def nobody() -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


as_root_with_nobody = pytest.mark.skipif(
    os.geteuid() != 0 or nobody() is None, reason="needs root and the user nobody"
)


PRINT_ENV = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
    "if k.startswith(('CUDA_', 'SUANLI_', 'MY_'))}))"
)
