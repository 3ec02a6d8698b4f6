"""Pre-staging on this machine: a job's checkpoint files are read ahead, and nothing a spec
names can make the control plane open a link, a FIFO or a device, or read without bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suanli.backends.local import LocalBackend
from suanli.backends.prepare import Prepare, warm_directory

needs_fadvise = pytest.mark.skipif(
    not hasattr(os, "posix_fadvise"), reason="posix_fadvise is not on this platform"
)


@needs_fadvise
def test_only_regular_files_directly_inside_are_read_ahead(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.pt").write_bytes(b"x" * 4096)
    (ckpt / "optim.pt").write_bytes(b"y" * 4096)
    (ckpt / "sub").mkdir()
    (ckpt / "sub" / "deep.pt").write_bytes(b"z")
    secret = tmp_path / "elsewhere"
    secret.write_bytes(b"s")
    (ckpt / "link.pt").symlink_to(secret)
    os.mkfifo(ckpt / "fifo")  # opening it for reading would block a careless reader
    assert warm_directory(ckpt) == 2
    assert warm_directory(ckpt, max_files=1) == 1
    assert warm_directory(ckpt, max_bytes=1) == 1  # the budget is spent by the first
    # A directory that is a link, or missing, warms nothing.
    (tmp_path / "via-link").symlink_to(ckpt)
    assert warm_directory(tmp_path / "via-link") == 0
    assert warm_directory(tmp_path / "missing") == 0


@needs_fadvise
def test_the_local_backend_prepares_a_jobs_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "step-100.pt").write_bytes(b"w" * 1024)
    backend = LocalBackend(tmp_path / "runs")
    assert backend.prepare(Prepare("7", 1, str(ckpt))) == "1 checkpoint file(s) read ahead"
    assert backend.prepare(Prepare("8", 1, None)) == "0 checkpoint file(s) read ahead"
