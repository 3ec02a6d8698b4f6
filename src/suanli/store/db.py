"""Opening a store: the engine, its connection settings, and migrating it to the code's schema.

A store is one database: SQLite (the embedded default, one file) or PostgreSQL (by URL,
``postgresql+psycopg://user:password@host:port/dbname``). ``open_store`` creates the engine
and brings the schema to the newest migration, or refuses a database whose schema is newer
than this code knows.

SQLite connections are set up on connect: write-ahead logging (readers never block the one
writer), ``synchronous=FULL`` (a committed transaction survives power loss), foreign keys
enforced, and a busy timeout so that concurrent writers wait rather than fail. Python's
``sqlite3`` module opens transactions lazily and never before DDL or a SELECT; the store
turns that off and emits ``BEGIN`` itself, so that every transaction covers all its
statements (reads included) and migrations are transactional. ``Store.begin()`` starts
``BEGIN IMMEDIATE``: it takes the write lock up front, so a transaction that reads and then
writes never fails half-way because another writer got in between.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

MIGRATIONS = Path(__file__).parent / "migrations"
"""The Alembic environment, shipped inside the package (``script_location``)."""

VERSION_TABLE = "suanli_schema_version"
"""Where Alembic keeps the schema revision; named for the project so that a PostgreSQL
database shared with other applications keeps their revisions apart."""

DEFAULT_SQLITE_PATH = "suanli.db"
"""The SQLite file used when no URL or path is given (relative to the working directory)."""

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for another writer's lock before giving up."""
SQLITE_CACHE_KIB = 65_536
"""Page cache per SQLite connection, in KiB (SQLite's default is 2 MiB)."""

# Any constant: the PostgreSQL advisory lock that serialises concurrent migrations.
_MIGRATION_LOCK_ID = 0x5_1A_41_1D_B0


class StoreError(Exception):
    """The database cannot be used by this code as it is (e.g. its schema is newer)."""


@dataclass(frozen=True, slots=True)
class Store:
    """An open store: an engine whose database is at the code's schema revision.

    The ledger functions accept a ``Store`` (each call is then one transaction of its own)
    or a ``Connection`` inside a transaction the caller owns.
    """

    engine: Engine
    writers: threading.RLock | None = field(default=None, compare=False)
    """SQLite only: held for every write transaction of this process. SQLite has one writer
    at a time; threads of one process (an API's workers, the scheduler loop) queue here,
    in order and at once, instead of in SQLite's busy handler, which sleeps between retries
    (up to 100 ms each) and, under a burst of concurrent writes, serves them slowly. Writers
    in other processes still wait through the busy timeout."""

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back on an exception."""
        with self.writers if self.writers is not None else nullcontext():
            with self.engine.connect() as conn:
                conn = conn.execution_options(suanli_write=True)
                with conn.begin():
                    yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot for the whole block (SQLite's
        write-ahead log gives one; on PostgreSQL the transaction is REPEATABLE READ, since
        its default, READ COMMITTED, takes a new snapshot for each statement)."""
        with self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    def close(self) -> None:
        """Close the pooled connections (the database itself is untouched)."""
        self.engine.dispose()


Target = Store | Connection | Session
"""Where a store call runs: a ``Store`` (the call is one transaction of its own), or a
``Connection`` or ORM ``Session`` inside a transaction the caller owns and commits."""


@contextmanager
def writing(target: Target) -> Iterator[Connection]:
    """A connection to write through: a new write transaction on a ``Store`` (committed at
    the end of the block), else the caller's connection."""
    if isinstance(target, Store):
        with target.begin() as conn:
            yield conn
    elif isinstance(target, Session):
        yield target.connection()
    else:
        yield target


@contextmanager
def reading(target: Target) -> Iterator[Connection]:
    """A connection to read through: a new read transaction on a ``Store``, else the
    caller's connection."""
    if isinstance(target, Store):
        with target.read() as conn:
            yield conn
    elif isinstance(target, Session):
        yield target.connection()
    else:
        yield target


def database_url(target: str | os.PathLike[str] | None) -> str:
    """The SQLAlchemy URL of ``target``: a URL as given (it contains ``://``), else a SQLite
    file path (``None``: ``DEFAULT_SQLITE_PATH``)."""
    if target is None:
        target = DEFAULT_SQLITE_PATH
    text = os.fspath(target)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).absolute()}"


def create_store_engine(target: str | os.PathLike[str] | None) -> Engine:
    """An engine for ``target`` (see ``database_url``) with the store's connection settings;
    the schema is not touched."""
    url = sa.engine.make_url(database_url(target))
    if url.get_backend_name() == "sqlite":
        engine = sa.create_engine(url)
        _configure_sqlite(engine)
        return engine
    if url.get_backend_name() == "postgresql":
        return sa.create_engine(url, pool_pre_ping=True)
    raise StoreError(
        f"unsupported database {url.get_backend_name()!r}: use a SQLite path or a "
        "postgresql+psycopg:// URL"
    )


def _configure_sqlite(engine: Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Autocommit at the driver level: transactions are begun explicitly below.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            # The timeout first: switching to WAL needs a lock another process may hold.
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            # A bill writes hundreds of thousands of rows into unique indexes on long keys:
            # a 64 MiB page cache keeps those indexes in memory while it does.
            cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        finally:
            cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("suanli_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def alembic_config(engine: Engine | None = None) -> Config:
    """The Alembic configuration of the store, built in code (there is no ``alembic.ini``):
    ``script_location`` is the package's ``migrations`` directory. With an engine, its URL
    is set too, so that the result can be handed to any ``alembic.command`` function, e.g.
    ``command.history(alembic_config())`` or ``command.downgrade(alembic_config(e), "base")``.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("version_table", VERSION_TABLE)
    if engine is not None:
        # ConfigParser interpolates '%': a URL-encoded password must survive it.
        cfg.set_main_option(
            "sqlalchemy.url",
            engine.url.render_as_string(hide_password=False).replace("%", "%%"),
        )
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the store ships at least one migration"
    return head


def current_revision(engine: Engine) -> str | None:
    """The database's schema revision, ``None`` for an empty database."""
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return ctx.get_current_revision()


def upgrade(target: str | os.PathLike[str] | Engine | None) -> str:
    """Migrate the database of ``target`` (an engine, URL or SQLite path) to the newest
    revision and return it. Running it again is a no-op. A database at a revision this code
    does not know (written by a newer suanli) is refused with ``StoreError``, untouched.
    """
    engine = target if isinstance(target, Engine) else create_store_engine(target)
    try:
        cfg = alembic_config(engine)
        scripts = ScriptDirectory.from_config(cfg)
        with engine.connect() as conn:
            conn = conn.execution_options(suanli_write=True)
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    # Held until commit: two processes opening a fresh database at once
                    # migrate it one after the other (the second finds it at head).
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK_ID)))
                ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
                current = ctx.get_current_revision()
                if current is not None and current not in {
                    s.revision for s in scripts.walk_revisions()
                }:
                    raise StoreError(
                        f"the database is at schema revision {current!r}, newer than this "
                        f"suanli knows (its newest is {scripts.get_current_head()!r}): "
                        "upgrade suanli to use it"
                    )
                # The migration joins this transaction (see migrations/env.py).
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        head = scripts.get_current_head()
        assert head is not None
        return head
    finally:
        if engine is not target:
            engine.dispose()


def open_store(target: str | os.PathLike[str] | None = None, *, migrate: bool = True) -> Store:
    """Open the store at ``target``: a SQLite file path (created if missing; ``None`` for
    ``DEFAULT_SQLITE_PATH``) or a database URL. With ``migrate`` (the default) the schema is
    brought to the newest revision; without it, a database not at that revision is refused.
    """
    engine = create_store_engine(target)
    try:
        if migrate:
            upgrade(engine)
        else:
            current, head = current_revision(engine), head_revision()
            if current != head:
                raise StoreError(
                    f"the database is at schema revision {current!r}, this suanli needs "
                    f"{head!r}: run the migrations (suanli.store.upgrade)"
                )
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, threading.RLock() if engine.dialect.name == "sqlite" else None)
