"""The Alembic environment of the store.

Migrations run in code (``suanli.store.db.upgrade``), which hands over a connection already
inside a transaction in ``config.attributes["connection"]``: the migration joins that
transaction and the caller commits it. Without one (the ``alembic`` command-line tool with a
``Config`` from ``suanli.store.db.alembic_config``), a connection is opened from the URL.
Offline (SQL script) mode is not supported: the migrations are meant to run against a live
database.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from suanli.store.db import VERSION_TABLE, create_store_engine
from suanli.store.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        # SQLite cannot ALTER most things in place; later migrations use batch mode.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("suanli migrations run online only, against a live database")

given = config.attributes.get("connection")
if given is not None:
    _run(given)
else:
    engine = create_store_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()
