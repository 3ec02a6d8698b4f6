"""Pre-staging: a job expected to start soon is prepared before its GPUs are free
(``Backend.prepare``, optional; the control plane's loop asks, ``suanli.control.starts``).

What a backend can prepare is what a start waits for: the job's checkpoint, which a job that
resumes reads first. Its files are read ahead into the page cache of the node that will run
it (``posix_fadvise(WILLNEED)``: the kernel reads them in the background; nothing is read
into the asking process). On this machine (the local backend) the control plane does it; on
Ray and Slurm, a suanli task already running on each node the job is expected to land on
(``Prepare.nodes``) does it there (``suanli.backends.ray_task``,
``suanli.backends.slurm_task``). Only regular files directly in the directory (among its
first ``4 * MAX_FILES`` entries), opened without following links and without blocking, at
most ``MAX_FILES`` of them and ``MAX_BYTES`` in all: a spec cannot make a reader open a
device, a FIFO or another user's tree through a link, nor read without bound.
"""

from __future__ import annotations

import itertools
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_FILES = 256
MAX_BYTES = 64 * 2**30
"""The most a preparation reads ahead: files, and bytes over them (64 GiB)."""


@dataclass(frozen=True, slots=True)
class Prepare:
    """A job to prepare: its id, the attempt that will run, its checkpoint directory (None:
    it has none), the nodes it is expected to land on (the first to free up first; empty:
    unknown) and the (uid, gid) its tasks will run as (None: the control plane's user)."""

    job_id: str
    attempt: int
    checkpoint_dir: str | None
    nodes: tuple[str, ...] = ()
    run_as: tuple[int, int] | None = None


def files_note(files: int) -> str:
    """What a preparation that read ``files`` files ahead says in the job's history."""
    return f"{files} checkpoint file(s) read ahead"


PREPARED_FILE = "prepared.json"
"""Beside a task's run directory, as ``<task>.prepared.json`` in its attempt's directory: what
the task's keeper (Ray) or batch step (Slurm) last read ahead for another job on its node
(``{"job_id", "files", "at"}``)."""


def agents_note(asked: list[str], nodes: tuple[str, ...], agent: str = "suanli task") -> str:
    """What a preparation that asked the tasks on ``asked`` (of the expected ``nodes``)
    to read a checkpoint ahead says in the job's history."""
    if not nodes:
        return "no node expected yet: nothing read ahead"
    if not asked:
        return f"no {agent} runs on its {len(nodes)} expected node(s): nothing read ahead"
    return f"checkpoint read ahead on {len(asked)} of {len(nodes)} expected node(s): " + ", ".join(
        asked
    )


def prepared_path(run_dir: str | Path) -> Path:
    """Where the keeper or batch step of the task at ``run_dir`` says what it read ahead."""
    run = Path(run_dir)
    return run.parent / f"{run.name}.{PREPARED_FILE}"


def warm_directory(directory: str | Path, max_files: int = MAX_FILES,
                   max_bytes: int = MAX_BYTES) -> int:  # fmt: skip
    """Ask the kernel to read ahead the regular files directly in ``directory`` (see the
    module docstring); returns how many files it asked for. A directory that is missing, a
    link, or unreadable warms nothing."""
    fadvise = getattr(os, "posix_fadvise", None)
    if fadvise is None:
        return 0  # not on this platform
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return 0
        with os.scandir(directory) as listing:
            # A bounded look: a directory of millions of entries does not hold up the loop.
            entries = list(itertools.islice(listing, 4 * max_files))
    except OSError:
        return 0
    warmed = 0
    budget = max_bytes
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    for entry in entries:
        if warmed >= max_files or budget <= 0:
            break
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            fd = os.open(entry.path, flags)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue  # swapped for something else since it was listed
            length = min(st.st_size, budget)
            fadvise(fd, 0, length, os.POSIX_FADV_WILLNEED)
            budget -= length
            warmed += 1
        except OSError:
            continue
        finally:
            os.close(fd)
    return warmed
