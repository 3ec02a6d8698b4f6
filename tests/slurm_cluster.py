"""A real, private Slurm cluster on this machine for the Slurm backend's tests: ``munged``,
a MariaDB server, ``slurmdbd``, ``slurmctld`` and one ``slurmd`` per node (Debian's Slurm
runs several on one host, ``slurmd -N <node>``), every one a child process of the tests.

Why a real one: what the backend must get right is how Slurm itself behaves (what ``sbatch``
prints when the controller is down, which state ``sacct`` records for a job whose node died,
which GPU indices a job is given), and no fake would tell us that.

Everything lives under one temporary directory (configuration, keys, sockets, logs, the
database, spool and state) and every TCP port is picked free at run time, so that two
clusters, or a second test run, never collide; nothing in ``/etc`` is read or changed:
every Slurm command is pointed at this cluster's ``slurm.conf`` by ``SLURM_CONF`` (see
``SlurmTestCluster.env``), and ``slurm.conf``/``slurmdbd.conf`` point at this cluster's own
munge socket (``AuthInfo=socket=...``).

The GPUs are GRES over stand-in device files (there are no GPUs here; the files stand in
only for the hardware): Slurm hands out their indices (``SLURM_JOB_GPUS``,
``CUDA_VISIBLE_DEVICES``) and accounts for them (``gres/gpu`` in ``AllocTRES``) as on a real
node, and nothing opens them.

``kill_node`` kills a node's ``slurmd`` and all of its jobs' processes at once, as the loss
of the machine would; ``stop_controller``/``start_controller`` kill and restart
``slurmctld``, which recovers its jobs from its state directory while they run on.

It needs root (the daemons run as root, and jobs run as other users) and Debian's
``slurm-wlm slurmdbd munge mariadb-server`` (``.ci/run`` installs them); without them the
tests that need it are skipped, saying what is missing.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

PARTITION = "suanli"
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
BINARIES = (
    "munged", "mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "slurmctld", "slurmd",
    "slurmstepd", "sbatch", "squeue", "scancel", "sacct", "sacctmgr", "scontrol", "sinfo",
)  # fmt: skip
START_TIMEOUT_S = 60.0
DB_USER, DB_NAME = "slurm", "slurm_acct_db"

T = TypeVar("T")

# Run as ``python -c WATCHDOG <cluster name> <slurm.conf> <directory> <pid of the tests>``
# with a pipe from the tests as its stdin: once that closes (the tests' process has ended,
# or has stopped the cluster), SIGKILL every process of the cluster but the tests' (the
# daemons carry its SLURM_CONF, its slurmstepds and jobs its name) and remove its directory.
WATCHDOG = """
import os, shutil, signal, sys
name, conf, base, tests = sys.argv[1:]
sys.stdin.buffer.read()
spare = {os.getpid(), int(tests)}
marks = {b"SLURM_CONF=" + conf.encode(), b"SLURM_CLUSTER_NAME=" + name.encode()}
node = b"SUANLI_SLURM_NODE=" + name.encode() + b":"
for _ in range(3):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in spare:
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
        except OSError:
            continue
        if marks.intersection(env) or any(v.startswith(node) for v in env):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
shutil.rmtree(base, ignore_errors=True)
"""


def _which(name: str) -> str | None:
    """``name`` on ``PATH``, or in the sbin directories a non-login ``PATH`` may lack."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def missing() -> list[str]:
    """What this machine lacks to run a test cluster (empty when nothing)."""
    lacks = [name for name in BINARIES if _which(name) is None]
    if os.geteuid() != 0:
        lacks.append("root (the Slurm daemons run as root)")
    return lacks


def require() -> None:
    """Skip the calling test, naming what is missing, when a cluster cannot start here."""
    lacks = missing()
    if lacks:
        pytest.skip(f"a Slurm test cluster needs {', '.join(lacks)}: .ci/run installs {PACKAGES}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def poll(fn: Callable[[], T | None], timeout: float, what: str, every: float = 0.2) -> T:
    """``fn()``'s first true value, called every ``every`` seconds; AssertionError naming
    ``what`` (and ``fn``'s last value) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} ({got!r})")
        time.sleep(every)


def _die_with_parent() -> None:
    """In a daemon before it runs: SIGKILL it when the test process dies, even by SIGKILL
    (Linux's PR_SET_PDEATHSIG), so that no daemon outlives the tests."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc/*/stat."""
    kids: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        kids.setdefault(ppid, []).append(pid)
    return kids


def _with_descendants(roots: Iterable[int]) -> set[int]:
    kids = _children()
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(kids.get(pid, []))
    return found


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class SlurmCommandError(subprocess.CalledProcessError):
    """A Slurm command failed; its message carries the command's stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}: {(self.stderr or '').strip()}"


class SlurmTestCluster:
    """A private Slurm cluster (see the module docstring). ``nodes`` maps each node's name
    to its number of GPUs (of model ``gpu_type``); each node has ``cpus`` cores and
    ``memory_mb`` of memory, as declared (``SlurmdParameters=config_overrides``: not this
    machine's). ``start()`` (or ``with``) starts it, ``stop()`` ends it.

    Attributes: ``env`` (merge into ``os.environ`` to run Slurm's commands against this
    cluster), ``conf`` (its slurm.conf), ``partition``, ``node_names``, ``host`` (the host
    name the nodes are declared on), ``cluster_name``, ``base`` (its directory), ``gpu_dir``
    (the directory of each node's stand-in device files), ``started_in_s``.
    """

    def __init__(
        self,
        nodes: dict[str, int] | None = None,
        gpu_type: str = "h100",
        cpus: int = 8,
        memory_mb: int = 16000,
    ) -> None:
        self.nodes = dict(nodes if nodes is not None else {"n1": 4, "n2": 4})
        self.node_names = list(self.nodes)
        self.gpu_type = gpu_type
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.partition = PARTITION
        self.host = socket.gethostname().split(".")[0]
        # Unique, so that a job's processes (which carry SLURM_CLUSTER_NAME) are told apart
        # from another test cluster's.
        self.cluster_name = f"suanli{secrets.token_hex(4)}"
        self.base = Path(tempfile.mkdtemp(prefix="suanli-slurm-"))
        self.base.chmod(0o755)  # jobs run as other users, who must reach spool and conf
        self.conf = self.base / "etc" / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self.started_in_s: float | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._db_password = secrets.token_hex(12)
        ports = iter(free_port() for _ in range(3 + len(self.nodes)))
        self.ctld_port, self.dbd_port, self.db_port = next(ports), next(ports), next(ports)
        self.node_ports = {name: next(ports) for name in self.nodes}
        for sub in ("etc", "log", "munge", "state", "spool", "db", "gpus", "run"):
            (self.base / sub).mkdir(mode=0o755)
        (self.base / "state").chmod(0o700)
        self.gpu_dir = self.base / "gpus"
        atexit.register(self.stop)  # no daemon or directory outlives the tests
        self._watchdog: subprocess.Popen[bytes] | None = None

    # -- paths and commands ---------------------------------------------------------------

    @property
    def munge_socket(self) -> Path:
        return self.base / "munge" / "munge.socket"

    @property
    def db_socket(self) -> Path:
        return self.base / "db" / "mariadb.sock"

    def log(self, daemon: str) -> Path:
        """A daemon's log: ``slurmctld``, ``slurmdbd``, ``munged``, ``mariadbd`` or a node's
        name (its slurmd)."""
        return self.base / "log" / f"{daemon}.log"

    def run(self, *argv: str, timeout: float = 60, check: bool = True) -> str:
        """Run a Slurm client command (``run("squeue", "-h")``) against this cluster; its
        stdout. Raises CalledProcessError, its message carrying stderr, when it fails."""
        done = subprocess.run(
            argv,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise SlurmCommandError(done.returncode, argv, done.stdout, done.stderr)
        return done.stdout

    def _spawn(self, key: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        out = open(self.base / "log" / f"{key}.out", "ab")  # the child keeps its own copy
        try:
            self._procs[key] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, **(env or {})},
                cwd=self.base,
                start_new_session=True,  # no terminal's signals; stop() ends them
                preexec_fn=_die_with_parent,
            )
        finally:
            out.close()

    def _log_tail(self, key: str) -> str:
        logs = [self.base / "log" / f"{key}.out", self.log(key.removeprefix("slurmd:"))]
        return "".join(p.read_text(errors="replace")[-3000:] for p in logs if p.exists())

    def _alive(self, key: str) -> None:
        """AssertionError with the daemon's log when it has exited."""
        proc = self._procs[key]
        if proc.poll() is not None:
            raise AssertionError(f"{key} exited ({proc.returncode}):\n{self._log_tail(key)}")

    def _wait(self, key: str, ready: Callable[[], object], what: str) -> None:
        def check() -> object:
            self._alive(key)
            return ready()

        try:
            poll(check, START_TIMEOUT_S, what, every=0.1)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self._log_tail(key)}") from None

    # -- configuration --------------------------------------------------------------------

    def _write_configs(self) -> None:
        etc = self.base / "etc"
        key = self.base / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        (etc / "plugstack.conf").write_text("")  # no SPANK plugins, not /etc/slurm's
        gres = ["AutoDetect=off"]  # no NVML here; the files below are the GPUs
        node_lines = []
        null = os.stat("/dev/null").st_rdev
        for name, gpus in self.nodes.items():
            (self.base / "spool" / name).mkdir(mode=0o755)
            node_lines.append(
                f"NodeName={name} NodeHostname={self.host} NodeAddr=127.0.0.1 "
                f"Port={self.node_ports[name]} CPUs={self.cpus} Boards=1 SocketsPerBoard=1 "
                f"CoresPerSocket={self.cpus} ThreadsPerCore=1 RealMemory={self.memory_mb}"
                + (f" Gres=gpu:{self.gpu_type}:{gpus}" if gpus else "")
                + " State=UNKNOWN"
            )
            if gpus:
                devices = self.gpu_dir / name
                devices.mkdir(mode=0o755)
                for index in range(gpus):
                    # Slurm takes a regular file for no device ("is not a valid character
                    # or block device") and then sets neither SLURM_JOB_GPUS nor
                    # CUDA_VISIBLE_DEVICES: character devices, with /dev/null's numbers.
                    os.mknod(devices / f"nvidia{index}", 0o666 | stat.S_IFCHR, null)
                files = f"nvidia[0-{gpus - 1}]" if gpus > 1 else "nvidia0"
                gres.append(f"NodeName={name} Name=gpu Type={self.gpu_type} File={devices}/{files}")
        (etc / "gres.conf").write_text("\n".join(gres) + "\n")
        base = self.base
        conf = f"""\
# A private test cluster (tests/slurm_cluster.py): every path under {base}.
ClusterName={self.cluster_name}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
# Unused (each node has Port= of its own) but must not be the default, 6818, of another.
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool/%n
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/%n.pid
SlurmctldLogFile={self.log("slurmctld")}
SlurmdLogFile={base}/log/%n.log
SlurmctldDebug=info
SlurmdDebug=info
LogTimeFormat=iso8601_ms
PlugStackConfig={etc}/plugstack.conf
MailProg=/bin/true
# The nodes declare the CPUs, memory and GPUs the tests need, not this machine's: trust
# the configuration rather than what slurmd finds (else the nodes are drained as INVAL).
SlurmdParameters=config_overrides
# No cgroups: processes are tracked by their parentage and not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
SwitchType=switch/none
# As root a job of another user keeps the submitting shell's limits otherwise.
PropagateResourceLimits=NONE
SchedulerType=sched/builtin
# Start a batch job as it is submitted, not at the next of the 3-second ticks by default.
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# With memory a consumable resource, a job that asks for none would get a whole node.
DefMemPerCPU=100
PreemptType=preempt/none
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
# Not a password with slurmdbd: the munge socket for talking to it (AuthInfo is not used
# for that connection, and the default socket, /run/munge/munge.socket.2, is not ours).
AccountingStoragePass=socket={self.munge_socket}
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
# slurmctld pings a node every SlurmdTimeout/3 s, retrying the connection each second for
# MessageTimeout s; a node whose ping fails is NOT_RESPONDING, and one that has not
# answered for SlurmdTimeout s is DOWN (its jobs NODE_FAIL) at the next ping. A node that
# comes back with a valid configuration returns to service by itself.
# Clients retry connecting to slurmctld for MessageTimeout s too (sbatch, squeue fail
# after about MessageTimeout - 1 s while it is down); 5 s, not 10, for short outages.
MessageTimeout=5
SlurmdTimeout=10
ReturnToService=2
# A job whose node died ends as NODE_FAIL rather than being requeued by Slurm.
JobRequeue=0
# Fast ends: SIGKILL 2 s after SIGTERM, finished jobs leave slurmctld's memory after 5 s
# (sacct keeps them), no waiting for srun (InactiveLimit) or for a job's other steps.
KillWait=2
MinJobAge=5
InactiveLimit=0
Waittime=0
UnkillableStepTimeout=30
{chr(10).join(node_lines)}
PartitionName={PARTITION} Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE OverSubscribe=NO State=UP
"""
        self.conf.write_text(conf)
        self.conf.chmod(0o644)
        dbd = etc / "slurmdbd.conf"
        dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost={self.host}
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser=root
PidFile={base}/run/slurmdbd.pid
LogFile={self.log("slurmdbd")}
LogTimeFormat=iso8601_ms
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser={DB_USER}
StoragePass={self._db_password}
StorageLoc={DB_NAME}
""")
        dbd.chmod(0o600)  # slurmdbd refuses a world-readable one (it holds the password)

    # -- daemons --------------------------------------------------------------------------

    def _start_munge(self) -> None:
        munge = self.base / "munge"
        self._spawn(
            "munged",
            [
                _which("munged") or "munged",
                "--foreground",
                "--force",  # start despite a leftover socket or a lax directory mode
                f"--socket={self.munge_socket}",
                f"--key-file={munge / 'munge.key'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={self.log('munged')}",
                f"--seed-file={munge / 'munged.seed'}",
                "--num-threads=4",
            ],
        )

    def _mariadb(self, *argv: str) -> None:
        done = subprocess.run(
            [_which(argv[0]) or argv[0], *argv[1:]],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def _start_mariadb(self) -> None:
        data = self.base / "db" / "data"
        # Throwaway data: no durability, a small buffer pool.
        tuning = [
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--skip-log-bin",
            "--skip-name-resolve",
        ]
        self._mariadb(
            "mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
            "--auth-root-authentication-method=socket", "--skip-test-db", *tuning,
        )  # fmt: skip
        self._spawn(
            "mariadbd",
            [
                _which("mariadbd") or "mariadbd",
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={self.db_socket}",
                f"--port={self.db_port}",
                "--bind-address=127.0.0.1",
                "--user=root",
                f"--pid-file={self.base / 'run' / 'mariadbd.pid'}",
                f"--log-error={self.log('mariadbd')}",
                "--innodb-lock-wait-timeout=900",  # as Slurm's accounting guide asks
                *tuning,
            ],
        )

    def _setup_database(self) -> None:
        sql = ["mariadb", "--no-defaults", f"--socket={self.db_socket}", "--user=root"]
        self._wait(
            "mariadbd",
            lambda: subprocess.run([*sql, "-e", "SELECT 1"], capture_output=True).returncode == 0,
            "mariadbd to accept connections",
        )
        self._mariadb(
            *sql,
            "-e",
            f"CREATE DATABASE {DB_NAME}; "
            f"CREATE USER '{DB_USER}'@'%' IDENTIFIED BY '{self._db_password}'; "
            f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'%';",
        )

    def _start_slurmdbd(self) -> None:
        self._spawn(
            "slurmdbd",
            [_which("slurmdbd") or "slurmdbd", "-D"],
            env={"SLURM_CONF": str(self.conf)},  # slurmdbd.conf is read beside it
        )
        self._wait("slurmdbd", self._dbd_answers, "slurmdbd to answer")
        # Registered before slurmctld first starts, so that its jobs are accounted at once.
        self.run("sacctmgr", "-i", "add", "cluster", self.cluster_name)

    def _dbd_answers(self) -> bool:
        done = subprocess.run(
            ["sacctmgr", "-n", "-P", "list", "cluster"],
            env={**os.environ, **self.env},
            capture_output=True,
            timeout=20,
            check=False,
        )
        return done.returncode == 0

    def start_controller(self, wait_nodes: bool = True) -> None:
        """Start slurmctld (again): it recovers its jobs and nodes from StateSaveLocation.
        Returns once it answers and, with ``wait_nodes``, once every node whose slurmd runs
        has registered again (some seconds after a restart, in which they are UNKNOWN)."""
        assert "slurmctld" not in self._procs or self._procs["slurmctld"].poll() is not None
        self._spawn("slurmctld", [_which("slurmctld") or "slurmctld", "-D"])
        self._wait(
            "slurmctld",
            lambda: "is UP" in self.run("scontrol", "ping", check=False, timeout=20),
            "slurmctld to answer",
        )
        if wait_nodes:
            live = [n for n in self.nodes if self._procs[f"slurmd:{n}"].poll() is None]

            def registered() -> bool:
                states = self.node_states()
                return all(
                    not {"UNKNOWN", "NOT_RESPONDING"} & set(states[n].split("+")) for n in live
                )

            self._wait("slurmctld", registered, "the nodes to register with slurmctld")

    def stop_controller(self, save_first: bool = True) -> None:
        """SIGKILL slurmctld, as a crash would; its nodes' jobs run on.

        slurmctld writes its job state at most every 5 s (SAVE_MAX_WAIT), so a job started
        just before a crash comes back PENDING, and when its node reports it running,
        slurmctld kills it and starts it again under the same id ("Registered PENDING
        JobId=... on node ..."). With ``save_first`` (the default) this waits until every
        change made before the call is on disk (at most about 6 s), so that the restarted
        slurmctld finds its jobs as they were."""
        if save_first:
            self._wait_state_saved()
        proc = self._procs["slurmctld"]
        proc.kill()
        proc.wait()

    def _wait_state_saved(self) -> None:
        since = time.time()
        path = self.base / "state" / "job_state"

        def mtime() -> float:
            try:
                return path.stat().st_mtime
            except FileNotFoundError:
                return 0.0

        # A pending change is written once 5 s have passed since the last write, checked
        # every second: if nothing is written by then, nothing was pending.
        deadline = max(since, mtime() + 5) + 1.5
        while mtime() <= since and time.time() < deadline:
            time.sleep(0.1)

    def start_node(self, name: str) -> None:
        """Start the node's slurmd (again)."""
        key = f"slurmd:{name}"
        assert key not in self._procs or self._procs[key].poll() is not None, f"{name} runs"
        # The marker lets kill_node find this slurmd's slurmstepds, which inherit it.
        self._spawn(
            key,
            [_which("slurmd") or "slurmd", "-D", "-N", name],
            env={"SUANLI_SLURM_NODE": self._marker(name)},
        )

    def _marker(self, name: str) -> str:
        return f"{self.cluster_name}:{name}"

    def node_pids(self, name: str) -> set[int]:
        """Every process of the node: its slurmd, its slurmstepds, their descendants and any
        process of its jobs (by ``SLURMD_NODENAME`` and ``SLURM_CLUSTER_NAME``)."""
        roots = []
        for pid in _pids():
            env = _environ(pid)
            if env.get("SUANLI_SLURM_NODE") == self._marker(name) or (
                env.get("SLURMD_NODENAME") == name
                and env.get("SLURM_CLUSTER_NAME") == self.cluster_name
            ):
                roots.append(pid)
        return _with_descendants(roots)

    def job_pids(self, job_id: str | int) -> set[int]:
        """The processes of a job of this cluster (by ``SLURM_JOB_ID``), found as root can."""
        return {
            pid
            for pid in _pids()
            if (env := _environ(pid)).get("SLURM_JOB_ID") == str(job_id)
            and env.get("SLURM_CLUSTER_NAME") == self.cluster_name
        }

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's slurmd and every process of its jobs at once, as the loss of the
        machine would take them; slurmctld notices only when the node stops answering."""
        # Frozen first (SIGSTOP), then killed: a task's wrapper that outlived its child by a
        # moment would write the child's death as the task's end, which a lost machine never
        # does. A stopped process neither runs nor forks.
        frozen: set[int] = set()
        for _ in range(50):  # until no process of the node is left running
            pids = self.node_pids(name) - frozen
            if not pids:
                break
            _signal(pids, signal.SIGSTOP)
            frozen |= pids
        proc = self._procs.get(f"slurmd:{name}")
        if proc is not None:
            proc.kill()
            proc.wait()
        for _ in range(50):  # until none is left
            pids = self.node_pids(name)
            if not pids:
                return
            _signal(pids, signal.SIGKILL)
            time.sleep(0.05)
        raise AssertionError(f"processes of {name} survive SIGKILL: {sorted(pids)}")

    # -- states ---------------------------------------------------------------------------

    def node_states(self) -> dict[str, str]:
        """Each node's State as ``scontrol show node -o`` prints it (``IDLE``, ``MIXED``,
        ``DOWN+NOT_RESPONDING``, ...)."""
        states = {}
        for line in self.run("scontrol", "show", "node", "-o").splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "NodeName" in fields:
                states[fields["NodeName"]] = fields.get("State", "")
        return states

    def node_state(self, name: str) -> str:
        return self.node_states()[name]

    def wait_node_state(
        self, name: str, states: Iterable[str] | str, timeout: float = 30, exact: bool = False
    ) -> str:
        """Wait until the node's State is one of ``states``; the State. Unless ``exact``, a
        wanted state also matches one word of a compound one ("DOWN" and "NOT_RESPONDING"
        both match "DOWN+NOT_RESPONDING"; "IDLE" matches "IDLE+DRAIN")."""
        wanted = {states} if isinstance(states, str) else set(states)

        def matches() -> str | None:
            state = self.node_states().get(name, "")
            if state in wanted or (not exact and wanted & set(state.split("+"))):
                return state
            return None

        return poll(matches, timeout, f"node {name} to be {'/'.join(sorted(wanted))}", 0.25)

    # -- the whole cluster ----------------------------------------------------------------

    def _start_watchdog(self) -> None:
        """A process that waits for this one to end, however it ends, then kills what is
        left of the cluster and removes its directory. The daemons die with the tests
        anyway (PR_SET_PDEATHSIG) but the jobs' processes are not their children: without
        this, a test process killed by SIGKILL would leave them running."""
        self._watchdog = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WATCHDOG,
                self.cluster_name,
                str(self.conf),
                str(self.base),
                str(os.getpid()),
            ],  # fmt: skip
            stdin=subprocess.PIPE,
            start_new_session=True,
        )

    def start(self) -> SlurmTestCluster:
        """Start every daemon; return once every node is IDLE (``started_in_s`` records how
        long that took). On failure, everything started is stopped."""
        began = time.monotonic()
        self._start_watchdog()
        try:
            self._write_configs()
            self._start_munge()
            self._start_mariadb()  # its install runs while munged starts
            self._wait("munged", self.munge_socket.exists, "munged's socket")
            self._setup_database()
            self._start_slurmdbd()
            # The slurmds first: they retry registering until slurmctld answers.
            for name in self.nodes:
                self.start_node(name)
            self.start_controller()

            def all_idle() -> bool:
                for name in self.nodes:
                    self._alive(f"slurmd:{name}")
                return set(self.node_states().values()) == {"IDLE"}

            poll(all_idle, START_TIMEOUT_S, "every node to be IDLE", every=0.1)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        """SIGKILL every daemon and job of the cluster and remove its directory."""
        atexit.unregister(self.stop)
        for name in self.nodes:
            try:
                self.kill_node(name)
            except AssertionError:
                pass  # what survives SIGKILL cannot be helped; the daemons go regardless
        for key in ("slurmctld", "slurmdbd", "mariadbd", "munged"):
            proc = self._procs.get(key)
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        self._procs.clear()
        if self._watchdog is not None:  # a last sweep, then it exits
            assert self._watchdog.stdin is not None
            self._watchdog.stdin.close()
            self._watchdog.wait(timeout=30)
            self._watchdog = None
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> SlurmTestCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def running(
    nodes: dict[str, int] | None = None,
    gpu_type: str = "h100",
    cpus: int = 8,
    memory_mb: int = 16000,
) -> Iterator[SlurmTestCluster]:
    """For a module's fixture: a started cluster (``SlurmTestCluster``, of these arguments)
    until the module's last test is done, so that its daemons do not run beside the rest of
    the suite; skips (naming what is missing) where it cannot run."""
    require()
    with SlurmTestCluster(nodes, gpu_type, cpus, memory_mb) as cluster:
        yield cluster
