"""Idle-GPU detection and reclaim through the real server (``suanli serve`` as
``build_server`` builds it, real processes), on SQLite.

This machine has no GPU and no NVML: the sampler reads a stand-in for the GPU hardware
(``gpu_standin.StandIn``, through ``build_server(util_reader=...)``, which no command-line
option or API request reaches) that reports every GPU at 1 % utilisation. Three jobs hold one
GPU each, all equally idle: a plain training job, a service's replica (class ``online``) and a
job labelled ``interactive``. With a 1 s idle window and a 1 s grace period (``--idle-window
1s --idle-grace 1s``), the plain job is warned (its owner sees why in ``suanli show``), then
reclaimed: stopped with its signal, requeued and resumed from its checkpoint. The replica and
the interactive job are flagged idle but never reclaimed.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpu_standin import StandIn, constant
from serving import PY, Running, logs, start, submit, wait_for, wait_state
from suanli.cli.main import app as cli
from suanli.core.idle import IdlePolicy
from tasks import CHECKPOINTED, open_dir

IDLE = {g: (1.0, 512) for g in range(3)}
"""What the stand-in says each GPU does: 1 % busy, 512 MiB used (idle: below 5 %)."""
POLICY = IdlePolicy(threshold=0.05, window=1.0, grace=1.0, action="preempt")
LONG = [PY, "-c", "import time; time.sleep(120)"]
SMALL: dict[str, Any] = {"cpu": 0.1, "memory": "64M"}
"""Little CPU and memory: the jobs wait for GPUs only (the machine may have two cores)."""


def kinds(c: Any, job: str) -> list[str]:
    return [e["kind"] for e in c.get(f"/v1/jobs/{job}").json()["history"]]


def test_an_idle_job_is_warned_then_reclaimed_but_not_a_replica_or_a_protected_job(
    tmp_path: Path,
) -> None:
    srv: Running = start(
        tmp_path / "state", str(tmp_path / "suanli.db"), gpus=3,
        util_reader=StandIn(constant(IDLE)), util_interval=0.1, idle=POLICY, service_step=0.2,
    )  # fmt: skip
    try:
        with srv.client() as admin:
            r = admin.post("/v1/tokens", json={"name": "v", "role": "user", "tenant": "vision",
                                               "user": "ana"})  # fmt: skip
            tok = r.json()["token"]
        with open_dir() as ckpt, srv.client(tok) as c:
            train = submit(c, command=[PY, "-c", CHECKPOINTED], gpus=1, grace=5,
                           checkpoint_dir=str(ckpt), **SMALL)  # fmt: skip
            notebook = submit(c, command=LONG, gpus=1, grace=1, labels=["interactive"], **SMALL)
            r = c.post("/v1/services", json={
                "name": "web", "replica": {"command": LONG, "gpus": 1, "grace": 1, **SMALL},
                "mu": 10, "slo": 1, "min_replicas": 1, "max_replicas": 1, "autoscaler": "fixed",
            })  # fmt: skip
            assert r.status_code == 201, r.text
            (replica,) = wait_for(
                "the replica", lambda: c.get("/v1/services/web").json()["replicas"]
            )
            replica = replica["job"]
            for job in (train, notebook, replica):
                wait_state(c, job, "running")

            # Warned once idle for the window; its owner reads why and when in `suanli show`.
            wait_for("the warning", lambda: "idle-warning" in kinds(c, train))
            shown = CliRunner().invoke(cli, ["show", train, "--server", srv.url, "--token", tok])
            assert shown.exit_code == 0, shown.output
            text = " ".join(shown.stdout.split())
            assert "idle-warning" in text
            assert "GPU duty 1%, below the idle threshold 5% for 1 s" in text
            assert "it will be reclaimed (preempt) at" in text

            # Past its grace, it is reclaimed once a job waits for a GPU (all three are
            # held): stopped with SIGTERM (it saved its step) and requeued behind the job
            # waiting, which runs on its GPU; then its next attempt resumes from the
            # checkpoint.
            time.sleep(POLICY.grace)  # no job waits yet: nothing is reclaimed for nobody
            assert "reclaimed" not in kinds(c, train)
            waiting = submit(c, command=[PY, "-c", "print('waited')"], gpus=1, **SMALL)
            wait_for("the reclaim", lambda: "reclaimed" in kinds(c, train))
            assert wait_state(c, waiting, "succeeded", "failed")["state"] == "succeeded"
            detail = wait_for(
                "the second attempt",
                lambda: (
                    (d := c.get(f"/v1/jobs/{train}").json())["job"]["attempts"] >= 2
                    and d["job"]["state"] == "running"
                    and d
                ),
            )
            first = detail["attempts"][0]
            assert first["outcome"] == "preempted"
            reclaimed = next(e for e in detail["history"] if e["kind"] == "reclaimed")
            assert "idle" in reclaimed["detail"]
            resumed = wait_for("the resume line", lambda: "resumes at" in
                               logs(c, train, attempt=2) and logs(c, train, attempt=2))  # fmt: skip
            assert int(resumed.split()[-1]) > 0  # the step it saved on SIGTERM

            # Equally idle, never reclaimed: flagged and noted, still in their first attempt.
            for job, why in ((notebook, "labelled interactive"), (replica, "an online job")):
                d = c.get(f"/v1/jobs/{job}").json()
                assert d["job"]["state"] == "running" and d["job"]["attempts"] == 1
                assert "reclaimed" not in kinds(c, job) and "idle-warning" not in kinds(c, job)
                idle = [e for e in d["history"] if e["kind"] == "idle"]
                assert len(idle) == 1 and f"not reclaimed: {why}" in idle[0]["detail"]

            # The flag is a gauge; a tenant's token sees its own jobs' series.
            body = c.get("/metrics").text
            for job in (notebook, replica):
                assert (
                    f'suanli_job_gpu_idle{{job="{job}",queue="vision",tenant="vision"}} 1.0' in body
                )
            promtool = shutil.which("promtool")
            if promtool is not None:
                with srv.client() as admin:
                    full = admin.get("/metrics").text
                check = subprocess.run([promtool, "check", "metrics"], input=full,
                                       capture_output=True, text=True, timeout=60)  # fmt: skip
                assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
            for job in (train, notebook):
                c.post(f"/v1/jobs/{job}/cancel")
            c.delete("/v1/services/web")
            for job in (train, notebook, replica):
                wait_state(c, job, "cancelled")
    finally:
        srv.stop()
