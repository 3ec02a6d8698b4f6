"""The tables of the store, as SQLAlchemy Core metadata.

This module describes the schema at the newest migration. It is not how tables are created:
the hand-written Alembic migrations under ``migrations/versions`` are. A test compares the
two, so a change here without a migration (or the other way round) fails the test run.

All tables are append-only: rows are inserted, never updated or deleted. The migrations
add triggers that make the database refuse ``UPDATE`` and ``DELETE`` (and, on
PostgreSQL, ``TRUNCATE``) on them, so the guarantee does not rest on the API alone.

Units (see ``suanli.metering``): times are UTC epoch milliseconds; usage quantities are the
record's integers (milli-GPU, milli-cores, MiB, MB); money is integer micro-units of the
currency (``amount × 10**6``) and quantities in priced units are integer nano-units
(``quantity × 10**9``), so that sums are exact on every backend.
"""

from __future__ import annotations

import sqlalchemy as sa

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names are derived, identical on SQLite and PostgreSQL, and stable across
migrations (the migrations spell the same names)."""

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# A 64-bit surrogate key. SQLite only auto-numbers a column declared exactly
# ``INTEGER PRIMARY KEY`` (an alias of its 64-bit rowid), hence the variant.
RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

ENTRY_KINDS = ("charge", "reversal")

usage_records = sa.Table(
    "usage_records",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # Unique per (job, attempt, interval): recording a record twice inserts it once.
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("start_ms", sa.BigInteger, nullable=False),
    sa.Column("end_ms", sa.BigInteger, nullable=False),
    sa.Column("org", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority_class", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=False),
    sa.Column("cpu_milli", sa.BigInteger, nullable=False),
    sa.Column("memory_mib", sa.BigInteger, nullable=False),
    sa.Column("storage_mb", sa.BigInteger, nullable=False),
    sa.Column("network_mb", sa.BigInteger, nullable=False),
    sa.Column("gpu_util", sa.Float, nullable=True),
    sa.UniqueConstraint("key"),
    sa.Index(None, "start_ms"),
)

usage_gpus = sa.Table(
    "usage_gpus",
    metadata,
    # One row per (GPU model, milli-GPU) pair of a record, in the record's order
    # (``position``), so that GPU time can be summed per model in SQL.
    sa.Column("record_key", sa.Text, sa.ForeignKey("usage_records.key"), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=False),
    sa.Column("milli", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("record_key", "position"),
    sa.Index(None, "gpu_model"),
)

ledger_entries = sa.Table(
    "ledger_entries",
    metadata,
    # Append order; ``entries`` and ``journal`` read rows back in this order.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # The entry's own key: unique, so posting an entry twice inserts it once.
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    # The charge key this entry nets into: for a charge posted from rating, its own key; for
    # a reversal, that of the entry it reverses; for a corrected charge posted by
    # ``reconcile(fix=True)``, the expected charge's key.
    sa.Column("charge_key", sa.Text, nullable=False),
    # The entry a reversal reverses (NULL for charges). Unique, so an entry is reversed at
    # most once (NULLs never collide on SQLite or PostgreSQL).
    sa.Column("reverses", sa.Text, sa.ForeignKey("ledger_entries.key"), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("batch", sa.Text, nullable=False),
    sa.Column("record_key", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("org", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority_class", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=False),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=False),
    sa.Column("band", sa.Text, nullable=False),
    sa.Column("start_ms", sa.BigInteger, nullable=False),
    sa.Column("end_ms", sa.BigInteger, nullable=False),
    sa.Column("raw", sa.BigInteger, nullable=False),
    sa.Column("quantity_nano", sa.BigInteger, nullable=False),
    # The rate as a decimal string: any precision, read back exactly; never summed.
    sa.Column("rate", sa.Text, nullable=False),
    sa.Column("amount_micro", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.Text, nullable=False),
    sa.Column("book_version", sa.Text, nullable=False),
    sa.Column("waste", sa.Boolean, nullable=False),
    sa.UniqueConstraint("key"),
    sa.UniqueConstraint("reverses"),
    sa.CheckConstraint("kind IN ('charge', 'reversal')", name="kind"),
    sa.CheckConstraint(
        "(kind = 'charge' AND reverses IS NULL) OR (kind = 'reversal' AND reverses IS NOT NULL)",
        name="reversal_has_target",
    ),
    sa.Index(None, "start_ms"),
)

BUDGET_KINDS = ("set", "remove")

budgets = sa.Table(
    "budgets",
    metadata,
    # One row per version of a budget (migration 0002), appended by ``suanli.store.budgets``:
    # setting a budget again appends a new version, removing it appends a ``remove`` row (a
    # tombstone whose spec columns are NULL). The set in effect at an instant is, per label,
    # the version with the greatest ``(effective_ms, id)`` not after it, unless a tombstone.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # ``BudgetSpec.label``: the name, else the org, else ``*``. Versions of a label count
    # 1, 2, ... (unique, so two writers cannot append the same version).
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("org", sa.Text, nullable=True),
    sa.Column("period", sa.Text, nullable=True),
    # The limit as a decimal string: exact at any precision; never summed in SQL.
    sa.Column("limit_amount", sa.Text, nullable=True),
    sa.Column("currency", sa.Text, nullable=True),
    # Fractions of the limit, comma-separated, each as Python's shortest round-trip repr.
    sa.Column("thresholds", sa.Text, nullable=True),
    sa.Column("action", sa.Text, nullable=True),
    sa.Column("demote_to", sa.Text, nullable=True),
    # A fixed period's span, UTC POSIX seconds (NULL for calendar periods).
    sa.Column("period_start", sa.BigInteger, nullable=True),
    sa.Column("period_end", sa.BigInteger, nullable=True),
    # When the version takes effect (UTC epoch ms), as given by the caller.
    sa.Column("effective_ms", sa.BigInteger, nullable=False),
    sa.Column("set_by", sa.Text, nullable=True),
    sa.UniqueConstraint("label", "version"),
    sa.CheckConstraint("kind IN ('set', 'remove')", name="kind"),
    sa.CheckConstraint(
        "(kind = 'remove') OR (org IS NOT NULL AND period IS NOT NULL "
        "AND limit_amount IS NOT NULL AND currency IS NOT NULL)",
        name="set_has_spec",
    ),
    sa.Index(None, "effective_ms"),
)

APPEND_ONLY_TABLES = ("usage_records", "usage_gpus", "ledger_entries", "budgets")
"""Tables on which the database refuses UPDATE, DELETE and TRUNCATE."""
