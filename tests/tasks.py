"""What tests that run real tasks through ``suanli serve`` need, whoever runs them.

Run as root, the server runs every task as ``nobody`` (its isolation), and ``nobody`` can
neither run an interpreter under ``/root`` nor enter pytest's temporary directories (0700,
root's). So tasks run ``TASK_PY``, an interpreter any user can run, and work in directories
from ``open_dir``, which any user can enter. Run as another user, tasks run as that user and
both are the plain ones.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = os.geteuid() == 0


def _task_python() -> str:
    if not ROOT:
        return sys.executable
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.access(candidate, os.X_OK) and _others_can_run(candidate):
            return candidate
    raise RuntimeError(
        "tests run as root, so tasks run as nobody, and no python3 that nobody may run was "
        "found in /usr/bin, /usr/local/bin or /bin"
    )


def _others_can_run(path: str) -> bool:
    real = Path(os.path.realpath(path))
    if not real.stat().st_mode & 0o001:
        return False
    return all(p.stat().st_mode & 0o001 for p in real.parents)


TASK_PY = _task_python()
"""An interpreter a task may run (the standard library only: tasks do not import suanli)."""


@contextmanager
def open_dir(prefix: str = "suanli-test-") -> Iterator[Path]:
    """A fresh directory under the system's temporary directory that any user can use
    (mode 0777: tasks running as nobody write checkpoints there), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp" if os.path.isdir("/tmp") else None))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
