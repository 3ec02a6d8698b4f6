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


# Task scripts that several server tests run (the standard library only).

RENDEZVOUS_WORKER = r"""
import os, socket, sys, time
e = os.environ
keys = ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
        "CUDA_VISIBLE_DEVICES", "TMPDIR")
print(" ".join(f"{k}={e.get(k, '')}" for k in keys), f"CWD={os.getcwd()}", flush=True)
addr, port, rank = e["MASTER_ADDR"], int(e["MASTER_PORT"]), int(e["RANK"])
if rank == 0:
    srv = socket.create_server((addr, port))
    srv.settimeout(60)
    for _ in range(int(e["WORLD_SIZE"]) - 1):
        conn, _ = srv.accept()
        print("rank 0 heard from rank", conn.recv(16).decode(), flush=True)
        conn.close()
else:
    deadline = time.time() + 60
    while True:
        try:
            with socket.create_connection((addr, port), timeout=2) as s:
                s.sendall(str(rank).encode())
            break
        except OSError:
            if time.time() > deadline:
                sys.exit("rank 0 never listened")
            time.sleep(0.1)
    print("rank", rank, "reached rank 0", flush=True)
"""
"""A gang's task: prints what it was told (``KEY=value`` pairs on its first line), then meets
rank 0 at ``MASTER_ADDR:MASTER_PORT`` as ``torch.distributed``'s TCP store would."""


def told(log: str) -> dict[str, str]:
    """The ``KEY=value`` pairs ``RENDEZVOUS_WORKER`` printed first."""
    line = next(x for x in log.splitlines() if x.startswith("WORLD_SIZE="))
    return dict(kv.split("=", 1) for kv in line.split())


CHECKPOINTED = """
import os, signal, sys, time
name = "step-" + os.environ["RANK"] if "RANK" in os.environ else "step"
ckpt = os.path.join(os.environ["SUANLI_CHECKPOINT_DIR"], name)
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print("attempt", os.environ["SUANLI_ATTEMPT"], "resumes at", step, flush=True)
def save(*_):
    open(ckpt, "w").write(str(step)); sys.exit(0)
signal.signal(signal.SIGTERM, save)
while True:
    step += 1; time.sleep(0.05)
    if step == 10: open(ckpt, "w").write(str(step))
"""
"""Counts until stopped; saves its step to ``$SUANLI_CHECKPOINT_DIR/step`` (``step-RANK`` in a
gang) at step 10 and on SIGTERM, and resumes from it."""

ELASTIC_WORKER = """
import json, os, signal, sys, time
seen = []
def read(why):
    with open(os.environ["SUANLI_ELASTIC_FILE"]) as f:
        d = json.load(f)
    print(why, "world=%(world_size)d rank=%(rank)d gen=%(generation)d" % d, flush=True)
signal.signal(signal.SIGTERM, lambda *_: (print("stopped", flush=True), sys.exit(0)))
print("env world=%s rank=%s" % (os.environ["SUANLI_WORLD_SIZE"], os.environ["SUANLI_RANK"]),
      flush=True)
read("start")
time.sleep(0.3)  # a slow start: a resize's SIGUSR1 waits for the handler
signal.signal(signal.SIGUSR1, lambda *_: seen.append(1))
while True:
    if seen:
        seen.clear()
        read("resized")
    time.sleep(0.02)
"""
"""An elastic job's task: prints its layout from ``SUANLI_ELASTIC_FILE`` at start and after
every ``SIGUSR1`` (installed 0.3 s late, so a resize's signal must wait for it)."""
