"""Whom a job's tasks run as, and whether that identity can use a working directory.

A control plane running as root never runs a task as root: each task runs under an
unprivileged uid, the tenant's where ``--tenant-user TENANT=USER`` maps one (as Slurm runs a
job as its submitter), else ``--run-as`` (default ``nobody``). A control plane running as an
ordinary user runs tasks as that user: single-user mode, in which tasks are not isolated from
the server's files (``docs/serve.md``, "Threat model").

Tenants that share a uid (every tenant without a ``--tenant-user`` of its own runs as the
``--run-as`` user) are isolated from the server but not from each other: the same uid reads
the other's files and may signal and trace its processes. ``--isolate-tenants`` refuses the
jobs of tenants without a user of their own.

``usable`` answers, from the permission bits along the path, whether a uid/gid (without
supplementary groups: tasks get none) can enter and list a directory; POSIX ACLs are not read,
so a directory usable only through an ACL is refused (give it group or other bits instead).
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from suanli.core.model import SpecError

DEFAULT_RUN_AS = "nobody"


def _user(name: str, what: str) -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    except KeyError:
        raise SpecError(f"{what}: no user {name!r} on this machine") from None
    if entry.pw_uid == 0:
        raise SpecError(f"{what}: tasks never run as root (user {name!r} is uid 0)")
    return entry.pw_uid, entry.pw_gid


@dataclass(frozen=True)
class RunAs:
    """The identity of each tenant's tasks: ``default`` for tenants not in ``per_tenant``
    (None for both: tasks run as the control plane's own user)."""

    default: tuple[int, int] | None = None
    per_tenant: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    names: Mapping[tuple[int, int], str] = field(default_factory=dict)
    own_users_only: bool = False
    """Refuse the jobs of a tenant without a user of its own (``--isolate-tenants``): tasks
    of tenants that share a uid can read each other's files and signal and trace each
    other's processes, whatever the permission bits say."""

    @classmethod
    def of(
        cls,
        run_as: str | None,
        tenant_users: Iterable[str] = (),
        *,
        euid: int | None = None,
        isolate_tenants: bool = False,
    ) -> RunAs:
        """From ``suanli serve``'s options: ``--run-as USER`` and ``--tenant-user
        TENANT=USER`` (repeatable). Root: tasks run as those (default ``nobody``); another
        user: tasks run as itself, and the options are an error (it cannot switch users)."""
        euid = os.geteuid() if euid is None else euid
        pairs = list(tenant_users)
        if euid != 0:
            if run_as is not None or pairs or isolate_tenants:
                raise SpecError(
                    "--run-as/--tenant-user/--isolate-tenants: the control plane runs as uid "
                    f"{euid}, not root, so its tasks can only run as that user"
                )
            return cls()
        names: dict[tuple[int, int], str] = {}
        default = _user(run_as or DEFAULT_RUN_AS, "--run-as")
        names[default] = run_as or DEFAULT_RUN_AS
        per: dict[str, tuple[int, int]] = {}
        for pair in pairs:
            tenant, sep, user = pair.partition("=")
            if not sep or not tenant or not user:
                raise SpecError(f"--tenant-user: TENANT=USER, got {pair!r}")
            if tenant in per:
                raise SpecError(f"--tenant-user: tenant {tenant!r} is mapped twice")
            per[tenant] = _user(user, f"--tenant-user {tenant}")
            names[per[tenant]] = user
        uses = [ident for ident in per.values()]
        shared = sorted(t for t, ident in per.items() if uses.count(ident) > 1)
        if isolate_tenants and shared:
            raise SpecError(f"--isolate-tenants: tenants {', '.join(shared)} share a user: "
                            "give each its own")  # fmt: skip
        return cls(default, per, names, isolate_tenants)

    def refusal(self, tenant: str) -> str | None:
        """Why ``tenant``'s jobs may not run (None: they may): with ``own_users_only``, a
        tenant that has no user of its own."""
        if self.own_users_only and tenant not in self.per_tenant:
            return (f"tenant {tenant!r} has no user of its own (--tenant-user), and this "
                    "control plane isolates tenants from each other (--isolate-tenants)")  # fmt: skip
        return None

    @property
    def isolated(self) -> bool:
        """Whether tasks run under other uids than the control plane's."""
        return self.default is not None

    def __call__(self, tenant: str) -> tuple[int, int] | None:
        return self.per_tenant.get(tenant, self.default)

    def describe(self, tenant: str) -> str:
        ident = self(tenant)
        if ident is None:
            return f"uid {os.geteuid()} (the control plane's own)"
        name = self.names.get(ident)
        return f"{name} (uid {ident[0]})" if name else f"uid {ident[0]}"

    def usable(self, path: str, tenant: str) -> str | None:
        """Why ``tenant``'s tasks could not work in directory ``path`` (None: they can)."""
        ident = self(tenant)
        p = Path(path)
        try:
            st = p.stat()
        except OSError as e:
            return f"{path}: {e.strerror or e}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{path}: not a directory"
        if ident is None:
            if not os.access(p, os.R_OK | os.X_OK):
                return f"{path}: not readable and searchable by the control plane's user"
            return None
        uid, gid = ident
        for ancestor in reversed(p.parents):
            if not _allows(ancestor, uid, gid, stat.S_IXUSR):
                return f"{path}: {self.describe(tenant)} cannot enter {ancestor}"
        if not _allows(p, uid, gid, stat.S_IXUSR | stat.S_IRUSR):
            return f"{path}: {self.describe(tenant)} cannot enter and list it"
        return None


def _allows(path: Path, uid: int, gid: int, owner_bits: int) -> bool:
    """Whether ``uid``/``gid`` has the owner-class bits ``owner_bits`` (read, search) on
    ``path`` by its mode: the owner's bits if it owns it, else the group's if it is in the
    group, else the others'."""
    try:
        st = path.stat()
    except OSError:
        return False
    mode = st.st_mode
    if st.st_uid == uid:
        have = mode
    elif st.st_gid == gid:
        have = mode << 3
    else:
        have = mode << 6
    return have & owner_bits == owner_bits


def inside(path: str, directory: Path) -> bool:
    """Whether ``path`` (resolved, links followed) is ``directory`` or below it."""
    try:
        real = Path(os.path.realpath(path))
        top = Path(os.path.realpath(directory))
    except (OSError, ValueError):
        return False
    return real == top or top in real.parents
