"""``suanli predict`` on a control plane's store: the estimators' accuracy on its recent jobs
(each predicted at its submission from the runs that had ended by then) and one job's
estimate."""

from __future__ import annotations

import json
from pathlib import Path

from declared import declare_inventory
from fake_clock import Clock
from suanli.backends.fake import RUNTIME_VARIABLE, FakeBackend
from suanli.cli.main import app
from suanli.config.cluster import load_cluster
from suanli.control.loop import ControlConfig, Controller
from suanli.control.spec import JobSpec
from suanli.core.builder import PolicySet
from suanli.store import jobs as js
from suanli.store import open_store
from support import cli_runner


def submit(store, runtime: float, user: str, at: float, gpus: float = 1) -> str:  # type: ignore[no-untyped-def]
    spec = JobSpec(command=["train"], gpus=gpus, cpu=1, memory="1G",
                   env={RUNTIME_VARIABLE: str(runtime)})  # fmt: skip
    rec = js.submit_job(store, spec=spec.model_dump(mode="json"), tenant="lab", user=user,
                        name="", queue="lab", priority_class="normal", now_ms=round(at * 1000))  # fmt: skip
    return rec.id


def history(path: Path) -> tuple[list[str], str]:
    """A store where ana's jobs run 100 s and bob's 1,000 s, one every 10 minutes on 8 GPUs,
    and a job that cannot start yet (it wants a node's 4 GPUs while carl's fill both)."""
    store = open_store(str(path))
    cluster = load_cluster("2x4xTESTGPU[gpumem=80G,speed=1]")
    declare_inventory(store, cluster)
    clock = Clock()
    ctl = Controller(store, ControlConfig(cluster=cluster, policy=PolicySet.parse("fifo+best-fit")),
                     FakeBackend(clock), clock=clock)  # fmt: skip
    ctl.recover()
    ids = []
    for k in range(40):
        ids.append(submit(store, 100.0 if k % 2 else 1000.0, "ana" if k % 2 else "bob", clock.t))
        ctl.step()
        clock.t += 600
        ctl.step()
    clock.t += 2000
    ctl.step()
    ctl.step()
    for _ in range(8):
        submit(store, 5000.0, "carl", clock.t)
    ctl.step()
    waiting = submit(store, 10.0, "ana", clock.t, gpus=4)
    ctl.step()
    store.close()
    return ids, waiting


def test_accuracy_on_the_history_and_one_jobs_estimate(tmp_path: Path) -> None:
    path = tmp_path / "suanli.db"
    ids, waiting = history(path)
    res = cli_runner().invoke(app, ["predict", "--db", str(path), "--job", waiting, "--json",
                                    "-r", "history"])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["history_jobs"] == len(ids) and out["scored_jobs"] == len(ids)
    (h,) = out["estimators"]
    # Once each user's first jobs have ended, history knows them exactly: most of the P50s
    # are right, and every P90 covers.
    assert h["runtime"] == "history" and h["median_rel_error"] < 0.01
    assert h["coverage_p90"] >= 0.75
    assert h["job"]["p50_s"] == 100.0  # ana's jobs run 100 s
    assert out["job"]["state"] == "pending" and out["job"]["start_estimate"]["p50"] is not None
    text = cli_runner().invoke(
        app, ["predict", "--db", str(path), "--job", waiting, "--recent", "4"]
    )
    assert text.exit_code == 0, text.output
    assert "the last 4 scored" in text.stdout and "learned" in text.stdout
    assert "expected start:" in text.stdout


def test_bad_input_is_said(tmp_path: Path) -> None:
    path = tmp_path / "suanli.db"
    history(path)
    runner = cli_runner()
    res = runner.invoke(app, ["predict", "--db", str(path), "--job", "nope"])
    assert res.exit_code == 2 and "no job 'nope'" in res.stderr
    res = runner.invoke(app, ["predict", "--db", str(tmp_path / "missing.db")])
    assert res.exit_code != 0 and "no such file" in res.stderr
    res = runner.invoke(app, ["predict", "--db", str(path), "-r", "crystal-ball"])
    assert res.exit_code != 0 and "unknown runtime policy 'crystal-ball'" in res.stderr
