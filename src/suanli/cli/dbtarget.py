"""How the CLI names a database and its errors in one-line messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import sqlalchemy as sa
import typer

from suanli.cli.errors import fail
from suanli.store import Store, StoreError, open_store

DB_ENV = "SUANLI_DB"
"""The environment variable that names the store when ``--db`` is not given."""

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        envvar=DB_ENV,
        show_envvar=True,
        help="The store (jobs, budgets and ledger): a SQLite file or a PostgreSQL URL.",
    ),
]


def masked(target: str) -> str:
    """A database target for messages: a URL without its password (a path as it is)."""
    if "://" not in target:
        return target
    try:
        return sa.make_url(target).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return target


def first_line(e: BaseException) -> str:
    """The first line of a database error (the driver's own message where there is one)."""
    text = str(getattr(e, "orig", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextmanager
def store_at(db: str | None, *, must_exist: bool) -> Iterator[tuple[Store, str]]:
    """The store named by ``--db`` (or ``SUANLI_DB``) and how to name it in messages. With
    ``must_exist``, a SQLite file that does not exist is an error (reading commands must
    not create an empty store)."""
    if not db:
        fail(f"--db: required: a SQLite file or a database URL (or set {DB_ENV})")
    shown = masked(db)
    if must_exist and "://" not in db and not Path(db).is_file():
        fail(f"--db {shown}: no such file")
    try:
        store = open_store(db)
    except (StoreError, sa.exc.SQLAlchemyError, OSError) as e:
        fail(f"--db {shown}: cannot open the store: {first_line(e)}")
    try:
        yield store, shown
    except (sa.exc.SQLAlchemyError, OSError) as e:
        fail(f"--db {shown}: {first_line(e)}")
    finally:
        store.close()
