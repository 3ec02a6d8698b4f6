"""A throwaway PostgreSQL server for the tests, and a fresh schema per test on it.

``postgres_server`` (a session fixture) yields the URL of a server that lives as long as the
test session: ``initdb`` into a new temporary directory, then ``pg_ctl start`` listening on a
free loopback port (and a unix socket in that directory), with durability off (``fsync``) since
the data is thrown away. As root, the server runs as the unprivileged ``postgres`` user (or
``nobody``), which owns the directory; PostgreSQL refuses to run as root.

``SUANLI_TEST_PG_URL``, if set, is used instead of starting a server. Without it, and without
the server binaries (``initdb`` and ``pg_ctl`` on ``PATH`` or under
``/usr/lib/postgresql/*/bin``), the tests that need PostgreSQL are skipped, saying so.

``fresh_schema`` gives each test a schema of its own on that server (dropped afterwards), so
tests never see each other's tables and no database needs creating.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

ENV_URL = "SUANLI_TEST_PG_URL"
NOT_FOUND = "PostgreSQL server binaries (initdb, pg_ctl) not found: install the postgresql package"
SUPERUSER = "suanli"
START_TIMEOUT_S = 60


def server_binaries() -> tuple[Path, Path] | None:
    """``(initdb, pg_ctl)`` from ``PATH``, else from the newest ``/usr/lib/postgresql/*/bin``."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(initdb), Path(pg_ctl)

    def version(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.parent.name))

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=version, reverse=True)
    for initdb_path in found:
        pg_ctl_path = initdb_path.with_name("pg_ctl")
        if pg_ctl_path.exists():
            return initdb_path, pg_ctl_path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> dict[str, Any]:
    """``subprocess`` arguments that drop root to an unprivileged user (none if not root)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root, and neither a postgres nor a nobody user exists")


@contextmanager
def postgres(binaries: tuple[Path, Path]) -> Iterator[str]:
    """Start a throwaway server; yield its URL; stop it and delete its files."""
    initdb, pg_ctl = binaries
    as_user = _run_as()
    # A directory of our own under the system temp dir: pytest's tmp dirs live under a
    # root-only (0700) parent that the unprivileged server user could not enter.
    root = Path(tempfile.mkdtemp(prefix="suanli-pg-"))
    data, sock, log = root / "data", root / "sock", root / "server.log"
    sock.mkdir()
    if as_user:
        for p in (root, sock):
            os.chown(p, as_user["user"], as_user["group"])
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}

    def run(*args: str | Path) -> None:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
            **as_user,
        )
        if done.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(map(str, args))} failed ({done.returncode}):\n"
                f"{done.stdout}{done.stderr}{server_log}"
            )

    try:
        run(initdb, "-D", data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync")
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        run(pg_ctl, "-D", data, "-l", log, "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start")
        try:
            yield f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}/postgres"
        finally:
            run(pg_ctl, "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def server_for_tests() -> Iterator[str]:
    """``SUANLI_TEST_PG_URL`` if set, else a throwaway server; skips the test (with
    ``NOT_FOUND``) when there is neither the variable nor the server binaries."""
    given = os.environ.get(ENV_URL)
    if given:
        yield given
        return
    binaries = server_binaries()
    if binaries is None:
        pytest.skip(NOT_FOUND)
    with postgres(binaries) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this test session (see the module docstring)."""
    with server_for_tests() as url:
        yield url


@contextmanager
def fresh_schema(server_url: str) -> Iterator[str]:
    """A new, empty schema on ``server_url``; yields a URL whose connections use it (and only
    it) as their search path; the schema and all in it are dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        url = sa.engine.make_url(server_url).update_query_dict({"options": f"-csearch_path={name}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        admin.dispose()


BACKENDS = ("sqlite", "postgresql")
"""The store backends a test runs on when it parametrises over ``BACKENDS``."""


@contextmanager
def store_location(request: Any, tmp_path: Path, filename: str = "suanli.db") -> Iterator[str]:
    """Where to open an empty store on the backend ``request.param`` names (a test
    parametrised over ``BACKENDS``): a SQLite file under ``tmp_path``, or a fresh schema
    on the session's PostgreSQL server (dropped afterwards)."""
    if request.param == "sqlite":
        yield str(tmp_path / filename)
    else:
        with fresh_schema(request.getfixturevalue("postgres_server")) as url:
            yield url


def location_fixture() -> Any:
    """A fixture (assign it to the name tests ask for) that yields where to open an empty
    store, once on each backend (``store_location``)."""

    @pytest.fixture(params=BACKENDS)
    def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
        with store_location(request, tmp_path) as where:
            yield where

    return location


def store_fixture() -> Any:
    """A fixture (assign it to the name tests ask for) that yields an open store
    (``suanli.store.Store``), once on each backend, closed afterwards."""
    from suanli.store import open_store

    @pytest.fixture(params=BACKENDS)
    def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
        with store_location(request, tmp_path) as where:
            s = open_store(where)
            yield s
            s.close()

    return store
