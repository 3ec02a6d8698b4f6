"""The Slurm backend against a real Slurm cluster (tests/slurm_cluster.py): ``slurmctld``,
``slurmdbd`` on MariaDB, and two ``slurmd`` nodes of four GPUs each, declared as GRES over
stand-in device files (there are no GPUs here; the tasks only read ``CUDA_VISIBLE_DEVICES``).

Run as root (as CI runs), tasks run as ``nobody``, submitted with ``sbatch --uid``: their
batch step runs ``TASK_PY``, an interpreter ``nobody`` may run, given suanli's source.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import slurm_cluster as sc
from suanli.backends.base import Elastic, Exit, Launch, Outcome
from suanli.backends.shim import read_json
from suanli.backends.slurm_backend import SlurmBackend
from suanli.backends.slurm_task import PLACED_FILE, control_paths
from suanli.core.model import SpecError
from tasks import ROOT, TASK_PY

T = TypeVar("T")
DEADLINE_S = 60.0
NOBODY = (65534, 65534)


@pytest.fixture(scope="module")
def cluster() -> Iterator[sc.SlurmTestCluster]:
    yield from sc.running()


@pytest.fixture
def backend(cluster: sc.SlurmTestCluster) -> Iterator[SlurmBackend]:
    shared = cluster.base / f"shared-{time.monotonic_ns()}"
    shared.mkdir()
    shared.chmod(0o755)
    b = SlurmBackend(shared, env=cluster.env, python=TASK_PY)
    try:
        yield b
    finally:
        for h in b.running():
            b.stop(h, Outcome.CANCELLED)
        b.close()


def spec(job: str, command: str, **fields: Any) -> Launch:
    values: dict[str, Any] = {"node": "n1", "memory_mib": 100, "cpu_milli": 500, "grace_s": 2.0}
    if ROOT:
        values["run_as"] = NOBODY
    values.update(fields)
    return Launch(job_id=job, attempt=1, task=0, command=(TASK_PY, "-c", command), **values)


def until(fn: Callable[[], T | None], what: str, deadline_s: float = DEADLINE_S) -> T:
    deadline = time.monotonic() + deadline_s
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def ended(b: SlurmBackend, n: int = 1) -> list[Exit]:
    seen: list[Exit] = []

    def more() -> list[Exit] | None:
        seen.extend(b.poll())
        return seen if len(seen) >= n else None

    return until(more, f"{n} tasks to end")


def out(b: SlurmBackend, e: Exit) -> str:
    return text(b, e.handle)


def text(b: SlurmBackend, h: Any) -> str:
    """The task's stdout so far ("" until its supervisor has made it)."""
    try:
        return b.log_paths(h)[0].read_text()
    except FileNotFoundError:
        return ""


def sacct(cluster: sc.SlurmTestCluster, name: str) -> dict[str, str]:
    """The accounting record of the job called ``name`` (slurmdbd may take a moment)."""

    def read() -> dict[str, str] | None:
        text = cluster.run("sacct", "-X", "-n", "-P", "-a", f"--name={name}",
                           "-o", "State,ElapsedRaw,AllocTRES,User,ExitCode")  # fmt: skip
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines or lines[-1].split("|")[0] in ("RUNNING", "PENDING", "COMPLETING"):
            return None
        state, elapsed, tres, user, code = lines[-1].split("|")
        return {"state": state, "elapsed": elapsed, "tres": tres, "user": user, "code": code}

    return until(read, f"sacct to record {name}")


def test_the_inventory_is_the_partitions(backend: SlurmBackend) -> None:
    nodes = {n.name: n for n in backend.inventory()}
    assert sorted(nodes) == ["n1", "n2"]
    for n in nodes.values():
        assert n.gpus == 4 and n.gpu_model is not None and n.gpu_model.name == "H100"
        assert n.cpu_milli == 8000 and n.memory_mib == 16000
    assert backend.node_address("n2") == "127.0.0.1"


def test_a_task_runs_on_its_node_and_gpu_as_its_user_and_slurm_accounts_for_it(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    """Placed on n2's GPU 3: it sees GPU 3 whatever Slurm chose, Slurm counts one GPU,
    and the job is its user's in Slurm's accounting, with the task's exit status."""
    code = "import os; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES'], os.getuid()); exit(3)"
    h = backend.launch(spec("where", code, node="n2", gpus=(3,)))
    (e,) = ended(backend)
    assert e.outcome is Outcome.FAILED and e.exit_code == 3, e
    assert out(backend, e).split() == [
        "CVD=3",
        str(NOBODY[0] if ROOT else os.getuid()),
    ]
    placed = read_json(Path(h.run_dir) / PLACED_FILE)
    assert placed is not None and placed["node"] == "n2" and placed["slurm_gpus"] is not None
    record = sacct(cluster, backend.job_name("where", 1, 0))
    assert "gres/gpu=1" in record["tres"] and "mem=100M" in record["tres"], record
    assert record["state"] == "FAILED" and record["code"] == "3:0", record
    if ROOT:
        assert record["user"] == "nobody"


def test_a_retried_launch_is_refused_and_a_new_backend_adopts_the_task(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    marker = backend.shared / "go"
    code = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.1)\nprint('went')"
    s = spec("adopted", code)
    h = backend.launch(s)
    with pytest.raises(FileExistsError):
        backend.launch(s)
    until(lambda: (Path(h.run_dir) / PLACED_FILE).exists(), "the task to start")
    again = SlurmBackend(backend.shared, env=cluster.env, python=TASK_PY)  # a restart
    found = again.find("adopted", 1, 0)
    assert found is not None and found.run_dir == h.run_dir
    assert again.find("adopted", 2, 0) is None
    assert again.adopt([found]) == []
    marker.write_text("")
    (e,) = ended(again)
    assert e.outcome is Outcome.SUCCEEDED and out(again, e).strip() == "went"
    backend._tasks.clear()  # the first instance's copy is stale now


def test_stop_gives_the_task_its_signal_and_grace(backend: SlurmBackend) -> None:
    """A task that handles its stop signal ends as it likes; one that ignores it is killed
    after its grace; both end CANCELLED or PREEMPTED, as asked."""
    polite = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda *_: (print('told', flush=True), sys.exit(0)))\n"
              "print('up', flush=True); time.sleep(60)")  # fmt: skip
    stubborn = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('up', flush=True); time.sleep(60)")  # fmt: skip
    a = backend.launch(spec("polite", polite, stop_signal="SIGINT"))
    b = backend.launch(spec("stubborn", stubborn, grace_s=1.0, node="n2"))
    for h in (a, b):
        until(lambda h=h: "up" in text(backend, h), "the task to start")
    backend.stop(a, Outcome.CANCELLED)
    backend.stop(b, Outcome.PREEMPTED)
    exits = {e.handle.job_id: e for e in ended(backend, 2)}
    assert exits["polite"].outcome is Outcome.CANCELLED and exits["polite"].exit_code == 0
    assert "told" in out(backend, exits["polite"])
    assert exits["stubborn"].outcome is Outcome.PREEMPTED
    assert "after the grace period" in exits["stubborn"].detail, exits["stubborn"]


def test_max_runtime_ends_the_task(backend: SlurmBackend) -> None:
    backend.launch(spec("limited", "import time; time.sleep(60)", max_runtime_s=2.0))
    (e,) = ended(backend)
    assert e.outcome is Outcome.TIMED_OUT and "max runtime 2 s" in e.detail, e


def test_a_job_slurm_holds_pending_is_cancelled_at_once_or_lost_after_the_place_timeout(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    """Something outside suanli holds n1's GPUs (Slurm and suanli disagree about the node):
    suanli's job there stays pending in Slurm. Stopped, it is cancelled without ever
    running; left, it is counted lost after the place timeout and cancelled in Slurm."""
    other = cluster.run("sbatch", "--parsable", "--partition=suanli", "--nodelist=n1",
                        "--gres=gpu:4", "--mem=100", "--output=/dev/null",
                        "--wrap", "sleep 120").strip()  # fmt: skip
    try:
        until(lambda: cluster.run("squeue", "-h", "-j", other, "-o", "%T").strip() == "RUNNING",
              "the outside job to run")  # fmt: skip
        h = backend.launch(spec("held", "print('ran')", gpus=(0,)))
        time.sleep(2)
        assert backend.poll() == []
        backend.stop(h, Outcome.CANCELLED)
        (e,) = ended(backend)
        assert e.outcome is Outcome.CANCELLED and not Path(h.run_dir).exists(), e
        backend.place_timeout_s = 2.0
        h = backend.launch(spec("stuck", "print('ran')", gpus=(0,)))
        (e,) = ended(backend)
        assert e.outcome is Outcome.LOST and "did not start it on node n1" in e.detail, e
        assert "Resources" in e.detail or "pending" in e.detail
        name = backend.job_name("stuck", 1, 0)
        until(lambda: not cluster.run("squeue", "-h", f"--name={name}", "-o", "%T").strip()
              or None, "the stuck job to be cancelled")  # fmt: skip
    finally:
        cluster.run("scancel", other)


def test_a_resize_reaches_the_task_through_its_batch_step(backend: SlurmBackend) -> None:
    code = ("import json, os, signal, time\n"
            "f = os.environ['SUANLI_ELASTIC_FILE']\n"
            "signal.signal(signal.SIGUSR1, lambda *_: print('resized', json.load(open(f)), "
            "flush=True))\n"
            "print('up', flush=True)\n"
            "time.sleep(60)")  # fmt: skip
    h = backend.launch(spec("elastic", code, elastic=(1, 0, 0)))
    until(lambda: "up" in text(backend, h), "the task to start")
    assert backend.elastic(h) == Elastic(1, 0, 0)
    backend.resize(h, Elastic(2, 0, 1))
    until(lambda: "resized" in text(backend, h), "the task to be told")
    assert "'world_size': 2" in text(backend, h)
    assert until(lambda: backend.elastic(h) == Elastic(2, 0, 1) or None, "the file read back")
    backend.stop(h, Outcome.CANCELLED)
    assert ended(backend)[0].outcome is Outcome.CANCELLED


def test_a_stop_reaches_a_running_task_while_slurmctld_is_down(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    """The controller is killed: the backend says so, a task's end is still read from its
    exit file, and a stop still reaches a running task (its batch step reads the request).
    The controller comes back: the backend answers again."""
    code = "import time; print('up', flush=True); time.sleep(60)"
    quick = f"import os, time\nwhile not os.path.exists({str(backend.shared / 'end')!r}): time.sleep(0.1)"
    a = backend.launch(spec("through", code))
    b = backend.launch(spec("quick", quick, node="n2"))
    until(lambda: "up" in text(backend, a), "the task to start")
    until(lambda: (Path(b.run_dir) / PLACED_FILE).exists(), "the task to start")
    cluster.stop_controller()
    try:
        backend._queue_at = 0.0  # read the queue now
        until(lambda: backend.poll() == [] and backend.available(), "the outage to be seen")
        (backend.shared / "end").write_text("")
        (e,) = ended(backend)
        assert e.handle.job_id == "quick" and e.outcome is Outcome.SUCCEEDED
        backend.stop(a, Outcome.CANCELLED)
        assert control_paths(Path(a.run_dir))["stop"].exists()
        (e,) = ended(backend)
        assert e.handle.job_id == "through" and e.outcome is Outcome.CANCELLED
    finally:
        cluster.start_controller()
    until(lambda: backend.available() is None or None, "the controller to answer")


def test_a_partition_slurm_does_not_have_is_refused_with_what_it_has(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    with pytest.raises(SpecError, match=r"--slurm-partition nope: .*Slurm has: suanli"):
        SlurmBackend(backend.shared, partition="nope", env=cluster.env, python=TASK_PY)


def test_a_task_cannot_forge_its_end_nor_a_stop(backend: SlurmBackend) -> None:
    """The run directory is the task's user's: a task writes an exit record saying it
    succeeded 1,000 s ago and a stop record saying it was preempted, and tries to write a
    stop request where the control plane keeps them. Its end is reported only once Slurm
    has its job over (here at once: its supervisor believed the forged record, ended, and so
    killed the task), from its supervisor's real record, not earlier than it ran, and not as
    the success it claimed nor as a stop nobody asked for."""
    forge = ("import json, os, sys, time\n"
             "run = sys.argv[1]\n"
             "try:\n"
             "    open(os.path.dirname(os.path.dirname(run)) + '/1.0.stop.json', 'w')\n"
             "    print('wrote a request', flush=True)\n"
             "except PermissionError:\n"
             "    print('denied', flush=True)\n"
             "json.dump({'outcome': 'preempted', 'requested_at': 0}, open(run + '/stop.json', 'w'))\n"
             "json.dump({'exit_code': 0, 'finished_at': time.time() - 1000}, "
             "open(run + '/exit.json', 'w'))\n"
             "time.sleep(30)\n")  # fmt: skip
    run_dir = backend.run_dir_for("forger", 1, 0)
    began = time.time()
    h = backend.launch(dataclasses.replace(spec("forger", forge),
                                           command=(TASK_PY, "-c", forge, str(run_dir))))  # fmt: skip
    (e,) = ended(backend)
    assert e.outcome is Outcome.FAILED, e
    assert "a stop suanli did not ask for" in e.detail, e
    assert e.finished_at >= began
    assert text(backend, h).split() == (["denied"] if ROOT else ["wrote", "a", "request"])


def test_a_job_expected_soon_has_its_checkpoint_read_ahead_by_a_step_of_its_user(
    backend: SlurmBackend, cluster: sc.SlurmTestCluster
) -> None:
    """Pre-staging on Slurm: the batch step of a running suanli task of the waiting job's
    user, on a node the job is expected to land on, reads the job's checkpoint ahead there,
    as that user (a file only root may read is not read); a task of another user is never
    asked (it could neither read the files nor be told where they are)."""
    from suanli.backends.prepare import Prepare, prepared_path

    ckpt = cluster.base / f"ckpt-{time.monotonic_ns()}"
    ckpt.mkdir(mode=0o755)
    for name in ("model.pt", "optim.pt"):
        (ckpt / name).write_bytes(b"x" * 4096)
        (ckpt / name).chmod(0o644)
    (ckpt / "secret.pt").write_bytes(b"s" * 4096)
    (ckpt / "secret.pt").chmod(0o600)
    h = backend.launch(spec("ending", "print('up', flush=True); import time; time.sleep(60)"))
    until(lambda: "up" in text(backend, h), "the task to start")
    user = NOBODY if ROOT else None
    ask = Prepare("next", 1, str(ckpt), ("n1", "n2"), user)

    def asked() -> str | None:
        backend.poll()
        note = backend.prepare(ask)
        return None if note.startswith("no suanli task") else note

    assert until(asked, "a step to ask") == "checkpoint read ahead on 1 of 2 expected node(s): n1"
    got = until(lambda: read_json(prepared_path(h.run_dir)), "the step to read ahead")
    # The request names where another job's checkpoint lies: its user's alone to read.
    request = os.stat(control_paths(Path(h.run_dir))["prepare"])
    assert request.st_mode & 0o077 == 0
    assert (request.st_uid, request.st_gid) == (user or (os.geteuid(), os.getegid()))
    assert got["job_id"] == "next"
    assert got["files"] == (2 if ROOT else 3)  # (as nobody, root's own file is not read)
    other = backend.prepare(dataclasses.replace(ask, run_as=(4321, 4321)))
    assert other.startswith("no suanli task of its user runs on its 2 expected node(s)")
    backend.stop(h, Outcome.CANCELLED)
    assert ended(backend)[0].outcome is Outcome.CANCELLED
