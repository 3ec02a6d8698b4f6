"""LocalBackend with real processes: environment, exit codes, limits, stops, restarts and
the validation of launches (task users and scratch directories are in
``test_local_isolation.py``, bounded logs in ``test_local_logs.py``).

Commands are short ``python -c`` scripts or ``sleep``; every wait is bounded. Linux only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local_backend import (
    PRINT_ENV,
    PY,
    exit_record,
    gone,
    launch,
    new_backend,
    py,
    stdout_of,
    wait_exit,
    wait_exits,
    wait_output,
    wait_until,
)
from suanli.backends import Backend, Handle, Launch, LocalBackend, Outcome
from suanli.backends.base import (
    LOADER_VARIABLES,
    RENDEZVOUS_PORTS,
    Elastic,
    job_dir_name,
    loader_variables,
    merged_environment,
    rendezvous_port,
    task_environment,
)
from suanli.backends.shim import proc_stat

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


# --- environment ---------------------------------------------------------------------------


def test_task_sees_gpus_and_suanli_variables(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_INHERITED", "yes")
    monkeypatch.setenv("SUANLI_GPU_MILLI", "from-the-control-plane")  # must not leak
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "7")  # must not leak
    spec = launch(
        "env-job",
        attempt=2,
        task=0,
        command=py(PRINT_ENV),
        gpus=(1, 3),
        gpu_memory_mib=0,
        checkpoint_dir="/ckpt/env-job",
        env=(("CUDA_VISIBLE_DEVICES", "0,1,2,3"), ("SUANLI_JOB_ID", "other"), ("MY_VAR", "x")),
    )
    h = backend.launch(spec)
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.SUCCEEDED, e
    env = json.loads(stdout_of(backend, h))
    assert env["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert env["SUANLI_JOB_ID"] == "env-job"
    assert env["SUANLI_ATTEMPT"] == "2"
    assert env["SUANLI_TASK_INDEX"] == "0"
    assert env["SUANLI_CHECKPOINT_DIR"] == "/ckpt/env-job"
    assert env["MY_VAR"] == "x"
    assert env["MY_INHERITED"] == "yes"
    assert "SUANLI_GPU_MILLI" not in env
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
    assert "SUANLI_GPU_MEMORY_MIB" not in env


def test_fractional_task_gets_mps_limits(backend: LocalBackend) -> None:
    spec = launch(command=py(PRINT_ENV), gpus=(2,), gpu_milli=250, gpu_memory_mib=4096)
    h = backend.launch(spec)
    assert wait_exit(backend, h).outcome is Outcome.SUCCEEDED
    env = json.loads(stdout_of(backend, h))
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert env["SUANLI_GPU_MILLI"] == "250"
    assert env["SUANLI_GPU_MEMORY_MIB"] == "4096"


def test_task_environment_without_processes() -> None:
    assert task_environment(launch(command=("x",)))["CUDA_VISIBLE_DEVICES"] == ""
    pct = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
    assert task_environment(launch(command=("x",), gpus=(0,), gpu_milli=5))[pct] == "1"
    assert task_environment(launch(command=("x",), gpus=(0,), gpu_milli=999))[pct] == "100"
    assert task_environment(launch(command=("x",), gpus=(0,), gpu_milli=333))[pct] == "34"
    frac = task_environment(launch(command=("x",), gpus=(0,), gpu_milli=500))
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in frac
    merged = merged_environment(
        launch(command=("x",), env=(("CUDA_VISIBLE_DEVICES", "9"), ("A", "1"))),
        {"SUANLI_CHECKPOINT_DIR": "/leak", "PATH": "/bin"},
    )
    assert merged["CUDA_VISIBLE_DEVICES"] == ""
    assert merged["A"] == "1" and merged["PATH"] == "/bin"
    assert "SUANLI_CHECKPOINT_DIR" not in merged


def test_a_gang_task_is_told_its_rendezvous_and_cannot_be_told_otherwise() -> None:
    spec = launch(command=("x",), env=(("RANK", "7"), ("MASTER_PORT", "1")),
                  rendezvous=(4, 3, 2, 1, "10.0.0.5", 23456))  # fmt: skip
    env = merged_environment(spec, {"WORLD_SIZE": "99", "MASTER_ADDR": "elsewhere"})
    assert {k: env[k] for k in ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK",
                                "MASTER_ADDR", "MASTER_PORT")} == {
        "WORLD_SIZE": "4", "RANK": "3", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1",
        "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "23456",
    }  # fmt: skip
    alone = merged_environment(launch(command=("x",)), {"RANK": "5", "MASTER_PORT": "9"})
    assert "RANK" not in alone and "MASTER_PORT" not in alone  # the server's never leak
    for bad, field in [((2, 2, 1, 0, "h", 1), "rank"), ((2, 0, 1, 1, "h", 1), "local_rank"),
                       ((2, 0, 1, 0, "", 1), "master_addr"), ((2, 0, 1, 0, "h", 0), "master_port"),
                       ((2, 0, 1, 0, "a b", 5), "master_addr")]:  # fmt: skip
        with pytest.raises(ValueError, match=field):
            launch(command=("x",), rendezvous=bad)


def test_rendezvous_ports_are_stable_per_attempt_and_in_range() -> None:
    ports = {rendezvous_port(f"j{i}", a) for i in range(200) for a in (1, 2)}
    assert all(RENDEZVOUS_PORTS[0] <= p < RENDEZVOUS_PORTS[1] for p in ports)
    assert len(ports) > 380  # 400 attempts: few share a port
    assert rendezvous_port("job-1", 1) == rendezvous_port("job-1", 1)
    assert rendezvous_port("job-1", 1) != rendezvous_port("job-1", 2)


def test_loader_variables_are_dropped_unless_allowed() -> None:
    brief = {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG", "LD_DEBUG_OUTPUT",
        "LD_PROFILE", "LD_PROFILE_OUTPUT", "LD_ORIGIN_PATH", "LD_BIND_NOW", "LD_DYNAMIC_WEAK",
        "LD_USE_LOAD_BIAS", "LD_SHOW_AUXV", "LD_HWCAP_MASK", "LD_ASSUME_KERNEL",
        "LD_TRACE_LOADED_OBJECTS", "GCONV_PATH", "MALLOC_TRACE", "GLIBC_TUNABLES",
    }  # fmt: skip
    assert brief <= LOADER_VARIABLES
    assert "TMPDIR" not in LOADER_VARIABLES and "PATH" not in LOADER_VARIABLES
    assert loader_variables(["PATH", "LD_PRELOAD", "GLIBC_TUNABLES", "LD_PRELOAD"]) == [
        "GLIBC_TUNABLES",
        "LD_PRELOAD",
    ]
    assert loader_variables(["PATH", "HOME"]) == []
    base = {"LD_PRELOAD": "/server.so", "GCONV_PATH": "/g", "LD_AUDIT": "/a", "PATH": "/bin"}
    user = (("LD_LIBRARY_PATH", "/x"), ("LD_AUDIT", "/user"), ("A", "1"))
    merged = merged_environment(launch(command=("x",), env=user), base)
    assert merged["PATH"] == "/bin" and merged["A"] == "1"
    assert not set(merged) & LOADER_VARIABLES
    allowed = launch(command=("x",), env=user, allowed_env=frozenset({"LD_AUDIT", "LD_PRELOAD"}))
    merged = merged_environment(allowed, base)
    assert merged["LD_AUDIT"] == "/user"  # the user's own value, allowed
    assert "LD_PRELOAD" not in merged  # allowed, but never the server's value
    assert "LD_LIBRARY_PATH" not in merged and "GCONV_PATH" not in merged


def test_task_never_sees_loader_variables_it_was_not_allowed(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent.so")  # the server's: never passed down
    monkeypatch.setenv("LD_AUDIT", "/server-audit.so")
    show = py("import json, os; print(json.dumps({k: v for k, v in os.environ.items()}))")
    user_env = (("LD_LIBRARY_PATH", "/x"), ("MY_VAR", "kept"))
    plain = backend.launch(launch(task=0, command=show, env=user_env))
    allowed = backend.launch(
        launch(
            task=1,
            command=show,
            env=user_env,
            allowed_env=frozenset({"LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT"}),
        )
    )
    got = wait_exits(backend, [plain, allowed])
    assert all(e.outcome is Outcome.SUCCEEDED for e in got.values()), got
    env = json.loads(stdout_of(backend, plain))
    assert env["MY_VAR"] == "kept"
    assert "LD_PRELOAD" not in env and "LD_LIBRARY_PATH" not in env and "LD_AUDIT" not in env
    env = json.loads(stdout_of(backend, allowed))
    assert env["LD_LIBRARY_PATH"] == "/x"  # the user's, allowed by the admin
    assert "LD_PRELOAD" not in env and "LD_AUDIT" not in env  # allowed, but the user set none


# --- exit codes ----------------------------------------------------------------------------


def test_exit_codes_and_logs(backend: LocalBackend) -> None:
    ok = backend.launch(launch(task=0, command=py("print('hello')")))
    bad = backend.launch(
        launch(task=1, command=py("import sys; sys.stderr.write('boom\\n'); sys.exit(3)"))
    )
    spaced = backend.launch(launch(task=2, command=("echo hello",)))  # argv, never split
    assert {h.task for h in backend.running()} == {0, 1, 2}
    got = wait_exits(backend, [ok, bad, spaced])
    assert got[0].outcome is Outcome.SUCCEEDED and got[0].exit_code == 0
    assert got[0].detail == "exit code 0"
    assert stdout_of(backend, ok) == "hello\n"
    assert got[1].outcome is Outcome.FAILED and got[1].exit_code == 3
    assert got[1].signal is None and got[1].detail == "exit code 3"
    assert backend.log_paths(bad)[1].read_text() == "boom\n"
    assert got[2].outcome is Outcome.FAILED and got[2].exit_code == 127
    assert "could not start" in got[2].detail
    assert backend.running() == [] and backend.poll() == []
    assert isinstance(backend, Backend)


def test_handle_round_trips_through_json(backend: LocalBackend) -> None:
    h = backend.launch(launch(command=("true",)))
    assert Handle.from_json(json.loads(json.dumps(h.to_json()))) == h
    assert proc_stat(h.pid) is not None or gone(h.pid)
    wait_exit(backend, h)
    with pytest.raises(ValueError, match="pid"):
        Handle.from_json({**h.to_json(), "pid": "12"})
    with pytest.raises(ValueError, match="start_ticks"):
        Handle.from_json({k: v for k, v in h.to_json().items() if k != "start_ticks"})


def test_relaunching_the_same_attempt_is_refused(backend: LocalBackend) -> None:
    h = backend.launch(launch(command=("true",)))
    with pytest.raises(FileExistsError):
        backend.launch(launch(command=("true",)))
    wait_exit(backend, h)
    with pytest.raises(FileExistsError, match="new attempt"):
        backend.launch(launch(command=("true",)))


def test_job_ids_are_escaped_for_the_filesystem(backend: LocalBackend) -> None:
    assert job_dir_name("..") == "%2E%2E" and job_dir_name(".") == "%2E"
    assert job_dir_name("a/b") == "a%2Fb" and job_dir_name("a%2Fb") == "a%252Fb"
    assert len(job_dir_name("x" * 1000)) < 200
    h = backend.launch(launch("../../escape", command=("true",)))
    run_dir = Path(h.run_dir)
    assert run_dir.parent.parent.parent == backend.root
    assert run_dir.parent.parent.name == "..%2F..%2Fescape"
    wait_exit(backend, h)


# --- limits and stops ----------------------------------------------------------------------


def test_max_runtime_times_out(backend: LocalBackend) -> None:
    t0 = time.monotonic()
    h = backend.launch(launch(command=("sleep", "30"), max_runtime_s=1, grace_s=2))
    e = wait_exit(backend, h, timeout=8)
    assert e.outcome is Outcome.TIMED_OUT
    assert e.signal == signal.SIGTERM and e.exit_code is None
    assert "max runtime 1 s" in e.detail
    assert 0.9 < time.monotonic() - t0 < 5


TRAP_AND_SAVE = """
import pathlib, signal, sys, time
def on_term(signum, frame):
    path = pathlib.Path(sys.argv[1])
    path.write_text(path.read_text() + "checkpoint saved\\n" if path.exists() else "checkpoint saved\\n")
    time.sleep(0.3)  # a second delivery would run the handler again here
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(30)
"""


def test_preempt_with_grace_lets_the_task_checkpoint(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "ckpt.txt"
    h = backend.launch(launch(command=(PY, "-c", TRAP_AND_SAVE, str(marker)), grace_s=10))
    wait_output(backend, h, "ready")
    backend.stop(h, Outcome.PREEMPTED)
    backend.stop(h, Outcome.CANCELLED)  # the first request wins
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.PREEMPTED and e.exit_code == 0
    assert marker.read_text() == "checkpoint saved\n"  # the signal arrived exactly once
    assert "SIGTERM" in e.detail


def test_task_ignoring_the_stop_signal_is_killed_after_grace(backend: LocalBackend) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(30)"
    )
    h = backend.launch(launch(command=py(code), grace_s=0.5))
    wait_output(backend, h, "ready")
    t0 = time.monotonic()
    backend.stop(h, Outcome.PREEMPTED)
    e = wait_exit(backend, h, timeout=8)
    assert e.outcome is Outcome.PREEMPTED
    assert e.signal == signal.SIGKILL and e.exit_code is None
    assert 0.4 < time.monotonic() - t0 < 4
    assert "grace" in e.detail


def test_cancel_and_stop_after_end_is_a_no_op(backend: LocalBackend) -> None:
    long = backend.launch(launch(task=0, command=("sleep", "30")))
    short = backend.launch(launch(task=1, command=("true",)))
    wait_until(lambda: (Path(short.run_dir) / "exit.json").exists())
    backend.stop(short, Outcome.CANCELLED)
    assert not (Path(short.run_dir) / "stop.json").exists()
    backend.stop(long, Outcome.CANCELLED)
    got = wait_exits(backend, [long, short])
    assert got[0].outcome is Outcome.CANCELLED and got[0].signal == signal.SIGTERM
    assert got[1].outcome is Outcome.SUCCEEDED
    with pytest.raises(ValueError, match="outcome"):
        backend.stop(long, Outcome.FAILED)


def test_stop_right_after_launch_still_leaves_an_exit_file(backend: LocalBackend) -> None:
    h = backend.launch(launch(command=("sleep", "30")))
    backend.stop(h, Outcome.CANCELLED)  # the shim may not have started the command yet
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.CANCELLED
    assert (Path(h.run_dir) / "exit.json").exists()


def test_sigkill_as_stop_signal_spares_the_shim(backend: LocalBackend) -> None:
    h = backend.launch(launch(command=("sleep", "30"), stop_signal="SIGKILL"))
    wait_until(lambda: (Path(h.run_dir) / "pid").exists())
    backend.stop(h, Outcome.PREEMPTED)
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.PREEMPTED and e.signal == signal.SIGKILL
    assert (Path(h.run_dir) / "exit.json").exists()


def test_signalling_the_shim_alone_reaches_the_task(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "got.txt"
    code = (
        "import pathlib, signal, sys, time\n"
        "def h(s, f):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('got')\n"
        "    sys.exit(5)\n"
        "signal.signal(signal.SIGUSR1, h)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    h = backend.launch(launch(command=py(code)))
    wait_output(backend, h, "ready")
    os.kill(h.pid, signal.SIGUSR1)  # not a stop: just passed on
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.FAILED and e.exit_code == 5
    assert marker.read_text() == "got"


SPAWN_GRANDCHILD = """
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:])
print(p.pid, flush=True)
time.sleep(float({linger}))
"""


def test_stop_kills_the_whole_process_group(backend: LocalBackend) -> None:
    code = SPAWN_GRANDCHILD.format(linger=30)
    h = backend.launch(launch(command=(PY, "-c", code, "sleep", "30"), grace_s=5))
    wait_until(lambda: stdout_of(backend, h).endswith("\n"))
    grandchild = int(stdout_of(backend, h))
    assert not gone(grandchild)
    backend.stop(h, Outcome.CANCELLED)
    assert wait_exit(backend, h).outcome is Outcome.CANCELLED
    wait_until(lambda: gone(grandchild), timeout=5)


def test_leftover_processes_die_with_the_task(backend: LocalBackend) -> None:
    # The grandchild ignores SIGTERM and outlives its parent; the shim still kills it.
    code = SPAWN_GRANDCHILD.format(linger=0)
    cmd = (PY, "-c", code, "sh", "-c", "trap '' TERM; exec sleep 30")
    h = backend.launch(launch(command=cmd))
    e = wait_exit(backend, h)
    assert e.outcome is Outcome.SUCCEEDED
    wait_until(lambda: gone(int(stdout_of(backend, h))), timeout=5)


# --- restart / adoption --------------------------------------------------------------------


def test_adopt_a_running_task_after_restart(tmp_path: Path) -> None:
    a = new_backend(tmp_path)
    h = a.launch(launch(command=py("import time; time.sleep(1.0)")))
    stored = json.dumps(h.to_json())
    del a  # the control plane "dies": nobody polls A any more

    b = new_backend(tmp_path)
    handle = Handle.from_json(json.loads(stored))
    assert b.adopt([handle]) == []
    assert b.running() == [handle]
    assert b.adopt([handle]) == []  # adopting twice changes nothing
    assert b.poll() == []
    e = wait_exit(b, handle)
    assert e.outcome is Outcome.SUCCEEDED and e.exit_code == 0
    assert b.running() == []
    wait_until(lambda: gone(handle.pid), timeout=5)  # and the shim was reaped or is gone


CONTROL_PLANE = """
import json, sys, time
from pathlib import Path
from suanli.backends import Launch, LocalBackend
b = LocalBackend(Path(sys.argv[1]), scratch=Path(sys.argv[2]))
h = b.launch(Launch("cp", 1, 0, ("sleep", "0.8"), max_runtime_s=30))
print(json.dumps(h.to_json()), flush=True)
time.sleep(60)
"""


def test_task_survives_the_death_of_the_control_plane_process(tmp_path: Path) -> None:
    root, scratch = tmp_path / "state" / "runs", tmp_path / "scratch"
    cp = subprocess.Popen(
        [PY, "-c", CONTROL_PLANE, str(root), str(scratch)], stdout=subprocess.PIPE
    )
    assert cp.stdout is not None
    handle = Handle.from_json(json.loads(cp.stdout.readline()))
    cp.kill()  # SIGKILL: no cleanup at all
    cp.wait()
    cp.stdout.close()
    b = new_backend(tmp_path)
    assert b.adopt([handle]) == []  # the shim is not our child: watched through /proc
    e = wait_exit(b, handle)
    assert e.outcome is Outcome.SUCCEEDED


def test_adopt_reports_tasks_that_ended_while_down(tmp_path: Path) -> None:
    a = new_backend(tmp_path)
    ok = a.launch(launch(task=0, command=("true",)))
    bad = a.launch(launch(task=1, command=("false",)))
    stopped = a.launch(launch(task=2, command=("sleep", "30")))
    a.stop(stopped, Outcome.PREEMPTED)
    for h in (ok, bad, stopped):
        wait_until(lambda h=h: (Path(h.run_dir) / "exit.json").exists())
    a.close()
    del a

    b = new_backend(tmp_path)
    got = {e.handle.task: e for e in b.adopt([ok, bad, stopped])}
    assert got[0].outcome is Outcome.SUCCEEDED
    assert got[1].outcome is Outcome.FAILED and got[1].exit_code == 1
    assert got[2].outcome is Outcome.PREEMPTED
    assert b.running() == [] and b.poll() == []


def test_adopted_exit_keeps_the_recorded_finish_time(tmp_path: Path) -> None:
    a = new_backend(tmp_path)
    h = a.launch(launch(command=("true",)))
    wait_until(lambda: (Path(h.run_dir) / "exit.json").exists())
    a.close()
    del a
    recorded = exit_record(h)["finished_at"]
    assert isinstance(recorded, float)
    time.sleep(1.0)  # the control plane is down a while

    b = new_backend(tmp_path)
    (e,) = b.adopt([h])
    assert e.outcome is Outcome.SUCCEEDED
    assert e.finished_at == recorded  # when the shim reaped the task, not when we noticed
    assert e.finished_at < time.time() - 0.9


def test_stop_after_restart(tmp_path: Path) -> None:
    h = new_backend(tmp_path).launch(launch(command=("sleep", "30")))
    b = new_backend(tmp_path)
    assert b.adopt([h]) == []
    b.stop(h, Outcome.CANCELLED)
    assert wait_exit(b, h).outcome is Outcome.CANCELLED
    b.close()


def test_adopt_marks_vanished_and_recycled_pids_lost(tmp_path: Path) -> None:
    b = new_backend(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    empty = tmp_path / "empty"
    empty.mkdir()
    vanished = Handle("j", 1, 0, dead.pid, 12345, str(empty))
    me = proc_stat(os.getpid())
    assert me is not None
    recycled = Handle("j", 1, 1, os.getpid(), me[2] + 1, str(empty))  # live pid, wrong start
    got = {e.handle.task: e for e in b.adopt([vanished, recycled])}
    assert got[0].outcome is Outcome.LOST and got[1].outcome is Outcome.LOST
    assert got[0].exit_code is None and got[0].signal is None
    assert b.running() == []
    b.stop(recycled, Outcome.CANCELLED)  # not ours: nothing is signalled
    assert not (empty / "stop.json").exists()


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "kw"),
    [
        ("command", {"command": ()}),
        ("command", {"command": ("",)}),
        ("job_id", {"job_id": ""}),
        ("attempt", {"attempt": 0}),
        ("task", {"task": -1}),
        ("gpus", {"gpus": (-1,)}),
        ("gpus", {"gpus": (1, 1)}),
        ("gpu_milli", {"gpu_milli": 1000, "gpus": (0,)}),
        ("gpu_milli", {"gpu_milli": -5}),
        ("gpus", {"gpu_milli": 500, "gpus": (0, 1)}),
        ("gpu_memory_mib", {"gpu_memory_mib": -1}),
        ("max_runtime_s", {"max_runtime_s": -1.0}),
        ("max_runtime_s", {"max_runtime_s": 0}),
        ("grace_s", {"grace_s": -0.1}),
        ("grace_s", {"grace_s": float("nan")}),
        ("stop_signal", {"stop_signal": "SIGNOPE"}),
        ("env", {"env": (("A=B", "x"),)}),
        ("cwd", {"cwd": ""}),
        ("run_as", {"run_as": (0, 0)}),
        ("run_as", {"run_as": (0, 1000)}),
        ("run_as", {"run_as": (-1, 1000)}),
        ("run_as", {"run_as": (1000, -1)}),
        ("run_as", {"run_as": (2**32 - 1, 1000)}),  # (uid_t)-1: "no change", i.e. root
        ("run_as", {"run_as": (1000, 2**32 - 1)}),
        ("run_as", {"run_as": (1000,)}),
        ("run_as", {"run_as": [1000, 1000]}),
        ("run_as", {"run_as": (True, 1000)}),
        ("run_as", {"run_as": ("1000", 1000)}),
        ("log_max_bytes", {"log_max_bytes": 0}),
        ("log_max_bytes", {"log_max_bytes": 1.5}),
        ("log_min_free_bytes", {"log_min_free_bytes": -1}),
        ("log_min_free_bytes", {"log_min_free_bytes": None}),
        ("allowed_env", {"allowed_env": {"LD_PRELOAD"}}),
        ("allowed_env", {"allowed_env": frozenset({"A=B"})}),
        ("allowed_env", {"allowed_env": frozenset({""})}),
    ],
)
def test_bad_launch_values_name_the_field(field: str, kw: dict[str, object]) -> None:
    fields: dict[str, object] = {"job_id": "j", "attempt": 1, "task": 0, "command": ("true",)}
    fields.update(kw)
    with pytest.raises(ValueError, match=field):
        Launch(**fields)  # type: ignore[arg-type]


def test_good_new_launch_values_are_accepted() -> None:
    spec = launch(
        command=("true",),
        run_as=(1000, 0),  # the root group is allowed (some images expect it); uid 0 is not
        log_max_bytes=1,
        log_min_free_bytes=0,
        allowed_env=frozenset({"LD_PRELOAD"}),
    )
    assert spec.run_as == (1000, 0)
    assert launch(command=("true",)).log_max_bytes == 64 << 20
    assert launch(command=("true",)).log_min_free_bytes == 1 << 30


# --- elastic tasks -----------------------------------------------------------------------

ELASTIC_TASK = """
import json, os, signal, sys, time
path = os.environ["SUANLI_ELASTIC_FILE"]
print("env", os.environ["SUANLI_WORLD_SIZE"], os.environ["SUANLI_RANK"], flush=True)
print("start", open(path).read().strip(), flush=True)
time.sleep(float(sys.argv[1]))  # no handler yet: a SIGUSR1 now must wait, not end the task
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
child = os.fork()  # a process of the task without a handler: it must never get the signal
if child == 0:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    time.sleep(30)
    os._exit(0)
while True:
    if got:
        got.clear()
        print("told", open(path).read().strip(), os.waitpid(child, os.WNOHANG)[0], flush=True)
    time.sleep(0.02)
"""


def test_an_elastic_task_reads_its_file_and_is_told_once_it_catches_the_signal(
    backend: LocalBackend,
) -> None:
    h = backend.launch(
        launch("el", command=(*py(ELASTIC_TASK), "0.5"), elastic=(2, 1, 0), grace_s=1)
    )
    path = backend.elastic_file_for("el", 1, 0)
    assert json.loads(path.read_text()) == {"world_size": 2, "rank": 1, "generation": 0}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    wait_output(backend, h, "start")
    backend.resize(h, Elastic(4, 3, 1))  # before its handler is there
    assert backend.elastic(h) == Elastic(4, 3, 1)
    wait_output(backend, h, 'told {"generation": 1, "rank": 3, "world_size": 4} 0')
    out = stdout_of(backend, h)
    assert "env 2 1" in out and out.count("told") == 1
    assert [x.name for x in path.parent.iterdir()] == ["0.json"]  # no temporary file left
    backend.stop(h, Outcome.CANCELLED)
    assert wait_exit(backend, h).outcome is Outcome.CANCELLED
    backend.resize(h, Elastic(2, 1, 2))  # ended: left alone
    assert backend.elastic(h) == Elastic(4, 3, 1)


def test_an_elastic_launch_refuses_sigusr1_as_its_stop_signal() -> None:
    with pytest.raises(ValueError, match="stop_signal"):
        launch("el", command=("true",), elastic=(1, 0, 0), stop_signal="SIGUSR1")
    with pytest.raises(ValueError, match="elastic"):
        launch("el", command=("true",), elastic=(2, 2, 0))
