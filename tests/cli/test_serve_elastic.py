"""Elastic jobs through the real server (``suanli serve`` as ``build_server`` builds it, real
processes), on SQLite, with 4 declared GPUs.

An elastic job (min 1, requested 2, max 4 workers) grows to 4 while the GPUs are idle; a
``high`` job that needs 2 GPUs makes it shrink to 2 (not be preempted) and starts on the
freed GPUs; once that job is done, the elastic job grows back. Each task is a small Python
worker that reads its layout from ``SUANLI_ELASTIC_FILE`` at start and after every
``SIGUSR1`` and prints what it saw: the test reads those lines from the tasks' logs. The
worker installs its ``SIGUSR1`` handler only 0.3 s after it started, and the job grows in
the pass that launched it: the signal waits for the handler (its default action would end
the worker). The
owner sees the ``resized`` events in ``suanli show``; another tenant's token neither sees
the job nor touches it; bad specs are 422 naming the field; the GPU claims never pass one
GPU and always equal what runs. With ``--idle-action shrink``, an idle elastic job is shrunk
to its minimum, not preempted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from gpu_standin import StandIn, constant
from serving import DEADLINE_S, PY, Running, logs, start, submit, wait_state
from suanli.cli.main import app as cli
from suanli.core.idle import IdlePolicy
from suanli.store import jobs as js
from suanli.store.schema import gpu_claims
from tasks import ELASTIC_WORKER, open_dir

SMALL: dict[str, Any] = {"cpu": 0.1, "memory": "64M"}
ELASTIC: dict[str, Any] = {
    "command": [PY, "-c", ELASTIC_WORKER], "gpus": 1, "tasks": 2, "min_workers": 1, "max_workers": 4,
    "grace": 5, **SMALL,
}  # fmt: skip


def wait_for(what: str, probe: Any, srv: Running | None = None) -> Any:
    """Poll ``probe`` until it answers, within the deadline; with ``srv``, check the claims
    at every poll."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        if srv is not None:
            check_claims(srv)
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.05)


def check_claims(srv: Running) -> None:
    """No GPU is claimed past one whole GPU, and the claims are exactly those of the tasks
    each attempt runs (a task a shrink removed keeps no claim while it stops), read in one
    transaction (a resize between two reads would look like a disagreement)."""
    with srv.server.store.read() as conn:
        claimed = js.claims(conn)
        assert all(0 < m <= 1000 for m in claimed.values()), claimed
        assert all(g.used_milli <= 1000 for _, gs in js.list_nodes(conn) for g in gs)
        q = sa.select(gpu_claims.c.job_id, gpu_claims.c.attempt, sa.func.count()).group_by(
            gpu_claims.c.job_id, gpu_claims.c.attempt
        )
        for job_id, attempt, n in conn.execute(q).all():
            a = next(x for x in js.job_attempts(conn, job_id) if x.attempt == attempt)
            holding = [t for t in a.placement if t.get("until_ms") is None]
            assert n == sum(len(t["gpus"]) for t in holding), (job_id, a.placement)


def token(srv: Running, tenant: str, user: str) -> str:
    with srv.client() as admin:
        r = admin.post("/v1/tokens", json={"name": f"{tenant}-{user}", "role": "user",
                                           "tenant": tenant, "user": user})  # fmt: skip
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


def resized(c: httpx.Client, job: str) -> list[str]:
    return [e["detail"] for e in c.get(f"/v1/jobs/{job}").json()["history"]
            if e["kind"] == "resized"]  # fmt: skip


def task_log(c: httpx.Client, job: str, task: int) -> str:
    return logs(c, job, attempt=1, task=task)


@pytest.fixture
def srv(tmp_path: Path) -> Any:
    s = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=4)
    yield s
    s.stop()


def test_an_elastic_job_grows_into_idle_gpus_and_shrinks_for_a_high_job(srv: Running) -> None:
    ana, bo = token(srv, "vision", "ana"), token(srv, "nlp", "bo")
    with srv.client(ana) as c:
        e = submit(c, **ELASTIC)
        # Started on its requested 2 tasks, grown to 4 into the idle GPUs.
        wait_for("the growth", lambda: any("from 2 to 4" in d for d in resized(c, e)), srv)
        assert wait_state(c, e, "running")["attempts"] == 1
        for task in (0, 1):
            wait_for(f"task {task} told", lambda t=task: f"resized world=4 rank={t} gen=1"
                     in task_log(c, e, t), srv)  # fmt: skip
            assert f"env world=2 rank={task}" in task_log(c, e, task)
        for task in (2, 3):  # the next ranks, their file written before they started
            wait_for(f"task {task} started", lambda t=task: f"start world=4 rank={t} gen=1"
                     in task_log(c, e, t), srv)  # fmt: skip
            assert f"env world=4 rank={task}" in task_log(c, e, task)

        # A high job needs 2 GPUs: the elastic job gives back its two highest ranks (stopped
        # with its stop signal), is told its new layout after they exited, and runs on.
        h = submit(c, command=[PY, "-c", "import time; time.sleep(0.5); print('high done')"],
                   gpus=1, tasks=2, priority_class="high", **SMALL)  # fmt: skip
        wait_for("the shrink", lambda: any("from 4 to 2" in d for d in resized(c, e)), srv)
        (why,) = [d for d in resized(c, e) if "from 4 to 2" in d]
        assert f"for job {h} (high), which waits for GPUs" in why
        for task in (3, 2):
            wait_for(f"task {task} stopped", lambda t=task: "stopped" in task_log(c, e, t), srv)
        for task in (0, 1):
            wait_for(f"task {task} shrunk", lambda t=task: f"resized world=2 rank={t} gen=2"
                     in task_log(c, e, t), srv)  # fmt: skip
        assert wait_state(c, h, "succeeded", "failed")["state"] == "succeeded"
        detail = c.get(f"/v1/jobs/{e}").json()
        assert detail["job"]["state"] == "running" and detail["job"]["attempts"] == 1
        assert "preempted" not in [x["kind"] for x in detail["history"]]

        # Nothing waits any more: it grows back into the GPUs the high job left.
        wait_for("the growth back", lambda: "resized world=4 rank=0 gen=3"
                 in task_log(c, e, 0), srv)  # fmt: skip
        for task in (4, 5):  # new task numbers (their own run directories), ranks 2 and 3
            wait_for(f"task {task}", lambda t=task: f"start world=4 rank={t - 2} gen=3"
                     in task_log(c, e, t), srv)  # fmt: skip

        # Its owner sees each resize in `suanli show`.
        shown = CliRunner().invoke(cli, ["show", e, "--server", srv.url, "--token", ana])
        assert shown.exit_code == 0, shown.output
        text = " ".join(shown.stdout.split())
        assert "resized" in text and "from 4 to 2 workers" in text

        body = c.get("/metrics").text
        assert 'suanli_job_resizes_total{direction="shrink",queue="vision",tenant="vision"} 1.0' \
            in body  # fmt: skip

    # Another tenant neither sees it nor touches it; nobody resizes it by hand.
    with srv.client(bo) as other:
        assert other.get(f"/v1/jobs/{e}").status_code == 404
        assert e not in [j["id"] for j in other.get("/v1/jobs").json()["jobs"]]
        assert other.post(f"/v1/jobs/{e}/cancel").status_code == 404
        assert other.post(f"/v1/jobs/{e}/resize", json={"workers": 1}).status_code in (404, 405)
        assert 'tenant="vision"' not in other.get("/metrics").text
    with srv.client(ana) as c:
        assert c.post(f"/v1/jobs/{e}/resize", json={"workers": 1}).status_code in (404, 405)
        assert c.post(f"/v1/jobs/{e}/cancel").status_code in (200, 202)
        assert wait_state(c, e, "cancelled")["state"] == "cancelled"
    wait_for("the claims given back", lambda: js.claims(srv.server.store) == {}, srv)


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"tasks": 1, "min_workers": 2, "max_workers": 1}, "min_workers"),
        ({"tasks": 2, "min_workers": 1, "max_workers": 1}, "max_workers"),
        ({"stop_signal": "SIGUSR1"}, "stop_signal"),
        ({"max_workers": 0}, "max_workers"),
        ({"speedup": "quadratic"}, "speedup"),
    ],
    ids=["min-above-max", "max-below-tasks", "stop-signal-sigusr1", "max-zero", "speedup"],
)
def test_bad_elastic_specs_are_422_naming_the_field(
    srv: Running, over: dict[str, Any], field: str
) -> None:
    with srv.client(token(srv, "vision", "ana")) as c:
        r = c.post("/v1/jobs", json={**ELASTIC, **over})
        assert r.status_code == 422, r.text
        assert field in [f["field"] for f in r.json()["fields"]], r.json()
        assert c.get("/v1/jobs").json()["jobs"] == []  # nothing stored


IDLE = {g: (1.0, 512) for g in range(3)}
"""Every GPU 1 % busy (idle: below 5 %), as the stand-in for GPU hardware reports it."""


def test_an_idle_elastic_job_is_shrunk_to_its_minimum_not_preempted(tmp_path: Path) -> None:
    policy = IdlePolicy(threshold=0.05, window=1.0, grace=1.0, action="shrink")
    srv = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=3,
                util_reader=StandIn(constant(IDLE)), util_interval=0.1, idle=policy)  # fmt: skip
    try:
        with srv.client(token(srv, "vision", "ana")) as c:
            # Requested 2, at most 2: it never grows; a job of its own class cannot take its
            # requested workers, so only the idle reclaim shrinks it.
            e = submit(c, **{**ELASTIC, "max_workers": 2})
            long = submit(c, command=[PY, "-c", "import time; time.sleep(120)"], gpus=1,
                          grace=1, **SMALL)  # fmt: skip
            wait_state(c, e, "running")
            wait_state(c, long, "running")
            waiting = submit(c, command=[PY, "-c", "print('waited')"], gpus=1, **SMALL)
            wait_for("the idle shrink", lambda: any("from 2 to 1" in d for d in resized(c, e)),
                     srv)  # fmt: skip
            (why,) = resized(c, e)
            assert "its GPUs were idle" in why
            assert wait_state(c, waiting, "succeeded", "failed")["state"] == "succeeded"
            wait_for("task 0 told", lambda: "resized world=1 rank=0 gen=1" in task_log(c, e, 0))
            detail = c.get(f"/v1/jobs/{e}").json()
            assert detail["job"]["state"] == "running" and detail["job"]["attempts"] == 1
            kinds = [x["kind"] for x in detail["history"]]
            assert "reclaimed" not in kinds and "preempted" not in kinds
            assert "idle-warning" in kinds
            for job in (e, long):
                c.post(f"/v1/jobs/{job}/cancel")
            for job in (e, long):
                wait_state(c, job, "cancelled")
    finally:
        srv.stop()


def test_suanli_submit_takes_the_elastic_range(srv: Running) -> None:
    tok = token(srv, "vision", "ana")
    run = CliRunner()
    base = ["submit", "--server", srv.url, "--token", tok, "--tasks", "2", "--gpus", "0",
            "--cpu", "0.1", "--memory", "64M"]  # fmt: skip
    with open_dir() as here:
        bad = run.invoke(cli, [*base, "--min-workers", "3", "--chdir", str(here), "--", PY])
        assert bad.exit_code != 0 and "min_workers" in bad.output, bad.output
        ok = run.invoke(cli, [*base, "--min-workers", "1", "--max-workers", "4", "--json",
                              "--chdir", str(here), "--", PY, "-c", "pass"])  # fmt: skip
        assert ok.exit_code == 0, ok.output
        job = json.loads(ok.stdout)
        with srv.client(tok) as c:
            spec = c.get(f"/v1/jobs/{job['id']}").json()["job"]["spec"]
            assert (spec["tasks"], spec["min_workers"], spec["max_workers"]) == (2, 1, 4)
            wait_state(c, job["id"], "succeeded", "failed")
