"""The README's serve block, pasted as one script into a fresh shell, works.

The block is taken from the README as it is (the ``bash`` block under "Run jobs") and run by
``bash -e`` in a fresh home directory (so the state directory is a new one, as on a new
machine), from a directory holding the README's ``examples/`` (its ``--prices`` path is
relative) that any user can enter: run as root, the server runs the job as ``nobody`` in the
directory ``submit`` ran in. It must finish without an error, the job must have printed its
GPU, and the bill must have charged it. The server it started is stopped afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import open_dir

REPO = Path(__file__).resolve().parents[2]
PORT = 8620  # the README's commands use the default port


def serve_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Run jobs: `suanli serve`", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "no bash block under 'Run jobs' in the README"
    return match.group(1)


def test_the_readme_serve_block_runs_as_pasted() -> None:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.skip(f"port {PORT}, which the README's commands use, is taken on this machine")
    bin_dir = Path(shutil.which("suanli") or Path(sys.executable).with_name("suanli")).parent
    with open_dir("suanli-readme-") as work:
        shutil.copytree(REPO / "examples", work / "examples")
        home = work / "home"
        home.mkdir()
        env = {
            "HOME": str(home),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "LANG": "C.UTF-8",
        }
        script = "set -e\n" + serve_block() + "\nkill %1 2>/dev/null || true\nwait\n"
        done = subprocess.run(
            ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
            timeout=180,
        )  # fmt: skip
        log = home / ".local" / "share" / "suanli" / "serve.log"
        server_log = log.read_text() if log.exists() else "(no server log)"
        assert done.returncode == 0, (done.stdout, done.stderr, server_log)
        out = done.stdout
        assert re.search(r"^[01]$", out, re.M), out  # the job's CUDA_VISIBLE_DEVICES
        assert "succeeded" in out and "hello" in out
        assert "GPU-h" in out, out  # the bill, in its unit
        assert "Traceback" not in done.stderr + server_log
