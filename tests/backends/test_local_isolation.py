"""LocalBackend: tasks under an unprivileged user, away from the server's files, in scratch
directories of their own outside the state directory.

Tests that switch users need root and the user ``nobody``; they run ``/usr/bin/python3`` or
``/bin/sh`` (``nobody`` cannot reach this venv) in directories under ``/tmp`` it may enter.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import suanli
from local_backend import (
    as_root_with_nobody,
    cleanup,
    launch,
    new_backend,
    nobody,
    py,
    stdout_of,
    wait_exit,
)
from suanli.backends import LocalBackend, Outcome
from suanli.backends.local import default_scratch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


# --- task users ----------------------------------------------------------------------------

WHO_AM_I = (
    'id -u; id -g; id -G; pwd; echo "$HOME|${USER-unset}|${LOGNAME-unset}"; '
    'cat "$1" && echo READ-SECRET; cat "$2" && echo READ-SPEC; exit 0'
)


@as_root_with_nobody
def test_run_as_runs_the_task_as_that_user_away_from_the_server_files(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/root")  # the server's identity must not reach the task
    monkeypatch.setenv("USER", "root")
    monkeypatch.setenv("LOGNAME", "root")
    uid, gid = nobody()  # type: ignore[misc]
    b = new_backend(shared_tmp)
    try:
        state = shared_tmp / "state"
        os.chmod(state, 0o755)  # reachable: only the file's own mode protects the secret
        secret = state / "secret"
        secret.write_text("the database password\n")
        os.chmod(secret, 0o600)
        run_dir = b.run_dir_for("who", 1, 0)
        spec_file = run_dir / "spec.json"
        cmd = ("/bin/sh", "-c", WHO_AM_I, "sh", str(secret), str(spec_file))
        h = b.launch(launch("who", command=cmd, run_as=(uid, gid)))
        e = wait_exit(b, h)
        assert e.outcome is Outcome.SUCCEEDED, e
        lines = stdout_of(b, h).splitlines()
        assert lines[:3] == [str(uid), str(gid), str(gid)]  # no other groups
        cwd = b.scratch_dir_for("who", 1, 0)
        assert lines[3] == str(cwd)
        assert lines[4] == f"{pwd.getpwuid(uid).pw_dir}|nobody|nobody"
        assert "READ-SECRET" not in lines and "READ-SPEC" not in lines
        assert "database password" not in stdout_of(b, h)
        err = b.log_paths(h)[1].read_text()
        assert err.count("Permission denied") == 2, err
        info = os.stat(cwd)
        assert (info.st_uid, info.st_gid) == (uid, gid)
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
        assert os.stat(run_dir).st_uid == os.geteuid()  # the shim's files stay the server's
    finally:
        cleanup(b)


@as_root_with_nobody
def test_run_as_an_unknown_uid_gets_home_slash(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uid = next(n for n in range(54321, 60000) if not _has_passwd_entry(n))
    monkeypatch.setenv("USER", "root")
    b = new_backend(shared_tmp)
    try:
        show = ("/bin/sh", "-c", 'id -u; echo "$HOME|${USER-unset}|${LOGNAME-unset}"; pwd')
        h = b.launch(launch(command=show, run_as=(uid, uid)))
        assert wait_exit(b, h).outcome is Outcome.SUCCEEDED
        assert stdout_of(b, h).splitlines() == [
            str(uid),
            "/|unset|unset",
            str(b.scratch_dir_for("job", 1, 0)),
        ]
    finally:
        cleanup(b)


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@as_root_with_nobody
def test_run_as_enters_the_working_directory_as_the_task_user(shared_tmp: Path) -> None:
    private = shared_tmp / "private"
    private.mkdir(mode=0o700)  # root's: nobody may not enter it
    b = new_backend(shared_tmp)
    try:
        h = b.launch(launch(command=("/bin/pwd",), cwd=str(private), run_as=nobody()))
        e = wait_exit(b, h)
        assert e.outcome is Outcome.FAILED and e.exit_code == 126
        assert "cannot enter the working directory" in e.detail
        assert stdout_of(b, h) == ""
    finally:
        cleanup(b)


REFUSE_WITHOUT_ROOT = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
try:
    from suanli.backends.base import Launch
    from suanli.backends.local import LocalBackend
except Exception as exc:
    print("IMPORT-FAILED", exc)
    sys.exit(0)
base = Path(sys.argv[2])
b = LocalBackend(base / "state" / "runs", scratch=base / "scratch")
try:
    b.launch(Launch("j", 1, 0, ("true",), run_as=(12345, 12345)))
except ValueError as exc:
    print("REFUSED", exc)
"""


@as_root_with_nobody
def test_run_as_is_refused_when_the_server_is_not_root(shared_tmp: Path) -> None:
    os.chmod(shared_tmp, 0o777)
    uid, gid = nobody()  # type: ignore[misc]
    src = str(Path(suanli.__file__).resolve().parents[1])
    out = subprocess.run(
        ["/usr/bin/python3", "-c", REFUSE_WITHOUT_ROOT, src, str(shared_tmp)],
        user=uid,
        group=gid,
        extra_groups=[gid],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
    )
    if "IMPORT-FAILED" in out.stdout:
        pytest.skip(f"/usr/bin/python3 cannot import suanli: {out.stdout}")
    assert out.stdout.startswith("REFUSED run_as:"), (out.stdout, out.stderr)
    assert "root" in out.stdout
    assert not (shared_tmp / "state" / "runs" / "j" / "1" / "0").exists()


# --- scratch directories -------------------------------------------------------------------


def test_default_working_directory_is_outside_the_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    b = LocalBackend(state / "runs", poll_interval=0.02)  # the default scratch
    try:
        assert b.scratch == default_scratch()
        assert not str(b.scratch).startswith(str(tmp_path))
        info = os.lstat(b.scratch)
        assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o711
        h = b.launch(launch(command=py("import os; print(os.getcwd())")))
        assert wait_exit(b, h).outcome is Outcome.SUCCEEDED
        cwd = Path(stdout_of(b, h).strip())
        assert cwd == b.scratch_dir_for("job", 1, 0)
        assert cwd.is_relative_to(b.scratch) and not cwd.is_relative_to(state)
        assert stat.S_IMODE(os.stat(cwd).st_mode) == 0o700
        for level in cwd.parents[:3]:  # instance, job, attempt: passable, not listable
            assert stat.S_IMODE(os.stat(level).st_mode) == 0o711
    finally:
        cleanup(b)
        shutil.rmtree(b.scratch / b.scratch_id, ignore_errors=True)


def test_scratch_directories_are_never_shared_between_state_directories(
    tmp_path: Path,
) -> None:
    first = new_backend(tmp_path)
    again = new_backend(tmp_path)  # a restart keeps the scratch id
    assert again.scratch_id == first.scratch_id
    other = LocalBackend(tmp_path / "other" / "runs", scratch=tmp_path / "scratch")
    assert other.scratch_dir_for("job", 1, 0) != first.scratch_dir_for("job", 1, 0)
    h = first.launch(launch(command=("true",)))
    assert wait_exit(first, h).outcome is Outcome.SUCCEEDED
    # The state directory is made anew at the same path: job ids start again at the same
    # values, and the new tasks get fresh directories, not the old ones.
    shutil.rmtree(tmp_path / "state")
    fresh = new_backend(tmp_path)
    assert fresh.scratch_id != first.scratch_id
    h = fresh.launch(launch(command=py("import os; print(os.listdir())")))
    assert wait_exit(fresh, h).outcome is Outcome.SUCCEEDED
    assert stdout_of(fresh, h) == "[]\n"
    assert first.scratch_dir_for("job", 1, 0).is_dir()  # the old one is left alone


def test_an_explicit_cwd_is_used_as_given(backend: LocalBackend, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    h = backend.launch(launch(command=py("import os; print(os.getcwd())"), cwd=str(work)))
    assert wait_exit(backend, h).outcome is Outcome.SUCCEEDED
    assert stdout_of(backend, h).strip() == str(work)
    assert not backend.scratch_dir_for("job", 1, 0).exists()


def test_scratch_must_lie_outside_the_state_directory(tmp_path: Path) -> None:
    root = tmp_path / "state" / "runs"
    (tmp_path / "state").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "state")
    for scratch in (
        tmp_path / "state" / "scratch",  # inside the state directory
        tmp_path / "state",  # the state directory itself
        tmp_path,  # contains it
        tmp_path / "link" / "scratch",  # inside it through a symlink
    ):
        with pytest.raises(ValueError, match="scratch"):
            LocalBackend(root, scratch=scratch)


def test_scratch_must_be_private_to_the_server(tmp_path: Path) -> None:
    root = tmp_path / "state" / "runs"
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(ValueError, match="scratch: .* writable by group or others"):
        LocalBackend(root, scratch=open_dir)
    (tmp_path / "target").mkdir()
    (tmp_path / "symlinked").symlink_to(tmp_path / "target")
    with pytest.raises(ValueError, match="scratch: .* not a directory"):
        LocalBackend(root, scratch=tmp_path / "symlinked")
    if os.geteuid() == 0 and nobody() is not None:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o755)
        os.chown(foreign, *nobody())  # type: ignore[misc]
        with pytest.raises(ValueError, match="scratch: .* owned by uid"):
            LocalBackend(root, scratch=foreign)
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o700)
    LocalBackend(root, scratch=loose)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o711


@as_root_with_nobody
def test_a_default_scratch_made_by_someone_else_is_refused(
    tmp_path: Path, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Someone else made the per-user directory first in the shared temporary directory.
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    planted = shared_tmp / f"suanli-scratch-{os.geteuid()}"
    planted.mkdir(mode=0o777)
    os.chown(planted, *nobody())  # type: ignore[misc]
    root = tmp_path / "state" / "runs"
    assert default_scratch() == planted
    with pytest.raises(ValueError, match="scratch: .* owned by uid"):
        LocalBackend(root)
    assert list(planted.iterdir()) == []  # nothing of ours was put there


def test_a_leftover_scratch_directory_is_never_reused(backend: LocalBackend) -> None:
    leftover = backend.scratch_dir_for("job", 1, 0)
    leftover.mkdir(parents=True)
    (leftover / "someone-elses-file").write_text("x")
    with pytest.raises(FileExistsError, match="scratch directory"):
        backend.launch(launch(command=("true",)))
    assert not backend.run_dir_for("job", 1, 0).exists()  # nothing launched: may retry
    shutil.rmtree(leftover)
    h = backend.launch(launch(command=("true",)))
    assert wait_exit(backend, h).outcome is Outcome.SUCCEEDED


def test_a_launch_cut_short_before_its_shim_is_made_afresh(backend: LocalBackend) -> None:
    """A control plane killed inside ``launch`` after it made the task's run and scratch
    directories and before the shim started: nothing ran there, so a relaunch of the same
    attempt makes both afresh (rather than refusing it, which would lose the attempt)."""
    run_dir = backend.run_dir_for("job", 1, 0)
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text("{}")
    backend.scratch_dir_for("job", 1, 0).mkdir(parents=True)
    h = backend.launch(launch(command=("true",)))
    assert wait_exit(backend, h).outcome is Outcome.SUCCEEDED


def test_a_shim_whose_handle_was_never_written_is_found_by_its_command_line(
    backend: LocalBackend,
) -> None:
    """Killed after the shim started and before the handle file: ``find`` finds the shim by
    the run directory on its command line, and adoption follows it to its end."""
    h = backend.launch(launch(command=("sleep", "0.5")))
    (Path(h.run_dir) / "handle.json").unlink()
    found = backend.find("job", 1, 0)
    assert found == h
    later = new_backend(Path(h.run_dir).parents[4])
    try:
        assert later.adopt([found]) == []
        assert wait_exit(later, found).outcome is Outcome.SUCCEEDED
    finally:
        cleanup(later)
