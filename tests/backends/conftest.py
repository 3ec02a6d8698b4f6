"""Fixtures of the LocalBackend tests: a backend on a temporary state directory, and a
directory that the user ``nobody`` may enter."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_backend import cleanup, new_backend
from suanli.backends import LocalBackend


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    b = new_backend(tmp_path)
    yield b
    cleanup(b)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory under /tmp that ``nobody`` may enter (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="suanli-test-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
