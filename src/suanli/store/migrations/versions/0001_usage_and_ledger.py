"""Usage records, their GPUs per model, and the ledger; append-only triggers.

Revision ID: 0001
Revises: (none)

Written by hand; ``suanli/store/schema.py`` describes the same tables (a test checks that
they agree).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_APPEND_ONLY = ("usage_records", "usage_gpus", "ledger_entries")


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "usage_records",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
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
        sa.PrimaryKeyConstraint("id", name="pk_usage_records"),
        sa.UniqueConstraint("key", name="uq_usage_records_key"),
    )
    op.create_index("ix_usage_records_start_ms", "usage_records", ["start_ms"])

    op.create_table(
        "usage_gpus",
        sa.Column("record_key", sa.Text, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("gpu_model", sa.Text, nullable=False),
        sa.Column("milli", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("record_key", "position", name="pk_usage_gpus"),
        sa.ForeignKeyConstraint(
            ["record_key"],
            ["usage_records.key"],
            name="fk_usage_gpus_record_key_usage_records",
        ),
    )
    op.create_index("ix_usage_gpus_gpu_model", "usage_gpus", ["gpu_model"])

    op.create_table(
        "ledger_entries",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("charge_key", sa.Text, nullable=False),
        sa.Column("reverses", sa.Text, nullable=True),
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
        sa.Column("rate", sa.Text, nullable=False),
        sa.Column("amount_micro", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("book_version", sa.Text, nullable=False),
        sa.Column("waste", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ledger_entries"),
        sa.UniqueConstraint("key", name="uq_ledger_entries_key"),
        sa.UniqueConstraint("reverses", name="uq_ledger_entries_reverses"),
        sa.ForeignKeyConstraint(
            ["reverses"],
            ["ledger_entries.key"],
            name="fk_ledger_entries_reverses_ledger_entries",
        ),
        sa.CheckConstraint("kind IN ('charge', 'reversal')", name="ck_ledger_entries_kind"),
        sa.CheckConstraint(
            "(kind = 'charge' AND reverses IS NULL) "
            "OR (kind = 'reversal' AND reverses IS NOT NULL)",
            name="ck_ledger_entries_reversal_has_target",
        ),
    )
    op.create_index("ix_ledger_entries_start_ms", "ledger_entries", ["start_ms"])

    # Append-only, enforced by the database: UPDATE and DELETE (and TRUNCATE) are refused.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION suanli_refuse_change() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
            END
            $$
            """
        )
        for table in _APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION suanli_refuse_change()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION suanli_refuse_change()"
            )
    else:
        for table in _APPEND_ONLY:
            for action in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {action} refused'); END"
                )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _APPEND_ONLY:
            op.execute(f"DROP TRIGGER {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER {table}_no_truncate ON {table}")
        op.execute("DROP FUNCTION suanli_refuse_change()")
    else:
        for table in _APPEND_ONLY:
            for action in ("update", "delete"):
                op.execute(f"DROP TRIGGER {table}_no_{action}")
    op.drop_index("ix_ledger_entries_start_ms", table_name="ledger_entries")
    op.drop_table("ledger_entries")
    op.drop_index("ix_usage_gpus_gpu_model", table_name="usage_gpus")
    op.drop_table("usage_gpus")
    op.drop_index("ix_usage_records_start_ms", table_name="usage_records")
    op.drop_table("usage_records")
