"""Budgets: one append-only row per budget version (set or removed).

Revision ID: 0002
Revises: 0001

Written by hand; ``suanli/store/schema.py`` describes the same table (a test checks that
they agree). Like the ledger, the table refuses ``UPDATE`` and ``DELETE`` (and, on
PostgreSQL, ``TRUNCATE``); on PostgreSQL the triggers call ``suanli_refuse_change()``,
created by ``0001``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_TABLE = "budgets"


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("org", sa.Text, nullable=True),
        sa.Column("period", sa.Text, nullable=True),
        sa.Column("limit_amount", sa.Text, nullable=True),
        sa.Column("currency", sa.Text, nullable=True),
        sa.Column("thresholds", sa.Text, nullable=True),
        sa.Column("action", sa.Text, nullable=True),
        sa.Column("demote_to", sa.Text, nullable=True),
        sa.Column("period_start", sa.BigInteger, nullable=True),
        sa.Column("period_end", sa.BigInteger, nullable=True),
        sa.Column("effective_ms", sa.BigInteger, nullable=False),
        sa.Column("set_by", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_budgets"),
        sa.UniqueConstraint("label", "version", name="uq_budgets_label_version"),
        sa.CheckConstraint("kind IN ('set', 'remove')", name="ck_budgets_kind"),
        sa.CheckConstraint(
            "(kind = 'remove') OR (org IS NOT NULL AND period IS NOT NULL "
            "AND limit_amount IS NOT NULL AND currency IS NOT NULL)",
            name="ck_budgets_set_has_spec",
        ),
    )
    op.create_index("ix_budgets_effective_ms", _TABLE, ["effective_ms"])

    # Append-only, enforced by the database, as for the tables of 0001.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE TRIGGER {_TABLE}_append_only BEFORE UPDATE OR DELETE ON {_TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION suanli_refuse_change()"
        )
        op.execute(
            f"CREATE TRIGGER {_TABLE}_no_truncate BEFORE TRUNCATE ON {_TABLE} "
            "FOR EACH STATEMENT EXECUTE FUNCTION suanli_refuse_change()"
        )
    else:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {_TABLE}_no_{action.lower()} BEFORE {action} ON {_TABLE} "
                f"BEGIN SELECT RAISE(ABORT, '{_TABLE} is append-only: {action} refused'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER {_TABLE}_append_only ON {_TABLE}")
        op.execute(f"DROP TRIGGER {_TABLE}_no_truncate ON {_TABLE}")
    else:
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER {_TABLE}_no_{action}")
    op.drop_index("ix_budgets_effective_ms", table_name=_TABLE)
    op.drop_table(_TABLE)
