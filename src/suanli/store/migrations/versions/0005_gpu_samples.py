"""GPU utilisation samples: raw readings per attempt and GPU, and per-attempt summaries.

Revision ID: 0005
Revises: 0004

Written by hand; ``suanli/store/schema.py`` describes the same tables (a test checks that
they agree). ``gpu_samples`` holds the sampler's raw readings, indexed for per-attempt reads
and for retention (by time); ``gpu_util_summaries`` what the raw readings of an attempt
leave behind once folded (counts and exact integer sums). Neither is append-only: folding
deletes raw rows and adds to a summary.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "gpu_samples",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("node", sa.Text, nullable=False),
        sa.Column("gpu", sa.Integer, nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("span_ms", sa.BigInteger, nullable=False),
        sa.Column("util_bp", sa.Integer, nullable=False),
        sa.Column("memory_mib", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gpu_samples"),
        sa.ForeignKeyConstraint(
            ["job_id", "attempt"],
            ["attempts.job_id", "attempts.attempt"],
            name="fk_gpu_samples_job_id_attempts",
        ),
        sa.CheckConstraint("util_bp >= 0 AND util_bp <= 10000", name="ck_gpu_samples_util"),
        sa.CheckConstraint("span_ms > 0 AND memory_mib >= 0", name="ck_gpu_samples_figures"),
    )
    op.create_index("ix_gpu_samples_job_id_attempt", "gpu_samples", ["job_id", "attempt"])
    op.create_index("ix_gpu_samples_at_ms", "gpu_samples", ["at_ms"])
    op.create_table(
        "gpu_util_summaries",
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("samples", sa.BigInteger, nullable=False),
        sa.Column("span_ms", sa.BigInteger, nullable=False),
        sa.Column("util_bp_ms", sa.BigInteger, nullable=False),
        sa.Column("memory_max_mib", sa.BigInteger, nullable=False),
        sa.Column("first_ms", sa.BigInteger, nullable=False),
        sa.Column("last_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("job_id", "attempt", name="pk_gpu_util_summaries"),
        sa.ForeignKeyConstraint(
            ["job_id", "attempt"],
            ["attempts.job_id", "attempts.attempt"],
            name="fk_gpu_util_summaries_job_id_attempts",
        ),
    )


def downgrade() -> None:
    op.drop_table("gpu_util_summaries")
    op.drop_index("ix_gpu_samples_at_ms", table_name="gpu_samples")
    op.drop_index("ix_gpu_samples_job_id_attempt", table_name="gpu_samples")
    op.drop_table("gpu_samples")
