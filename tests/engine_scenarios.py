"""Scenarios that the tests of every engine's backend run alike (Ray: tests/cli/
test_serve_ray.py; Slurm: test_serve_slurm.py): the same API calls and the same checks, on a
server (``serving.start``) whose tasks run on the engine's nodes. An engine's tasks start in
seconds, not milliseconds, so each scenario is given the engine's ``deadline_s``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from serving import PY, Running, free_port, logs, submit, user_token, wait_log, wait_state
from tasks import CHECKPOINTED


def gang_stands_or_falls_together(srv: Running, deadline_s: float) -> None:
    """Rank 1 of a 2-node gang fails on its node: rank 0, on the other node, is stopped with
    the job's signal and the job fails with rank 1's exit code."""
    script = ("import os, signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: (print('told to stop', flush=True), "
              "sys.exit(0)))\n"
              "print('up', flush=True)\n"
              "if os.environ['RANK'] == '1':\n    time.sleep(1); sys.exit(3)\n"
              "time.sleep(120)\n")  # fmt: skip
    with srv.client(user_token(srv.client())) as c:
        job = submit(c, command=[PY, "-c", script], tasks=2, gpus=4, grace=5)
        done = wait_state(c, job, "failed", "succeeded", deadline_s=deadline_s)
        assert done["state"] == "failed" and done["exit_code"] == 3, done
        assert "told to stop" in wait_log(c, job, "told to stop", deadline_s, task=0)


def cancel_and_max_runtime(srv: Running, deadline_s: float) -> None:
    with srv.client(user_token(srv.client())) as c:
        sleeper = submit(c, command=["sleep", "60"], gpus=1, grace=1)
        limited = submit(c, command=["sleep", "60"], gpus=1, max_runtime=2, grace=1)
        wait_state(c, sleeper, "running", deadline_s=deadline_s)
        assert c.post(f"/v1/jobs/{sleeper}/cancel").status_code == 202
        done = wait_state(c, sleeper, "cancelled", "failed", deadline_s=deadline_s)
        assert done["state"] == "cancelled", done
        job = wait_state(c, limited, "failed", "succeeded", deadline_s=deadline_s)
        assert job["state"] == "failed" and "max runtime" in job["reason"]


def spot_gang_resumes_after_preemption(srv: Running, shared: Path, deadline_s: float) -> None:
    """A spot gang on both nodes, preempted by a high job: its first attempt ends
    PREEMPTED, its second resumes from the checkpoint written on SIGTERM."""
    ckpt = shared / "ckpt"
    ckpt.mkdir()
    ckpt.chmod(0o777)  # the tasks' user writes there
    with srv.client(user_token(srv.client())) as c:
        spot = submit(c, command=[PY, "-c", CHECKPOINTED], tasks=2, gpus=4,
                      priority_class="spot", checkpoint_dir=str(ckpt), grace=5)  # fmt: skip
        wait_state(c, spot, "running", deadline_s=deadline_s)
        deadline = time.monotonic() + deadline_s
        while not (ckpt / "step-0").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        high = submit(c, command=[PY, "-c", "print('high')"], gpus=4, priority_class="high")
        done = wait_state(c, high, "succeeded", "failed", deadline_s=deadline_s)
        assert done["state"] == "succeeded", done
        detail = c.get(f"/v1/jobs/{spot}").json()
        assert detail["attempts"][0]["outcome"] == "preempted"
        wait_state(c, spot, "running", deadline_s=deadline_s)
        out = wait_log(c, spot, "resumes at", deadline_s, attempt=2)
        assert int(out.split()[-1]) >= 10  # from the checkpoint written on SIGTERM
        c.post(f"/v1/jobs/{spot}/cancel")
        wait_state(c, spot, "cancelled", deadline_s=deadline_s)


def kill_9_and_adopt(tmp_path: Path, shared: Path, engine: list[str], deadline_s: float) -> None:
    """``suanli serve`` (with the ``engine`` options) as its own process, killed with SIGKILL
    while a job runs; a new server on the same state adopts it: one attempt, and it
    succeeds."""
    state, port = tmp_path / "state", free_port()
    marker = shared / "go"
    args = [
        sys.executable, "-m", "suanli.cli.main", "serve", "--state-dir", str(state),
        "--port", str(port), "--shared-dir", str(shared), "--interval", "0.1", *engine,
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    out = tmp_path / "serve.out"

    def serve() -> subprocess.Popen[bytes]:
        log = open(out, "ab")  # noqa: SIM115 - the child holds it
        proc = subprocess.Popen(args, stdout=log, stderr=log)
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)

    waits = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.1)\nprint('went')"
    proc = serve()
    try:
        token = (state / "admin.token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as c:
            job = submit(c, command=[PY, "-c", waits], gpus=1)
            wait_state(c, job, "running", deadline_s=deadline_s)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc = serve()
            assert wait_state(c, job, "running", deadline_s=deadline_s)["attempts"] == 1
            marker.write_text("")
            done = wait_state(c, job, "succeeded", "failed", deadline_s=deadline_s)
            assert done["state"] == "succeeded" and done["attempts"] == 1, done
            assert logs(c, job).strip() == "went"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
